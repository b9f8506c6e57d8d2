# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# This is a private plugin_util of fleetos.layering: its interface may change at any
# time and it is not meant to be used by other collections.

"""A FleetLock request from the host, as a reboot manager on the host makes it (Zincati): ``curl``
runs on the host over the connection with the request body on its stdin; no Python on the host."""

from __future__ import annotations

import json

from ansible_collections.fleetos.layering.plugins.module_utils.host._host import as_host, error_line

# Seconds one request may take by default; a slow or silent server is an answer like any refusal.
TIMEOUT = 30


def request_argv(url, op, timeout=TIMEOUT):
    """The curl command that POSTs the body on its stdin to ``<url>/v1/<op>`` and gives up after ``timeout``
    seconds: the answer's body, then a line with the HTTP status."""
    return ["curl", "--silent", "--show-error", "--max-time", str(timeout), "--request", "POST",
            "--header", "fleet-lock-protocol: true", "--header", "Content-Type: application/json",
            "--data-binary", "@-", "--write-out", "\n%{http_code}", "--", "%s/v1/%s" % (url.rstrip("/"), op)]


def post(host, url, op, ident, group, timeout=TIMEOUT):
    """POST ``op`` (``pre-reboot`` or ``steady-state``) for the client ``ident`` in ``group``, within ``timeout``
    seconds; -> (granted, answer): the HTTP status and the error kind the server gave, or why there was none."""
    body = json.dumps({"client_params": {"id": ident, "group": group}}, sort_keys=True)
    rc, out, err = as_host(host).run(request_argv(url, op, timeout), data=body)
    if rc != 0:
        return False, "no answer (%s)" % error_line(err, rc)
    text, _sep, status = out.rpartition("\n")
    if status.strip() == "200":
        return True, 200
    try:
        kind = json.loads(text).get("kind")
    except (ValueError, AttributeError):
        kind = None
    return False, "%s %s" % (status.strip(), kind) if kind else status.strip()
