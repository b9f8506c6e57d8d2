"""A FleetLock server for the lab (the protocol Zincati and airlock speak).

FleetLock is a distributed counting semaphore per group, with owned and recursive
locks: `POST /v1/pre-reboot` takes a slot (again for a holder: still one slot),
`POST /v1/steady-state` releases the caller's slot (a no-op when it holds none). Both
need the header `fleet-lock-protocol: true` and a body
`{"client_params": {"id": ..., "group": ...}}`. Success is 200; a failure is a non-200
status with a JSON body `{"kind": ..., "value": ...}`.

It runs in the lab namespace at 198.51.100.1:8080 (`fleetlab _fleetlock`) and writes
every lock, unlock and refusal to the journal, with the group's holders after it.
"""

import json
import signal
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from .common import (
    BRIDGE_IP,
    LAB_DIR,
    LAB_NETNS,
    LabError,
    journal,
    listening,
    pid_alive,
    read_json,
    read_pid,
    state_dir,
    stop_pid,
    wait_for,
    write_file,
    write_json,
)

MARKER = "fleetlab _fleetlock"
PORT = 8080
MAX_BODY = 64 * 1024


class FleetLockError(Exception):
    def __init__(self, status, kind, value):
        super().__init__(value)
        self.status = status
        self.kind = kind
        self.value = value


class Semaphores:
    """Owned, recursive counting semaphores, one per group."""

    def __init__(self, default_slots=1, slots=None, holders=None):
        self.default_slots = default_slots
        self.slots = dict(slots or {})
        self.holders = {group: list(ids) for group, ids in (holders or {}).items()}
        self.lock = threading.Lock()

    def capacity(self, group):
        return self.slots.get(group, self.default_slots)

    def acquire(self, group, client_id):
        with self.lock:
            held = self.holders.setdefault(group, [])
            if client_id in held:
                return list(held)
            if len(held) >= self.capacity(group):
                raise FleetLockError(409, "failed_lock_semaphore_full",
                                     "semaphore currently full, all slots are locked already")
            held.append(client_id)
            return list(held)

    def release(self, group, client_id):
        with self.lock:
            held = self.holders.setdefault(group, [])
            if client_id in held:
                held.remove(client_id)
            return list(held)

    def snapshot(self):
        with self.lock:
            return {"default_slots": self.default_slots, "slots": dict(self.slots),
                    "holders": {g: list(h) for g, h in self.holders.items() if h}}


def parse_request(headers, body):
    """Validate a FleetLock request; return (group, id) or raise FleetLockError."""
    if (headers.get("fleet-lock-protocol") or "").strip().lower() != "true":
        raise FleetLockError(400, "missing_fleet_lock_protocol_header",
                             "header 'fleet-lock-protocol: true' is required")
    try:
        data = json.loads(body or b"{}")
    except ValueError:
        raise FleetLockError(400, "invalid_body", "the body is not JSON")
    params = data.get("client_params") if isinstance(data, dict) else None
    if not isinstance(params, dict):
        raise FleetLockError(400, "invalid_client_params", "the body has no client_params object")
    group, client_id = params.get("group"), params.get("id")
    for field, value in (("group", group), ("id", client_id)):
        if not isinstance(value, str) or not value:
            raise FleetLockError(400, "invalid_client_params",
                                 "client_params.%s must be a non-empty string" % field)
    return group, client_id


def fl_dir():
    return state_dir() / "fleetlock"


def address():
    return "http://%s:%d" % (BRIDGE_IP, PORT)


def make_handler(semaphores, on_change):
    class Handler(BaseHTTPRequestHandler):
        server_version = "fleetlab-fleetlock/1"

        def log_message(self, fmt, *args):
            sys.stdout.write("fleetlock: " + (fmt % args) + "\n")
            sys.stdout.flush()

        def _reply(self, status, payload):
            body = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):  # noqa: N802 (http.server's naming)
            if self.path.rstrip("/") == "/v1/status":
                self._reply(200, semaphores.snapshot())
            else:
                self._reply(404, {"kind": "not_found", "value": "unknown path %s" % self.path})

        def do_POST(self):  # noqa: N802
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(min(length, MAX_BODY))
            path = self.path.rstrip("/")
            if path not in ("/v1/pre-reboot", "/v1/steady-state"):
                self._reply(404, {"kind": "not_found", "value": "unknown path %s" % self.path})
                return
            cfg = read_json(fl_dir() / "config.json", {})
            with semaphores.lock:
                semaphores.default_slots = cfg.get("default_slots", 1)
                semaphores.slots = dict(cfg.get("slots") or {})
            try:
                group, client_id = parse_request(self.headers, body)
                if path == "/v1/pre-reboot":
                    holders = semaphores.acquire(group, client_id)
                    journal("fleetlock_lock", group=group, id=client_id, holders=holders)
                else:
                    holders = semaphores.release(group, client_id)
                    journal("fleetlock_unlock", group=group, id=client_id, holders=holders)
            except FleetLockError as exc:
                journal("fleetlock_refused", path=path, kind=exc.kind)
                self._reply(exc.status, {"kind": exc.kind, "value": exc.value})
                return
            on_change()
            self._reply(200, {})

    return Handler


def saver(semaphores, path):
    """Return the server's save: the holders written to path, one save at a time.

    Each save writes the holders as they are when it writes, so that a request's save never puts an
    older snapshot back over a later request's.
    """
    saving = threading.Lock()

    def save():
        with saving:
            write_json(path, semaphores.snapshot())

    return save


def serve():
    """`fleetlab _fleetlock`: run the server in the lab namespace (entered by the caller)."""
    cfg = read_json(fl_dir() / "config.json", {})
    saved = read_json(fl_dir() / "holders.json", {})
    semaphores = Semaphores(cfg.get("default_slots", 1), cfg.get("slots"), saved.get("holders"))

    save = saver(semaphores, fl_dir() / "holders.json")
    server = ThreadingHTTPServer((BRIDGE_IP, PORT), make_handler(semaphores, save))
    signal.signal(signal.SIGTERM, lambda *a: threading.Thread(target=server.shutdown).start())
    server.serve_forever()
    return 0


def running():
    return pid_alive(read_pid(fl_dir() / "fleetlock.pid"), MARKER)


def configure(default_slots=None, group=None, slots=None):
    """Set the slots of every group (default_slots) or of one group; applies at once."""
    cfg = read_json(fl_dir() / "config.json", {"default_slots": 1, "slots": {}})
    if default_slots is not None:
        cfg["default_slots"] = default_slots
    if group is not None:
        cfg.setdefault("slots", {})[group] = slots
    write_json(fl_dir() / "config.json", cfg)
    return cfg


def start():
    if running():
        return
    fl_dir().mkdir(parents=True, exist_ok=True)
    configure()
    log = open(fl_dir() / "fleetlock.log", "ab")
    proc = subprocess.Popen(
        ["ip", "netns", "exec", LAB_NETNS, sys.executable, str(LAB_DIR / "fleetlab"), "_fleetlock"],
        stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
    )
    write_file(fl_dir() / "fleetlock.pid", "%d\n" % proc.pid)
    wait_for(lambda: listening(proc.pid, BRIDGE_IP, PORT) or proc.poll() is not None, 10,
             "the FleetLock server to listen")
    if proc.poll() is not None:
        raise LabError("the FleetLock server exited at start; see %s" % (fl_dir() / "fleetlock.log"))


def stop():
    stop_pid(read_pid(fl_dir() / "fleetlock.pid"), MARKER)


def reset():
    """Release every slot (as an administrator would after a lost host)."""
    write_json(fl_dir() / "holders.json", {"holders": {}})
    if running():
        stop()
        start()
