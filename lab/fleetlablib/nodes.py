"""Lab nodes: a real ostree sysroot each, booted in its own namespaces with sshd as PID 1.

Each node has a supervisor process (`fleetlab _supervise NODE`) that boots it, and
boots it again whenever PID 1 ends (a reboot), honouring injected faults.
"""

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

from . import images, net, registry, signing
from .common import (
    BOOT_SCRIPT,
    LAB_DIR,
    NODE_OVERLAY,
    NODE_PYTHON,
    OSNAME,
    OSTREE_REMOTE,
    CONTAINER_TRANSPORT,
    LabError,
    journal,
    journal_path,
    listening,
    node_ip,
    node_netns,
    pid_alive,
    read_json,
    read_pid,
    run,
    state_dir,
    stop_pid,
    wait_for,
    write_file,
    write_json,
)

SUPERVISOR_MARKER = "fleetlab _supervise"
FAULTS = ("no-boot", "fail-health", "slow-boot", "unreachable")
# A soft reboot's share of a node's boot delay: userspace only (no firmware, boot loader, kernel, initrd).
# systemd-analyze on physical machines puts userspace at about a third of a boot (16.6 s with 5.8 s of
# userspace, 23.4 s with 8.8 s: see docs/rollout.md, "Soft reboots"); `fleetlab up --userspace-share`.
USERSPACE_SHARE = 0.35
# The tool that manages a node's deployments. A bootc node is one that `bootc install`
# made: its physical root holds bootc's install record (.bootc-aleph.json), and the bootc
# stand-in is installed; on the other (rpm-ostree) nodes /usr/bin/bootc does not exist.
BACKENDS = ("rpm-ostree", "bootc")
BOOTC_ALEPH = ".bootc-aleph.json"
# A node has no Python interpreter Ansible could find, as Fedora CoreOS ships; one made with
# --with-python has the machine's /usr/bin/python3 (RHEL image mode has one). Marked in its state.
WITH_PYTHON = "with-python"
# The login, as Fedora CoreOS ships it: the admin user `core` (Ignition makes it at first boot) reaches the
# host over ssh and becomes root with sudo; root itself may not log in over ssh. How `core` may use sudo
# (LOGIN_MODES) is the node's own /etc/sudoers.d/core: without a password (the default, as Fedora CoreOS
# configures it), with its password (`fleetlab login NODE password`, the password on stdin), or not at all.
LOGIN_USER = "core"
LOGIN_UID = 1000
LOGIN_MODES = ("nopasswd", "password", "refuse")
SUDOERS = """\
# Written by fleetlab: the node's sudo policy; the admin user's rule is in sudoers.d/core.
Defaults lecture=never
Defaults !fqdn
root ALL=(ALL:ALL) ALL
#includedir /etc/sudoers.d
"""
SUDO_RULES = {
    "nopasswd": "core ALL=(ALL) NOPASSWD: ALL\n",
    "password": "core ALL=(ALL) ALL\n",
    "refuse": "# fleetlab login NODE refuse: core may not use sudo\n",
}
# sudo authenticates with PAM: the password in the node's own /etc/shadow (pam_unix).
PAM_SUDO = """\
# Written by fleetlab: sudo on a lab node checks the password in /etc/shadow.
auth     required pam_unix.so
account  required pam_unix.so
session  required pam_permit.so
"""
SSHD_CONFIG = """\
# Written by fleetlab: the node's sshd (PID 1).
Port 22
ListenAddress 0.0.0.0
HostKey /run/lab/host_key
AuthorizedKeysFile /run/lab/authorized_keys
PermitRootLogin no
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PidFile none
MaxStartups 100:30:200
MaxSessions 50
UseDNS no
AcceptEnv LANG LC_*
Subsystem sftp internal-sftp
"""


def nodes_dir():
    return state_dir() / "nodes"


def node_dir(name):
    return nodes_dir() / name


def sysroot(name):
    return node_dir(name) / "sysroot"


def known_nodes():
    lab = read_json(state_dir() / "lab.json", {})
    return sorted(lab.get("nodes", {}))


def node_info(name):
    lab = read_json(state_dir() / "lab.json", {})
    info = lab.get("nodes", {}).get(name)
    if info is None:
        have = known_nodes()
        listing = ", ".join(have) if have else "none: run 'fleetlab up'"
        raise LabError("unknown node %r (lab nodes: %s)" % (name, listing))
    return info


def init_pid(name):
    pid = read_pid(node_dir(name) / "init.pid")
    return pid if pid_alive(pid) else None


def supervisor_pid(name):
    pid = read_pid(node_dir(name) / "supervisor.pid")
    return pid if pid_alive(pid, SUPERVISOR_MARKER) else None


def controller_key():
    return state_dir() / "ssh" / "id_ed25519"


def ensure_controller_key():
    key = controller_key()
    if not key.exists():
        key.parent.mkdir(parents=True, exist_ok=True)
        os.chmod(str(key.parent), 0o700)
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "fleetlab-controller", "-f", str(key)])
    return key


def _prepare_node_files(name):
    ndir = node_dir(name)
    (ndir / "faults").mkdir(parents=True, exist_ok=True)
    (ndir / "control").mkdir(parents=True, exist_ok=True)
    sshdir = ndir / "ssh"
    sshdir.mkdir(parents=True, exist_ok=True)
    os.chmod(str(sshdir), 0o700)
    if not (sshdir / "host_key").exists():
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(sshdir / "host_key")])
    write_file(sshdir / "authorized_keys", Path(str(controller_key()) + ".pub").read_text(), 0o600)
    write_file(sshdir / "sshd_config", SSHD_CONFIG)


def _deploy_dir(name, checksum):
    base = sysroot(name) / "ostree" / "deploy" / OSNAME / "deploy"
    for entry in sorted(base.iterdir()):
        if entry.is_dir() and entry.name.startswith(checksum + "."):
            return entry
    raise LabError("node %s has no deployment of %s" % (name, checksum[:12]))


def backend(name):
    """rpm-ostree or bootc: the tool that manages the node (bootc: it has bootc's install record)."""
    return "bootc" if (sysroot(name) / BOOTC_ALEPH).exists() else "rpm-ostree"


def _no_bootc(layer):
    """Whiteouts of /usr/bin/bootc and its fetch-and-apply timer, laid over the lab's tools on nodes that bootc
    does not manage."""
    _whiteout(layer / "bin" / "bootc")
    _whiteout(layer / "lib" / "systemd" / "system" / "bootc-fetch-apply-updates.timer")


def has_python(name):
    """Whether Ansible can find a Python interpreter on the node (made with --with-python)."""
    return (node_dir(name) / WITH_PYTHON).exists()


def _whiteout(path):
    """An overlayfs whiteout at ``path`` (a 0/0 character device): hides what lower layers have there."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.mknod(str(path), stat.S_IFCHR | 0o600, os.makedev(0, 0))
    except FileExistsError:  # another node's supervisor made it first
        pass


def _layer(name, fill):
    """The overlay layer ``name`` of the lab's state, made once by ``fill(directory)``: each node's
    supervisor may be first, so each fills a directory of its own and the first rename wins."""
    layer = state_dir() / "node-layers" / name
    if layer.is_dir():
        return layer
    tmp = layer.with_name(".%s.%d" % (name, os.getpid()))
    if tmp.exists():
        remove_tree(tmp)
    tmp.mkdir(parents=True)
    fill(tmp)
    try:
        os.rename(str(tmp), str(layer))
    except OSError:  # another supervisor's rename came first
        remove_tree(tmp)
    return layer


def _private_python(layer):
    """The stand-ins' own interpreter at NODE_PYTHON: a copy of the machine's python3, at a path
    Ansible's interpreter discovery never looks at."""
    target = layer / NODE_PYTHON.relative_to("/usr")
    target.parent.mkdir(parents=True)
    shutil.copy2(os.path.realpath("/usr/bin/python3"), str(target))


def _no_python(layer):
    """Whiteouts for every python* of the machine's /usr on the node's PATH, and the paths Ansible's
    interpreter discovery tries (/usr/libexec/platform-python), as on Fedora CoreOS."""
    for folder in ("bin", "sbin", "local/bin", "local/sbin"):
        source = Path("/usr") / folder
        if source.is_dir():
            for entry in source.iterdir():
                if entry.name.startswith("python"):
                    _whiteout(layer / folder / entry.name)
    _whiteout(layer / "libexec" / "platform-python")


def _node_usr(name):
    """The lowerdir(s) boot.sh lays over the image's /usr: the lab's tools and their private
    interpreter; without bootc on a node that bootc does not manage; without a Python
    interpreter Ansible could find unless the node was made with one."""
    layers = []
    if backend(name) != "bootc":
        layers.append(_layer("no-bootc-timer", _no_bootc))
    if not has_python(name):
        layers.append(_layer("no-python", _no_python))
    layers += [_layer("private-python", _private_python), NODE_OVERLAY]
    return ":".join(str(layer) for layer in layers)


def _create_sysroot(name, record, disk_image=False, node_backend=None):
    """A fresh sysroot deployed at the image's commit, as an installer would leave it."""
    root = sysroot(name)
    tmp_root = root.with_name("sysroot.new")
    if tmp_root.exists():
        remove_tree(tmp_root)
    tmp_root.mkdir(parents=True)
    run(["ostree", "admin", "init-fs", "--modern", str(tmp_root)])
    run(["ostree", "admin", "--sysroot=%s" % tmp_root, "os-init", OSNAME])
    repo = tmp_root / "ostree" / "repo"
    run(["ostree", "--repo=%s" % repo, "pull-local", str(images.master_repo()), record["commit"]])
    origin = node_dir(name) / "initial.origin"
    if disk_image:
        # A cloud/disk image: a plain refspec origin, as image builders leave it.
        ref = "fedora:fedora/x86_64/coreos/stable"
        run(["ostree", "--repo=%s" % repo, "refs", "--create=%s" % ref, record["commit"]])
        # A disk image is built from the commit, not pulled as a container: it carries no
        # manifest digest (the lab's imports keep it as detached metadata).
        commitmeta = repo / "objects" / record["commit"][:2] / (record["commit"][2:] + ".commitmeta")
        if commitmeta.exists():
            commitmeta.unlink()
        write_file(origin, "[origin]\nrefspec=%s\n" % ref)
    else:
        write_file(origin, "[origin]\ncontainer-image-reference=%s%s\n" % (
            CONTAINER_TRANSPORT, images.registry_ref(record)))
        # The layers the node already has, as ostree-container keeps them after an install.
        cache = tmp_root / "ostree" / "container-cache"
        run(["skopeo", "copy", "--quiet", "oci:%s:%s" % (images.layout(), images.layout_tag(record["name"], record["tag"])),
             "oci:%s:%s" % (cache, images.layout_tag(record["name"], record["tag"]))])
    run(["ostree", "admin", "--sysroot=%s" % tmp_root, "deploy", "--os=%s" % OSNAME,
         "--origin-file=%s" % origin, "--karg=root=LABEL=root", "--karg=rw", record["commit"]])
    if node_backend == "bootc":
        # What `bootc install` leaves in the physical root: its install record.
        write_json(tmp_root / BOOTC_ALEPH, {
            "image": images.registry_ref(record), "version": record.get("version"),
            "kernel": None, "selinux": "disabled", "timestamp": None,
        })
    os.rename(str(tmp_root), str(root))
    etc = _deploy_dir(name, record["commit"]) / "etc"
    reg = registry.address()
    (etc / "containers" / "certs.d" / reg).mkdir(parents=True, exist_ok=True)
    write_file(etc / "containers" / "certs.d" / reg / "ca.crt", registry.ca_file().read_text())
    write_file(etc / "ostree" / "auth.json", registry.auth_file().read_text(), 0o600)
    write_file(etc / "hostname", name + "\n")
    # Signed images: containers policy, lookaside config, the lab key, ostree remote `fleet`.
    signing.install_node_trust(etc, root / "ostree" / "repo")
    install_login(etc, root / "ostree" / "deploy" / OSNAME / "var")


def _append_line(path, prefix, line, mode=None):
    text = path.read_text() if path.exists() else ""
    if not any(existing.startswith(prefix) for existing in text.splitlines()):
        write_file(path, text + ("" if not text or text.endswith("\n") else "\n") + line + "\n",
                   mode if mode is not None else (stat.S_IMODE(path.stat().st_mode) if path.exists() else 0o644))


def install_login(etc, var):
    """The admin user `core` with sudo (no password), as Ignition leaves a Fedora CoreOS host: written
    into a deployment's own /etc and its stateroot's /var (the node's root, never the machine's)."""
    _append_line(etc / "passwd", LOGIN_USER + ":", "%s:x:%d:%d:CoreOS Admin:/var/home/%s:/bin/bash"
                 % (LOGIN_USER, LOGIN_UID, LOGIN_UID, LOGIN_USER))
    _append_line(etc / "group", LOGIN_USER + ":", "%s:x:%d:" % (LOGIN_USER, LOGIN_UID))
    _append_line(etc / "shadow", LOGIN_USER + ":", "%s:*:19000:0:99999:7:::" % LOGIN_USER, 0o600)
    write_file(etc / "sudoers", SUDOERS, 0o440)
    (etc / "sudoers.d").mkdir(mode=0o750, exist_ok=True)
    if not (etc / "sudoers.d" / LOGIN_USER).exists():
        write_file(etc / "sudoers.d" / LOGIN_USER, SUDO_RULES["nopasswd"], 0o440)
    (etc / "pam.d").mkdir(exist_ok=True)
    write_file(etc / "pam.d" / "sudo", PAM_SUDO, 0o644)
    home = var / "home" / LOGIN_USER
    home.mkdir(parents=True, exist_ok=True)
    os.chown(str(home), LOGIN_UID, LOGIN_UID)
    os.chmod(str(home), 0o700)


# Run in the node (its own root): $1 the mode, $2 the sudoers rule; a password hash on stdin for "password".
_LOGIN_SCRIPT = r"""
set -eu
mode=$1 rule=$2
umask 077
if [ "$mode" = password ]; then
  IFS= read -r hash
  awk -v u=core -v h="$hash" 'BEGIN{FS=OFS=":"} $1==u{$2=h} {print}' /etc/shadow > /etc/shadow.fleetlab
  chmod 600 /etc/shadow.fleetlab && mv -f /etc/shadow.fleetlab /etc/shadow
fi
printf '%s' "$rule" > /etc/sudoers.d/.core.fleetlab
chmod 440 /etc/sudoers.d/.core.fleetlab && mv -f /etc/sudoers.d/.core.fleetlab /etc/sudoers.d/core
"""


def set_login(name, mode, password=None):
    """How `core` may use sudo on a running node: nopasswd, password (``password``) or refuse."""
    node_info(name)
    if mode not in LOGIN_MODES:
        raise LabError("unknown login mode %r: choose one of %s" % (mode, ", ".join(LOGIN_MODES)))
    data = None
    if mode == "password":
        if not password:
            raise LabError("login mode password needs the password on stdin")
        data = run(["openssl", "passwd", "-6", "-stdin"], input_text=password + "\n").stdout.strip() + "\n"
    proc = subprocess.run(exec_argv(name, ["/bin/sh", "-c", _LOGIN_SCRIPT, "sh", mode, SUDO_RULES[mode]]),
                          input=data, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=False)
    if proc.returncode != 0:
        raise LabError("could not set the login of node %s: %s" % (name, proc.stderr.strip() or proc.returncode))
    journal("login", node=name, mode=mode)


# The update agents a node can run (opt-in, `fleetlab agent`): the unit each is, as on a real host.
AGENT_UNITS = {"zincati": "zincati.service", "bootc": "bootc-fetch-apply-updates.timer"}


def set_agent(name, agent, on, delay=None, official=None, interval=None):
    """Enable and start (``on``) or disable and stop an update agent on a running node, with the lab's settings
    for it (the node's control/agents.json, /run/lab/control/agents.json on the node)."""
    node_info(name)
    if agent not in AGENT_UNITS:
        raise LabError("unknown agent %r: choose one of %s" % (agent, ", ".join(sorted(AGENT_UNITS))))
    path = node_dir(name) / "control" / "agents.json"
    current = read_json(path, {})
    entry = dict(current.get(agent) or {})
    if delay is not None:
        entry["delay"] = delay
    if interval is not None:
        entry["interval"] = interval
    if agent == "zincati":
        entry["official"] = official or entry.get("official") or "%s/fleetos/lab-official" % registry.address()
    current[agent] = entry
    write_json(path, current)
    verb = ["enable", "--now"] if on else ["disable", "--now"]
    proc = subprocess.run(exec_argv(name, ["systemctl"] + verb + [AGENT_UNITS[agent]]),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=False)
    if proc.returncode != 0:
        raise LabError("could not %s %s on node %s: %s" % (verb[0], AGENT_UNITS[agent], name, proc.stderr.strip()))
    journal("agent", node=name, agent=agent, on=on, settings=entry)


def create(name, index, record, disk_image=False, node_backend=None, with_python=False):
    """Create a node (idempotent: an existing sysroot is kept, and so are its backend and
    whether it has Python)."""
    _prepare_node_files(name)
    net.ensure_node_network(name, node_ip(index))
    if not (sysroot(name) / "ostree" / "deploy").exists():
        if with_python:
            write_file(node_dir(name) / WITH_PYTHON, "")
        _create_sysroot(name, record, disk_image, node_backend)
        write_file(node_dir(name) / "boot-count", "0\n")
    elif '[remote "%s"]' % OSTREE_REMOTE not in (sysroot(name) / "ostree" / "repo" / "config").read_text():
        # A node made before the lab had signed images: give every deployment the trust files.
        for etc in sorted((sysroot(name) / "ostree" / "deploy" / OSNAME / "deploy").glob("*/etc")):
            signing.install_node_trust(etc, sysroot(name) / "ostree" / "repo")
    if not (sysroot(name) / "ostree" / "deploy" / OSNAME / "var" / "home" / LOGIN_USER).exists():
        # A node made before the lab had the `core` login: every deployment gets it.
        for etc in sorted((sysroot(name) / "ostree" / "deploy" / OSNAME / "deploy").glob("*/etc")):
            install_login(etc, sysroot(name) / "ostree" / "deploy" / OSNAME / "var")


def start(name):
    if supervisor_pid(name):
        return
    log = open(node_dir(name) / "console.log", "ab")
    proc = subprocess.Popen(
        [sys.executable, str(LAB_DIR / "fleetlab"), "_supervise", name],
        stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
    )
    write_file(node_dir(name) / "supervisor.pid", "%d\n" % proc.pid)


def wait_ready(name, timeout=60):
    def ready():
        pid = init_pid(name)
        return bool(pid) and listening(pid, "0.0.0.0", 22)
    wait_for(ready, timeout, "node %s to boot" % name)


def stop(name):
    stop_pid(supervisor_pid(name), SUPERVISOR_MARKER)
    pid = read_pid(node_dir(name) / "init.pid")
    if pid_alive(pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        wait_for(lambda: not pid_alive(pid), 10, "node %s to stop" % name)


def fault_path(name, fault):
    return node_dir(name) / "faults" / fault


def set_fault(name, fault, seconds=None):
    node_info(name)
    if fault == "clear":
        for item in FAULTS:
            try:
                fault_path(name, item).unlink()
            except FileNotFoundError:
                pass
        net.set_node_link(name, True)
        journal("fault_clear", node=name)
        return
    if fault not in FAULTS:
        raise LabError("unknown fault %r: choose one of %s or clear" % (fault, ", ".join(FAULTS)))
    if fault == "slow-boot":
        if seconds is None or seconds < 0:
            raise LabError("fault slow-boot needs SECONDS, a number of seconds >= 0")
        write_file(fault_path(name, fault), "%s\n" % seconds)
    else:
        write_file(fault_path(name, fault), "1\n")
    if fault == "unreachable":
        net.set_node_link(name, False)
    journal("fault", node=name, fault=fault, seconds=seconds)


def _read_text(path):
    """The stripped text of a file, or None when it is missing or empty."""
    try:
        return Path(path).read_text().strip() or None
    except FileNotFoundError:
        return None


def _read_float(path, default=0.0):
    try:
        return float(Path(path).read_text().strip() or default)
    except (FileNotFoundError, ValueError):
        return default


def _restart(name, child):
    """A reboot asked for on the node: finalize a staged deployment, then end PID 1."""
    finalize = (
        "if [ -e /run/ostree/staged-deployment ] && [ ! -e /run/ostree/staged-deployment-locked ]; "
        "then ostree admin finalize-staged; fi"
    )
    subprocess.run(_nsenter(child) + ["/bin/sh", "-c", finalize], stdin=subprocess.DEVNULL, check=False)
    try:
        os.kill(child, signal.SIGKILL)
    except ProcessLookupError:
        pass


def supervise(name):
    """`fleetlab _supervise NODE`: boot the node, and boot it again after each reboot."""
    ndir = node_dir(name)
    stopping = {"flag": False}

    def _term(signum, frame):
        stopping["flag"] = True
        pid = read_pid(ndir / "init.pid")
        if pid_alive(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    signal.signal(signal.SIGTERM, _term)
    signal.signal(signal.SIGINT, _term)
    first = True
    soft = None
    while not stopping["flag"]:
        lab = read_json(state_dir() / "lab.json", {})
        while fault_path(name, "no-boot").exists() and not stopping["flag"]:
            time.sleep(0.2)
        delay = _read_float(fault_path(name, "slow-boot"))
        if not first:
            delay += float(lab.get("boot_delay", 0))
        first = False
        env = dict(os.environ)
        if soft is not None:
            # A soft reboot: no firmware, boot loader, kernel or initrd, only userspace's share of the boot.
            delay *= float(lab.get("userspace_share", USERSPACE_SHARE))
            env.update(FLEETLAB_BOOT_ID=(ndir / "boot-id").read_text().strip(), FLEETLAB_NEXTROOT=soft,
                       FLEETLAB_SOFT_REBOOTS=str(int(_read_float(ndir / "soft-reboots")) + 1))
        write_file(ndir / "soft-reboots", "%s\n" % env.get("FLEETLAB_SOFT_REBOOTS", "0"))
        soft = None
        deadline = time.time() + delay
        while time.time() < deadline and not stopping["flag"]:
            time.sleep(0.05)
        if stopping["flag"]:
            break
        count = int(_read_float(ndir / "boot-count")) + 1
        write_file(ndir / "boot-count", "%d\n" % count)
        proc = subprocess.Popen([
            "ip", "netns", "exec", node_netns(name),
            "unshare", "--mount", "--uts", "--pid", "--fork", "--propagation", "private",
            str(BOOT_SCRIPT), str(sysroot(name)), _node_usr(name), str(ndir), name,
            str(journal_path()), str(count),
        ], stdin=subprocess.DEVNULL, env=env)
        child = None
        deadline = time.time() + 10
        while child is None and proc.poll() is None and time.time() < deadline:
            try:
                kids = Path("/proc/%d/task/%d/children" % (proc.pid, proc.pid)).read_text().split()
            except FileNotFoundError:
                kids = []
            if kids:
                child = int(kids[0])
                write_file(ndir / "init.pid", "%d\n" % child)
            else:
                time.sleep(0.01)
        if stopping["flag"] and child:
            _term(signal.SIGTERM, None)
        request = ndir / "control" / "reboot-request"
        restarted = False
        while proc.poll() is None:
            if request.exists() and child:
                soft = _read_text(ndir / "control" / "soft-reboot")
                _restart(name, child)
                restarted = True
                try:
                    request.unlink()
                except FileNotFoundError:
                    pass
            time.sleep(0.05)
        rc = proc.wait()
        try:
            (ndir / "init.pid").unlink()
        except FileNotFoundError:
            pass
        # A reboot (PID 1 killed on request) ends unshare with a non-zero status: expected.
        if rc not in (0, 137, 143) and not stopping["flag"] and not restarted:
            journal("boot_failed", node=name, rc=rc)
            time.sleep(1)
    return 0


def _nsenter(pid):
    return ["nsenter", "-t", str(pid), "-m", "-u", "-n", "-p", "-r", "-w", "--",
            "/usr/bin/env", "-i", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "HOME=/root", "LANG=C.UTF-8", "TERM=dumb"]


def booted_pid(name):
    """The node's PID 1 once it has booted (its root is the deployment, /var mounted: boot.sh
    made /run/ostree-booted there before pivot_root), else None. Between the start of a boot
    and that moment PID 1 still sees the machine's own filesystem, where a command run in the
    node would read and write the machine's files."""
    pid = init_pid(name)
    if pid and os.path.exists("/proc/%d/root/run/ostree-booted" % pid):
        return pid
    return None


def exec_argv(name, argv):
    pid = booted_pid(name)
    if not pid:
        raise LabError("node %s is not running (booting, rebooting, faulted or stopped)" % name)
    return _nsenter(pid) + list(argv)


def node_status(name):
    info = node_info(name)
    row = {"node": name, "address": info["address"], "pool": info["pool"], "state": "down",
           "booted": None, "digest": None, "version": None, "checksum": None, "staged": None,
           "boots": int(_read_float(node_dir(name) / "boot-count")), "backend": backend(name),
           "python": has_python(name)}
    faults = [f for f in FAULTS if fault_path(name, f).exists()]
    if faults:
        row["faults"] = faults
    if not booted_pid(name):
        row["state"] = "rebooting" if supervisor_pid(name) else "stopped"
        return row
    proc = subprocess.run(exec_argv(name, ["rpm-ostree", "status", "--json"]),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=False)
    if proc.returncode != 0:
        row["state"] = "up (rpm-ostree status failed)"
        return row
    row["state"] = "up"
    data = json.loads(proc.stdout)
    for dep in data.get("deployments", []):
        if dep.get("booted"):
            row["booted"] = dep.get("container-image-reference") or dep.get("origin")
            row["digest"] = dep.get("container-image-reference-digest")
            row["version"] = dep.get("version")
            row["checksum"] = dep.get("checksum")
        if dep.get("staged"):
            row["staged"] = dep.get("container-image-reference-digest") or dep.get("checksum")
    return row


def remove_tree(path):
    """Remove a directory that may hold immutable ostree deployment dirs."""
    path = Path(path)
    if not path.exists():
        return
    deploy_root = path / "ostree" / "deploy"
    if deploy_root.exists():
        for item in deploy_root.glob("*/deploy/*"):
            if item.is_dir():
                subprocess.run(["chattr", "-i", str(item)], check=False,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    subprocess.run(["rm", "-rf", "--one-file-system", str(path)], check=False)
    if path.exists():
        raise LabError("could not remove %s" % path)


def save_lab(lab):
    write_json(state_dir() / "lab.json", lab)
