"""Maintenance windows (fleetos_rollout_windows) on lab nodes node05-node10: stage any time,
activate only inside a window of the host's pool.

One fleet through three runs, each checked against the lab's journal and the nodes:
outside every window (everything staged, nothing rebooted, the next window named), a window
that closes while the rollout activates (boots slowed so that it does), and a rerun inside
an open window that activates the rest without staging them again. The nodes are left on the
lab's base image.
"""

import time
from datetime import datetime, timedelta, timezone

from conftest import REPO
from test_rollout import NODES, ROLLOUT, _journal_intervals, _max_concurrent, _reboots, fleet  # noqa: F401
from test_rollout import report_mismatches
from test_rollout_failures import Pools, _pinned, _rows

POOLS = {"wa": ["node05", "node06", "node07"], "wb": ["node08", "node09", "node10"]}
BUDGETS = {"wa": 1, "wb": 1}
PLAN = REPO / "playbooks" / "plan.yml"
DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
# Seconds an activation is taken to need (fleetos_rollout_windows_activation_seconds), and the boot delay
# that keeps the first host of each pool rebooting past the close of the window.
NEEDED = 20
SLOW_BOOT = 60


def _window(start, minutes):
    """A window that opens at ``start`` (UTC, whole minutes) for ``minutes``."""
    return [{"days": [DAYS[start.weekday()]], "start": start.strftime("%H:%M"), "length_minutes": minutes}]


def _pool_vars(windows):
    return {pool: {"fleetos_rollout_windows": windows, "fleetos_rollout_windows_timezone": "UTC",
                   "fleetos_rollout_windows_activation_seconds": NEEDED} for pool in POOLS}


def _blob_reads(events):
    return [e for e in events if e["event"] == "blob_read" and e.get("node") in NODES]


def test_stage_any_time_activate_only_inside_a_window(lab, fleet, tmp_path):
    image = _pinned(fleet)
    now = datetime.now(timezone.utc)
    later = (now + timedelta(days=2)).replace(hour=3, minute=0, second=0, microsecond=0)
    f = Pools(lab, tmp_path, pools=POOLS, budgets=BUDGETS, pool_vars=_pool_vars(_window(later, 60)))
    try:
        # plan.yml names each pool's next window.
        plan = f.play(PLAN, "-e", "fleetos_rollout_image=%s" % image, "-e", "fleetos_plan_read_status=false",
                      "-e", "fleetos_plan_output_dir=%s" % (tmp_path / "plan"))
        for pool in POOLS:
            assert "pool %s: outside its maintenance windows; the next opens at %s" % (
                pool, later.strftime("%Y-%m-%d %H:%M UTC")) in plan.stdout, plan.stdout[-3000:]

        # 1. Outside every window: every host staged, none rebooted, rc 0, the next window named.
        outside = f.play(ROLLOUT, "-e", "fleetos_rollout_image=%s" % image, report="outside", check=False)
        report = outside.report
        assert outside.returncode == 0, outside.stdout[-4000:]
        assert report["result"] == "window_closed", report["result"]
        assert _reboots(outside.events) == []
        assert {row["status"] for row in report["hosts"]} == {"staged"}, report["hosts"]
        for pool, names in POOLS.items():
            closed = report["windows_closed"][pool]
            assert sorted(closed["hosts"]) == names, closed
            assert closed["next_open"] == later.isoformat(), closed
            assert closed["reason"] == "outside every maintenance window; the next opens at %s" % later.strftime(
                "%Y-%m-%d %H:%M UTC"), closed
        assert "next window %s" % later.strftime("%Y-%m-%d %H:%M UTC") in outside.stdout
        assert report_mismatches(lab, report) == []
        assert _blob_reads(outside.events), "the stage read no blob"

        # 2. A window that closes during the activation. Started 5 s into a minute, the window (opened a
        # minute before) closes 55 s later. The hosts are staged already, so each pool's first host takes
        # its slot within seconds; its boot of SLOW_BOOT s outlasts the window, and no slot is granted in
        # the window's last NEEDED seconds: the other hosts are left.
        for node in NODES:
            lab.fleetlab("fault", node, "slow-boot", SLOW_BOOT)
        while datetime.now(timezone.utc).second != 5:
            time.sleep(0.2)
        launch = datetime.now(timezone.utc).replace(second=0, microsecond=0)
        opened = launch - timedelta(minutes=1)
        close = opened + timedelta(minutes=2)
        f = Pools(lab, tmp_path, pools=POOLS, budgets=BUDGETS, pool_vars=_pool_vars(_window(opened, 2)))
        closing = f.play(ROLLOUT, "-e", "fleetos_rollout_image=%s" % image, report="closing", check=False)
        report = closing.report
        rows = _rows(report)
        assert closing.returncode == 0, closing.stdout[-4000:]
        assert report["result"] == "window_closed", (report["result"], closing.stdout[-4000:])
        activated = sorted(h for h, row in rows.items() if row["status"] == "activated")
        left = sorted(h for h, row in rows.items() if row["status"] == "staged")
        assert activated and left and sorted(activated + left) == NODES, rows
        # No slot granted once less than NEEDED s were left; every granted host finished and was verified.
        for slot in report["slots"]:
            assert slot["granted_at"] <= close.timestamp() - NEEDED, (slot, close)
            assert slot["status"] == "activated" and slot["released_at"] is not None, slot
        assert sorted(slot["host"] for slot in report["slots"]) == activated
        # A host rebooting when the window closed finished: never cut.
        assert any(slot["released_at"] > close.timestamp() for slot in report["slots"]), (report["slots"], close)
        assert sorted(_reboots(closing.events)) == activated
        for host in left:
            assert "maintenance window" in rows[host]["reason"] and "next window of pool" in rows[host]["reason"], rows[host]
        for pool, names in POOLS.items():
            assert _max_concurrent(_journal_intervals(closing.events, names)) <= BUDGETS[pool], pool
        # Staged by the first run: nothing read again.
        assert _blob_reads(closing.events) == []
        assert report_mismatches(lab, report) == []

        # 3. The rerun inside an open window: the rest activated, no activated host rebooted again, no blob read.
        for node in NODES:
            lab.fleetlab("fault", node, "clear")
        wide = datetime.now(timezone.utc).replace(second=0, microsecond=0) - timedelta(minutes=1)
        f = Pools(lab, tmp_path, pools=POOLS, budgets=BUDGETS, pool_vars=_pool_vars(_window(wide, 120)))
        rerun = f.play(ROLLOUT, "-e", "fleetos_rollout_image=%s" % image, report="rerun", check=False)
        assert rerun.returncode == 0 and rerun.report["result"] == "success", rerun.stdout[-4000:]
        again = _rows(rerun.report)
        assert {h: again[h]["status"] for h in NODES} == dict(
            {h: "unchanged" for h in activated}, **{h: "activated" for h in left}), rerun.report["hosts"]
        assert sorted(_reboots(rerun.events)) == left
        assert _blob_reads(rerun.events) == []
        assert report_mismatches(lab, rerun.report) == []
        print("windows: outside %.1f s (6 staged); closing at %s: %d activated, %d left; rerun %.1f s" % (
            outside.wall, close.strftime("%H:%M:%S"), len(activated), len(left), rerun.wall))
    finally:
        for node in NODES:
            lab.fleetlab("fault", node, "clear")
        f.restore(fleet["digest"])
