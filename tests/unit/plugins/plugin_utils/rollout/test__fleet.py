# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The plan of every host at once: inputs read from each host's variables, one resolution for all."""

from __future__ import annotations

import pytest

from ansible_collections.fleetos.layering.plugins.filter.plan import rollout_plan_fleet
from ansible_collections.fleetos.layering.plugins.plugin_utils.rollout import _fleet
from ansible_collections.fleetos.layering.plugins.plugin_utils.rollout._plan import host_plan

D1, D2, D3 = ("sha256:" + c * 64 for c in "123")
POOL_IMAGE = "r/os@" + D1


def machine_image(name, spec):
    return {"apiVersion": "fleetos.io/v1alpha1", "kind": "MachineImage",
            "metadata": {"name": name, "annotations": {"fleetos.io/defined-in": "mi.yaml document 1"}}, "spec": spec}


MANIFESTS = {"directory": "machine_images", "files": ["mi.yaml"], "errors": [], "error": None, "objects": [
    machine_image("pin", {"image": "r/os@" + D2, "nodeName": "h1"}),
    machine_image("gpu", {"image": "r/os@" + D3, "nodeSelector": {"matchLabels": {"gpu": "yes"}}, "pullSecret": "gpu_secret"}),
    machine_image("zone", {"image": "r/os@" + D3, "nodeSelector": {"matchLabels": {"zone": "a"}}}),
]}


@pytest.mark.parametrize("variables, run_host, play, expected", [
    # The option beats the inventory variable; the variable beats the play.
    ({"h": {"os_plan_pool": "opt", "fleetos_pool": "var"}}, "h", {"pool": "play"}, "opt"),
    ({"h": {"fleetos_pool": "var"}}, "h", {"pool": "play"}, "var"),
    # A host that has neither takes the play's value...
    ({"h": {}, "o": {}}, "o", {"pool": "play"}, "play"),
    # ...unless the run_once host has the variable itself: then the play's value is that host's own.
    ({"h": {}, "o": {"fleetos_pool": "o-only"}}, "o", {"pool": "o-only"}, None),
    # "" is unset (ansible-core before 2.19 renders a None as "").
    ({"h": {"fleetos_pool": ""}}, "h", {}, None),
])
def test_a_host_input_comes_from_the_host_then_the_play(variables, run_host, play, expected):
    assert _fleet.host_inputs(variables, run_host, play)["h"]["pool"] == expected


@pytest.mark.parametrize("value, expected", [
    (None, False), (True, True), ("true", True), ("false", False), ("no", False),
])
def test_pool_paused_is_a_boolean(value, expected):
    variables = {"h": {} if value is None else {"fleetos_pool_paused": value}}
    assert _fleet.host_inputs(variables)["h"]["pool_paused"] is expected


@pytest.mark.parametrize("value, kind", [(["r/os:1", "sha256:1"], "list"), ({"image": "r/os:1"}, "mapping"), (3, "number")])
def test_a_text_input_that_is_not_a_text_is_that_hosts_error_only(value, kind):
    hostvars = {"h1": {"fleetos_rollout_image": value}, "h2": {"fleetos_rollout_image": "r/os:1"}}
    record = fleet(hostvars)
    # One sentence naming the variable and the host; the other host is planned as ever.
    assert record["hosts"]["h1"]["plan"]["action"] == "error"
    assert record["hosts"]["h1"]["error"] == "The variable fleetos_rollout_image of host h1 is a %s, not a text." % kind
    assert record["hosts"]["h2"]["error"] is None and record["wanted"] == ["r/os:1"]


def test_read_hosts_looks_each_host_up_once_and_names_the_secrets_it_has():
    class Counting(dict):
        looked_up = []

        def __getitem__(self, host):
            self.looked_up.append(host)
            return dict.__getitem__(self, host)

    hostvars = Counting({
        "h1": {"fleetos_pool_pull_secret": "pool_secret", "pool_secret": "x", "gpu_secret": "y", "other": 1},
        "h2": {"fleetos_node_labels": {"gpu": "yes"}, "unrelated": 2},
    })
    values, defined = _fleet.read_hosts(hostvars, ["h1", "h2"], secrets=["gpu_secret"])
    assert Counting.looked_up == ["h1", "h2"]
    assert values == {"h1": {"fleetos_pool_pull_secret": "pool_secret"}, "h2": {"fleetos_node_labels": {"gpu": "yes"}}}
    assert defined == {"h1": ["gpu_secret", "pool_secret"], "h2": []}


def fleet(hostvars, manifests=None, **kwargs):
    return rollout_plan_fleet(sorted(hostvars), hostvars, MANIFESTS if manifests is None else manifests, **kwargs)


def test_without_inputs_each_host_has_its_plan_and_error_only():
    hostvars = {"h1": {}, "h3": {"fleetos_pool_image": POOL_IMAGE}, "h5": {"fleetos_node_labels": {"gpu": "yes"}}}
    full, brief = fleet(hostvars), fleet(hostvars, inputs=False)
    assert {host: sorted(entry) for host, entry in brief["hosts"].items()} == {
        host: ["error", "plan"] for host in hostvars}
    assert brief["hosts"] == {host: {"error": entry["error"], "plan": entry["plan"]}
                              for host, entry in full["hosts"].items()}
    assert brief["hosts"]["h5"]["error"].startswith("mi.yaml document 1 (MachineImage 'gpu')")
    assert (brief["wanted"], brief["manifests"]) == (full["wanted"], full["manifests"])


@pytest.mark.parametrize("host, variables, source, name, digest, error", [
    ("h1", {"fleetos_pool_image": POOL_IMAGE}, "nodeName", "pin", D2, None),
    ("h2", {"fleetos_pool_image": POOL_IMAGE, "fleetos_node_labels": {"zone": "a"}}, "selector", "zone", D3, None),
    ("h3", {"fleetos_pool_image": POOL_IMAGE}, "pool", None, D1, None),
    ("h4", {}, "pool", None, None, None),
    ("h5", {"fleetos_node_labels": {"gpu": "yes"}}, "error", None, None,
     "mi.yaml document 1 (MachineImage 'gpu'): spec.pullSecret names the variable 'gpu_secret', which is not "
     "defined for host h5"),
    ("h6", {"fleetos_node_labels": {"gpu": "yes"}, "gpu_secret": "s"}, "selector", "gpu", D3, None),
    ("h7", {"fleetos_node_labels": {"gpu": "yes", "zone": "a"}, "gpu_secret": "s"}, "error", None, None,
     "host h7 matches 2 MachineImages at the selector level: 'gpu' (mi.yaml document 1, spec.nodeSelector) and "
     "'zone' (mi.yaml document 1, spec.nodeSelector); make them disjoint or pin the host with spec.nodeName"),
])
def test_every_host_is_planned_as_the_filter_plans_one(host, variables, source, name, digest, error):
    record = fleet({host: variables})
    entry = record["hosts"][host]
    plan = entry["plan"]
    assert (plan["source"], plan["name"], plan["digest"], entry["error"]) == (source, name, digest, error)
    if error is None:
        assert plan == host_plan(entry["assignment"], host, labels=variables.get("fleetos_node_labels"))
    else:
        assert (plan["action"], plan["reason"]) == ("error", error)


def test_without_the_pull_secret_check_a_missing_secret_is_no_error():
    record = fleet({"h5": {"fleetos_node_labels": {"gpu": "yes"}}}, check_pull_secret=False)
    assert record["hosts"]["h5"]["plan"]["name"] == "gpu"


def test_manifests_that_did_not_load_fail_every_host_with_their_sentence():
    broken = dict(MANIFESTS, objects=[], error="MachineImage manifests did not load: mi.yaml is binary")
    record = fleet({"h1": {}, "h2": {"fleetos_pool": "web"}})
    assert record["hosts"]["h1"]["error"] is None
    record = fleet({"h1": {}, "h2": {"fleetos_pool": "web"}}, manifests=broken)
    assert {host: (e["plan"]["action"], e["plan"]["pool"], e["plan"]["reason"]) for host, e in record["hosts"].items()} == {
        "h1": ("error", "default", broken["error"]), "h2": ("error", "web", broken["error"])}
    assert record["wanted"] == []


def test_wanted_names_each_image_once_and_the_fallback_comes_from_the_play():
    record = fleet({"h1": {}, "h3": {"fleetos_pool_image": POOL_IMAGE}, "h4": {}, "h8": {}}, run_host="h4",
                   play={"fallback_image": "r/os:latest"})
    assert record["wanted"] == ["r/os:latest", POOL_IMAGE, "r/os@" + D2]
    assert record["hosts"]["h8"]["plan"]["source"] == "fleetos_rollout_image"


def test_read_hosts_reads_the_extra_names_in_the_same_lookup():
    hostvars = {"h1": {"fleetos_plan_show_hosts": 5, "fleetos_pool_image": POOL_IMAGE, "other": 1}, "h2": {}}
    values, _defined = _fleet.read_hosts(hostvars, ["h1", "h2"], extra=["fleetos_plan_show_hosts", "fleetos_pool_image"])
    assert values == {"h1": {"fleetos_pool_image": POOL_IMAGE, "fleetos_plan_show_hosts": 5}, "h2": {}}


@pytest.mark.parametrize("value, expected", [
    ({"a": (1, 2)}, {"a": [1, 2]}),
    ([{"b": None}], [{"b": None}]),
    ("text", "text"),
])
def test_plain_gives_dicts_and_lists(value, expected):
    found = _fleet.plain(value)
    assert found == expected and type(found) is type(expected)
