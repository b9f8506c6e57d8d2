#!/usr/bin/env python3
# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A simulated fleet on loopback: N hosts, each its own sshd endpoint and its own root, for scale benches.

    .venv/bin/python bench/simfleet.py up --hosts 60 [--state /tmp/simfleet] [--boot-spread 40-90] [--seed 15]
        [--rate 80mbit] [--fleetlock]
    .venv/bin/python bench/simfleet.py status | down

What a simulated host is (bench/README.md, "The simulated fleet"):

- its own sshd at 127.77.X.Y:2222 (loopback only), started by `bench/simhost/boot.sh` as PID 1 of new PID
  and mount namespaces (unshare), chrooted into the host's own root directory (its own /etc, /var, /sysroot,
  /root; a fresh /run and /tmp each boot; the machine's /usr read-only, with the sim's tools bound over
  rpm-ostree, skopeo and systemctl/reboot/shutdown);
- `rpm-ostree` answers from a small state (/sysroot/simfleet/state.json) with the lab stand-in's JSON
  contract (tests/unit/bench/test_simhost.py checks it as tests/lab/test_standin_conformance.py checks the
  lab's); a stage sleeps the time its new layers' bytes take at the link rate; no ostree repository;
- a reboot (`reboot`, `shutdown -r`, `systemctl reboot`, `rpm-ostree finalize-deployment`, `rollback -r`)
  asks the fleet's one supervisor process through a FIFO: it kills the host's PID 1 (every process of the
  host ends, sshd is down), finalizes the staged deployment, waits a boot time drawn from --boot-spread and
  boots the host again with a new boot id (bound over /proc/sys/kernel/random/boot_id);
- the journal (STATE/journal.jsonl) has each `reboot` and `boot` (node, ts), as the lab's does; with
  --fleetlock, the lab's FleetLock server code (lab/fleetlablib/fleetlock.py) serves 127.0.0.1:PORT in the
  supervisor and journals there too.

Needs root (mount and PID namespaces). `down` ends the supervisor, which kills every host (by PID) and
waits for them: no process, mount or namespace is left (each host's mounts live in its own namespace).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import select
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SIMHOST = HERE / "simhost"
DEFAULT_STATE = Path("/tmp/simfleet")
PORT = 2222
SUBNET = "127.77"
OSNAME = "fedora-coreos"
IMAGE_NAME = "sim.registry.invalid:5000/fleetos/sim-os"
SUPERVISOR_MARKER = "simfleet.py _supervise"
ETC_COPY = ("ld.so.cache", "nsswitch.conf", "host.conf", "localtime")
SSHD_CONFIG = """\
# Written by bench/simfleet.py: the simulated host's sshd (PID 1 of its namespace).
Port %(port)d
ListenAddress %(address)s
HostKey /etc/ssh/ssh_host_ed25519_key
AuthorizedKeysFile /etc/ssh/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PidFile none
MaxStartups 200:30:400
MaxSessions 50
UseDNS no
Subsystem sftp internal-sftp
"""

sys.path.insert(0, str(SIMHOST / "bin"))
sys.path.insert(0, str(REPO / "lab"))
import _simregistry  # noqa: E402  (the images the hosts read)
from fleetlablib.common import pid_alive  # noqa: E402  (the lab's check of a process by PID and command line)


CPUACCT = Path("/sys/fs/cgroup/cpuacct")


class SimError(Exception):
    pass


def cgroup_dir(state):
    """The fleet's cpuacct cgroup (v1): the supervisor and every host process, so that their CPU is counted
    exactly, processes that ended included (None where the machine has no writable cpuacct hierarchy)."""
    import hashlib
    if not (CPUACCT / "cpuacct.usage").exists():
        return None
    return CPUACCT / ("simfleet-" + hashlib.sha256(str(state).encode()).hexdigest()[:12])


def log(message):
    print("[%s] simfleet: %s" % (time.strftime("%H:%M:%S"), message), file=sys.stderr, flush=True)


def rate_bytes(rate):
    """'80mbit' -> bytes per second (tc's units: kbit, mbit, gbit; 0 or 'off' for no limit)."""
    text = str(rate).strip().lower()
    if text in ("0", "off", ""):
        return 0.0
    for unit, factor in (("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3), ("bit", 1.0)):
        if text.endswith(unit):
            return float(text[:-len(unit)]) * factor / 8
    return float(text) / 8


def host_name(index):
    return "sim%04d" % index


def host_address(index, subnet=SUBNET):
    """127.77.X.Y (``subnet``.X.Y) of host index (1-based): up to 250 hosts per X."""
    return "%s.%d.%d" % (subnet, (index - 1) // 250, (index - 1) % 250 + 1)


def pool_of(index, pools):
    return "pool%02d" % ((index - 1) % pools + 1)


# --------------------------------------------------------------------------
# state on disk


class Fleet:
    """A simulated fleet's state directory: fleet.json, keys, registry, hosts/NAME/root, ctl, journal."""

    def __init__(self, state=None):
        self.state = Path(state or os.environ.get("SIMFLEET_STATE") or DEFAULT_STATE).resolve()

    # paths
    @property
    def info_path(self):
        return self.state / "fleet.json"

    @property
    def journal(self):
        return self.state / "journal.jsonl"

    @property
    def registry(self):
        return self.state / "registry"

    @property
    def key(self):
        return self.state / "ssh" / "id_ed25519"

    @property
    def known_hosts(self):
        return self.state / "ssh" / "known_hosts"

    @property
    def control_path_dir(self):
        return self.state / "cp"

    def root(self, name):
        return self.state / "hosts" / name / "root"

    def info(self):
        return json.loads(self.info_path.read_text()) if self.info_path.exists() else None

    def supervisor_pid(self):
        try:
            pid = int((self.state / "supervisor.pid").read_text())
        except (OSError, ValueError):
            return None
        return pid if pid_alive(pid, SUPERVISOR_MARKER) else None

    # creation
    def create(self, count, pools, rate, boot_spread, seed, base_image, fleetlock_port=None, subnet=SUBNET):
        if self.supervisor_pid():
            raise SimError("a simulated fleet is up in %s: take it down first" % self.state)
        if self.state.exists():
            remove_state(self.state)
        for sub in ("ssh", "cp", "ctl", "hosts", "registry"):
            (self.state / sub).mkdir(parents=True, exist_ok=True)
        os.chmod(self.state / "ssh", 0o700)
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "simfleet-controller", "-f",
                        str(self.key)], check=True)
        host_key = self.state / "ssh" / "host_key"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "simfleet-host", "-f", str(host_key)],
                       check=True)
        os.mkfifo(self.state / "ctl" / "reboot.fifo", 0o622)
        base = base_image(self.registry)
        hosts, known = [], []
        host_pub = (Path(str(host_key) + ".pub")).read_text().split()[:2]
        for index in range(1, count + 1):
            name, address = host_name(index), host_address(index, subnet)
            self._make_root(name, address, host_key, base, rate)
            hosts.append({"name": name, "address": address, "port": PORT, "pool": pool_of(index, pools)})
            known.append("[%s]:%d %s" % (address, PORT, " ".join(host_pub)))
        self.known_hosts.write_text("\n".join(known) + "\n")
        info = {"hosts": hosts, "pools": pools, "rate": rate, "rate_bytes_per_s": rate_bytes(rate),
                "boot_spread_s": list(boot_spread), "seed": seed, "base": base["digest"],
                "fleetlock_port": fleetlock_port, "created": time.time()}
        self.info_path.write_text(json.dumps(info, indent=1))
        self.journal.touch()
        return info

    def _make_root(self, name, address, host_key, base, rate):
        root = self.root(name)
        for sub in ("usr", "proc", "dev", "run", "tmp", "var/tmp", "var/lib", "root", "boot", "home",
                    "etc/ssh", "etc/ostree", "sysroot/simfleet"):
            (root / sub).mkdir(parents=True, exist_ok=True)
        os.chmod(root / "root", 0o700)
        for link, target in (("bin", "usr/bin"), ("sbin", "usr/sbin"), ("lib", "usr/lib"), ("lib64", "usr/lib64")):
            if Path("/" + link).is_symlink() and not (root / link).is_symlink():
                (root / link).symlink_to(target)
        etc = root / "etc"
        for item in ETC_COPY:
            if Path("/etc", item).exists():
                shutil.copy2(os.path.realpath("/etc/" + item), etc / item)
        if Path("/etc/alternatives").is_dir():
            shutil.copytree("/etc/alternatives", etc / "alternatives", symlinks=True, dirs_exist_ok=True)
        (etc / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\n"
                                    "sshd:x:100:65534::/run/sshd:/usr/sbin/nologin\n"
                                    "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n")
        (etc / "group").write_text("root:x:0:\ntty:x:5:\nnogroup:x:65534:\n")
        (etc / "shadow").write_text("root:*:20000:0:99999:7:::\nsshd:*:20000:0:99999:7:::\n")
        os.chmod(etc / "shadow", 0o600)
        (etc / "hostname").write_text(name + "\n")
        (etc / "hosts").write_text("127.0.0.1 localhost\n%s %s\n" % (address, name))
        (etc / "os-release").write_text('NAME="Fedora CoreOS (simulated)"\nID=fedora\nVARIANT_ID=coreos\n')
        (etc / "ssh" / "sshd_config").write_text(SSHD_CONFIG % {"port": PORT, "address": address})
        shutil.copy2(host_key, etc / "ssh" / "ssh_host_ed25519_key")
        os.chmod(etc / "ssh" / "ssh_host_ed25519_key", 0o600)
        shutil.copy2(str(self.key) + ".pub", etc / "ssh" / "authorized_keys")
        initial_state(root / "sysroot" / "simfleet", base)
        (root / "sysroot" / "simfleet" / "host.json").write_text(json.dumps(
            {"name": name, "rate_bytes_per_s": rate_bytes(rate)}))


def initial_state(directory, record):
    """A host's rpm-ostree state, booted on the image record (with its layers cached), as an install leaves it."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    ref = "ostree-unverified-registry:%s@%s" % (record.get("name", IMAGE_NAME), record["digest"])
    dep = {"checksum": record["commit"], "serial": 0, "origin": {"container-image-reference": ref},
           "digest": record["digest"], "version": record["version"], "timestamp": 1764547200, "pinned": False}
    state = {"deployments": [dep], "booted": [dep["checksum"], 0], "staged": None, "finalization_locked": False,
             "layers": [l["digest"] for l in record["layers"]], "boot_count": 1}
    (directory / "state.json").write_text(json.dumps(state, indent=1, sort_keys=True))
    (directory / "transaction.lock").touch()
    return state


def finalize_at_boot(state_path):
    """What the host's next boot makes of its state (the supervisor, with the host down): a staged deployment
    whose finalization is not locked becomes the default, the deployment booted so far its rollback; a locked
    one is dropped (ostree-finalize-staged leaves it); the default (first) deployment boots."""
    state = json.loads(Path(state_path).read_text())
    deps = state["deployments"]
    i = next(k for k, d in enumerate(deps) if [d["checksum"], d["serial"]] == list(state["booted"]))
    staged = state.get("staged")
    if staged and not state.get("finalization_locked"):
        deps = [staged, deps[i]] + [d for d in deps if d.get("pinned") and d is not deps[i]]
    state["staged"], state["finalization_locked"] = None, False
    state["deployments"] = deps[:2] + [d for d in deps[2:] if d.get("pinned")]
    state["booted"] = [state["deployments"][0]["checksum"], state["deployments"][0]["serial"]]
    state["boot_count"] = state.get("boot_count", 1) + 1
    tmp = Path(str(state_path) + ".tmp")
    tmp.write_text(json.dumps(state, indent=1, sort_keys=True))
    os.replace(tmp, state_path)
    return state


def remove_state(path):
    """Remove a fleet's state directory, refusing while anything is mounted under it."""
    path = Path(path).resolve()
    with open("/proc/self/mountinfo") as handle:
        mounted = [line.split()[4] for line in handle if line.split()[4].startswith(str(path) + "/")]
    if mounted:
        raise SimError("mounts left under %s: %s" % (path, ", ".join(mounted[:5])))
    subprocess.run(["rm", "-rf", "--one-file-system", str(path)], check=False)


# --------------------------------------------------------------------------
# the supervisor: one process boots, reboots and stops every host


class Supervisor:
    def __init__(self, fleet):
        self.fleet = fleet
        self.info = fleet.info()
        self.hosts = {h["name"]: h for h in self.info["hosts"]}
        self.procs = {}        # name -> Popen of unshare
        self.down_until = {}   # name -> monotonic time of its next boot
        self.boots = {}        # name -> count
        self.reaped_cpu = 0.0
        self.stopping = False
        self.rng = random.Random(self.info["seed"])
        self.journal = open(fleet.journal, "a", buffering=1)

    def event(self, event, **fields):
        record = {"ts": round(time.time(), 3), "event": event}
        record.update(fields)
        self.journal.write(json.dumps(record, sort_keys=True) + "\n")

    def boot(self, name):
        root = self.fleet.root(name)
        self.boots[name] = self.boots.get(name, 0) + 1
        boot_id = str(uuid.uuid4())
        console = open(self.fleet.state / "hosts" / name / "console.log", "ab")
        try:
            self.procs[name] = subprocess.Popen(
                ["unshare", "--mount", "--uts", "--pid", "--fork", "--kill-child=SIGKILL", "--propagation", "private",
                 str(SIMHOST / "boot.sh"), str(root), str(SIMHOST), str(self.fleet.state), name, boot_id],
                stdin=subprocess.DEVNULL, stdout=console, stderr=console)
        finally:
            console.close()
        checksum = json.loads((root / "sysroot" / "simfleet" / "state.json").read_text())["booted"][0]
        self.event("boot", node=name, boot_id=boot_id, boot_count=self.boots[name], checksum=checksum)

    def kill(self, name):
        """End the host: SIGKILL its PID 1 (the kernel ends every process of its PID namespace), then wait for
        unshare (its rusage has the host's CPU)."""
        proc = self.procs.pop(name, None)
        if proc is None:
            return
        for _ in range(200):
            pid = self.init_pid_of(proc)
            if pid:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                break
            time.sleep(0.01)
        else:
            proc.kill()
        self._wait(proc)

    @staticmethod
    def init_pid_of(proc):
        try:
            kids = Path("/proc/%d/task/%d/children" % (proc.pid, proc.pid)).read_text().split()
        except OSError:
            return None
        return int(kids[0]) if kids else None

    def _wait(self, proc):
        _, _, usage = os.wait4(proc.pid, 0)
        proc.returncode = 0
        self.reaped_cpu += usage.ru_utime + usage.ru_stime

    def reap(self, now):
        """Reap the hosts that ended on their own (their CPU counted) and boot them again a second later."""
        by_pid = {proc.pid: name for name, proc in self.procs.items()}
        while True:
            try:
                pid, status, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self.reaped_cpu += usage.ru_utime + usage.ru_stime
            name = by_pid.get(pid)
            if name is not None:
                self.procs.pop(name).returncode = status
                self.event("boot_failed", node=name, status=status)
                self.down_until[name] = now + 1.0

    def reboot(self, name, why):
        if name not in self.hosts or name not in self.procs:
            return
        self.event("reboot", node=name, reason=why)
        self.kill(name)
        finalize_at_boot(self.fleet.root(name) / "sysroot" / "simfleet" / "state.json")
        low, high = self.info["boot_spread_s"]
        self.down_until[name] = time.monotonic() + round(self.rng.uniform(low, high), 1)

    def write_cpu(self):
        tmp = self.fleet.state / "cpu.json.tmp"
        tmp.write_text(json.dumps({"reaped_cpu_s": self.reaped_cpu,
                                   "hosts": {n: p.pid for n, p in self.procs.items()}}))
        os.replace(tmp, self.fleet.state / "cpu.json")

    def start_fleetlock(self):
        port = self.info.get("fleetlock_port")
        if not port:
            return None
        # The lab's FleetLock server code, with the fleet's state directory as its state (config, journal).
        os.environ["FLEETLAB_STATE"] = str(self.fleet.state)
        import threading
        from http.server import ThreadingHTTPServer
        from fleetlablib import fleetlock
        (self.fleet.state / "fleetlock").mkdir(exist_ok=True)
        cfg = json.loads((self.fleet.state / "fleetlock" / "config.json").read_text()) \
            if (self.fleet.state / "fleetlock" / "config.json").exists() else {}
        semaphores = fleetlock.Semaphores(cfg.get("default_slots", 1), cfg.get("slots"))
        server = ThreadingHTTPServer(("127.0.0.1", port), fleetlock.make_handler(semaphores, lambda: None))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server

    def join_cgroup(self):
        group = cgroup_dir(self.fleet.state)
        if group is None:
            return None
        try:
            group.mkdir(exist_ok=True)
            (group / "cgroup.procs").write_text("%d\n" % os.getpid())
        except OSError:
            return None
        return group

    @staticmethod
    def leave_cgroup(group):
        if group is None:
            return
        try:
            (CPUACCT / "cgroup.procs").write_text("%d\n" % os.getpid())
            group.rmdir()
        except OSError as exc:
            log("could not remove the cgroup %s: %s" % (group, exc))

    def run(self):
        group = self.join_cgroup()
        try:
            return self._run()
        finally:
            self.leave_cgroup(group)

    def _run(self):
        signal.signal(signal.SIGTERM, lambda *a: setattr(self, "stopping", True))
        signal.signal(signal.SIGINT, lambda *a: setattr(self, "stopping", True))
        fifo = os.open(self.fleet.state / "ctl" / "reboot.fifo", os.O_RDWR | os.O_NONBLOCK)
        self.start_fleetlock()
        for name in self.hosts:
            self.boot(name)
        self.write_cpu()
        buffered, last_cpu = b"", 0.0
        while not self.stopping:
            ready, _, _ = select.select([fifo], [], [], 0.05)
            if ready:
                try:
                    buffered += os.read(fifo, 65536)
                except BlockingIOError:
                    pass
                *lines, buffered = buffered.split(b"\n")
                for line in lines:
                    words = line.decode(errors="replace").split()
                    if words:
                        self.reboot(words[0], words[1] if len(words) > 1 else "reboot")
            now = time.monotonic()
            for name, when in list(self.down_until.items()):
                if now >= when:
                    del self.down_until[name]
                    self.boot(name)
            self.reap(now)
            if now - last_cpu > 0.5:
                self.write_cpu()
                last_cpu = now
        for name in list(self.procs):
            self.kill(name)
        self.write_cpu()
        os.close(fifo)
        return 0


# --------------------------------------------------------------------------
# up, down, status


def wait_listening(hosts, timeout):
    """Wait until every host's sshd accepts a connection -> seconds waited."""
    began = time.monotonic()
    pending = list(hosts)
    while pending:
        if time.monotonic() - began > timeout:
            raise SimError("%d hosts did not listen within %d s (%s...)" % (
                len(pending), timeout, ", ".join(h["name"] for h in pending[:5])))
        still = []
        for host in pending:
            try:
                with socket.create_connection((host["address"], host["port"]), timeout=0.5):
                    pass
            except OSError:
                still.append(host)
        pending = still
        if pending:
            time.sleep(0.2)
    return time.monotonic() - began


def up(fleet, count, pools=10, rate="80mbit", boot_spread=(40.0, 90.0), seed=15, base_image=None,
       fleetlock_port=None, budgets=None, timeout=300, subnet=SUBNET):
    """Create the fleet's state and start its supervisor (detached: not a child of the caller) -> fleet info.

    ``subnet`` (127.77 by default) gives the hosts' addresses: two fleets up at once need two (the lab's comparison
    test takes 127.78, so that it runs beside a bench's fleet)."""
    if os.geteuid() != 0:
        raise SimError("the simulated fleet needs root (mount and PID namespaces)")
    info = fleet.create(count, pools, rate, boot_spread, seed, base_image or default_base, fleetlock_port, subnet)
    if fleetlock_port:
        (fleet.state / "fleetlock").mkdir(exist_ok=True)
        (fleet.state / "fleetlock" / "config.json").write_text(json.dumps(
            {"default_slots": 1, "slots": dict(budgets or {})}))
    log_file = open(fleet.state / "supervisor.log", "ab")
    # Double fork through `setsid`: the supervisor is nobody's child here, so a bench's RUSAGE_CHILDREN never
    # holds the hosts' CPU (scale.py reads it apart, from cpu.json and /proc).
    subprocess.run(["setsid", "-f", sys.executable, str(Path(__file__).resolve()), "_supervise",
                    "--state", str(fleet.state)], stdin=subprocess.DEVNULL, stdout=log_file, stderr=log_file,
                   check=True)
    log_file.close()
    began = time.monotonic()
    while not (fleet.state / "supervisor.pid").exists():
        if time.monotonic() - began > 10:
            raise SimError("the supervisor did not start; see %s" % (fleet.state / "supervisor.log"))
        time.sleep(0.05)
    info["up_s"] = round(wait_listening(info["hosts"], timeout), 2)
    return info


def default_base(registry):
    return base_image(registry)


def base_image(registry, size_mb=800):
    """The fleet's base image v1: one layer of size_mb (already on every host)."""
    return image(registry, "1.0", [("sha256:" + "b" * 64, size_mb * 1000 * 1000)])


def image(registry, version, layers, tag=None):
    """An image of the fleet: a record in its registry directory -> the record (with name)."""
    record = _simregistry.build(str(registry), IMAGE_NAME, tag or version, version, layers)
    record["name"] = IMAGE_NAME
    return record


def layer(seed, size_mb):
    """A layer digest of its own for seed, of size_mb."""
    import hashlib
    return ("sha256:" + hashlib.sha256(str(seed).encode()).hexdigest(), int(size_mb * 1000 * 1000))


def down(fleet, timeout=60):
    """Stop the supervisor (it kills every host by PID and waits for them), then check nothing is left."""
    pid = fleet.supervisor_pid()
    if pid:
        os.kill(pid, signal.SIGTERM)
        began = time.monotonic()
        # The process, not its PID file: the supervisor removes the file before its interpreter has exited.
        while pid_alive(pid, SUPERVISOR_MARKER):
            if time.monotonic() - began > timeout:
                raise SimError("the supervisor (PID %d) did not end within %d s" % (pid, timeout))
            time.sleep(0.1)
    left = leftovers(fleet)
    if left:
        raise SimError("left after down: %s" % "; ".join(left))
    return True


def leftovers(fleet):
    """Processes whose command line names the fleet's state or root, and mounts under it."""
    state = str(fleet.state)
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if state + "/" in cmdline or cmdline.rstrip().endswith(state):
            out.append("process %s: %s" % (entry.name, cmdline[:120]))
    with open("/proc/self/mountinfo") as handle:
        out += ["mount %s" % line.split()[4] for line in handle if line.split()[4].startswith(state + "/")]
    group = cgroup_dir(fleet.state)
    if group is not None and group.exists():
        out.append("cgroup %s" % group)
    return out


def hosts_cpu(fleet):
    """User+sys CPU seconds the hosts (and the supervisor) used so far: the fleet's cpuacct cgroup where there is
    one; else those the supervisor reaped (reboots) plus every live process of each host (its own times and its
    reaped children's), read from /proc (approximate: processes a host's reboot ends may be missed)."""
    group = cgroup_dir(fleet.state)
    if group is not None and (group / "cpuacct.usage").exists():
        return int((group / "cpuacct.usage").read_text()) / 1e9
    data = json.loads((fleet.state / "cpu.json").read_text())
    roots = set(data["hosts"].values())
    tick = os.sysconf("SC_CLK_TCK")
    children, times = {}, {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        pid = int(entry.name)
        children.setdefault(int(fields[1]), []).append(pid)
        times[pid] = sum(int(x) for x in fields[11:15]) / tick      # utime stime cutime cstime
    total, stack = 0.0, list(roots)
    while stack:
        pid = stack.pop()
        total += times.get(pid, 0.0)
        stack.extend(children.get(pid, ()))
    return data["reaped_cpu_s"] + total


def host_processes(fleet):
    """How many processes the hosts have now (their unshare, PID 1 and sessions)."""
    from _lab import parents  # the bench's one reader of /proc's parent ids (bench/ is on sys.path)
    data = json.loads((fleet.state / "cpu.json").read_text())
    children = {}
    for pid, (ppid, _comm) in parents().items():
        children.setdefault(ppid, []).append(pid)
    count, stack = 0, list(data["hosts"].values())
    while stack:
        pid = stack.pop()
        count += 1
        stack.extend(children.get(pid, ()))
    return count


def write_inventory(fleet, path, pools_budget="10%", extra_vars=None, forks_note=None):
    """An Ansible inventory of the fleet: pools pool01..poolNN under the group `fleet`, each with fleetos_pool and
    fleetos_pool_max_unavailable = pools_budget; ssh as users reach their hosts (the ssh connection plugin,
    ControlPersist, pipelining), host keys pinned -> {pool: [hosts]}."""
    import yaml
    info = fleet.info()
    pools = {}
    for host in info["hosts"]:
        pools.setdefault(host["pool"], {})[host["name"]] = {
            "ansible_host": host["address"], "ansible_port": host["port"], "fleetos_node_labels": {}}
    all_vars = {
        "ansible_user": "root",
        "ansible_ssh_private_key_file": str(fleet.key),
        "ansible_ssh_common_args": "-o UserKnownHostsFile=%s -o StrictHostKeyChecking=yes -o ServerAliveInterval=5 "
                                   "-o ServerAliveCountMax=3" % fleet.known_hosts,
        "ansible_pipelining": True,
        "ansible_control_path_dir": str(fleet.control_path_dir),
        "fleetos_lab_sim_image_name": IMAGE_NAME,
    }
    if info.get("fleetlock_port"):
        all_vars["fleetos_lab_fleetlock_url"] = "http://127.0.0.1:%d" % info["fleetlock_port"]
    all_vars.update(extra_vars or {})
    children = {pool: {"vars": {"fleetos_pool": pool, "fleetos_pool_max_unavailable": pools_budget},
                       "hosts": hosts} for pool, hosts in sorted(pools.items())}
    inventory = {"all": {"vars": all_vars, "children": {"fleet": {"children": children}}}}
    Path(path).write_text("# Written by bench/simfleet.py: a simulated fleet on loopback.\n"
                          + yaml.safe_dump(inventory, sort_keys=False))
    return {pool: sorted(hosts) for pool, hosts in pools.items()}


def events(fleet, offset=0):
    """The journal's events from byte offset on (complete lines)."""
    with open(fleet.journal, "rb") as handle:
        handle.seek(offset)
        data = handle.read()
    out = []
    for line in data.split(b"\n")[:-1]:
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def host_state(fleet, name):
    return json.loads((fleet.root(name) / "sysroot" / "simfleet" / "state.json").read_text())


def booted_digest(fleet, name):
    state = host_state(fleet, name)
    for dep in state["deployments"]:
        if [dep["checksum"], dep["serial"]] == list(state["booted"]):
            return dep["digest"]
    return None


# --------------------------------------------------------------------------
# command line


def parse_spread(text):
    low, _, high = str(text).partition("-")
    low, high = float(low), float(high or low)
    if low < 0 or high < low:
        raise argparse.ArgumentTypeError("a boot spread is A-B seconds with 0 <= A <= B, not %r" % text)
    return low, high


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("up")
    p.add_argument("--hosts", type=int, required=True)
    p.add_argument("--pools", type=int, default=10)
    p.add_argument("--rate", default="80mbit")
    p.add_argument("--boot-spread", type=parse_spread, default=(40.0, 90.0), metavar="A-B")
    p.add_argument("--seed", type=int, default=15)
    p.add_argument("--fleetlock", type=int, default=0, metavar="PORT", help="serve FleetLock on 127.0.0.1:PORT")
    p.add_argument("--inventory", default=None, help="write the inventory there (default STATE/hosts.yml)")
    for name in ("up", "down", "status", "_supervise"):
        (p if name == "up" else sub.add_parser(name)).add_argument("--state", default=None)
    args = parser.parse_args(argv)
    fleet = Fleet(args.state)
    try:
        if args.command == "_supervise":
            (fleet.state / "supervisor.pid").write_text("%d\n" % os.getpid())
            try:
                return Supervisor(fleet).run()
            finally:
                (fleet.state / "supervisor.pid").unlink()
        if args.command == "up":
            if not 1 <= args.hosts <= 250 * 250:
                raise SimError("--hosts must be 1 to 62500")
            info = up(fleet, args.hosts, args.pools, args.rate, args.boot_spread, args.seed,
                      fleetlock_port=args.fleetlock or None)
            inventory = Path(args.inventory or fleet.state / "hosts.yml")
            write_inventory(fleet, inventory)
            print("simfleet: %d hosts up in %.1f s; inventory %s" % (len(info["hosts"]), info["up_s"], inventory))
        elif args.command == "down":
            down(fleet)
            print("simfleet: down, nothing left")
        elif args.command == "status":
            info = fleet.info()
            if not info:
                print("simfleet: no fleet in %s" % fleet.state)
                return 1
            pid = fleet.supervisor_pid()
            print("simfleet: %d hosts, supervisor %s, %d host processes" % (
                len(info["hosts"]), pid or "not running", host_processes(fleet) if pid else 0))
    except SimError as exc:
        print("simfleet.py: error: %s" % exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
