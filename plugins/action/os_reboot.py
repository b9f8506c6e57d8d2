# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Action plugin of fleetos.layering.os_reboot (documented in plugins/modules/os_reboot.py).

The reboot and the wait for the new boot id are plugin_utils/host/_reboot.py's, shared with
fleetos.layering.os_activate_slot.
"""

from __future__ import annotations

import time

from ansible.plugins.action import ActionBase

from ansible_collections.fleetos.layering.plugins.module_utils._errors import InvalidInputError
from ansible_collections.fleetos.layering.plugins.module_utils import _params
from ansible_collections.fleetos.layering.plugins.plugin_utils.host import _reboot

ARGUMENT_SPEC = _reboot.ARGUMENT_SPEC
# The options that are shell commands: several lines and tabs are fine there.
COMMANDS = ("reboot_command", "boot_time_command")


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)

    # Seams for the unit tests.
    _clock = staticmethod(time.monotonic)
    _sleep = staticmethod(time.sleep)

    def run(self, tmp=None, task_vars=None):
        self._supports_check_mode = True
        result = super().run(tmp, task_vars)
        result.update(changed=False, rebooted=False, went_down=False, elapsed=0.0, boot_id_before=None, boot_id=None)
        # Checked as given first: the argument spec would run a list given as a command as its Python text.
        try:
            _params.check_arguments(ARGUMENT_SPEC, self._task.args, text_options=COMMANDS)
        except InvalidInputError as exc:
            result.update(failed=True, msg=exc.msg)
            return result
        args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)[1]

        if self._connection.transport == "local":
            result.update(failed=True, msg="Refusing to reboot the controller (connection local).")
            return result
        problem = _reboot.check_arguments(args)
        if problem:
            result.update(failed=True, msg=problem)
            return result
        if self._task.check_mode:
            result.update(changed=True)
            return result

        result.update(_reboot.reboot(self, args))
        if result.get("boot_id_before") is not None:
            result["cmd"] = args["reboot_command"]   # it ran
        return result
