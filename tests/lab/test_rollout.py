"""The rolling rollout (playbooks/rollout.yml) on lab nodes node05-node10 only.

Two pools of three nodes each (blue: budget 2, green: budget 1) in an inventory of
our own under tmp_path, so that the tests coexist with the other lab tests on
node01-node04. Every test leaves its nodes booted on the lab's base image.
"""

import json
import os
import time

import pytest
import yaml

from test_integration_targets import run_playbook
from conftest import REPO, read_hosts

NODES = ["node05", "node06", "node07", "node08", "node09", "node10"]
POOLS = {"blue": ["node05", "node06", "node07"], "green": ["node08", "node09", "node10"]}
BUDGETS = {"blue": 2, "green": 1}
# Seconds of boot delay that keep a host in its slot while another host's failure becomes known.
SLOW_BOOT = 20
ROLLOUT = REPO / "playbooks" / "rollout.yml"
ROLLBACK = REPO / "playbooks" / "rollback.yml"
# The activation plays' strategy (fleetos_rollout_strategy) when the environment asks for one: mk/lab.mk runs this
# file again with ansible-core's own free strategy (test-lab-free). Unset: the collection's fleetos.layering.slots.
STRATEGY = os.environ.get("FLEETOS_LAB_ROLLOUT_STRATEGY") or None


@pytest.fixture(scope="module")
def fleet(lab, rollout_image):
    """node05-node10 up with no fault, and the image to roll out: conftest's rollout_image,
    built once for test_rollout, test_rollout_failures and test_resume (each test leaves
    its nodes on the base image, so the same image is a change for each)."""
    lab.fleetlab("up", "--nodes", "10")
    for node in NODES:
        lab.fleetlab("fault", node, "clear")
    return dict(rollout_image)


def _inventory(lab, path, budgets=None):
    hosts, allvars = read_hosts(lab.inventory)
    budgets = budgets or BUDGETS
    inventory = {"all": {"vars": allvars, "children": {"rollout_lab": {"children": {
        pool: {"vars": {"fleetos_pool": pool, "fleetos_pool_max_unavailable": budgets[pool]},
               "hosts": {name: hosts[name] for name in names}}
        for pool, names in POOLS.items()}}}}}
    path.write_text(yaml.safe_dump(inventory, sort_keys=False))
    return path


class Fleet:
    def __init__(self, lab, tmp_path):
        self.lab = lab
        self.tmp = tmp_path
        self.inventory = _inventory(lab, tmp_path / "hosts.yml")

    def play(self, playbook, *extra, report="report", check=True, inventory=None, forks=20):
        start = len(self.lab.journal())
        began = time.time()
        if STRATEGY and playbook in (ROLLOUT, ROLLBACK):
            extra = ("-e", "fleetos_rollout_strategy=%s" % STRATEGY) + extra
        proc = _run(self.lab, inventory or self.inventory, playbook, "--forks", str(forks),
                    "-e", "fleetos_report_dir=%s" % (self.tmp / report), *extra, check=check)
        proc.wall = time.time() - began
        proc.events = self.lab.journal()[start:]
        path = self.tmp / report / "rollout-report.json"
        proc.report = json.loads(path.read_text()) if path.exists() and playbook == ROLLOUT else None
        return proc

    def booted(self, node):
        status = self.lab.rpm_ostree_status(node)
        booted = [d for d in status["deployments"] if d.get("booted")][0]
        return booted.get("container-image-reference-digest")

    def staged(self, node):
        status = self.lab.rpm_ostree_status(node)
        return [d for d in status["deployments"] if d.get("staged")]

    def restore(self, digest):
        """Back to the base image: cancel staged deployments, roll back hosts on digest.

        The rollback runs on an inventory of its own: the same hosts in one pool whose budget
        is all of them, so every host is rolled back in one wave (what a test checks is the
        rollout before it; the restore only has to get every host back, which is asserted)."""
        for node in NODES:
            self.lab.fleetlab("fault", node, "clear")
        self.play(ROLLBACK, "-e", "fleetos_rollback_from=%s" % digest, report="restore",
                  inventory=self._restore_inventory())
        for node in NODES:
            # booted() and staged() from one status read.
            deployments = self.lab.rpm_ostree_status(node)["deployments"]
            booted = [d for d in deployments if d.get("booted")][0]
            assert booted.get("container-image-reference-digest") == self.lab.base_digest, node
            assert not [d for d in deployments if d.get("staged")], node

    def _restore_inventory(self):
        """Our inventory's hosts in one pool, budget: every host (one wave)."""
        hosts, allvars = read_hosts(self.inventory)
        path = self.tmp / "restore-hosts.yml"
        path.write_text(yaml.safe_dump({"all": {"vars": allvars, "children": {"restore": {
            "vars": {"fleetos_pool": "restore", "fleetos_pool_max_unavailable": len(hosts)},
            "hosts": hosts}}}}, sort_keys=False))
        return path


def _run(lab, inventory, playbook, *extra, check=True):
    """run_playbook from test_integration_targets, with our own inventory."""
    class _Lab:
        pass

    shim = _Lab()
    shim.inventory = inventory
    return run_playbook(shim, playbook, *extra, check=check)


def _slot_reuse_gaps(slots, budgets):
    """Seconds from a slot's release to its next grant, per pool: a grant beyond a pool's budget
    waits for the earliest release not yet reused (a slot freed is a slot taken)."""
    gaps = []
    for pool, budget in budgets.items():
        mine = sorted((s for s in slots if s["pool"] == pool), key=lambda s: s["granted_at"])
        releases = []
        for index, slot in enumerate(mine):
            if index >= budget:
                freed = min(releases)
                releases.remove(freed)
                gaps.append(slot["granted_at"] - freed)
            if slot["released_at"] is not None:
                releases.append(slot["released_at"])
    return gaps


def _max_concurrent(intervals):
    points = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    now = best = 0
    for _, step in points:
        now += step
        best = max(best, now)
    return best


def _journal_intervals(events, nodes):
    """(reboot ts, next boot ts) per reboot of the nodes, from the lab journal."""
    out = []
    pending = {}
    for event in events:
        if event.get("node") not in nodes:
            continue
        if event["event"] == "reboot":
            pending[event["node"]] = float(event["ts"])
        elif event["event"] == "boot" and event["node"] in pending:
            out.append((pending.pop(event["node"]), float(event["ts"])))
    return out


def report_mismatches(lab, report):
    """The rows of a rollout report that are not what their node shows now (rpm-ostree status read on
    the node itself): [] when every status is true to the fleet.

    activated/unchanged: booted on the target. failed: booted on the old digest when rolled back, and
    nothing of the target staged; else the digest the row names (a host that keeps its slot, unchecked).
    staged/not_activated: the target staged, the old digest booted. stage_failed: never rebooted, so
    the old digest booted. plan_failed/skipped: the old digest booted where the plan read one.
    Every row that names a booted digest names the one booted. A deployment staged before the run is
    named in ``staged_before`` when something other than the target is staged."""
    wrong = []
    for row in report["hosts"]:
        deployments = lab.rpm_ostree_status(row["host"])["deployments"]
        booted = [d for d in deployments if d.get("booted")][0].get("container-image-reference-digest")
        staged = [d.get("container-image-reference-digest") for d in deployments if d.get("staged")]
        status, target, old = row["status"], row["target_digest"], row["old_digest"]
        if status in ("activated", "unchanged"):
            ok = booted == target
        elif status == "failed" and row["rolled_back"]:
            ok = booted == old and target not in staged
        elif status == "failed":
            ok = row["slot_held"] or row["booted_digest"] is not None
        elif status in ("staged", "not_activated"):
            ok = booted == old and staged == [target]
        else:
            ok = old is None or booted == old
        if row["booted_digest"] is not None and row["booted_digest"] != booted:
            ok = False
        if not ok:
            wrong.append((row["host"], status, row["reason"], {"booted": booted, "staged": staged}))
    return wrong


def _reboots(events):
    return [e["node"] for e in events if e["event"] == "reboot" and e.get("node") in NODES]


def test_rollout_happy_path_and_rerun(lab, fleet, tmp_path):
    f = Fleet(lab, tmp_path)
    try:
        proc = f.play(ROLLOUT, "-e", "fleetos_rollout_image=%s" % fleet["tag_image"])
        report = proc.report
        assert report["result"] == "success", proc.stdout[-5000:]
        assert report["counts"]["activated"] == 6
        for node in NODES:
            assert f.booted(node) == fleet["digest"], node
        assert report_mismatches(lab, report) == []
        # The tag was resolved once: every host got the same digest.
        assert {r["target_digest"] for r in report["hosts"]} == {fleet["digest"]}
        assert {r["old_digest"] for r in report["hosts"]} == {lab.base_digest}
        # One reboot per changed node, no more.
        assert sorted(_reboots(proc.events)) == NODES
        # At no instant is a pool over its budget: from the journal (reboot -> boot) and from
        # the report (reboot start -> verified healthy).
        for pool, names in POOLS.items():
            assert _max_concurrent(_journal_intervals(proc.events, names)) <= BUDGETS[pool], pool
            spans = [(r["reboot_start"], r["verified_at"]) for r in report["hosts"] if r["host"] in names]
            assert _max_concurrent(spans) <= BUDGETS[pool], pool
        # The budget is used (blue holds two slots at once), and a slot freed is a slot taken.
        assert report["most_held"] == BUDGETS
        assert sorted(s["host"] for s in report["slots"]) == NODES
        gaps = _slot_reuse_gaps(report["slots"], BUDGETS)
        assert len(gaps) == 3 and max(gaps) < 3.0, gaps
        # Each host was staged before its own reboot; no host waited for the whole fleet's stage.
        for r in report["hosts"]:
            assert r["staged_at"] < r["reboot_start"], r
        for name in ("rollout-report.md", "rollout-timeline.svg"):
            assert (tmp_path / "report" / name).stat().st_size > 200

        # The rerun on the converged fleet: nothing pulled, staged or rebooted, changed=0.
        again = f.play(ROLLOUT, "-e", "fleetos_rollout_image=%s" % fleet["tag_image"], report="rerun")
        assert again.report["counts"]["unchanged"] == 6
        assert _reboots(again.events) == []
        assert [e for e in again.events if e["event"] == "blob_read" and e.get("node") in NODES] == []
        recap = [line for line in again.stdout.splitlines() if " : ok=" in line]
        # One line a host: the run-once steps (the book, the report) run on the controller for the first host.
        assert len(recap) == 6 and all("changed=0" in line for line in recap), "\n".join(recap)
        print("happy path: %.1f s for 6 nodes, budgets %s, %d reboots; rerun %.1f s"
              % (proc.wall, BUDGETS, len(_reboots(proc.events)), again.wall))
    finally:
        f.restore(fleet["digest"])


@pytest.mark.skipif(STRATEGY not in (None, "fleetos.layering.slots"),
                    reason="only fleetos.layering.slots parks a host waiting for a slot off the forks; with %s the run"
                           " refuses fewer forks than hosts (test_rollout_on_ansible_cores_strategy_refuses_too_few_forks)"
                           % STRATEGY)
def test_rollout_with_fewer_forks_than_hosts_keeps_every_pool_busy(lab, fleet, tmp_path):
    """Two forks for six hosts, budgets 1 and 1, the blue hosts first in the inventory: a blue
    host waiting for blue's slot holds no fork (strategy fleetos.layering.slots), so a green host
    reboots beside a blue one. With a fork per waiting host (serial waves of two), node06 would
    wait for node05 in the first wave and node09 and node10 would reboot with no blue host beside:
    two green reboots of three alone. With two forks both held by the slot holders between their
    steps, the next host's stage read waits for a fork, so one pool may fall a few seconds behind
    the other and its last reboot run alone: at most one green reboot alone."""
    f = Fleet(lab, tmp_path)
    budgets = {"blue": 1, "green": 1}
    f.inventory = _inventory(lab, tmp_path / "hosts.yml", budgets)
    try:
        for node in NODES:
            lab.fleetlab("fault", node, "slow-boot", "6")
        proc = f.play(ROLLOUT, "-e", "fleetos_rollout_image=%s" % fleet["tag_image"], forks=2)
        report = proc.report
        assert report["result"] == "success", proc.stdout[-5000:]
        assert report["counts"]["activated"] == 6
        assert sorted(_reboots(proc.events)) == NODES
        spans = dict((pool, _journal_intervals(proc.events, names)) for pool, names in POOLS.items())
        for pool in POOLS:
            assert _max_concurrent(spans[pool]) == 1, (pool, spans[pool])
        # Green reboots overlap blue ones: at most one alone (serial waves leave two alone).
        lonely = [span for span in spans["green"]
                  if not any(start < span[1] and span[0] < end for start, end in spans["blue"])]
        assert len(spans["green"]) == 3 and len(lonely) <= 1, (spans, proc.stdout[-3000:])
        print("two forks, six hosts: %.1f s" % proc.wall)
    finally:
        for node in NODES:
            lab.fleetlab("fault", node, "clear")
        f.restore(fleet["digest"])


STEPS = "/var/lib/fleetos-test-steps"


def _step_files(tmp_path):
    """Pre-activate, health and post-activate task files: each writes its step on the host (the
    health file then runs lab-health, which a fail-health fault fails), with raw: the nodes have
    no Python, as docs/hosts-without-python.md says hook tasks are written for such hosts."""
    files = {}
    for step in ("pre", "health", "post"):
        tasks = [{"name": "Record the %s step" % step, "ansible.builtin.raw": "echo %s >> %s" % (step, STEPS)}]
        if step == "health":
            tasks.append({"name": "Check the health", "ansible.builtin.raw": "lab-health", "changed_when": False})
        files[step] = tmp_path / ("%s.yml" % step)
        files[step].write_text(yaml.safe_dump(tasks, sort_keys=False))
    return files


def test_rollout_fail_health_rolls_back_and_stops(lab, fleet, tmp_path):
    f = Fleet(lab, tmp_path)
    steps = _step_files(tmp_path)
    for node in NODES:
        lab.exec(node, ["rm", "-f", STEPS])
    try:
        lab.fleetlab("fault", "node06", "fail-health")
        # node05 and the green hosts boot slowly: green's one slot goes round its three hosts in three
        # slow boots, and node06's failure is known before, so that some hosts stay out (with quick boots
        # every host may finish first).
        for node in ("node05", "node08", "node09", "node10"):
            lab.fleetlab("fault", node, "slow-boot", str(SLOW_BOOT))
        proc = f.play(ROLLOUT, "-e", "fleetos_rollout_image=%s@%s" % (fleet["tag_image"].rsplit(":", 1)[0],
                                                                    fleet["digest"]),
                      "-e", "fleetos_rollout_health_tasks=%s" % steps["health"],
                      "-e", "fleetos_rollout_pre_activate_tasks=%s" % steps["pre"],
                      "-e", "fleetos_rollout_post_activate_tasks=%s" % steps["post"],
                      "-e", "fleetos_rollout_max_failures=1", check=False)
        assert proc.returncode != 0
        rows = {r["host"]: r for r in proc.report["hosts"]}
        assert rows["node06"]["status"] == "failed" and rows["node06"]["rolled_back"]
        assert "lab-health" in rows["node06"]["reason"] or "health" in rows["node06"]["reason"]
        assert f.booted("node06") == lab.base_digest
        # Each host took a slot as soon as it was staged; once node06's failure was known, no new slot
        # was granted: the hosts granted before it are activated, the others never got one.
        granted = {s["host"] for s in proc.report["slots"]}
        activated = sorted(h for h, r in rows.items() if r["status"] == "activated")
        assert activated == sorted(granted - {"node06"}), (rows, proc.report["slots"])
        left = [h for h in NODES if h not in granted]
        assert left, proc.report["slots"]
        for node in left:
            assert rows[node]["status"] == "not_activated", node
            assert "max_failures" in rows[node]["reason"]
            assert f.booted(node) == lab.base_digest
            assert f.staged(node), node
        failed_at = rows["node06"]["rollback_start"]
        assert all(s["granted_at"] < failed_at for s in proc.report["slots"]), proc.report["slots"]
        assert "node06" in proc.report["stop_reason"]
        # node06 rebooted twice (activation, rollback), every activated host once, the others never.
        assert sorted(_reboots(proc.events)) == sorted(activated + ["node06", "node06"])
        assert "node06" in (tmp_path / "report" / "rollout-report.md").read_text()
        assert report_mismatches(lab, proc.report) == []
        # The task files ran in the slot hold, in order: pre before the reboot, health after it, post
        # only on a healthy host; none on a host that got no slot.
        done = {node: lab.exec(node, ["cat", STEPS], check=False).stdout.split() for node in NODES}
        assert done == dict({node: ["pre", "health", "post"] for node in activated}, node06=["pre", "health"],
                            **{node: [] for node in left}), done
    finally:
        for node in NODES:
            lab.exec(node, ["rm", "-f", STEPS], check=False)
        f.restore(fleet["digest"])


def test_rollout_registry_down_during_stage_reboots_nothing(lab, fleet, tmp_path):
    f = Fleet(lab, tmp_path)
    pinned = "%s@%s" % (fleet["tag_image"].rsplit(":", 1)[0], fleet["digest"])
    lab.fleetlab("registry", "stop")
    try:
        proc = f.play(ROLLOUT, "-e", "fleetos_rollout_image=%s" % pinned, check=False)
    finally:
        lab.fleetlab("registry", "start")
    try:
        assert proc.returncode != 0
        rows = {r["host"]: r for r in proc.report["hosts"]}
        failed = [n for n in NODES if rows[n]["status"] == "stage_failed"]
        assert failed, proc.stdout[-3000:]
        assert all(rows[n]["reboot_start"] is None for n in failed)
        # No host whose stage failed was rebooted (here: none at all).
        assert not set(_reboots(proc.events)) & set(failed)
        for node in failed:
            assert f.booted(node) == lab.base_digest
    finally:
        f.restore(fleet["digest"])


@pytest.mark.skipif(STRATEGY in (None, "fleetos.layering.slots"), reason="ansible-core's strategies only (FLEETOS_LAB_ROLLOUT_STRATEGY)")
def test_rollout_on_ansible_cores_strategy_refuses_too_few_forks(lab, fleet, tmp_path):
    f = Fleet(lab, tmp_path)
    try:
        proc = f.play(ROLLOUT, "-e", "fleetos_rollout_image=%s" % fleet["tag_image"], forks=2, check=False)
        assert proc.returncode != 0
        assert ("fleetos_rollout_strategy %s needs a fork for each host of the run (6) and the run has 2 (--forks)"
                % STRATEGY) in " ".join(proc.stdout.split()), proc.stdout[-3000:]
        # Refused before any host was contacted: nothing staged, nothing rebooted.
        assert [e for e in proc.events if e.get("node") in NODES] == []
    finally:
        f.restore(fleet["digest"])
