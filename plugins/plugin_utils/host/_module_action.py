# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# This is a private plugin_util of fleetos.layering: its interface may change at any
# time and it is not meant to be used by other collections.

"""The action plugin of a Python module: the options checked as given, then the module run.

AnsibleModule converts before any code of the module sees the options (a list given for a
string becomes its Python text) and echoes a value it refuses in full; a module has no public
way to read its options as given. So its action plugin checks the task's arguments with
``module_utils._params.check_arguments``, as the host-side steps do (``_remote.HostStep``),
and fails with that sentence before the module is sent anywhere.
"""

from __future__ import annotations

from ansible.module_utils.common.parameters import remove_values
from ansible.plugins.action import ActionBase

from ansible_collections.fleetos.layering.plugins.module_utils import _params
from ansible_collections.fleetos.layering.plugins.module_utils._errors import InvalidInputError


class ModuleAction(ActionBase):
    """Runs the module of the same name once its options pass ``_params.check_arguments``.

    A subclass sets ARGUMENT_SPEC (the module's, from the module_utils its module file imports)
    and TEXT_OPTIONS, and may turn the module's result into another with :meth:`module_result`.
    """

    ARGUMENT_SPEC = {}
    TEXT_OPTIONS = ()

    def module_result(self, result, task_vars):
        """The task's result from the module's ``result``."""
        return result

    def run(self, tmp=None, task_vars=None):
        self._supports_check_mode = True
        self._supports_async = True
        result = super().run(tmp, task_vars)
        del tmp
        try:
            _params.check_arguments(self.ARGUMENT_SPEC, self._task.args, self.TEXT_OPTIONS)
        except InvalidInputError as exc:
            result.update(failed=True, changed=False, msg=exc.msg)
            # As the module's no_log_values would: a secret option's value never shows.
            return remove_values(result, _params.no_log_values(self.ARGUMENT_SPEC, self._task.args))
        wrap_async = self._task.async_val and not self._connection.has_native_async
        result.update(self._execute_module(task_vars=task_vars, wrap_async=wrap_async))
        result = self.module_result(result, task_vars or {})
        if not wrap_async:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        return result
