# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""What rollout.yml decides for every host between the plan's contact and the stage, once for the play on the
controller: each host's plan (its read, with its lease folded in), the takeovers of leases of rollouts that are
gone, the book of slots' description of each host, and which hosts the short plays that follow act on. The same
for rollback.yml (:func:`rollback_hosts`).

A task per host for each of these decisions would cost every host a worker fork and a result round trip of the
controller's; here they cost a lookup of each host's variables, once."""

from __future__ import annotations

from ansible_collections.fleetos.layering.plugins.plugin_utils.rollout._fleet import host_values, plain
from ansible_collections.fleetos.layering.plugins.plugin_utils.host._backends import backend
from ansible_collections.fleetos.layering.plugins.plugin_utils.rollout._plan import (
    host_plan,
    images_to_inspect,
    rollback_host_plan,
)
from ansible_collections.fleetos.layering.plugins.plugin_utils.rollout._resume import lease_plan, refusals, takeover

# What the book of slots reads of each host: (key, inventory variable, default), as the role
# fleetos.layering.os_activate's defaults map them.
BOOK_INPUTS = (
    ("pool", "fleetos_pool", "default"),
    ("max_unavailable", "fleetos_pool_max_unavailable", 1),
    ("windows", "fleetos_rollout_windows", []),
    ("windows_timezone", "fleetos_rollout_windows_timezone", "UTC"),
    ("activation_seconds", "fleetos_rollout_windows_activation_seconds", None),
)
# Every variable rollout_hosts reads of a host.
HOST_NAMES = ("os_plan_result", "os_plan_lease_result", "__fleetos_rollout_lease_taken", "fleetos_fleetlock_url") \
    + tuple(variable for _key, variable, _default in BOOK_INPUTS)
TO_ACTIVATE = ("verify", "activate", "stage")


def read_plans(fleet, reads, resolutions=None, inspections=None, lock=None, pins=None):
    """The plan of every host read: ``fleet`` is the record of ``rollout_plan_fleet`` (with each host's inputs and
    assignment), ``reads`` maps a host to its deployments as read (``host_reads``). A host whose entry has an error
    keeps the fleet's plan; a host not in ``reads`` (its read failed: the caller recorded it) is left out."""
    plans = {}
    for host, entry in sorted(((fleet or {}).get("hosts") or {}).items()):
        if entry.get("error") is not None:
            plans[host] = entry["plan"]
            continue
        if host not in reads:
            continue
        status, given = reads[host], entry["inputs"]
        plans[host] = host_plan(entry["assignment"], host, pool=given["pool"], fallback_image=given["fallback_image"],
                                fallback_transport=given["fallback_transport"], pool_paused=given["pool_paused"],
                                labels=given["labels"] or {}, resolutions=resolutions, status=status,
                                inspections=inspections, lock=lock, pins=pins,
                                update_agents=given.get("update_agents"), soft_reboot=given.get("soft_reboot"))
    return plans


def leaves_unchanged(fleet, host, lease_result, resolutions=None, lock=None, pins=None):
    """Whether ``host``'s plan, made from the read under its lease, leaves it as it is with nothing else for the
    rollout to do on it: its lease can then be released in the same contact (os_rollout_lease
    ``release_unchanged``), and the host needs no task of its own after the plan.

    ``fleet`` is the record of ``rollout_plan_fleet`` and ``lease_result`` the host's os_rollout_lease result with
    its ``deployments``. Not unchanged: a lease not taken, a host whose plan needs the images' commits (a second
    read), an update agent to turn off, or a lease a killed rollout left (a verification, a FleetLock slot)."""
    result = plain(lease_result) if isinstance(lease_result, dict) else {}
    entry = plain(((fleet or {}).get("hosts") or {}).get(host))
    if not result.get("acquired") or result.get("failed") or not isinstance(result.get("deployments"), dict) \
            or not isinstance(entry, dict) or entry.get("error") is not None:
        return False
    plan = read_plans({"hosts": {host: entry}}, {host: result["deployments"]}, resolutions=plain(resolutions),
                      lock=plain(lock), pins=plain(pins)).get(host)
    if not isinstance(plan, dict) or images_to_inspect([plan]):
        return False
    plan = lease_plan(plan, result)
    return plan.get("action") == "unchanged" and not plan.get("release_slot") \
        and not (plan.get("update_agents") or {}).get("disable")


def host_reads(hostvars, hosts):
    """``{host: status}`` for each host of ``hosts`` whose read succeeded: the ``deployments`` of its
    os_rollout_lease result (``os_plan_lease_result``: the lease taken, or only read; a refused lease reads them all
    the same)."""
    reads = {}
    for host, found in host_values(hostvars, hosts, ("os_plan_lease_result",)).items():
        result = found.get("os_plan_lease_result")
        if not isinstance(result, dict) or result.get("skipped") or result.get("unreachable"):
            continue
        if isinstance(result.get("deployments"), dict):
            reads[host] = result["deployments"]
    return reads


def lease_result(found):
    """The host's lease result: the takeover's when there was one, else the plan's lease."""
    taken = found.get("__fleetos_rollout_lease_taken")
    if isinstance(taken, dict) and not taken.get("skipped"):
        return taken
    result = found.get("os_plan_lease_result")
    return result if isinstance(result, dict) else {"skipped": True}


def _plan_of(plans, host, found):
    plan = (plans or {}).get(host)
    return plan if isinstance(plan, dict) else (found.get("os_plan_result") or {})


def takeovers(plans, hostvars, hosts, owner, break_lease=None, now=None):
    """``{host: rollout}``: the hosts whose lease a rollout that is gone holds (``_resume.takeover``), among the
    hosts whose status was read."""
    chosen = {}
    for host, found in host_values(hostvars, hosts, ("os_plan_result", "os_plan_lease_result")).items():
        if not _plan_of(plans, host, found).get("status_read"):
            continue
        rollout = takeover(found.get("os_plan_lease_result"), owner, break_lease=break_lease, now=now)
        if rollout:
            chosen[host] = rollout
    return chosen


def _first(plan):
    """Whether the host goes first: a killed run rebooted it into its target, or took a FleetLock slot for it."""
    return plan.get("action") == "verify" or (bool(plan.get("release_slot")) and plan.get("action") in ("stage", "activate"))


def book_entry(host, values, first=False):
    """``host`` as the book of slots reads it, from ``values`` (its variables, as :func:`host_values` gives them):
    ``{host, first, pool, max_unavailable, windows, windows_timezone, activation_seconds}``. A variable unset (or
    empty, where the role's template says "or") gets the role's default."""
    me = {"host": host, "first": first}
    for key, variable, default in BOOK_INPUTS:
        value = values.get(variable)
        me[key] = default if value is None or (value in ("", []) and key != "max_unavailable") else value
    return me


def pools_in_turn(hosts, pool_of):
    """``hosts`` reordered to take the pools in turn: the first host of each pool (in the order the pools first
    appear), then the second of each, and so on; each pool's hosts keep their order.

    An inventory lists its hosts pool by pool: a play over them in that order would start the last pool's hosts
    only once every other pool's had their turn, and at fleet size the last pool's first slot would be granted
    minutes after the first pool's."""
    queues = {}
    for host in hosts:
        queues.setdefault(pool_of(host), []).append(host)
    ordered = []
    for turn in range(max([len(queue) for queue in queues.values()] or [0])):
        ordered.extend(queue[turn] for queue in queues.values() if turn < len(queue))
    return ordered


def rollout_hosts(plans, hostvars, hosts, activate=True, now=None):
    """Every host's decisions after the plan: -> ``{"hosts": {host: {"plan", "lease_result"}}, "refused",
    "book", "described", "stage", "active", "agents", "pin", "unlock", "release"}``.

    ``plans`` maps a host to its plan (the role os_plan's ``__os_plan_plans``; a host not there has its
    ``os_plan_result``). ``book`` lists the hosts to activate, those that go first first; ``described`` each host
    as the book reads it (``{host, pool, max_unavailable, first, windows, windows_timezone, activation_seconds}``);
    ``stage`` the hosts to stage; ``active`` the hosts the activation plays act on (staged, in the book, or with a
    FleetLock slot a killed run may have left); then the hosts with work before the stage or instead of it:
    ``agents`` (update agents to turn off), ``pin`` (the origin to pin), ``unlock`` (a FleetLock slot to free:
    a host already on its target) and ``release`` (the lease of a host neither staged nor activated). ``stage``
    and ``active`` take the pools in turn (:func:`pools_in_turn`): the plays over them start every pool at once.
    """
    found = host_values(hostvars, hosts, HOST_NAMES)
    results = dict((host, lease_result(found[host])) for host in found)
    refused = refusals(results)
    entries, described, first, rest = {}, [], [], []
    lists = dict((name, []) for name in ("stage", "active", "agents", "pin", "unlock", "release"))
    for host in hosts or ():
        values = found[host]
        plan = lease_plan(plain(_plan_of(plans, host, values)), plain(results[host]), refused, now=now)
        entries[host] = {"plan": plan, "lease_result": results[host]}
        action = plan.get("action")
        goes_first = _first(plan)
        described.append(book_entry(host, values, goes_first))
        in_book = activate and action in TO_ACTIVATE
        if in_book:
            (first if goes_first else rest).append(host)
        chosen = {
            "stage": action == "stage",
            "active": action == "stage" or in_book or bool(plan.get("release_slot")),
            "agents": bool((plan.get("update_agents") or {}).get("disable")),
            "pin": action == "pin",
            "unlock": activate and action in ("unchanged", "pin") and values.get("fleetos_fleetlock_url") not in (None, ""),
            # Not a lease the plan's contact released already (an unchanged host, os_rollout_lease release_unchanged).
            "release": action != "stage" and not in_book and bool(results[host].get("acquired"))
            and not results[host].get("released"),
        }
        for name, yes in chosen.items():
            if yes:
                lists[name].append(host)
    pools = dict((me["host"], me["pool"]) for me in described)
    for name in ("stage", "active"):
        lists[name] = pools_in_turn(lists[name], pools.get)
    return dict(lists, hosts=entries, refused=refused, book=first + rest, described=described)


# Every variable rollback_hosts reads of a host: its lease read, its takeover, its cancel and the read after it, its
# pool and budget. Not its maintenance windows: a rollback is a repair asked for now, and the book gives an unread
# window variable its default (none).
ROLLBACK_NAMES = ("__fleetos_rollback_lease", "__fleetos_rollout_lease_taken", "__fleetos_rollback_cancelled",
                  "__fleetos_rollback_status", "fleetos_pool", "fleetos_pool_max_unavailable")


def _done(result):
    """Whether a registered result is there and was not skipped."""
    return isinstance(result, dict) and not result.get("skipped")


def _rollback_reads(values):
    """The host's lease result (the takeover's when there was one) and its deployments as last read, or None."""
    taken, read = values.get("__fleetos_rollout_lease_taken"), values.get("__fleetos_rollback_lease")
    result = taken if _done(taken) else read if isinstance(read, dict) else {"skipped": True}
    status = values.get("__fleetos_rollback_status")
    if _done(status) and not status.get("failed") and isinstance(status.get("booted"), dict):
        return result, status
    deployments = result.get("deployments")
    return result, deployments if isinstance(deployments, dict) else None


def rollback_hosts(hostvars, hosts, owner, break_lease=None, rollback_from=None, now=None):
    """Every host's decisions of rollback.yml, from what the run has read so far: -> ``{"takeovers", "cancel",
    "hosts", "refused", "book", "active", "described", "release"}``.

    The playbook asks after each step that reads hosts: the lease and the deployments read under it
    (``__fleetos_rollback_lease``), the takeover of the lease of a rollout that is gone
    (``__fleetos_rollout_lease_taken``), the cancel of a staged deployment (``__fleetos_rollback_cancelled``) and the
    read after it (``__fleetos_rollback_status``). Each answer holds for what was read by then:

    - ``takeovers``: ``{host: rollout}``, the hosts whose lease a rollout that is gone holds (``_resume.takeover``),
      not taken over yet;
    - ``cancel``: ``{host: {"command", "backend"}}``, the hosts whose staged deployment is cancelled before the
      plan, not cancelled yet: the lease taken, no host of the run held by another rollout, and a backend with a
      cancel command (bootc has none: it discards the staged deployment when it rolls back);
    - ``hosts``: ``{host: {"plan", "lease_result"}}``, each host's plan (``rollback_host_plan`` of its last read,
      its lease folded in); ``refused`` the hosts other rollouts hold (``_resume.refusals``); ``book`` the hosts
      to roll back, in the play's order (each pool's queue); ``active`` the same hosts for the play that rolls them
      back, the pools taken in turn (:func:`pools_in_turn`); ``described`` each host as the book of slots reads it
      (a rollback is a repair asked for now: no maintenance window holds it); ``release`` the hosts not rolled back
      whose lease the run holds.
    """
    found = host_values(hostvars, hosts, ROLLBACK_NAMES)
    reads = dict((host, _rollback_reads(found[host])) for host in found)
    refused = refusals(dict((host, read[0]) for host, read in reads.items()))
    takeovers, cancel, entries, described, book, release = {}, {}, {}, [], [], []
    for host in hosts or ():
        values, (result, status) = found[host], reads[host]
        if not _done(values.get("__fleetos_rollout_lease_taken")):
            rollout = takeover(values.get("__fleetos_rollback_lease"), owner, break_lease=break_lease, now=now)
            if rollout:
                takeovers[host] = rollout
        me = book_entry(host, values)
        described.append(me)
        pool = me["pool"]
        if status is None:
            plan = host_plan(None, host, pool=pool, error="its deployments were not read")
        else:
            plan = rollback_host_plan(status, host, pool=pool, rollback_from=rollback_from)
            name = status.get("backend") or "rpm-ostree"
            command = backend(name).command("cancel")
            if result.get("acquired") and not refused and status.get("staged") is not None and command \
                    and "__fleetos_rollback_cancelled" not in values:
                cancel[host] = {"command": command, "backend": name}
        plan = lease_plan(plan, result, refused, now=now, before="the rollback")
        entries[host] = {"plan": plan, "lease_result": result}
        if plan.get("action") == "activate":
            book.append(host)
        elif result.get("acquired") and not result.get("released"):
            release.append(host)
    pools = dict((me["host"], me["pool"]) for me in described)
    return {"takeovers": takeovers, "cancel": cancel, "hosts": entries, "refused": refused, "book": book,
            "active": pools_in_turn(book, pools.get), "described": described, "release": release}
