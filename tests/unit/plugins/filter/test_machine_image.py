# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The machine_image filters, and the documented example inventory resolved through them."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from ansible.errors import AnsibleFilterError
from ansible_collections.fleetos.layering.plugins.filter.machine_image import FilterModule

FILTERS = FilterModule().filters()
EXAMPLE = Path(__file__).resolve().parents[4] / "inventories" / "example"
DIGEST = "sha256:" + "a" * 64

TWO_DOCS = """
apiVersion: fleetos.io/v1alpha1
kind: MachineImage
metadata: {name: web}
spec: {image: "r/os@%s", nodeSelector: {matchLabels: {pool: web}}}
---
---
apiVersion: fleetos.io/v1alpha1
kind: MachineImage
metadata: {name: web-canary}
spec:
  image: "r/os@%s"
  nodeSelector:
    matchExpressions: [{key: zone, operator: Has}]
""" % (DIGEST, DIGEST)


def test_manifests_are_annotated_with_file_and_document():
    objects = FILTERS["machine_image_manifests"]([TWO_DOCS], ["machine_images/web.yaml"])
    assert [(o["metadata"]["name"], o["metadata"]["annotations"]["fleetos.io/defined-in"]) for o in objects] == [
        ("web", "machine_images/web.yaml document 1"),
        ("web-canary", "machine_images/web.yaml document 3"),
    ]


@pytest.mark.parametrize(
    ("contents", "names", "message"),
    [
        (["a: [1"], ["m/bad.yaml"], "m/bad.yaml is not valid YAML"),
        (["- 1\n"], ["m/list.yaml"], "m/list.yaml document 1 is a list, not a MachineImage mapping"),
        (["a: 1", "b: 2"], ["one.yaml"], "machine_image_manifests needs a list of file contents"),
    ],
)
def test_manifests_errors(contents, names, message):
    with pytest.raises(AnsibleFilterError) as caught:
        FILTERS["machine_image_manifests"](contents, names)
    assert message in str(caught.value)


def test_machine_image_load_gives_the_objects_of_a_good_directory():
    files = sorted((EXAMPLE / "machine_images").glob("*.yaml"))
    loaded = FILTERS["machine_image_load"](str(EXAMPLE / "machine_images"), str(EXAMPLE))
    names = ["machine_images/" + f.name for f in files]
    assert loaded == {
        "directory": "machine_images",
        "files": names,
        "objects": FILTERS["machine_image_manifests"]([f.read_text() for f in files], names),
        "errors": [],
        "error": None,
    }


def test_machine_image_load_names_a_broken_file_instead_of_raising(tmp_path):
    (tmp_path / "machine_images").mkdir()
    (tmp_path / "machine_images" / "web.yaml").write_text(TWO_DOCS.split("---", maxsplit=1)[0])
    (tmp_path / "machine_images" / "zz.yaml").write_text("- 1\n")
    loaded = FILTERS["machine_image_load"](str(tmp_path / "machine_images"), str(tmp_path))
    cause = "machine_images/zz.yaml document 1 is a list, not a MachineImage mapping"
    assert (loaded["objects"], loaded["errors"]) == ([], [cause])
    assert loaded["error"] == "MachineImage manifests did not load: " + cause


def test_machine_image_load_refuses_a_directory_that_is_no_path():
    with pytest.raises(AnsibleFilterError) as caught:
        FILTERS["machine_image_load"](["machine_images"])
    assert str(caught.value) == ("the MachineImage manifests directory must be a non-empty path, "
                                 "got ['machine_images']")


def test_resolve_error_names_file_document_object_and_field():
    objects = FILTERS["machine_image_manifests"]([TWO_DOCS], ["machine_images/web.yaml"])
    with pytest.raises(AnsibleFilterError) as caught:
        FILTERS["resolve_machine_image"](objects, "n1", {"pool": "web"})
    assert str(caught.value).startswith(
        "machine_images/web.yaml document 3 (MachineImage 'web-canary'): spec.nodeSelector.matchExpressions[0]"
        ".operator 'Has' is not one of In, NotIn, Exists, DoesNotExist")


@pytest.mark.parametrize(
    ("labels", "selector", "expected"),
    [
        ({"zone": "a"}, {"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["b"]}]}, True),
        ({"zone": "b"}, {"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["b"]}]}, False),
        ({"lab-index": 3}, {"matchLabels": {"lab-index": "3"}}, True),
    ],
)
def test_match_label_selector(labels, selector, expected):
    assert FILTERS["match_label_selector"](labels, selector) is expected


def test_match_label_selector_refuses_empty():
    with pytest.raises(AnsibleFilterError) as caught:
        FILTERS["match_label_selector"]({"a": "b"}, {})
    assert str(caught.value).startswith("selector is empty")


def _example():
    hosts = yaml.safe_load((EXAMPLE / "hosts.yml").read_text())
    files = sorted((EXAMPLE / "machine_images").glob("*.yaml"))
    names = ["machine_images/" + f.name for f in files]
    objects = FILTERS["machine_image_manifests"]([f.read_text() for f in files], names)
    secrets = yaml.safe_load((EXAMPLE / "group_vars" / "all" / "pull_secrets.yml").read_text())
    result = {}
    for pool in hosts["all"]["children"]["fleet"]["children"].values():
        for host, host_vars in pool["hosts"].items():
            defined = set(secrets) | set(pool["vars"]) | set(host_vars)
            result[host] = FILTERS["resolve_machine_image"](
                objects, host, host_vars["fleetos_node_labels"], pool["vars"]["fleetos_pool_image"],
                defined_vars=sorted(defined), pool_pull_secret=pool["vars"].get("fleetos_pool_pull_secret"))
    return result


def test_example_inventory_resolves_as_documented():
    result = _example()
    summary = {host: (r["source"], r["name"], r["paused"]) for host, r in result.items()}
    assert summary == {
        "web-01": ("pool", None, False),
        "web-02": ("pool", None, False),
        "web-03": ("selector", "web-zone-c-hold", True),
        "web-04": ("selector", "web-canary", False),
        "db-01": ("pool", None, False),
        "db-02": ("selector", "db-ssd", False),
        "db-03": ("nodeName", "db-03-hotfix", False),
        "edge-01": ("pool", None, False),
        "edge-02": ("selector", "edge-gpu", False),
        "edge-03": ("pool", None, False),
    }
    assert result["db-03"]["transport"] == "ostree-image-signed"
    assert result["web-04"]["pull_secret"] == "example_registry_pull_secret"


def test_machine_image_warnings_names_a_node_name_that_is_no_host():
    objects = [
        {"apiVersion": "fleetos.io/v1alpha1", "kind": "MachineImage", "metadata": {"name": "typo"},
         "spec": {"image": "reg.example.com/os@sha256:" + "a" * 64, "nodeName": "web-O1"}},
        {"apiVersion": "fleetos.io/v1alpha1", "kind": "MachineImage", "metadata": {"name": "ok"},
         "spec": {"image": "reg.example.com/os@sha256:" + "a" * 64, "nodeName": "web-02"}},
    ]
    warn = FilterModule().filters()["machine_image_warnings"]
    assert warn(objects, ["web-01", "web-02"]) == [
        "machine_images[0] (MachineImage 'typo') names web-O1 in spec.nodeName, which is not a host of the "
        "inventory; it applies to no host"]
    assert warn(objects + [{"kind": "Broken"}], ["web-01"]) == []


def test_machine_image_sources_reads_the_plugins_result_a_named_or_a_default_directory(tmp_path):
    sources = FilterModule().filters()["machine_image_sources"]
    hostvars = {"n1": {"fleetos_pool": "a"}, "n2": {"fleetos_machine_image": {"source": "pool"}}}
    assert sources(["n1", "n2"], hostvars) == {"read": True, "message": None}
    alone = sources(["n1"], hostvars, None, str(tmp_path / "machine_images"))
    assert not alone["read"] and alone["message"].startswith("No MachineImage source was read: no host has")
    assert sources(["n1"], hostvars, "/srv/manifests")["read"]
    (tmp_path / "machine_images").mkdir()
    assert sources(["n1"], hostvars, "", str(tmp_path / "machine_images"))["read"]
    with pytest.raises(AnsibleFilterError):
        sources("n1", hostvars)
