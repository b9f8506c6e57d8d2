# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The action plugin of os_image_compose: the options checked as given before the module is sent, the module's
result passed on (the module itself: tests/unit/plugins/modules/test_os_image_compose.py)."""

from __future__ import annotations

import pytest

from ansible_collections.fleetos.layering.plugins.action import os_image_compose
from ansible_collections.fleetos.layering.tests.unit.plugins.action.utils import module_action_refusal, run_module_action

DIGEST = "sha256:" + "ab" * 32
COMPOSE = {"base": "registry.example/os/base:1.0", "output": "registry.example/os/worker",
           "layers": [{"name": "kubelet", "image": "registry.example/os/kubelet:1.31"}]}


@pytest.mark.parametrize(("args", "message"), [
    (dict(COMPOSE, base=["a", "b"]), "base must be a string, got a list."),
    (dict(COMPOSE, output="x" * 100000), "output is 100000 characters long: expected at most 4096."),
    (dict(COMPOSE, retries="many"), "retries must be an integer, got the string 'many'."),
])
def test_bad_input_fails_before_the_module_is_sent(args, message):
    assert module_action_refusal(os_image_compose, args) == message


def test_good_input_runs_the_module_and_passes_its_result_on():
    result, calls = run_module_action(os_image_compose, COMPOSE, module_result={"changed": True, "digest": DIGEST})
    assert (result["changed"], result["digest"]) == (True, DIGEST) and not result.get("failed")
    assert len(calls) == 1 and calls[0]["wrap_async"] == 0


def test_a_failure_is_passed_on_as_the_module_gave_it():
    # A shell that found no interpreter too: naming it is oscontainer_rebase's alone (it runs on the host).
    failed = {"failed": True, "changed": False, "rc": 127, "module_stdout": "",
              "module_stderr": "/bin/sh: /usr/bin/python3: not found\n", "msg": "MODULE FAILURE"}
    result, calls = run_module_action(os_image_compose, COMPOSE, module_result=failed)
    assert {key: result[key] for key in failed} == failed
    assert len(calls) == 1
