# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The pure arithmetic of bench/rollout.py: boot delays, the pooled floor, budget slot reuse.

No lab, no Ansible: unit-tested in tests/unit/bench/test_bench_floor.py.

- spread_delays: each node's boot delay drawn from [low, high] with a fixed seed.
- best_schedule: the shortest makespan of jobs (per-host reboot times) on `machines`
  identical parallel machines (a pool's budget slots): exact by branch and bound while the
  search stays small, else the best schedule found (LPT, improved by the bounded search)
  with the lower bound max(max t, sum t / machines) beside it.
- pooled_floor: stage time + the maximum over pools of each pool's best schedule.
- slot_reuse: from budget slot records (host, pool, granted_at, released_at), per pool how
  long each freed slot stayed free before it was granted again.
"""

from __future__ import annotations

import math
import random
import statistics

EPS = 1e-9
SEARCH_LIMIT = 200000   # branch-and-bound nodes before giving up on a proof of optimality
MAX_SEARCH_JOBS = 500   # deeper pools: LPT only (one recursion level per job)
TOLERANCE = 0.005       # seconds: a schedule this close to the lower bound is optimal to the figures' precision


def parse_spread(text):
    """'A-B' (seconds, 0 <= A <= B) -> (A, B); ValueError otherwise."""
    parts = str(text).split("-")
    if len(parts) != 2:
        raise ValueError("boot spread %r is not A-B (seconds, e.g. 5-30)" % text)
    try:
        low, high = float(parts[0]), float(parts[1])
    except ValueError:
        raise ValueError("boot spread %r is not A-B (seconds, e.g. 5-30)" % text) from None
    if not (0 <= low <= high) or math.isinf(high):
        raise ValueError("boot spread %r: need 0 <= A <= B" % text)
    return low, high


def spread_delays(nodes, low, high, seed):
    """{node: seconds}: one draw from uniform [low, high] per node, in the order given, rounded to 0.1 s.

    The same nodes, bounds and seed give the same delays on every run and machine."""
    rng = random.Random(seed)
    return {node: round(rng.uniform(low, high), 1) for node in nodes}


def lower_bound(times, machines):
    """max(max t, sum t / machines): no schedule on `machines` machines is shorter."""
    if not times:
        return 0.0
    return max(max(times), sum(times) / max(1, min(machines, len(times))))


def _lpt(times, machines):
    """Longest processing time first: (makespan, [machine of each job]) for times sorted descending."""
    loads = [0.0] * machines
    where = []
    for t in times:
        m = min(range(machines), key=lambda i: (loads[i], i))
        loads[m] += t
        where.append(m)
    return max(loads), where


def best_schedule(times, machines, limit=SEARCH_LIMIT, tolerance=TOLERANCE):
    """The shortest makespan of `times` on `machines` identical parallel machines.

    -> {"makespan", "lower_bound", "method", "machines" (used), "assignment" ([[index into times, ...]
    per machine])}. method "exact": proven optimal (trivial cases, the lower bound reached, or the
    branch and bound finished within `limit` nodes); "at lower bound": within `tolerance` seconds of
    the lower bound, so optimal to that precision (the search stops there); "heuristic": the best
    found (LPT improved by the stopped search), the optimum lies in [lower_bound, makespan]."""
    times = [float(t) for t in times]
    if any(t < 0 for t in times):
        raise ValueError("negative time in %r" % times)
    if machines < 1:
        raise ValueError("machines must be at least 1, not %r" % machines)
    n = len(times)
    used = min(machines, n)
    bound = lower_bound(times, machines)
    if n == 0:
        return {"makespan": 0.0, "lower_bound": 0.0, "method": "exact", "machines": 0, "assignment": []}
    order = sorted(range(n), key=lambda i: (-times[i], i))
    sorted_times = [times[i] for i in order]
    best, where = _lpt(sorted_times, used)
    best_where = list(where)
    exact = True
    if best > bound + EPS and used > 1:
        # Depth-first: job k (longest first) on each machine; skip machines whose load equals one
        # already tried for this job (symmetric), prune when a load reaches the best makespan.
        loads = [0.0] * used
        current = [0] * n
        remaining = [0.0] * (n + 1)
        for k in range(n - 1, -1, -1):
            remaining[k] = remaining[k + 1] + sorted_times[k]
        visited = 0

        def search(k):
            """Place jobs k.. -> False when the search stopped at `limit` nodes (the result is then not proven)."""
            nonlocal best, best_where, visited
            visited += 1
            if visited > limit:
                return False
            if k == n:
                span = max(loads)
                if span < best - EPS:
                    best, best_where = span, list(current)
                return True
            # No completion beats the current max load, the remaining work spread evenly, or job k
            # (the longest left) on the least loaded machine.
            if max(max(loads), (sum(loads) + remaining[k]) / used, min(loads) + sorted_times[k]) >= best - EPS:
                return True
            t = sorted_times[k]
            tried = set()
            for m in sorted(range(used), key=lambda i: loads[i]):
                key = round(loads[m], 9)
                if key in tried or loads[m] + t >= best - EPS:
                    continue
                tried.add(key)
                loads[m] += t
                current[k] = m
                finished = search(k + 1)
                loads[m] -= t
                if not finished:
                    return False
                if best <= bound + tolerance:
                    return True
            return True

        # One recursion level per job: a pool of more hosts than that is left to LPT.
        if best > bound + tolerance:
            exact = search(0) if n <= MAX_SEARCH_JOBS else False
        if best <= bound + EPS:
            exact = True
        elif best <= bound + tolerance:
            exact = None
    assignment = [[] for _ in range(used)]
    for k, m in enumerate(best_where):
        assignment[m].append(order[k])
    method = "exact" if exact else "at lower bound" if exact is None else "heuristic"
    return {"makespan": best, "lower_bound": bound, "method": method, "machines": used, "assignment": assignment}


def pooled_floor(stage_s, pools, budget, limit=SEARCH_LIMIT):
    """The pooled floor: stage_s + max over pools of the best schedule of the pool's reboot times.

    pools: {pool: {host: reboot seconds}} (hosts that need no reboot left out); budget: each
    pool's slots (an int), or {pool: slots}. -> {"wall_s", "stage_s", "pools": {pool: {"makespan",
    "lower_bound", "method", "slots", "hosts", "schedule": [[host, ...] per slot]}}, "bottleneck",
    "exact" (no pool "heuristic")}."""
    out = {}
    for pool, per_host in pools.items():
        slots = budget[pool] if isinstance(budget, dict) else budget
        hosts = list(per_host)
        result = best_schedule([per_host[h] for h in hosts], slots, limit)
        out[pool] = {"makespan": result["makespan"], "lower_bound": result["lower_bound"],
                     "method": result["method"], "slots": slots, "hosts": len(hosts),
                     "schedule": [[hosts[i] for i in machine] for machine in result["assignment"]]}
    bottleneck = max(out, key=lambda p: (out[p]["makespan"], p)) if out else None
    span = out[bottleneck]["makespan"] if out else 0.0
    return {"wall_s": stage_s + span, "stage_s": stage_s, "reboot_s": span, "pools": out,
            "bottleneck": bottleneck, "exact": all(p["method"] != "heuristic" for p in out.values())}


def slot_records_from_hosts(rows):
    """Budget slot records derived from a rollout report's host rows: a host holds its slot from
    granted_at to released_at when the rows have them, else from reboot_start to verified_at (or
    rollback_end); open (released_at None) while it still holds the slot."""
    out = []
    for row in rows:
        granted = row.get("granted_at") if row.get("granted_at") is not None else row.get("reboot_start")
        if granted is None:
            continue
        if row.get("slot_held"):
            released = None
        elif row.get("released_at") is not None:
            released = row["released_at"]
        else:
            released = row.get("verified_at") or row.get("rollback_end")
        out.append({"host": row.get("host"), "pool": row.get("pool"), "granted_at": granted, "released_at": released})
    return out


def _stats(values):
    if not values:
        return None
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def slot_reuse(slots, budget=None):
    """Per pool, from slot records ({host, pool, granted_at, released_at}; released_at None: still held):

    {pool: {"grants", "first_grants", "reuses", "gaps" ([s]), "gap_s" ({min, median, max} or None),
    "max_held", "timeline" ([host, granted_at, released_at] by grant time)}}.

    The first `budget` grants of a pool (all grants before the first release without a budget) take
    slots never used before; each later grant takes the slot freed longest ago, and its gap is how
    long that slot stayed free (grant - release). A release nobody took again is no gap."""
    pools = {}
    for rec in slots:
        pools.setdefault(rec.get("pool") or "-", []).append(rec)
    out = {}
    for pool, recs in sorted(pools.items()):
        cap = budget.get(pool) if isinstance(budget, dict) else budget
        events = []
        for rec in recs:
            if rec.get("granted_at") is None:
                continue
            events.append((float(rec["granted_at"]), 1, rec))
            if rec.get("released_at") is not None:
                events.append((float(rec["released_at"]), 0, rec))
        events.sort(key=lambda e: (e[0], e[1]))   # a release before a grant at the same instant
        free, gaps = [], []
        held = max_held = grants = first = 0
        for ts, kind, _ in events:
            if kind == 0:
                held -= 1
                free.append(ts)
                continue
            grants += 1
            held += 1
            max_held = max(max_held, held)
            if (cap is not None and first < cap) or (cap is None and not free):
                first += 1
            elif free:
                gaps.append(max(0.0, ts - free.pop(0)))
            else:       # more grants than the budget with no slot free: over budget (max_held says so)
                first += 1
        timeline = sorted(([r.get("host"), r.get("granted_at"), r.get("released_at")] for r in recs
                           if r.get("granted_at") is not None), key=lambda x: (x[1], str(x[0])))
        out[pool] = {"grants": grants, "first_grants": first, "reuses": len(gaps), "gaps": gaps,
                     "gap_s": _stats(gaps), "max_held": max_held, "timeline": timeline}
    return out
