# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# This is a private plugin_util of fleetos.layering: its interface may change at any
# time and it is not meant to be used by other collections.

"""LayeredImage objects and their lock: load and validate, plan the compositions, write and compare the lock.

Every decision of ``playbooks/compose.yml`` is here: which references to resolve, what
each ``os_image_compose`` task gets (digest-pinned inputs), the lock's text (canonical,
so that the same inputs give a byte-identical file) and what moved since the previous
lock. The playbook only runs the modules and writes the files.
"""

from __future__ import annotations

import json
import os
import re

import yaml

from ansible_collections.fleetos.layering.plugins.module_utils.images import _auth, _image_ref
from ansible_collections.fleetos.layering.plugins.module_utils.images._compose import (
    INPUTS_LABEL as INPUTS_ANNOTATION,
    LAYERS_LABEL,
)
from ansible_collections.fleetos.layering.plugins.module_utils._errors import FleetosError, InvalidInputError
from ansible_collections.fleetos.layering.plugins.plugin_utils.images._machine_image import (
    API_VERSION,
    check_header,
    only_keys,
)
from ansible_collections.fleetos.layering.plugins.plugin_utils.images import _manifests

KIND = "LayeredImage"
LOCK_KIND = "LayeredImageLock"
_SPEC_KEYS = ("base", "layers", "output", "pullSecret")
_BASE_KEYS = ("image",)
_LAYER_KEYS = ("name", "image", "requires", "override")
_LAYER_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
_VAR_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_LOCK_HEADER = ("# Written by fleetos.layering's compose.yml: every input and composed output of each\n"
                "# LayeredImage by digest. Roll out exactly these digests (lookup fleetos.layering.layered_image).\n")


def _plain_image(value, fail, field, what):
    if not isinstance(value, str) or not value:
        fail(field, "must be a non-empty image reference, registry/repository with :tag or @sha256:<64 hex> (%s)"
             % what)
    try:
        ref = _image_ref.parse_image(value, transport_field="the MachineImage or pool that rolls it out")
    except _image_ref.InvalidReferenceError as exc:
        fail(field, "%r %s" % (_image_ref.shown(value), exc.cause))
    if ref.registry_implicit:
        fail(field, "%r names no registry: expected registry[:port]/repository" % value)
    return ref


def validate(obj, index=0):
    """One LayeredImage object (a dict) -> its normalized record; raises InvalidInputError naming the field.

    The record: ``name``, ``defined_in``, ``base`` (the image as given), ``layers`` (``name``,
    ``image``, ``requires`` ``{labels}``, ``override``), ``output`` (a repository), ``pull_secret``
    (a variable name or None).
    """
    defined_in, raw_name, _prefix, fail = check_header(obj, index, KIND, "layered_images")
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        fail("spec", "must be a mapping with base, layers and output")
    only_keys(spec, _SPEC_KEYS, "spec", "a LayeredImage spec", fail)
    base = spec.get("base")
    if not isinstance(base, dict):
        fail("spec.base", "must be a mapping with an image")
    only_keys(base, _BASE_KEYS, "spec.base", "a base", fail)
    base_ref = _plain_image(base.get("image"), fail, "spec.base.image", "a tag or a digest")
    layers = spec.get("layers")
    if not isinstance(layers, list) or not layers:
        fail("spec.layers", "must be a non-empty list of layers with a name and an image")
    records = []
    seen = set()
    for number, layer in enumerate(layers):
        field = "spec.layers[%d]" % number
        if not isinstance(layer, dict):
            fail(field, "must be a mapping with a name and an image")
        only_keys(layer, _LAYER_KEYS, field, "a layer", fail)
        name = layer.get("name")
        if not isinstance(name, str) or not _LAYER_NAME_RE.match(name):
            fail(field + ".name", "%r is not a layer name (lowercase letters, digits, '.', '_' and '-')" % (name,))
        if name in seen:
            fail(field + ".name", "'%s' names two layers; give each layer its own name" % name)
        seen.add(name)
        ref = _plain_image(layer.get("image"), fail, field + ".image", "a tag or a digest")
        requires = layer.get("requires")
        labels = {}
        if requires is not None:
            if not isinstance(requires, dict) or sorted(requires) not in ([], ["labels"]):
                fail(field + ".requires", "must be a mapping with labels only")
            labels = requires.get("labels") or {}
            if not isinstance(labels, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                       for k, v in labels.items()):
                fail(field + ".requires.labels", "must map label names to string values (quote numbers)")
        override = layer.get("override", False)
        if not isinstance(override, bool):
            fail(field + ".override", "is %r, not true or false" % (override,))
        records.append({"name": name, "image": ref.image, "requires": {"labels": dict(sorted(labels.items()))},
                        "override": override})
    output = spec.get("output")
    if not isinstance(output, str) or not output:
        fail("spec.output", "must be a non-empty repository, registry[:port]/repository")
    output_ref = _plain_image(output, fail, "spec.output", "a repository")
    if output_ref.tag is not None or output_ref.digest is not None:
        fail("spec.output", "%r names a tag or digest: expected a repository only, registry[:port]/repository" % output)
    pull_secret = spec.get("pullSecret")
    secret_name = None
    if pull_secret is not None:
        if not isinstance(pull_secret, dict) or sorted(pull_secret) != ["name"] or not isinstance(
                pull_secret["name"], str) or not _VAR_RE.match(pull_secret["name"]):
            fail("spec.pullSecret", "must be {name: VARIABLE}, naming the variable that holds the dockerconfigjson "
                 "pull secret")
        secret_name = pull_secret["name"]
    return {"name": raw_name, "defined_in": defined_in, "base": base_ref.image, "layers": records,
            "output": output_ref.name, "pull_secret": secret_name}


def validate_set(objects):
    """Validate every object; two LayeredImages with one name are an error. -> the records, sorted by name."""
    if not isinstance(objects, (list, tuple)):
        raise InvalidInputError("the LayeredImages must be a list of objects, got %s" % type(objects).__name__)
    records = {}
    for index, obj in enumerate(objects):
        record = validate(obj, index)
        first = records.get(record["name"])
        if first is not None:
            raise InvalidInputError("%s and %s both define the LayeredImage '%s'; give each LayeredImage its own name"
                                    % (first["defined_in"], record["defined_in"], record["name"]),
                                    field="metadata.name")
        records[record["name"]] = record
    return [records[name] for name in sorted(records)]


def load_dir(directory, relative_to=None, required=False):
    """Read, parse and validate every manifest of ``directory``, never raising for a file's content.

    Returns ``{"directory", "files", "images", "errors", "error"}`` as
    ``_manifests.load_manifest_dir`` does for MachineImages: ``images`` the validated records
    (sorted by name), empty when any file did not load; ``error`` one sentence or null.
    """
    if required and isinstance(directory, str) and directory and not os.path.isdir(directory):
        cause = "the LayeredImage manifests directory %s does not exist" % directory
        return {"directory": directory, "files": [], "images": [], "errors": [cause],
                "error": "LayeredImage manifests did not load: " + cause}
    record = _manifests.load_objects(directory, relative_to=relative_to, kind=KIND, validate=validate_set)
    objects = record.pop("objects")
    record["images"] = validate_set(objects) if objects else []
    return record


def references(images):
    """Every input reference of ``images`` (bases and layers) once, sorted: what compose.yml resolves."""
    refs = set()
    for image in images:
        refs.add(image["base"])
        refs.update(layer["image"] for layer in image["layers"])
    return sorted(refs)


def auth_file(pull_secret, auth_dir):
    """The auth file compose.yml writes for a LayeredImage's ``spec.pullSecret`` (a variable name) in
    ``auth_dir`` (a private directory on the controller), or None without either."""
    return os.path.join(auth_dir, pull_secret + ".json") if pull_secret and auth_dir else None


def resolutions_to_make(images, auth_dir=None):
    """What compose.yml resolves: ``[{image, auth_file}]``, every input reference once, sorted. A reference
    is read with the pull secret of the first LayeredImage (by name) that uses it and has one, else with
    compose.yml's own credentials (``auth_file`` None)."""
    secrets = {}
    for image in sorted(images, key=lambda i: i["name"]):
        for ref in [image["base"]] + [layer["image"] for layer in image["layers"]]:
            if secrets.get(ref) is None:
                secrets[ref] = image["pull_secret"]
    return [{"image": ref, "auth_file": auth_file(secrets[ref], auth_dir)} for ref in references(images)]


def pull_secret_auth(secret, name):
    """The auth file text (containers-auth.json) of the pull secret held by the variable ``name``: a
    dockerconfigjson mapping, its JSON text or base64 of it; raises InvalidInputError naming the variable."""
    try:
        auths = _auth.from_pull_secret(secret)
    except InvalidInputError as exc:
        raise InvalidInputError("The pull secret variable '%s' of a LayeredImage's spec.pullSecret is not usable: %s"
                                % (name, exc.msg[0].lower() + exc.msg[1:].rstrip(".")), field="spec.pullSecret") from None
    return json.dumps({"auths": auths.entries}, sort_keys=True)


def _resolved_map(resolutions):
    """``{reference: digest}`` from os_image_pull results registered in a loop (``results``) or a list of them."""
    results = resolutions.get("results", []) if isinstance(resolutions, dict) else (resolutions or [])
    digests = {}
    failures = {}
    for result in results:
        if not isinstance(result, dict):
            continue
        ref = result.get("item")
        if isinstance(ref, dict):  # an item of resolutions_to_make
            ref = ref.get("image")
        if result.get("failed") or not _image_ref.is_digest(result.get("digest")):
            failures[ref] = result.get("msg") or "it did not resolve to a digest"
        else:
            digests[ref] = result["digest"]
    return digests, failures


def compositions(images, resolutions, auth_dir=None):
    """What each os_image_compose task gets: every input pinned to the digest it resolved to, once.

    -> a list, one per LayeredImage: ``name``, ``base`` (``name@digest``), ``layers`` (module
    options, images ``name@digest``), ``output``, ``pull_secret``, ``auth_file`` (the file of its
    pull secret in ``auth_dir``, or None). Raises InvalidInputError
    naming the LayeredImage and the field whose image did not resolve.
    """
    digests, failures = _resolved_map(resolutions)

    def pinned(image, ref_text, field):
        if ref_text not in digests:
            cause = failures.get(ref_text, "it was not resolved")
            raise InvalidInputError("%s (LayeredImage '%s'): %s %r did not resolve: %s"
                                    % (image["defined_in"], image["name"], field, ref_text, str(cause).rstrip(".")),
                                    field=field)
        return _image_ref.parse_image(ref_text).with_digest(digests[ref_text]).image

    plans = []
    for image in images:
        layers = [{"name": layer["name"], "image": pinned(image, layer["image"], "spec.layers[%d].image" % number),
                   "requires": layer["requires"], "override": layer["override"]}
                  for number, layer in enumerate(image["layers"])]
        plans.append({"name": image["name"], "base": pinned(image, image["base"], "spec.base.image"),
                      "layers": layers, "output": image["output"], "pull_secret": image["pull_secret"],
                      "auth_file": auth_file(image["pull_secret"], auth_dir)})
    return plans


def lock_document(images, results):
    """The lock, from the LayeredImages and the os_image_compose results registered in a loop over them."""
    results = results.get("results", []) if isinstance(results, dict) else (results or [])
    by_name = {}
    for result in results:
        item = result.get("item") if isinstance(result, dict) else None
        name = item.get("name") if isinstance(item, dict) else None
        if name is not None:
            by_name[name] = result
    entries = []
    for image in images:
        result = by_name.get(image["name"])
        if result is None or result.get("failed") or not _image_ref.is_digest(result.get("digest")):
            cause = (result or {}).get("msg") or "it was not composed"
            raise FleetosError("The LayeredImage '%s' has no composed digest for the lock: %s"
                               % (image["name"], str(cause).rstrip(".")))
        given = {layer["name"]: layer["image"] for layer in image["layers"]}
        layers = []
        for layer in result["layers"]:
            record = {"name": layer["name"], "image": given.get(layer["name"]), "repository": layer["image"],
                      "digest": layer["digest"], "version": layer.get("version"),
                      "override": bool(layer.get("override"))}
            if isinstance(layer.get("built_from"), dict):
                built_from = layer["built_from"]
                record["built_from"] = {"name": built_from.get("name"), "digest": built_from.get("digest"),
                                        "version": built_from.get("version"), "older": bool(built_from.get("older"))}
            layers.append(record)
        entries.append({
            "name": image["name"],
            "image": "%s@%s" % (result["output"], result["digest"]),
            "digest": result["digest"],
            "tag": result.get("tag"),
            "manifests": dict(sorted((result.get("manifests") or {}).items())),
            "inputs": result.get("inputs"),
            "base": {"image": image["base"], "name": result["base"]["name"], "digest": result["base"]["digest"],
                     "version": result["base"].get("version")},
            "layers": layers,
        })
    return {"apiVersion": API_VERSION, "kind": LOCK_KIND, "images": entries}


def lock_text(document):
    """The lock file's text: a fixed header and the document in block YAML, keys in a fixed order."""
    return _LOCK_HEADER + yaml.safe_dump(document, sort_keys=False, default_flow_style=False, width=1000,
                                         allow_unicode=True)


def read_lock(text, name="the lock"):
    """A lock text -> its document; raises FleetosError naming ``name`` and what is wrong."""
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise FleetosError("%s is not valid YAML: %s" % (name, _manifests.yaml_cause(exc))) from None
    if not isinstance(document, dict) or document.get("kind") != LOCK_KIND or not isinstance(
            document.get("images"), list):
        raise FleetosError("%s is not a %s: expected kind %s with a list of images" % (name, LOCK_KIND, LOCK_KIND))
    for number, entry in enumerate(document["images"]):
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or not _image_ref.is_digest(
                entry.get("digest")) or not isinstance(entry.get("image"), str):
            raise FleetosError("%s: images[%d] needs a name, an image and a sha256 digest" % (name, number))
    return document


def read_lock_file(path, missing_ok=False):
    """The document of the lock file at ``path``; None when it does not exist and ``missing_ok``."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        if missing_ok:
            return None
        raise FleetosError("The lock %s does not exist; run compose.yml to write it" % path) from None
    except OSError as exc:
        raise FleetosError("The lock %s cannot be read: %s" % (path, exc.strerror or exc)) from None
    return read_lock(_manifests.decode(data, path), path)


def pinned_image(document, name, where="the lock"):
    """The composed image ``repository@digest`` of the LayeredImage ``name`` in a lock document."""
    for entry in document["images"]:
        if entry["name"] == name:
            return entry["image"]
    known = ", ".join(sorted(entry["name"] for entry in document["images"])) or "none"
    raise FleetosError("%s has no LayeredImage '%s'; it has: %s" % (where, name, known))


def lock_record(path):
    """The lock a rollout reads (``fleetos_rollout_lock``), read once: ``{path, document, error}``, or None
    without a path. Never raises: a lock that does not exist or does not parse is ``error`` (one clause),
    and only the hosts that name a LayeredImage fail on it (plugin_utils/rollout/_plan.py)."""
    if path is None or path == "":
        return None
    if not isinstance(path, str):
        return {"path": str(path), "document": None,
                "error": "fleetos_rollout_lock must be the path of a lock file, got %s" % type(path).__name__}
    try:
        return {"path": path, "document": read_lock_file(path), "error": None}
    except FleetosError as exc:
        return {"path": path, "document": None, "error": exc.msg[0].lower() + exc.msg[1:]}


def locked_image(lock, name, field):
    """What the lock pins for the LayeredImage ``name`` that ``field`` names (a MachineImage's
    ``spec.layeredImage`` or ``fleetos_pool_layered_image``): -> ``{name, lock, image, digest, base:
    {name, version, digest}, layers: [{name, version, digest}], summary}``. ``lock`` is a
    :func:`lock_record` or None; raises InvalidInputError naming ``field`` when there is no lock,
    the lock cannot be read, or it has no such LayeredImage."""
    if lock is None:
        raise InvalidInputError("%s names the LayeredImage '%s', but no lock is given: set fleetos_rollout_lock to the "
                                "layered-images.lock.yml compose.yml wrote" % (field, name), field=field)
    if lock.get("error"):
        raise InvalidInputError("%s names the LayeredImage '%s', but fleetos_rollout_lock cannot be used: %s"
                                % (field, name, str(lock["error"]).rstrip(".")), field=field)
    document = lock["document"]
    entry = next((e for e in document["images"] if e["name"] == name), None)
    if entry is None:
        known = ", ".join(sorted(e["name"] for e in document["images"])) or "none"
        raise InvalidInputError("%s names the LayeredImage '%s', which the lock %s does not have (it has: %s); "
                                "compose it with compose.yml first" % (field, name, lock["path"], known), field=field)
    base = entry.get("base") if isinstance(entry.get("base"), dict) else {}
    layers = [layer for layer in entry.get("layers") or [] if isinstance(layer, dict)]
    summary = ", ".join(["base %s" % _version(base)] + ["%s %s" % (layer.get("name"), _version(layer)) for layer in layers])
    return {"name": name, "lock": lock["path"], "image": entry["image"], "digest": entry["digest"],
            "inputs": entry.get("inputs"),
            "base": {"name": base.get("name"), "version": base.get("version"), "digest": base.get("digest")},
            "layers": [{"name": layer.get("name"), "version": layer.get("version"), "digest": layer.get("digest")}
                       for layer in layers],
            "summary": summary}


def lock_proof_problem(layered, annotations):
    """What is wrong with the image a lock pins for a LayeredImage (``layered``, :func:`locked_image`), given
    the annotations the registry serves for it, as one clause; None when the image was composed from the
    inputs the lock records (its ``fleetos.io/inputs``)."""
    served = (annotations or {}).get(INPUTS_ANNOTATION)
    if served is None:
        return ("the lock %s pins the LayeredImage '%s' to %s, which carries no %s annotation: it is not what "
                "compose.yml composed; compose it again" % (layered["lock"], layered["name"], layered["digest"],
                                                            INPUTS_ANNOTATION))
    if served != layered.get("inputs"):
        return ("the lock %s pins the LayeredImage '%s' to %s, but that image was composed from other inputs (its "
                "%s is %s, the lock's %s): the lock does not match its image; compose it again"
                % (layered["lock"], layered["name"], layered["digest"], INPUTS_ANNOTATION, served,
                   layered.get("inputs") or "none"))
    return None


def _version(record):
    version = record.get("version")
    return str(version) if version not in (None, "") else (record.get("digest") or "?")[7:19]


def _move(name, before, after):
    """``name A → B`` for an input whose digest changed (the digests when the version did not)."""
    old, new = _version(before), _version(after)
    if old == new:
        old, new = (before.get("digest") or "?")[7:19], (after.get("digest") or "?")[7:19]
        return "%s %s rebuilt (%s → %s)" % (name, _version(after), old, new)
    return "%s %s → %s" % (name, old, new)


def _built_on(layer, base):
    """``built on base 1.0`` for a layer built FROM another image of the base than the one composed, else None."""
    built_from = layer.get("built_from")
    if not isinstance(built_from, dict) or built_from.get("digest") in (None, base.get("digest")):
        return None
    return "built on base %s" % _version(built_from)


def diff_locks(previous, current):
    """What moved from the ``previous`` lock document (or None) to ``current``, per LayeredImage.

    -> a list sorted by name: ``name``, ``status`` (``added``, ``removed``, ``changed``,
    ``unchanged``), ``digest`` ``{before, after}``, ``moved`` (one phrase per input that
    moved: ``kubelet 1.31.4 → 1.31.5``, ``base 1.0 → 1.1``, ``layer ovs added``) and
    ``summary`` (one line: the moves, then ``base unchanged`` when the base did not move, then
    ``kubelet built on base 1.0`` for each layer built FROM another image of the base than the
    one composed).
    """
    before = {entry["name"]: entry for entry in (previous or {}).get("images", [])}
    after = {entry["name"]: entry for entry in current.get("images", [])}
    changes = []
    for name in sorted(set(before) | set(after)):
        old, new = before.get(name), after.get(name)
        change = {"name": name, "digest": {"before": old and old["digest"], "after": new and new["digest"]},
                  "moved": []}
        if old is None:
            change.update(status="added", summary="added: base %s, %s" % (_version(new["base"]), ", ".join(
                " ".join(filter(None, ("%s %s" % (l["name"], _version(l)), _built_on(l, new["base"]))))
                for l in new["layers"])))
        elif new is None:
            change.update(status="removed", summary="removed")
        else:
            moved = []
            if old["base"].get("digest") != new["base"].get("digest"):
                moved.append(_move("base", old["base"], new["base"]))
            old_layers = {layer["name"]: layer for layer in old["layers"]}
            new_layers = {layer["name"]: layer for layer in new["layers"]}
            for layer in new["layers"]:
                was = old_layers.get(layer["name"])
                if was is None:
                    moved.append("layer %s %s added" % (layer["name"], _version(layer)))
                elif was.get("digest") != layer.get("digest"):
                    moved.append(_move(layer["name"], was, layer))
                elif was.get("override") != layer.get("override"):
                    moved.append("%s override %s" % (layer["name"], "on" if layer.get("override") else "off"))
            moved.extend("layer %s removed" % layer["name"] for layer in old["layers"]
                         if layer["name"] not in new_layers)
            if [l["name"] for l in old["layers"] if l["name"] in new_layers] != [
                    l["name"] for l in new["layers"] if l["name"] in old_layers]:
                moved.append("layers reordered")
            if old["digest"] != new["digest"] and not moved:
                moved.append("composition rules changed")
            status = "changed" if old["digest"] != new["digest"] or moved else "unchanged"
            parts = list(moved)
            if status == "changed" and old["base"].get("digest") == new["base"].get("digest"):
                parts.append("base unchanged")
            if status == "changed":
                parts += ["%s %s" % (l["name"], _built_on(l, new["base"])) for l in new["layers"]
                          if _built_on(l, new["base"])]
            change.update(status=status, moved=moved, summary=", ".join(parts) if parts else "unchanged")
        changes.append(change)
    return changes


def summary_markdown(changes, current, lock_path=None):
    """The Markdown summary of a compose run: what moved since the previous lock, then every image by digest."""
    lines = ["# Layered images", ""]
    if lock_path:
        lines += ["Lock: `%s`" % lock_path, ""]
    counts = {}
    for change in changes:
        counts[change["status"]] = counts.get(change["status"], 0) + 1
    moved = ", ".join("%d %s" % (counts[k], k) for k in sorted(counts)) or "no LayeredImage"
    lines += ["Since the previous lock: %s." % moved, ""]
    lines += ["| LayeredImage | change | composed digest |", "| --- | --- | --- |"]
    for change in changes:
        digest = change["digest"]["after"] or change["digest"]["before"]
        lines.append("| %s | %s | `%s` |" % (change["name"], change["summary"], digest))
    row = "| %s `%s` | %s | `%s` |"
    for entry in current.get("images", []):
        base = entry["base"]
        lines += ["", "## %s" % entry["name"], "", "`%s`" % entry["image"], "",
                  "| input | version | digest |", "| --- | --- | --- |",
                  row % ("base", base["name"], base.get("version") or "-", base["digest"])]
        lines += [row % (layer["name"], layer["repository"], layer.get("version") or "-", layer["digest"])
                  for layer in entry["layers"]]
        notes = [layer for layer in entry["layers"] if _built_on(layer, base)]
        if notes:
            lines.append("")
        for layer in notes:
            built_from = layer["built_from"]
            lines.append("- %s is built on base `%s` %s (`%s`), %s the composed base %s: only its own layers are "
                         "composed, on %s." % (layer["name"], built_from.get("name"), _version(built_from),
                                               built_from.get("digest"),
                                               "older than" if built_from.get("older") else "not",
                                               _version(base), _version(base)))
    return "\n".join(lines) + "\n"


def compose_report(images, results, changes, lock_path=None):
    """The compose run's report (for job_stats and the JSON report): one row per LayeredImage."""
    results = results.get("results", []) if isinstance(results, dict) else (results or [])
    changed = {}
    for result in results:
        item = result.get("item") if isinstance(result, dict) else None
        if isinstance(item, dict):
            changed[item.get("name")] = result
    by_name = {change["name"]: change for change in changes}
    rows = []
    counts = {}
    for image in images:
        result = changed.get(image["name"], {})
        change = by_name.get(image["name"], {})
        status = "failed" if result.get("failed") else ("composed" if result.get("changed") else "unchanged")
        counts[status] = counts.get(status, 0) + 1
        rows.append({"name": image["name"], "status": status, "digest": result.get("digest"),
                     "previous_digest": (change.get("digest") or {}).get("before"),
                     "summary": change.get("summary"), "blobs": result.get("blobs"),
                     "error": result.get("msg") if result.get("failed") else None})
    return {"result": "failed" if counts.get("failed") else "success", "counts": counts, "images": rows,
            "lock": lock_path, "hosts": []}


def layers_of_labels(labels):
    """The layers a composed image records in its ``fleetos.io/layers`` label: ``[{name, version}]``; None
    for an image without the label (not composed) and for a label that is not that JSON list."""
    text = (labels or {}).get(LAYERS_LABEL) if isinstance(labels, dict) else None
    if not isinstance(text, str):
        return None
    try:
        layers = json.loads(text)
    except ValueError:
        return None
    if not isinstance(layers, list) or not all(isinstance(layer, dict) and "name" in layer for layer in layers):
        return None
    return [{"name": layer["name"], "version": layer.get("version")} for layer in layers]


def _booted(row):
    name, digest = row.get("booted_image_name"), row.get("booted_digest")
    return "%s@%s" % (name, digest) if name and _image_ref.is_digest(digest) else None


def status_inspections(rows):
    """The booted images of status rows, once each (``name@digest``, sorted): one inspection per digest."""
    return sorted({image for image in (_booted(row) for row in rows or [] if isinstance(row, dict)) if image})


def status_layers(rows, inspections):
    """The status rows with ``layers``: the booted image's layers (``[{name, version}]``), or None when the
    image is not composed or could not be inspected; and ``layers_error``: why the booted image could not be
    inspected (``IMAGE: the read's message``, its first line), else None."""
    results = inspections.get("results", []) if isinstance(inspections, dict) else (inspections or [])
    labels, errors = {}, {}
    for result in results:
        if not isinstance(result, dict):
            continue
        # status.yml registers the reads with failed_when: false, which sets failed false: a read that
        # failed is then one that returned no labels but a message.
        if result.get("failed") or (result.get("labels") is None and result.get("msg")):
            msg = str(result.get("msg") or "the read failed").strip().splitlines() or ["the read failed"]
            errors[result.get("item")] = "%s: %s" % (result.get("item"), msg[0])
        else:
            labels[result.get("item")] = result.get("labels")
    return [dict(row, layers=layers_of_labels(labels.get(_booted(row))), layers_error=errors.get(_booted(row)))
            for row in rows or []]
