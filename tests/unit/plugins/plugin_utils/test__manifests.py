# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""MachineImage manifests: strict YAML (no key twice) and annotated objects."""

from __future__ import annotations

import pytest

from ansible_collections.fleetos.layering.plugins.module_utils._errors import FleetosError
from ansible_collections.fleetos.layering.plugins.module_utils._machine_image import MachineImageSet
from ansible_collections.fleetos.layering.plugins.plugin_utils._manifests import load_documents, parse_manifests

IMAGE = "reg.example.com/os@sha256:" + "a" * 64
GOOD = """apiVersion: fleetos.io/v1alpha1
kind: MachineImage
metadata:
  name: web
spec:
  image: %s
  nodeName: web-01
""" % IMAGE


@pytest.mark.parametrize("text, line, key, first", [
    (GOOD + "spec:\n  nodeName: web-02\n", 8, "spec", 5),
    (GOOD.replace("  nodeName: web-01\n", "  nodeName: web-01\n  nodeName: web-02\n"), 8, "nodeName", 7),
    ("a: {b: 1, b: 2}\n", 1, "b", 1),
])
def test_a_key_given_twice_is_refused_with_its_lines(text, line, key, first):
    with pytest.raises(FleetosError) as caught:
        parse_manifests([text], ["machine_images/web.yaml"])
    assert caught.value.msg == ("machine_images/web.yaml is not valid YAML: line %d: the key %r appears twice in one "
                                "mapping (first on line %d); give each key once" % (line, key, first))


def test_a_valid_manifest_loads_annotated():
    (obj,) = parse_manifests([GOOD], ["machine_images/web.yaml"])
    assert obj["metadata"]["annotations"]["fleetos.io/defined-in"] == "machine_images/web.yaml document 1"
    assert load_documents("a: 1\n---\nb: [1, 2]\n") == [{"a": 1}, {"b": [1, 2]}]


def test_an_unknown_metadata_field_is_refused():
    text = GOOD.replace("  name: web\n", "  name: web\n  nmae: web2\n")
    objects = parse_manifests([text], ["machine_images/web.yaml"])
    with pytest.raises(FleetosError) as caught:
        MachineImageSet(objects)
    assert caught.value.msg == ("machine_images/web.yaml document 1 (MachineImage 'web'): metadata.nmae is not a "
                                "MachineImage metadata field; allowed: name, labels, annotations")
