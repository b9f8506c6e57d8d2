"""Shared helpers of the lab: paths, state, errors, commands, the events journal.

The lab shares no code with the collection (plugins/): it is a second, independent
implementation of the contracts the collection relies on.
"""

import fcntl
import json
import os
import re
import signal
import subprocess
import tempfile
import time
from pathlib import Path

LAB_DIR = Path(__file__).resolve().parent.parent
REPO_DIR = LAB_DIR.parent
NODE_OVERLAY = LAB_DIR / "node" / "usr"
BOOT_SCRIPT = LAB_DIR / "node" / "boot.sh"
# The interpreter of the lab's stand-ins (rpm-ostree, bootc) on a node: a private path, so that a
# node without Python (the default) has none that Ansible's interpreter discovery could find.
NODE_PYTHON = Path("/usr/libexec/fleetlab/python3")

# The lab's network namespace; its nodes' namespaces are LAB_NETNS-nodeNN. Another name
# (FLEETLAB_NETNS, with its own FLEETLAB_STATE) runs a second lab beside the first.
LAB_NETNS = os.environ.get("FLEETLAB_NETNS", "fleetlab")
BRIDGE = "flbr0"
# Every lab lives in TEST-NET-2 and nowhere else. The machine's own namespace reaches each lab
# that is up through a link of its own (net.py), so two labs up at once must not share an
# address: each has its own block of the range, its "slice" (FLEETLAB_SLICE; the default lab
# 0, any other name 1 unless told). Slice 0 is the larger one: the benches grow the default lab
# to about a hundred nodes.
LAB_RANGE = "198.51.100.0/24"
SUBNET_PREFIX = "198.51.100."
SLICES = ((0, 25), (128, 26), (192, 26))  # (first address's last byte, prefix length)
FIRST_NODE_OFFSET = 10  # node N is the slice's address 10 + N
HOST_LINK_PREFIX = "fleetlab-h"  # the machine's end of a lab's link: fleetlab-h<slice>
LAB_LINK = "flhost"  # its other end, on the lab's bridge


def _slice():
    raw = os.environ.get("FLEETLAB_SLICE")
    if raw is None:
        return 0 if LAB_NETNS == "fleetlab" else 1
    if raw not in [str(i) for i in range(len(SLICES))]:
        raise SystemExit("fleetlab: error: FLEETLAB_SLICE %r must be one of %s"
                         % (raw, ", ".join(str(i) for i in range(len(SLICES)))))
    return int(raw)


def slice_network(index):
    """Slice index's addresses: (subnet, bridge address, the machine's address, node 0's last byte, most nodes)."""
    base, prefix_len = SLICES[index]
    # Node N is at node 0's byte + N; the slice's last address is its broadcast address.
    return ("%s%d/%d" % (SUBNET_PREFIX, base, prefix_len), SUBNET_PREFIX + str(base + 1),
            SUBNET_PREFIX + str(base + 2), base + FIRST_NODE_OFFSET, (1 << (32 - prefix_len)) - 2 - FIRST_NODE_OFFSET)


SLICE = _slice()
PREFIX_LEN = SLICES[SLICE][1]
SUBNET, BRIDGE_IP, HOST_IP, FIRST_NODE_HOST, MAX_NODES = slice_network(SLICE)
HOST_LINK = HOST_LINK_PREFIX + str(SLICE)

OSNAME = "fedora-coreos"
BASE_IMAGE = "fleetos/lab-os:1.0"
REGISTRY_USER = "fleetos"
CONTAINER_TRANSPORT = "ostree-unverified-registry:"
# Signed images: the node policy requires a GPG "simple signing" signature for this
# repository namespace of the lab registry; the nodes read signatures from the lookaside
# (sigstore) server at SIGSTORE_PORT, and verify ostree commits with remote OSTREE_REMOTE.
SIGNED_NAMESPACE = "fleetos-signed"
OSTREE_REMOTE = "fleet"
SIGSTORE_PORT = 8081

NODE_NAME_RE = re.compile(r"^node(\d{2,3})$")


class LabError(Exception):
    """An error the CLI reports as one line."""


if not re.match(r"^[a-z][a-z0-9]{0,11}$", LAB_NETNS):
    raise SystemExit("fleetlab: error: FLEETLAB_NETNS %r must be 1-12 lowercase letters and digits" % LAB_NETNS)


def state_dir():
    return Path(os.environ.get("FLEETLAB_STATE", str(REPO_DIR / ".lab"))).resolve()


def inventory_dir():
    return Path(os.environ.get("FLEETLAB_INVENTORY", str(REPO_DIR / "inventories" / "lab")))


def node_name(index):
    return "node%02d" % index


def node_index(name):
    match = NODE_NAME_RE.match(name)
    if not match:
        raise LabError("unknown node %r: node names look like node01" % name)
    return int(match.group(1))


def node_ip(index):
    return SUBNET_PREFIX + str(FIRST_NODE_HOST + index)


def node_netns(name):
    return LAB_NETNS + "-" + name


def node_veth(name):
    return "flv-" + name


def run(argv, check=True, capture=True, input_text=None, env=None, netns=None, timeout=None):
    """Run argv (a list, never a shell string); raise LabError naming the command on failure."""
    if netns:
        argv = ["ip", "netns", "exec", netns] + list(argv)
    full_env = dict(os.environ)
    full_env["LC_ALL"] = "C"
    if env:
        full_env.update(env)
    proc = subprocess.run(
        argv,
        input=input_text,
        stdout=subprocess.PIPE if capture else None,
        stderr=subprocess.PIPE if capture else None,
        text=True,
        env=full_env,
        timeout=timeout,
        check=False,
    )
    if check and proc.returncode != 0:
        detail = (proc.stderr or proc.stdout or "").strip().splitlines()
        last = detail[-1] if detail else "no output"
        raise LabError("%s failed (rc=%d): %s" % (" ".join(argv[:4]), proc.returncode, last))
    return proc


def write_file(path, text, mode=0o644):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # A temporary file of its own per write: two writers of one file (the FleetLock server's
    # threads) must not write into the same temporary file.
    fd, tmp = tempfile.mkstemp(dir=str(path.parent), prefix="." + path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, str(path))
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def read_json(path, default=None):
    try:
        with open(path) as handle:
            return json.load(handle)
    except FileNotFoundError:
        return default


def write_json(path, data, mode=0o644):
    write_file(path, json.dumps(data, indent=2, sort_keys=True) + "\n", mode)


def journal_path():
    return state_dir() / "journal.jsonl"


def journal(event, **fields):
    """Append one event to the lab's JSON-lines journal."""
    record = {"ts": round(time.time(), 3), "event": event}
    record.update(fields)
    line = json.dumps(record, sort_keys=True) + "\n"
    path = journal_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(str(path), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def read_journal():
    events = []
    try:
        with open(journal_path()) as handle:
            for line in handle:
                line = line.strip()
                if line:
                    events.append(json.loads(line))
    except FileNotFoundError:
        pass
    return events


def pid_alive(pid, marker=None):
    """True when pid runs and, if marker is given, its command line contains marker."""
    if not pid:
        return False
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as handle:
            cmdline = handle.read().replace(b"\0", b" ").decode(errors="replace")
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return False
    try:
        with open("/proc/%d/stat" % pid) as handle:
            if handle.read().rsplit(")", 1)[1].split()[0] == "Z":
                return False
    except (FileNotFoundError, IndexError):
        return False
    return marker is None or marker in cmdline


def read_pid(path):
    try:
        return int(Path(path).read_text().strip())
    except (FileNotFoundError, ValueError):
        return None


def stop_pid(pid, marker, timeout=10.0):
    """Stop a process this lab started: SIGTERM, then SIGKILL after timeout."""
    if not pid_alive(pid, marker):
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.time() + timeout
    while time.time() < deadline:
        if not pid_alive(pid, marker):
            return
        time.sleep(0.05)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    while pid_alive(pid, marker):
        time.sleep(0.05)


class StateLock:
    """An exclusive lock on the lab state, so two fleetlab commands don't race."""

    def __init__(self, name="lab.lock"):
        self.path = state_dir() / name
        self.handle = None

    def __enter__(self):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.handle = open(self.path, "w")
        fcntl.flock(self.handle, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        fcntl.flock(self.handle, fcntl.LOCK_UN)
        self.handle.close()


def listening(pid, ip, port):
    """True when the network namespace of pid has a TCP socket listening on ip:port."""
    want_port = "%04X" % port
    octets = [int(x) for x in ip.split(".")]
    want_ip = "%02X%02X%02X%02X" % tuple(reversed(octets))
    try:
        with open("/proc/%d/net/tcp" % pid) as handle:
            next(handle)
            for line in handle:
                fields = line.split()
                local, state = fields[1], fields[3]
                addr, lport = local.split(":")
                if state == "0A" and lport == want_port and addr in (want_ip, "00000000"):
                    return True
    except (FileNotFoundError, ProcessLookupError):
        return False
    try:
        with open("/proc/%d/net/tcp6" % pid) as handle:
            next(handle)
            for line in handle:
                fields = line.split()
                addr, lport = fields[1].split(":")
                if fields[3] == "0A" and lport == want_port and addr == "0" * 32:
                    return True
    except (FileNotFoundError, ProcessLookupError):
        return False
    return False


def wait_for(predicate, timeout, what, interval=0.05):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(interval)
    raise LabError("timed out after %ds waiting for %s" % (timeout, what))
