# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""MachineImage manifests: strict YAML (no key twice), annotated objects, and a directory loaded once."""

from __future__ import annotations

import pytest

from ansible_collections.fleetos.layering.plugins.module_utils._errors import FleetosError
from ansible_collections.fleetos.layering.plugins.plugin_utils.images._machine_image import MachineImageSet
from ansible_collections.fleetos.layering.plugins.plugin_utils.images import _manifests
from ansible_collections.fleetos.layering.plugins.plugin_utils.images._manifests import (
    load_documents,
    load_manifest_dir,
    parse_manifests,
    shown_directory,
)

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


def _files(tmp_path, files, directory="machine_images"):
    target = tmp_path / directory
    target.mkdir(parents=True)
    for name, data in files.items():
        (target / name).write_bytes(data if isinstance(data, bytes) else data.encode())
    return target


@pytest.mark.parametrize("data, cause", [
    ("metadata: {name: x\nspec: [\n", "is not valid YAML: line 2, column 5: expected ',' or '}', but got ':' "
                                      "(while parsing a flow mapping from line 1, column 11)"),
    ("a: b: c\n", "is not valid YAML: line 1, column 5: mapping values are not allowed here"),
    ("a: 1\na: 2\n", "is not valid YAML: line 2: the key 'a' appears twice in one mapping (first on line 1); give "
                     "each key once"),
    ("- a\n- b\n", "document 1 is a list, not a MachineImage mapping"),
    (GOOD + "---\njust text\n", "document 2 is a string, not a MachineImage mapping"),
    (b"\x89PNG\r\n\x1a\n\x00\x00", "is binary, not a YAML text (a NUL byte at offset 8)"),
    (b"a: caf\xe9\n", "is not UTF-8 text (the byte 0xe9 at offset 6)"),
    ("a: b\x01\n", "is not valid YAML: offset 4: the character #x0001 is not allowed in YAML"),
    (GOOD.replace("kind: MachineImage\n", "kind: MachineImage\nknid: x\n"),
     "document 1 (MachineImage 'web'): knid is not a MachineImage field; allowed: apiVersion, kind, metadata, spec"),
    (GOOD.replace("  name: web\n", "  name: web\n  nmae: web2\n"),
     "document 1 (MachineImage 'web'): metadata.nmae is not a MachineImage metadata field; allowed: name, labels, "
     "annotations"),
], ids=["flow-mapping", "mapping-value", "key-twice", "list", "string-document", "binary", "latin-1", "control",
        "unknown-top-key", "unknown-metadata-key"])
def test_a_file_that_does_not_load_is_named_with_its_cause(tmp_path, data, cause):
    directory = _files(tmp_path, {"good.yaml": GOOD.replace("web-01", "web-02").replace("name: web", "name: other"),
                                  "web.yaml": data})
    loaded = load_manifest_dir(str(directory), relative_to=str(tmp_path))
    assert loaded["files"] == ["machine_images/good.yaml", "machine_images/web.yaml"]
    assert loaded["errors"] == ["machine_images/web.yaml " + cause]
    assert loaded["error"] == "MachineImage manifests did not load: machine_images/web.yaml " + cause
    # No host is planned from part of the set: the good file's object is not given either.
    assert loaded["objects"] == []


def test_a_good_directory_loads_its_objects_in_file_order(tmp_path):
    second = GOOD.replace("web-01", "web-02").replace("name: web", "name: web-b")
    directory = _files(tmp_path, {"b.yml": second, "a.yaml": GOOD, ".hidden.yaml": "- not read\n", "notes.txt": "x"})
    (directory / "dir.yaml").mkdir()
    loaded = load_manifest_dir(str(directory), relative_to=str(tmp_path))
    assert loaded == {
        "directory": "machine_images",
        "files": ["machine_images/a.yaml", "machine_images/b.yml"],
        "objects": parse_manifests([GOOD, second], ["machine_images/a.yaml", "machine_images/b.yml"]),
        "errors": [],
        "error": None,
    }


def test_every_broken_file_is_named_and_the_host_reason_counts_the_others(tmp_path):
    directory = _files(tmp_path, {"a.yaml": "- 1\n", "b.yaml": GOOD, "c.yaml": b"\x00", "d.yaml": "a: [\n"})
    loaded = load_manifest_dir(str(directory), relative_to=str(tmp_path))
    assert [error.split(" ")[0] for error in loaded["errors"]] == [
        "machine_images/a.yaml", "machine_images/c.yaml", "machine_images/d.yaml"]
    assert loaded["error"] == ("MachineImage manifests did not load: %s (and 2 more files that did not load)"
                               % loaded["errors"][0])


def test_one_name_in_two_files_is_one_error_for_the_set(tmp_path):
    directory = _files(tmp_path, {"a.yaml": GOOD, "b.yaml": GOOD.replace("web-01", "web-02")})
    loaded = load_manifest_dir(str(directory), relative_to=str(tmp_path))
    assert loaded["errors"] == ["machine_images/b.yaml document 1 (MachineImage 'web'): metadata.name is also used "
                                "by machine_images/a.yaml document 1; names must be unique"]
    assert loaded["objects"] == []


def test_messages_stay_under_300_characters(tmp_path):
    key = "k" * 400
    directory = _files(tmp_path, {"web.yaml": "%s: 1\n%s: 2\n" % (key, key), "x.yaml": "- 1\n"})
    loaded = load_manifest_dir(str(directory), relative_to=str(tmp_path))
    assert [len(error) for error in loaded["errors"]] == [299, len("machine_images/x.yaml document 1 is a list, "
                                                                   "not a MachineImage mapping")]
    assert loaded["errors"][0].startswith("machine_images/web.yaml is not valid YAML: line 2: the key 'kkk")
    assert loaded["errors"][0].endswith("k...")
    assert len(loaded["error"]) == 299
    assert loaded["error"].endswith("... (and 1 more file that did not load)")


def test_an_unreadable_file_is_named(tmp_path, monkeypatch):
    directory = _files(tmp_path, {"web.yaml": GOOD})

    def refuse(path, mode="r"):
        raise PermissionError(13, "Permission denied", path)

    monkeypatch.setattr(_manifests, "open", refuse, raising=False)
    loaded = load_manifest_dir(str(directory), relative_to=str(tmp_path))
    assert loaded["errors"] == ["machine_images/web.yaml cannot be read: Permission denied"]


def test_a_missing_directory_means_no_manifests_unless_required(tmp_path):
    assert load_manifest_dir(str(tmp_path / "machine_images"), relative_to=str(tmp_path)) == {
        "directory": "machine_images", "files": [], "objects": [], "errors": [], "error": None}
    with pytest.raises(FleetosError) as caught:
        load_manifest_dir(str(tmp_path / "machine_images"), missing_ok=False)
    assert caught.value.msg == "the MachineImage manifests directory %s does not exist" % (tmp_path / "machine_images")


@pytest.mark.parametrize("directory, relative_to, shown", [
    ("inv/machine_images", "inv", "machine_images"),
    ("inv/sub/machine_images", "inv", "sub/machine_images"),
    ("inv", "inv", ""),
    ("elsewhere/images", "inv", "images"),
    ("inventory-2/images", "inventory", "images"),
    ("inv/machine_images", None, "machine_images"),
])
def test_files_are_named_relative_to_the_inventory_when_inside_it(tmp_path, directory, relative_to, shown):
    assert shown_directory(str(tmp_path / directory), relative_to and str(tmp_path / relative_to)) == shown
    directory = _files(tmp_path, {"a.yaml": "- 1\n"}, directory)
    loaded = load_manifest_dir(str(directory), relative_to=relative_to and str(tmp_path / relative_to))
    assert loaded["files"] == [shown + "/a.yaml" if shown else "a.yaml"]
