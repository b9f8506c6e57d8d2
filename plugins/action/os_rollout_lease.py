# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Action plugin of fleetos.layering.os_rollout_lease (documented in plugins/modules/os_rollout_lease.py):
the lease file is read and replaced on the host over the connection (plugin_utils/rollout/_lease.py decides); with
release_unchanged, the host's plan is made here from the read, and a host it leaves unchanged is released in the
same contact (plugin_utils/rollout/_rollout_hosts.py decides)."""

from __future__ import annotations

from ansible_collections.fleetos.layering.plugins.plugin_utils.rollout import _lease
from ansible_collections.fleetos.layering.plugins.module_utils._errors import FleetosError, InvalidInputError
from ansible_collections.fleetos.layering.plugins.plugin_utils.host._remote import HostStep
from ansible_collections.fleetos.layering.plugins.plugin_utils.rollout._rollout_hosts import leaves_unchanged


class ActionModule(HostStep):
    ARGUMENT_SPEC = _lease.ARGUMENT_SPEC
    WHAT = "update the rollout lease"

    def task_args(self, args):
        return _lease.unfold(args)

    def step(self, host, args, check_mode):
        release = args.get("release_unchanged")
        fleet = None
        if release:
            # Read as the host's variables hold it, not templated: a template of the fleet's record would copy
            # every host's entry for each host (before ansible-core 2.19 a template templates a variable in full).
            fleet = (self._fleetos_vars or {}).get(release["plans"])
            if not isinstance(fleet, dict) or not isinstance(fleet.get("hosts"), dict):
                raise InvalidInputError("release_unchanged.plans names no plan of the fleet among the host's variables:"
                                        " %s is not a record of fleetos.layering.rollout_plan_fleet." % release["plans"],
                                        acquired=False, lease=None, previous=None, holder=None, deployments=None)
        result = _lease.task_result(host, args, check_mode)
        if fleet is not None and leaves_unchanged(fleet, self._fleetos_host, result, resolutions=release["resolutions"],
                                                  lock=release["lock"], pins=release["pins"]):
            # The host holds nothing of this rollout's from here on; a failed release leaves the lease taken, for the
            # rollout's own release of it.
            try:
                _changed, lease = _lease.release(host, args["path"], args["rollout"], check_mode=check_mode,
                                                 written=result["lease"])
            except FleetosError as exc:
                result["release_failed"] = exc.msg
            else:
                result.update(released=True, lease=lease)
        return result
