# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Action plugin of fleetos.layering.os_image_stage (documented in plugins/modules/os_image_stage.py): the
host's backend (plugin_utils/host/_backends.py) stages the image over the connection."""

from __future__ import annotations

from ansible_collections.fleetos.layering.plugins.plugin_utils.host import _backends
from ansible_collections.fleetos.layering.plugins.plugin_utils.host._remote import HostStep


class ActionModule(HostStep):
    ARGUMENT_SPEC = _backends.STAGE_ARGS
    SPEC_KWARGS = {"required_if": _backends.STAGE_REQUIRED_IF}
    WHAT = "stage the image"

    def step(self, host, args, check_mode):
        result = _backends.backend(args["backend"]).stage(host, args, check_mode)
        result["backend"] = args["backend"]
        return result
