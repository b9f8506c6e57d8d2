# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Action plugin of fleetos.layering.oscontainer_rebase: the module itself runs on the host and needs a
Python interpreter there, the only one of the collection's host-side modules that does. On a host
without one, the failure says so in one sentence instead of the shell's "not found"."""

from __future__ import annotations

from ansible.plugins.action import ActionBase

# What the host's shell says when the interpreter the module was sent to does not exist.
_MISSING = ("not found", "No such file or directory")


def missing_interpreter(result):
    """Whether a module result is the host's shell failing to start the module's interpreter."""
    if not result.get("failed") or result.get("rc") not in (126, 127):
        return False
    said = "%s\n%s" % (result.get("module_stderr") or "", result.get("module_stdout") or "")
    return any(words in said for words in _MISSING)


class ActionModule(ActionBase):
    def run(self, tmp=None, task_vars=None):
        self._supports_check_mode = True
        self._supports_async = True
        result = super().run(tmp, task_vars)
        del tmp
        wrap_async = self._task.async_val and not self._connection.has_native_async
        result.update(self._execute_module(task_vars=task_vars, wrap_async=wrap_async))
        if missing_interpreter(result):
            task_vars = task_vars or {}
            interpreter = (task_vars.get("ansible_python_interpreter")
                           or (result.get("ansible_facts") or {}).get("discovered_interpreter_python") or "Python")
            host = task_vars.get("inventory_hostname", "the host")
            result = dict(failed=True, changed=False, rc=result.get("rc"), module_stderr=result.get("module_stderr"),
                          msg="oscontainer_rebase needs a Python interpreter on the host and %s has none (%s was "
                              "not found): a legacy oscontainer is unpacked by a Python module on the host; "
                              "bootable images need none (fleetos.layering.rpm_ostree_rebase)." % (host, interpreter))
        if not wrap_async:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        return result
