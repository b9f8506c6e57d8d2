# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The action plugin of oscontainer_rebase: the options checked as given before the module is sent, and a host
without the module's Python interpreter named in one sentence (the module itself:
tests/unit/plugins/modules/test_oscontainer_rebase.py)."""

from __future__ import annotations

import pytest

from ansible_collections.fleetos.layering.plugins.action import oscontainer_rebase
from ansible_collections.fleetos.layering.tests.unit.plugins.action.utils import module_action_refusal, run_module_action

DIGEST = "sha256:" + "ab" * 32
REBASE = {"image": "registry.example/fleetos/legacy@" + DIGEST}
NOT_FOUND = "/bin/sh: /usr/bin/python3: not found\n"


def missing(stderr=NOT_FOUND, stdout="", rc=127, **extra):
    """The module result of a host whose shell did not start the interpreter."""
    return dict({"failed": True, "rc": rc, "module_stdout": stdout, "module_stderr": stderr, "msg": "MODULE FAILURE"},
                **extra)


def sentence(host, interpreter):
    return ("oscontainer_rebase needs a Python interpreter on the host and %s has none (%s was not found): a legacy "
            "oscontainer is unpacked by a Python module on the host; bootable images need none "
            "(fleetos.layering.rpm_ostree_rebase)." % (host, interpreter))


@pytest.mark.parametrize(("args", "message"), [
    (dict(REBASE, custom_description="two\nlines"),
     "custom_description contains a control character (U+000A LF): expected one line of printable text."),
    (dict(REBASE, lock_finalization="perhaps"),
     "lock_finalization must be a boolean (true or false), got the string 'perhaps'."),
])
def test_bad_input_fails_before_the_module_is_sent(args, message):
    assert module_action_refusal(oscontainer_rebase, args) == message


@pytest.mark.parametrize("module_result", [
    {"changed": True, "digest": DIGEST},
    {"failed": True, "changed": False, "rc": 1, "msg": "Failed to rebase."},
])
def test_good_input_runs_the_module_and_a_result_of_the_module_is_passed_on(module_result):
    result, calls = run_module_action(oscontainer_rebase, REBASE, module_result=module_result)
    assert {key: result[key] for key in module_result} == module_result
    assert [call["wrap_async"] for call in calls] == [0]


@pytest.mark.parametrize(("result", "expected"), [
    (missing(), True),
    (missing(rc=126, stderr="/bin/sh: 1: /usr/libexec/platform-python: No such file or directory\n"), True),
    # Some shells say it on stdout (a pty).
    (missing(stderr=None, stdout="sh: /usr/bin/python3: not found"), True),
    # The module started and failed: its own failure, whatever it says.
    (missing(rc=1, stderr="FileNotFoundError: [Errno 2] No such file or directory: '/sysroot'"), False),
    (missing(stderr="/bin/sh: permission denied"), False),
    (dict(missing(), failed=False), False),
    ({"changed": True}, False),
])
def test_missing_interpreter(result, expected):
    assert oscontainer_rebase.missing_interpreter(result) is expected


def test_a_host_without_python_is_named():
    result, _calls = run_module_action(oscontainer_rebase, REBASE, module_result=missing(),
                                       task_vars={"inventory_hostname": "node01",
                                                  "ansible_python_interpreter": "/usr/bin/python3"})
    assert result == {"failed": True, "changed": False, "rc": 127, "module_stderr": NOT_FOUND,
                      "msg": sentence("node01", "/usr/bin/python3")}


@pytest.mark.parametrize(("task_vars", "facts", "named"), [
    # Without ansible_python_interpreter, the interpreter ansible-core discovered...
    ({"inventory_hostname": "node02"}, {"discovered_interpreter_python": "/usr/bin/python3.9"},
     ("node02", "/usr/bin/python3.9")),
    # ...or neither, and no host name either.
    ({}, None, ("the host", "Python")),
])
def test_the_sentence_names_the_interpreter_it_looked_for(task_vars, facts, named):
    result, _calls = run_module_action(oscontainer_rebase, REBASE, module_result=missing(ansible_facts=facts),
                                       task_vars=task_vars)
    assert result["msg"] == sentence(*named)
