# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Action plugin of fleetos.layering.bootc_info (documented in plugins/modules/bootc_info.py): bootc
runs on the host over the connection, module_utils/host/_bootc.py parses its JSON here."""

from __future__ import annotations

from ansible_collections.fleetos.layering.plugins.module_utils.host import _bootc
from ansible_collections.fleetos.layering.plugins.module_utils.images._image_ref import oci_architecture
from ansible_collections.fleetos.layering.plugins.plugin_utils.host._remote import HostStep


class ActionModule(HostStep):
    ARGUMENT_SPEC = _bootc.BOOTC_ARGS
    WHAT = "read the bootc status"

    def step(self, host, args, check_mode):
        status = _bootc.BootcClient(host, executable=args["executable"]).status()
        booted = status["booted"] or {}
        architecture = booted.get("architecture") or oci_architecture(host.machine())
        return dict(status, changed=False, architecture=architecture)
