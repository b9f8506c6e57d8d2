# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The LayeredImage filters: each one's choice between the functions of plugin_utils/images/_layered.py (tested in
tests/unit/plugins/plugin_utils/images/test__layered.py) and their errors as AnsibleFilterError."""

from __future__ import annotations

import yaml

import pytest

from ansible.errors import AnsibleFilterError
from ansible_collections.fleetos.layering.plugins.filter import layered_image
from ansible_collections.fleetos.layering.plugins.plugin_utils.images import _layered
from ansible_collections.fleetos.layering.tests.unit.plugins.plugin_utils.images.test__layered import (
    D,
    GOOD,
    REG,
    compose_result,
    lock_of,
    resolutions,
)

IMAGES = [_layered.validate(GOOD)]
INPUTS = [REG + "/os/base:9.6", REG + "/os/kubelet:1.31.4", REG + "/os/ovs@" + D["a"]]


def test_load_gives_the_images_of_a_directory_and_names_a_file_that_does_not_load(tmp_path):
    (tmp_path / "layered_images").mkdir()
    (tmp_path / "layered_images" / "w.yaml").write_text(yaml.safe_dump(GOOD))
    record = layered_image.layered_image_load(str(tmp_path / "layered_images"), relative_to=str(tmp_path))
    assert ([image["name"] for image in record["images"]], record["files"], record["error"]) == (
        ["worker"], ["layered_images/w.yaml"], None)
    (tmp_path / "layered_images" / "bad.yaml").write_text("a: [")
    record = layered_image.layered_image_load(str(tmp_path / "layered_images"), relative_to=str(tmp_path))
    assert record["images"] == [] and record["error"].startswith(
        "LayeredImage manifests did not load: layered_images/bad.yaml is not valid YAML")
    missing = layered_image.layered_image_load(str(tmp_path / "none"), required=True)
    assert missing["error"] == ("LayeredImage manifests did not load: the LayeredImage manifests directory %s "
                                "does not exist" % (tmp_path / "none"))


@pytest.mark.parametrize("directory", [None, 5, ["layered_images"]])
def test_load_refuses_a_directory_that_is_no_path(directory):
    with pytest.raises(AnsibleFilterError, match="the LayeredImage manifests directory must be a non-empty path"):
        layered_image.layered_image_load(directory)


@pytest.mark.parametrize(("auth_dir", "auth_file"), [(None, None), ("/t/a", "/t/a/registry_creds.json")])
def test_compositions_without_resolutions_are_the_references_to_resolve(auth_dir, auth_file):
    assert layered_image.layered_image_compositions(IMAGES, auth_dir=auth_dir) == [
        {"image": ref, "auth_file": auth_file} for ref in INPUTS]


def test_compositions_with_resolutions_pin_every_input_or_name_the_one_that_did_not_resolve():
    resolved = resolutions((INPUTS[0], D["b"]), (INPUTS[1], D["c"]), (INPUTS[2], D["a"]))
    (composition,) = layered_image.layered_image_compositions(IMAGES, resolved, auth_dir="/t/a")
    assert (composition["base"], [layer["image"] for layer in composition["layers"]], composition["auth_file"]) == (
        REG + "/os/base@" + D["b"], [REG + "/os/kubelet@" + D["c"], REG + "/os/ovs@" + D["a"]],
        "/t/a/registry_creds.json")
    with pytest.raises(AnsibleFilterError, match=r"spec.layers\[0\].image 'reg.example.com/os/kubelet:1.31.4' did "
                                                 r"not resolve: Failed to resolve image"):
        layered_image.layered_image_compositions(IMAGES, resolutions((INPUTS[0], D["b"]), failed=[INPUTS[1]]))


def test_lock_gives_the_text_the_changes_since_the_previous_lock_the_summary_and_the_report(tmp_path):
    previous = tmp_path / "layered-images.lock.yml"
    results = {"results": [compose_result(D["0"], kubelet=("1.31.5", D["e"]))]}
    # No previous lock file yet: every image is added.
    first = layered_image.layered_image_lock(results, IMAGES, previous=str(previous), lock_path="inv/lock.yml")
    assert first["text"] == _layered.lock_text(_layered.lock_document(IMAGES, results))
    assert [change["status"] for change in first["changes"]] == ["added"]
    previous.write_text(_layered.lock_text(lock_of(compose_result(D["d"]))))
    second = layered_image.layered_image_lock(results, IMAGES, previous=str(previous), lock_path="inv/lock.yml")
    assert second["text"] == first["text"]
    assert [(change["status"], change["summary"]) for change in second["changes"]] == [
        ("changed", "kubelet 1.31.4 → 1.31.5, base unchanged")]
    assert "Since the previous lock: 1 changed." in second["summary"]
    assert (second["report"]["result"], second["report"]["images"][0]["previous_digest"]) == ("success", D["d"])


def test_lock_refuses_a_failed_composition_and_a_previous_lock_that_is_not_one(tmp_path):
    failed = {"results": [{"item": {"name": "worker"}, "failed": True, "msg": "Layer 'ovs' writes /var/x."}]}
    with pytest.raises(AnsibleFilterError, match="The LayeredImage 'worker' has no composed digest for the lock"):
        layered_image.layered_image_lock(failed, IMAGES)
    (tmp_path / "other.yml").write_text("kind: Other\nimages: []\n")
    with pytest.raises(AnsibleFilterError, match="is not a LayeredImageLock"):
        layered_image.layered_image_lock({"results": [compose_result(D["d"])]}, IMAGES,
                                         previous=str(tmp_path / "other.yml"))


def test_auth_gives_the_auth_file_text_or_refuses_naming_the_variable_not_the_secret():
    secret = {"auths": {"198.51.100.1:5000": {"auth": "dXNlcjpwYXNz"}}}
    assert yaml.safe_load(layered_image.layered_image_auth(secret, "registry_creds")) == secret
    with pytest.raises(AnsibleFilterError, match="The pull secret variable 'registry_creds'") as info:
        layered_image.layered_image_auth("bm90IGpzb24=", "registry_creds")
    assert "bm90IGpzb24=" not in str(info.value)


def test_lock_read_is_none_without_a_path_and_a_record_with_one(tmp_path):
    assert layered_image.layered_image_lock_read(None) is None
    assert layered_image.layered_image_lock_read("") is None
    record = layered_image.layered_image_lock_read(str(tmp_path / "none.yml"))
    assert (record["document"], record["error"]) == (
        None, "the lock %s does not exist; run compose.yml to write it" % (tmp_path / "none.yml"))


def test_status_without_inspections_is_what_to_inspect_and_with_them_the_rows_with_their_layers():
    rows = [{"host": "a", "booted_image_name": REG + "/os/worker", "booted_digest": D["a"]},
            {"host": "b", "booted_image_name": None, "booted_digest": None}]
    assert layered_image.layered_image_status(rows) == [REG + "/os/worker@" + D["a"]]
    labels = {"fleetos.io/layers": '[{"digest":"%s","image":"r/k","name":"kubelet","version":"1.31.5"}]' % D["c"]}
    inspected = {"results": [{"item": REG + "/os/worker@" + D["a"], "labels": labels}]}
    status = layered_image.layered_image_status(rows, inspected)
    assert [(row["host"], row["layers"]) for row in status] == [
        ("a", [{"name": "kubelet", "version": "1.31.5"}]), ("b", None)]


@pytest.mark.parametrize("rows", [None, {"host": "a"}, "a"])
def test_status_refuses_rows_that_are_not_a_list(rows):
    with pytest.raises(AnsibleFilterError, match="layered_image_status needs a list of status rows"):
        layered_image.layered_image_status(rows)


def test_the_filters_are_registered_by_their_names():
    filters = layered_image.FilterModule().filters()
    assert {name: function.__name__ for name, function in filters.items()} == {
        name: name for name in ("layered_image_load", "layered_image_auth", "layered_image_compositions",
                                "layered_image_lock", "layered_image_lock_read", "layered_image_status")}
