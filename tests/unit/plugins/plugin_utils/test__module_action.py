# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The action plugins of the Python modules (os_image_compose, oscontainer_rebase): the options checked as
given before the module is sent, the module's result passed on, a missing interpreter named."""

from __future__ import annotations

import types

import pytest

from ansible_collections.fleetos.layering.plugins.action import os_image_compose, oscontainer_rebase
from ansible_collections.fleetos.layering.plugins.plugin_utils._module_action import ModuleAction
from ansible_collections.fleetos.layering.tests.unit.plugins.action.utils import new_action

DIGEST = "sha256:" + "ab" * 32
COMPOSE = {"base": "registry.example/os/base:1.0", "output": "registry.example/os/worker",
           "layers": [{"name": "kubelet", "image": "registry.example/os/kubelet:1.31"}]}
REBASE = {"image": "registry.example/fleetos/legacy@" + DIGEST}


def run(plugin_module, args, module_result=None, task_vars=None):
    """(the action's result, the module runs it asked for) for a task with ``args``."""
    action = new_action(plugin_module, dict(args))
    calls = []

    def execute_module(**kwargs):
        calls.append(kwargs)
        return dict(module_result or {"changed": True, "digest": DIGEST})

    action._execute_module = execute_module
    return action.run(task_vars=task_vars or {"inventory_hostname": "node01"}), calls


@pytest.mark.parametrize(("plugin_module", "args", "message"), [
    (os_image_compose, dict(COMPOSE, base=["a", "b"]), "base must be a string, got a list."),
    (os_image_compose, dict(COMPOSE, output="x" * 100000), "output is 100000 characters long: expected at most 4096."),
    (os_image_compose, dict(COMPOSE, retries="many"), "retries must be an integer, got the string 'many'."),
    (oscontainer_rebase, dict(REBASE, custom_description="two\nlines"),
     "custom_description contains a control character (U+000A LF): expected one line of printable text."),
    (oscontainer_rebase, dict(REBASE, lock_finalization="perhaps"),
     "lock_finalization must be a boolean (true or false), got the string 'perhaps'."),
])
def test_bad_input_fails_before_the_module_is_sent(plugin_module, args, message):
    result, calls = run(plugin_module, args)
    assert (result["failed"], result["changed"], result["msg"]) == (True, False, message)
    assert calls == []


@pytest.mark.parametrize(("plugin_module", "args"), [(os_image_compose, COMPOSE), (oscontainer_rebase, REBASE)])
def test_good_input_runs_the_module_and_passes_its_result_on(plugin_module, args):
    result, calls = run(plugin_module, args)
    assert (result["changed"], result["digest"]) == (True, DIGEST) and not result.get("failed")
    assert len(calls) == 1 and calls[0]["wrap_async"] == 0


def test_a_secret_never_shows_in_the_refusal():
    class Action(ModuleAction):
        ARGUMENT_SPEC = {"pin": {"type": "int", "no_log": True}}

    result, calls = run(types.SimpleNamespace(ActionModule=Action), {"pin": "s3cret"})
    assert result["msg"] == "pin must be an integer, got the string '********'." and calls == []


def test_a_host_without_python_is_named():
    missing = {"failed": True, "rc": 127, "module_stdout": "", "module_stderr": "/bin/sh: /usr/bin/python3: not found\n"}
    result, _calls = run(oscontainer_rebase, REBASE, module_result=missing,
                         task_vars={"inventory_hostname": "node01", "ansible_python_interpreter": "/usr/bin/python3"})
    assert result == {
        "failed": True, "changed": False, "rc": 127, "module_stderr": missing["module_stderr"],
        "msg": "oscontainer_rebase needs a Python interpreter on the host and node01 has none (/usr/bin/python3 was "
               "not found): a legacy oscontainer is unpacked by a Python module on the host; bootable images need "
               "none (fleetos.layering.rpm_ostree_rebase)."}
    failed = {"failed": True, "rc": 1, "msg": "Failed to rebase."}
    assert run(oscontainer_rebase, REBASE, module_result=failed)[0]["msg"] == "Failed to rebase."
