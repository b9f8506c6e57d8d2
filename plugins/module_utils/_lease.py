# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# This is a private module_util of fleetos.layering: its interface may change at any
# time and it is not meant to be used by other collections.

"""The rollout lease of a host: one rollout at a time, and how far it got.

A small JSON record on the host (default ``/var/lib/fleetos/rollout-lease.json``)
names the rollout that holds the host (its id, the controller process that runs it,
when it started, when it last renewed the lease, how long the lease lasts) and how
far that rollout got with the host (``phase``, ``target_digest``). The record is read
and replaced under an exclusive ``flock`` of a sibling lock file, and written
atomically (a temporary file, fsync, rename), so two rollouts that take the lease at
once see one winner, and a killed controller leaves a whole record behind.

A released lease (the rollout ended) is free for the next rollout, unless that rollout
changed the host and released it after the new one started (its plan is stale: refused);
an unreleased one of another rollout is refused unless the caller names that rollout to
break it. The
record a lease replaces is returned as ``previous``: a rerun learns from it that the
killed rollout rebooted the host and never verified it.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import stat
import time

from ansible_collections.fleetos.layering.plugins.module_utils._errors import FleetosError, InvalidInputError
from ansible_collections.fleetos.layering.plugins.module_utils._origin import _fsync_dir, _unlink_quietly, _write_all

DEFAULT_PATH = "/var/lib/fleetos/rollout-lease.json"
PHASES = ("planned", "rebooting", "activated", "failed", "done")
# A phase in which the host may have booted the target without being verified.
UNVERIFIED_PHASES = ("rebooting",)
VERSION = 1
_OPEN_FLAGS = os.O_NOFOLLOW | os.O_CLOEXEC


class LeaseError(FleetosError):
    """The lease file could not be read or written, or is not a lease."""


class LeaseHeldError(FleetosError):
    """Another rollout holds the lease; ``holder`` is its record."""

    def __init__(self, msg, holder):
        super().__init__(msg, holder=holder)
        self.holder = holder


def check_path(path):
    """Refuse a lease path that is not absolute or has control characters."""
    if not isinstance(path, str) or not os.path.isabs(path) or any(ord(c) < 32 or ord(c) == 127 for c in path):
        raise InvalidInputError("path must be an absolute path without control characters.")
    return path


def _regular_or_missing(path, what):
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode):
        raise LeaseError("%s %s is not a regular file: nothing was changed." % (what, path))
    return st


def read(path):
    """The lease record at ``path``, or None when there is none; LeaseError when it does not load."""
    if _regular_or_missing(path, "path") is None:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | _OPEN_FLAGS)
        with os.fdopen(fd, "rb") as handle:
            data = handle.read(1024 * 1024)
    except OSError as exc:
        raise LeaseError("Failed to read the lease file %s: %s." % (path, exc.strerror or exc))
    try:
        record = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise LeaseError("The lease file %s is not JSON (%s): remove it if no rollout runs on the host."
                         % (path, str(exc).split(":", maxsplit=1)[0]))
    if not isinstance(record, dict) or not isinstance(record.get("rollout"), str):
        raise LeaseError("The lease file %s names no rollout: remove it if no rollout runs on the host." % path)
    return record


def _write(path, record):
    directory = os.path.dirname(path)
    tmp = os.path.join(directory, ".%s.%d.tmp" % (os.path.basename(path), os.getpid()))
    data = (json.dumps(record, sort_keys=True, indent=1) + "\n").encode("utf-8")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _OPEN_FLAGS, 0o600)
        try:
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        _fsync_dir(directory)
    except OSError as exc:
        _unlink_quietly(tmp)
        raise LeaseError("Failed to write the lease file %s: %s." % (path, exc.strerror or exc))


class _Locked:
    """An exclusive flock on ``<path>.lock`` (created 0600, never through a symlink)."""

    def __init__(self, path, create):
        self.path = path + ".lock"
        self.create = create
        self.fd = None

    def __enter__(self):
        # The lease file first: a lease path that names a device or a directory creates nothing.
        _regular_or_missing(self.path[:-len(".lock")], "path")
        directory = os.path.dirname(self.path)
        if self.create and not os.path.isdir(directory):
            try:
                os.makedirs(directory, mode=0o700)
            except OSError as exc:
                if exc.errno != errno.EEXIST:
                    raise LeaseError("Failed to create %s: %s." % (directory, exc.strerror or exc))
        _regular_or_missing(self.path, "the lock file of path")
        try:
            self.fd = os.open(self.path, os.O_RDWR | _OPEN_FLAGS | (os.O_CREAT if self.create else 0), 0o600)
        except FileNotFoundError:
            return self
        except OSError as exc:
            raise LeaseError("Failed to open %s: %s." % (self.path, exc.strerror or exc))
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc_info):
        if self.fd is not None:
            os.close(self.fd)   # also drops the flock
        return False


def expired(record, now):
    """Whether the lease ``record`` was last renewed more than its TTL ago."""
    try:
        return float(record.get("renewed_at")) + float(record.get("ttl")) < now
    except (TypeError, ValueError):
        return True


def changed_since(record, started_at):
    """Whether the rollout of ``record`` changed the host (a phase past ``planned``) and released
    it after ``started_at``: a plan made before then is stale."""
    if not record.get("released") or record.get("phase") in (None, "planned"):
        return False
    try:
        return float(record.get("released_at")) > float(started_at)
    except (TypeError, ValueError):
        return False


def _describe(record, now):
    owner = record.get("owner") if isinstance(record.get("owner"), dict) else {}
    who = "%s@%s pid %s" % (owner.get("user") or "?", owner.get("controller") or "?", owner.get("pid") or "?")
    age = now - float(record.get("started_at") or now)
    state = ("released" if record.get("released") else "expired" if expired(record, now)
             else "phase %s" % record.get("phase"))
    return "rollout %s (%s, started %d min ago, %s)" % (record.get("rollout"), who, max(age, 0) // 60, state)


def _younger(record, started_at, rollout):
    """Whether the rollout holding ``record`` started after (``started_at``, ``rollout``)."""
    try:
        theirs = (float(record.get("started_at")), str(record.get("rollout")))
    except (TypeError, ValueError):
        return False
    return theirs > (float(started_at), rollout)


def acquire(path, rollout, owner, started_at, ttl, phase=None, target_digest=None, break_lease=None,
            wait=0, check_mode=False, now=time.time, sleep=time.sleep):
    """Take or renew the lease of ``rollout``; -> (changed, lease, previous).

    ``previous`` is the record of another rollout this lease replaced (released, or
    broken because ``break_lease`` names it), else None. A lease held by another
    rollout that started after this one is waited for up to ``wait`` seconds (that
    rollout stands back when it sees this one); any other holder raises
    LeaseHeldError at once.
    """
    deadline = now() + max(wait, 0)
    while True:
        with _Locked(path, create=not check_mode):
            current = read(path)
            ours = current is not None and current.get("rollout") == rollout
            stale_plan = current is not None and not ours and changed_since(current, started_at)
            free = (current is None or ours or break_lease == current.get("rollout")
                    or (current.get("released") and not stale_plan))
            if free:
                lease = dict(current) if ours else {
                    "version": VERSION, "rollout": rollout, "owner": owner, "started_at": started_at,
                    "acquired_at": now(), "phase": "planned", "target_digest": None,
                }
                lease.update(renewed_at=now(), ttl=ttl, released=False, released_at=None)
                if phase is not None:
                    lease["phase"] = phase
                if target_digest is not None:
                    lease["target_digest"] = target_digest
                if not check_mode:
                    _write(path, lease)
                return True, lease, None if ours else current
            if stale_plan:
                raise LeaseHeldError("The host was changed by %s after this rollout started: nothing was changed; "
                                     "run the rollout again to plan from the host's new state." % _describe(current, now()),
                                     current)
            if not (_younger(current, started_at, rollout) and now() < deadline):
                raise LeaseHeldError("The host is leased by %s: nothing was changed; name that rollout in "
                                     "break_lease if it is gone." % _describe(current, now()), current)
        sleep(1)


def release(path, rollout, phase=None, check_mode=False, now=time.time):
    """Release the lease of ``rollout`` (a no-op for another rollout's); -> (changed, lease)."""
    with _Locked(path, create=False):
        current = read(path)
        if current is None or current.get("rollout") != rollout or current.get("released"):
            return False, current
        lease = dict(current, released=True, released_at=now())
        if phase is not None:
            lease["phase"] = phase
        if not check_mode:
            _write(path, lease)
        return True, lease
