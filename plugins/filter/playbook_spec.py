# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""A playbook's spec of its fleetos_ variables, and what fails it: documented in
playbook_argument_spec.yml and playbook_variable_errors.yml."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.fleetos.layering.plugins.module_utils._errors import FleetosError
from ansible_collections.fleetos.layering.plugins.plugin_utils import _playbook_specs
from ansible_collections.fleetos.layering.plugins.plugin_utils.rollout import _fleet


def playbook_argument_spec(playbook):
    """Filter: the argument spec of a playbook's fleetos_ variables (see playbook_argument_spec.yml)."""
    try:
        return _playbook_specs.load_spec(playbook)
    except FleetosError as exc:
        raise AnsibleFilterError(exc.msg) from None


def playbook_variables(hosts, hostvars, playbook):
    """Filter: ``{host: {name: value}}``, the templated fleetos_ variables of the playbook's spec each host has
    (see playbook_variables.yml)."""
    if not isinstance(hosts, (list, tuple)):
        raise AnsibleFilterError("playbook_variables needs a list of host names, such as ansible_play_hosts")
    try:
        names = sorted(_playbook_specs.load_spec(playbook))
    except FleetosError as exc:
        raise AnsibleFilterError(exc.msg) from None
    return _fleet.host_values(hostvars, hosts, names)


def playbook_variable_errors(results, playbook):
    """Filter: one sentence per fleetos_ variable that fails the playbook's spec (see playbook_variable_errors.yml)."""
    if not isinstance(results, dict):
        raise AnsibleFilterError("playbook_variable_errors needs a mapping of host to its values of the variables")
    try:
        return _playbook_specs.variable_errors(results, playbook)
    except FleetosError as exc:
        raise AnsibleFilterError(exc.msg) from None


class FilterModule:
    """The fleetos_ variables of a playbook checked against its spec."""

    def filters(self):
        return {"playbook_argument_spec": playbook_argument_spec, "playbook_variables": playbook_variables,
                "playbook_variable_errors": playbook_variable_errors}
