# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Action plugin of fleetos.layering.ostree_origin (documented in plugins/modules/ostree_origin.py): the
origin file is read and replaced by shell scripts on the host over the connection, plugin_utils/host/_origin_edit.py
edits it here."""

from __future__ import annotations

from ansible_collections.fleetos.layering.plugins.plugin_utils.host import _origin_edit
from ansible_collections.fleetos.layering.plugins.plugin_utils.host._remote import HostStep


class ActionModule(HostStep):
    ARGUMENT_SPEC = _origin_edit.ARGUMENT_SPEC
    SPEC_KWARGS = {"mutually_exclusive": _origin_edit.MUTUALLY_EXCLUSIVE}
    WHAT = "edit the origin"

    def step(self, host, args, check_mode):
        return _origin_edit.task_result(host, args, check_mode)
