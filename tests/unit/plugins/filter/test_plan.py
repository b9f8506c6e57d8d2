# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The planning filters: their options (report, check, play, pins, host_lines), their refusals as
AnsibleFilterError, and what each hands to plugin_utils (_plan, _fleet, _plan_report, _resume, _rollout_hosts,
tested in tests/unit/plugins/plugin_utils/)."""

from __future__ import annotations

import json
import re

import pytest

from ansible.errors import AnsibleFilterError
from ansible.plugins.filter.core import to_nice_json
from ansible_collections.fleetos.layering.plugins.filter import plan as plan_filter
from ansible_collections.fleetos.layering.plugins.filter.plan import (
    FilterModule,
    rollback_hosts,
    rollback_plan,
    rollout_activation,
    rollout_hosts,
    rollout_lease_plan,
    rollout_lease_refusals,
    rollout_lease_takeover,
    rollout_lease_takeovers,
    rollout_plan,
    rollout_plan_fleet,
    rollout_plan_hosts,
    rollout_plan_inspections,
    rollout_plan_report,
)
from ansible_collections.fleetos.layering.plugins.filter.playbook_spec import playbook_variable_errors, playbook_variables
from ansible_collections.fleetos.layering.plugins.plugin_utils.rollout import _plan_report
from ansible_collections.fleetos.layering.plugins.plugin_utils.rollout._plan import host_plan
from ansible_collections.fleetos.layering.tests.unit.plugins.plugin_utils.rollout.test__fleet import POOL_IMAGE, fleet
from ansible_collections.fleetos.layering.tests.unit.plugins.plugin_utils.rollout.test__plan_report import (
    NOT_READ,
    READ,
)
from ansible_collections.fleetos.layering.tests.unit.plugins.plugin_utils.rollout.test__rollout_hosts import (
    TARGET,
    acquired,
    dead_owner,
    deployments,
    leased,
    me,
    plan,
    refused,
)

PINS = {"r/os:1": "sha256:" + "1" * 64}


@pytest.mark.parametrize("options", [
    {},
    {"manifest_errors": ["bad.yaml is binary"], "warnings": ["a warning"], "report_dir": "/srv/plan",
     "host_lines": False},
    {"report_dir": "", "host_lines": "yes"},
])
def test_with_report_the_filter_gives_the_report_of_its_plan(options):
    hostvars = {"h1": {}, "h3": {"fleetos_pool_image": POOL_IMAGE}, "h5": {"fleetos_node_labels": {"gpu": "yes"}},
                "h6": {"fleetos_node_labels": {"zone": "a"}}}
    report = fleet(hostvars, report=options)
    expected = rollout_plan_report(fleet(hostvars, inputs=False), options.get("manifest_errors"),
                                   options.get("warnings"), report_dir=options.get("report_dir"),
                                   host_lines=options.get("host_lines", True))
    assert report == expected
    assert (report["count"], report["errors"]) == (4, 1)
    assert len(report["hosts"]) == (0 if options.get("host_lines") is False else 4)
    assert report["stats"]["fleetos_last_plan"]["report_dir"] == (options.get("report_dir") or None)


@pytest.mark.parametrize("report, message", [
    ("yes", "report must be a mapping of manifest_errors, warnings, report_dir, host_lines, not 'yes'"),
    ({"report_dir": "/x", "table": True}, "report names table; expected some of manifest_errors, warnings"),
])
def test_a_report_that_is_no_mapping_of_the_reports_options_is_refused(report, message):
    with pytest.raises(AnsibleFilterError, match=re.escape(message)):
        fleet({"h1": {}}, report=report)


@pytest.mark.parametrize("report", [None, {}])
def test_with_check_the_filter_gives_the_variable_errors_the_check_task_would(report):
    hostvars = {"h1": {"fleetos_plan_show_hosts": "many"}, "h3": {"fleetos_pool_image": POOL_IMAGE},
                "h5": {"fleetos_plan_show_hosts": 10}}
    result = fleet(hostvars, report=report, check="plan")
    expected = playbook_variable_errors(playbook_variables(sorted(hostvars), hostvars, "plan"), "plan")
    assert result["variable_errors"] == expected
    assert len(expected) == 1 and "fleetos_plan_show_hosts" in expected[0] and "h1" in expected[0]
    # The plan itself is the one made without the check.
    without = fleet(hostvars, report=report)
    assert {k: v for k, v in result.items() if k != "variable_errors"} == without
    assert "variable_errors" not in without


def test_with_check_right_variables_give_no_sentence_and_an_unknown_playbook_is_refused():
    assert fleet({"h1": {"fleetos_plan_show_hosts": 3}}, check="plan")["variable_errors"] == []
    with pytest.raises(AnsibleFilterError, match="has no argument spec"):
        fleet({"h1": {}}, check="no-such-playbook")


def test_a_play_value_for_no_input_is_refused():
    with pytest.raises(AnsibleFilterError, match="play names pools, which no host input is"):
        fleet({"h1": {}}, play={"pools": "x"})


def test_the_report_sorts_hosts_as_ansible_does_and_counts_errors():
    error = host_plan(None, "B-02", error="it failed")
    plans = (("web-03", NOT_READ), ("B-02", error), ("db-01", READ), ("a-01", error))
    fleet = {"hosts": {name: {"plan": plan} for name, plan in plans}}
    fleet["hosts"]["a-01"]["plan"] = dict(error, host="a-01")
    report = rollout_plan_report(fleet, [], [], report_dir="")
    assert [line.split()[0] for line in report["table"][1:]] == ["a-01", "B-02", "db-01", "web-03"]
    assert (report["count"], report["errors"], report["reasons"]) == (4, 2, ["it failed"])
    rows = json.loads(report["json"])["hosts"]
    assert report["json"] == to_nice_json({"manifest_errors": [], "hosts": rows, "errors": 2, "warnings": []})
    assert report["stats"]["fleetos_last_plan"]["result"] == "failed"
    assert report["stats"]["fleetos_last_plan"]["report_dir"] is None


@pytest.mark.parametrize("host_lines", [True, "yes", False, "false"])
def test_the_report_gives_each_hosts_lines_unless_told_not_to(host_lines):
    plans = [NOT_READ, READ]
    report = rollout_plan_report(plans, ["bad.yaml is binary"], ["a warning"], host_lines=host_lines)
    shown = host_lines in (True, "yes")
    assert report["hosts"] == ([_plan_report.host_lines(READ), _plan_report.host_lines(NOT_READ)] if shown else [])
    # Every host is still in the table, plan.md and plan.json; the report names its inputs' errors.
    assert [line.split()[0] for line in report["table"][1:]] == ["db-01", "web-03"]
    assert "| web-03 |" in report["markdown"] and len(json.loads(report["json"])["hosts"]) == 2
    assert (report["manifest_errors"], report["warnings"]) == (["bad.yaml is binary"], ["a warning"])


@pytest.mark.parametrize("hosts", ["h1", None, {"h1": {}}])
def test_the_fleet_filter_refuses_hosts_that_are_no_list(hosts):
    with pytest.raises(AnsibleFilterError, match="rollout_plan_fleet needs a list of host names"):
        rollout_plan_fleet(hosts, {}, {})


@pytest.mark.parametrize("plans", ["h1", None, 3])
def test_the_report_filter_refuses_what_is_no_plan_record_or_list(plans):
    with pytest.raises(AnsibleFilterError, match="rollout_plan_report needs the fleet's plan record"):
        rollout_plan_report(plans)


def test_rollout_plan_takes_pins_as_a_mapping_and_an_empty_text_as_unset():
    assert rollout_plan(None, "h1", pins="") == rollout_plan(None, "h1") == host_plan(None, "h1")
    assert rollout_plan(None, "h1", update_agents="", soft_reboot="") == host_plan(None, "h1")
    with pytest.raises(AnsibleFilterError, match=re.escape("pins must be a mapping of image tag to digest "
                                                           "(fleetos_last_rollout.images), not ['r/os:1']")):
        rollout_plan(None, "h1", pins=["r/os:1"])


def test_rollout_plan_hands_an_empty_pool_fallback_and_lock_on_as_unset(monkeypatch):
    given = {}
    monkeypatch.setattr(plan_filter, "host_plan", lambda assignment, host, **kwargs: given.update(kwargs) or {})
    rollout_plan(None, "h1", pool="", fallback_image="", fallback_transport="", lock="")
    assert [given[name] for name in ("pool", "fallback_image", "fallback_transport", "lock")] == [None] * 4


def test_rollout_plan_records_an_error_as_the_hosts_plan():
    plan_of_error = rollout_plan(None, "h1", pool="web", error="planning failed")
    assert (plan_of_error["action"], plan_of_error["pool"], plan_of_error["reason"]) == ("error", "web", "planning failed")


def stage(image, **extra):
    return dict({"action": "stage", "booted_checksum": "c" * 64, "staged_image": None, "image": image,
                 "transport_kind": "registry", "platform_digest": "sha256:" + "2" * 64}, **extra)


def test_inspections_are_the_pinned_platform_images_of_hosts_to_stage_or_a_refusal():
    image = "r/os@" + TARGET
    plans = [stage(image), stage(image, action="unchanged"), stage(image, staged_image="r/os")]
    assert rollout_plan_inspections(plans) == ["r/os@sha256:" + "2" * 64]
    with pytest.raises(AnsibleFilterError, match="image reference 'r/os :1' contains whitespace"):
        rollout_plan_inspections([stage("r/os :1")])


@pytest.mark.parametrize(("status", "rollback_from", "message"), [
    ("booted", None, "rollback_plan needs the host's os_info result, a mapping"),
    ({}, "abc", "fleetos_rollback_from 'abc' is not a digest: expected sha256: and 64 hex digits"),
])
def test_rollback_plan_refuses_what_is_no_status_or_no_digest(status, rollback_from, message):
    with pytest.raises(AnsibleFilterError, match=re.escape(message)):
        rollback_plan(status, "h1", rollback_from=rollback_from)


@pytest.mark.parametrize(("action", "stage_result", "activate"), [
    ("stage", {"status": "staged", "staged_checksum": "c" * 64}, True),
    ("stage", {"status": "staged", "staged_checksum": None}, False),
    ("unchanged", None, False),
])
def test_activation_follows_the_plan_and_the_stage(action, stage_result, activate):
    assert rollout_activation({"action": action}, stage_result)["activate"] is activate


def test_the_lease_filters_name_the_holder_fold_the_refusal_in_and_take_over_a_gone_rollout():
    gone = refused(dead_owner())
    assert rollout_lease_takeover(gone, me()) == "other-run"
    assert rollout_lease_takeover(refused(me()), me()) is None
    refusals = rollout_lease_refusals({"n1": gone, "n2": acquired()})
    assert list(refusals.values()) == [["n1"]] and next(iter(refusals)).startswith("rollout other-run (ops@")
    folded = rollout_lease_plan(plan("n2", "stage"), acquired(), refusals, before="the rollback")
    assert (folded["action"], folded["reason"]) == (
        "error", "stopped before the rollback: another rollout holds hosts of this one (%s on n1)" % next(iter(refusals)))


@pytest.mark.parametrize("call", [
    lambda: rollout_plan_hosts({"hosts": {}}, {}, "n1"),
    lambda: rollout_plan_hosts(["n1"], {}, ["n1"]),
    lambda: rollout_lease_takeovers({}, {}, "n1", me()),
    lambda: rollout_hosts({}, {}, "n1"),
    lambda: rollback_hosts("n1", {}, me()),
])
def test_the_play_filters_refuse_hosts_that_are_no_list(call):
    with pytest.raises(AnsibleFilterError, match="needs .*a list of host names"):
        call()


def test_plan_hosts_plans_each_host_read_with_empty_lock_and_pins_unset():
    record = fleet({"n1": {"fleetos_pool_image": POOL_IMAGE}, "n2": {}})
    hostvars = {"n1": {"os_plan_lease_result": acquired()}, "n2": {"os_plan_lease_result": {"skipped": True}}}
    plans = rollout_plan_hosts(record, hostvars, ["n1", "n2"], lock="", pins="")
    assert list(plans) == ["n1"] and plans == rollout_plan_hosts(record, hostvars, ["n1", "n2"])
    assert (plans["n1"]["source"], plans["n1"]["status_read"]) == ("pool", True)


@pytest.mark.parametrize(("activate", "book"), [(True, ["n1"]), ("false", [])])
def test_rollout_hosts_books_the_hosts_to_activate_unless_told_not_to(activate, book):
    decided = rollout_hosts({"n1": plan("n1", "stage")}, {"n1": {"os_plan_lease_result": acquired()}}, ["n1"],
                            activate=activate)
    assert (decided["book"], decided["stage"]) == (book, ["n1"])


def test_the_lease_takeovers_of_the_play():
    hostvars = {"n1": {"os_plan_lease_result": refused(dead_owner())}, "n2": {"os_plan_lease_result": acquired()}}
    plans = {"n1": plan("n1", "stage"), "n2": plan("n2", "stage")}
    assert rollout_lease_takeovers(plans, hostvars, ["n1", "n2"], me(), break_lease="") == {"n1": "other-run"}


def test_the_filters_are_registered_by_their_names():
    filters = FilterModule().filters()
    assert {name: function.__name__ for name, function in filters.items()} == {name: name for name in filters}
    assert len(filters) == 13


def test_rollback_hosts_takes_empty_texts_as_unset_and_refuses_a_rollback_from_that_is_no_digest():
    hostvars = {"n1": {"__fleetos_rollback_lease": leased(deployments(booted=TARGET))}}
    decided = rollback_hosts(["n1"], hostvars, me(), break_lease="", rollback_from="")
    assert decided["book"] == ["n1"] and decided["hosts"]["n1"]["plan"]["old_digest"] == TARGET
    assert rollback_hosts(["n1"], hostvars, me(), rollback_from="sha256:" + "0" * 64)["release"] == ["n1"]
    with pytest.raises(AnsibleFilterError, match="fleetos_rollback_from 'latest' is not a digest"):
        rollback_hosts(["n1"], hostvars, me(), rollback_from="latest")
