# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""bench/soft_reboot.py (bench/rollout.py --soft-reboot auto): what it prints from its figures.

bench/ is not part of the collection (the copy ansible-test sees has no bench/): the module is
loaded from the working tree by path, and these tests are skipped where it is missing.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[3] / "bench"
if not (BENCH / "soft_reboot.py").is_file() or not (BENCH.parent / "lab" / "fleetlablib").is_dir():
    pytest.skip("bench/soft_reboot.py or lab/fleetlablib is not in this tree", allow_module_level=True)
pytest.importorskip("yaml")
sys.path.insert(0, str(BENCH))
_SPEC = importlib.util.spec_from_file_location("bench_soft_reboot", str(BENCH / "soft_reboot.py"))
soft = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(soft)


def _run(wall, kinds, downs):
    counts = {"full": list(kinds.values()).count("full"), "soft": list(kinds.values()).count("soft")}
    return {"wall_s": wall, "cpu_s": 1.0, "kinds": kinds, "counts": counts,
            "disruption_s": {"min": min(downs), "median": sorted(downs)[len(downs) // 2], "max": max(downs),
                             "per_host": {}}, "reboot_events": {}}


RESULT = {
    "timestamp": "20261206-090000",
    "settings": {"nodes": ["node11", "node12"], "pools": {"bench-a": ["node11"], "bench-b": ["node12"]},
                 "budget_per_pool": 1, "boot_delay_s": 10, "lab_boot_delay_s": 0, "slow_boot_fault_s": 10,
                 "userspace_share": 0.35, "rate": "80mbit", "size_mb": 50, "forks": 2},
    "soft": _run(30.25, {"node11": "soft", "node12": "soft"}, [3.6, 3.8]),
    "full": _run(50.0, {"node11": "full", "node12": "full"}, [10.4, 10.6]),
    "kernel_half": _run(40.0, {"node11": "soft", "node12": "full"}, [3.7, 10.5]),
    "ratio": 0.605,
}


def test_the_summary_line_comes_last_and_reads_as_the_issue_asks(capsys):
    soft.show(RESULT)
    lines = capsys.readouterr().out.splitlines()
    assert lines[2].startswith("soft       : rollout   30.2 s, disruption per host min 3.6 / median 3.8 / max 3.8 s")
    assert "reboots {'full': 1, 'soft': 1}" in lines[4]
    assert soft.summary_line(RESULT) == "soft-reboot: rollout soft 30.2 s full 50.0 s ratio 0.605"
