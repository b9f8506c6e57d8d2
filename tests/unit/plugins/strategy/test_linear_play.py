# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The strategy fleetos.layering.linear in a real ansible-playbook, against ansible-core's linear strategy: the same
play (includes, meta tasks, a rescued block, failed and ended hosts, a slow host) over more hosts than
forks, so that hosts wait for a free fork, must run the same tasks in the same order of tasks."""

from __future__ import annotations

import re

from ansible_collections.fleetos.layering.tests.unit.plugins.strategy.test_slots_play import run


def _tasks(output):
    """The task headers in the order they were printed: linear's lockstep."""
    return re.findall(r"^TASK \[(.*)\]", output, re.M)


def test_the_play_runs_as_with_ansible_core_s_linear_strategy(tmp_path):
    linear, linear_recap, linear_said = run(tmp_path, "linear")[:3]
    ours, ours_recap, ours_said = run(tmp_path, "fleetos.layering.linear")[:3]
    assert linear.returncode == ours.returncode == 2, ours.stdout
    assert len(ours_recap) == 8 and ours_recap == linear_recap, (linear.stdout, ours.stdout)
    assert ours_said == linear_said
    assert _tasks(ours.stdout) == _tasks(linear.stdout) and len(_tasks(ours.stdout)) >= 8
    assert "done h8 here False" in ours_said and "done h2 here True" in ours_said
