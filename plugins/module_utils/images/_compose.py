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

A layer image is built ``FROM scratch`` or ``FROM`` a version of the base (``FROM base`` +
``COPY``): then only the layers above the image it was built from are its own
(:func:`layer_base` reads where that base ends from the layer's manifest and configuration,
:func:`own_layers` takes the rest), so a layer built on an older base never brings that
base back. A layer may only add files under ``/usr`` and ``/etc`` (:func:`check_entries`);
two layers may not write the same file unless the later one says ``override``
(:func:`check_conflicts`); ``requires.labels`` are compared with the base's labels
(:func:`check_requires`). Every refusal is one sentence naming the layer and the path,
label or base, with what was expected and what was found.

ostree-ext imports the layers of an image up to the one whose diff_id the label
``ostree.final-diffid`` names as the base's ostree content, and every later layer as a
derived layer. Without that label a recent ostree-ext takes no layer as ostree content,
so a composed image always carries it: the base's own value when it has one, else the
base's last diff_id.
"""

from __future__ import annotations

import datetime
import json
import re
import tarfile

from ansible_collections.fleetos.layering.plugins.module_utils.host._commands import RETRY_ARGS
from ansible_collections.fleetos.layering.plugins.module_utils._errors import ImageError
from ansible_collections.fleetos.layering.plugins.module_utils.images._registry import sha256_digest
from ansible_collections.fleetos.layering.plugins.module_utils.images._labels import (
    BOOTABLE_LABELS,
    COMMIT_LABELS,
    FINAL_DIFFID_LABEL,
    VERSION_LABELS,
    first_label,
    is_bootable,
)
from ansible_collections.fleetos.layering.plugins.module_utils.images._skopeo import (
    DOCKER_MANIFEST,
    OCI_INDEX,
    OCI_MANIFEST,
    REGISTRY_ARGS,
)

# The options of fleetos.layering.os_image_compose: its module and its action plugin, which checks
# them as given (module_utils/_params.check_arguments) before the module runs.
ARGUMENT_SPEC = dict(
    base=dict(type="str", required=True),
    layers=dict(type="list", elements="dict", required=True, options=dict(
        name=dict(type="str", required=True),
        image=dict(type="str", required=True),
        requires=dict(type="dict", options=dict(labels=dict(type="dict"))),
        override=dict(type="bool", default=False),
    )),
    output=dict(type="str", required=True),
    tag=dict(type="str"),
    layer_cache_dir=dict(type="path"),
)
ARGUMENT_SPEC.update(REGISTRY_ARGS)
ARGUMENT_SPEC.update(RETRY_ARGS)

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
OPAQUE_WHITEOUT = ".wh..wh..opq"
# What only an OS tree has: a layer that carries one would replace the base's (os-release
# naming another version, another kernel, an ostree repository).
_OS_TREE_RE = re.compile(r"^(usr/lib/os-release|usr/lib/modules/[^/]+/vmlinuz|sysroot/ostree/repo(/.*)?)$")
# Where a layer's base ends, when it has one: named in the refusals of a layer without one.
_BOUNDARY_SOURCES = "neither the label %s nor the annotation %s" % (FINAL_DIFFID_LABEL, BASE_DIGEST_LABEL)
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


def _where(layer):
    return "Layer '%s' (%s)" % (layer["name"], layer["image"])


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
    where = _where(layer)
    tree = next((path for path, kind in entries if kind != "dir" and _OS_TREE_RE.match(path)), None)
    if tree is not None:
        raise ImageError("%s carries an OS tree of its own (it has %s), which would replace the base's: expected "
                         "a layer that only adds files to the base." % (where, _shown_path(tree)))
    # Files and links first: the file under /var/lib/x names the problem better than /var itself.
    for path, kind in sorted(entries, key=lambda entry: entry[1] == "dir"):
        parts = path.split("/") if path else []
        if ".." in parts:
            raise ImageError("%s has the path %s, which leaves the root: expected paths under /usr and /etc."
                             % (where, _shown_path(path)))
        if parts and parts[-1] == OPAQUE_WHITEOUT:
            raise ImageError("%s empties %s with the opaque whiteout %s: expected a layer that only adds files."
                             % (where, _shown_path("/".join(parts[:-1])), _shown_path(path)))
        if parts and parts[-1].startswith(WHITEOUT_PREFIX):
            target = "/".join(parts[:-1] + [parts[-1][len(WHITEOUT_PREFIX):]])
            raise ImageError("%s removes %s with the whiteout %s: expected a layer that only adds files."
                             % (where, _shown_path(target), _shown_path(path)))
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
# where a layer image's base ends


def layer_digests(manifest):
    """The digests of a manifest's layers, in order."""
    return [entry.get("digest") for entry in (manifest or {}).get("layers") or []]


def layer_base(layer, base):
    """Where the layers of a layer image built ``FROM`` an image end, from manifests and configurations only.

    ``layer`` and ``base`` carry ``manifest`` and ``config`` (this platform's); ``base`` is
    the composed base, ``{name, manifest, config}``. -> one of

    - ``{"kind": "scratch"}``: nothing says the image was built on another (``FROM scratch``);
    - ``{"kind": "base", "boundary": N}``: its first N layers are the composed base's, all of them;
    - ``{"kind": "annotated", "digest": D, "name": NAME or None, "at_least": K}``: the
      manifest annotations a build tool writes (``org.opencontainers.image.base.digest``,
      ``.base.name``) name the image it was built from, to be found in the base's repository;
    - ``{"kind": "final-diffid", "at_least": K, "final": DIFF_ID}``: the ``ostree.final-diffid``
      label it inherits from a bootable base names the last layer of that base's ostree
      content (the K-th): the image it was built from is a version of the base whose layers
      begin the layer image's, at least K of them.

    Raises ImageError, naming the layer, for an image that carries a bootable OS image's labels
    or one of the base's layers but no base boundary, and for a ``ostree.final-diffid`` that
    names none of its layers.
    """
    manifest, config = layer["manifest"], layer["config"]
    labels = labels_of(config)
    diff_ids = ((config or {}).get("rootfs") or {}).get("diff_ids") or []
    final = labels.get(FINAL_DIFFID_LABEL)
    at_least = 0
    if final:
        if final not in diff_ids:
            raise ImageError("%s has the label %s %s, which names none of its layers: expected the diff_id of the "
                             "last layer of the base it was built FROM." % (_where(layer), FINAL_DIFFID_LABEL, final))
        at_least = diff_ids.index(final) + 1
    own, base_blobs = layer_digests(manifest), layer_digests(base["manifest"])
    annotations = manifest.get("annotations") or {}
    if annotations.get(BASE_DIGEST_LABEL):
        return {"kind": "annotated", "digest": annotations[BASE_DIGEST_LABEL],
                "name": annotations.get(BASE_NAME_LABEL), "at_least": at_least}
    if base_blobs and len(own) >= len(base_blobs) >= at_least and own[:len(base_blobs)] == base_blobs:
        return {"kind": "base", "boundary": len(base_blobs)}
    if final:
        return {"kind": "final-diffid", "at_least": at_least, "final": final}
    marks = [name for name, dummy in BOOTABLE_LABELS if labels.get(name)] + [
        name for name in COMMIT_LABELS if labels.get(name)]
    if is_bootable(labels) or marks:
        raise _no_boundary(layer, base, "carries the labels of a bootable OS image (%s)" % ", ".join(marks))
    shared = [digest for digest in own if digest in base_blobs]
    if shared:
        raise _no_boundary(layer, base, "contains the base's layer %s" % shared[0])
    return {"kind": "scratch"}


def _no_boundary(layer, base, what):
    return refusal(layer, base["name"], "%s and no base boundary (%s)" % (what, _BOUNDARY_SOURCES))


def refusal(layer, base_name, cause):
    """The refusal of a layer that is neither built FROM scratch nor FROM a version of the base ``base_name``:
    ``Layer 'NAME' (IMAGE) CAUSE: expected ...``."""
    return ImageError("%s %s: expected a layer built FROM scratch, or FROM a version of the base %s." % (
        _where(layer), cause, base_name))


def begins_with(layer_manifest, manifest, at_least=0):
    """True when the layers of ``manifest`` (the image a layer was built from), at least ``at_least`` of them
    and at least one, are the first layers of the layer image (:func:`check_own_layers` then asks for more)."""
    own, first = layer_digests(layer_manifest), layer_digests(manifest)
    return max(at_least, 1) <= len(first) <= len(own) and own[:len(first)] == first


def own_labels(config, built_from_config):
    """The labels of a layer image that are its own: those its base does not carry with the same value."""
    inherited = labels_of(built_from_config)
    return {key: value for key, value in labels_of(config).items() if inherited.get(key) != value}


def check_own_layers(layer, base):
    """Raise ImageError when a layer has no layer of its own above its boundary (``layer["boundary"]``, 0 for
    ``FROM scratch``), or when one of its own layers is one of the composed base's."""
    own = (layer["manifest"].get("layers") or [])[layer.get("boundary") or 0:]
    built_from = layer.get("built_from") or {}
    if not own:
        if built_from:
            raise ImageError("%s adds no layer to the base it was built FROM (%s@%s): expected at least one layer "
                             "of its own." % (_where(layer), built_from.get("name"), built_from.get("digest")))
        raise ImageError("The image of layer '%s' (%s) has no layers: expected at least one." % (
            layer["name"], layer["image"]))
    base_blobs = set(layer_digests(base["manifest"]))
    shared = [entry["digest"] for entry in own if entry["digest"] in base_blobs]
    if shared and not built_from:
        raise _no_boundary(layer, base, "contains the base's layer %s" % shared[0])
    if shared:
        raise ImageError("%s contains the base's layer %s above the base it was built FROM (%s@%s): expected layers "
                         "of its own only." % (_where(layer), shared[0], built_from.get("name"),
                                               built_from.get("digest")))
    return own


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


def older(config, than):
    """True when the configuration ``config`` was created before ``than`` (both times known), else False."""
    mine, theirs = _parse_time((config or {}).get("created")), _parse_time((than or {}).get("created"))
    return bool(mine and theirs and mine < theirs)


def newest_created(configs):
    """The ``created`` text of the newest configuration (the first one on a tie); None when none has one."""
    best = None
    for config in configs:
        parsed = _parse_time((config or {}).get("created"))
        if parsed is not None and (best is None or parsed > best[0]):
            best = (parsed, config["created"])
    return best[1] if best else None


def layers_label(layers):
    """The value of ``fleetos.io/layers``: canonical JSON of name, image, digest and version of each layer, and
    ``built_from`` (the base it was built from) for a layer built ``FROM`` a version of the base."""
    records = []
    for layer in layers:
        record = {"name": layer["name"], "image": layer["image"], "digest": layer["digest"],
                  "version": layer.get("version")}
        if layer.get("built_from"):
            record["built_from"] = dict(layer["built_from"])
        records.append(record)
    return canonical_json(records).decode("utf-8")


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


def _history(config, layer_count, comment, skip=0):
    """An image's history, padded so that it has one non-empty entry per layer (ostree-ext pairs them).

    ``skip``: the layers of the base it was built from, whose entries (up to the ``skip``-th
    non-empty one) are left out.
    """
    history = [dict(entry) for entry in (config.get("history") or []) if isinstance(entry, dict)]
    if skip:
        seen = 0
        for position, entry in enumerate(history):
            seen += 0 if entry.get("empty_layer") else 1
            if seen == skip:
                history = history[position + 1:]
                break
        else:
            history = []
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
    value the provenance records); layers also carry ``version``, ``override``, ``requires``
    and, for a layer built ``FROM`` a version of the base, ``boundary`` (how many of its
    layers are that base's, left out) and ``built_from``.
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
    for layer in layers:
        what = "layer '%s' (%s)" % (layer["name"], layer["image"])
        _check_manifest(layer["manifest"], "The image of layer '%s' (%s)" % (layer["name"], layer["image"]))
        own = check_own_layers(layer, base)
        boundary = layer.get("boundary") or 0
        diff_ids += _diff_ids(layer["config"], what, layer["manifest"])[boundary:]
        history += _history(layer["config"], len(own), "fleetos.layering: layer %s %s" % (
            layer["name"], layer.get("version") or layer["digest"]), skip=boundary)
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
