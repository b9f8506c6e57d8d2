# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# This is a private plugin_util of fleetos.layering: its interface may change at any
# time and it is not meant to be used by other collections.

"""The rollout lease of a host: one rollout at a time, and how far it got.

A small JSON record on the host (default ``/var/lib/fleetos/rollout-lease.json``)
names the rollout that holds the host (its id, the controller process that runs it,
when it started, when it last renewed the lease, how long the lease lasts) and how
far that rollout got with the host (``phase``, ``target_digest``). The record is read,
decided on, and replaced only if it still holds what was read, under an exclusive
``flock`` of a sibling lock file on the host, atomically (a temporary file, sync,
rename; ``_host.Host.replace_file``), so two rollouts that take the lease at once see
one winner, and a killed controller leaves a whole record behind. The host is a
``_host.Host``: an action plugin's connection, so the host needs no Python.

A released lease (the rollout ended) is free for the next rollout, unless that rollout
changed the host and released it after the new one started (its plan is stale: refused);
an unreleased one of another rollout is refused unless the caller names that rollout to
break it. The
record a lease replaces is returned as ``previous``: a rerun learns from it that the
killed rollout rebooted the host and never verified it.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping

from ansible_collections.fleetos.layering.plugins.module_utils._errors import FleetosError, InvalidInputError, sentence
from ansible_collections.fleetos.layering.plugins.module_utils.host import _update_agents
from ansible_collections.fleetos.layering.plugins.module_utils.host._deployments import (
    BACKENDS,
    read_commands,
    read_host,
)
from ansible_collections.fleetos.layering.plugins.module_utils.host._host import (
    HostFileError,
    as_host,
    chain,
    read_file_argv,
)
from ansible_collections.fleetos.layering.plugins.plugin_utils.host._poll import PollTimeout, poll_until

DEFAULT_PATH = "/var/lib/fleetos/rollout-lease.json"
PHASES = ("planned", "rebooting", "activated", "failed", "done")
# A phase in which the host may have booted the target without being verified.
UNVERIFIED_PHASES = ("rebooting",)
VERSION = 1


# The options a rollout's lease as one mapping (os_rollout_lease's lease) gives: the lookup
# fleetos.layering.rollout_owner's rollout, owner and started_at, and the playbooks' ttl and wait.
LEASE_KEYS = ("rollout", "owner", "started_at", "ttl", "wait")

# The options of fleetos.layering.os_rollout_lease.
ARGUMENT_SPEC = dict(
    state=dict(type="str", choices=["acquired", "released", "read"], default="acquired"),
    lease=dict(type="dict"),
    rollout=dict(type="str"),
    owner=dict(type="dict"),
    started_at=dict(type="float"),
    ttl=dict(type="int", default=21600),
    phase=dict(type="str", choices=list(PHASES)),
    target_digest=dict(type="str"),
    break_lease=dict(type="str"),
    wait=dict(type="int", default=0),
    deployments=dict(type="str", choices=list(BACKENDS)),
    update_agents=dict(type="bool", default=False),
    release_unchanged=dict(type="dict", options=dict(
        plans=dict(type="str", required=True),
        resolutions=dict(type="raw"),
        lock=dict(type="raw"),
        pins=dict(type="raw"),
    )),
    path=dict(type="path", default=DEFAULT_PATH),
)


class LeaseError(FleetosError):
    """The lease file could not be read or written, or is not a lease."""


class LeaseHeldError(FleetosError):
    """Another rollout holds the lease; ``holder`` is its record."""

    def __init__(self, msg, holder):
        super().__init__(msg, holder=holder)
        self.holder = holder


def unfold(args):
    """The options ``args`` with those of their ``lease`` (LEASE_KEYS) where they give none of their own: -> a new
    mapping without lease. The one place a rollout's lease becomes the options of a lease task."""
    args = dict(args)
    lease = args.pop("lease", None)
    if lease is None:
        return args
    if not isinstance(lease, Mapping):
        raise InvalidInputError("lease must be a mapping of %s, got %s." % (", ".join(LEASE_KEYS), type(lease).__name__))
    for key in LEASE_KEYS:
        if args.get(key) is None and lease.get(key) is not None:
            args[key] = lease[key]
    return args


def check_arguments(params):
    """Refuse options that do not fit together, before anything is read or written."""
    if params["state"] != "read" and not params["rollout"]:
        raise InvalidInputError("rollout is required with state=%s." % params["state"])
    if params["state"] == "acquired":
        for name in ("owner", "started_at"):
            if params[name] is None:
                raise InvalidInputError("%s is required with state=acquired." % name)
    if params["ttl"] <= 0:
        raise InvalidInputError("ttl must be a positive number of seconds, got %d." % params["ttl"])
    if params["wait"] < 0:
        raise InvalidInputError("wait must not be negative, got %d." % params["wait"])
    if params.get("release_unchanged") and (params["state"] != "acquired" or not params["deployments"]):
        raise InvalidInputError("release_unchanged needs state=acquired and deployments: the host's plan is made from"
                                " the deployments read under the lease.")
    check_path(params["path"])


def check_path(path):
    """Refuse a lease path that is not absolute or has control characters."""
    if not isinstance(path, str) or not os.path.isabs(path) or any(ord(c) < 32 or ord(c) == 127 for c in path):
        raise InvalidInputError("path must be an absolute path without control characters.")
    return path


def _lock(path):
    return path + ".lock"


def _host_error(exc, path):
    """A HostFileError as the LeaseError of the lease file ``path`` or its lock, naming the option."""
    if exc.refused:
        what = "the lock file of path" if str(exc).startswith(_lock(path) + " ") else "path"
        return LeaseError("%s %s: nothing was changed." % (what, exc))
    return LeaseError("Failed to update the lease file %s: %s." % (path, str(exc).rstrip(".")))


def parse(data, path):
    """The lease record in ``data`` (the file's bytes), or None for no file; LeaseError when it does not load."""
    if data is None:
        return None
    try:
        record = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise LeaseError("The lease file %s is not JSON (%s): remove it if no rollout runs on the host."
                         % (path, str(exc).split(":", maxsplit=1)[0]))
    if not isinstance(record, dict) or not isinstance(record.get("rollout"), str):
        raise LeaseError("The lease file %s names no rollout: remove it if no rollout runs on the host." % path)
    return record


def read(host, path):
    """(the lease file's bytes, its record) on ``host``; (None, None) when there is none.

    The file and its lock must be regular files (a symlink, a directory or a device is refused)."""
    try:
        data = as_host(host).read_file(path, siblings=(_lock(path),))
    except HostFileError as exc:
        raise _host_error(exc, path) from None
    return data, parse(data, path)


def _encode(record):
    """The bytes of the lease file that holds ``record``."""
    return (json.dumps(record, sort_keys=True, indent=1) + "\n").encode("utf-8")


def _write(host, path, record, expected):
    """Replace the lease file with ``record`` if it still holds ``expected``; -> False when it changed meanwhile."""
    data = _encode(record)
    try:
        return as_host(host).replace_file(path, data, expected, mode=0o600, lock=_lock(path))
    except HostFileError as exc:
        raise _host_error(exc, path) from None


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


def acquire(host, path, rollout, owner, started_at, ttl, phase=None, target_digest=None, break_lease=None,
            wait=0, check_mode=False, now=time.time, sleep=time.sleep):
    """Take or renew the lease of ``rollout`` on ``host``; -> (changed, lease, previous).

    ``previous`` is the record of another rollout this lease replaced (released, or
    broken because ``break_lease`` names it), else None. A lease held by another
    rollout that started after this one is waited for up to ``wait`` seconds (that
    rollout stands back when it sees this one); any other holder raises
    LeaseHeldError at once. The record is read, decided on, and written only if it did not
    change meanwhile (under the lock, on the host): a rollout that lost that race reads again.
    """
    seen = {}

    def attempt():
        while True:
            data, current = read(host, path)
            seen["current"] = current
            ours = current is not None and current.get("rollout") == rollout
            stale_plan = current is not None and not ours and changed_since(current, started_at)
            free = (current is None or ours or break_lease == current.get("rollout")
                    or (current.get("released") and not stale_plan))
            if not free:
                break
            lease = dict(current) if ours else {
                "version": VERSION, "rollout": rollout, "owner": owner, "started_at": started_at,
                "acquired_at": now(), "phase": "planned", "target_digest": None,
            }
            lease.update(renewed_at=now(), ttl=ttl, released=False, released_at=None)
            if phase is not None:
                lease["phase"] = phase
            if target_digest is not None:
                lease["target_digest"] = target_digest
            if check_mode or _write(host, path, lease, data):
                return True, lease, None if ours else current
            # What was read ahead with the lease was read before that change: read it again.
            as_host(host).forget()
        if stale_plan:
            raise LeaseHeldError("The host was changed by %s after this rollout started: nothing was changed; "
                                 "run the rollout again to plan from the host's new state." % _describe(current, now()),
                                 current)
        if not _younger(current, started_at, rollout):
            raise _held(current, now())
        # A younger rollout stands back when it sees this one: read again in a second.
        as_host(host).forget()
        return None

    try:
        return poll_until(attempt, max(wait, 0), 1, sleep, now)
    except PollTimeout:
        raise _held(seen["current"], now())


def _held(current, at):
    return LeaseHeldError("The host is leased by %s: nothing was changed; name that rollout in break_lease if it is"
                          " gone." % _describe(current, at), current)


def release(host, path, rollout, phase=None, check_mode=False, now=time.time, written=None):
    """Release the lease of ``rollout`` on ``host`` (a no-op for another rollout's); -> (changed, lease).

    ``written``: the record this task wrote last, taken as what the file holds (the write compares it), so that
    it is not read again first; should the file have changed meanwhile, it is read."""
    while True:
        if written is not None:
            data, current, written = _encode(written), written, None
        else:
            data, current = read(host, path)
        if current is None or current.get("rollout") != rollout or current.get("released"):
            return False, current
        lease = dict(current, released=True, released_at=now())
        if phase is not None:
            lease["phase"] = phase
        if check_mode or _write(host, path, lease, data):
            return True, lease


def task_result(host, params, check_mode):
    """The result of an os_rollout_lease task with ``params`` (its options, defaults filled) on ``host``.

    A refused lease fails with the holder in ``holder`` (and, with ``deployments``, the host's
    deployments all the same); any other failure with ``acquired`` false and nothing else.
    """
    refused = None
    try:
        check_arguments(params)
        if params["deployments"] and params["state"] != "released":
            # One host command for the reads of the contact: the lease file, then the deployments and the update
            # agents. They count as read under the lease when the lease is then written over what was read here
            # (the write compares it); a lease that changed meanwhile is read again, and so are they.
            as_host(host).prefetch(chain(
                [(read_file_argv(params["path"], (_lock(params["path"]),)), None)],
                read_commands(params["deployments"], update_agents=params.get("update_agents"))))
        if params["state"] == "acquired":
            try:
                changed, lease, previous = acquire(
                    host, params["path"], params["rollout"], params["owner"], params["started_at"], params["ttl"],
                    phase=params["phase"], target_digest=params["target_digest"], break_lease=params["break_lease"],
                    wait=params["wait"], check_mode=check_mode)
            except LeaseHeldError as exc:
                refused, changed, lease, previous = exc, False, exc.holder, None
        elif params["state"] == "read":
            changed, (_data, lease), previous = False, read(host, params["path"]), None
        else:
            changed, lease = release(host, params["path"], params["rollout"], phase=params["phase"],
                                     check_mode=check_mode)
            previous = None
    except FleetosError as exc:
        return dict(exc.details, failed=True, msg=sentence(exc.msg), acquired=False, holder=None, lease=None,
                    previous=None, deployments=None)
    acquired = refused is None and bool(lease) and lease.get("rollout") == params["rollout"] and not lease.get("released")
    result = dict(changed=changed, acquired=acquired, lease=lease, previous=previous,
                  holder=refused.holder if refused else None, deployments=None)
    if params["deployments"]:
        try:
            result["deployments"] = read_host(host, params["deployments"])
            if params.get("update_agents"):
                result["deployments"]["update_agents"] = _update_agents.read(as_host(host))
        except FleetosError as exc:
            return dict(result, failed=True, msg=sentence(exc.msg), **exc.details)
    if refused is not None:
        result.update(failed=True, msg=refused.msg)
    return result
