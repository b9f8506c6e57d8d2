# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The host plan of a rollout; documented in the .yml files of the same names next to this one."""

from __future__ import annotations

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError
from ansible.module_utils.parsing.convert_bool import boolean
from ansible_collections.fleetos.layering.plugins.module_utils._errors import FleetosError
from ansible_collections.fleetos.layering.plugins.plugin_utils import _playbook_specs
from ansible_collections.fleetos.layering.plugins.plugin_utils._unset import empty_means_unset, none_if_empty
from ansible_collections.fleetos.layering.plugins.plugin_utils.rollout import _fleet, _plan_report, _rollout_hosts
from ansible_collections.fleetos.layering.plugins.plugin_utils.rollout._plan import (
    activation,
    host_plan,
    images_to_inspect,
    rollback_host_plan,
)
from ansible_collections.fleetos.layering.plugins.plugin_utils.rollout._resume import lease_plan, refusals, takeover


def _pins(pins):
    """The canary's pins as a mapping, or None (unset: None, or "" before ansible-core 2.19)."""
    pins = none_if_empty(pins)
    if pins is None:
        return None
    if not isinstance(pins, Mapping):
        raise AnsibleFilterError("pins must be a mapping of image tag to digest (fleetos_last_rollout.images), not %r"
                                 % (pins,))
    return dict(_fleet.plain(pins))


@empty_means_unset("pool", "fallback_image", "fallback_transport", "lock")
def rollout_plan(assignment, host, pool=None, fallback_image=None, fallback_transport=None, pool_paused=False,
                 resolutions=None, status=None, inspections=None, labels=None, error=None, lock=None, pins=None,
                 update_agents=None, soft_reboot=None):
    """Filter: what one host must do to reach its OS image (see rollout_plan.yml)."""
    try:
        return host_plan(assignment, host, pool=pool, fallback_image=fallback_image,
                         fallback_transport=fallback_transport, pool_paused=pool_paused,
                         resolutions=resolutions, status=status, inspections=inspections,
                         labels=labels, error=error, lock=lock, pins=_pins(pins),
                         update_agents=none_if_empty(update_agents), soft_reboot=none_if_empty(soft_reboot))
    except FleetosError as exc:
        raise AnsibleFilterError(exc.msg) from None


REPORT_KEYS = ("manifest_errors", "warnings", "report_dir", "host_lines")


@empty_means_unset("lock")
def rollout_plan_fleet(hosts, hostvars, manifests, lock=None, run_host=None, play=None, check_pull_secret=True,
                       inputs=True, report=None, check=None, pins=None):
    """Filter: the plan of every host of ``hosts`` from the inventory alone, at once (see rollout_plan_fleet.yml);
    with ``report``, the report of that plan instead (as rollout_plan_report gives it); with ``check`` (a
    playbook), also ``variable_errors``, the sentences of playbook_variable_errors, from the same read."""
    if not isinstance(hosts, (list, tuple)):
        raise AnsibleFilterError("rollout_plan_fleet needs a list of host names, such as ansible_play_hosts")
    try:
        checked = sorted(_playbook_specs.load_spec(check)) if check not in (None, "") else []
    except FleetosError as exc:
        raise AnsibleFilterError(exc.msg) from None
    play = dict(play or {})
    unknown = sorted(set(play) - set(_fleet.KEYS))
    if unknown:
        raise AnsibleFilterError("rollout_plan_fleet: play names %s, which no host input is; expected some of %s"
                                 % (", ".join(unknown), ", ".join(_fleet.KEYS)))
    if report is not None and not isinstance(report, dict):
        raise AnsibleFilterError("rollout_plan_fleet: report must be a mapping of %s, not %r"
                                 % (", ".join(REPORT_KEYS), report))
    unknown = sorted(set(report or {}) - set(REPORT_KEYS))
    if unknown:
        raise AnsibleFilterError("rollout_plan_fleet: report names %s; expected some of %s"
                                 % (", ".join(unknown), ", ".join(REPORT_KEYS)))
    manifests, lock, play = _fleet.plain(manifests), _fleet.plain(lock), _fleet.plain(play)
    values, defined = _fleet.read_hosts(hostvars, hosts, _fleet.secret_names(manifests), play, extra=checked)
    variable_errors = None
    if checked:
        try:
            variable_errors = _playbook_specs.variable_errors(
                {host: {name: found[name] for name in checked if name in found} for host, found in values.items()}, check)
        except FleetosError as exc:
            raise AnsibleFilterError(exc.msg) from None
    fleet = _fleet.plan_fleet(_fleet.host_inputs(values, run_host, play), manifests, lock=lock, pins=_pins(pins),
                              defined=defined if check_pull_secret else None,
                              brief=report is not None or not boolean(inputs, strict=False))
    if report is None:
        if variable_errors is not None:
            fleet["variable_errors"] = variable_errors
        return fleet
    # The report made here, from the plan as it is: handed on to rollout_plan_report, each value of
    # the plan would be wrapped and read again (seconds for 10,000 hosts with ansible-core 2.19).
    report = _fleet.plain(report)
    try:
        made = _plan_report.report([entry["plan"] for entry in fleet["hosts"].values()],
                                   report.get("manifest_errors") or [], report.get("warnings") or [],
                                   report_dir=none_if_empty(report.get("report_dir")),
                                   each_host=boolean(report.get("host_lines", True), strict=False))
    except FleetosError as exc:
        raise AnsibleFilterError(exc.msg) from None
    if variable_errors is not None:
        made["variable_errors"] = variable_errors
    return made


@empty_means_unset("report_dir")
def rollout_plan_report(plans, manifest_errors=None, warnings=None, report_dir=None, host_lines=True):
    """Filter: what playbooks/plan.yml prints and writes (see rollout_plan_report.yml)."""
    if not isinstance(plans, (dict, list, tuple)):
        raise AnsibleFilterError("rollout_plan_report needs the fleet's plan record or a list of host plans")
    try:
        if isinstance(plans, dict):
            # Only the plans: each value read from a variable is templated as it is read.
            plans = [entry["plan"] for entry in (plans.get("hosts") or {}).values()]
        return _plan_report.report(_fleet.plain(plans), _fleet.plain(manifest_errors) or [],
                                   _fleet.plain(warnings) or [], report_dir=report_dir,
                                   each_host=boolean(host_lines, strict=False))
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


def rollout_lease_takeover(lease_result, owner, break_lease=None):
    """Filter: the rollout whose lease a refused host may take over, or None (see rollout_lease_takeover.yml)."""
    return takeover(lease_result, owner, break_lease=break_lease)


def rollout_lease_refusals(results):
    """Filter: the hosts other rollouts hold, by holder, once per play (see rollout_lease_refusals.yml)."""
    return refusals(results)


def rollout_lease_plan(plan, lease_result, refused=None, before="staging"):
    """Filter: the host's plan with its rollout lease folded in (see rollout_lease_plan.yml)."""
    return lease_plan(plan, lease_result, refused, before=before)


def rollout_plan_hosts(fleet, hostvars, hosts, resolutions=None, inspections=None, lock=None, pins=None):
    """Filter: the plan of every host read, from the fleet's record and each host's read, at once (see
    rollout_plan_hosts.yml)."""
    if not isinstance(fleet, Mapping) or not isinstance(hosts, (list, tuple)):
        raise AnsibleFilterError("rollout_plan_hosts needs the record of rollout_plan_fleet and a list of host names")
    try:
        reads = _rollout_hosts.host_reads(hostvars, hosts)
        return _rollout_hosts.read_plans(_fleet.plain(fleet), reads, resolutions=resolutions, inspections=inspections,
                                         lock=none_if_empty(lock), pins=_pins(pins))
    except FleetosError as exc:
        raise AnsibleFilterError(exc.msg) from None


def rollout_lease_takeovers(plans, hostvars, hosts, owner, break_lease=None):
    """Filter: the hosts whose lease a rollout that is gone holds, and that rollout (see rollout_lease_takeovers.yml)."""
    if not isinstance(hosts, (list, tuple)):
        raise AnsibleFilterError("rollout_lease_takeovers needs a list of host names, such as ansible_play_hosts")
    return _rollout_hosts.takeovers(_fleet.plain(plans) or {}, hostvars, hosts, _fleet.plain(owner),
                                    break_lease=none_if_empty(break_lease))


def rollout_hosts(plans, hostvars, hosts, activate=True):
    """Filter: every host's decisions of rollout.yml after the plan, once for the play (see rollout_hosts.yml)."""
    if not isinstance(hosts, (list, tuple)):
        raise AnsibleFilterError("rollout_hosts needs a list of host names, such as ansible_play_hosts")
    return _rollout_hosts.rollout_hosts(_fleet.plain(plans) or {}, hostvars, hosts,
                                        activate=boolean(activate, strict=False))


def rollback_hosts(hosts, hostvars, owner, break_lease=None, rollback_from=None):
    """Filter: every host's decisions of rollback.yml from what the run has read so far, once for the play (see
    rollback_hosts.yml)."""
    if not isinstance(hosts, (list, tuple)):
        raise AnsibleFilterError("rollback_hosts needs a list of host names, such as ansible_play_hosts")
    rollback_from = none_if_empty(rollback_from)
    try:
        return _rollout_hosts.rollback_hosts(hostvars, hosts, _fleet.plain(owner), break_lease=none_if_empty(break_lease),
                                             rollback_from=None if rollback_from is None else str(rollback_from))
    except FleetosError as exc:
        raise AnsibleFilterError(exc.msg) from None


class FilterModule:
    """Planning a rollout, host by host."""

    def filters(self):
        return {
            "rollout_plan": rollout_plan,
            "rollout_plan_fleet": rollout_plan_fleet,
            "rollout_plan_inspections": rollout_plan_inspections,
            "rollout_plan_report": rollout_plan_report,
            "rollback_plan": rollback_plan,
            "rollout_activation": rollout_activation,
            "rollout_lease_takeover": rollout_lease_takeover,
            "rollout_lease_plan": rollout_lease_plan,
            "rollout_lease_refusals": rollout_lease_refusals,
            "rollout_plan_hosts": rollout_plan_hosts,
            "rollout_lease_takeovers": rollout_lease_takeovers,
            "rollout_hosts": rollout_hosts,
            "rollback_hosts": rollback_hosts,
        }
