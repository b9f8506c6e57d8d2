# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# This is a private module_util of fleetos.layering: its interface may change at any
# time and it is not meant to be used by other collections.

"""The compose engine of fleetos.layering.os_image_compose: its options checked (``check_params``), the cache of
blob verdicts and configurations (``BlobCache``), and ``Composer``, which resolves the base and the layers, checks
them, composes the image and pushes it, counting what it reads and pushes. The module file is its documentation and
its entry point; the composition's pure parts (layer contents, the manifest, the lock) are ``_compose``'s."""

from __future__ import annotations

import json
import os
import pwd
import re

from ansible_collections.fleetos.layering.plugins.module_utils._errors import ImageError, InvalidInputError
from ansible_collections.fleetos.layering.plugins.module_utils._files import replace_file
from ansible_collections.fleetos.layering.plugins.module_utils._params import check_directory
from ansible_collections.fleetos.layering.plugins.module_utils.images import _compose
from ansible_collections.fleetos.layering.plugins.module_utils.images._auth import credentials, ostree_auth_file
from ansible_collections.fleetos.layering.plugins.module_utils.images._image_ref import is_digest, parse_image, shown
from ansible_collections.fleetos.layering.plugins.module_utils.images._labels import VERSION_LABELS, first_label
from ansible_collections.fleetos.layering.plugins.module_utils.images._registry import (
    BlobCopy,
    Registry,
    copy_blob,
    push_blob,
    sha256_digest,
)
from ansible_collections.fleetos.layering.plugins.module_utils.images._skopeo import (
    describe_manifest,
    platform_digest,
    platform_key,
)

LAYER_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")
# Under the home directory of the user the module runs as.
DEFAULT_CACHE = (".cache", "fleetos.layering", "compose")
# A configuration blob larger than this is not kept in the cache.
CONFIG_CACHE_MAX = 1024 * 1024
_NUMBER_RE = re.compile(r"(\d+)")


def _version_key(tag):
    """A tag as a version sorts: ``1.10`` after ``1.9`` (numbers compared as numbers)."""
    return [(1, int(part), "") if part.isdigit() else (0, 0, part) for part in _NUMBER_RE.split(tag)]


# --------------------------------------------------------------------------
# input


def _image(field, text):
    """A plain image option (no rpm-ostree transport: a composed image is pushed, not booted)."""
    return parse_image(text, transport_field="the rollout, not in %s" % field)


def check_params(params):
    """Refuse bad input before any request; -> (base ref, [(layer spec, ref)], output ref, tag or None)."""
    base = _image("base", params["base"])
    output = _image("output", params["output"])
    if output.tag is not None or output.digest is not None:
        raise InvalidInputError("The option output '%s' names a tag or digest: expected a repository, "
                                "registry/repository, and the tag in the option tag." % shown(params["output"], 80))
    tag = params["tag"]
    if tag is not None:
        try:
            tagged = parse_image("%s:%s" % (output.name, tag))
        except InvalidInputError:
            tagged = None
        if tagged is None or tagged.tag != tag or tagged.digest is not None:
            raise InvalidInputError("The option tag '%s' is not a tag: expected up to 128 letters, digits, '_', "
                                    "'.' or '-'." % shown(tag, 60))
    if not params["layers"]:
        raise InvalidInputError("The option layers is empty: expected at least one layer image.")
    seen = set()
    layers = []
    for position, layer in enumerate(params["layers"]):
        name = layer["name"]
        field = "layers[%d]" % position
        if not LAYER_NAME_RE.match(name):
            raise InvalidInputError("The option %s.name '%s' is invalid: expected lowercase letters, digits, '.', "
                                    "'_' and '-', up to 63 characters." % (field, shown(name, 60)))
        if name in seen:
            raise InvalidInputError("The option %s.name '%s' is used by an earlier layer: expected unique names."
                                    % (field, name))
        seen.add(name)
        labels = (layer.get("requires") or {}).get("labels") or {}
        for key, value in labels.items():
            if not isinstance(value, (str, int, float)) or isinstance(value, bool):
                raise InvalidInputError("The option %s.requires.labels.%s must be a string, got %s." % (
                    field, key, type(value).__name__))
        layers.append((layer, _image("%s.image" % field, layer["image"])))
    for name in ("retries", "retry_delay"):
        if params[name] < 0:
            raise InvalidInputError("The option %s %d is negative: expected 0 or more." % (name, params[name]))
    if params["ca_cert_dir"] is not None:
        check_directory("ca_cert_dir", params["ca_cert_dir"])
    if params["layer_cache_dir"] is not None:
        check_directory("layer_cache_dir", params["layer_cache_dir"], missing_ok=True)
    return base, layers, output, tag


# --------------------------------------------------------------------------
# the cache of blob verdicts (entries) and configurations, by digest


class BlobCache:
    """Layer entries and configuration blobs by digest, under ``directory`` (content never changes for a digest)."""

    def __init__(self, directory):
        self.directory = directory

    def _path(self, kind, digest):
        return os.path.join(self.directory, kind, digest.replace(":", "-"))

    def get(self, kind, digest):
        try:
            with open(self._path(kind, digest), "rb") as handle:
                return handle.read()
        except OSError:
            return None

    def put(self, kind, data, digest):
        path = self._path(kind, digest)
        try:
            os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
            replace_file(path, data, prefix=".tmp-")
        except OSError:
            pass  # a cache that cannot be written only costs a read next time


# --------------------------------------------------------------------------
# the composition


class Composer:
    """Resolves, checks, composes and pushes; counts what it reads and pushes."""

    def __init__(self, module, params, base, layers, output, tag):
        self.module = module
        self.params = params
        self.base_ref = base
        self.layer_refs = layers
        self.output = output
        self.tag = tag
        self.clients = {}
        auth_file = params["auth_file"] or ostree_auth_file()
        self.auths = credentials(output.image, auth_file=auth_file) if auth_file else None
        if self.auths is not None:
            module.no_log_values.update(self.auths.secrets())
        cache_dir = params["layer_cache_dir"] or os.path.join(pwd.getpwuid(os.getuid()).pw_dir, *DEFAULT_CACHE)
        self.cache = BlobCache(cache_dir)
        self.counts = dict(mounted=0, uploaded=0, skipped=0, read=0)
        self.base_tags = None  # the tags of the base's repository, listed once, when a layer's base is looked up
        self.tag_manifests = {}

    def client(self, ref):
        if ref.registry not in self.clients:
            self.clients[ref.registry] = Registry(
                ref.registry, auths=self.auths, cert_dir=self.params["ca_cert_dir"],
                validate_certs=self.params["validate_certs"], retries=self.params["retries"],
                retry_delay=self.params["retry_delay"])
        return self.clients[ref.registry]

    def secrets(self):
        found = set()
        for client in self.clients.values():
            found.update(client.secrets)
        return found

    @staticmethod
    def repository(ref):
        return ref.canonical_name.split("/", 1)[1]

    def manifest(self, ref, reference):
        """GET a manifest -> (parsed document, ``describe_manifest`` result)."""
        raw, dummy, digest = self.client(ref).get_manifest(self.repository(ref), reference)
        described = describe_manifest(raw)
        return json.loads(raw.decode("utf-8")), dict(described, digest=digest)

    def config(self, ref, digest):
        data = self.cache.get("blobs", digest)
        if data is None or sha256_digest(data) != digest:
            data = self.client(ref).get_blob(self.repository(ref), digest)
            self.counts["read"] += 1
            if len(data) <= CONFIG_CACHE_MAX:
                self.cache.put("blobs", data, digest)
        try:
            return json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise ImageError("Failed to read the configuration %s of '%s': it is not JSON." % (
                digest, ref.name)) from None

    def entries(self, layer, descriptor):
        """The entries of one layer blob, from the cache or read once from the registry."""
        digest = descriptor["digest"]
        cached = self.cache.get("entries", digest)
        if cached is not None:
            try:
                return json.loads(cached.decode("utf-8"))
            except (UnicodeDecodeError, ValueError):
                pass
        ref = layer["ref"]
        if "zstd" in str(descriptor.get("mediaType")):
            raise ImageError("Failed to list layer '%s' (%s): its blob %s is compressed with zstd, which cannot be "
                             "read here: expected a tar or tar+gzip layer." % (layer["name"], layer["image"], digest))
        reader = self.client(ref).open_blob(self.repository(ref), digest)
        self.counts["read"] += 1
        try:
            found = _compose.tar_entries(reader)
        except ImageError as exc:
            raise ImageError("Failed to list layer '%s' (%s) blob %s: %s." % (
                layer["name"], layer["image"], digest, exc.msg.rstrip("."))) from None
        reader.verify()
        self.cache.put("entries", _compose.canonical_json(found), digest)
        return found

    # ------------------------------------------------------------------

    def resolve(self):
        """Read the manifests the references name (no blob) -> (base, layers, inputs)."""
        base_ref = self.base_ref
        doc, described = self.manifest(base_ref, base_ref.digest or base_ref.tag or "latest")
        base = dict(name=base_ref.name, digest=described["digest"], ref=base_ref, doc=doc, described=described)
        layers = []
        for spec, ref in self.layer_refs:
            doc, described = self.manifest(ref, ref.digest or ref.tag or "latest")
            layers.append(dict(name=spec["name"], image=ref.name, digest=described["digest"], ref=ref, doc=doc,
                               described=described, override=bool(spec.get("override")),
                               requires=spec.get("requires") or {}))
        return base, layers, _compose.inputs_digest(base, layers)

    def existing(self, tag):
        """The output tag's manifest -> (parsed document, digest), or (None, None) when there is none."""
        client = self.client(self.output)
        repository = self.repository(self.output)
        head = client.head_manifest(repository, tag)
        if head is None:
            return None, None
        raw, dummy, digest = client.get_manifest(repository, head["digest"] or tag)
        try:
            return json.loads(raw.decode("utf-8")), digest
        except (UnicodeDecodeError, ValueError):
            return None, digest

    def platforms(self, base):
        """[(platform dict or None, key, base manifest digest)] of the base."""
        if not base["described"]["index"]:
            return [(None, None, base["digest"])]
        found = []
        for entry in base["doc"].get("manifests") or []:
            platform = entry.get("platform") or {}
            key = platform_key(platform)
            if platform.get("os") == "linux" and base["described"]["manifests"].get(key) == entry.get("digest"):
                found.append((platform, key, entry["digest"]))
        if not found:
            raise ImageError("The base %s is an index without a linux image." % base["name"])
        return found

    def layer_for(self, layer, key, architecture):
        """The layer image's manifest and config for a platform (``key`` None: the base's single platform)."""
        described = layer["described"]
        if described["index"]:
            digest = platform_digest(described, key or architecture or "")
            if digest is None:
                raise ImageError("Layer '%s' (%s) offers no image for platform %s: expected an index entry for it "
                                 "(entries: %s)." % (layer["name"], layer["image"], key or architecture,
                                                     ", ".join(sorted(described["manifests"])) or "none"))
            doc, dummy = self.manifest(layer["ref"], digest)
        else:
            doc = layer["doc"]
        config = self.config(layer["ref"], doc["config"]["digest"])
        wanted = (key or "").split("/", 1)[0] or architecture
        if wanted and config.get("architecture") and config["architecture"] != wanted:
            raise ImageError("Layer '%s' (%s) offers no image for platform %s: it is a %s image." % (
                layer["name"], layer["image"], key or wanted, config["architecture"]))
        return doc, config

    def platform_image(self, ref, doc, described, key, architecture):
        """The single-platform manifest of ``doc`` (an image of ``ref``'s repository) -> (document, digest), or
        (None, None) when an index has no entry for the platform."""
        if not described["index"]:
            return doc, described["digest"]
        digest = platform_digest(described, key or architecture or "")
        if digest is None:
            return None, None
        return self.manifest(ref, digest)[0], digest

    def base_candidates(self, preferred):
        """The tags of the base's repository, once per run, those in ``preferred`` first, then the others from
        the highest version down; signatures and attestations (``sha256-...``) left out."""
        if self.base_tags is None:
            self.base_tags = self.client(self.base_ref).list_tags(self.repository(self.base_ref))
        tags = [tag for tag in self.base_tags if not tag.startswith("sha256-")]
        ordered = [tag for tag in preferred if tag in tags]
        return ordered + sorted((tag for tag in tags if tag not in ordered), key=_version_key, reverse=True)

    def tagged(self, tag):
        """The manifest a tag of the base's repository names, read once per run -> (document, described)."""
        if tag not in self.tag_manifests:
            self.tag_manifests[tag] = self.manifest(self.base_ref, tag)
        return self.tag_manifests[tag]

    def built_from(self, part, evidence, base, key, architecture):
        """The image a layer was built FROM, found in the base's repository (manifests and its configuration,
        no layer blob) -> (record ``{name, digest, version, older}``, its configuration, the boundary)."""
        repository = self.base_ref.name
        found = None
        if evidence["kind"] == "base":
            found = (base["digest"], base["manifest"], base["config"])
        elif evidence["kind"] == "annotated":
            digest = evidence["digest"]
            shown_base = "%s@%s" % (evidence["name"], digest) if evidence["name"] else digest
            if not is_digest(digest) or self.client(self.base_ref).head_manifest(
                    self.repository(self.base_ref), digest) is None:
                raise _compose.refusal(part, repository, "is built FROM %s (its annotation %s), which is not an image "
                                       "of the base's repository %s" % (shown_base, _compose.BASE_DIGEST_LABEL,
                                                                        repository))
            doc, described = self.manifest(self.base_ref, digest)
            doc, dummy = self.platform_image(self.base_ref, doc, described, key, architecture)
            if doc is None or not _compose.begins_with(part["manifest"], doc, evidence["at_least"]):
                raise ImageError("Layer '%s' (%s) names the base %s in its annotation %s, but its layers do not begin "
                                 "with that image's layers for %s: expected the layers of the base it was built FROM, "
                                 "then its own." % (part["name"], part["image"], shown_base,
                                                    _compose.BASE_DIGEST_LABEL, key or architecture))
            found = (digest, doc, None)
        else:
            preferred = [_compose.labels_of(part["config"]).get(name) for name in VERSION_LABELS]
            for tag in self.base_candidates([tag for tag in preferred if tag]):
                try:
                    doc, described = self.tagged(tag)
                    doc, dummy = self.platform_image(self.base_ref, doc, described, key, architecture)
                except ImageError:
                    continue  # a tag removed since the listing, or one that names no image: not this layer's base
                if doc is not None and _compose.begins_with(part["manifest"], doc, evidence["at_least"]):
                    found = (described["digest"], doc, None)
                    break
            if found is None:
                raise _compose.refusal(part, repository, "is built on a base that is not a version of the base's "
                                       "repository %s: no image tagged there has its first layers, up to its %s %s"
                                       % (repository, _compose.FINAL_DIFFID_LABEL, evidence["final"]))
        digest, doc, config = found
        if _compose.layer_digests(doc) == _compose.layer_digests(base["manifest"]):
            digest, config = base["digest"], base["config"]
        if config is None:
            config = self.config(self.base_ref, doc["config"]["digest"])
        older = _compose.older(config, base["config"]) if digest != base["digest"] else False
        record = dict(name=repository, digest=digest, version=_compose.version_of(config), older=older)
        return record, config, len(doc.get("layers") or [])

    def compose_platform(self, base, layers, inputs, platform, key, base_digest):
        """Compose one platform: every decision from manifests and configurations first, then the layer blobs."""
        base_doc = self.manifest(base["ref"], base_digest)[0] if key else base["doc"]
        if "config" not in base_doc:
            raise ImageError("The base %s is not an image manifest." % base["name"])
        base_config = self.config(base["ref"], base_doc["config"]["digest"])
        labels = _compose.labels_of(base_config)
        this_base = dict(base, manifest=base_doc, config=base_config)
        parts = []
        for layer in layers:
            doc, config = self.layer_for(layer, key, base_config.get("architecture"))
            part = dict(layer, manifest=doc, config=config, boundary=0, built_from=None)
            _compose.check_requires(part, labels, "%s@%s" % (base["name"], base["digest"]))
            evidence = _compose.layer_base(part, this_base)
            own_labels = _compose.labels_of(config)
            if evidence["kind"] != "scratch":
                part["built_from"], from_config, part["boundary"] = self.built_from(
                    part, evidence, this_base, key, base_config.get("architecture"))
                own_labels = _compose.own_labels(config, from_config)
            if layer.get("version") is None:
                layer["version"] = first_label(own_labels, VERSION_LABELS)
            if layer.get("built_from") is None:
                layer["built_from"] = part["built_from"]
            part["version"] = layer["version"]
            part["own"] = _compose.check_own_layers(part, this_base)
            parts.append(part)
        for part in parts:
            part["entries"] = []
            for descriptor in part["own"]:
                part["entries"] += self.entries(part, descriptor)
            _compose.check_entries(part, part["entries"])
        _compose.check_conflicts(parts, lambda part: part["entries"])
        if base.get("version") is None:
            base["version"] = _compose.version_of(base_config)
        composed = _compose.compose(this_base, parts, inputs, platform)
        composed["key"] = key
        return composed

    def push(self, composed, index_raw, digest, tag):
        out_client = self.client(self.output)
        repository = self.repository(self.output)
        done = set()
        for item in composed:
            for blob in item["layers"]:
                descriptor = blob["descriptor"]
                if descriptor["digest"] in done:
                    continue
                source = parse_image(blob["source"])
                how = copy_blob(out_client, repository, descriptor["digest"], descriptor["size"],
                                self.client(source), self.repository(source))
                self.counts[how] += 1
                if how == BlobCopy.UPLOADED:  # an upload reads the blob from its source first
                    self.counts["read"] += 1
                done.add(descriptor["digest"])
            if item["config_digest"] not in done:
                dummy, how = push_blob(out_client, repository, item["config"])
                self.counts[how] += 1
                done.add(item["config_digest"])
        media_type = _compose.OCI_MANIFEST
        if index_raw is not None:
            for item in composed:
                out_client.put_manifest(repository, item["digest"], item["manifest"], media_type)
            out_client.put_manifest(repository, tag, index_raw, _compose.OCI_INDEX)
        else:
            out_client.put_manifest(repository, tag, composed[0]["manifest"], media_type)
        served = out_client.head_manifest(repository, tag) or {}
        if served.get("digest") not in (digest, None):
            raise ImageError("Failed to push '%s:%s': the registry serves another digest for the tag." % (
                self.output.name, tag))

    def run(self):
        base, layers, inputs = self.resolve()
        tag = self.tag or _compose.default_tag(inputs)
        current, current_digest = self.existing(tag)
        record = _compose.recorded(current)
        if record is not None and record["inputs"] == inputs:
            by_name = dict((item.get("name"), item) for item in record["layers"] if isinstance(item, dict))
            for layer in layers:
                layer["version"] = by_name.get(layer["name"], {}).get("version")
                layer["built_from"] = by_name.get(layer["name"], {}).get("built_from")
            base["version"] = record["base"].get("version")
            manifests = {}
            if current.get("mediaType") == _compose.OCI_INDEX:
                manifests = dict((platform_key(entry.get("platform") or {}), entry["digest"])
                                 for entry in current.get("manifests") or [])
            return self.result(False, base, layers, inputs, tag, current_digest, manifests)
        composed = [self.compose_platform(base, layers, inputs, platform, key, digest)
                    for platform, key, digest in self.platforms(base)]
        index_raw = None
        if base["described"]["index"]:
            annotations = json.loads(composed[0]["manifest"].decode("utf-8"))["annotations"]
            index_raw, digest = _compose.index(composed, annotations)
            manifests = dict((item["key"], item["digest"]) for item in composed)
        else:
            digest, manifests = composed[0]["digest"], {}
        changed = digest != current_digest
        if changed and not self.module.check_mode:
            self.push(composed, index_raw, digest, tag)
        return self.result(changed, base, layers, inputs, tag, digest, manifests)

    def result(self, changed, base, layers, inputs, tag, digest, manifests):
        return dict(
            changed=changed,
            image="%s@%s" % (self.output.name, digest),
            digest=digest,
            output=self.output.name,
            tag=tag,
            manifests=manifests,
            inputs=inputs,
            base=dict(name=base["name"], image="%s@%s" % (base["name"], base["digest"]), digest=base["digest"],
                      version=base.get("version")),
            layers=[dict(name=layer["name"], image=layer["image"], digest=layer["digest"],
                         reference="%s@%s" % (layer["image"], layer["digest"]), version=layer.get("version"),
                         override=layer["override"], built_from=layer.get("built_from")) for layer in layers],
            blobs=dict(self.counts),
        )
