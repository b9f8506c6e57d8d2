# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The rollout's report: one row per host from the hosts' variables, the run's result, and its Markdown and SVG
renderings."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from ansible.errors import AnsibleFilterError
from ansible_collections.fleetos.layering.plugins.plugin_utils.rollout import _rollout_report


D_OLD = "sha256:" + "a" * 64
D_NEW = "sha256:" + "b" * 64


def _plan(host, pool, action):
    return {"host": host, "pool": pool, "action": action, "image": "r/os@" + D_NEW, "digest": D_NEW,
            "old_digest": D_OLD, "reason": "pool default"}


def _fleet():
    staged = {"status": "staged", "changed": True, "stage_start": 100.0, "staged_at": 110.0, "fetched_blobs": 2}
    ok = {"status": "activated", "holds_slot": False, "reboot_start": 120.0, "reboot_end": 125.0,
          "verified_at": 127.0, "old_digest": D_OLD, "booted_digest": D_NEW, "rolled_back": False}
    rolled = {"status": "failed", "holds_slot": False, "reboot_start": 120.0, "reboot_end": 126.0,
              "verified_at": None, "rolled_back": True, "rollback_start": 128.0, "rollback_end": 135.0,
              "old_digest": D_OLD, "booted_digest": D_OLD, "reason": "health: lab-health failed; rolled back"}
    down = {"status": "failed", "holds_slot": True, "reboot_start": 120.0, "reboot_end": None,
            "old_digest": D_OLD, "reason": "did not come back within 20 s"}
    return [
        {"inventory_hostname": "n1", "__fleetos_rollout_plan": _plan("n1", "a", "stage"), "os_stage_result": staged,
         "os_activate_result": ok},
        {"inventory_hostname": "n2", "__fleetos_rollout_plan": _plan("n2", "a", "stage"), "os_stage_result": staged,
         "os_activate_result": rolled},
        {"inventory_hostname": "n3", "__fleetos_rollout_plan": _plan("n3", "b", "stage"), "os_stage_result": staged,
         "os_activate_result": down},
        {"inventory_hostname": "n4", "__fleetos_rollout_plan": _plan("n4", "b", "stage"), "os_stage_result": staged},
        {"inventory_hostname": "n5", "__fleetos_rollout_plan": _plan("n5", "b", "stage"),
         "os_stage_result": {"status": "failed", "error": "registry down"}},
        {"inventory_hostname": "n6", "__fleetos_rollout_plan": _plan("n6", "c", "unchanged")},
        {"inventory_hostname": "n7", "__fleetos_rollout_plan": _plan("n7", "c", "skipped")},
        # Staged earlier, in the activation list, but it went unreachable before recording anything.
        {"inventory_hostname": "n8", "__fleetos_rollout_plan": _plan("n8", "c", "activate"),
         "os_activate_result": {"status": "started", "holds_slot": True, "reboot_start": None}},
        # To be staged, but unreachable before its stage was known (the stage's task registered its unreachable
        # result, not a record); another image was staged before the run.
        {"inventory_hostname": "n9", "__fleetos_rollout_plan": dict(_plan("n9", "c", "stage"), staged_digest=D_OLD),
         "os_stage_result": {"unreachable": True, "changed": False, "msg": "Failed to connect to the host via ssh"}},
    ]


def test_rollout_report():
    summary = {"started": ["n1", "n2", "n3", "n8"],
               "budgets": {"a": 1, "b": 1, "c": 1}, "stop_reason": "2 activation(s) failed", "max_failures": 2}
    report = _rollout_report.rollout_report(_fleet(), summary, started_at=90, ended_at=140, started_at_text="t0")
    status = {r["host"]: r["status"] for r in report["hosts"]}
    assert status == {"n1": "activated", "n2": "failed", "n3": "failed", "n4": "not_activated",
                      "n5": "stage_failed", "n6": "unchanged", "n7": "skipped", "n8": "failed", "n9": "stage_failed"}
    rows = {r["host"]: r for r in report["hosts"]}
    assert rows["n2"]["rolled_back"] and rows["n2"]["booted_digest"] == D_OLD
    assert rows["n3"]["slot_held"] and rows["n8"]["slot_held"] and not rows["n2"]["slot_held"]
    assert "2 activation(s) failed" in rows["n4"]["reason"]
    assert "registry down" in rows["n5"]["reason"] and rows["n5"]["reboot_start"] is None
    # Never said to be staged, nor "not activated": it dropped out in the stage.
    assert rows["n9"]["reason"] == _rollout_report.UNREACHABLE_IN_STAGE and rows["n9"]["staged_before"] == D_OLD
    assert rows["n1"]["staged_before"] is None
    assert "%s was staged before this run" % D_OLD[7:19] in _rollout_report.rollout_report_markdown(report)
    assert rows["n1"]["verified"] and rows["n1"]["staged_at"] == 110.0 and rows["n1"]["ended_at"] == 127.0
    assert report["result"] == "failed"
    assert report["reboots"] == 4  # n1, n2, n3 activations and n2's rollback
    assert report["pools"]["b"]["counts"]["not_activated"] == 1
    assert report["pools"]["b"]["counts"]["stage_failed"] == 1 and report["pools"]["c"]["counts"]["stage_failed"] == 1
    assert report["pools"]["a"]["max_unavailable"] == 1
    assert report["counts"]["failed"] == 3
    json.dumps(report)


class _CountingHostvars(dict):
    """Ansible's hostvars as the filter sees it: each lookup of a host gathers all of its variables."""

    def __init__(self, *args):
        super().__init__(*args)
        self.lookups = []

    def __getitem__(self, host):
        self.lookups.append(host)
        return super().__getitem__(host)


def test_rollout_report_from_host_names_looks_each_host_up_once_and_reports_the_hosts_of_the_run():
    summary = {"started": ["n1", "n2", "n3", "n8"], "budgets": {"a": 1, "b": 1, "c": 1},
               "stop_reason": "2 activation(s) failed", "max_failures": 2}
    fleet = _fleet()
    hostvars = _CountingHostvars((hv["inventory_hostname"], dict(hv, __fleetos_rollout_started=90.0)) for hv in fleet)
    # Another host of the inventory, not of this run.
    hostvars["other"] = {"inventory_hostname": "other", "__fleetos_rollout_plan": _plan("other", "a", "stage")}
    names = ["other"] + [hv["inventory_hostname"] for hv in fleet]
    by_names = _rollout_report.rollout_report(names, summary, hostvars=hostvars, started_at=90, ended_at=140)
    assert sorted(hostvars.lookups) == sorted(names)
    assert by_names == _rollout_report.rollout_report(fleet, summary, started_at=90, ended_at=140)


def test_rollout_report_success_and_render():
    fleet = _fleet()[:1] + _fleet()[5:6]
    slots = [{"host": "n1", "pool": "a", "granted_at": 112.0, "released_at": 127.0, "holds_slot": False}]
    report = _rollout_report.rollout_report(fleet, {"started": ["n1"], "slots": slots, "budgets": {"a": 1}},
                                            started_at=90, ended_at=140, started_at_text="t0")
    assert report["result"] == "success" and report["stop_reason"] is None and report["slots"] == slots
    text = _rollout_report.rollout_report_markdown(report)
    assert "| n1 | a | activated | aaaaaaaaaaaa | bbbbbbbbbbbb | +20.0s | - | +30.0s | +35.0s | +37.0s | no |" in text
    assert "1. n1 (a): +22.0s to +37.0s" in text
    svg = _rollout_report.rollout_timeline_svg(report)
    root = ET.fromstring(svg)
    rects = [e for e in root.iter("{http://www.w3.org/2000/svg}rect") if e.find("{http://www.w3.org/2000/svg}title") is not None]
    # n1: stage, reboot, verify bars; n6 (unchanged) has none.
    assert [r.find("{http://www.w3.org/2000/svg}title").text.split(":")[0] for r in rects] == \
        ["n1 stage", "n1 reboot", "n1 verify"]
    stage = rects[0]
    assert float(stage.get("x")) == pytest.approx(150 + 730 * (100 - 90) / 50.0)


def test_rollout_report_activation_kinds():
    """A soft reboot and a full one (with why not soft) each in its row, counted, drawn and written apart."""
    fleet = _fleet()[:2]
    fleet[0]["os_activate_result"] = dict(fleet[0]["os_activate_result"], activation="soft", activation_reason=None)
    fleet[1]["os_activate_result"] = dict(fleet[1]["os_activate_result"], activation="full",
                                          activation_reason="bootc says no")
    report = _rollout_report.rollout_report(fleet, {"started": ["n1", "n2"], "budgets": {"a": 2}}, started_at=90,
                                            ended_at=140)
    rows = dict((row["host"], row) for row in report["hosts"])
    assert (rows["n1"]["activation"], rows["n1"]["disruption_s"]) == ("soft", 5.0)
    assert (rows["n2"]["activation"], rows["n2"]["activation_reason"], rows["n2"]["disruption_s"]) == \
        ("full", "bootc says no", 6.0)
    assert report["activations"] == {"full": 1, "soft": 1}
    text = _rollout_report.rollout_report_markdown(report)
    assert "| +20.0s | soft | +30.0s |" in text and "full reboot: bootc says no" in text
    svg = _rollout_report.rollout_timeline_svg(report)
    assert "n1 soft reboot: 5.0s" in svg and "n2 reboot: 6.0s" in svg


def test_a_host_declined_for_a_required_soft_reboot_is_not_activated_and_no_failure():
    fleet = _fleet()[:1] + [dict(_fleet()[1], os_activate_result=None)]
    why = "soft reboot required, and bootc says the staged deployment is not soft-reboot capable"
    report = _rollout_report.rollout_report(fleet, {"started": ["n1"], "budgets": {"a": 1}, "declined": {"n2": why}},
                                            started_at=90, ended_at=140)
    rows = dict((row["host"], row) for row in report["hosts"])
    assert (rows["n2"]["status"], rows["n2"]["reason"]) == ("not_activated", "staged, not activated: " + why)
    # Left staged on purpose: the run's result is staged, not failed (rc 0).
    assert report["result"] == "staged" and report["declined"] == {"n2": why}
    assert report["counts"]["not_activated"] == 1 and report["counts"]["failed"] == 0


@pytest.mark.parametrize("func", [_rollout_report.rollout_report_markdown, _rollout_report.rollout_timeline_svg])
def test_render_rejects_non_report(func):
    with pytest.raises(AnsibleFilterError):
        func({"nope": 1})


def test_a_failed_plan_and_a_host_without_a_plan_are_plan_failed():
    fleet = [
        {"inventory_hostname": "n1", "__fleetos_rollout_plan": _plan("n1", "a", "error")},
        # Unreachable before its plan: it still has a row, with the cause.
        {"inventory_hostname": "n2"},
        {"inventory_hostname": "n3", "__fleetos_rollout_plan": _plan("n3", "a", "pin")},
    ]
    report = _rollout_report.rollout_report(fleet, {})
    rows = {r["host"]: r for r in report["hosts"]}
    assert (rows["n1"]["status"], rows["n2"]["status"], rows["n3"]["status"]) == ("plan_failed", "plan_failed", "unchanged")
    assert rows["n2"]["reason"] == _rollout_report.NO_PLAN
    assert (report["result"], report["counts"]["plan_failed"]) == ("failed", 2)


def test_stage_only_reports_staged_hosts_and_the_result_staged():
    fleet = _fleet()
    staged_only = [fleet[3], fleet[5]]  # n4 staged and not activated, n6 unchanged
    report = _rollout_report.rollout_report(staged_only, {"started": []}, activate=False)
    rows = {r["host"]: r for r in report["hosts"]}
    assert (rows["n4"]["status"], report["result"], report["counts"]["staged"]) == ("staged", "staged", 1)
    assert "activation was not requested" in rows["n4"]["reason"]
    # A stage that failed still fails the run; a stopped rollout's staged hosts are not_activated.
    assert _rollout_report.rollout_report([fleet[3], fleet[4]], {}, activate=False)["result"] == "failed"
    stopped = _rollout_report.rollout_report([fleet[3]], {"stop_reason": "2 activation(s) failed"}, activate=False)
    assert (stopped["hosts"][0]["status"], stopped["result"]) == ("not_activated", "failed")
    assert "| staged |" in _rollout_report.rollout_report_markdown(report)


def test_a_run_stopped_after_its_verified_canary_is_canary_verified():
    fleet = _fleet()
    canary = {"started": ["n1"], "stop_reason": "the canary batch (n1) is verified healthy",
              "canary_verified": "True"}
    report = _rollout_report.rollout_report([fleet[0], fleet[3], fleet[5]], canary, rollout="r-9")
    rows = {r["host"]: r for r in report["hosts"]}
    assert (report["result"], report["rollout"]) == ("canary_verified", "r-9")
    assert rows["n4"]["status"] == "not_activated" and "canary batch (n1) is verified" in rows["n4"]["reason"]
    # A failure besides the hosts left for the rerun is still a failure.
    assert _rollout_report.rollout_report([fleet[0], fleet[3], fleet[4]], canary)["result"] == "failed"
    assert _rollout_report.rollout_report([fleet[0], fleet[3]], dict(canary, canary_verified=False))["result"] == "failed"


def test_an_unset_stop_reason_rendered_as_empty_text_is_none():
    """ansible-core before 2.19 renders the role's unset stop reason as "": the report says None, as on 2.19."""
    fleet = _fleet()[:1]
    report = _rollout_report.rollout_report(fleet, {"started": ["n1"], "budgets": {"a": 1}, "stop_reason": ""})
    assert report["result"] == "success" and report["stop_reason"] is None


def test_a_verified_host_whose_fleetlock_slot_stays_taken_is_activated_and_says_so():
    fleet = _fleet()[:1]
    fleet[0] = dict(fleet[0], os_activate_result=dict(fleet[0]["os_activate_result"], fleetlock_held=True))
    report = _rollout_report.rollout_report(fleet, {"started": ["n1"]})
    [row] = report["hosts"]
    assert row["status"] == "activated" and report["result"] == "success"
    assert "its FleetLock slot stays taken until FleetLock answers" in row["reason"]


def test_hosts_a_closed_window_left_are_staged_and_the_result_is_window_closed():
    fleet = _fleet()
    closed = {"a": {"reason": "the maintenance window closes at 2026-12-05 11:00 UTC, 300 s left, less than the 600 s"
                              " an activation takes", "hosts": ["n4"], "next_open": "2026-12-12T10:00:00+00:00",
                    "next_open_local": "2026-12-12 11:00 Europe/Berlin", "zone": "Europe/Berlin"}}
    report = _rollout_report.rollout_report([fleet[0], fleet[3], fleet[5]], {"started": ["n1"], "windows_closed": closed})
    rows = {r["host"]: r for r in report["hosts"]}
    assert (report["result"], rows["n1"]["status"], rows["n4"]["status"]) == ("window_closed", "activated", "staged")
    assert rows["n4"]["reason"] == (
        "staged, not activated: the maintenance window closes at 2026-12-05 11:00 UTC, 300 s left, less than the"
        " 600 s an activation takes; the next window of pool a opens at 2026-12-12 11:00 Europe/Berlin"
        " (2026-12-12T10:00:00+00:00)")
    assert report["windows_closed"] == closed
    assert ("Pool a: its maintenance window gave no more slots (the maintenance window closes at 2026-12-05 11:00 UTC"
            in _rollout_report.rollout_report_markdown(report))
    assert "1 host(s) left staged; its next window opens at 2026-12-12 11:00 Europe/Berlin" \
        in _rollout_report.rollout_report_markdown(report)
    # A failure besides is still a failure.
    assert _rollout_report.rollout_report([fleet[0], fleet[3], fleet[4]], {"started": ["n1"], "windows_closed": closed})[
        "result"] == "failed"
