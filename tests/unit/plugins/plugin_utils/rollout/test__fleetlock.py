# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""_fleetlock: the host's curl against a FleetLock server on the loopback interface."""

from __future__ import annotations

import json
import shutil
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from ansible_collections.fleetos.layering.plugins.plugin_utils.rollout import _fleetlock
from ansible_collections.fleetos.layering.tests.unit.plugins.module_utils.utils import LocalHost

pytestmark = pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")


class _Server(HTTPServer):
    """One slot: the first id that asks holds it until it sends steady-state."""

    def __init__(self):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.holder = None
        self.requests = []


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 (the name http.server calls)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append((self.path, self.headers.get("fleet-lock-protocol"), body))
        ident = body["client_params"]["id"]
        if self.headers.get("fleet-lock-protocol") != "true":
            code, answer = 400, {"kind": "failed_missing_header", "value": "no fleet-lock-protocol"}
        elif self.path == "/v1/pre-reboot" and self.server.holder not in (None, ident):
            code, answer = 409, {"kind": "failed_lock_semaphore_full", "value": "semaphore currently full"}
        else:
            self.server.holder = ident if self.path == "/v1/pre-reboot" else None
            code, answer = 200, {}
        data = json.dumps(answer).encode()
        self.send_response(code)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    srv = _Server()
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def test_a_slot_is_granted_refused_and_freed(server):
    url = "http://127.0.0.1:%d/" % server.server_port
    host = LocalHost()
    assert _fleetlock.post(host, url, "pre-reboot", "node01", "workers") == (True, 200)
    assert _fleetlock.post(host, url, "pre-reboot", "node02", "workers") == (False, "409 failed_lock_semaphore_full")
    assert _fleetlock.post(host, url, "steady-state", "node01", "workers") == (True, 200)
    assert _fleetlock.post(host, url, "pre-reboot", "node02", "workers") == (True, 200)
    assert server.requests[0] == ("/v1/pre-reboot", "true", {"client_params": {"id": "node01", "group": "workers"}})
    # The body went on stdin: the command line holds the URL and the fixed flags only.
    assert host.argvs[0] == _fleetlock.request_argv(url, "pre-reboot")
    assert host.argvs[0][-1] == url.rstrip("/") + "/v1/pre-reboot"
    assert all("node01" not in word for argv in host.argvs for word in argv)


def test_no_server_is_no_answer_with_the_cause():
    srv = HTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    port = srv.server_port
    srv.server_close()
    granted, answer = _fleetlock.post(LocalHost(), "http://127.0.0.1:%d" % port, "pre-reboot", "n1", "default")
    assert granted is False
    assert answer.startswith("no answer (curl: (7)")


def test_a_request_is_bounded_by_its_timeout(server):
    url = "http://127.0.0.1:%d/" % server.server_port
    host = LocalHost()
    assert _fleetlock.post(host, url, "pre-reboot", "node01", "workers", timeout=7) == (True, 200)
    argv = host.argvs[0]
    assert argv[argv.index("--max-time") + 1] == "7"
    assert _fleetlock.request_argv(url, "steady-state")[_fleetlock.request_argv(url, "x").index("--max-time") + 1] \
        == str(_fleetlock.TIMEOUT) == "30"
