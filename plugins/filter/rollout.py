# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Filters for the rolling rollout: budgets, windows and the report (plugin_utils/rollout/_rollout_report.py).

Documented in the rollout_*.yml files next to this one. Pure functions, no I/O; only
``rollout_pool_windows`` reads the clock, when it is not given the time.
"""

from __future__ import annotations

import math
import re

from datetime import datetime, timezone

from ansible.errors import AnsibleFilterError

from ansible_collections.fleetos.layering.plugins.plugin_utils.rollout import _windows
from ansible_collections.fleetos.layering.plugins.plugin_utils.rollout._rollout_report import (
    rollout_report,
    rollout_report_markdown,
    rollout_timeline_svg,
)

_PERCENT_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%\s*$")
_INT_RE = re.compile(r"^\s*(\d+)\s*$")


def rollout_budget(value, size, rounding="down", minimum=1):
    """Turn a count or a percentage of ``size`` hosts into a host count.

    ``value`` is an int (``2``), a digit string (``"2"``) or a percentage (``"25%"``).
    A percentage is rounded ``down`` (a disruption budget, as Kubernetes rounds
    maxUnavailable) or ``up`` (a failure threshold); the result is never below
    ``minimum``.
    """
    if rounding not in ("down", "up"):
        raise AnsibleFilterError("rollout_budget: rounding must be 'down' or 'up', not %r" % (rounding,))
    try:
        size = int(size)
        minimum = int(minimum)
    except (TypeError, ValueError):
        raise AnsibleFilterError("rollout_budget: size and minimum must be integers, got %r and %r" % (size, minimum))
    if size < 0:
        raise AnsibleFilterError("rollout_budget: size must not be negative, got %d" % size)
    if isinstance(value, bool):
        raise AnsibleFilterError("rollout_budget: %r is not a count or a percentage such as 2 or '25%%'" % (value,))
    if isinstance(value, int):
        count = value
    elif isinstance(value, str) and _INT_RE.match(value):
        count = int(value)
    elif isinstance(value, str) and _PERCENT_RE.match(value):
        percent = float(_PERCENT_RE.match(value).group(1))
        if percent > 100:
            raise AnsibleFilterError("rollout_budget: %r is over 100%%" % (value,))
        exact = percent * size / 100.0
        # Round away float noise first (e.g. 29.999999 -> 30), then as asked.
        exact = round(exact, 9)
        count = int(math.floor(exact)) if rounding == "down" else int(math.ceil(exact))
    else:
        raise AnsibleFilterError("rollout_budget: %r is not a count or a percentage such as 2 or '25%%'" % (value,))
    if count < 0:
        raise AnsibleFilterError("rollout_budget: %r is negative" % (value,))
    return max(count, minimum)


def _check_hosts(hosts, name):
    if not isinstance(hosts, (list, tuple)):
        raise AnsibleFilterError("%s: the input must be a list of {host, pool} mappings" % name)
    for item in hosts:
        if not isinstance(item, dict) or "host" not in item or "pool" not in item:
            raise AnsibleFilterError("%s: %r is not a mapping with host and pool" % (name, item))


def _budget_of(budgets, pool, name):
    if pool not in budgets:
        raise AnsibleFilterError("%s: no budget for pool %r" % (name, pool))
    budget = budgets[pool]
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 0:
        raise AnsibleFilterError("%s: the budget of pool %r must be a count >= 0, got %r" % (name, pool, budget))
    return budget


def rollout_pool_sizes(hosts, inventory_pools=None):
    """Pool -> its number of hosts, from ``[{host, pool, ...}]`` and, when given, ``inventory_pools``
    (the pool of every host of the inventory, one name a host): a pool counts the hosts the inventory gives
    it, not only those of the run, so that a limited run sizes a percentage budget as an unlimited one."""
    _check_hosts(hosts, "rollout_pool_sizes")
    if inventory_pools is not None and (isinstance(inventory_pools, (str, dict)) or not isinstance(inventory_pools, (list, tuple))):
        raise AnsibleFilterError("rollout_pool_sizes: inventory_pools must be a list of pool names, one a host, not %r"
                                 % (inventory_pools,))
    size = {}
    for item in hosts:
        size[item["pool"]] = size.get(item["pool"], 0) + 1
    known = {}
    for pool in inventory_pools or []:
        known[str(pool)] = known.get(str(pool), 0) + 1
    return dict((pool, max(count, known.get(str(pool), 0))) for pool, count in size.items())


def rollout_pool_budgets(hosts, inventory_pools=None):
    """Pool -> max_unavailable as a count, from ``[{host, pool, max_unavailable}]``.

    A percentage is taken of the pool's size (``rollout_pool_sizes``: its hosts in ``hosts``, or in
    ``inventory_pools`` when given and more), rounded down, at least 1. Hosts of one pool that
    disagree on the budget are an error.
    """
    sizes = rollout_pool_sizes(hosts, inventory_pools)
    raw = {}
    for item in hosts:
        pool = item["pool"]
        value = item.get("max_unavailable", 1)
        if pool in raw and str(raw[pool][0]) != str(value):
            raise AnsibleFilterError("rollout_pool_budgets: hosts %s and %s of pool %r have different budgets %r and %r"
                                     % (raw[pool][1], item["host"], pool, raw[pool][0], value))
        raw.setdefault(pool, (value, item["host"]))
    return dict((pool, rollout_budget(raw[pool][0], sizes[pool])) for pool in raw)


def rollout_pool_windows(hosts, now=None):
    """Each pool's maintenance windows and where they stand at ``now`` (seconds since the epoch; the
    clock when None), from the hosts' variables (``fleetos_pool``, ``fleetos_rollout_windows``,
    ``fleetos_rollout_windows_timezone``): ``{pool: {open, closes_at, next_open, next_open_local, zone,
    text}}`` for the pools that have windows. A pool whose hosts disagree, or whose windows are not
    valid, has ``problem`` and its ``text`` says so."""
    if not isinstance(hosts, (list, tuple)):
        raise AnsibleFilterError("rollout_pool_windows: the input must be a list of host variable mappings")
    moment = _windows.now() if now is None else datetime.fromtimestamp(float(now), timezone.utc)
    pools = {}
    for hv in hosts:
        if not isinstance(hv, dict) and not hasattr(hv, "get"):
            continue
        windows, zone = hv.get("fleetos_rollout_windows") or [], hv.get("fleetos_rollout_windows_timezone") or "UTC"
        pool = str(hv.get("fleetos_pool") or "default")
        host = hv.get("inventory_hostname")
        known = pools.setdefault(pool, {"windows": windows, "timezone": zone, "host": host})
        if (known["windows"], known["timezone"]) != (windows, zone) and "problem" not in known:
            known["problem"] = "the hosts %s and %s have different maintenance windows" % (known["host"], host)
    out = {}
    for pool in sorted(pools):
        known = pools[pool]
        if not known["windows"] and not known.get("problem"):
            continue
        try:
            sched = _windows.schedule(known["windows"], known["timezone"])
        except ValueError as exc:
            known.setdefault("problem", str(exc))
        if known.get("problem"):
            out[pool] = {"problem": known["problem"], "text": "pool %s: %s" % (pool, known["problem"])}
            continue
        where = sched.describe_next(moment)
        if where["open"]:
            where["text"] = "pool %s: inside a maintenance window until %s; the next opens at %s" % (
                pool, sched.when(sched.open_at(moment)), sched.when(sched.next_window(moment)))
        else:
            where["text"] = "pool %s: outside its maintenance windows; the next opens at %s" % (
                pool, sched.when(sched.next_open(moment)))
        out[pool] = where
    return out


class FilterModule:
    """Rollout planning and reporting."""

    def filters(self):
        return {
            "rollout_budget": rollout_budget,
            "rollout_pool_budgets": rollout_pool_budgets,
            "rollout_pool_sizes": rollout_pool_sizes,
            "rollout_pool_windows": rollout_pool_windows,
            "rollout_report": rollout_report,
            "rollout_report_markdown": rollout_report_markdown,
            "rollout_timeline_svg": rollout_timeline_svg,
        }
