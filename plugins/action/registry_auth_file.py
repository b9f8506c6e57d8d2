# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Action plugin of fleetos.layering.registry_auth_file (documented in plugins/modules/registry_auth_file.py):
the auth file is read and written on the host over the connection (plugin_utils/host/_auth_file.py decides)."""

from __future__ import annotations

from ansible_collections.fleetos.layering.plugins.plugin_utils.host import _auth_file
from ansible_collections.fleetos.layering.plugins.plugin_utils.host._remote import HostStep


class ActionModule(HostStep):
    ARGUMENT_SPEC = _auth_file.ARGUMENT_SPEC
    SPEC_KWARGS = {"required_if": _auth_file.REQUIRED_IF}
    WHAT = "install the registry auth file"

    def step(self, host, args, check_mode):
        return _auth_file.install(host, args, check_mode)
