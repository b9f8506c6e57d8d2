# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# This is a private plugin_util of fleetos.layering: its interface may change at any
# time and it is not meant to be used by other collections.

"""MachineImage manifests: YAML texts into annotated objects, for the filter and the inventory plugin."""

from __future__ import annotations

import yaml

from ansible_collections.fleetos.layering.plugins.module_utils._errors import FleetosError
from ansible_collections.fleetos.layering.plugins.module_utils._machine_image import DEFINED_IN_ANNOTATION


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


def parse_manifests(contents, names):
    """Parse YAML texts (one or many documents each) into MachineImage objects.

    ``names[i]`` names ``contents[i]`` in messages (e.g. ``machine_images/web.yaml``).
    Each object gets the annotation ``fleetos.io/defined-in: "<name> document <n>"``
    (1-based, counting every document of the file); empty documents are skipped.
    """
    if isinstance(contents, str):
        contents = [contents]
    if isinstance(names, str):
        names = [names]
    if not isinstance(contents, (list, tuple)) or not isinstance(names, (list, tuple)) or len(contents) != len(names):
        raise FleetosError("machine_image_manifests needs a list of file contents and a list of as many names")
    objects = []
    for text, name in zip(contents, names):
        try:
            documents = load_documents(str(text))
        except yaml.YAMLError as exc:
            raise FleetosError("%s is not valid YAML: %s" % (name, " ".join(str(exc).split()))) from None
        for number, document in enumerate(documents, start=1):
            if document is None:
                continue
            where = "%s document %d" % (name, number)
            if not isinstance(document, dict):
                raise FleetosError("%s is %s, not a MachineImage mapping" % (where, type(document).__name__))
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
