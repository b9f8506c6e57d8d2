# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# This is a private module_util of fleetos.layering: its interface may change at any
# time and it is not meant to be used by other collections.

"""Write under a read-only mount (/sysroot on Fedora CoreOS and RHCOS) without remounting it for everyone.

Image-based hosts mount ``/sysroot`` read-only (a read-only bind of a writable file
system), and the deployments' origin files live under it. rpm-ostree writes there from
a mount namespace of its own in which ``/sysroot`` is writable; :func:`call_writable`
does the same for one function call: a child process unshares its mount namespace,
makes its mounts private (so nothing propagates back), clears the read-only flag of that
one bind mount and runs the function. Every other process keeps seeing the mount
read-only.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import os

from ansible_collections.fleetos.layering.plugins.module_utils._errors import FleetosError

CLONE_NEWNS = 0x00020000
MS_RDONLY = 1
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
# Per-mount flags a bind remount must repeat, or the kernel clears (or refuses to clear) them:
# statvfs flag -> mount flag.
_KEPT_FLAGS = ((2, 2), (4, 4), (8, 8), (1024, 1024), (2048, 2048), (4096, 1 << 21))


class MountError(FleetosError):
    """The mount could not be made writable for the call."""


def _unescape(field):
    """Mount points in mountinfo escape space, tab, newline and backslash as octal."""
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and len(field[i + 1:i + 4]) == 3 and field[i + 1:i + 4].isdigit():
            out.append(chr(int(field[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def mount_point(path, mountinfo_text):
    """The mount point (from /proc/self/mountinfo text) whose tree holds ``path``: the longest prefix."""
    real = os.path.realpath(path)
    best = None
    for line in mountinfo_text.splitlines():
        fields = line.split(" ")
        if len(fields) < 5:
            continue
        point = _unescape(fields[4])
        inside = real == point or point == "/" or real.startswith(point.rstrip("/") + "/")
        if inside and (best is None or len(point) > len(best)):
            best = point
    if best is None:
        raise MountError("no mount holds %s in the mount table" % real)
    return best


def is_read_only(path):
    return bool(os.statvfs(path).f_flag & MS_RDONLY)


def _libc():
    libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p]
    libc.unshare.argtypes = [ctypes.c_int]
    return libc


def _check(rc, what):
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, "%s: %s" % (what, os.strerror(err)))


def _make_writable(point):
    """In this process: a private mount namespace in which ``point`` is writable."""
    libc = _libc()
    _check(libc.unshare(CLONE_NEWNS), "unshare of the mount namespace")
    _check(libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "making the mounts private")
    kept = 0
    flags = os.statvfs(point).f_flag
    for stat_flag, mount_flag in _KEPT_FLAGS:
        if flags & stat_flag:
            kept |= mount_flag
    _check(libc.mount(None, point.encode(), None, MS_REMOUNT | MS_BIND | kept, None),
           "remounting %s writable" % point)


def call_writable(path, function, mountinfo="/proc/self/mountinfo"):
    """``function()`` with the mount holding ``path`` writable; -> its JSON-serialisable result.

    When the mount is writable already, ``function`` simply runs here. Otherwise it runs
    in a child process with a private mount namespace (needs root); a FleetosError it
    raises is raised again here with the same message, anything else becomes MountError.
    """
    if not is_read_only(path):
        return function()
    with open(mountinfo) as handle:
        point = mount_point(path, handle.read())
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        os.close(reader)
        try:
            try:
                _make_writable(point)
                outcome = {"result": function()}
            except FleetosError as exc:
                outcome = {"error": exc.msg, "details": exc.details, "fleetos": True}
            except OSError as exc:
                outcome = {"error": "cannot make %s writable in a private mount namespace (%s)"
                           % (point, exc.strerror or exc)}
            with os.fdopen(writer, "w") as handle:
                json.dump(outcome, handle)
        finally:
            os._exit(0)
    os.close(writer)
    with os.fdopen(reader) as handle:
        text = handle.read()
    os.waitpid(pid, 0)
    try:
        outcome = json.loads(text)
    except ValueError:
        raise MountError("writing under %s in a private mount namespace failed without a message" % point) from None
    if "error" in outcome:
        if outcome.get("fleetos"):
            raise FleetosError(outcome["error"], **outcome.get("details", {}))
        raise MountError(outcome["error"])
    return outcome["result"]
