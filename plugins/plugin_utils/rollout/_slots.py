# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# This is a private plugin_util of fleetos.layering: its interface may change at any
# time and it is not meant to be used by other collections.

"""The rules of an activation's budget slots: who holds a slot, who failed, when to stop.

A *book* is a JSON-serialisable mapping; plugin_utils/rollout/_book.py keeps it in a file on the
controller for one run, shared by every fork of the run, and its class ``Book`` is what the
action plugin and the strategy hold. A host activates as soon as its pool has a free slot: a
slot freed is a slot taken (no waves). The functions below are pure: they take the book's
mapping and ``now`` and change the mapping; ``Book``'s methods call them, and nothing else does.

Host states: ``queued`` (not asked yet), ``waiting`` (asked, no free slot yet),
``holding`` (has a slot), ``done`` (released its slot), ``lost`` (finished but keeps its
slot: it went down and did not come back, or its rollback failed), ``not_activated``
(never got a slot: the run stopped, FleetLock gave none, every slot of its pool is
held by lost hosts, or its pool's maintenance window was closed or about to close).

Each host's activation record (``os_activate_result``) is built here, in one place, by
``new_record``, ``record_event`` and ``record_failure``.
"""

from __future__ import annotations

from datetime import datetime, timezone

from ansible_collections.fleetos.layering.plugins.module_utils._errors import one_line
from ansible_collections.fleetos.layering.plugins.module_utils.host._deployments import deployment_digest, status_digest
from ansible_collections.fleetos.layering.plugins.plugin_utils.rollout._windows import schedule

VERSION = 2
STATES = ("queued", "waiting", "holding", "done", "lost", "not_activated")
# The phases of an activation, as far as it got: a failure is handled by the phase.
PHASES = ("prepare", "reboot", "verify", "health", "post", "rollback")
EVENTS = ("reboot_start", "reboot_end", "booted", "verified", "rollback_start", "rolled_back")
MODES = ("finalize", "rollback", "verify")
ERROR_MAX = 300
# Seconds a host that asks for a slot lets the hosts before it in its pool's rollout order that go
# first arrive: the forks reach the book a little apart, and a host the rollout puts first (a host a
# killed run rebooted, which still holds its FleetLock slot) must not lose its slot to one that
# happened to ask first. Such a host that never asks delays the others this long.
SETTLE = 10.0
# A host's wait for its new boot runs, off the forks until then, from this share of the shortest boot the book has
# seen after its reboot command (park_boot()): boots vary, and a host seen back late holds its slot longer.
WAKE_SHARE = 0.8
# With the strategy fleetos.layering.slots and fewer forks than the budget slots need (it sets REPEATS_VAR for the
# task, and runs the task again while the host is parked): the wait for a new boot lasts BOOT_SLICE seconds at
# most, then the host is parked again for a REPARK_SHARE of the time since its reboot command, REPARK_MIN to
# REPARK_MAX seconds. A host with a long boot then holds a fork about half of the time after its wake_at.
REPEATS_VAR = "__fleetos_slots_repeats"
BOOT_SLICE = 6.0
REPARK_SHARE = 0.25
REPARK_MIN = 2.0
REPARK_MAX = 6.0


class SlotError(Exception):
    """A request the book cannot take: names the field or the host and the cause."""


def _int(value, name, minimum):
    if isinstance(value, bool):
        raise SlotError("%s must be a whole number, not %r" % (name, value))
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise SlotError("%s must be a whole number, not %r" % (name, value))
    if number < minimum:
        raise SlotError("%s must be at least %d, not %r" % (name, minimum, value))
    return number


def new_book(hosts, budgets, max_failures, canary=0, now=0.0, settle=SETTLE):
    """A book for ``hosts`` (``[{host, pool}]`` in rollout order) and ``budgets`` (pool -> slots).

    The first ``canary`` hosts are the canary batch. Once ``max_failures`` activations
    failed, no new slot is granted. A host waits up to ``settle`` seconds for the hosts before
    it in its pool's order that go ``first`` (a host a killed run rebooted, which may still
    hold its FleetLock slot) to ask too; the others are served as they ask.

    A host mapping may carry its pool's maintenance windows: ``windows`` (``fleetos_rollout_windows``),
    ``windows_timezone`` and ``activation_seconds`` (the time one activation is expected to take,
    checked against the time left in the window); every host of a pool must carry the same.
    """
    if not isinstance(hosts, (list, tuple)):
        raise SlotError("hosts must be a list of {host, pool} mappings, not %r" % (hosts,))
    if not isinstance(budgets, dict):
        raise SlotError("budgets must be a mapping of pool to a count of slots, not %r" % (budgets,))
    book = {
        "version": VERSION, "opened_at": float(now), "order": [], "pool_of": {}, "hosts": {}, "pools": {},
        "max_failures": _int(max_failures, "max_failures", 1), "canary": [], "canary_verified": False, "canary_closed": False,
        "stop": None, "blocked": {}, "grants": [], "records": {}, "activations": {}, "failed": [],
        "settle": float(settle),
    }
    for item in hosts:
        if not isinstance(item, dict) or not item.get("host") or item.get("pool") in (None, ""):
            raise SlotError("every host must be a mapping with host and pool, not %r" % (item,))
        host, pool = str(item["host"]), str(item["pool"])
        if host in book["hosts"]:
            raise SlotError("host %s is given twice" % host)
        if pool not in budgets:
            raise SlotError("pool %s of host %s has no budget" % (pool, host))
        book["pools"].setdefault(pool, {"budget": _int(budgets[pool], "the budget of pool %s" % pool, 0)})
        _pool_windows(book["pools"][pool], pool, host, item)
        book["order"].append(host)
        book["pool_of"][host] = pool
        book["hosts"][host] = {"pool": pool, "state": "queued", "locked": False, "first": bool(item.get("first")),
                               "asked_at": None, "granted_at": None, "released_at": None}
    book["canary"] = book["order"][:_int(canary or 0, "canary", 0)]
    return book


def _pool_windows(pool_entry, pool, host, item):
    """Keep the maintenance windows a host carries as its pool's; a host of the pool that carries
    others is an error."""
    # Unset, it arrives as None, or as "" or "None" from an ansible-core before 2.19 that renders templates as text.
    seconds = item.get("activation_seconds")
    windows = {"windows": item.get("windows") or [], "timezone": item.get("windows_timezone") or "UTC",
               "activation_seconds": None if seconds in (None, "", "None") else seconds}
    if windows["activation_seconds"] is not None:
        windows["activation_seconds"] = _int(windows["activation_seconds"], "activation_seconds of host %s" % host, 0)
    try:
        schedule(windows["windows"], windows["timezone"])
    except ValueError as exc:
        raise SlotError("host %s: %s" % (host, exc))
    known = pool_entry.setdefault("windows", dict(windows, host=host))
    if dict(known, host=host) != dict(windows, host=host):
        raise SlotError("the hosts %s and %s of pool %s have different maintenance windows (fleetos_rollout_windows,"
                        " fleetos_rollout_windows_timezone, fleetos_rollout_windows_activation_seconds): set them for"
                        " the pool's group" % (known["host"], host, pool))


def window_problem(book, pool, now, default_seconds):
    """Why a host of ``pool`` may not start an activation at ``now`` for its maintenance windows, or
    None when it may (no windows, or open long enough).

    The activation is expected to take the pool's ``activation_seconds`` when set; else the longest
    activation of the pool this run measured (slot granted to slot freed), or ``default_seconds``
    (the reboot timeout) before the first one ended."""
    windows = book["pools"][pool].get("windows") or {}
    if not windows.get("windows"):
        return None
    needed = windows.get("activation_seconds")
    if needed is None:
        # The pool's hosts that were granted a slot and freed it (a look at this pool's hosts only).
        entries = [book["hosts"][h] for h in members(book, pool)]
        measured = [e["released_at"] - e["granted_at"] for e in entries
                    if e["state"] == "done" and e["released_at"] is not None]
        needed = max(measured) if measured else default_seconds
    sched = schedule(windows["windows"], windows["timezone"])
    moment = datetime.fromtimestamp(float(now), timezone.utc)
    ok, reason = sched.may_start(moment, needed or 0)
    if ok:
        return None
    # The pool's next window: after the one open now (too short for an activation), else the next opening.
    end, following = sched.open_at(moment), sched.next_window(moment)
    closed = book.setdefault("windows_closed", {}).setdefault(pool, {"reason": reason, "hosts": []})
    closed.update(open=end is not None, closes_at=None if end is None else end.isoformat(),
                  next_open=following.isoformat(), next_open_local=sched.local(following), zone=sched.zone_name)
    return "the maintenance window of pool %s: %s" % (pool, reason)


def host_entry(book, host):
    """The book's entry of ``host``: an error for a host not of the book."""
    try:
        return book["hosts"][host]
    except KeyError:
        raise SlotError("host %s is not one of the hosts to activate" % host)


def members(book, pool):
    """The hosts of ``pool`` in rollout order. A book's pools and order do not change: the list is worked out once
    per book as read (kept under ``_members``, which is not written) from the order and each host's pool, so that a
    look at one pool does not go through every host of the book, nor read their entries."""
    index = book.get("_members")
    if index is None:
        index = {}
        pool_of = book["pool_of"]
        for host in book["order"]:
            index.setdefault(pool_of[host], []).append(host)
        book["_members"] = index
    return index.get(pool, [])


def _pool_hosts(book, pool, states):
    return [h for h in members(book, pool) if book["hosts"][h]["state"] in states]


def _give_up(book, host, reason, now):
    entry = book["hosts"][host]
    entry.update(state="not_activated", released_at=float(now), reason=reason)
    return "refused", reason


def try_acquire(book, host, now, take=True, activation_seconds=0):
    """Ask for a slot of the host's pool: -> (answer, reason).

    ``answer`` is ``granted`` (the host holds a slot now, or held it already: a slot
    is recursive), ``wait`` (no free slot yet: ask again) or ``refused`` (no slot will
    come: the run stopped, every slot of the pool is held by hosts that did not come
    back, or the pool's maintenance window is closed or closes before an activation
    would end; ``activation_seconds``: see ``window_problem``). A host that goes first
    only verifies a boot that happened already: no window holds it. Free slots go to the
    waiting hosts of the pool in rollout order. With ``take`` false, the host is counted
    as waiting but not granted the slot it would get: the answer is then ``free`` instead
    of ``granted``.
    """
    entry = host_entry(book, host)
    state = entry["state"]
    if state == "holding":
        return "granted", None
    if state in ("done", "lost", "not_activated"):
        return "refused", entry.get("reason") or "host %s was activated already in this run" % host
    if _check_stop(book):
        return _give_up(book, host, book["stop"], now)
    if book["canary"] and host not in book["canary"] and not book.get("canary_closed"):
        # The gate after the canary batch (stop on a failure, stop_after_canary, the pause) did not run: a
        # play that a limit emptied, a task skipped. Without it the rest is not activated.
        return _give_up(book, host, "the canary batch (%s) was not closed: no host after it is activated without the"
                        " canary gate" % ", ".join(book["canary"]), now)
    pool = entry["pool"]
    budget = book["pools"][pool]["budget"]
    lost = _pool_hosts(book, pool, ("lost",))
    if budget == 0 or len(lost) >= budget:
        reason = ("pool %s has a budget of 0 slots" % pool if budget == 0 else
                  "no free budget slot in pool %s: %d slot(s) held by hosts that did not come back (%s)"
                  % (pool, len(lost), ", ".join(lost)))
        book["blocked"][pool] = reason
        return _give_up(book, host, reason, now)
    closed = None if entry.get("first") else window_problem(book, pool, now, activation_seconds)
    if closed:
        book["windows_closed"][pool]["hosts"].append(host)
        return _give_up(book, host, closed, now)
    if state == "queued":
        entry.update(state="waiting", asked_at=float(now))
    if _first_ahead(book, host) and float(now) - entry["asked_at"] < book.get("settle", SETTLE):
        return "wait", None
    free = budget - len(_pool_hosts(book, pool, ("holding", "lost")))
    if free > 0 and host in _pool_hosts(book, pool, ("waiting",))[:free]:
        if not take:
            return "free", None
        entry.update(state="holding", granted_at=float(now))
        book["grants"].append(host)
        return "granted", None
    return "wait", None


def _first_ahead(book, host):
    """The hosts before ``host`` in its pool's rollout order that go first and have not asked for a slot yet."""
    pool = members(book, book["hosts"][host]["pool"])
    return [h for h in pool[:pool.index(host)] if book["hosts"][h].get("first") and book["hosts"][h]["state"] == "queued"]


def free_slots(book, pool):
    """The slots of ``pool`` no host holds (lost hosts keep theirs)."""
    return book["pools"][pool]["budget"] - len(_pool_hosts(book, pool, ("holding", "lost")))


def park_reason(book, host, running):
    """Why a host about to ask for a slot should wait off the forks, or None to let it ask.

    The strategy ``fleetos.layering.slots`` parks such a host (it holds no fork) while every
    slot of its pool is taken and one of its holders is among ``running`` (the hosts still
    at work in the play): that holder frees a slot. Otherwise the host asks, and the answer
    (a slot, a refusal, or a wait up to the slot timeout) is the action's, as without parking.
    A host that goes first is never parked: the holder may be waiting for the FleetLock slot it
    holds. A host is parked, too, while a host before it in its pool's order that goes first is at work
    and has not asked yet, however long it takes to come to its request (the book's ``settle`` is the
    bound without parking). Reads the book; changes nothing.
    """
    entry = book["hosts"].get(host)
    if entry is None or entry["state"] not in ("queued", "waiting") or book["stop"] or entry.get("first"):
        return None
    pool = entry["pool"]
    if _asks_at_once(book, pool):
        return None
    ahead = [h for h in _first_ahead(book, host) if h in running]
    if ahead:
        return "%s of pool %s, which a killed run left rebooted or holding a FleetLock slot, goes first" % (
            ", ".join(ahead), pool)
    if not _held_by_running(book, pool, running):
        return None
    return "every budget slot of pool %s is held (%s)" % (pool, ", ".join(holders(book, pool)))


def _asks_at_once(book, pool):
    # A stopped run, a closed window (the host is told so at once) or max_failures reached: no host of the pool waits.
    return bool(book["stop"]) or pool in (book.get("windows_closed") or {}) or _failure_count(book) >= book["max_failures"]


def _held_by_running(book, pool, running):
    return free_slots(book, pool) <= 0 and any(h in running for h in _pool_hosts(book, pool, ("holding",)))


def pool_parks(book, pool, running):
    """Whether park_reason() parks every host of ``pool`` that is about to ask and does not go first: its
    slots are all held and a holder is among ``running``. One look for a whole pool: the strategy asks it
    once per pool, not once per waiting host (each of those looks reads the whole book)."""
    return not _asks_at_once(book, pool) and _held_by_running(book, pool, running)


def lease_can_wait(book, host):
    """Whether a host waiting for a slot may write its rollout lease later: a whole round of its
    pool (the pool's budget of hosts) is ahead of it, in rollout order, with no slot yet.

    The hosts granted first then write theirs without these writes competing for the hosts'
    and the controller's CPU; a host writes its own once the round ahead of it got its slots,
    while that round reboots.
    """
    entry = host_entry(book, host)
    pool = entry["pool"]
    hosts = members(book, pool)
    ahead = [h for h in hosts[:hosts.index(host)] if book["hosts"][h]["state"] in ("queued", "waiting")]
    return len(ahead) >= book["pools"][pool]["budget"] > 0


def give_back(book, host, reason, now, stop=None):
    """A host that got its slot but will not activate (FleetLock gave none): free it."""
    entry = host_entry(book, host)
    if stop and not book["stop"]:
        book["stop"] = stop
    entry.update(state="not_activated", released_at=float(now), reason=reason)
    if host in book["grants"]:
        book["grants"].remove(host)


def decline(book, host, reason, now):
    """A host that will not ask for a slot because it cannot be activated as asked (a soft reboot required, and
    not possible): not activated, for ``reason``, and no failure (nothing was done to it)."""
    entry = host_entry(book, host)
    if entry["state"] not in ("queued", "waiting"):
        raise SlotError("host %s cannot be declined in state %s" % (host, entry["state"]))
    entry.update(state="not_activated", released_at=float(now), reason=reason)
    book.setdefault("declined", {})[host] = reason


def drop(book, host, reason, now, failed=False):
    """A host of the book that will not ask for a slot: its stage left nothing to activate, or it
    failed (``failed``: counted toward max_failures, so the run stops as for a failed activation).
    A host that asked already is left as it is."""
    entry = host_entry(book, host)
    if entry["state"] != "queued":
        return
    entry.update(state="not_activated", released_at=float(now), reason=reason)
    if failed and host not in book.setdefault("stage_failed", []):
        book["stage_failed"].append(host)
    _check_stop(book)


def holders(book, pool):
    """The hosts that hold a slot of ``pool``, lost ones included, in rollout order."""
    return _pool_hosts(book, pool, ("holding", "lost"))


# --- the activation record ------------------------------------------------------------

def new_record(book, host, mode, target_digest, old_digest=None, fleetlock=False):
    """Start the record of a host that was granted a slot (phase prepare)."""
    entry = host_entry(book, host)
    if mode not in MODES:
        raise SlotError("mode must be one of %s, not %r" % (", ".join(MODES), mode))
    record = {
        "host": host, "pool": entry["pool"], "mode": mode, "status": "started", "phase": "prepare",
        "holds_slot": True, "target_digest": target_digest, "old_digest": old_digest or None,
        "booted_digest": None, "granted_at": entry["granted_at"], "activate_start": entry["granted_at"],
        "reboot_start": None, "reboot_end": None, "verified_at": None, "released_at": None,
        "rolled_back": False, "rollback_start": None, "rollback_end": None,
        "fleetlock": bool(fleetlock), "fleetlock_held": False, "failed": False, "reason": None,
        "activation": None, "activation_reason": None,
    }
    book["records"][host] = record
    return record


def record_activation(book, host, kind, reason=None):
    """How the host reboots into its target (``kind``: ``full`` or ``soft``), and why not soft (``reason``)."""
    if kind not in ("full", "soft"):
        raise SlotError("kind must be full or soft, not %r" % (kind,))
    record = record_of(book, host)
    record.update(activation=kind, activation_reason=reason)
    return record


def record_of(book, host):
    try:
        return book["records"][host]
    except KeyError:
        raise SlotError("host %s holds no slot: take one first" % host)


def prepare_problem(record, status, backend):
    """Before the reboot, what is wrong with the host's deployments (os_info ``status``) for the
    record's mode, as a sentence, or None. finalize: the target is staged. rollback: the previous
    deployment is the target, and nothing is staged unless the ``backend`` (plugin_utils/host/_backends.py)
    discards a staged deployment in its rollback (bootc; rpm-ostree's is cancelled first). verify:
    nothing is checked."""
    host, target = record["host"], record["target_digest"]
    staged = status.get("staged")
    if record["mode"] == "finalize" and deployment_digest(staged) != target:
        return "%s has no staged deployment at %s (staged: %s)" % (host, target, deployment_digest(staged) or "nothing")
    if record["mode"] == "rollback" and (
            (staged is not None and not backend.rollback_discards_staged)
            or status_digest(status, "rollback") != target):
        return "%s has no previous deployment at %s or still has a staged one" % (host, target)
    return None


def record_event(book, host, event, now, status=None):
    """Record ``event`` of the host's activation; ``status`` is an os_info result where one is read.

    reboot_start: the reboot begins (the booted digest of ``status``, read before it, is the
    previous one); reboot_end: the host is back (mode verify: nothing was rebooted);
    booted: ``status`` read after the reboot gives the booted digest, and the phase moves to
    health only when it is the target; verified: healthy, the slot is to be freed;
    rollback_start / rolled_back: the rollback of a failed host (``status`` read after it).
    """
    record = record_of(book, host)
    if event not in EVENTS:
        raise SlotError("event must be one of %s, not %r" % (", ".join(EVENTS), event))
    now = float(now)
    if event == "reboot_start":
        record.update(phase="reboot", reboot_start=now)
        if status is not None:
            record["old_digest"] = status_digest(status, "booted")
    elif event == "reboot_end":
        record.update(phase="verify", reboot_end=None if record["mode"] == "verify" else now)
        if record["reboot_end"] is not None and record.get("reboot_start") is not None:
            took = now - record["reboot_start"]
            book["shortest_boot"] = min(took, book.get("shortest_boot") or took)
    elif event == "booted":
        record["booted_digest"] = status_digest(status, "booted")
        if record["mode"] == "verify":
            # Booted on the target by a killed rollout: the one to roll back to is the previous one.
            record["old_digest"] = status_digest(status, "rollback")
        record["phase"] = "health" if record["booted_digest"] == record["target_digest"] else "verify"
    elif event == "verified":
        record.update(phase="post", status="activated", holds_slot=False, verified_at=now)
    elif event == "rollback_start":
        record.update(phase="rollback", rollback_start=now)
    else:
        booted = status_digest(status, "booted")
        record.update(status="failed", holds_slot=False, rolled_back=True, rollback_end=now, booted_digest=booted,
                      reason="%s; rolled back to %s" % (record.get("reason") or "failed", record["old_digest"]))
    return record


def park_boot(book, host, sent, now=None):
    """The host's reboot command ran (``sent``: plugin_utils/host/_reboot.send()'s ``before`` and ``start``, with the
    ``command``); the wait for its new boot is the next task's, which the strategy fleetos.layering.slots runs
    no earlier than ``wake_at``: WAKE_SHARE of the shortest boot this book has seen, after the command (at once
    before any host of the book booted). Meanwhile the host holds its budget slot, and no fork. ``now``: a wait
    of BOOT_SLICE ended at ``now`` without the new boot; the host waits REPARK_SHARE of its boot so far."""
    start = sent["start"]
    if now is not None:
        wake = now + min(REPARK_MAX, max(REPARK_MIN, REPARK_SHARE * (now - start)))
    else:
        shortest = book.get("shortest_boot")
        wake = start + (WAKE_SHARE * shortest if shortest else 0.0)
    entry = host_entry(book, host)
    entry["boot"] = dict(sent, wake_at=wake)
    entry["next"] = "boot"


def unpark_boot(book, host):
    """The reboot park_boot() kept for the host, taken out of the book: -> its ``before``, ``start`` and
    ``command``, or None."""
    return host_entry(book, host).pop("boot", None)


def wakes_at(book, host):
    """When the host's parked boot wait may run (seconds since the epoch), or None when it has none."""
    boot = book["hosts"].get(host, {}).get("boot")
    return boot.get("wake_at") if boot else None


def failure_text(phase, task, result):
    """``phase: task: message (rc=N)``, on one line, the message cut to ERROR_MAX characters."""
    result = result if isinstance(result, dict) else {}
    msg = one_line(result.get("msg"), "failed")[:ERROR_MAX]
    text = "%s: %s: %s" % (phase, task or "task", msg)
    if result.get("rc") is not None:
        text += " (rc=%s)" % result["rc"]
    return text


def went_down(reboot, probe):
    """Whether a host whose reboot task failed went down: the probe of its boot id after the
    failure did not answer, failed, or printed another boot id than the one read before."""
    probe = probe if isinstance(probe, dict) else {}
    if probe.get("unreachable") or probe.get("failed") or probe.get("skipped"):
        return True
    before = (reboot or {}).get("boot_id_before") if isinstance(reboot, dict) else None
    if before in (None, ""):
        return False
    lines = [line.strip() for line in str(probe.get("stdout") or "").splitlines() if line.strip()]
    return (lines[-1] if lines else "") != str(before).strip()


def record_failure(book, host, task, result, now, rollback=True, reboot=None, probe=None, reboot_timeout=None):
    """Record that the host's activation failed in its current phase: -> (record, roll_back).

    prepare, post: the host was not disrupted, or is on its target and healthy: failed, the
    slot is freed. reboot: failed; it keeps its slot when it went down and did not come back
    (``went_down``), else the reboot never started. verify, health: to be rolled back when
    ``rollback`` (``roll_back`` is then True and the record says so once ``rolled_back`` is
    recorded), else failed and freed. rollback: the rollback failed too: failed, keeps its slot.
    """
    record = record_of(book, host)
    phase = record["phase"]
    error = failure_text(phase, task, result)
    now = float(now)
    roll_back = False
    # Failed, whatever follows (a rollback): counts towards max_failures from now on.
    record["failed"] = True
    if phase == "reboot":
        if went_down(reboot, probe):
            record.update(status="failed", holds_slot=True, reason="did not come back within %s s; its budget slot"
                          " stays taken (%s)" % (reboot_timeout, error))
        else:
            record.update(status="failed", holds_slot=False, reason="the reboot did not start: %s" % error)
    elif phase in ("verify", "health") and rollback:
        record.update(reason=error)
        roll_back = True
    elif phase == "rollback":
        reason = "%s; the rollback failed too: %s" % (record.get("reason") or "failed", error)
        record.update(status="failed", holds_slot=True, rolled_back=False, rollback_end=now, reason=reason)
    else:
        record.update(status="failed", holds_slot=False, reason=error)
    return record, roll_back


def release(book, host, now):
    """The host is done: free its slot unless its record keeps it; count a failure.

    Once the failures reach max_failures the run stops: no new slot is granted.
    """
    entry = host_entry(book, host)
    record = record_of(book, host)
    if record["status"] == "started":
        # Ended without a verdict (a task the role does not own left the play): keep the slot.
        record.update(status="failed", holds_slot=True,
                      reason=record.get("reason") or "the activation ended in phase %s" % record["phase"])
    now = float(now)
    entry["state"] = "lost" if record["holds_slot"] else "done"
    entry["released_at"] = None if record["holds_slot"] else now
    record["released_at"] = entry["released_at"]
    _check_stop(book)
    return record


def _check_stop(book):
    """Stop the run once max_failures hosts failed (activations, and stages of hosts to activate):
    -> the stop reason, or None."""
    # Counted first, named only when the run stops.
    if book["stop"] or _failure_count(book) < book["max_failures"]:
        return book["stop"]
    failed = failed_hosts(book)
    staged = book.get("stage_failed") or []
    text = ["%d activation(s) failed (%s)" % (len(failed), ", ".join(failed))] if failed else []
    text += ["%d stage(s) failed (%s)" % (len(staged), ", ".join(staged))] if staged else []
    book["stop"] = "%s, max_failures is %d" % ("; ".join(text), book["max_failures"])
    return book["stop"]


def _failures(book):
    """Every host that counts toward max_failures: failed activations, then failed stages of hosts of the book."""
    return failed_hosts(book) + list(book.get("stage_failed") or [])


def _failure_count(book):
    """How many hosts count toward max_failures: len(_failures(book)), without a look at the grants (every
    failed record is a granted host's)."""
    return len(failed_names(book)) + len(book.get("stage_failed") or ())


def _is_failed(record):
    return record.get("status") == "failed" or bool(record.get("failed"))


def failed_names(book):
    """The hosts whose record says failed: the book's list of them (``failed``, as last written), corrected by
    the records read in this step, which may have changed."""
    records = book["records"]
    names = set(book.get("failed") or ())
    for host, record in getattr(records, "loaded", records).items():
        (names.add if _is_failed(record) else names.discard)(host)
    return names


def failed_hosts(book):
    """The hosts whose activation failed, in grant order; a host being rolled back counts already."""
    names = failed_names(book)
    return [h for h in book["grants"] if h in names]


def close_canary(book, stop_after=False):
    """The canary batch is over: stop when one of it failed, or (``stop_after``) when it is
    verified and the run is to end there. -> the stop reason, or None to go on."""
    canary = [h for h in book["canary"] if h in book["grants"]]
    failed = [h for h in _failures(book) if h in book["canary"]]
    book["canary_closed"] = True
    if failed:
        book["stop"] = "the canary batch failed (%s)" % ", ".join(failed)
    elif canary and stop_after and not book["stop"]:
        book["stop"] = ("the canary batch (%s) is verified healthy; os_activate_stop_after_canary ends the run here,"
                        " a rerun continues with the other hosts" % ", ".join(canary))
        book["canary_verified"] = True
    return book["stop"]


def summary(book):
    """``os_activate_summary``: budgets, max_failures, started (in grant order), failed,
    not_activated, stop_reason, canary_verified, slots (each grant with its hold time) and
    records (each host's ``os_activate_result``)."""
    blocked = [book["blocked"][pool] for pool in sorted(book["blocked"])]
    slots = []
    for host in book["grants"]:
        entry = book["hosts"][host]
        record = book["records"].get(host, {})
        slots.append({"host": host, "pool": entry["pool"], "granted_at": entry["granted_at"],
                      "released_at": entry["released_at"], "holds_slot": entry["state"] in ("holding", "lost"),
                      "status": record.get("status")})
    return {
        "budgets": dict((pool, book["pools"][pool]["budget"]) for pool in sorted(book["pools"])),
        "max_failures": book["max_failures"],
        "started": list(book["grants"]),
        "failed": failed_hosts(book),
        "stage_failed": list(book.get("stage_failed") or []),
        "not_activated": [h for h in book["order"] if h not in book["grants"]],
        "stop_reason": book["stop"] or ("; ".join(blocked) if blocked else None),
        "canary": list(book["canary"]),
        "canary_verified": bool(book["canary_verified"]),
        "slots": slots,
        "records": dict((h, book["records"][h]) for h in book["grants"] if h in book["records"]),
        # Pool -> why its window refused slots, the hosts it refused, and when its next window opens.
        "windows_closed": dict(book.get("windows_closed") or {}),
        # Host -> why it was not activated as asked (decline()): no failure.
        "declined": dict(book.get("declined") or {}),
    }


def most_held(book):
    """Pool -> the most slots held at once, from the grant and release times (for tests and
    benches: never above the budget)."""
    result = {}
    for pool in book["pools"]:
        points = []
        for host in book["grants"]:
            entry = book["hosts"][host]
            if entry["pool"] != pool:
                continue
            points.append((entry["granted_at"], 1))
            if entry["released_at"] is not None:
                points.append((entry["released_at"], -1))
        held = top = 0
        for point in sorted(points):
            step = point[1]
            held += step
            top = max(top, held)
        result[pool] = top
    return result
