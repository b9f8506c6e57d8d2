# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""bench/scale.py's pure parts: each pool's budget, the journal's most hosts down at once, the summary line."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[3] / "bench"
if not (BENCH / "scale.py").is_file():
    pytest.skip("bench/scale.py is not in this tree", allow_module_level=True)
sys.path.insert(0, str(BENCH))
_SPEC = importlib.util.spec_from_file_location("bench_scale", str(BENCH / "scale.py"))
scale = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(scale)


@pytest.mark.parametrize("value, size, expected", [
    ("10%", 100, 10), ("10%", 25, 2), ("10%", 6, 1), ("10%", 0, 1), ("30%", 10, 3), (3, 10, 3), ("2", 10, 2)])
def test_budget_of(value, size, expected):
    assert scale.budget_of(value, size) == expected


def test_reboot_spans_pair_each_reboot_with_the_next_boot():
    events = [{"event": "boot", "node": "a", "ts": 1.0}, {"event": "reboot", "node": "a", "ts": 2.0},
              {"event": "reboot", "node": "b", "ts": 2.5}, {"event": "boot", "node": "a", "ts": 5.0},
              {"event": "boot", "node": "b", "ts": 6.0}]
    assert scale.reboot_spans(events) == [("a", 2.0, 5.0), ("b", 2.5, 6.0)]


def test_over_budget_names_the_pools_with_too_many_down():
    spans = [("a", 0, 10), ("b", 5, 15), ("c", 10, 20), ("d", 0, 3)]
    pools = {"p1": ["a", "b", "c"], "p2": ["d"]}
    assert scale.max_down([s for s in spans if s[0] in pools["p1"]]) == 2    # c starts as a ends
    assert scale.over_budget(spans, pools, {"p1": 1, "p2": 1}) == {"p1": 2}
    assert scale.over_budget(spans, pools, {"p1": 2, "p2": 1}) == {}


def test_summary_line():
    def fig(cpu, ratio=1.1, peak=900.0, rerun=60.0):
        return {"rollout": {"over_pooled_floor": ratio, "cpu_s_per_host": cpu, "peak_rss_with_ssh_masters_mib": peak},
                "rerun": {"wall_s": rerun}}
    line = scale.summary_line({250: fig(0.5), 1000: fig(0.55, 1.15, 3000.4, 170.26)})
    assert line == ("scale: hosts 1000 rollout/pooled 1.150 cpu_per_host_250 0.500 cpu_per_host_1000 0.550 "
                    "peak_mib 3000 rerun_s 170.3")
