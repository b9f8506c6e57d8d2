# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""ModuleAction, the action plugin of a Python module: the options checked as given before the module is sent,
the module's result passed on through module_result. Its plugins (os_image_compose, oscontainer_rebase) are
tested in tests/unit/plugins/action/."""

from __future__ import annotations

import types

from ansible_collections.fleetos.layering.plugins.plugin_utils.host._module_action import ModuleAction
from ansible_collections.fleetos.layering.tests.unit.plugins.action.utils import module_action_refusal, run_module_action


class Action(ModuleAction):
    ARGUMENT_SPEC = {"count": {"type": "int"}, "pin": {"type": "int", "no_log": True}}

    def module_result(self, result, task_vars):
        return dict(result, seen_by=task_vars["inventory_hostname"])


PLUGIN = types.SimpleNamespace(ActionModule=Action)


def test_bad_input_fails_before_the_module_is_sent():
    assert module_action_refusal(PLUGIN, {"count": "many"}) == "count must be an integer, got the string 'many'."


def test_good_input_runs_the_module_once_and_module_result_gives_the_tasks_result():
    result, calls = run_module_action(PLUGIN, {"count": 2}, module_result={"changed": False, "count": 2})
    assert (result["changed"], result["count"], result["seen_by"]) == (False, 2, "node01")
    assert [call["wrap_async"] for call in calls] == [0]


def test_a_secret_never_shows_in_the_refusal():
    assert module_action_refusal(PLUGIN, {"pin": "s3cret"}) == "pin must be an integer, got the string '********'."
