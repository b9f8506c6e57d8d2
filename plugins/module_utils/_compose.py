# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# This is a private module_util of fleetos.layering: its interface may change at any
# time and it is not meant to be used by other collections.

"""Composing an OS image from a base image and layer images: the rules and the output, without a network.

A layered image is the base's layers followed by each layer image's own layers, in
order; its configuration concatenates ``rootfs.diff_ids`` and ``history``, keeps the
base's labels and adds provenance (:data:`PROVENANCE_LABELS`). Everything is built as
canonical JSON (sorted keys, no spaces, UTF-8), and ``created`` is the newest input's,
so the same inputs give byte-identical configs and manifests, hence the same digest, on
any machine.

A layer may only add files under ``/usr`` and ``/etc`` (:func:`check_entries`); two
layers may not write the same file unless the later one says ``override``
(:func:`check_conflicts`); ``requires.labels`` are compared with the base's labels
(:func:`check_requires`). Every refusal is one sentence naming the layer and the path or
label, with what was expected and what was found.

ostree-ext imports the layers of an image up to the one whose diff_id the label
``ostree.final-diffid`` names as the base's ostree content, and every later layer as a
derived layer. Without that label a recent ostree-ext takes no layer as ostree content,
so a composed image always carries it: the base's own value when it has one, else the
base's last diff_id.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import re
import tarfile

from ansible_collections.fleetos.layering.plugins.module_utils._errors import ImageError
from ansible_collections.fleetos.layering.plugins.module_utils._labels import (
    FINAL_DIFFID_LABEL,
    VERSION_LABELS,
    first_label,
)
from ansible_collections.fleetos.layering.plugins.module_utils._skopeo import DOCKER_MANIFEST, OCI_INDEX, OCI_MANIFEST

OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar"
# Docker layer media types -> their OCI names (the digest does not change with the media type).
LAYER_MEDIA_TYPES = {
    "application/vnd.docker.image.rootfs.diff.tar": OCI_LAYER,
    "application/vnd.docker.image.rootfs.diff.tar.gzip": OCI_LAYER + "+gzip",
    "application/vnd.docker.image.rootfs.diff.tar.zstd": OCI_LAYER + "+zstd",
    "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip": "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip",
}

BASE_NAME_LABEL = "org.opencontainers.image.base.name"
BASE_DIGEST_LABEL = "org.opencontainers.image.base.digest"
LAYERS_LABEL = "fleetos.io/layers"
INPUTS_LABEL = "fleetos.io/inputs"
BASE_VERSION_ANNOTATION = "fleetos.io/base-version"
PROVENANCE_LABELS = (BASE_NAME_LABEL, BASE_DIGEST_LABEL, LAYERS_LABEL, INPUTS_LABEL)
# The version of the composition rules: part of the inputs, so that a change of the
# rules gives new digests instead of silently different ones.
COMPOSE_FORMAT = 1
TAG_PREFIX = "fleetos-"

# Where a layer may write, and the top-level directories named in a refusal of their own.
ALLOWED_TOPS = ("usr", "etc")
HOST_STATE_TOPS = {
    "var": "the host's own state, which an image update never replaces",
    "boot": "the bootloader's, which ostree manages",
    "sysroot": "the physical root, which ostree manages",
}
WHITEOUT_PREFIX = ".wh."
_KINDS = {
    tarfile.REGTYPE: "file", tarfile.AREGTYPE: "file", tarfile.CONTTYPE: "file",
    tarfile.DIRTYPE: "dir", tarfile.SYMTYPE: "symlink", tarfile.LNKTYPE: "hardlink",
    tarfile.CHRTYPE: "chardev", tarfile.BLKTYPE: "blockdev", tarfile.FIFOTYPE: "fifo",
}
_SPECIAL = {"chardev": "a character device node", "blockdev": "a block device node", "fifo": "a FIFO"}
_FRACTION_RE = re.compile(r"\.(\d+)")


def canonical_json(value):
    """``value`` as canonical JSON bytes: sorted keys, no whitespace, UTF-8 (not ASCII-escaped)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def sha256_digest(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


# --------------------------------------------------------------------------
# layer contents


def normalize_path(name):
    """A tar member name as an absolute-free path: ``./usr/bin/x`` and ``/usr/bin/x`` -> ``usr/bin/x``; ``.`` -> ``""``."""
    text = name.strip()
    while text.startswith("./"):
        text = text[2:]
    text = text.strip("/")
    return "" if text == "." else text


def tar_entries(fileobj):
    """The entries of a layer tar stream (plain or gzip) -> ``[[path, kind], ...]`` in tar order.

    ``kind`` is ``file``, ``dir``, ``symlink``, ``hardlink``, ``chardev``, ``blockdev`` or
    ``fifo``; paths are normalized (:func:`normalize_path`). The stream is read once, front to end.
    """
    entries = []
    try:
        with tarfile.open(fileobj=fileobj, mode="r|*") as tar:
            for member in tar:
                entries.append([normalize_path(member.name), _KINDS.get(member.type, "file")])
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise ImageError("the layer is not a readable tar archive (%s)" % exc) from None
    return entries


def _shown_path(path):
    return "/" + path


def ostree_path(path):
    """The path ostree stores a file at: ``etc/x`` is kept as ``usr/etc/x``."""
    if path == "etc" or path.startswith("etc/"):
        return "usr/" + path
    return path


def check_entries(layer, entries):
    """Raise ImageError for the first entry of a layer that breaks a rule.

    ``layer`` is ``{name, image, ...}``; ``entries`` are ``[path, kind]`` (:func:`tar_entries`);
    a file or link is named before a directory.
    """
    where = "Layer '%s' (%s)" % (layer["name"], layer["image"])
    # Files and links first: the file under /var/lib/x names the problem better than /var itself.
    for path, kind in sorted(entries, key=lambda entry: entry[1] == "dir"):
        parts = path.split("/") if path else []
        if ".." in parts:
            raise ImageError("%s has the path %s, which leaves the root: expected paths under /usr and /etc."
                             % (where, _shown_path(path)))
        if parts and parts[-1].startswith(WHITEOUT_PREFIX):
            target = "/".join(parts[:-1] + [parts[-1][len(WHITEOUT_PREFIX):]])
            raise ImageError("%s removes %s with the whiteout %s: expected a layer built FROM scratch that only "
                             "adds files." % (where, _shown_path(target), _shown_path(path)))
        if kind in _SPECIAL:
            raise ImageError("%s has %s at %s: expected regular files, directories and links only."
                             % (where, _SPECIAL[kind], _shown_path(path)))
        if not parts:
            continue
        top = parts[0]
        if top in HOST_STATE_TOPS:
            raise ImageError("%s writes %s under /%s (%s): expected paths under /usr and /etc only."
                             % (where, _shown_path(path), top, HOST_STATE_TOPS[top]))
        if top not in ALLOWED_TOPS:
            raise ImageError("%s writes %s, outside /usr and /etc: expected paths under /usr and /etc only."
                             % (where, _shown_path(path)))


def check_conflicts(layers, entries_of):
    """Raise ImageError when two layers write the same path and the later one does not say ``override``.

    ``entries_of(layer)`` -> the layer's entries, all its blobs in order. Directories may be
    shared; ``/etc/x`` and ``/usr/etc/x`` are the same file (ostree keeps ``/etc`` in ``/usr/etc``).
    """
    owners = {}  # ostree path -> (layer, kind, path as written)
    for layer in layers:
        mine = {}
        for path, kind in entries_of(layer):
            if path:
                mine[ostree_path(path)] = (kind, path)
        for key, (kind, path) in sorted(mine.items()):
            previous = owners.get(key)
            if previous is not None and not (kind == "dir" and previous[1] == "dir") and not layer.get("override"):
                raise ImageError(
                    "Layers '%s' and '%s' both write %s: expected each file in one layer only, or override: true on "
                    "'%s' to let it win." % (previous[0]["name"], layer["name"], _shown_path(path), layer["name"]))
            owners[key] = (layer, kind, path)


def check_requires(layer, base_labels, base_image):
    """Raise ImageError when a label the layer requires of the base is missing or different."""
    for label, expected in sorted(((layer.get("requires") or {}).get("labels") or {}).items()):
        actual = (base_labels or {}).get(label)
        if actual != str(expected):
            found = "has no label '%s'" % label if actual is None else "has '%s'" % actual
            raise ImageError("Layer '%s' requires the base label '%s' to be '%s', but the base %s %s." % (
                layer["name"], label, expected, base_image, found))


# --------------------------------------------------------------------------
# the output


def inputs_document(base, layers):
    """The canonical inputs of a composition: base and layers by repository and resolved digest."""
    return {
        "compose": COMPOSE_FORMAT,
        "base": {"name": base["name"], "digest": base["digest"]},
        "layers": [{"name": layer["name"], "image": layer["image"], "digest": layer["digest"],
                    "override": bool(layer.get("override")),
                    "requires": {"labels": {str(k): str(v) for k, v in
                                            ((layer.get("requires") or {}).get("labels") or {}).items()}}}
                   for layer in layers],
    }


def inputs_digest(base, layers):
    """``sha256:`` of the canonical inputs (:func:`inputs_document`): the value of ``fleetos.io/inputs``."""
    return sha256_digest(canonical_json(inputs_document(base, layers)))


def default_tag(inputs):
    """The output tag for these inputs when none is given: ``fleetos-`` and 32 hex digits of the inputs digest."""
    return TAG_PREFIX + inputs.split(":", 1)[-1][:32]


def labels_of(config):
    return ((config or {}).get("config") or {}).get("Labels") or {}


def version_of(config):
    """The version of an image from its configuration: ``version``, else ``org.opencontainers.image.version``."""
    return first_label(labels_of(config), VERSION_LABELS)


def _parse_time(text):
    if not isinstance(text, str) or not text:
        return None
    value = text.strip().replace("Z", "+00:00").replace("z", "+00:00")
    value = _FRACTION_RE.sub(lambda m: "." + (m.group(1) + "000000")[:6], value, count=1)
    try:
        parsed = datetime.datetime.fromisoformat(value)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=datetime.timezone.utc)
    return parsed


def newest_created(configs):
    """The ``created`` text of the newest configuration (the first one on a tie); None when none has one."""
    best = None
    for config in configs:
        parsed = _parse_time((config or {}).get("created"))
        if parsed is not None and (best is None or parsed > best[0]):
            best = (parsed, config["created"])
    return best[1] if best else None


def layers_label(layers):
    """The value of ``fleetos.io/layers``: canonical JSON of name, image, digest and version of each layer."""
    return canonical_json([{"name": layer["name"], "image": layer["image"], "digest": layer["digest"],
                            "version": layer.get("version")} for layer in layers]).decode("utf-8")


def provenance(base, layers, inputs):
    """The provenance labels and manifest annotations of a composed image."""
    return {
        BASE_NAME_LABEL: base["name"],
        BASE_DIGEST_LABEL: base["digest"],
        LAYERS_LABEL: layers_label(layers),
        INPUTS_LABEL: inputs,
    }


def _diff_ids(config, what, manifest):
    diff_ids = ((config or {}).get("rootfs") or {}).get("diff_ids")
    if not isinstance(diff_ids, list):
        raise ImageError("The configuration of %s has no rootfs.diff_ids list." % what)
    count = len(manifest.get("layers") or [])
    if len(diff_ids) != count:
        raise ImageError("The configuration of %s lists %d diff_ids for %d layers: expected one per layer." % (
            what, len(diff_ids), count))
    return list(diff_ids)


def _history(config, layer_count, comment):
    """An image's history, padded so that it has one non-empty entry per layer (ostree-ext pairs them)."""
    history = [dict(entry) for entry in (config.get("history") or []) if isinstance(entry, dict)]
    filled = sum(1 for entry in history if not entry.get("empty_layer"))
    for dummy in range(max(0, layer_count - filled)):
        entry = {"created_by": comment}
        if config.get("created"):
            entry["created"] = config["created"]
        history.append(entry)
    return history


def _descriptor(layer):
    out = {"mediaType": LAYER_MEDIA_TYPES.get(layer.get("mediaType"), layer.get("mediaType") or OCI_LAYER + "+gzip"),
           "digest": layer["digest"], "size": int(layer["size"])}
    if layer.get("annotations"):
        out["annotations"] = dict(layer["annotations"])
    return out


def _check_manifest(manifest, what):
    if not isinstance(manifest, dict) or manifest.get("mediaType", OCI_MANIFEST) not in (OCI_MANIFEST, DOCKER_MANIFEST) \
            or not isinstance(manifest.get("layers"), list) or not isinstance(manifest.get("config"), dict):
        raise ImageError("%s is not a single-platform image manifest." % what)


def compose(base, layers, inputs, platform=None):
    """The composed configuration and manifest for one platform -> dict.

    ``base`` and each of ``layers`` are ``{name, image (layers), digest, manifest, config}``
    (the manifest and config of this platform, as parsed JSON; ``digest`` as resolved, the
    value the provenance records); layers also carry ``version``, ``override``, ``requires``.
    -> ``{config: bytes, config_digest, manifest: bytes, digest, layers: [{descriptor,
    source}], platform}`` where ``source`` is the repository a blob comes from (``None``
    for the base's, which come from ``base["name"]``).
    """
    base_what = "base %s" % base["name"]
    _check_manifest(base["manifest"], "The base %s" % base["name"])
    base_config = base["config"]
    diff_ids = _diff_ids(base_config, base_what, base["manifest"])
    if not diff_ids:
        raise ImageError("The base %s has no layers." % base["name"])
    history = _history(base_config, len(base["manifest"]["layers"]), "fleetos.layering: base %s" % base["name"])
    blobs = [dict(descriptor=_descriptor(layer), source=base["name"]) for layer in base["manifest"]["layers"]]
    base_blobs = set(layer["digest"] for layer in base["manifest"]["layers"])
    for layer in layers:
        what = "layer '%s' (%s)" % (layer["name"], layer["image"])
        _check_manifest(layer["manifest"], "The image of layer '%s' (%s)" % (layer["name"], layer["image"]))
        own = layer["manifest"]["layers"]
        if not own:
            raise ImageError("The image of layer '%s' (%s) has no layers: expected at least one." % (
                layer["name"], layer["image"]))
        shared = [entry["digest"] for entry in own if entry["digest"] in base_blobs]
        if shared:
            raise ImageError("Layer '%s' (%s) contains the base's layer %s: expected an image built FROM scratch."
                             % (layer["name"], layer["image"], shared[0]))
        diff_ids += _diff_ids(layer["config"], what, layer["manifest"])
        history += _history(layer["config"], len(own), "fleetos.layering: layer %s %s" % (
            layer["name"], layer.get("version") or layer["digest"]))
        blobs += [dict(descriptor=_descriptor(entry), source=layer["image"]) for entry in own]

    labels = dict(labels_of(base_config))
    if not labels.get(FINAL_DIFFID_LABEL):
        labels[FINAL_DIFFID_LABEL] = diff_ids[len(base["manifest"]["layers"]) - 1]
    labels.update(provenance(base, layers, inputs))
    config = dict(base_config)
    config["config"] = dict(base_config.get("config") or {}, Labels=labels)
    config["rootfs"] = {"type": "layers", "diff_ids": diff_ids}
    config["history"] = history
    created = newest_created([base_config] + [layer["config"] for layer in layers])
    if created:
        config["created"] = created
    config_bytes = canonical_json(config)
    annotations = provenance(base, layers, inputs)
    base_version = version_of(base_config)
    if base_version:
        annotations[BASE_VERSION_ANNOTATION] = base_version
    manifest = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": OCI_CONFIG, "digest": sha256_digest(config_bytes), "size": len(config_bytes)},
        "layers": [blob["descriptor"] for blob in blobs],
        "annotations": annotations,
    }
    manifest_bytes = canonical_json(manifest)
    return dict(config=config_bytes, config_digest=sha256_digest(config_bytes), manifest=manifest_bytes,
                digest=sha256_digest(manifest_bytes), layers=blobs, platform=platform)


def index(composed, annotations):
    """An OCI index of per-platform compositions (:func:`compose` results with a ``platform``) -> (bytes, digest)."""
    document = {
        "schemaVersion": 2,
        "mediaType": OCI_INDEX,
        "manifests": [{"mediaType": OCI_MANIFEST, "digest": item["digest"], "size": len(item["manifest"]),
                       "platform": dict(item["platform"])} for item in composed],
        "annotations": dict(annotations),
    }
    raw = canonical_json(document)
    return raw, sha256_digest(raw)


def recorded(manifest):
    """What a composed image's manifest (or index) records -> ``{inputs, base, layers}``, or None when it records nothing.

    Read from the manifest annotations alone, so that a composition already done is
    recognised without reading a blob.
    """
    annotations = (manifest or {}).get("annotations") or {}
    inputs = annotations.get(INPUTS_LABEL)
    if not inputs:
        return None
    try:
        layers = json.loads(annotations.get(LAYERS_LABEL) or "[]")
    except ValueError:
        layers = []
    return dict(inputs=inputs, layers=layers if isinstance(layers, list) else [],
                base=dict(name=annotations.get(BASE_NAME_LABEL), digest=annotations.get(BASE_DIGEST_LABEL),
                          version=annotations.get(BASE_VERSION_ANNOTATION)))
