# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# This is a private plugin_util of fleetos.layering: its interface may change at any
# time and it is not meant to be used by other collections.

"""MachineImage manifests: files and YAML texts into annotated objects, for the filters and the inventory plugin."""

from __future__ import annotations

import os

import yaml

from ansible_collections.fleetos.layering.plugins.module_utils._errors import FleetosError
from ansible_collections.fleetos.layering.plugins.plugin_utils.images._machine_image import (
    DEFINED_IN_ANNOTATION,
    MachineImageSet,
)

# How a document that is not a mapping is named.
_KINDS = {list: "a list", str: "a string", int: "an integer", float: "a number", bool: "a boolean"}
# Longest message a manifest error may give (the collection's one-sentence rule).
MAX_MESSAGE = 299


class DuplicateKeyError(yaml.YAMLError):
    """A mapping gives one key twice (PyYAML would keep the last one silently)."""


class _StrictLoader(yaml.SafeLoader):  # pylint: disable=too-many-ancestors
    """PyYAML's safe loader, refusing a key given twice in one mapping."""


def _strict_mapping(loader, node, deep=False):
    loader.flatten_mapping(node)
    seen = {}
    for key_node, dummy in node.value:
        key = loader.construct_object(key_node, deep=True)
        try:
            first = seen.get(key)
        except TypeError:
            continue  # an unhashable key: the constructor below names it
        if first is not None:
            raise DuplicateKeyError("line %d: the key %r appears twice in one mapping (first on line %d); give each "
                                    "key once" % (key_node.start_mark.line + 1, key, first))
        seen[key] = key_node.start_mark.line + 1
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _strict_mapping)


def load_documents(text):
    """Every YAML document of ``text``, read safely; a key given twice in a mapping is an error."""
    return list(yaml.load_all(text, Loader=_StrictLoader))  # nosec: a SafeLoader subclass


def yaml_cause(exc):
    """One short clause for a PyYAML error: where (line and column, or offset) and what, without the source echo."""
    if isinstance(exc, DuplicateKeyError):
        return str(exc)
    if isinstance(exc, yaml.reader.ReaderError) and isinstance(exc.character, int):
        return "offset %d: the character #x%04x is not allowed in YAML" % (exc.position, exc.character)
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem:
        cause = exc.problem
        if exc.problem_mark is not None:
            cause = "line %d, column %d: %s" % (exc.problem_mark.line + 1, exc.problem_mark.column + 1, cause)
        if exc.context and exc.context_mark is not None:
            cause += " (%s from line %d, column %d)" % (exc.context, exc.context_mark.line + 1,
                                                        exc.context_mark.column + 1)
        return cause
    return " ".join(str(exc).split())


def parse_text(text, name, kind="MachineImage"):
    """The annotated objects of one manifest text; raises FleetosError naming ``name`` and the cause.

    Each object gets the annotation ``fleetos.io/defined-in: "<name> document <n>"``
    (1-based, counting every document of the file); empty documents are skipped.
    """
    try:
        documents = load_documents(str(text))
    except yaml.YAMLError as exc:
        raise FleetosError("%s is not valid YAML: %s" % (name, yaml_cause(exc))) from None
    objects = []
    for number, document in enumerate(documents, start=1):
        if document is None:
            continue
        where = "%s document %d" % (name, number)
        if not isinstance(document, dict):
            shown_kind = _KINDS.get(type(document), "a " + type(document).__name__)
            raise FleetosError("%s is %s, not a %s mapping" % (where, shown_kind, kind))
        document = dict(document)
        metadata = document.get("metadata")
        if isinstance(metadata, dict):
            metadata = dict(metadata)
            annotations = metadata.get("annotations")
            annotations = dict(annotations) if isinstance(annotations, dict) else {}
            annotations[DEFINED_IN_ANNOTATION] = where
            metadata["annotations"] = annotations
            document["metadata"] = metadata
        elif metadata is None:
            document["metadata"] = {"annotations": {DEFINED_IN_ANNOTATION: where}}
        objects.append(document)
    return objects


def parse_manifests(contents, names):
    """Parse YAML texts (one or many documents each) into MachineImage objects.

    ``names[i]`` names ``contents[i]`` in messages (e.g. ``machine_images/web.yaml``); see
    :func:`parse_text` for the annotation each object gets. The first text that does not
    parse raises FleetosError.
    """
    if isinstance(contents, str):
        contents = [contents]
    if isinstance(names, str):
        names = [names]
    if not isinstance(contents, (list, tuple)) or not isinstance(names, (list, tuple)) or len(contents) != len(names):
        raise FleetosError("machine_image_manifests needs a list of file contents and a list of as many names")
    objects = []
    for text, name in zip(contents, names):
        objects.extend(parse_text(text, name))
    return objects


def shorten(text, limit=MAX_MESSAGE):
    """``text`` cut to at most ``limit`` characters, ending in "..." when cut."""
    return text if len(text) <= limit else text[:limit - 3].rstrip() + "..."


def manifest_files(directory):
    """The manifest file names of ``directory``: ``*.yaml`` and ``*.yml`` regular files, not hidden, sorted."""
    return sorted(f for f in os.listdir(directory)
                  if f.endswith((".yaml", ".yml")) and not f.startswith(".")
                  and os.path.isfile(os.path.join(directory, f)))


def shown_directory(directory, relative_to=None):
    """How messages name ``directory``: relative to ``relative_to`` (the inventory directory) when inside it,
    else by its last component."""
    directory = os.path.abspath(directory)
    if relative_to:
        relative = os.path.relpath(directory, os.path.abspath(relative_to))
        if relative == os.curdir:
            return ""
        if relative != os.pardir and not relative.startswith(os.pardir + os.sep):
            return relative.replace(os.sep, "/")
    return os.path.basename(directory)


def decode(data, name):
    """The text of a manifest file's bytes; raises FleetosError when it is binary or not UTF-8."""
    if b"\0" in data:
        raise FleetosError("%s is binary, not a YAML text (a NUL byte at offset %d)" % (name, data.index(b"\0")))
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise FleetosError("%s is not UTF-8 text (the byte 0x%02x at offset %d)"
                           % (name, data[exc.start], exc.start)) from None


def load_manifest_dir(directory, relative_to=None, missing_ok=True):
    """Read, parse and validate every manifest of ``directory``, never raising for a file's content.

    Returns ``{"directory", "files", "objects", "errors", "error"}``: ``files`` as messages name
    them (see :func:`shown_directory`); ``errors`` one sentence per file that does not load
    (unreadable, binary, not UTF-8, not YAML, a key twice, not a mapping, an invalid
    MachineImage), or one for the whole set (a name used twice); ``error`` the sentence a
    host's plan gives then ("MachineImage manifests did not load: ..."), null when all load;
    ``objects`` the annotated objects, empty when anything did not load, so that no
    host is planned from part of the set. A missing directory means no manifests, or
    raises FleetosError without ``missing_ok``.
    """
    return load_objects(directory, relative_to=relative_to, missing_ok=missing_ok, kind="MachineImage",
                        validate=MachineImageSet)


def load_objects(directory, relative_to=None, missing_ok=True, kind="MachineImage", validate=MachineImageSet):
    """Read, parse and validate every manifest of ``directory`` holding ``kind`` objects (see load_manifest_dir).

    ``validate`` takes a list of objects and raises FleetosError for the first invalid one or a
    conflict between them; it is called for each file, then for the whole set.
    """
    if not isinstance(directory, str) or not directory:
        raise FleetosError("the %s manifests directory must be a non-empty path, got %r" % (kind, directory))
    shown = shown_directory(directory, relative_to)
    record = {"directory": shown or os.curdir, "files": [], "objects": [], "errors": [], "error": None}
    if not os.path.isdir(directory):
        if missing_ok:
            return record
        raise FleetosError("the %s manifests directory %s does not exist" % (kind, directory))
    objects = []
    for file_name in manifest_files(directory):
        name = "%s/%s" % (shown, file_name) if shown else file_name
        record["files"].append(name)
        try:
            with open(os.path.join(directory, file_name), "rb") as handle:
                data = handle.read()
        except OSError as exc:
            record["errors"].append(shorten("%s cannot be read: %s" % (name, exc.strerror or exc)))
            continue
        try:
            file_objects = parse_text(decode(data, name), name, kind=kind)
            validate(file_objects)
        except FleetosError as exc:
            record["errors"].append(shorten(exc.msg))
            continue
        objects.extend(file_objects)
    if not record["errors"]:
        try:
            validate(objects)
        except FleetosError as exc:
            record["errors"].append(shorten(exc.msg))
    if record["errors"]:
        more = len(record["errors"]) - 1
        tail = " (and %d more file%s that did not load)" % (more, "" if more == 1 else "s") if more else ""
        prefix = "%s manifests did not load: " % kind
        record["error"] = prefix + shorten(record["errors"][0], MAX_MESSAGE - len(prefix) - len(tail)) + tail
    else:
        record["objects"] = objects
    return record
