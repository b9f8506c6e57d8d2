# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# This is a private plugin_util of fleetos.layering: its interface may change at any
# time and it is not meant to be used by other collections.

"""A bound on a host command run over an action plugin's connection, on the controller's side.

A connection that stops answering in the middle of a command (a host that hangs without going down:
its link, or its sshd, stops) leaves the connection plugin waiting for output that never comes: ssh
bounds the connect, not a command. :func:`bounded` runs the command and, once ``seconds`` have passed,
ends the processes the command started on the controller (the ssh client, a child of this worker
process): the connection plugin then returns, and :class:`CommandTimeout` says the command did not
finish. The connection is reset, so that the next command does not go through the stalled one (an ssh
control master). A connection plugin without a process of its own (paramiko) is not bounded here.

The command's own bound on the host (coreutils ``timeout``) is the caller's: this one is for the
connection.
"""

from __future__ import annotations

import os
import signal
import threading

from ansible.errors import AnsibleConnectionFailure

from ansible_collections.fleetos.layering.plugins.plugin_utils.host._reboot import reset


class CommandTimeout(AnsibleConnectionFailure):
    """A host command did not finish within its bound; the connection was cut."""

    def __init__(self, seconds, what="the host command"):
        self.seconds = seconds
        self.what = what
        super().__init__("%s did not finish within %s s" % (what, seconds_text(seconds)))


def seconds_text(seconds):
    """``seconds`` as a message shows them: 30, 2.5."""
    return ("%d" % seconds) if float(seconds).is_integer() else ("%s" % seconds)


def children(pid=None, proc="/proc"):
    """The ids of the processes whose parent is ``pid`` (this process), read from ``proc``: the kernel's list of
    each thread's children (``task/TID/children``, one small read per thread) where it keeps one, else a look at
    every process's parent (a scan that grows with the processes of the machine)."""
    pid = os.getpid() if pid is None else pid
    try:
        return _listed_children(pid, proc)
    except OSError:
        return _scanned_children(pid, proc)


def _listed_children(pid, proc):
    found = set()
    tasks = os.path.join(proc, str(pid), "task")
    for tid in os.listdir(tasks):
        with open(os.path.join(tasks, tid, "children"), "rb") as handle:
            found.update(int(word) for word in handle.read().split())
    return found


def _scanned_children(pid, proc):
    found = set()
    try:
        names = os.listdir(proc)
    except OSError:
        return found
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(os.path.join(proc, name, "stat"), "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may hold spaces and parentheses, so the fields after its last ')'.
        fields = stat[stat.rfind(b")") + 2:].split()
        if len(fields) > 1 and fields[1] == str(pid).encode():
            found.add(int(name))
    return found


def _end(pids):
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            pass


def bounded(call, seconds, connection, what="the host command", listing=children, end=_end, timer=threading.Timer):
    """``call()`` (a command over ``connection``), ended after ``seconds``: -> its result; CommandTimeout when it
    did not finish in time. ``seconds`` None or 0: no bound."""
    if not seconds:
        return call()
    before = listing()
    fired = threading.Event()

    def expire():
        fired.set()
        end(sorted(listing() - before))

    watch = timer(seconds, expire)
    watch.daemon = True
    watch.start()
    try:
        result = call()
    except AnsibleConnectionFailure:
        if not fired.is_set():
            raise
        result = None
    finally:
        watch.cancel()
    if fired.is_set():
        reset(connection)
        raise CommandTimeout(seconds, what)
    return result
