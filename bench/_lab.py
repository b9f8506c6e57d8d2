# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What the lab benches share: the lab (lab/fleetlab, its state and journal), Ansible runs, inventories.

Not a bench: bench/rollout.py and bench/layering.py import it (`sys.path` holds bench/).
The lab is the one FLEETLAB_NETNS, FLEETLAB_STATE and FLEETLAB_INVENTORY name (the same
variables lab/fleetlab reads; a second lab has its own of each; default the shared lab).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lab"))
from fleetlablib.inventory import read_hosts  # noqa: E402  (the lab's inventory reader)

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _timeline  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
FLEETLAB = REPO / "lab" / "fleetlab"
STATE = Path(os.environ.get("FLEETLAB_STATE", str(REPO / ".lab"))).resolve()
LAB_NETNS = os.environ.get("FLEETLAB_NETNS", "fleetlab")
LAB_INVENTORY = Path(os.environ.get("FLEETLAB_INVENTORY", str(REPO / "inventories" / "lab"))) / "hosts.yml"
JOURNAL = STATE / "journal.jsonl"
VENV_BIN = REPO / ".venv" / "bin"
ROLLOUT = REPO / "playbooks" / "rollout.yml"
ROLLBACK = REPO / "playbooks" / "rollback.yml"
RESULTS = REPO / "bench" / "results"
BASE = "fleetos/lab-os:1.0"
RECAP = re.compile(r"^(\S+)\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)")


class BenchError(Exception):
    pass


def log(message):
    print("[%s] %s" % (time.strftime("%H:%M:%S"), message), file=sys.stderr, flush=True)


# --------------------------------------------------------------------------
# the lab


def fleetlab(*args, check=True, timeout=900):
    proc = subprocess.run([str(FLEETLAB)] + [str(a) for a in args], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=timeout, check=False)
    if check and proc.returncode != 0:
        raise BenchError("fleetlab %s failed (rc=%d): %s%s" % (
            " ".join(map(str, args)), proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:]))
    return proc


def lab_info():
    path = STATE / "lab.json"
    return json.loads(path.read_text()) if path.exists() else None


def status(nodes):
    """`fleetlab status` rows of the nodes; BenchError when the registry is down or a node is not in the lab."""
    data = json.loads(fleetlab("status", "--json").stdout)
    if not data.get("registry_running"):
        raise BenchError("the lab registry is not running")
    rows = {r["node"]: r for r in data["nodes"]}
    missing = [n for n in nodes if n not in rows]
    if missing:
        raise BenchError("the lab has no nodes %s" % ", ".join(missing))
    return {n: rows[n] for n in nodes}


def check_on(nodes, digest, what):
    """BenchError (naming ``what``) unless every node is up, booted on ``digest`` and with nothing staged."""
    bad = ["%s: %s booted %s, staged %s" % (n, r["state"], r["digest"], r["staged"]) for n, r in status(nodes).items()
           if r["state"] != "up" or r["digest"] != digest or r["staged"]]
    if bad:
        raise BenchError("%s: nodes not on v1 with nothing staged:\n  %s" % (what, "\n  ".join(bad)))


class Journal:
    """The lab's events journal from a byte offset on (other sessions append to it too)."""

    def __init__(self):
        self.offset = JOURNAL.stat().st_size

    def events(self, nodes):
        with open(JOURNAL, "rb") as handle:
            handle.seek(self.offset)
            data = handle.read()
        out = []
        for line in data.split(b"\n")[:-1]:   # complete lines only
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if event.get("node") in nodes:
                out.append(event)
        return out


def blob_reads(events):
    """{node: {"bytes": n, "reads": n, "digests": [...]}} of the blob_read events."""
    out = {}
    for event in events:
        if event["event"] == "blob_read":
            row = out.setdefault(event["node"], {"bytes": 0, "reads": 0, "digests": []})
            row["bytes"] += int(event.get("bytes") or 0)
            row["reads"] += 1
            row["digests"].append(event.get("digest"))
    return out


def blob_bytes(events):
    """{node: bytes} of the blob_read events."""
    return {node: row["bytes"] for node, row in blob_reads(events).items()}


# --------------------------------------------------------------------------
# ansible


def collections_path():
    """ANSIBLE_COLLECTIONS_PATH that loads fleetos.layering from this working tree."""
    runtime = REPO / ".build" / "runtime"
    link = runtime / "ansible_collections" / "fleetos" / "layering"
    link.parent.mkdir(parents=True, exist_ok=True)
    if not link.is_symlink():
        link.symlink_to(REPO)
    return runtime


def ansible_env(quiet_localhost=False):
    """The environment of the benches' ansible-playbook runs; quiet_localhost: no warnings about an
    implicit localhost or an inventory given as a host list (`-i localhost,`)."""
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(collections_path()), ANSIBLE_NOCOLOR="1",
               ANSIBLE_FORCE_COLOR="0", ANSIBLE_DEPRECATION_WARNINGS="False")
    if quiet_localhost:
        env.update(ANSIBLE_LOCALHOST_WARNING="False", ANSIBLE_INVENTORY_UNPARSED_WARNING="False")
    env.update(ANSIBLE_STDOUT_CALLBACK="default", ANSIBLE_RETRY_FILES_ENABLED="False")
    return env


PR_SET_CHILD_SUBREAPER = 36
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _subreaper(on):
    """Become (or stop being) the child subreaper (prctl): the ssh ControlPersist masters an
    ansible-playbook run leaves behind are then our children, whose CPU the bench can count."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1 if on else 0, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _adopted_ssh_cpu():
    """User+sys seconds of our not yet reaped ssh children (the adopted ControlPersist masters, alive or
    ended and not reaped yet), from /proc/PID/stat."""
    total, me = 0.0, os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[1]) == me and comm == "ssh":       # fields[1]: ppid; [11], [12]: utime, stime
            total += (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
    return total


_REAPED = {"cpu": 0.0}   # user+sys seconds of the adopted children reaped so far


def _reap_adopted():
    """Reap the adopted children that ended (wait4: their own seconds go to _REAPED). Only adopted
    orphans can be waiting: subprocess.run has waited for every child it started."""
    while True:
        try:
            pid, _, usage = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        _REAPED["cpu"] += usage.ru_utime + usage.ru_stime


def controller_cpu():
    """(ansible seconds, ssh master seconds), each a running total of user+sys CPU: ansible-playbook,
    its forks and the ssh clients it waited for (RUSAGE_CHILDREN less the adopted children reaped
    here), and the ssh ControlPersist masters it left behind (adopted: reaped here, or still running).
    A playbook run's figures are the differences of the totals around it."""
    _reap_adopted()
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime - _REAPED["cpu"], _REAPED["cpu"] + _adopted_ssh_cpu()


# --------------------------------------------------------------------------
# controller memory

RSS_INTERVAL = 0.2   # seconds between two samples of a playbook run's RSS


def tree_rss_kib(roots, children, rss_kib, seen=None):
    """Summed RSS (KiB) of the processes roots and all their descendants, each counted once:
    children(pid) -> its child pids, rss_kib(pid) -> its RSS (0 once it ended); seen: the pids already
    counted (updated), so that trees summed at the same instant never count a process twice."""
    seen = set() if seen is None else seen
    total, stack = 0, list(roots)
    while stack:
        pid = stack.pop()
        if pid in seen:
            continue
        seen.add(pid)
        total += rss_kib(pid)
        stack.extend(children(pid))
    return total


class ProcTree:
    """The process tree as /proc shows it (proc: another root, for tests): each process's parent from
    /proc/PID/stat, its RSS from VmRSS in /proc/PID/status, its PSS from Pss in /proc/PID/smaps_rollup.

    RSS counts every page a process maps: ansible-playbook's forks share most of their pages with it (copy on
    write), so the summed RSS of the tree counts those pages once per fork. PSS divides each page among the
    processes that map it, so the summed PSS of the tree is the memory it takes.

    Kernels without CONFIG_PROC_CHILDREN have no /proc/PID/task/*/children, so each sample lists /proc;
    a process found outside the trees is not read again (an orphan goes to its subreaper or to init, so
    it never joins a tree it was not in), the processes of the trees are read on every sample (an ssh
    ControlPersist master moves from the ansible-playbook tree to us, its subreaper, when its ssh
    client ends). A sample then reads a few files per process of the trees, not per process of the
    machine."""

    def __init__(self, proc="/proc"):
        self.proc = str(proc)
        self.outside = set()

    def stat(self, pid):
        """(ppid, comm) of the process -> None once it ended."""
        try:
            with open("%s/%d/stat" % (self.proc, pid), "rb") as handle:
                data = handle.read()
        except OSError:
            return None
        head, _, tail = data.rpartition(b")")         # comm may hold ")" and spaces
        fields = tail.split()                          # state, ppid, ...
        if len(fields) < 2:
            return None
        return int(fields[1]), head.partition(b"(")[2].decode(errors="replace")

    def _kib(self, pid, name, field):
        """The KiB of ``field`` (a line's first word, such as b"VmRSS:") in /proc/PID/``name``; 0 when the
        process ended, is a zombie (no such line) or the file cannot be read."""
        try:
            with open("%s/%d/%s" % (self.proc, pid, name), "rb") as handle:
                for line in handle:
                    if line.startswith(field):
                        return int(line.split()[1])
        except (OSError, ValueError, IndexError):
            pass
        return 0

    def rss_kib(self, pid):
        """VmRSS of the process in KiB; 0 once it ended or while it is a zombie (no VmRSS line)."""
        return self._kib(pid, "status", b"VmRSS:")

    def pss_kib(self, pid):
        """Pss of the process in KiB (its share of every page it maps); 0 once it ended, or without
        smaps_rollup (kernels before 4.14)."""
        return self._kib(pid, "smaps_rollup", b"Pss:")

    def sample(self, root, me, with_pss=False):
        """(KiB of root and its descendants, KiB of the ssh children of me other than root and their
        descendants: the ssh ControlPersist masters me adopted as child subreaper), read at one time; with
        with_pss, then the same two as PSS."""
        pids = [int(name) for name in os.listdir(self.proc) if name.isdigit()]
        self.outside.intersection_update(pids)
        children, comm, read = {}, {}, []
        for pid in pids:
            if pid in self.outside:
                continue
            row = self.stat(pid)
            if row is None:
                continue
            read.append(pid)
            ppid, comm[pid] = row
            children.setdefault(ppid, []).append(pid)

        def kids(pid):
            return children.get(pid, ())

        seen = set()
        tree = tree_rss_kib([root], kids, self.rss_kib, seen)
        masters = [pid for pid in kids(me) if pid != root and comm.get(pid) == "ssh"]
        adopted = tree_rss_kib(masters, kids, self.rss_kib, seen)
        self.outside.update(pid for pid in read if pid not in seen)
        if not with_pss:
            return tree, adopted
        seen = set()
        pss_tree = tree_rss_kib([root], kids, self.pss_kib, seen)
        return tree, adopted, pss_tree, tree_rss_kib(masters, kids, self.pss_kib, seen)


def parents(proc="/proc"):
    """Every process's (ppid, comm) as ProcTree.stat reads it, from one listing of /proc: {pid: (ppid, comm)}."""
    tree, rows = ProcTree(proc), {}
    for name in os.listdir(str(proc)):
        if name.isdigit():
            row = tree.stat(int(name))
            if row is not None:
                rows[int(name)] = row
    return rows


class RssSampler:
    """Samples a process tree's RSS and PSS (ProcTree.sample) every interval seconds from start() to stop():
    .peak_kib, the peak RSS of root's tree; .peak_with_masters_kib, the peak of that tree plus the ssh
    masters we adopted, summed at the same instant; .peak_pss_kib and .peak_pss_with_masters_kib, the same
    as PSS; .samples. A peak between two samples is missed."""

    def __init__(self, root, interval=RSS_INTERVAL, tree=None):
        self.root, self.interval, self.tree = root, interval, tree or ProcTree()
        self.peak_kib = self.peak_with_masters_kib = self.samples = 0
        self.peak_pss_kib = self.peak_pss_with_masters_kib = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def _run(self):
        me = os.getpid()
        while True:
            tree, masters, pss, pss_masters = self.tree.sample(self.root, me, with_pss=True)
            self.samples += 1
            self.peak_kib = max(self.peak_kib, tree)
            self.peak_with_masters_kib = max(self.peak_with_masters_kib, tree + masters)
            self.peak_pss_kib = max(self.peak_pss_kib, pss)
            self.peak_pss_with_masters_kib = max(self.peak_pss_with_masters_kib, pss + pss_masters)
            if self._done.wait(self.interval):
                return

    def start(self):
        self._thread.start()
        return self

    def stop(self):
        self._done.set()
        self._thread.join()


def run_sampled(argv, timeout, interval=RSS_INTERVAL, **popen_args):
    """subprocess.run(argv, stdout=PIPE, stderr=STDOUT, text=True, timeout=timeout, **popen_args) while an
    RssSampler samples the RSS of its process tree -> (the CompletedProcess, the stopped sampler)."""
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          **popen_args) as popen:
        sampler = RssSampler(popen.pid, interval).start()
        try:
            stdout, _ = popen.communicate(timeout=timeout)
        except BaseException:                          # as subprocess.run: no process left behind
            popen.kill()
            raise
        finally:
            sampler.stop()
    return subprocess.CompletedProcess(argv, popen.returncode, stdout), sampler


def run_playbook(argv, log_path, what, quiet_localhost=False, timeline=None):
    """Run ansible-playbook argv (from the machine's own namespace, which reaches the lab registry through
    the lab's link) -> the process, with .wall (seconds),
    .cpu (controller user+sys seconds: .cpu_ansible, resource.getrusage(RUSAGE_CHILDREN) around the
    run, plus .cpu_ssh, what the ssh ControlPersist masters used meanwhile, see controller_cpu;
    .subreaper false: the masters could not be adopted, .cpu_ssh is 0), .peak_rss_kib (the peak summed
    RSS of ansible-playbook and all its descendants: forks, ssh clients), .peak_rss_with_masters_kib
    (that tree plus the ssh masters we adopted, at the same instants; the tree alone without
    .subreaper), .peak_pss_kib and .peak_pss_with_masters_kib (the same as PSS: the memory the tree takes,
    shared pages counted once), .rss_samples (one each RSS_INTERVAL, see RssSampler), .recap ({host: counts}) and
    .timeline: with timeline (a path), the run writes its timeline there (bench/_timeline.py) and .timeline is its
    summary, else None; the output goes to log_path; BenchError naming `what` when it fails."""
    subreaper = _subreaper(True)
    cpu0, ssh0 = controller_cpu()
    began = time.monotonic()
    try:
        env = ansible_env(quiet_localhost)
        if timeline is not None:
            env = _timeline.environ(timeline, env)
        proc, rss = run_sampled(argv, 3600, env=env, cwd=str(REPO))
    finally:
        _subreaper(False)
    proc.wall = time.monotonic() - began
    cpu1, ssh1 = controller_cpu()
    proc.cpu_ansible, proc.cpu_ssh = cpu1 - cpu0, ssh1 - ssh0
    proc.cpu = proc.cpu_ansible + proc.cpu_ssh
    proc.subreaper = subreaper
    proc.peak_rss_kib, proc.peak_rss_with_masters_kib = rss.peak_kib, rss.peak_with_masters_kib
    proc.peak_pss_kib, proc.peak_pss_with_masters_kib = rss.peak_pss_kib, rss.peak_pss_with_masters_kib
    proc.rss_samples = rss.samples
    log_path.write_text(proc.stdout)
    proc.recap = {m.group(1): {"ok": int(m.group(2)), "changed": int(m.group(3)),
                               "unreachable": int(m.group(4)), "failed": int(m.group(5))}
                  for m in (RECAP.match(line) for line in proc.stdout.splitlines()) if m}
    if proc.returncode != 0:
        raise BenchError("%s failed (rc=%d); log: %s\n%s" % (what, proc.returncode, log_path, proc.stdout[-3000:]))
    proc.timeline = _timeline.summarise(_timeline.read(timeline)) if timeline is not None else None
    return proc


def write_inventory(path, pools, parent=None):
    """An inventory of bench nodes only, with the host vars of the lab's inventory (LAB_INVENTORY).

    pools: {group: (group vars, node names)}, in that order; parent: a group holding those groups
    (None: they are children of all)."""
    hosts, allvars = read_hosts(LAB_INVENTORY)
    groups = {group: {"vars": group_vars, "hosts": {name: hosts[name] for name in names}}
              for group, (group_vars, names) in pools.items()}
    if parent:
        groups = {parent: {"children": groups}}
    inventory = {"all": {"vars": allvars, "children": groups}}
    path.write_text(yaml.safe_dump(inventory, sort_keys=False))


# --------------------------------------------------------------------------
# a bench's run


def bench_parser(doc, count):
    """The argument parser of a bench (description: the first line of doc) with --nodes and --count (default count)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--nodes", default=None,
                        help="comma-separated lab nodes (default: --count nodes of the bench's own, fleetlab claim)")
    parser.add_argument("--count", type=int, default=count, help="how many nodes to claim without --nodes (%d)" % count)
    return parser


def bench_nodes(nodes, claim, *claim_args):
    """The nodes of --nodes (comma-separated) or, without it, the bench's own: `fleetlab claim CLAIM ...`
    (the same ones on every run, no test's nodes among them)."""
    if nodes:
        return [n.strip() for n in nodes.split(",") if n.strip()]
    return json.loads(fleetlab("claim", claim, *claim_args, "--json").stdout)


def slow_boot(nodes, boot_delay, on):
    """Delay every boot of the nodes by boot_delay seconds (fleetlab fault NODE slow-boot), or clear the faults.

    boot_delay: seconds for every node, or {node: seconds}. The lab adds its own delay (`fleetlab up
    --boot-delay`, lab_boot_delay()) to every reboot on top of the fault's."""
    for node in nodes:
        delay = boot_delay.get(node, 0) if isinstance(boot_delay, dict) else boot_delay
        if on and delay > 0:
            fleetlab("fault", node, "slow-boot", delay)
        else:
            fleetlab("fault", node, "clear")


def lab_boot_delay():
    """The lab's own delay on every reboot (`fleetlab up --boot-delay`, lab.json), added to a slow-boot fault."""
    info = lab_info() or {}
    return float(info.get("boot_delay") or 0)


def best_effort(*steps):
    """Run every step -> the problems (the text of each exception)."""
    problems = []
    for step in steps:
        try:
            step()
        except Exception as exc:  # noqa: BLE001 - report every cleanup problem
            problems.append(str(exc))
    return problems


def run_bench(bench, name, show, cleanup, logs="logs"):
    """bench.run(), then cleanup() -> [problems] whatever happened; with figures, write them to
    bench/results/NAME-<stamp>.json and show() them; errors and cleanup problems to stderr -> exit status."""
    result, error = None, None
    try:
        result = bench.run()
    except (BenchError, subprocess.TimeoutExpired) as exc:
        error = str(exc)
    except Exception:  # noqa: BLE001 - a bug in the bench: clean up, then show it
        import traceback
        error = traceback.format_exc()
    finally:
        problems = cleanup()
    if result:
        result["cleanup_problems"] = problems
        path = RESULTS / ("%s-%s.json" % (name, bench.stamp))
        path.write_text(json.dumps(result, indent=2) + "\n")
        show(result)
        print("json    : %s (%s: %s)" % (path.relative_to(REPO), logs, bench.run_dir.relative_to(REPO)))
    if error:
        print("bench/%s.py: error: %s" % (name, error), file=sys.stderr)
    for problem in problems:
        print("bench/%s.py: cleanup: %s" % (name, problem), file=sys.stderr)
    return 1 if error or problems else 0
