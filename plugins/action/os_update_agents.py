# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Action plugin of fleetos.layering.os_update_agents (documented in plugins/modules/os_update_agents.py): the
agents are read over the connection in one command, module_utils/host/_update_agents.py decides and turns them off."""

from __future__ import annotations

from ansible_collections.fleetos.layering.plugins.module_utils.host import _update_agents
from ansible_collections.fleetos.layering.plugins.plugin_utils.host._remote import HostStep


class ActionModule(HostStep):
    ARGUMENT_SPEC = _update_agents.ARGUMENT_SPEC
    WHAT = "turn off the update agents of the host"

    def step(self, host, args, check_mode):
        result = _update_agents.disable(host, check_mode=check_mode)
        diff = result.pop("diff")
        if self._task.diff:
            result["diff"] = diff
        return result
