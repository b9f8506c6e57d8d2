# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Action plugin of fleetos.layering.bootc_switch (documented in plugins/modules/bootc_switch.py):
bootc and skopeo run on the host over the connection, plugin_utils/host/_switch.py decides here."""

from __future__ import annotations

from ansible_collections.fleetos.layering.plugins.plugin_utils.host import _switch
from ansible_collections.fleetos.layering.plugins.plugin_utils.host._remote import HostStep


class ActionModule(HostStep):
    ARGUMENT_SPEC = _switch.ARGUMENT_SPEC
    WHAT = "switch the bootc host to the image"

    def step(self, host, args, check_mode):
        return _switch.switch(host, args, check_mode)
