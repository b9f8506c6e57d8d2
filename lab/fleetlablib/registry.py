"""The lab registry: Debian's docker-registry with TLS and htpasswd, in the lab namespace.

A small wrapper process (`fleetlab _registry`) runs the registry, reads its access log
and writes each blob read, with its bytes and the reading node, to the journal.
"""

import base64
import json
import os
import re
import secrets
import signal
import subprocess
import sys
import time

from .common import (
    BRIDGE_IP,
    FIRST_NODE_HOST,
    HOST_IP,
    LAB_DIR,
    LAB_NETNS,
    REGISTRY_USER,
    LabError,
    journal,
    listening,
    node_name,
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

MARKER = "fleetlab _registry"
ACCESS_RE = re.compile(
    r'^(?P<client>\S+) - \S+ \[[^\]]*\] "(?P<method>[A-Z]+) (?P<path>\S+) [^"]*" (?P<status>\d{3}) (?P<bytes>\d+|-)'
)
BLOB_RE = re.compile(r"^/v2/(?P<repo>.+)/blobs/(?P<digest>sha256:[0-9a-f]{64})$")


def reg_dir():
    return state_dir() / "registry"


def config(port=None):
    cfg = read_json(reg_dir() / "registry.json", {})
    if port is not None:
        cfg["port"] = port
    cfg.setdefault("port", 5000)
    return cfg


def address(cfg=None):
    cfg = cfg or config()
    return "%s:%d" % (BRIDGE_IP, cfg["port"])


def auth_file():
    return reg_dir() / "auth.json"


def cert_dir():
    """A skopeo cert dir: it must hold only ca.crt."""
    return reg_dir() / "certs.d"


def ca_file():
    return cert_dir() / "ca.crt"


def pid():
    return read_pid(reg_dir() / "registry.pid")


def running():
    return pid_alive(pid(), MARKER)


def _make_tls(directory):
    key = directory / "tls" / "registry.key"
    crt = directory / "tls" / "registry.crt"
    if key.exists() and crt.exists():
        return key, crt
    (directory / "tls").mkdir(parents=True, exist_ok=True)
    run([
        "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-sha256", "-days", "3650",
        "-subj", "/CN=fleetlab registry",
        "-addext", "subjectAltName=IP:%s" % BRIDGE_IP,
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-keyout", str(key), "-out", str(crt),
    ])
    os.chmod(str(key), 0o600)
    cert_dir().mkdir(parents=True, exist_ok=True)
    write_file(ca_file(), crt.read_text())
    return key, crt


def _make_credentials(directory, cfg):
    htpasswd = directory / "htpasswd"
    if htpasswd.exists() and auth_file().exists() and "password" in cfg:
        return
    password = secrets.token_hex(16)
    # htpasswd -i reads the password from stdin: it never appears in argv.
    run(["htpasswd", "-B", "-i", "-c", str(htpasswd), REGISTRY_USER], input_text=password + "\n")
    os.chmod(str(htpasswd), 0o600)
    cfg["user"] = REGISTRY_USER
    cfg["password"] = password


def _write_auth_json(cfg):
    token = base64.b64encode(("%s:%s" % (cfg["user"], cfg["password"])).encode()).decode()
    data = {"auths": {address(cfg): {"auth": token}}}
    write_file(auth_file(), json.dumps(data, indent=2) + "\n", 0o600)


def _write_config(directory, cfg, key, crt):
    text = "\n".join([
        "version: 0.1",
        "log:",
        "  level: warn",
        "  accesslog:",
        "    disabled: false",
        "storage:",
        "  filesystem:",
        "    rootdirectory: %s" % (directory / "data"),
        "  delete:",
        "    enabled: true",
        "http:",
        "  addr: %s" % address(cfg),
        "  tls:",
        "    certificate: %s" % crt,
        "    key: %s" % key,
        "auth:",
        "  htpasswd:",
        "    realm: fleetlab",
        "    path: %s" % (directory / "htpasswd"),
        "",
    ])
    write_file(directory / "config.yml", text, 0o600)


def port_taken(port):
    """True when something other than our registry listens on the lab address and port."""
    probe = subprocess.Popen(
        ["ip", "netns", "exec", LAB_NETNS, "sleep", "5"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: os.readlink("/proc/%d/ns/net" % probe.pid) != os.readlink("/proc/self/ns/net"),
                 5, "a probe in the lab namespace")
        return listening(probe.pid, BRIDGE_IP, port)
    finally:
        probe.kill()
        probe.wait()


def ensure(port=None):
    """Set up (once) and start (if stopped) the registry; return its address."""
    directory = reg_dir()
    directory.mkdir(parents=True, exist_ok=True)
    os.chmod(str(directory), 0o700)
    cfg = config(port)
    if running():
        return address(cfg)
    if port_taken(cfg["port"]):
        raise LabError("registry port %s is already taken in the lab namespace" % address(cfg))
    key, crt = _make_tls(directory)
    _make_credentials(directory, cfg)
    write_json(directory / "registry.json", cfg, 0o600)
    _write_auth_json(cfg)
    _write_config(directory, cfg, key, crt)
    start()
    return address(cfg)


def start():
    if running():
        return
    directory = reg_dir()
    if not (directory / "config.yml").exists():
        raise LabError("the lab registry is not set up: run 'fleetlab up' first")
    log = open(directory / "registry.log", "ab")
    proc = subprocess.Popen(
        [sys.executable, str(LAB_DIR / "fleetlab"), "_registry"],
        stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
    )
    write_file(directory / "registry.pid", "%d\n" % proc.pid)
    cfg = config()
    wait_for(lambda: _child_listening(proc.pid, cfg["port"]) or proc.poll() is not None, 20, "the registry to listen")
    if proc.poll() is not None:
        raise LabError("the registry exited at start; see %s" % (directory / "registry.log"))
    journal("registry_start", address=address(cfg))


def _child_listening(wrapper_pid, port):
    child = read_pid(reg_dir() / "registry.child.pid")
    return bool(child) and listening(child, BRIDGE_IP, port)


def stop():
    stop_pid(pid(), MARKER)
    for name in ("registry.pid", "registry.child.pid"):
        try:
            (reg_dir() / name).unlink()
        except FileNotFoundError:
            pass
    journal("registry_stop")


def add_user(name, password):
    """Add (or replace) a registry user; the password comes from stdin, never argv."""
    if not re.match(r"^[a-z][a-z0-9_-]{0,31}$", name):
        raise LabError("registry user name %r must be lowercase letters, digits, '-' or '_'" % name)
    if not password or "\n" in password:
        raise LabError("the password for registry user %r must be one non-empty line on stdin" % name)
    htpasswd = reg_dir() / "htpasswd"
    if not htpasswd.exists():
        raise LabError("the lab registry is not set up: run 'fleetlab up' first")
    run(["htpasswd", "-B", "-i", str(htpasswd), name], input_text=password + "\n")
    if running():
        # docker-registry reads its htpasswd file when it starts.
        stop()
        start()
    journal("registry_user", user=name)


def _client_node(ip):
    try:
        host = int(ip.rsplit(".", 1)[1])
    except (IndexError, ValueError):
        return None
    if ip in (BRIDGE_IP, HOST_IP):  # a client in the lab's namespace, or on the machine through its link
        return "controller"
    if host > FIRST_NODE_HOST:
        return node_name(host - FIRST_NODE_HOST)
    return None


def serve():
    """The wrapper's main loop (`fleetlab _registry`): run the registry, journal blob reads."""
    directory = reg_dir()
    child = subprocess.Popen(
        ["ip", "netns", "exec", LAB_NETNS, "docker-registry", "serve", str(directory / "config.yml")],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    write_file(directory / "registry.child.pid", "%d\n" % child.pid)

    def _stop(signum, frame):
        child.terminate()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    for raw in child.stdout:
        line = raw.decode(errors="replace").rstrip("\n")
        match = ACCESS_RE.match(line)
        if not match:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()
            continue
        blob = BLOB_RE.match(match.group("path").split("?", 1)[0])
        if blob and match.group("method") == "GET" and match.group("status") in ("200", "206"):
            size = match.group("bytes")
            journal(
                "blob_read",
                client=match.group("client").split(":")[0],
                node=_client_node(match.group("client").split(":")[0]),
                repo=blob.group("repo"),
                digest=blob.group("digest"),
                bytes=int(size) if size != "-" else 0,
            )
    child.wait()
    return 0


def wait_gone(timeout=10):
    wait_for(lambda: not running(), timeout, "the registry to stop")
    time.sleep(0)
