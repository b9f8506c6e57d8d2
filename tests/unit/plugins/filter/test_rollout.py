# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for the rollout filters: budgets and windows; the report filters are
plugin_utils/rollout/_rollout_report's functions, tested in
tests/unit/plugins/plugin_utils/rollout/test__rollout_report.py."""

from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError
from ansible_collections.fleetos.layering.plugins.filter import rollout
from ansible_collections.fleetos.layering.plugins.plugin_utils.rollout import _rollout_report


def hosts(spec):
    """'a:n1,n2 b:n3' -> [{host: n1, pool: a}, ...] in that order."""
    out = []
    for group in spec.split():
        pool, names = group.split(":")
        out += [{"host": name, "pool": pool} for name in names.split(",")]
    return out


@pytest.mark.parametrize(
    ("value", "size", "rounding", "expected"),
    [
        (1, 10, "down", 1),
        ("3", 10, "down", 3),
        ("25%", 12, "down", 3),
        ("25%", 10, "down", 2),
        ("25%", 10, "up", 3),
        ("10%", 3, "down", 1),  # floor is 0, the minimum keeps a small pool moving
        ("30%", 10, "down", 3),  # 30 * 10 / 100 is 2.9999... in floats
        ("100%", 7, "down", 7),
        ("0%", 7, "up", 1),
        (" 50 % ", 4, "down", 2),
        (0, 5, "down", 1),
    ],
)
def test_rollout_budget(value, size, rounding, expected):
    assert rollout.rollout_budget(value, size, rounding=rounding) == expected


def test_rollout_budget_minimum_zero():
    assert rollout.rollout_budget("10%", 3, minimum=0) == 0


@pytest.mark.parametrize("value", ["abc", "-1", -1, "150%", True, None, 1.5, "1.5"])
def test_rollout_budget_rejects(value):
    with pytest.raises(AnsibleFilterError, match="rollout_budget"):
        rollout.rollout_budget(value, 10)


def test_rollout_pool_budgets():
    items = [dict(h, max_unavailable="50%") for h in hosts("a:n1,n2,n3,n4")]
    items += [dict(h, max_unavailable=1) for h in hosts("b:n5,n6")]
    items.append({"host": "n7", "pool": "c"})
    assert rollout.rollout_pool_budgets(items) == {"a": 2, "b": 1, "c": 1}


def test_a_percentage_budget_is_of_the_pool_in_the_inventory_not_of_the_limited_run():
    # 10% of a 100-host pool is 10, whether the run is limited to 20 of its hosts or not.
    limited = [dict(h, max_unavailable="10%") for h in hosts("web:" + ",".join("w%02d" % i for i in range(20)))]
    inventory = ["web"] * 100 + ["db"] * 3
    assert rollout.rollout_pool_budgets(limited) == {"web": 2}
    assert rollout.rollout_pool_budgets(limited, inventory) == {"web": 10}
    assert rollout.rollout_pool_sizes(limited, inventory) == {"web": 100}
    # A pool the inventory names for fewer hosts than the run has (a host added at run time) keeps the run's count.
    assert rollout.rollout_pool_sizes(limited, ["web"] * 5) == {"web": 20}


@pytest.mark.parametrize("value", ["web", {"web": 3}, 3])
def test_rollout_pool_sizes_rejects_inventory_pools_that_are_not_a_list(value):
    with pytest.raises(AnsibleFilterError, match="inventory_pools must be a list"):
        rollout.rollout_pool_sizes([{"host": "n1", "pool": "web"}], value)


def test_rollout_pool_budgets_disagree():
    items = [{"host": "n1", "pool": "a", "max_unavailable": 1}, {"host": "n2", "pool": "a", "max_unavailable": 2}]
    with pytest.raises(AnsibleFilterError, match="n1 and n2 of pool 'a'"):
        rollout.rollout_pool_budgets(items)


def test_filters_registered():
    names = set(rollout.FilterModule().filters())
    assert names == {"rollout_budget", "rollout_pool_budgets", "rollout_pool_sizes", "rollout_pool_windows", "rollout_report",
                     "rollout_report_markdown", "rollout_timeline_svg"}
    filters = rollout.FilterModule().filters()
    for name in ("rollout_report", "rollout_report_markdown", "rollout_timeline_svg"):
        assert filters[name] is getattr(_rollout_report, name)


def test_rollout_pool_windows_says_where_each_pool_stands_in_its_zone_and_in_utc():
    weekend = [{"days": ["Sat", "Sun"], "start": "02:00", "length_minutes": 240}]
    hosts = [
        {"inventory_hostname": "n1", "fleetos_pool": "blue", "fleetos_rollout_windows": weekend,
         "fleetos_rollout_windows_timezone": "Europe/Berlin"},
        {"inventory_hostname": "n2", "fleetos_pool": "blue", "fleetos_rollout_windows": weekend,
         "fleetos_rollout_windows_timezone": "Europe/Berlin"},
        {"inventory_hostname": "n3", "fleetos_pool": "green"},
        {"inventory_hostname": "n4", "fleetos_pool": "red", "fleetos_rollout_windows": weekend},
        {"inventory_hostname": "n5", "fleetos_pool": "plain", "fleetos_rollout_windows": []},
        {"inventory_hostname": "n8", "fleetos_pool": "amber", "fleetos_rollout_windows": []},
        {"inventory_hostname": "n9", "fleetos_pool": "amber", "fleetos_rollout_windows": weekend},
        {"inventory_hostname": "n6", "fleetos_pool": "gold", "fleetos_rollout_windows": weekend},
        {"inventory_hostname": "n7", "fleetos_pool": "gold", "fleetos_rollout_windows": weekend,
         "fleetos_rollout_windows_timezone": "Asia/Tokyo"},
    ]
    # Saturday 2026-12-05 01:30 UTC: 02:30 in Berlin (open until 06:00, 05:00 UTC), 01:30 in UTC (closed).
    found = rollout.rollout_pool_windows(hosts, now=1796434200)
    assert sorted(found) == ["amber", "blue", "gold", "red"]
    assert found["amber"]["problem"] == "the hosts n8 and n9 have different maintenance windows"
    assert found["blue"]["open"] and found["blue"]["closes_at"] == "2026-12-05T05:00:00+00:00"
    assert found["blue"]["text"] == ("pool blue: inside a maintenance window until 2026-12-05 06:00 Europe/Berlin"
                                     " (2026-12-05 05:00 UTC); the next opens at 2026-12-06 02:00 Europe/Berlin"
                                     " (2026-12-06 01:00 UTC)")
    assert not found["red"]["open"] and found["red"]["next_open"] == "2026-12-05T02:00:00+00:00"
    assert found["red"]["text"] == "pool red: outside its maintenance windows; the next opens at 2026-12-05 02:00 UTC"
    assert found["gold"]["text"] == "pool gold: the hosts n6 and n7 have different maintenance windows"
    with pytest.raises(AnsibleFilterError):
        rollout.rollout_pool_windows("n1")
