"""The rolling rollout's failure paths, canary, paused pools and FleetLock, on node05-node10 only.

Same fleet as test_rollout.py (two pools of three, inventory of our own under tmp_path);
every test leaves its nodes booted on the lab's base image, nothing staged, no fault.
Figures come from the lab's events journal (.lab/journal.jsonl), filtered to our nodes,
since other tests run on other nodes of the same lab at the same time.
"""

import json
import os
import subprocess
import threading
import time

import pytest
import yaml

from conftest import REPO, VENV_BIN, collections_path, read_hosts
from test_rollout import (BUDGETS, NODES, POOLS, ROLLOUT, Fleet, _journal_intervals, _max_concurrent,
                          _reboots, fleet, report_mismatches)  # noqa: F401 (fleet is the module fixture)


def _pinned(fleet):
    return "%s@%s" % (fleet["tag_image"].rsplit(":", 1)[0], fleet["digest"])


def _write_inventory(lab, path, pools, budgets, pool_vars=None):
    """Our inventory: the lab's connection vars, pools of our own naming."""
    hosts, allvars = read_hosts(lab.inventory)
    children = {}
    for pool, names in pools.items():
        gvars = {"fleetos_pool": pool, "fleetos_pool_max_unavailable": budgets[pool]}
        gvars.update((pool_vars or {}).get(pool, {}))
        children[pool] = {"vars": gvars, "hosts": {name: hosts[name] for name in names}}
    inventory = {"all": {"vars": allvars, "children": {"rollout_lab": {"children": children}}}}
    path.write_text(yaml.safe_dump(inventory, sort_keys=False))
    return path


class Pools(Fleet):
    """Fleet with pools (names, budgets, pool vars) of the test's choosing."""

    def __init__(self, lab, tmp_path, pools=None, budgets=None, pool_vars=None):
        super().__init__(lab, tmp_path)
        self.pools = pools or POOLS
        self.budgets = budgets or BUDGETS
        self.inventory = _write_inventory(lab, tmp_path / ("hosts-%s.yml" % "-".join(self.pools)),
                                          self.pools, self.budgets, pool_vars)


def _rows(report):
    return {r["host"]: r for r in report["hosts"]}


def _events_of(events, nodes, kind):
    return [e for e in events if e["event"] == kind and e.get("node") in nodes]


NO_BOOT_STOPS = {
    # max_failures 3: node08's failure does not stop the rollout; green's only slot stays
    # taken, so node09 and node10 never get one, while blue goes on with its own slots.
    3: "no free budget slot in pool green: 1 slot(s) held by hosts that did not come back (node08)",
    # max_failures 1: node08's failure stops the rollout; blue's hosts were done before its timeout.
    1: "1 activation(s) failed (node08), max_failures is 1",
}


@pytest.mark.parametrize("max_failures", sorted(NO_BOOT_STOPS, reverse=True))
def test_no_boot_fails_after_timeout_and_keeps_its_slot(lab, fleet, tmp_path, max_failures):
    """node08 (green, budget 1) never comes back: failed after the timeout, green's slot stays taken."""
    f = Pools(lab, tmp_path)
    stop_reason = NO_BOOT_STOPS[max_failures]
    began = time.time()
    try:
        lab.fleetlab("fault", "node08", "no-boot")
        proc = f.play(ROLLOUT, "-e", "fleetos_rollout_image=%s" % _pinned(fleet),
                      "-e", "fleetos_rollout_reboot_timeout=20", "-e", "fleetos_rollout_max_failures=%d" % max_failures,
                      check=False)
        (tmp_path / "rollout.log").write_text(proc.stdout)
        assert proc.returncode != 0
        report = proc.report
        rows = _rows(report)
        down = rows["node08"]
        # Routed through os_activate's failure path (failed.yml), not the report's fallback
        # for a host that left the play unreachable.
        assert down["status"] == "failed", down
        assert down["slot_held"] is True
        assert down["reason"].startswith("did not come back within 20 s; its budget slot stays taken ("), down
        assert down["reboot_start"] is not None and down["reboot_end"] is None and not down["verified"]
        assert down["reboot_start"] >= rows["node08"]["staged_at"]
        # It counts as a failure, against max_failures, and the run says why it stopped.
        assert report["counts"]["failed"] == 1, report["counts"]
        assert report["max_failures"] == max_failures
        assert report["stop_reason"] == stop_reason, report["stop_reason"]
        assert "stopped: %s" % stop_reason in proc.stdout
        started = sorted(slot["host"] for slot in report["slots"])
        # Each host takes a slot as soon as it is staged: a green host staged before node08 may have
        # gone first, and activated; none after it. Blue's three hosts activate within their budget in
        # the 20 s node08 is waited for.
        green = [slot["host"] for slot in sorted(report["slots"], key=lambda slot: slot["granted_at"])
                 if slot["host"] in ("node08", "node09", "node10")]
        assert green[-1] == "node08", report["slots"]
        assert started == sorted(["node05", "node06", "node07"] + green), report["slots"]
        for node in started:
            if node != "node08":
                assert rows[node]["status"] == "activated", rows[node]
        for node in sorted(set(NODES) - set(started)):
            assert rows[node]["status"] == "not_activated", rows[node]
            assert rows[node]["reason"] == "staged, not activated: %s" % stop_reason, rows[node]
            assert rows[node]["reboot_start"] is None
            assert f.staged(node), node
        # The journal: node08 went down and did not boot during the run; no other green host
        # started a reboot while it was down.
        down_at = [e["ts"] for e in _events_of(proc.events, ["node08"], "reboot")]
        assert len(down_at) == 1
        assert _events_of(proc.events, ["node08"], "boot") == []
        later = [node for node in ("node09", "node10") if node not in green]
        assert _events_of(proc.events, later, "reboot") == []
        assert all(e["ts"] < down_at[0] for e in _events_of(proc.events, green[:-1], "reboot"))
        assert sorted(_reboots(proc.events)) == sorted(started)
        # Failed only after the timeout: the run waited that long for node08 after its reboot.
        assert report["ended_at"] - down_at[0] > 20, (report["ended_at"], down_at)

        # Cleared, it comes back: on the target, since its reboot had finalized the staged deployment.
        mark = len(lab.journal())
        lab.fleetlab("fault", "node08", "clear")
        lab.wait_up("node08", timeout=120)
        after = lab.journal()[mark:]
        boots = _events_of(after, ["node08"], "boot")
        assert boots, "node08 did not boot after fault clear"
        assert _events_of(after, later, "reboot") == []
        assert f.booted("node08") == fleet["digest"]
        print("no-boot: %.1f s rollout (timeout 20 s), node08 down %.1f s until cleared"
              % (proc.wall, boots[0]["ts"] - down_at[0]))
    finally:
        lab.fleetlab("fault", "node08", "clear")
        lab.wait_up("node08", timeout=120)
        f.restore(fleet["digest"])
        print("no-boot test total %.1f s" % (time.time() - began))


class _JournalWatch(threading.Thread):
    """Stops the registry once one of our nodes reads its first blob of the image repo."""

    def __init__(self, lab, nodes, repo):
        super().__init__(daemon=True)
        self.lab = lab
        self.nodes = set(nodes)
        self.repo = repo
        self.path = lab.state / "journal.jsonl"
        self.offset = self.path.stat().st_size
        self.seen = None
        self.stopped_at = None
        self.error = None
        self.done = threading.Event()

    def run(self):
        try:
            with self.path.open() as handle:
                handle.seek(self.offset)
                buf = ""
                while not self.done.is_set():
                    chunk = handle.read()
                    if not chunk:
                        time.sleep(0.02)
                        continue
                    buf += chunk
                    lines = buf.split("\n")
                    buf = lines.pop()
                    for line in lines:
                        event = json.loads(line) if line.strip() else {}
                        if (event.get("event") == "blob_read" and event.get("node") in self.nodes
                                and event.get("repo") == self.repo):
                            self.seen = event
                            self.lab.fleetlab("registry", "stop")
                            self.stopped_at = time.time()
                            return
        except Exception as exc:  # pylint: disable=broad-except
            self.error = exc


def test_registry_stopped_during_stage_reboots_no_failed_stage(lab, fleet, tmp_path):
    f = Pools(lab, tmp_path)
    repo = fleet["tag_image"].split("/", 1)[1].rsplit(":", 1)[0]
    watch = _JournalWatch(lab, NODES, repo)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(collections_path()), ANSIBLE_NOCOLOR="1",
               ANSIBLE_DEPRECATION_WARNINGS="False", ANSIBLE_FORCE_COLOR="0", ANSIBLE_STDOUT_CALLBACK="default")
    mark = len(lab.journal())
    began = time.time()
    restarted_at = None
    out = []
    try:
        watch.start()
        proc = subprocess.Popen([str(VENV_BIN / "ansible-playbook"), "-i", str(f.inventory), str(ROLLOUT),
                                 "--forks", "20", "-e", "fleetos_rollout_image=%s" % _pinned(fleet),
                                 "-e", "fleetos_report_dir=%s" % (tmp_path / "report")],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=str(REPO))
        for line in proc.stdout:
            out.append(line)
            # The stage phase is over (the first host collected its stage and goes on to its activation): start the
            # registry again.
            if restarted_at is None and "Take a budget slot of the pool" in line:
                watch.done.set()
                watch.join(30)
                lab.fleetlab("registry", "start")
                restarted_at = time.time()
        rc = proc.wait(900)
    finally:
        watch.done.set()
        watch.join(30)
        lab.fleetlab("registry", "start")
    stdout = "".join(out)
    try:
        assert watch.error is None, watch.error
        assert watch.seen is not None and watch.stopped_at is not None, stdout[-3000:]
        assert restarted_at is not None, stdout[-3000:]
        events = lab.journal()[mark:]
        stops = [e for e in events if e["event"] == "registry_stop"]
        assert stops and stops[0]["ts"] >= watch.seen["ts"], "the registry was stopped before the stage began"
        assert rc != 0
        report = json.loads((tmp_path / "report" / "rollout-report.json").read_text())
        rows = _rows(report)
        failed = sorted(n for n in NODES if rows[n]["status"] == "stage_failed")
        assert failed, stdout[-3000:]
        rebooted = set(_reboots(events))
        for node in failed:
            # Named, with the reason, never rebooted, still on the base image.
            assert rows[node]["reason"].startswith("stage failed, never rebooted"), rows[node]
            assert rows[node]["reboot_start"] is None
            assert node not in rebooted
            assert f.booted(node) == lab.base_digest
        md = (tmp_path / "report" / "rollout-report.md").read_text()
        assert all(node in md for node in failed)
        # The hosts whose stage did succeed went on normally.
        for node in set(NODES) - set(failed):
            assert rows[node]["status"] == "activated", rows[node]
        assert rebooted == set(NODES) - set(failed)
        assert report_mismatches(lab, report) == []
        print("registry stop during stage: stopped %.1f s after the first blob read, %d stage(s) failed (%s), "
              "%d activated; %.1f s" % (stops[0]["ts"] - watch.seen["ts"], len(failed), ", ".join(failed),
                                        len(NODES) - len(failed), time.time() - began))
    finally:
        f.restore(fleet["digest"])


def test_canary_goes_first_alone(lab, fleet, tmp_path):
    f = Pools(lab, tmp_path)
    try:
        proc = f.play(ROLLOUT, "-e", "fleetos_rollout_image=%s" % _pinned(fleet), "-e", "fleetos_rollout_canary=1")
        report = proc.report
        assert report["result"] == "success"
        assert report["counts"]["activated"] == 6
        assert report["slots"][0]["host"] == "node05"
        assert sorted(slot["host"] for slot in report["slots"]) == NODES
        rows = _rows(report)
        # The canary was verified before any other host started its reboot.
        others = [rows[n]["reboot_start"] for n in NODES if n != "node05"]
        assert rows["node05"]["verified_at"] < min(others)
        reboots = [e for e in proc.events if e["event"] == "reboot" and e.get("node") in NODES]
        assert reboots[0]["node"] == "node05"
        canary_boot = [e["ts"] for e in _events_of(proc.events, ["node05"], "boot")][0]
        assert all(e["ts"] > canary_boot for e in reboots[1:])
        # Then the rest follow within budget: at no instant is a pool over it, by the book and by
        # the journal.
        assert report["most_held"] == BUDGETS
        assert sorted(slot["host"] for slot in report["slots"][1:4]) == ["node06", "node07", "node08"]
        for pool, names in POOLS.items():
            assert _max_concurrent(_journal_intervals(proc.events, names)) <= BUDGETS[pool], pool
        assert sorted(_reboots(proc.events)) == NODES
        for node in NODES:
            assert f.booted(node) == fleet["digest"], node
        print("canary: %.1f s, slots %s" % (proc.wall, [slot["host"] for slot in report["slots"]]))
    finally:
        f.restore(fleet["digest"])


def test_paused_pool_is_skipped_and_reported(lab, fleet, tmp_path):
    f = Pools(lab, tmp_path, pool_vars={"green": {"fleetos_pool_paused": True}})
    try:
        proc = f.play(ROLLOUT, "-e", "fleetos_rollout_image=%s" % _pinned(fleet))
        report = proc.report
        rows = _rows(report)
        assert report["result"] == "success"
        assert report["pools"]["green"]["counts"]["skipped"] == 3
        assert report["pools"]["blue"]["counts"]["activated"] == 3
        for node in POOLS["green"]:
            assert rows[node]["status"] == "skipped", rows[node]
            assert "pool green is paused" in rows[node]["reason"]
            assert rows[node]["reboot_start"] is None and rows[node]["staged_at"] is None
            assert f.booted(node) == lab.base_digest and not f.staged(node), node
        for node in POOLS["blue"]:
            assert f.booted(node) == fleet["digest"], node
        # Nothing reached the paused pool: no reboot, not one blob read.
        assert sorted(_reboots(proc.events)) == POOLS["blue"]
        assert _events_of(proc.events, POOLS["green"], "blob_read") == []
        assert "pool green is paused" in (tmp_path / "report" / "rollout-report.md").read_text()
        print("paused pool: %.1f s, slots %s" % (proc.wall, [slot["host"] for slot in report["slots"]]))
    finally:
        f.restore(fleet["digest"])


FL_POOLS = {"rf-a": ["node05", "node06", "node07"], "rf-b": ["node08", "node09", "node10"]}
FL_BUDGETS = {"rf-a": 2, "rf-b": 1}
FL_SLOTS = {"rf-a": 1, "rf-b": 1}


def test_fleetlock_holders_never_exceed_slots(lab, fleet, tmp_path):
    """rf-a's budget (2) is larger than its FleetLock slots (1): FleetLock is the tighter limit."""
    f = Pools(lab, tmp_path, pools=FL_POOLS, budgets=FL_BUDGETS)
    url = yaml.safe_load(lab.inventory.read_text())["all"]["vars"]["fleetos_lab_fleetlock_url"]
    for group, slots in FL_SLOTS.items():
        lab.fleetlab("fleetlock", "slots", slots, "--group", group)
    try:
        proc = f.play(ROLLOUT, "-e", "fleetos_rollout_image=%s" % _pinned(fleet), "-e", "fleetos_fleetlock_url=%s" % url,
                      "-e", "os_activate_fleetlock_retry_delay=1", "-e", "os_activate_fleetlock_timeout=120", check=False)
        report = proc.report
        assert proc.returncode == 0, proc.stdout[-6000:]
        assert report["counts"]["activated"] == 6
        locks = [e for e in proc.events if e["event"].startswith("fleetlock_") and e.get("group") in FL_SLOTS]
        taken = [e for e in locks if e["event"] == "fleetlock_lock"]
        freed = [e for e in locks if e["event"] == "fleetlock_unlock"]
        # A lock for each activation, each by the host itself in its pool's group. A pre-reboot whose
        # answer the host lost is asked again: FleetLock's slots are recursive, so a second lock of a
        # host that holds its slot takes none more (the holders below stay within the slots).
        assert sorted(set(e["id"] for e in taken)) == NODES
        for e in taken:
            assert e["id"] in FL_POOLS[e["group"]]
            assert len(e["holders"]) <= FL_SLOTS[e["group"]], e
        # Every lock released, after its host was verified. A steady-state whose answer the host did not get
        # is sent again (up to three times, as a reboot manager does): FleetLock frees nothing for a host that
        # holds nothing, so a host may be freed twice, never a host that was not locked.
        assert sorted(set(e["id"] for e in freed)) == NODES
        rows = _rows(report)
        for e in freed:
            assert e["holders"] == [] or e["id"] not in e["holders"]
            assert e["ts"] >= rows[e["id"]]["verified_at"]
            # Every lock of the host while it held its slot: none after it was freed (one activation).
            assert all(lock["ts"] < e["ts"] for lock in taken if lock["id"] == e["id"]), (e, taken)
        status = json.loads(lab.fleetlab("fleetlock", "status").stdout)
        for group in FL_SLOTS:
            assert not status["holders"].get(group), status
        # FleetLock, not the budget, limited rf-a: the book let two of its hosts hold a slot at once,
        # FleetLock never two down at once.
        assert report["most_held"] == FL_BUDGETS
        for group, names in FL_POOLS.items():
            assert _max_concurrent(_journal_intervals(proc.events, names)) <= FL_SLOTS[group], group
        print("fleetlock: %.1f s, %d locks, %d refusals, slots %s" % (
            proc.wall, len(taken), len([e for e in locks if e["event"] == "fleetlock_refused"]),
            [slot["host"] for slot in report["slots"]]))
    finally:
        f.restore(fleet["digest"])


FZ_POOLS = {"rz-a": ["node05", "node06", "node07"], "rz-b": ["node08", "node09", "node10"]}
FZ_BUDGETS = {"rz-a": 2, "rz-b": 1}
# Seconds a host asks FleetLock again, every second: each ask is a module run on the host (2-3 s
# on a loaded machine), so a host asks at least twice only when this is well above that.
FZ_TIMEOUT = 12


def test_fleetlock_without_a_slot_retries_then_stops(lab, fleet, tmp_path):
    """FleetLock gives no slot at all: each host that holds a slot of the book asks again until the timeout,
    then the rollout stops."""
    f = Pools(lab, tmp_path, pools=FZ_POOLS, budgets=FZ_BUDGETS)
    url = yaml.safe_load(lab.inventory.read_text())["all"]["vars"]["fleetos_lab_fleetlock_url"]
    for group in FZ_POOLS:
        lab.fleetlab("fleetlock", "slots", 0, "--group", group)
    try:
        proc = f.play(ROLLOUT, "-e", "fleetos_rollout_image=%s" % _pinned(fleet), "-e", "fleetos_fleetlock_url=%s" % url,
                      "-e", "os_activate_fleetlock_retry_delay=1", "-e", "os_activate_fleetlock_timeout=%d" % FZ_TIMEOUT,
                      check=False)
        (tmp_path / "rollout.log").write_text(proc.stdout)
        assert proc.returncode != 0
        report = proc.report
        stop = report["stop_reason"]
        assert stop.startswith("FleetLock gave no slot within %d s (" % FZ_TIMEOUT), stop
        assert report["slots"] == []
        assert report["counts"]["not_activated"] == 6, report["counts"]
        for row in report["hosts"]:
            assert row["reason"] == "staged, not activated: %s" % stop, row
            assert f.staged(row["host"]) and f.booted(row["host"]) == lab.base_digest, row["host"]
        # The first hosts to hold a slot of the book (at most the budgets: 2 + 1) asked again after
        # each refusal, every second for FZ_TIMEOUT s; never locked, nothing rebooted. The lab journals a
        # refusal without group or id.
        refused = [e for e in proc.events if e["event"] == "fleetlock_refused" and e.get("path") == "/v1/pre-reboot"]
        passes = len(refused) // 3
        assert len(refused) >= 3 * 2, refused
        locks = [e for e in proc.events if e["event"] == "fleetlock_lock" and e.get("group") in FZ_POOLS]
        assert locks == []
        assert _reboots(proc.events) == []
        print("fleetlock without a slot: %.1f s, %d passes, %d refusals" % (proc.wall, passes, len(refused)))
    finally:
        for group in FZ_POOLS:
            lab.fleetlab("fleetlock", "slots", 1, "--group", group)
        f.restore(fleet["digest"])
