# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Knocks on hosts' ssh ports from the strategy's loop, which must never block.

A knock is a TCP connection to the host's ssh address and port, closed as soon as it is
answered (as ansible.builtin.wait_for's port check does). It is started without blocking
and looked at again on the loop's later passes (settle()). Its answer: the port accepted
the connection (True) or refused it, was unreachable or did not answer within
KNOCK_SECONDS (False).
"""

from __future__ import annotations

import errno
import socket
import time

# Seconds a knock may go unanswered before it counts as a closed port.
KNOCK_SECONDS = 2.0
# The connection plugins whose address and port are the host's ssh endpoint.
SSH_CONNECTIONS = frozenset(("ssh", "smart", "paramiko", "paramiko_ssh"))
# The host's ssh arguments, among its variables, that may send ssh through another host.
SSH_ARGS = ("ansible_ssh_common_args", "ansible_ssh_extra_args", "ansible_ssh_args")
# What in them sends ssh through another host (a jump host, a proxy): the address is not the controller's to reach.
THROUGH = ("proxycommand", "proxyjump", "-j ")
# What a second connect() of a non-blocking socket answers while its first is under way.
_UNDER_WAY = (errno.EINPROGRESS, errno.EALREADY, errno.EWOULDBLOCK)


def door_of(task_vars, name, connection=None):
    """The (address, port) of a host's ssh endpoint from its variables, or None when the host is not
    reached over ssh, or through another host (a ProxyCommand or ProxyJump in its ssh arguments), or its address
    or port is a template (its value is not known here)."""
    task_vars = task_vars or {}
    plugin = str(task_vars.get("ansible_connection") or connection or "ssh").rsplit(".", 1)[-1]
    if plugin not in SSH_CONNECTIONS:
        return None
    args = " ".join(str(task_vars.get(var) or "") for var in SSH_ARGS).lower()
    if any(word in args for word in THROUGH):
        return None
    address = task_vars.get("ansible_host") or task_vars.get("ansible_ssh_host") or name
    port = task_vars.get("ansible_port") or task_vars.get("ansible_ssh_port") or 22
    if "{{" in str(address) or "{{" in str(port):
        return None
    try:
        port = int(port)
    except (TypeError, ValueError):
        return None
    if not 0 < port < 65536:
        return None
    return str(address), port


class Doors:
    """One knock at a time per host; the last answer of each host, with when its knock started."""

    def __init__(self, clock=time.time, knock_seconds=KNOCK_SECONDS, resolve=socket.getaddrinfo):
        self._clock = clock
        self._knock_seconds = knock_seconds
        self._resolve = resolve
        self._where = {}     # host -> getaddrinfo's first (family, sockaddr), or None: not knocked at
        self._knocks = {}    # host -> (socket, when started)
        self._answers = {}   # host -> (answer, when its knock started)

    def knock(self, host, door):
        """Start a knock on ``door`` (door_of()'s address and port) unless one is under way: -> False when the
        address does not resolve (no knock), else True. The answer comes with answer() once settled."""
        if host in self._knocks:
            return True
        where = self._place(host, door)
        if where is None:
            return False
        started = self._clock()
        sock = socket.socket(where[0], socket.SOCK_STREAM)
        sock.setblocking(False)
        self._knocks[host] = (sock, started)
        self._look(host, sock.connect_ex(where[1]))
        return True

    def settle(self):
        """Look at every knock under way once; record the answers of those that ended."""
        now = self._clock()
        for host, (sock, started) in list(self._knocks.items()):
            try:
                code = sock.connect_ex(self._where[host][1])
            except OSError as error:
                code = error.errno
            if code in _UNDER_WAY and now - started >= self._knock_seconds:
                code = errno.ETIMEDOUT
            self._look(host, code)

    def answer(self, host, since=None):
        """The answer of the host's last knock started at ``since`` or later: True (open), False (closed), or None
        (none yet)."""
        answer = self._answers.get(host)
        if answer is None or since is not None and answer[1] < since:
            return None
        return answer[0]

    def knocking(self):
        """Whether a knock is under way."""
        return bool(self._knocks)

    def close(self):
        """Close every knock under way."""
        for sock, dummy in self._knocks.values():
            sock.close()
        self._knocks.clear()

    def _place(self, host, door):
        if host not in self._where:
            try:
                found = self._resolve(door[0], door[1], 0, socket.SOCK_STREAM)
            except (OSError, UnicodeError):
                found = []
            self._where[host] = (found[0][0], found[0][4]) if found else None
        return self._where[host]

    def _look(self, host, code):
        """Record the knock's answer when ``code`` (connect_ex()'s) ends it."""
        if code in _UNDER_WAY:
            return
        sock, started = self._knocks.pop(host)
        sock.close()
        self._answers[host] = (code in (0, errno.EISCONN), started)
