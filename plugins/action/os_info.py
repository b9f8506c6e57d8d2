# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Action plugin of fleetos.layering.os_info (documented in plugins/modules/os_info.py): bootc or
rpm-ostree runs on the host over the connection, module_utils/host/_deployments.py reads its JSON here."""

from __future__ import annotations

from ansible_collections.fleetos.layering.plugins.module_utils.host import _deployments, _update_agents
from ansible_collections.fleetos.layering.plugins.plugin_utils.host._remote import HostStep


class ActionModule(HostStep):
    ARGUMENT_SPEC = _deployments.OS_INFO_ARGS
    WHAT = "read the deployments of the host"

    def step(self, host, args, check_mode):
        # Every read in one host command.
        host.prefetch(_deployments.read_commands(args["backend"], args["rpm_ostree_executable"],
                                                 args["bootc_executable"], update_agents=args["update_agents"]))
        facts = _deployments.read_host(host, args["backend"], args["rpm_ostree_executable"], args["bootc_executable"])
        if args["update_agents"]:
            facts["update_agents"] = _update_agents.read(host)
        return dict(facts, changed=False)
