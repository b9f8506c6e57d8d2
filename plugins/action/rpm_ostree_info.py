# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Action plugin of fleetos.layering.rpm_ostree_info (documented in plugins/modules/rpm_ostree_info.py):
rpm-ostree runs on the host over the connection, module_utils/host/_rpm_ostree.py parses its JSON here."""

from __future__ import annotations

from ansible_collections.fleetos.layering.plugins.module_utils.host import _deployments, _rpm_ostree
from ansible_collections.fleetos.layering.plugins.plugin_utils.host._remote import HostStep


class ActionModule(HostStep):
    ARGUMENT_SPEC = _rpm_ostree.RPM_OSTREE_ARGS
    WHAT = "read the rpm-ostree status"

    def step(self, host, args, check_mode):
        facts = _deployments.read_rpm_ostree(host, args["executable"])
        del facts["backend"]
        return dict(facts, changed=False)
