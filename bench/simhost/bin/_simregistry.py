# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The simulated fleet's images, as the simulated hosts' rpm-ostree and skopeo read them.

No registry and no blobs: an image is its manifest (the exact bytes, whose sha256 is its digest),
its OCI config and a record (commit, version, layer sizes) in a directory the fleet shares read-only
with every host (/run/simfleet/registry on a host; SIMFLEET_REGISTRY overrides it, for tests).
Standard library only: it runs on the hosts with the machine's interpreter.
"""

import hashlib
import json
import os

REGISTRY = os.environ.get("SIMFLEET_REGISTRY", "/run/simfleet/registry")


class NotFound(Exception):
    pass


def split_name(image):
    """(repository name, tag or None, digest or None) of 'host[:port]/path[:tag][@sha256:...]'."""
    digest = None
    if "@" in image:
        image, digest = image.split("@", 1)
    tag = None
    last = image.rsplit("/", 1)[-1]
    if ":" in last:
        image, tag = image.rsplit(":", 1)
    return image, tag, digest


def lookup(image, registry=None):
    """The record of an image reference (a digest wins over a tag) -> dict with manifest bytes."""
    registry = registry or REGISTRY
    name, tag, digest = split_name(image)
    if digest is None:
        tags = _read_json(os.path.join(registry, "tags.json"), {})
        digest = tags.get("%s:%s" % (name, tag or "latest"))
        if digest is None:
            raise NotFound("reading manifest %s in %s: manifest unknown" % (tag or "latest", name))
    hexd = digest.split(":", 1)[-1]
    record = _read_json(os.path.join(registry, "images", hexd + ".json"), None)
    if record is None:
        raise NotFound("reading manifest %s in %s: manifest unknown" % (digest, name))
    with open(os.path.join(registry, "manifests", hexd), "rb") as handle:
        record["manifest_bytes"] = handle.read()
    record["name"] = name
    return record


def _read_json(path, default):
    try:
        with open(path) as handle:
            return json.load(handle)
    except FileNotFoundError:
        return default


def build(registry, name, tag, version, layers, created="2026-12-01T00:00:00Z", labels=None):
    """Write an image to the registry directory (made by the bench) -> its record.

    layers: [(digest, size)], the base's first; the commit is derived from the layers, so the same
    layers give the same commit, as a deterministic ostree commit of the same tree does."""
    commit = hashlib.sha256(("\n".join(d for d, _ in layers) + "\n" + version).encode()).hexdigest()
    config = {
        "architecture": "amd64", "os": "linux", "created": created,
        "config": {"Labels": dict({"ostree.bootable": "true", "containers.bootc": "1", "ostree.commit": commit,
                                   "version": version, "org.opencontainers.image.version": version},
                                  **(labels or {}))},
        "rootfs": {"type": "layers", "diff_ids": [d for d, _ in layers]},
    }
    config_bytes = json.dumps(config, sort_keys=True).encode()
    manifest = {
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                   "digest": "sha256:" + hashlib.sha256(config_bytes).hexdigest(), "size": len(config_bytes)},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": d, "size": s}
                   for d, s in layers],
    }
    manifest_bytes = json.dumps(manifest, indent=2).encode()
    digest = "sha256:" + hashlib.sha256(manifest_bytes).hexdigest()
    record = {"digest": digest, "tag": tag, "commit": commit, "version": version, "created": created,
              "config": config, "layers": [{"digest": d, "size": s} for d, s in layers]}
    for sub in ("images", "manifests"):
        os.makedirs(os.path.join(registry, sub), exist_ok=True)
    with open(os.path.join(registry, "manifests", digest[7:]), "wb") as handle:
        handle.write(manifest_bytes)
    with open(os.path.join(registry, "images", digest[7:] + ".json"), "w") as handle:
        json.dump(record, handle)
    tags_path = os.path.join(registry, "tags.json")
    tags = _read_json(tags_path, {})
    tags["%s:%s" % (name, tag)] = digest
    with open(tags_path + ".tmp", "w") as handle:
        json.dump(tags, handle)
    os.replace(tags_path + ".tmp", tags_path)
    return record
