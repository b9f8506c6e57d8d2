# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Action plugin of fleetos.layering.rpm_ostree_rebase (documented in plugins/modules/rpm_ostree_rebase.py):
rpm-ostree and skopeo run on the host over the connection, plugin_utils/host/_rebase.py decides here."""

from __future__ import annotations

from ansible_collections.fleetos.layering.plugins.plugin_utils.host import _rebase
from ansible_collections.fleetos.layering.plugins.plugin_utils.host._remote import HostStep


class ActionModule(HostStep):
    ARGUMENT_SPEC = _rebase.ARGUMENT_SPEC
    SPEC_KWARGS = {"required_if": _rebase.REQUIRED_IF}
    WHAT = "rebase"

    def step(self, host, args, check_mode):
        return _rebase.rebase(host, args, check_mode)
