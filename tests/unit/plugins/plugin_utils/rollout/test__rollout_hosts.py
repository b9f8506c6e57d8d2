# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""_rollout_hosts: rollout.yml's decisions for every host, once for the play."""

from __future__ import annotations

import os
import subprocess
import sys
import socket

import pytest

from ansible_collections.fleetos.layering.plugins.plugin_utils.rollout import _resume, _rollout_hosts

TARGET = "sha256:" + "c" * 64
OLD = "sha256:" + "d" * 64
NOW = 10000.0
# The lease a killed run left: it rebooted the host into TARGET and did not verify it.
KILLED = {"rollout": "killed", "phase": "rebooting", "target_digest": TARGET, "released": False}


def plan(host, action, **extra):
    return dict({"host": host, "action": action, "digest": TARGET, "status_read": True, "reason": action}, **extra)


def acquired(previous=None):
    return {"acquired": True, "holder": None, "lease": {"rollout": "this-run"}, "previous": previous,
            "deployments": {"backend": "rpm-ostree"}}


def refused(owner, rollout="other-run"):
    holder = {"rollout": rollout, "owner": owner, "started_at": 900.0, "renewed_at": NOW, "ttl": 600,
              "phase": "planned", "released": False}
    return {"failed": False, "acquired": False, "holder": holder, "msg": "leased"}


def dead_owner():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    start = _resume.process_start(proc.pid)
    proc.wait()
    return {"controller": socket.gethostname(), "user": "ops", "pid": proc.pid, "start": start}


def me():
    return _resume.owner_of_this_run(pid=os.getpid())["owner"]


def test_every_host_is_decided_once_with_its_lease_its_book_entry_and_its_plays():
    plans = {"n1": plan("n1", "stage"), "n2": plan("n2", "unchanged"), "n3": plan("n3", "pin"),
             "n4": plan("n4", "stage", update_agents={"disable": True}), "n6": plan("n6", "skipped")}
    # A killed run rebooted n5 into its target: verified first; n4's plan comes from its own fact.
    hostvars = {
        "n1": {"os_plan_lease_result": acquired(), "fleetos_pool": "a", "fleetos_pool_max_unavailable": "50%"},
        "n2": {"os_plan_lease_result": acquired(), "fleetos_pool": "a", "fleetos_fleetlock_url": "http://fl"},
        "n3": {"os_plan_lease_result": acquired(), "fleetos_rollout_windows": [{"days": ["Sat"]}]},
        "n4": {"os_plan_lease_result": acquired()},
        "n5": {"os_plan_lease_result": acquired(previous=KILLED), "os_plan_result": plan("n5", "unchanged")},
        "n6": {"os_plan_lease_result": {"skipped": True}},
    }
    decided = _rollout_hosts.rollout_hosts(plans, hostvars, ["n1", "n2", "n3", "n4", "n5", "n6"], now=NOW)
    actions = {h: e["plan"]["action"] for h, e in decided["hosts"].items()}
    assert actions == {"n1": "stage", "n2": "unchanged", "n3": "pin", "n4": "stage", "n5": "verify", "n6": "skipped"}
    assert decided["book"] == ["n5", "n1", "n4"] and decided["stage"] == ["n1", "n4"]
    # n2: a FleetLock slot to free and a lease to release; n3: a pin and its lease; n4: agents to turn off; n6
    # holds no lease. The activation plays act on the hosts staged or in the book.
    assert {k: decided[k] for k in ("agents", "pin", "unlock", "release", "active")} == {
        "agents": ["n4"], "pin": ["n3"], "unlock": ["n2"], "release": ["n2", "n3"], "active": ["n1", "n4", "n5"]}
    described = {d["host"]: d for d in decided["described"]}
    assert described["n1"] == {"host": "n1", "first": False, "pool": "a", "max_unavailable": "50%", "windows": [],
                               "windows_timezone": "UTC", "activation_seconds": None}
    assert described["n5"]["first"] and described["n5"]["pool"] == "default" and described["n5"]["max_unavailable"] == 1
    assert described["n3"]["windows"] == [{"days": ["Sat"]}]
    assert decided["refused"] == {}
    # Without the activation, no host is in the book, and a host that is not staged releases its lease.
    idle = _rollout_hosts.rollout_hosts(plans, hostvars, ["n1", "n5"], activate=False, now=NOW)
    assert idle["book"] == [] and idle["release"] == ["n5"] and idle["active"] == ["n1"]


def test_a_host_another_rollout_holds_stops_every_host_and_a_takeover_counts_instead():
    plans = {"n1": plan("n1", "stage"), "n2": plan("n2", "stage")}
    hostvars = {"n1": {"os_plan_lease_result": acquired()}, "n2": {"os_plan_lease_result": refused(me())}}
    decided = _rollout_hosts.rollout_hosts(plans, hostvars, ["n1", "n2"], now=NOW)
    assert [e["plan"]["action"] for e in decided["hosts"].values()] == ["error", "error"]
    assert decided["book"] == [] and decided["stage"] == [] and decided["release"] == ["n1"]
    assert list(decided["refused"].values()) == [["n2"]]
    # The rollout that held n2 is gone: the play of takeovers takes it; its result is the host's lease then.
    gone = dict(hostvars, n2={"os_plan_lease_result": refused(dead_owner())})
    assert _rollout_hosts.takeovers(plans, gone, ["n1", "n2"], me(), now=NOW) == {"n2": "other-run"}
    taken = dict(gone, n2=dict(gone["n2"], __fleetos_rollout_lease_taken=acquired()))
    decided = _rollout_hosts.rollout_hosts(plans, taken, ["n1", "n2"], now=NOW)
    assert decided["book"] == ["n1", "n2"] and decided["hosts"]["n2"]["lease_result"]["acquired"]
    # A host whose status was not read is never taken over.
    unread = {"n2": dict(plans["n2"], status_read=False)}
    assert _rollout_hosts.takeovers(unread, gone, ["n2"], me(), now=NOW) == {}


def test_read_plans_plans_the_hosts_read_and_keeps_the_fleet_s_errors():
    inputs = {"pool": "a", "fallback_image": None, "fallback_transport": None, "pool_paused": False, "labels": {},
              "update_agents": "keep"}
    fleet = {"hosts": {"n1": {"error": None, "inputs": inputs, "assignment": None, "plan": {"action": None}},
                       "n2": {"error": "no image", "inputs": inputs, "assignment": None, "plan": {"action": "error"}},
                       "n3": {"error": None, "inputs": inputs, "assignment": None, "plan": {"action": None}}}}
    # Read with state=read (no lease): n3's read failed.
    hostvars = {"n1": {"os_plan_lease_result": {"changed": False, "acquired": False, "lease": None,
                                                "deployments": {"backend": "rpm-ostree", "booted": None}}},
                "n3": {"os_plan_lease_result": {"failed": True, "msg": "rpm-ostree: not found", "deployments": None}}}
    reads = _rollout_hosts.host_reads(hostvars, ["n1", "n3"])
    assert list(reads) == ["n1"]
    plans = _rollout_hosts.read_plans(fleet, reads)
    # n3's read failed: its plan is the caller's to record.
    assert sorted(plans) == ["n1", "n2"] and plans["n2"] == {"action": "error"}
    assert plans["n1"]["host"] == "n1" and plans["n1"]["pool"] == "a"
    # Under a lease: a refused lease (failed) reads them all the same; an unreachable or skipped host is not read.
    leased = {"n1": {"os_plan_lease_result": {"failed": True, "acquired": False, "deployments": {"backend": "bootc"}}},
              "n2": {"os_plan_lease_result": {"unreachable": True, "deployments": {"backend": "bootc"}}},
              "n3": {"os_plan_lease_result": {"failed": True, "deployments": None}},
              "n4": {"os_plan_lease_result": {"skipped": True}}}
    assert _rollout_hosts.host_reads(leased, ["n1", "n2", "n3", "n4"]) == {"n1": {"backend": "bootc"}}


REG = "198.51.100.1:5000/fleetos/os"
INPUTS = {"pool": "a", "fallback_image": REG + "@" + TARGET, "fallback_transport": None, "pool_paused": False,
          "labels": {}, "update_agents": None}
FLEET = {"hosts": {"n1": {"error": None, "inputs": INPUTS, "assignment": None, "plan": {"action": None}}}}
RESOLVED = {"results": [{"item": REG + "@" + TARGET, "digest": TARGET, "index": False, "image": REG + "@" + TARGET,
                         "manifests": {}}]}


def read_under_lease(booted, previous=None, agents=None, **result):
    deployment = {"checksum": "e" * 64, "origin": None,
                  "image": {"reference": "ostree-unverified-registry:%s@%s" % (REG, booted), "digest": booted,
                            "manifest_digest": booted}}
    deployments = {"backend": "rpm-ostree", "booted": deployment, "staged": None, "architecture": "amd64"}
    if agents is not None:
        deployments["update_agents"] = agents
    return dict(dict(acquired(previous), deployments=deployments), **result)


ZINCATI_ON = {"zincati": {"would_update": True, "summary": "enabled, updates on"}}


@pytest.mark.parametrize("fleet, result, expected", [
    (FLEET, read_under_lease(TARGET), True),
    (FLEET, read_under_lease(OLD), False),
    # A killed run rebooted the host into its target: the rerun verifies it.
    (FLEET, read_under_lease(TARGET, previous=KILLED), False),
    (FLEET, read_under_lease(TARGET, acquired=False), False),
    (FLEET, read_under_lease(TARGET, failed=True), False),
    ({"hosts": {"n1": dict(FLEET["hosts"]["n1"], error="no image")}}, read_under_lease(TARGET), False),
    ({"hosts": {}}, read_under_lease(TARGET), False),
    # The rollout turns an update agent off on every host it takes on, an unchanged one as well.
    ({"hosts": {"n1": dict(FLEET["hosts"]["n1"], inputs=dict(INPUTS, update_agents="disable"))}},
     read_under_lease(TARGET, agents=ZINCATI_ON), False),
], ids=["on its target", "on another image", "a killed run's reboot to verify", "lease not taken", "failed read",
        "the fleet's error", "not in the fleet", "an update agent to turn off"])
def test_leaves_unchanged_only_a_host_on_its_target_with_nothing_left_to_do(fleet, result, expected):
    assert _rollout_hosts.leaves_unchanged(fleet, "n1", result, resolutions=RESOLVED) is expected


def test_a_host_released_in_the_plan_s_contact_is_not_released_again():
    results = {"n1": read_under_lease(TARGET, released=True), "n2": read_under_lease(TARGET)}
    hostvars = {host: {"os_plan_lease_result": result} for host, result in results.items()}
    plans = {host: plan(host, "unchanged") for host in results}
    decided = _rollout_hosts.rollout_hosts(plans, hostvars, ["n1", "n2"], now=NOW)
    assert decided["release"] == ["n2"]
    assert decided["hosts"]["n1"]["plan"]["action"] == "unchanged"


def test_pools_in_turn_takes_each_pool_s_next_host_in_turn_and_keeps_each_pool_s_order():
    pools = {"a1": "a", "a2": "a", "a3": "a", "b1": "b", "c1": "c", "c2": "c"}
    assert _rollout_hosts.pools_in_turn(["a1", "a2", "a3", "b1", "c1", "c2"], pools.get) == \
        ["a1", "b1", "c1", "a2", "c2", "a3"]
    assert _rollout_hosts.pools_in_turn(["c2", "a1", "c1"], pools.get) == ["c2", "a1", "c1"]
    assert _rollout_hosts.pools_in_turn([], pools.get) == []


def test_the_stage_and_activation_plays_start_every_pool_at_once():
    hosts = ["a1", "a2", "b1", "b2"]
    plans = dict((h, plan(h, "stage")) for h in hosts)
    hostvars = dict((h, {"os_plan_lease_result": acquired(), "fleetos_pool": h[0]}) for h in hosts)
    decided = _rollout_hosts.rollout_hosts(plans, hostvars, hosts, now=NOW)
    assert decided["stage"] == decided["active"] == ["a1", "b1", "a2", "b2"]
    # The book keeps the inventory's order: it is each pool's queue.
    assert decided["book"] == hosts


def image_deployment(digest):
    return {"checksum": digest[7:], "image": {"reference": "registry/os@" + digest, "digest": digest,
                                              "manifest_digest": digest}}


def deployments(booted=TARGET, previous=OLD, staged=None, backend="rpm-ostree"):
    return {"backend": backend, "booted": image_deployment(booted), "rollback": image_deployment(previous),
            "staged": None if staged is None else image_deployment(staged)}


def leased(read=None, **extra):
    return dict(acquired(), deployments=read or deployments(), **extra)


def test_a_rollback_plans_every_host_at_once_and_names_the_hosts_of_its_plays():
    hostvars = {
        "a1": {"__fleetos_rollback_lease": leased(), "fleetos_pool": "a", "fleetos_pool_max_unavailable": "50%"},
        "a2": {"__fleetos_rollback_lease": leased(), "fleetos_pool": "a",
               # A pool's maintenance windows do not hold a rollback.
               "fleetos_rollout_windows": [{"days": ["Sat"]}]},
        "b1": {"__fleetos_rollback_lease": leased(), "fleetos_pool": "b"},
        # Booted on another digest than the one rolled back from: its lease is released.
        "b2": {"__fleetos_rollback_lease": leased(deployments(booted=OLD, previous=TARGET)), "fleetos_pool": "b"},
        "c1": {"__fleetos_rollback_lease": {"unreachable": True, "msg": "ssh: connect to host c1: timed out"}},
    }
    decided = _rollout_hosts.rollback_hosts(hostvars, sorted(hostvars), me(), rollback_from=TARGET, now=NOW)
    plans = {host: entry["plan"] for host, entry in decided["hosts"].items()}
    assert {host: plan["action"] for host, plan in plans.items()} == {
        "a1": "activate", "a2": "activate", "b1": "activate", "b2": "unchanged", "c1": "error"}
    assert plans["a1"]["digest"] == OLD and plans["b2"]["reason"] == "not booted on %s" % TARGET
    assert "ssh: connect to host c1: timed out" in plans["c1"]["reason"]
    assert decided["book"] == ["a1", "a2", "b1"] and decided["active"] == ["a1", "b1", "a2"]
    assert decided["release"] == ["b2"] and decided["takeovers"] == {} and decided["cancel"] == {}
    described = {d["host"]: d for d in decided["described"]}
    assert described["a1"] == {"host": "a1", "pool": "a", "max_unavailable": "50%", "first": False, "windows": [],
                               "windows_timezone": "UTC", "activation_seconds": None}
    assert described["a2"]["windows"] == [] and described["c1"]["pool"] == "default"
    assert described["c1"]["max_unavailable"] == 1


def test_a_staged_deployment_is_cancelled_then_the_host_is_planned_from_its_read_after_the_cancel():
    staged = deployments(staged=OLD)
    hostvars = {"n1": {"__fleetos_rollback_lease": leased(staged)},
                "n2": {"__fleetos_rollback_lease": leased(deployments(staged=OLD, backend="bootc"))}}
    decided = _rollout_hosts.rollback_hosts(hostvars, ["n1", "n2"], me(), now=NOW)
    # bootc has no cancel command: it discards the staged deployment when it rolls back.
    assert list(decided["cancel"]) == ["n1"] and decided["cancel"]["n1"]["backend"] == "rpm-ostree"
    assert decided["cancel"]["n1"]["command"] == "rpm-ostree cleanup --pending"
    # Cancelled and read again (the previous deployment is now another image): planned from that read, not asked
    # to cancel again.
    after = dict(hostvars["n1"], __fleetos_rollback_cancelled={"changed": True},
                 __fleetos_rollback_status=deployments(booted=TARGET, previous="sha256:" + "e" * 64))
    decided = _rollout_hosts.rollback_hosts(dict(hostvars, n1=after), ["n1", "n2"], me(), now=NOW)
    assert decided["cancel"] == {} and decided["hosts"]["n1"]["plan"]["digest"] == "sha256:" + "e" * 64
    # In check mode the cancel and the read are skipped: the read under the lease stands.
    skipped = dict(hostvars["n1"], __fleetos_rollback_cancelled={"skipped": True},
                   __fleetos_rollback_status={"skipped": True})
    decided = _rollout_hosts.rollback_hosts(dict(hostvars, n1=skipped), ["n1"], me(), now=NOW)
    assert decided["cancel"] == {} and decided["hosts"]["n1"]["plan"]["digest"] == OLD


def test_a_rollback_stops_before_anything_changes_when_another_rollout_holds_a_host_and_takes_over_a_gone_one():
    hostvars = {"n1": {"__fleetos_rollback_lease": leased(deployments(staged=OLD))},
                "n2": {"__fleetos_rollback_lease": dict(refused(me()), deployments=deployments())}}
    decided = _rollout_hosts.rollback_hosts(hostvars, ["n1", "n2"], me(), now=NOW)
    # A live rollout holds n2: nothing is cancelled, nothing rolled back, n1's lease is released.
    assert [e["plan"]["action"] for e in decided["hosts"].values()] == ["error", "error"]
    assert "stopped before the rollback" in decided["hosts"]["n1"]["plan"]["reason"]
    assert decided["cancel"] == {} and decided["book"] == [] and decided["release"] == ["n1"]
    assert decided["takeovers"] == {}
    # The rollout that held n2 is gone: taken over first; once taken, n1's staged deployment is cancelled.
    gone = dict(hostvars, n2={"__fleetos_rollback_lease": dict(refused(dead_owner()), deployments=deployments())})
    decided = _rollout_hosts.rollback_hosts(gone, ["n1", "n2"], me(), now=NOW)
    assert decided["takeovers"] == {"n2": "other-run"} and decided["cancel"] == {}
    taken = dict(gone, n2=dict(gone["n2"], __fleetos_rollout_lease_taken=leased()))
    decided = _rollout_hosts.rollback_hosts(taken, ["n1", "n2"], me(), now=NOW)
    assert decided["takeovers"] == {} and list(decided["cancel"]) == ["n1"]
    assert decided["hosts"]["n2"]["plan"]["action"] == "activate" and decided["hosts"]["n2"]["lease_result"]["acquired"]
