# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Action plugin of fleetos.layering.os_image_compose (documented in plugins/modules/os_image_compose.py):
the options checked as given, then the module run (plugin_utils/host/_module_action.py)."""

from __future__ import annotations

from ansible_collections.fleetos.layering.plugins.module_utils.images import _compose
from ansible_collections.fleetos.layering.plugins.plugin_utils.host._module_action import ModuleAction


class ActionModule(ModuleAction):
    ARGUMENT_SPEC = _compose.ARGUMENT_SPEC
