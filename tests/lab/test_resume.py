"""A killed controller, two rollouts at once, a registry down: the rollout's lease and resume.

On node05, node06 and node08 (pools blue and green of test_rollout.py, budget 1 each), in an
inventory of our own. The controller is killed as a machine dies: SIGKILL to the
whole process group of ansible-playbook (every process this test started). Every test
leaves its nodes booted on the lab's base image, nothing staged, no lease held.
"""

import json
import os
import re
import signal
import subprocess
import threading
import time

import pytest
import yaml

from conftest import REPO, VENV_BIN, collections_path
from test_rollout import ROLLBACK, ROLLOUT, _journal_intervals, _max_concurrent, fleet, report_mismatches  # noqa: F401
from test_rollout_failures import Pools, _pinned, _rows

LEASE = "/var/lib/fleetos/rollout-lease.json"
POOLS = {"blue": ["node05", "node06"], "green": ["node08"]}
BUDGETS = {"blue": 1, "green": 1}
NODES = sorted(n for names in POOLS.values() for n in names)


def _reboots(events):
    return [e["node"] for e in events if e["event"] == "reboot" and e.get("node") in NODES]


def _fleet(lab, tmp_path, pools=None, budgets=None):
    return Pools(lab, tmp_path, pools=pools or POOLS, budgets=budgets or BUDGETS)


def _env():
    # Custom stats shown: the set_stats data AWX keeps, printed by the default callback.
    return dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(collections_path()), ANSIBLE_NOCOLOR="1",
                ANSIBLE_DEPRECATION_WARNINGS="False", ANSIBLE_FORCE_COLOR="0", ANSIBLE_STDOUT_CALLBACK="default",
                ANSIBLE_SHOW_CUSTOM_STATS="True")


class Controller:
    """ansible-playbook rollout.yml in a process group of its own, its output collected in a thread."""

    def __init__(self, fleet_, report, *extra):
        self.report_dir = fleet_.tmp / report
        self.proc = subprocess.Popen(
            [str(VENV_BIN / "ansible-playbook"), "-i", str(fleet_.inventory), str(ROLLOUT), "--forks", "20",
             "-e", "fleetos_report_dir=%s" % self.report_dir] + list(extra),
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=_env(), cwd=str(REPO),
            start_new_session=True)
        self.lines = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line)

    @property
    def stdout(self):
        return "".join(self.lines)

    def kill(self):
        """SIGKILL the controller: ansible-playbook and every worker it forked (one process group)."""
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(60)
        self.reader.join(30)

    def wait(self, timeout=900):
        rc = self.proc.wait(timeout)
        self.reader.join(30)
        # Kept beside the report, for a failed test to be read whole.
        self.report_dir.mkdir(parents=True, exist_ok=True)
        (self.report_dir / "ansible-playbook.log").write_text(self.stdout)
        return rc

    @property
    def stats(self):
        """The set_stats data of the run (the default callback's CUSTOM STATS line), or None."""
        for line in self.lines:
            if line.strip().startswith("RUN:"):
                return json.loads(line.split("RUN:", 1)[1])
        return None

    @property
    def report(self):
        path = self.report_dir / "rollout-report.json"
        return json.loads(path.read_text()) if path.exists() else None


def _wait_for(predicate, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("timed out after %d s waiting for %s" % (timeout, what))


def _lease(lab, node, tries=3):
    """The node's lease, or None when it has none. A node the killed run had just told to reboot
    may answer wait_up from its old boot and then go down: asked again once it is back."""
    for attempt in range(tries):
        proc = lab.exec(node, ["cat", LEASE], check=False)
        if proc.returncode == 0:
            return json.loads(proc.stdout)
        if "No such file or directory" in proc.stderr:
            return None
        if attempt < tries - 1:
            time.sleep(2)
            lab.wait_up(node, 180)
    raise AssertionError("the lease of %s could not be read: %s" % (node, proc.stdout + proc.stderr))


def _recap_changed(stdout):
    """{host: changed count} from the PLAY RECAP."""
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\S+)\s+:\s+ok=\d+\s+changed=(\d+)", stdout, re.M)}


def _fleetlock_url(lab):
    return yaml.safe_load(lab.inventory.read_text())["all"]["vars"]["fleetos_lab_fleetlock_url"]


def _holders(lab, groups):
    status = json.loads(lab.fleetlab("fleetlock", "status").stdout)
    return {g: sorted(status["holders"].get(g) or []) for g in groups}


def _rollback(f, report_dir, *extra):
    """rollback.yml on the fleet's inventory, 20 forks, its report in ``report_dir``; -> the finished process."""
    return subprocess.run(
        [str(VENV_BIN / "ansible-playbook"), "-i", str(f.inventory), str(ROLLBACK), "--forks", "20",
         "-e", "fleetos_report_dir=%s" % report_dir] + list(extra),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=_env(), cwd=str(REPO), timeout=600)


def _foreign_lease(rollout, phase):
    """A lease of another controller's rollout, expired long ago, as a node's lease file holds it."""
    return {"version": 1, "rollout": rollout, "started_at": 1.0, "acquired_at": 1.0, "renewed_at": 1.0, "ttl": 60,
            "phase": phase, "target_digest": None, "released": False,
            "owner": {"controller": "another-controller", "user": "ops", "pid": 1, "start": "1"}}


def _restore(f, fleet_):
    """Every node back on the base image, and its lease released by a finished run."""
    for node in NODES:
        f.lab.wait_up(node, 180)
    f.restore(fleet_["digest"])


@pytest.mark.parametrize("with_fleetlock", [False, True], ids=["budget", "fleetlock"])
def test_killed_after_the_first_reboot_then_rerun_verifies(lab, fleet, tmp_path, with_fleetlock):
    f = _fleet(lab, tmp_path)
    extra = ["-e", "fleetos_rollout_image=%s" % fleet["tag_image"]]
    groups = sorted(POOLS)
    if with_fleetlock:
        url = _fleetlock_url(lab)
        # No holder left from an earlier test: the killed run's FleetLock slots are the ones under test.
        lab.fleetlab("fleetlock", "reset")
        for group in groups:
            lab.fleetlab("fleetlock", "slots", BUDGETS[group], "--group", group)
        extra += ["-e", "fleetos_fleetlock_url=%s" % url, "-e", "os_activate_fleetlock_retry_delay=1"]
    mark = len(lab.journal())
    try:
        first = Controller(f, "killed", *extra)
        _wait_for(lambda: _reboots(lab.journal()[mark:]), 600, "the first reboot of the rollout")
        first.kill()
        killed_at = len(lab.journal())
        rebooted = sorted(set(_reboots(lab.journal()[mark:])))
        for node in NODES:
            lab.wait_up(node, 180)
        # The killed run left the rebooted hosts booted on the target, unverified: phase rebooting.
        # Each host moves on by itself (no waves): one that was verified in the moment before the
        # kill has its slot freed and its lease released, phase done (rollout.yml releases an
        # activated host's lease in the same write).
        finished = []
        for node in rebooted:
            lease = _lease(lab, node)
            assert lease, node
            if lease["released"] and lease["phase"] == "done":
                finished.append(node)
                continue
            assert not lease["released"] and lease["phase"] == "rebooting", (node, lease)
            assert lease["target_digest"] == fleet["digest"]
        assert set(rebooted) - set(finished), (rebooted, finished)
        if with_fleetlock:
            held = _holders(lab, groups)
            assert set(rebooted) - set(finished) <= set(h for hs in held.values() for h in hs), (held, rebooted)

        rerun = Controller(f, "rerun", *extra)
        rc = rerun.wait()
        events = lab.journal()[killed_at:]
        report = rerun.report
        assert rc == 0 and report["result"] == "success", rerun.stdout[-6000:]
        rows = _rows(report)
        for node in NODES:
            assert f.booted(node) == fleet["digest"], node
        booted_by_killed_run = [n for n in rebooted if rows[n]["action"] == "verify" and n not in finished]
        assert booted_by_killed_run, (rebooted, report["hosts"])
        for node in booted_by_killed_run:
            assert rows[node]["status"] == "activated" and "verified on rerun" in rows[node]["reason"], rows[node]
            assert rows[node]["reboot_start"] is None and rows[node]["verified"]
        for node in finished:
            assert rows[node]["status"] in ("unchanged", "activated") and rows[node]["reboot_start"] is None, rows[node]
        # The rerun rebooted every other host once and none of those the killed run booted.
        assert sorted(_reboots(events)) == sorted(set(NODES) - set(booted_by_killed_run) - set(finished))
        for pool, names in POOLS.items():
            assert _max_concurrent(_journal_intervals(lab.journal()[mark:], names)) <= BUDGETS[pool], pool
        for node in NODES:
            lease = _lease(lab, node)
            assert lease["rollout"] == report["rollout"] and lease["released"], (node, lease)
        if with_fleetlock:
            assert _holders(lab, groups) == {g: [] for g in groups}

        again = Controller(f, "again", *extra)
        assert again.wait() == 0, again.stdout[-4000:]
        assert set(_recap_changed(again.stdout)[n] for n in NODES) == {0}, again.stdout[-3000:]
        assert {r["status"] for r in again.report["hosts"]} == {"unchanged"}
        print("killed after the first reboot (%s): %d rebooted by the killed run, %d verified on rerun" % (
            "fleetlock" if with_fleetlock else "budget", len(rebooted), len(booted_by_killed_run)))
    finally:
        _restore(f, fleet)
        if with_fleetlock:
            for group in groups:
                lab.fleetlab("fleetlock", "slots", 1, "--group", group)


def test_killed_during_the_stage_then_rerun_converges(lab, fleet, tmp_path):
    f = _fleet(lab, tmp_path)
    extra = ["-e", "fleetos_rollout_image=%s" % _pinned(fleet)]
    repo = fleet["tag_image"].split("/", 1)[1].rsplit(":", 1)[0]
    mark = len(lab.journal())
    try:
        first = Controller(f, "killed", *extra)
        _wait_for(lambda: [e for e in lab.journal()[mark:] if e["event"] == "blob_read" and e.get("repo") == repo
                           and e.get("node") in NODES], 600, "the stage to read a blob")
        first.kill()
        assert not _reboots(lab.journal()[mark:])
        rerun = Controller(f, "rerun", *extra)
        assert rerun.wait() == 0, rerun.stdout[-6000:]
        assert {r["status"] for r in rerun.report["hosts"]} == {"activated"}
        for node in NODES:
            assert f.booted(node) == fleet["digest"], node
        assert sorted(_reboots(lab.journal()[mark:])) == NODES
        again = Controller(f, "again", *extra)
        assert again.wait() == 0, again.stdout[-4000:]
        assert set(_recap_changed(again.stdout)[n] for n in NODES) == {0}, again.stdout[-3000:]
    finally:
        _restore(f, fleet)


def test_two_rollouts_at_once_one_runs_the_other_stops_before_staging(lab, fleet, tmp_path):
    f = _fleet(lab, tmp_path)
    extra = ["-e", "fleetos_rollout_image=%s" % _pinned(fleet)]
    mark = len(lab.journal())
    try:
        one, two = Controller(f, "one", *extra), Controller(f, "two", *extra)
        rcs = one.wait(), two.wait()
        reports = one.report, two.report
        assert None not in reports, (rcs, one.stdout[-5000:], two.stdout[-5000:])
        results = sorted((r["result"], i) for i, r in enumerate(reports))
        assert [r for r, _ in results] == ["failed", "success"], (one.stdout[-4000:], two.stdout[-4000:])
        loser, winner = reports[results[0][1]], reports[results[1][1]]
        assert rcs[results[0][1]] != 0 and rcs[results[1][1]] == 0
        for row in loser["hosts"]:
            assert row["status"] == "plan_failed" and row["stage_start"] is None, row
            # A host the winner rebooted while the loser waited for its lease did not answer.
            assert winner["rollout"] in row["reason"] or row["reason"].startswith(
                "taking the rollout lease failed: "), row
        # A host the loser read while the winner held it is refused by name, with the way to break
        # the lease. None may be left so: the loser waits up to fleetos_rollout_lease_wait (30 s)
        # for its leases, and by then a quick winner may have activated a host and released its
        # lease ("changed by rollout ... after this rollout started"), or be rebooting it.
        leased = [r for r in loser["hosts"] if r["reason"].startswith("leased by rollout %s" % winner["rollout"])]
        assert all("fleetos_rollout_break_lease=%s" % winner["rollout"] in r["reason"] for r in leased), leased
        assert {r["status"] for r in winner["hosts"]} == {"activated"}
        events = lab.journal()[mark:]
        assert sorted(_reboots(events)) == NODES
        for pool, names in POOLS.items():
            assert _max_concurrent(_journal_intervals(events, names)) <= BUDGETS[pool], pool
        print("two rollouts at once: %s ran, %s stopped (%d hosts leased to the other)" % (
            winner["rollout"], loser["rollout"], len(leased)))
    finally:
        _restore(f, fleet)


def test_a_lease_held_elsewhere_is_refused_until_broken(lab, fleet, tmp_path):
    """A lease of another controller's rollout: refused, named; broken with the variable.

    The image is the one node05 is booted on, so the run that breaks the lease changes
    nothing else on the node (no restore needed)."""
    f = _fleet(lab, tmp_path, pools={"blue": ["node05"]}, budgets={"blue": 1})
    stale = _foreign_lease("20260101T000000Z-dead01", "planned")
    lab.exec("node05", "mkdir -p /var/lib/fleetos && printf '%%s' '%s' > %s" % (json.dumps(stale), LEASE))
    base = "%s/fleetos/lab-os@%s" % (lab.registry, lab.base_digest)
    assert f.booted("node05") == lab.base_digest
    refused = Controller(f, "refused", "-e", "fleetos_rollout_image=%s" % base)
    assert refused.wait() != 0
    [row] = refused.report["hosts"]
    assert row["status"] == "plan_failed" and "rollout 20260101T000000Z-dead01 (ops@another-controller, pid 1), " \
        "expired" in row["reason"], row
    assert _lease(lab, "node05") == stale
    broken = Controller(f, "broken", "-e", "fleetos_rollout_break_lease=true", "-e", "fleetos_rollout_image=%s" % base)
    assert broken.wait() == 0, broken.stdout[-4000:]
    assert [r["status"] for r in broken.report["hosts"]] == ["unchanged"]
    lease = _lease(lab, "node05")
    assert lease["rollout"] == broken.report["rollout"] and lease["released"] and lease["phase"] == "planned"
    assert f.booted("node05") == lab.base_digest and not f.staged("node05")


def test_a_rollback_cancels_staged_deployments_and_takes_over_the_lease_of_a_rollout_that_is_gone(lab, fleet, tmp_path):
    """Two hosts on the rolled-out image, each with the base image staged again (a stage-only run); one of them
    leased by a rollout of another controller whose lease expired. rollback.yml with fleetos_rollout_break_lease
    takes that lease over, cancels both staged deployments (the controller decides which hosts, once) and rolls
    both back: booted on the base image, nothing staged, each lease this rollback's and released."""
    f = _fleet(lab, tmp_path, pools={"blue": ["node05", "node06"]}, budgets={"blue": 2})
    base = "%s/fleetos/lab-os@%s" % (lab.registry, lab.base_digest)
    try:
        rolled = Controller(f, "rollout", "-e", "fleetos_rollout_image=%s" % _pinned(fleet))
        assert rolled.wait() == 0, rolled.stdout[-4000:]
        staged = Controller(f, "staged", "-e", "fleetos_rollout_image=%s" % base,
                            "-e", "fleetos_rollout_activate=false")
        assert staged.wait() == 0, staged.stdout[-4000:]
        for node in ("node05", "node06"):
            assert f.booted(node) == fleet["digest"] and f.staged(node), node
        stale = _foreign_lease("20260101T000000Z-gone02", "staging")
        lab.exec("node06", "printf '%%s' '%s' > %s" % (json.dumps(stale), LEASE))
        back_dir = tmp_path / "rollback"
        back = _rollback(f, back_dir, "-e", "fleetos_rollback_from=%s" % fleet["digest"],
                         "-e", "fleetos_rollout_break_lease=true")
        assert back.returncode == 0, back.stdout[-4000:]
        report = json.loads((back_dir / "rollback-report.json").read_text())
        assert {row["host"]: row["status"] for row in report["hosts"]} == {"node05": "activated", "node06": "activated"}
        # The cancel ran on the two staged hosts only, in a play of their own.
        cancelled = re.search(r"TASK \[Cancel the staged deployment\][^\n]*\n+((?:changed: \[\w+\]\n)+)", back.stdout)
        assert cancelled and sorted(cancelled.group(1).split()) == ["[node05]", "[node06]", "changed:", "changed:"], \
            back.stdout[-4000:]
        for node in ("node05", "node06"):
            assert f.booted(node) == lab.base_digest and not f.staged(node), node
            lease = _lease(lab, node)
            assert lease["rollout"] != stale["rollout"] and lease["released"], (node, lease)
        assert _lease(lab, "node05")["rollout"] == _lease(lab, "node06")["rollout"]
    finally:
        _restore(f, fleet)


def test_registry_down_with_a_tag_every_host_plan_failed(lab, fleet, tmp_path):
    f = _fleet(lab, tmp_path)
    mark = len(lab.journal())
    lab.fleetlab("registry", "stop")
    try:
        run = Controller(f, "down", "-e", "fleetos_rollout_image=%s" % fleet["tag_image"])
        rc = run.wait()
    finally:
        lab.fleetlab("registry", "start")
    report = run.report
    assert rc != 0 and report is not None, run.stdout[-4000:]
    assert report["result"] == "failed" and report["counts"]["plan_failed"] == len(NODES)
    for row in report["hosts"]:
        assert row["reason"].startswith("resolving %s failed: " % fleet["tag_image"]), row
        assert "\n" not in row["reason"] and 'level=' not in row["reason"] and len(row["reason"]) < 300, row
    assert "undefined" not in run.stdout
    assert not _reboots(lab.journal()[mark:])
    for node in NODES:
        assert not f.staged(node), node


def test_stop_after_the_verified_canary_then_rerun_continues(lab, fleet, tmp_path):
    """Unattended canary (an AWX workflow's first job) of a tag: rc 0, result canary_verified in the
    stats, with the digest the tag was resolved to. The tag is then moved to another image; the next
    job, given the canary's stats as AWX hands them on (fleetos_last_rollout), refuses another tag and
    rolls out the canary's digest, not the tag's new one: the canary unchanged, the rest activated."""
    f = _fleet(lab, tmp_path, pools={"blue": ["node05", "node06"]}, budgets={"blue": 2})
    name = "fleetos/rollout-test:canary-%s" % fleet["digest"][7:15]
    verified = lab.build_image(name, "--from", "fleetos/lab-os:1.0", "--size-mb", "1", "--version", "canary-1")
    tag = "%s/%s" % (lab.registry, name)
    extra = ["-e", "fleetos_rollout_image=%s" % tag, "-e", "fleetos_rollout_canary=1"]
    try:
        canary = Controller(f, "canary", "-e", "fleetos_rollout_stop_after_canary=true", *extra)
        assert canary.wait() == 0, canary.stdout[-4000:]
        rows = _rows(canary.report)
        assert canary.report["result"] == "canary_verified", canary.report
        assert (rows["node05"]["status"], rows["node06"]["status"]) == ("activated", "not_activated")
        assert f.booted("node05") == verified and f.booted("node06") == lab.base_digest
        assert f.staged("node06")
        stats = canary.stats["fleetos_last_rollout"]
        assert (stats["result"], stats["rollout"]) == ("canary_verified", canary.report["rollout"])
        assert stats["hosts"]["node06"] == {"status": "not_activated", "target_digest": verified,
                                            "booted_digest": lab.base_digest, "activation": None}
        assert stats["report_dir"] == str(canary.report_dir)
        assert stats["images"] == {tag: verified}

        moved = lab.build_image(name, "--from", "fleetos/lab-os:1.0", "--size-mb", "1", "--version", "canary-2")
        assert moved != verified
        handed_on = ["-e", json.dumps({"fleetos_last_rollout": stats})]
        other = Controller(f, "other", *handed_on, "-e", "fleetos_rollout_image=%s/fleetos/lab-os:1.1" % lab.registry)
        assert other.wait() != 0
        assert {row["status"] for row in other.report["hosts"]} == {"plan_failed"}
        assert ("image %s/fleetos/lab-os:1.1 is a tag the canary run did not verify (fleetos_last_rollout pins %s)"
                % (lab.registry, tag)) in _rows(other.report)["node06"]["reason"], other.report["hosts"]

        rest = Controller(f, "rest", *handed_on, *extra)
        assert rest.wait() == 0, rest.stdout[-4000:]
        rows = _rows(rest.report)
        assert (rows["node05"]["status"], rows["node06"]["status"]) == ("unchanged", "activated")
        assert rows["node06"]["target_digest"] == verified and f.booted("node06") == verified
        assert rest.stats["fleetos_last_rollout"]["result"] == "success"
    finally:
        _restore(f, {"digest": verified})


def test_a_rollback_during_a_rollout_is_refused_before_it_changes_anything(lab, fleet, tmp_path):
    """rollback.yml on the hosts a rollout is activating: refused by the rollout's leases (each host
    named, an unreachable one too), nothing cancelled; the rollout then finishes, and both reports are
    what the nodes show afterwards."""
    f = _fleet(lab, tmp_path)
    mark = len(lab.journal())
    try:
        for node in NODES:
            lab.fleetlab("fault", node, "slow-boot", "15")
        rollout = Controller(f, "rollout", "-e", "fleetos_rollout_image=%s" % _pinned(fleet))
        _wait_for(lambda: _reboots(lab.journal()[mark:]), 300, "the rollout's first reboot")
        back_dir = tmp_path / "rollback"
        back = _rollback(f, back_dir, "-e", "fleetos_rollback_from=%s" % fleet["digest"],
                         "-e", "fleetos_rollout_lease_wait=0")
        assert rollout.wait() == 0, rollout.stdout[-4000:]
        assert back.returncode != 0
        refused = {row["host"]: row for row in json.loads((back_dir / "rollback-report.json").read_text())["hosts"]}
        # Every host it was asked about is in its report, with the reason: leased by the rollout, or not
        # answering while the rollout rebooted it.
        assert sorted(refused) == NODES, refused
        for node, row in refused.items():
            assert row["status"] == "plan_failed" and row["reboot_start"] is None, row
            assert ("rollout %s" % rollout.report["rollout"] in row["reason"]
                    or row["reason"].startswith("taking the rollout lease failed: ")), row
        assert any(row["reason"].startswith("leased by rollout %s" % rollout.report["rollout"]) for row in refused.values())
        # The rollout was not disturbed: every host activated once, as the nodes show.
        assert {row["host"]: row["status"] for row in rollout.report["hosts"]} == dict.fromkeys(NODES, "activated")
        assert sorted(_reboots(lab.journal()[mark:])) == NODES
        for node in NODES:
            lab.wait_up(node, 180)
            assert f.booted(node) == fleet["digest"] and not f.staged(node), node
        assert report_mismatches(lab, rollout.report) == []
    finally:
        for node in NODES:
            lab.fleetlab("fault", node, "clear")
        _restore(f, fleet)


def test_fleetlock_stopped_mid_rollout_then_started_again(lab, fleet, tmp_path):
    """FleetLock stopped at the rollout's first lock and started again after the run. The run ends with a
    report: a host verified while FleetLock was down keeps its FleetLock slot and is not a failure; a host
    refused a slot until the timeout stops the run, which names this run's holders; no pool goes over its
    budget. The rerun frees the slots its hosts hold on their target before any host asks for one, so
    nothing waits, and it converges without `fleetlab fleetlock reset`."""
    f = _fleet(lab, tmp_path)
    groups = sorted(POOLS)
    # No holder left from an earlier test; one slot per group.
    lab.fleetlab("fleetlock", "reset")
    for group in groups:
        lab.fleetlab("fleetlock", "slots", 1, "--group", group)
    extra = ["-e", "fleetos_rollout_image=%s" % _pinned(fleet), "-e", "fleetos_fleetlock_url=%s" % _fleetlock_url(lab),
             "-e", "os_activate_fleetlock_retry_delay=1", "-e", "os_activate_fleetlock_timeout=15"]
    mark = len(lab.journal())
    try:
        for node in NODES:
            # Down long enough for FleetLock to be stopped before the first locked host comes back.
            lab.fleetlab("fault", node, "slow-boot", "5")
        first = Controller(f, "down", *extra)
        _wait_for(lambda: [e for e in lab.journal()[mark:] if e["event"] == "fleetlock_lock" and e.get("group") in groups],
                  600, "the rollout's first FleetLock slot")
        lab.fleetlab("fleetlock", "stop")
        rc = first.wait()
        held = _holders(lab, groups)
        lab.fleetlab("fleetlock", "start")
        report = first.report
        assert report is not None, first.stdout[-4000:]
        rows = _rows(report)
        holders = sorted(h for hs in held.values() for h in hs)
        assert holders, held
        # Nobody failed for FleetLock's absence: activated (its slot kept) or staged and not activated.
        assert rc != 0 and report["counts"]["failed"] == 0, (report["counts"], first.stdout[-4000:])
        assert {row["status"] for row in report["hosts"]} <= {"activated", "not_activated"}, report["hosts"]
        kept = sorted(h for h, row in rows.items() if "FleetLock did not answer its steady-state" in row["reason"])
        assert kept == holders, (kept, held)
        assert all(rows[h]["status"] == "activated" for h in kept)
        stop = report["stop_reason"]
        assert stop.startswith("FleetLock gave no slot within 15 s ("), stop
        assert stop.endswith("this run's hosts that hold one: %s)" % ", ".join(
            h for h in NODES if h in holders)), (stop, holders)
        waiting = [h for h, row in rows.items() if row["status"] == "not_activated"]
        assert waiting and all(stop in rows[h]["reason"] for h in waiting), rows
        assert report_mismatches(lab, report) == []
        for pool, names in POOLS.items():
            assert _max_concurrent(_journal_intervals(lab.journal()[mark:], names)) <= BUDGETS[pool], pool

        again_at = len(lab.journal())
        rerun = Controller(f, "rerun", *extra)
        assert rerun.wait() == 0, rerun.stdout[-6000:]
        events = lab.journal()[again_at:]
        # The kept slots freed first: no host of the rerun was refused a slot, none waited.
        freed = [e for e in events if e["event"] == "fleetlock_unlock" and e.get("id") in holders]
        locks = [e for e in events if e["event"] == "fleetlock_lock" and e.get("group") in groups]
        assert sorted(set(e["id"] for e in freed)) == holders, freed
        assert all(e["ts"] < lock["ts"] for e in freed for lock in locks), (freed, locks)
        assert [e for e in events if e["event"] == "fleetlock_refused"] == []
        assert sorted(e["id"] for e in locks) == sorted(waiting)
        again = _rows(rerun.report)
        assert {h: again[h]["status"] for h in NODES} == dict(
            {h: "unchanged" for h in kept}, **{h: "activated" for h in waiting}), rerun.report["hosts"]
        assert report_mismatches(lab, rerun.report) == []
        assert _holders(lab, groups) == {g: [] for g in groups}
        for pool, names in POOLS.items():
            assert _max_concurrent(_journal_intervals(lab.journal()[mark:], names)) <= BUDGETS[pool], pool
        print("fleetlock stopped at the first lock: %d kept a slot (%s), %d waited; rerun activated %d" % (
            len(kept), ", ".join(kept), len(waiting), len(waiting)))
    finally:
        lab.fleetlab("fleetlock", "start")
        for node in NODES:
            lab.fleetlab("fault", node, "clear")
        _restore(f, fleet)


def test_a_host_unreachable_during_the_stage_is_reported_as_such(lab, fleet, tmp_path):
    """node08's link goes down once its stage was started: its row says unreachable during the stage,
    never rebooted; the other hosts are activated; every row is what the nodes show."""
    f = _fleet(lab, tmp_path)
    mark = len(lab.journal())
    try:
        run = Controller(f, "report", "-e", "fleetos_rollout_image=%s" % _pinned(fleet))
        _wait_for(lambda: "PLAY [Stage and activate]" in run.stdout, 600, "the activation play")
        lab.fleetlab("fault", "node08", "unreachable")
        rc = run.wait()
        lab.fleetlab("fault", "node08", "clear")
        lab.wait_up("node08", 180)
        rows = _rows(run.report)
        assert rc != 0
        assert rows["node08"]["status"] == "stage_failed", rows["node08"]
        assert rows["node08"]["reason"].startswith("unreachable during the stage"), rows["node08"]
        assert rows["node08"]["reboot_start"] is None and "node08" not in _reboots(lab.journal()[mark:])
        assert {h: rows[h]["status"] for h in ("node05", "node06")} == dict.fromkeys(("node05", "node06"), "activated")
        assert report_mismatches(lab, run.report) == []
        assert "node08" in (run.report_dir / "rollout-report.md").read_text()
    finally:
        lab.fleetlab("fault", "node08", "clear")
        _restore(f, fleet)
