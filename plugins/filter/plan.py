# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The host plan of a rollout; documented in the .yml files of the same names next to this one."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.fleetos.layering.plugins.module_utils._errors import FleetosError
from ansible_collections.fleetos.layering.plugins.plugin_utils._plan import (
    activation,
    host_plan,
    images_to_inspect,
    rollback_host_plan,
)


def rollout_plan(assignment, host, pool=None, fallback_image=None, fallback_transport=None, pool_paused=False,
                 resolutions=None, status=None, inspections=None, labels=None, error=None):
    """Filter: what one host must do to reach its OS image (see rollout_plan.yml)."""
    try:
        return host_plan(assignment, host, pool=pool, fallback_image=fallback_image,
                         fallback_transport=fallback_transport, pool_paused=pool_paused,
                         resolutions=resolutions, status=status, inspections=inspections,
                         labels=labels, error=error)
    except FleetosError as exc:
        raise AnsibleFilterError(exc.msg) from None


def rollout_plan_inspections(plans):
    """Filter: the per-platform images whose ostree commit could spare hosts a rebase."""
    try:
        return images_to_inspect(plans)
    except FleetosError as exc:
        raise AnsibleFilterError(exc.msg) from None


def rollback_plan(status, host, pool=None, rollback_from=None):
    """Filter: what rolling one host back takes (see rollback_plan.yml)."""
    try:
        return rollback_host_plan(status, host, pool=pool, rollback_from=rollback_from)
    except FleetosError as exc:
        raise AnsibleFilterError(exc.msg) from None


def rollout_activation(plan, stage_result=None):
    """Filter: whether a host is to be activated after the stage (see rollout_activation.yml)."""
    return activation(plan, stage_result)


class FilterModule:
    """Planning a rollout, host by host."""

    def filters(self):
        return {
            "rollout_plan": rollout_plan,
            "rollout_plan_inspections": rollout_plan_inspections,
            "rollback_plan": rollback_plan,
            "rollout_activation": rollout_activation,
        }
