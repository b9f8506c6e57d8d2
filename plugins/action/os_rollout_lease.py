# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Action plugin of fleetos.layering.os_rollout_lease (documented in plugins/modules/os_rollout_lease.py):
the lease file is read and replaced on the host over the connection (module_utils/_lease.py decides)."""

from __future__ import annotations

from ansible_collections.fleetos.layering.plugins.module_utils import _lease
from ansible_collections.fleetos.layering.plugins.plugin_utils._remote import HostStep


class ActionModule(HostStep):
    ARGUMENT_SPEC = _lease.ARGUMENT_SPEC
    WHAT = "update the rollout lease"

    def step(self, host, args, check_mode):
        return _lease.task_result(host, args, check_mode)
