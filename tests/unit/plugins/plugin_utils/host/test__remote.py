# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""plugin_utils/host/_remote: a host-side step under become whose sudo refuses fails with one sentence naming
the host and the step; other connection errors stay the connection's own."""

from __future__ import annotations

from unittest.mock import MagicMock

import pytest
from ansible.errors import AnsibleConnectionFailure, AnsibleError
from ansible.plugins.action import ActionBase

from ansible_collections.fleetos.layering.plugins.action import os_info
from ansible_collections.fleetos.layering.tests.unit.plugins.action.utils import new_action


def _action(monkeypatch, error, become="sudo"):
    def execute(self, cmd, sudoable=True, in_data=None, executable=None, encoding_errors=None, chdir=None):
        raise error

    monkeypatch.setattr(ActionBase, "_low_level_execute_command", execute)
    connection = MagicMock()
    connection.transport = "ssh"
    connection.get_option.side_effect = lambda name: {"remote_user": "core", "use_tty": False}[name]
    if become:
        connection.become.name = become
    else:
        connection.become = None
    return new_action(os_info, {}, connection=connection)


@pytest.mark.parametrize("become,cause", [
    ("sudo", "Missing sudo password"),
    ("ansible.builtin.sudo", "Incorrect sudo password"),
    ("su", "Timeout (12s) waiting for privilege escalation prompt: "),
])
def test_a_refused_become_is_one_sentence_naming_the_host_and_the_step(monkeypatch, become, cause):
    action = _action(monkeypatch, AnsibleError(cause), become=become)
    result = action.run(task_vars={"inventory_hostname": "fcos-01"})
    method = become.rsplit(".", 1)[-1]
    assert result["failed"] is True
    assert result["msg"] == ("Failed to read the deployments of the host: %s refused to make core root on fcos-01 (%s); "
                             "give the user the right or set ansible_become_password." % (method, cause.strip().rstrip(":")))


def test_without_become_a_connection_error_stays_the_connections(monkeypatch):
    action = _action(monkeypatch, AnsibleError("Missing sudo password"), become=None)
    with pytest.raises(AnsibleError, match="Missing sudo password"):
        action.run(task_vars={"inventory_hostname": "fcos-01"})


def test_an_unreachable_host_under_become_stays_unreachable(monkeypatch):
    action = _action(monkeypatch, AnsibleConnectionFailure("ssh: connect to host fcos-01 port 22: Connection refused"))
    with pytest.raises(AnsibleConnectionFailure):
        action.run(task_vars={"inventory_hostname": "fcos-01"})


@pytest.mark.parametrize("stderr,cause", [
    ("core is not in the sudoers file.\n", "core is not in the sudoers file"),
    ("Sorry, user core is not allowed to execute '/bin/sh -c echo BECOME-SUCCESS-x' as root on fcos-01.\n",
     "Sorry, user core is not allowed to execute '/bin/sh -c echo BECOME-SUCCESS-x' as root on fcos-01"),
])
def test_a_sudo_policy_refusal_is_one_sentence_too(monkeypatch, stderr, cause):
    def execute(self, cmd, sudoable=True, in_data=None, executable=None, encoding_errors=None, chdir=None):
        return {"rc": 1, "stdout": "", "stderr": stderr}

    action = _action(monkeypatch, None)
    monkeypatch.setattr(ActionBase, "_low_level_execute_command", execute)
    result = action.run(task_vars={"inventory_hostname": "fcos-01"})
    assert result["msg"] == ("Failed to read the deployments of the host: sudo refused to make core root on fcos-01 (%s); "
                             "give the user the right or set ansible_become_password." % cause)


def test_a_failing_command_under_become_is_the_commands_failure(monkeypatch):
    def execute(self, cmd, sudoable=True, in_data=None, executable=None, encoding_errors=None, chdir=None):
        return {"rc": 1, "stdout": "", "stderr": "error: Loading sysroot: No such file or directory\n"}

    action = _action(monkeypatch, None)
    monkeypatch.setattr(ActionBase, "_low_level_execute_command", execute)
    result = action.run(task_vars={"inventory_hostname": "fcos-01"})
    assert "sudo" not in result["msg"] and "Loading sysroot" in result["msg"], result["msg"]
