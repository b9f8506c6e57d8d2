"""Every wait ends: a host that hangs fails alone, and the run ends with its report (docs/rollout.md, "Bounds").

On node05-node10, as test_rollout.py and test_rollout_failures.py (the same module fixture ``fleet``), in two
runs, so that the lab tests stay short:

- one rollout with three hangs at once, each in a pool of its own, small bounds: node05's health command never
  returns (health bound 30 s), node08's health task file hangs (its task's own ``timeout: 8``), node10's sshd stops
  answering (SIGSTOP) in the middle of its health command (the connection is cut on the controller: health bound
  30 s and 10 s, command bound 10 s);
- one rollout whose registry stalls (stopped with SIGSTOP, not killed) once the stages pull: stage bound 20 s.

Each asserts what the run computed (the report's rows, reasons, counts) against the fleet, and no pool above its
budget; the only timed checks are generous "ended within the bound plus a margin" ones.
"""

import os
import re
import signal
import threading
import time
import uuid

import yaml

from conftest import read_hosts
from test_rollout import ROLLOUT, _max_concurrent, _reboots, fleet, report_mismatches  # noqa: F401 (fleet: fixture)
from test_rollout_failures import Pools, _events_of, _pinned, _rows

HUNG_POOLS = {"hung": ["node05", "node06", "node07"], "hook": ["node08", "node09"], "stall": ["node10"]}
HUNG_BUDGETS = {"hung": 1, "hook": 1, "stall": 1}
HEALTH_TIMEOUT = 30
COMMAND_TIMEOUT = 10
HOOK_TIMEOUT = 8
# The health command of node10: long enough for its link to go down in its middle.
STALL_HEALTH = "sleep 8"


def _without_keepalive(args):
    """The lab's ssh arguments without its ServerAlive options: ssh would then notice a silent peer itself
    after 9 s, and the test is of the collection's own bound, which holds whatever the user's ssh options."""
    return re.sub(r"\s*-o\s*ServerAlive\w+=\S+", "", args).strip()


def _sshd_pids(lab, node):
    """The node's sshd processes (its listener, PID 1 of its PID namespace, and its sessions), as the machine
    numbers them."""
    init = int((lab.state / "nodes" / node / "init.pid").read_text().strip())
    namespace = os.readlink("/proc/%d/ns/pid" % init)
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            if os.readlink("/proc/%s/ns/pid" % name) == namespace and \
                    open("/proc/%s/comm" % name).read().strip() == "sshd":
                pids.append(int(name))
        except OSError:
            continue
    return pids


def _inventory(lab, path, pools, budgets, host_vars):
    """Our pools, with per-host variables (the lab's connection variables kept)."""
    hosts, allvars = read_hosts(lab.inventory)
    children = {}
    for pool, names in pools.items():
        children[pool] = {"vars": {"fleetos_pool": pool, "fleetos_pool_max_unavailable": budgets[pool]},
                          "hosts": {name: dict(hosts[name] or {}, **host_vars.get(name, {})) for name in names}}
    path.write_text(yaml.safe_dump({"all": {"vars": allvars, "children": {"rollout_lab": {"children": children}}}},
                                   sort_keys=False))
    return path


def _pool_overruns(report, pools, budgets):
    """Pools whose slots held at once (granted to released, or to the run's end when kept) exceeded the budget."""
    over = {}
    for pool, names in pools.items():
        intervals = [(s["granted_at"], s["released_at"] if s["released_at"] is not None else report["ended_at"])
                     for s in report["slots"] if s["host"] in names]
        if _max_concurrent(intervals) > budgets[pool]:
            over[pool] = intervals
    return over


class _When(threading.Thread):
    """Runs ``act()`` once, as soon as ``ready()`` is true (asked every 0.2 s): its result in ``result``, the time
    in ``at``."""

    def __init__(self, ready, act):
        super().__init__(daemon=True)
        self.ready, self.act = ready, act
        self.done = threading.Event()
        self.result = []
        self.at = None
        self.error = None

    def run(self):
        try:
            while not self.done.is_set():
                if self.ready():
                    self.result = self.act()
                    self.at = time.time()
                    return
                time.sleep(0.2)
        except Exception as exc:  # pylint: disable=broad-except
            self.error = exc

    def stop(self):
        self.done.set()
        self.join(30)


def _signal(pids, signum):
    for pid in pids:
        try:
            os.kill(pid, signum)
        except OSError:
            pass
    return pids


def _play_while(f, watch, tmp_path, *extra):
    """Rollout with ``watch`` running; what it stopped (SIGSTOP) is let go (SIGCONT) once the run has ended."""
    watch.start()
    proc = f.play(ROLLOUT, *extra, check=False)
    watch.stop()
    _signal(watch.result, signal.SIGCONT)
    (tmp_path / "rollout.log").write_text(proc.stdout)
    assert watch.error is None, watch.error
    assert watch.at is not None and watch.result, proc.stdout[-3000:]
    assert proc.returncode != 0
    return proc


def _boot_id(lab, node):
    return lab.exec(node, ["cat", "/run/lab-boot-id"], check=False).stdout.strip()


def test_a_hung_health_command_a_hung_hook_and_a_stalled_connection_each_fail_their_host(lab, fleet, tmp_path):
    hook = tmp_path / "health-tasks.yml"
    hook.write_text(yaml.safe_dump([{
        "name": "Wait for the node's service",
        # Bounded on the controller by the task keyword, and on the host by coreutils timeout (docs/rollout.md).
        "ansible.builtin.raw": "timeout 60 sleep 300",
        "timeout": HOOK_TIMEOUT,
        "changed_when": False,
    }], sort_keys=False))
    host_vars = {"node05": {"fleetos_rollout_health_command": "sleep 900"},
                 "node08": {"fleetos_rollout_health_tasks": str(hook)},
                 "node10": {"fleetos_rollout_health_command": STALL_HEALTH}}
    f = Pools(lab, tmp_path, pools=HUNG_POOLS, budgets=HUNG_BUDGETS)
    ssh_args = read_hosts(lab.inventory)[1]["ansible_ssh_common_args"]
    host_vars["node10"]["ansible_ssh_common_args"] = _without_keepalive(ssh_args)
    assert "ServerAlive" not in host_vars["node10"]["ansible_ssh_common_args"]
    f.inventory = _inventory(lab, tmp_path / "hosts-hung.yml", HUNG_POOLS, HUNG_BUDGETS, host_vars)
    # node10's sshd stops (SIGSTOP: its connections stay open, nothing answers) 3 s after its boot into the target,
    # as its health command runs.
    booted = _boot_id(lab, "node10")
    watch = _When(lambda: _boot_id(lab, "node10") not in ("", booted),
                  lambda: time.sleep(3) or _signal(_sshd_pids(lab, "node10"), signal.SIGSTOP))
    began = time.time()
    try:
        proc = _play_while(f, watch, tmp_path, "-e", "fleetos_rollout_image=%s" % _pinned(fleet),
                           "-e", "fleetos_rollout_health_timeout=%d" % HEALTH_TIMEOUT,
                           "-e", "fleetos_rollout_command_timeout=%d" % COMMAND_TIMEOUT,
                           "-e", "fleetos_rollout_reboot_timeout=60", "-e", "fleetos_rollout_max_failures=4")
        report = proc.report
        rows = _rows(report)

        # node05: its health command never returns; bounded on the host, not tried again, rolled back.
        hung = rows["node05"]
        assert hung["status"] == "failed" and hung["rolled_back"] and not hung["slot_held"], hung
        assert ("Run the health command: the health command 'sleep 900' did not finish within %d s"
                % HEALTH_TIMEOUT) in hung["reason"], hung["reason"]
        boots = [e["ts"] for e in _events_of(proc.events, ["node05"], "boot")]
        assert len(boots) == 2, boots          # the target, then the rollback
        hang_began = boots[0]
        # The run ends within 90 s of the hang (30 s bound), and its pool's other hosts are activated.
        assert report["ended_at"] - hang_began < 90, (report["ended_at"], hang_began)
        assert rows["node06"]["status"] == "activated" and rows["node07"]["status"] == "activated"

        # node08: its health task hangs; the task's own timeout fails it, and it is rolled back as a failed check.
        hook_row = rows["node08"]
        assert hook_row["status"] == "failed" and hook_row["rolled_back"] and not hook_row["slot_held"], hook_row
        assert "Wait for the node's service" in hook_row["reason"], hook_row["reason"]
        # ansible-core's own sentence: "Timed out after 8 second(s)" (2.19 on), "... in the expected time frame (8)".
        assert ("after %d second" % HOOK_TIMEOUT in hook_row["reason"]
                or "time frame (%d)" % HOOK_TIMEOUT in hook_row["reason"]), hook_row["reason"]
        assert rows["node09"]["status"] == "activated"

        # node10: its sshd stopped answering in the middle of a command; the controller cut the connection, the
        # rollback got no answer either, and the host keeps its slot (its state is unknown).
        stalled = rows["node10"]
        assert stalled["status"] == "failed" and stalled["slot_held"] and not stalled["rolled_back"], stalled
        assert "did not finish within" in stalled["reason"], stalled["reason"]
        assert "the rollback failed too" in stalled["reason"], stalled["reason"]
        # Bounded: the health bound (and 10 s) then the command bound, with a margin for a loaded machine.
        assert report["ended_at"] - watch.at < HEALTH_TIMEOUT + 10 + 3 * COMMAND_TIMEOUT + 60

        # Three failures, counted (max_failures 4: the run does not stop for them); the run ended with its report;
        # no pool above its budget.
        assert sorted(report["counts"].items()) == sorted(dict(report["counts"], failed=3, activated=3).items())
        assert report["max_failures"] == 4 and report["stop_reason"] is None, report["stop_reason"]
        assert _pool_overruns(report, HUNG_POOLS, HUNG_BUDGETS) == {}
        assert sorted(_reboots(proc.events)) == sorted(["node05", "node05", "node06", "node07", "node08", "node08",
                                                        "node09", "node10"])
        assert report_mismatches(lab, report) == []
        print("hangs: run %.1f s; node05's hang to the run's end %.1f s (health bound %d s); node10's sshd stop to "
              "the run's end %.1f s (command bound %d s)" % (
                  proc.wall, report["ended_at"] - hang_began, HEALTH_TIMEOUT, report["ended_at"] - watch.at,
                  COMMAND_TIMEOUT))
    finally:
        watch.stop()
        _signal(watch.result, signal.SIGCONT)
        f.restore(fleet["digest"])
        print("hangs test total %.1f s" % (time.time() - began))


STAGE_POOLS = {"blue": ["node05", "node06", "node07"]}
STAGE_TIMEOUT = 20


def _registry_pids(lab):
    pids = []
    for name in ("registry.pid", "registry.child.pid"):
        path = lab.state / "registry" / name
        if path.exists():
            pids.append(int(path.read_text().strip()))
    return pids


def _jobs(lab, node):
    """The stage jobs' directories on the node."""
    return {name for name in lab.exec(node, ["ls", "/run/fleetos"], check=False).stdout.split()
            if name.startswith("stage.")}


def test_a_stage_whose_registry_stalls_fails_after_its_bound_and_reboots_nothing(lab, fleet, tmp_path):
    f = Pools(lab, tmp_path, pools=STAGE_POOLS, budgets={"blue": 1})
    # An image of its own: the nodes have the rollout image's layer already (every rollout test stages it), and a
    # stage that reads no blob would not stall.
    tag = uuid.uuid4().hex[:8]
    repo = "fleetos/stall-test"
    digest = lab.build_image("%s:%s" % (repo, tag), "--from", "fleetos/lab-os:1.0", "--size-mb", "2",
                             "--version", "stall-%s" % tag)
    image = "%s/%s@%s" % (lab.registry, repo, digest)
    # The registry stops (SIGSTOP: the connections stay open, nothing answers) as soon as a new stage job runs on
    # each node: each job then pulls the layer, slowly (the links are shaped), and the registry stops in the middle.
    before = {node: _jobs(lab, node) for node in STAGE_POOLS["blue"]}
    watch = _When(lambda: all(_jobs(lab, node) - before[node] for node in STAGE_POOLS["blue"]),
                  lambda: _signal(_registry_pids(lab), signal.SIGSTOP))
    began = time.time()
    nodes = ",".join(STAGE_POOLS["blue"])
    try:
        # The 2 MB layer takes about 16 s over 1 Mbit/s: the registry stops in the middle of the job's pull.
        lab.fleetlab("shape", "1mbit", "--nodes", nodes)
        proc = _play_while(f, watch, tmp_path, "-e", "fleetos_rollout_image=%s" % image,
                           "-e", "fleetos_rollout_stage_timeout=%d" % STAGE_TIMEOUT)
        report = proc.report
        rows = _rows(report)
        for node in STAGE_POOLS["blue"]:
            row = rows[node]
            assert row["status"] == "stage_failed", row
            assert "The stage did not finish within %d s" % STAGE_TIMEOUT in row["reason"], row["reason"]
            assert row["reboot_start"] is None
            # The job ended its command on the host: no rpm-ostree of the stage is left there.
            assert "rpm-ostree rebase" not in lab.exec(node, ["ps", "-eo", "args"]).stdout
        assert _reboots(proc.events) == []
        assert report["slots"] == []
        assert report["counts"]["stage_failed"] == 3
        # Within the bound (from the stage's start, before the stall) and a margin: the finish waits 15 s more.
        assert report["ended_at"] - watch.at < STAGE_TIMEOUT + 15 + 60
        assert report_mismatches(lab, report) == []
        print("stage stall: run %.1f s; stalled to the run's end %.1f s (stage bound %d s)"
              % (proc.wall, report["ended_at"] - watch.at, STAGE_TIMEOUT))
    finally:
        watch.stop()
        _signal(watch.result, signal.SIGCONT)
        lab.fleetlab("shape", "off", "--nodes", nodes)
        f.restore(digest)
        print("stage stall test total %.1f s" % (time.time() - began))
