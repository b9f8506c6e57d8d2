# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""_resume: the controller's side of the rollout lease."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from ansible_collections.fleetos.layering.plugins.plugin_utils.rollout import _resume
from ansible_collections.fleetos.layering.plugins.plugin_utils.rollout._plan import activation

TARGET = "sha256:" + "c" * 64
OTHER = "sha256:" + "d" * 64


def _me():
    return _resume.owner_of_this_run(pid=os.getpid())["owner"]


def _dead_owner():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    start = _resume.process_start(proc.pid)
    proc.wait()
    return {"controller": socket.gethostname(), "user": "ops", "pid": proc.pid, "start": start}


def _refused(owner, rollout="old-run", renewed_at=1000.0, ttl=60):
    holder = {"rollout": rollout, "owner": owner, "started_at": 900.0, "renewed_at": renewed_at, "ttl": ttl,
              "phase": "planned", "released": False}
    # As the playbook registers it: failed_when false.
    return {"failed": False, "failed_when_result": False, "acquired": False, "holder": holder, "msg": "leased"}


def test_owner_of_this_run_names_the_process_and_a_fresh_id():
    one, two = _resume.owner_of_this_run(pid=os.getpid()), _resume.owner_of_this_run(pid=os.getpid())
    assert one["rollout"] != two["rollout"]
    assert one["owner"]["pid"] == os.getpid() and one["owner"]["controller"] == socket.gethostname()
    assert one["owner"]["start"] is not None
    assert one["owner"]["start"] == _resume.process_start(os.getpid())


def test_a_gone_process_on_this_controller_is_taken_over():
    assert _resume.takeover(_refused(_dead_owner()), _me()) == "old-run"


def test_a_live_process_or_another_controller_is_not_taken_over():
    assert _resume.takeover(_refused(_me()), _me()) is None
    elsewhere = dict(_dead_owner(), controller="another-controller")
    assert _resume.takeover(_refused(elsewhere), _me()) is None


def test_a_reused_pid_is_not_the_same_process():
    owner = dict(_me(), start="1")   # our pid, another start time: the old process is gone
    assert _resume.takeover(_refused(owner), _me()) == "old-run"


@pytest.mark.parametrize("break_lease, renewed_at, expected", [
    ("old-run", 10 ** 10, "old-run"),       # named: broken even when not expired
    ("other-run", 0, None),                  # names another rollout
    (True, 0, "old-run"),                    # any expired lease
    ("yes", 0, "old-run"),
    (True, 10 ** 10, None),                  # not expired
    (False, 0, None),
    (None, 0, None),
])
def test_break_lease(break_lease, renewed_at, expected):
    elsewhere = {"controller": "another-controller", "pid": 1, "start": "1"}
    assert _resume.takeover(_refused(elsewhere, renewed_at=renewed_at), _me(), break_lease=break_lease,
                            now=2000.0) == expected


def test_takeover_ignores_results_that_were_not_refused():
    assert _resume.takeover({"acquired": True, "lease": {}}, _me()) is None
    assert _resume.takeover({"skipped": True}, _me()) is None
    assert _resume.takeover(None, _me()) is None


def _plan(action="unchanged", digest=TARGET):
    return {"host": "n1", "action": action, "digest": digest, "reason": "booted on x"}


def _taken(previous=None):
    return {"acquired": True, "lease": {"rollout": "new"}, "previous": previous, "failed": False}


def test_a_refused_host_is_an_error_naming_the_holder_and_the_variable():
    refused = _refused({"controller": "ctl-b", "user": "dev", "pid": 22}, rollout="r-first")
    plan = _resume.lease_plan(_plan(), refused, _resume.refusals({"n1": refused}), now=950.0)
    assert plan["action"] == "error"
    assert plan["reason"].startswith("leased by rollout r-first (dev@ctl-b, pid 22)")
    assert "fleetos_rollout_break_lease=r-first" in plan["reason"] and "expired" not in plan["reason"]


def test_every_other_host_stops_before_staging_naming_the_holders():
    refused = _refused({"controller": "ctl-b", "user": "dev", "pid": 22}, rollout="r-first")
    results = dict(("n%d" % i, refused) for i in range(2, 9))
    results["n1"] = _taken()
    assert _resume.refusals(results) == {"rollout r-first (dev@ctl-b, pid 22)": ["n2", "n3", "n4", "n5", "n6", "n7", "n8"]}
    plan = _resume.lease_plan(_plan("stage"), _taken(), _resume.refusals(results))
    assert plan["action"] == "error"
    assert plan["reason"] == ("stopped before staging: another rollout holds hosts of this one "
                              "(rollout r-first (dev@ctl-b, pid 22) on n2, n3, n4, n5, n6 and 2 more)")


def test_a_lease_that_failed_otherwise_is_an_error_with_its_message():
    plan = _resume.lease_plan(_plan(), {"failed": False, "acquired": False, "holder": None,
                                        "msg": "Failed to write\nthe lease."}, {})
    assert (plan["action"], plan["reason"]) == ("error", "taking the rollout lease failed: Failed to write the lease.")


def test_a_host_that_went_unreachable_while_leased_is_an_error_and_names_no_holder():
    # rollout.yml registers the lease with ignore_unreachable: another rollout was rebooting the host.
    unreachable = {"unreachable": True, "changed": False, "msg": "Failed to connect to the host via ssh: timed out"}
    assert _resume.takeover(unreachable, _me()) is None
    assert _resume.refusals({"n1": unreachable}) == {}
    plan = _resume.lease_plan(_plan("stage"), unreachable, {})
    assert (plan["action"], plan["reason"]) == (
        "error", "taking the rollout lease failed: Failed to connect to the host via ssh: timed out")


def test_a_host_a_killed_rollout_rebooted_into_the_target_is_verified():
    previous = {"rollout": "killed", "phase": "rebooting", "target_digest": TARGET, "released": False}
    plan = _resume.lease_plan(_plan(), _taken(previous), _resume.refusals({"n1": _taken(previous)}))
    assert plan["action"] == "verify" and plan["resumed_from"] == "killed"
    assert "verified on rerun" in plan["reason"] and "killed" in plan["reason"]
    assert activation(plan) == {"activate": True, "mode": "verify", "order": 0, "staged_checksum": None}


@pytest.mark.parametrize("previous, action, expected_action, release", [
    ({"rollout": "k", "phase": "rebooting", "target_digest": OTHER, "released": False}, "unchanged", "unchanged", True),
    ({"rollout": "k", "phase": "rebooting", "target_digest": TARGET, "released": False}, "stage", "stage", True),
    ({"rollout": "k", "phase": "rebooting", "target_digest": TARGET, "released": True}, "unchanged", "unchanged", False),
    ({"rollout": "k", "phase": "activated", "target_digest": TARGET, "released": False}, "unchanged", "unchanged", False),
    (None, "unchanged", "unchanged", False),
])
def test_other_leftovers(previous, action, expected_action, release):
    plan = _resume.lease_plan(_plan(action), _taken(previous), {})
    assert plan["action"] == expected_action
    assert plan.get("release_slot", False) is release


def test_an_unread_host_keeps_its_plan():
    assert _resume.lease_plan(_plan("error"), {"skipped": True}, {}) == _plan("error")
    assert _resume.lease_plan(_plan(), None, None) == _plan()


def test_a_host_changed_after_this_run_started_is_an_error_and_not_broken():
    refused = _refused({"controller": "ctl-b", "user": "dev", "pid": 22}, rollout="r-young")
    refused["holder"].update(released=True, phase="done")
    plan = _resume.lease_plan(_plan(), refused, _resume.refusals({"n1": refused}))
    assert plan["reason"] == ("changed by rollout r-young (dev@ctl-b, pid 22) after this rollout started: "
                              "stopped before staging; run the rollout again")
    assert _resume.takeover(refused, _me(), break_lease="r-young") is None
