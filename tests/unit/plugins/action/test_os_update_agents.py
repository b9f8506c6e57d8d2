# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""os_update_agents: the action plugin on a faked connection; the agents are read in one command, turned off, and
the diff shown only when the task asks for one. What each agent does and how it is turned off:
tests/unit/plugins/module_utils/host/test__update_agents.py."""

from __future__ import annotations

from unittest.mock import MagicMock

import pytest

from ansible_collections.fleetos.layering.tests.unit.plugins.action.utils import fake_host, new_action
from ansible_collections.fleetos.layering.tests.unit.plugins.module_utils.host.test__update_agents import probe_output
from ansible_collections.fleetos.layering.plugins.action import os_update_agents
from ansible_collections.fleetos.layering.plugins.module_utils.host import _update_agents

TIMER = "bootc-fetch-apply-updates.timer"
BOOTC_ON = probe_output({TIMER: ("enabled", "active")}).decode("utf-8", "surrogateescape")
NONE_ON = probe_output().decode("utf-8", "surrogateescape")


def run(args, check_mode=False, diff=False):
    connection = MagicMock()
    connection.transport = "ssh"
    action = new_action(os_update_agents, dict(args), check_mode=check_mode, connection=connection)
    action._task.diff = diff
    return action.run(task_vars={})


@pytest.fixture
def fake(monkeypatch):
    return fake_host(monkeypatch)


def _argvs(fake):
    return [argv for argv, _data in fake["calls"]]


@pytest.mark.parametrize("diff", [False, True])
def test_check_mode_predicts_and_changes_nothing(fake, diff):
    fake["results"] = [(0, BOOTC_ON, "")]
    result = run({}, check_mode=True, diff=diff)
    assert (result["changed"], result["disabled"]) == (True, ["bootc"]) and not result.get("failed")
    assert _argvs(fake) == [_update_agents.probe_argv()]
    if diff:
        assert result["diff"] == [{"before_header": TIMER, "after_header": TIMER, "before": "enabled, active\n",
                                   "after": "masked, inactive\n"}]
    else:
        assert "diff" not in result


def test_an_agent_on_is_turned_off_and_then_nothing_changes(fake):
    fake["results"] = [(0, BOOTC_ON, ""), (0, "", "")]
    result = run({})
    assert (result["changed"], result["actions"]) == (True, ["bootc: %s masked and stopped" % TIMER])
    assert _argvs(fake) == [_update_agents.probe_argv(), ["systemctl", "mask", "--now", TIMER]]
    fake["calls"].clear()
    fake["results"] = [(0, NONE_ON, "")]
    result = run({}, diff=True)
    assert (result["changed"], result["disabled"], result["diff"]) == (False, [], [])
    assert _argvs(fake) == [_update_agents.probe_argv()]


def test_a_probe_that_fails_fails_the_task_in_one_sentence(fake):
    fake["results"] = [(1, "", "sh: systemctl: Permission denied\n")]
    result = run({})
    assert result["failed"] is True
    assert result["msg"] == "Failed to read the update agents of the host: sh: systemctl: Permission denied."


@pytest.mark.parametrize(("args", "said"), [
    ({"state": "enabled"}, "state must be one of disabled, got 'enabled'."),
    ({"agents": ["zincati"]}, "module: agents. Supported parameters include: state."),
])
def test_bad_arguments_fail_before_anything_runs(fake, args, said):
    result = run(args)
    assert result["failed"] is True and said in result["msg"], result["msg"]
    assert fake["calls"] == []
