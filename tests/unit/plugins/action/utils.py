# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Shared harness for the action plugin unit tests: an action plugin of the collection, built as
Ansible's task executor builds it, around a fake task and connection."""

from __future__ import annotations

from unittest.mock import MagicMock

from ansible.playbook.task import Task


def new_action(plugin_module, args, check_mode=False, connection=None):
    """``plugin_module.ActionModule`` for a task with ``args``; -> the action."""
    task = MagicMock(Task)
    task.args = args
    task.async_val = 0
    task.check_mode = check_mode
    if connection is None:
        connection = MagicMock()
    connection._shell.tmpdir = None
    return plugin_module.ActionModule(task, connection, MagicMock(), MagicMock(), MagicMock(), MagicMock())
