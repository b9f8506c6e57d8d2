"""Runs limited as AWX's Limit and ``--limit`` limit them: localhost is left out, and the run-once work
(the canary gate, the book, the report, set_stats, the final failure check) still runs; a percentage
budget is the pool's, whatever the limit; a limit that leaves no host to act on fails.

On test_rollout's nodes (node05-node10, pools blue and green) and its inventory, without localhost
in any limit."""

import json
import re

from test_rollout import (NODES, ROLLBACK, ROLLOUT, Fleet, _inventory, _reboots, fleet,  # noqa: F401 (fleet: a fixture)
                          report_mismatches)
from conftest import REPO

PLAN = REPO / "playbooks" / "plan.yml"
STATUS = REPO / "playbooks" / "status.yml"
ADOPT = REPO / "playbooks" / "adopt.yml"
COMPOSE = REPO / "playbooks" / "compose.yml"


def _pinned(fleet):
    return "%s@%s" % (fleet["tag_image"].rsplit(":", 1)[0], fleet["digest"])


def test_a_limited_rollout_with_a_failing_canary_stops_after_it_and_reports(lab, fleet, tmp_path):
    f = Fleet(lab, tmp_path)
    limited = ["node05", "node06", "node08", "node09"]
    try:
        lab.fleetlab("fault", "node05", "fail-health")
        proc = f.play(ROLLOUT, "-l", ",".join(limited), "-e", "fleetos_rollout_image=%s" % _pinned(fleet),
                      "-e", "fleetos_rollout_canary=1", "-e", "fleetos_rollout_health_command=lab-health", check=False)
        # The final failure check ran: the run failed, with its report written.
        assert proc.returncode != 0, proc.stdout[-8000:]
        assert proc.report is not None, proc.stdout[-5000:]
        rows = {r["host"]: r for r in proc.report["hosts"]}
        assert sorted(rows) == limited
        assert rows["node05"]["status"] == "failed" and rows["node05"]["rolled_back"]
        assert "the canary batch failed (node05)" in proc.report["stop_reason"]
        for node in ("node06", "node08", "node09"):
            assert rows[node]["status"] == "not_activated", rows[node]
            assert f.booted(node) == lab.base_digest
        # The canary rebooted twice (activation, rollback); none of the rest rebooted.
        assert sorted(_reboots(proc.events)) == ["node05", "node05"]
        assert report_mismatches(lab, proc.report) == []
        # The summary AWX keeps (set_stats) is in the job's output too.
        assert "fleetos.layering rollout: failed" in proc.stdout
        # The canary gate ran, on the run's first host, on the controller.
        assert "TASK [fleetos.layering.os_activate : Close the canary batch]" in proc.stdout
    finally:
        f.restore(fleet["digest"])


def test_limited_runs_keep_the_pools_budget_and_give_their_results(lab, fleet, tmp_path):
    """A verified canary then the stop after it; the budget of blue (67% of its 3 hosts: 2 slots) with two
    of its hosts in the run; plan, status, adopt, compose and rollback, each limited."""
    f = Fleet(lab, tmp_path)
    f.inventory = _inventory(lab, tmp_path / "hosts.yml", budgets={"blue": "67%", "green": 1})
    try:
        proc = f.play(ROLLOUT, "-l", "node05,node06,node08", "-e", "fleetos_rollout_image=%s" % _pinned(fleet),
                      "-e", "fleetos_rollout_canary=1", "-e", "fleetos_rollout_stop_after_canary=true")
        report = proc.report
        assert report["result"] == "canary_verified", proc.stdout[-5000:]
        assert report["pools"]["blue"]["max_unavailable"] == 2
        # The activation's first line names the pool sizes the budgets were taken of (the debug message quotes them).
        assert re.search(r'of pools of\s+\{[^}]*blue\\?": 3', proc.stdout), proc.stdout[-5000:]
        assert _reboots(proc.events) == ["node05"]
        assert f.booted("node05") == fleet["digest"]
        assert [f.staged(n) != [] for n in ("node06", "node08")] == [True, True]

        plan = f.play(PLAN, "-l", "node06", "-e", "fleetos_rollout_image=%s" % _pinned(fleet), report="plan")
        planned = json.loads((tmp_path / "plan" / "plan.json").read_text())
        assert [h["host"] for h in planned["hosts"]] == ["node06"], plan.stdout[-3000:]

        status_json = tmp_path / "fleet-status.json"
        f.play(STATUS, "-l", "blue", "-e", "fleetos_status_json=%s" % status_json)
        rows = {r["host"]: r for r in json.loads(status_json.read_text())["hosts"]}
        assert sorted(rows) == ["node05", "node06", "node07"]
        assert rows["node05"]["booted_digest"] == fleet["digest"]

        adopt = f.play(ADOPT, "-l", "node07", report="adopt", check=False)
        adopted = json.loads((tmp_path / "adopt" / "adopt-report.json").read_text())
        assert [h["host"] for h in adopted["hosts"]] == ["node07"], adopt.stdout[-3000:]

        compose = f.play(COMPOSE, "-l", "node07", "-e", "fleetos_layered_images_dir=%s" % (tmp_path / "none"),
                         report="compose", check=False)
        assert "TASK [Load the LayeredImages]" in compose.stdout, compose.stdout[-3000:]

        f.play(ROLLBACK, "-l", "node05", "-e", "fleetos_rollback_from=%s" % fleet["digest"], report="rollback")
        rolled = json.loads((tmp_path / "rollback" / "rollback-report.json").read_text())
        assert [(h["host"], h["status"]) for h in rolled["hosts"]] == [("node05", "activated")]
        assert f.booted("node05") == lab.base_digest
    finally:
        f.restore(fleet["digest"])


def test_a_limit_that_leaves_no_host_of_the_run_fails_before_any_host_is_contacted(lab, fleet, tmp_path):
    f = Fleet(lab, tmp_path)
    proc = f.play(ROLLOUT, "-l", "node08", "-e", "fleetos_rollout_hosts=blue",
                  "-e", "fleetos_rollout_image=%s" % _pinned(fleet), check=False)
    assert proc.returncode != 0
    assert "The limit 'node08' leaves no host of fleetos_rollout_hosts ('blue') to act on" in " ".join(proc.stdout.split())
    assert [e for e in proc.events if e.get("node") in NODES] == []
