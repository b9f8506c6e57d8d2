# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""bench/_floor.py: boot delays, the pooled floor (best schedule under a budget), slot reuse gaps.

bench/ is not part of the collection (the copy ansible-test sees has no bench/): the module is
loaded from the working tree by path, and these tests are skipped where it is missing.
"""

from __future__ import annotations

import importlib.util
import random
import itertools
from pathlib import Path

import pytest

FLOOR_PY = Path(__file__).resolve().parents[3] / "bench" / "_floor.py"
if not FLOOR_PY.is_file():
    pytest.skip("bench/_floor.py is not in this tree", allow_module_level=True)
_SPEC = importlib.util.spec_from_file_location("bench_floor", str(FLOOR_PY))
floor = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(floor)


def brute_force(times, machines):
    best = None
    for assign in itertools.product(range(machines), repeat=len(times)):
        loads = [0.0] * machines
        for t, m in zip(times, assign):
            loads[m] += t
        span = max(loads) if times else 0.0
        best = span if best is None else min(best, span)
    return best


def check_assignment(times, result):
    indices = sorted(i for machine in result["assignment"] for i in machine)
    assert indices == list(range(len(times)))
    assert len(result["assignment"]) == result["machines"]
    span = max((sum(times[i] for i in machine) for machine in result["assignment"]), default=0.0)
    assert span == pytest.approx(result["makespan"])


@pytest.mark.parametrize("text,expected", [("5-30", (5.0, 30.0)), ("1.5-1.5", (1.5, 1.5)), ("0-4", (0.0, 4.0))])
def test_parse_spread(text, expected):
    assert floor.parse_spread(text) == expected


@pytest.mark.parametrize("text", ["30-5", "5", "a-b", "-1-3", "5-30-40", "", "1-inf"])
def test_parse_spread_rejects(text):
    with pytest.raises(ValueError):
        floor.parse_spread(text)


def test_spread_delays_fixed_seed_in_bounds():
    nodes = ["node%02d" % i for i in range(11, 23)]
    first = floor.spread_delays(nodes, 5, 30, 15)
    assert first == floor.spread_delays(nodes, 5, 30, 15)
    assert list(first) == nodes
    assert all(5 <= d <= 30 for d in first.values())
    assert len(set(first.values())) > 1
    assert first != floor.spread_delays(nodes, 5, 30, 16)
    assert set(floor.spread_delays(nodes, 10, 10, 15).values()) == {10.0}


@pytest.mark.parametrize("times,machines", [
    ([], 3),
    ([4.0], 3),
    ([3, 3, 2, 2, 2], 2),          # LPT gives 7, the optimum is 6
    ([10, 10, 10, 10, 10, 10], 3),
    ([29.1, 6.2, 17.0, 12.5, 22.2, 8.8, 5.1], 3),
    ([5, 5, 4, 4, 3, 3, 3], 3),     # LPT 11, optimum 9
    ([1, 2, 3, 4, 5, 6, 7, 8], 1),
    ([7, 7, 7], 5),
])
def test_best_schedule_matches_brute_force(times, machines):
    result = floor.best_schedule(times, machines)
    assert result["method"] == "exact"
    assert result["makespan"] == pytest.approx(brute_force(times, min(machines, len(times)) or 1))
    assert result["lower_bound"] <= result["makespan"] + 1e-9
    check_assignment([float(t) for t in times], result)


def test_best_schedule_random_pools_against_brute_force():
    rng = random.Random(15)
    for case in range(40):
        times = [round(rng.uniform(5, 30), 1) for index in range(rng.randint(1, 7))]
        machines = rng.randint(1, 3)
        result = floor.best_schedule(times, machines)
        assert result["method"] == "exact"
        assert result["makespan"] == pytest.approx(brute_force(times, min(machines, len(times))))


def test_best_schedule_large_pool_is_heuristic_within_bounds():
    rng = random.Random(7)
    times = [rng.uniform(5, 30) for index in range(60)]
    result = floor.best_schedule(times, 7, limit=50)
    assert result["method"] in ("exact", "at lower bound", "heuristic")
    assert result["lower_bound"] == pytest.approx(max(times + [sum(times) / 7]))
    assert result["lower_bound"] - 1e-9 <= result["makespan"]
    lpt = floor._lpt(sorted(times, reverse=True), 7)[0]
    assert result["makespan"] <= lpt + 1e-9
    check_assignment(times, result)


def test_best_schedule_stops_at_the_lower_bound_within_tolerance():
    times = [11.001, 11.0, 11.0, 11.0]       # optimum 22.001 on 2 machines, lower bound 22.0005
    assert floor.best_schedule(times, 2)["method"] == "at lower bound"
    result = floor.best_schedule(times, 2, tolerance=0.0)
    assert result["method"] == "exact" and result["makespan"] == pytest.approx(22.001)


def test_best_schedule_rejects_bad_input():
    with pytest.raises(ValueError):
        floor.best_schedule([1, -1], 2)
    with pytest.raises(ValueError):
        floor.best_schedule([1], 0)


def test_pooled_floor_uniform_is_rounds():
    pools = {"bench-a": {"n%d" % i: 11.0 for i in range(6)}, "bench-b": {"m%d" % i: 11.0 for i in range(6)}}
    result = floor.pooled_floor(5.5, pools, 3)
    assert result["wall_s"] == pytest.approx(5.5 + 2 * 11.0)
    assert result["exact"]
    assert result["pools"]["bench-a"]["hosts"] == 6
    assert sorted(len(s) for s in result["pools"]["bench-a"]["schedule"]) == [2, 2, 2]


def test_pooled_floor_takes_the_slowest_pool_and_budget_per_pool():
    pools = {"a": {"x": 30.0, "y": 5.0, "z": 5.0}, "b": {"u": 10.0, "v": 10.0}}
    result = floor.pooled_floor(2.0, pools, {"a": 2, "b": 1})
    assert result["bottleneck"] == "a"
    assert result["pools"]["a"]["makespan"] == pytest.approx(30.0)
    assert result["pools"]["b"]["makespan"] == pytest.approx(20.0)
    assert result["wall_s"] == pytest.approx(32.0)
    assert floor.pooled_floor(1.0, {}, 3)["wall_s"] == 1.0


def test_slot_reuse_gaps_fifo_per_pool():
    slots = [
        {"host": "a1", "pool": "a", "granted_at": 0.0, "released_at": 10.0},
        {"host": "a2", "pool": "a", "granted_at": 0.0, "released_at": 12.0},
        {"host": "a3", "pool": "a", "granted_at": 10.5, "released_at": 20.0},   # takes a1's slot: 0.5 s
        {"host": "a4", "pool": "a", "granted_at": 14.0, "released_at": None},   # a2's slot: 2.0 s; still held
        {"host": "b1", "pool": "b", "granted_at": 1.0, "released_at": 5.0},
    ]
    out = floor.slot_reuse(slots, budget=2)
    assert out["a"]["grants"] == 4 and out["a"]["first_grants"] == 2 and out["a"]["reuses"] == 2
    assert out["a"]["gaps"] == [pytest.approx(0.5), pytest.approx(2.0)]
    assert out["a"]["gap_s"]["median"] == pytest.approx(1.25)
    assert out["a"]["max_held"] == 2
    assert [row[0] for row in out["a"]["timeline"]] == ["a1", "a2", "a3", "a4"]
    assert out["b"]["reuses"] == 0 and out["b"]["gap_s"] is None


def test_slot_reuse_without_budget_and_release_at_grant_instant():
    slots = [
        {"host": "h1", "pool": "p", "granted_at": 0.0, "released_at": 4.0},
        {"host": "h2", "pool": "p", "granted_at": 4.0, "released_at": 8.0},
    ]
    out = floor.slot_reuse(slots)
    assert out["p"]["first_grants"] == 1 and out["p"]["gaps"] == [0.0] and out["p"]["max_held"] == 1


def test_slot_records_from_host_rows():
    rows = [
        {"host": "h1", "pool": "p", "reboot_start": 1.0, "verified_at": 9.0, "slot_held": False},
        {"host": "h2", "pool": "p", "reboot_start": 2.0, "verified_at": None, "rollback_end": 20.0,
         "slot_held": False},
        {"host": "h3", "pool": "p", "reboot_start": 3.0, "verified_at": None, "slot_held": True},
        {"host": "h4", "pool": "p", "reboot_start": None, "verified_at": None},
        {"host": "h5", "pool": "p", "granted_at": 4.0, "reboot_start": 5.0, "verified_at": 9.0, "released_at": 9.5,
         "slot_held": False},
    ]
    assert floor.slot_records_from_hosts(rows) == [
        {"host": "h1", "pool": "p", "granted_at": 1.0, "released_at": 9.0},
        {"host": "h2", "pool": "p", "granted_at": 2.0, "released_at": 20.0},
        {"host": "h3", "pool": "p", "granted_at": 3.0, "released_at": None},
        {"host": "h5", "pool": "p", "granted_at": 4.0, "released_at": 9.5},
    ]
