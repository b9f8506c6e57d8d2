# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""_stats: a report reduced for set_stats."""

from __future__ import annotations

import pytest

from ansible_collections.fleetos.layering.plugins.module_utils._errors import InvalidInputError
from ansible_collections.fleetos.layering.plugins.plugin_utils._stats import job_stats

A, B = "sha256:" + "a" * 64, "sha256:" + "b" * 64


def test_rollout_report_keeps_result_counts_and_per_host_digests():
    report = {"rollout": "r1", "result": "canary_verified", "stop_reason": "canary verified",
              "counts": {"activated": 1, "not_activated": 1},
              "hosts": [{"host": "n1", "status": "activated", "target_digest": B, "booted_digest": B, "reason": "x"},
                        {"host": "n2", "status": "not_activated", "target_digest": B, "booted_digest": A}]}
    stats = job_stats(report, "rollout", report_dir="/runner/artifacts/7/rollout-report")
    assert list(stats) == ["fleetos_last_rollout"]
    value = stats["fleetos_last_rollout"]
    assert (value["result"], value["rollout"], value["stop_reason"]) == ("canary_verified", "r1", "canary verified")
    assert value["counts"] == report["counts"] and value["report_dir"].endswith("rollout-report")
    assert value["hosts"] == {"n1": {"status": "activated", "target_digest": B, "booted_digest": B, "activation": None},
                              "n2": {"status": "not_activated", "target_digest": B, "booted_digest": A,
                                     "activation": None}}
    assert (value["activations"], value["declined"]) == ({}, [])


def test_rollout_counts_soft_and_full_reboots_and_the_declined_hosts():
    report = {"rollout": "r1", "result": "staged", "counts": {"activated": 2, "not_activated": 1},
              "activations": {"full": 1, "soft": 1}, "declined": {"n3": "soft reboot required, and no"},
              "hosts": [{"host": "n1", "status": "activated", "activation": "soft"},
                        {"host": "n2", "status": "activated", "activation": "full"},
                        {"host": "n3", "status": "not_activated", "reason": "staged, not activated: soft reboot required"}]}
    value = job_stats(report, "rollout")["fleetos_last_rollout"]
    assert value["activations"] == {"full": 1, "soft": 1} and value["declined"] == ["n3"]
    assert [value["hosts"][h]["activation"] for h in ("n1", "n2", "n3")] == ["soft", "full", None]
    # The declined host is named in the summary, with why.
    assert "| n3 | not_activated | staged, not activated: soft reboot required |" in value["summary"]


def test_plan_counts_actions_and_fails_on_an_error():
    rows = [{"host": "n1", "action": "stage", "digest": B, "booted_digest": A},
            {"host": "n2", "action": "error", "digest": None, "booted_digest": A},
            {"host": "n3", "action": "stage", "digest": B, "booted_digest": A}]
    value = job_stats({"hosts": rows}, "plan")["fleetos_last_plan"]
    assert value["counts"] == {"stage": 2, "error": 1} and value["result"] == "failed"
    assert value["hosts"]["n3"] == {"status": "stage", "target_digest": B, "booted_digest": A}
    assert job_stats({"hosts": rows[:1]}, "plan")["fleetos_last_plan"]["result"] == "success"


def test_status_names_staged_hosts():
    rows = [{"host": "n1", "booted_digest": A, "staged_digest": B}, {"host": "n2", "booted_digest": A}]
    value = job_stats({"hosts": rows}, "status")["fleetos_last_status"]
    assert value["hosts"]["n1"]["status"] == "staged" and value["hosts"]["n2"]["status"] == "booted"
    assert value["counts"] == {"staged": 1, "booted": 1}


@pytest.mark.parametrize("report, kind", [({"hosts": []}, "compose"), ({"rows": []}, "plan"), ([], "rollout")])
def test_bad_input(report, kind):
    with pytest.raises(InvalidInputError):
        job_stats(report, kind)


def test_a_rollout_a_closed_window_left_says_how_many_remain_and_when_the_next_window_opens():
    report = {"rollout": "r2", "result": "window_closed", "counts": {"activated": 1, "staged": 2},
              "windows_closed": {"a": {"reason": "outside every maintenance window", "hosts": ["n2", "n3"],
                                       "next_open": "2026-12-12T10:00:00+00:00", "next_open_local": "2026-12-12 10:00 UTC"}},
              "hosts": [{"host": "n1", "status": "activated", "target_digest": B, "booted_digest": B}]}
    value = job_stats(report, "rollout")["fleetos_last_rollout"]
    assert value["result"] == "window_closed"
    assert value["windows_closed"] == {"a": {"remaining": 2, "next_open": "2026-12-12T10:00:00+00:00",
                                             "next_open_local": "2026-12-12 10:00 UTC"}}
    assert "windows_closed" not in job_stats(report, "rollback")["fleetos_last_rollback"]


def test_a_plans_warnings_are_kept_first_one_first():
    report = {"hosts": [{"host": "n1", "action": "unchanged"}], "warnings": ["No MachineImage source was read: x.", "y."]}
    assert job_stats(report, "plan")["fleetos_last_plan"]["warnings"] == ["No MachineImage source was read: x.", "y."]
    assert job_stats({"hosts": []}, "plan")["fleetos_last_plan"]["warnings"] == []


def test_a_rollouts_stats_map_each_tag_it_resolved_to_its_digest():
    report = {"result": "canary_verified", "hosts": [
        {"host": "n1", "status": "activated", "wanted": "r/os:stable", "target_digest": B},
        {"host": "n2", "status": "not_activated", "wanted": "r/os:stable", "target_digest": B},
        {"host": "n3", "status": "unchanged", "wanted": "r/db@" + A, "target_digest": A},
        {"host": "n4", "status": "plan_failed", "wanted": "r/x:1", "target_digest": None}]}
    assert job_stats(report, "rollout")["fleetos_last_rollout"]["images"] == {"r/os:stable": B}


def test_a_plan_from_the_inventory_alone_counts_its_hosts_planned():
    report = {"hosts": [{"host": "n1", "action": None, "digest": B}, {"host": "n2", "action": None, "digest": B}]}
    value = job_stats(report, "plan")["fleetos_last_plan"]
    assert value["counts"] == {"planned": 2} and value["hosts"]["n1"]["status"] == "planned"


def test_the_summary_names_the_result_the_counts_and_the_hosts_that_need_a_look_at_most_twenty():
    rows = [{"host": "n%02d" % i, "status": "failed", "reason": "health: x | y\\nfailed", "target_digest": B}
            for i in range(25)] + [{"host": "ok", "status": "activated", "reason": "verified", "target_digest": B}]
    report = {"rollout": "r7", "result": "failed", "stop_reason": "25 activation(s) failed", "hosts": rows,
              "counts": {"activated": 1, "failed": 25, "staged": 0},
              "windows_closed": {"a": {"hosts": ["x"], "next_open": "2026-12-12T10:00:00+00:00",
                                       "next_open_local": "2026-12-12 11:00 Europe/Berlin"}}}
    text = job_stats(report, "rollout", report_dir="/runner/artifacts/9/rollout-report")["fleetos_last_rollout"]["summary"]
    lines = text.split("\n")
    assert lines[:5] == ["**fleetos.layering rollout: failed** (rollout r7)", "", "Hosts: 1 activated, 25 failed",
                         "Stopped: 25 activation(s) failed",
                         "Pool a: maintenance window closed, 1 host(s) left staged, next window 2026-12-12 11:00"
                         " Europe/Berlin (2026-12-12T10:00:00+00:00)"]
    table = [line for line in lines if line.startswith("| n")]
    assert len(table) == 20 and table[0] == "| n00 | failed | health: x \\| y\\nfailed |"
    assert "and 5 more hosts in the report." in lines and "ok" not in text
    assert lines[-1] == "Report: /runner/artifacts/9/rollout-report"


def test_a_plan_and_a_compose_summary():
    plan = job_stats({"hosts": [{"host": "n1", "action": "error", "reason": "image r/x is invalid"},
                                {"host": "n2", "action": "stage"}], "warnings": ["No MachineImage source was read."]},
                     "plan")["fleetos_last_plan"]["summary"]
    assert plan.split("\n")[:4] == ["**fleetos.layering plan: failed**", "", "Hosts: 1 error, 1 stage",
                                    "Warning: No MachineImage source was read."]
    assert "| n1 | error | image r/x is invalid |" in plan and "n2" not in plan
    compose = job_stats({"result": "failed", "counts": {"failed": 1, "unchanged": 1}, "hosts": [],
                         "images": [{"name": "worker", "status": "failed", "error": "Layer 'k' carries an OS tree"},
                                    {"name": "db", "status": "unchanged", "summary": "nothing moved"}]},
                        "compose")["fleetos_last_compose"]["summary"]
    assert "LayeredImages: 1 failed, 1 unchanged" in compose
    assert "| worker | failed | Layer 'k' carries an OS tree |" in compose and "| db |" not in compose
