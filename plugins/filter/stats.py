# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""What a job is given and what it gives back: documented in host_pattern.yml, job_stats.yml and
unknown_variables.yml."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.fleetos.layering.plugins.module_utils._errors import FleetosError
from ansible_collections.fleetos.layering.plugins.plugin_utils._stats import job_stats as _job_stats
from ansible_collections.fleetos.layering.plugins.plugin_utils._variables import unknown_variables as _unknown_variables


def job_stats(report, kind, report_dir=None):
    """Filter: the report reduced to what an AWX workflow branches on (see job_stats.yml)."""
    try:
        return _job_stats(report, kind, report_dir=report_dir)
    except FleetosError as exc:
        raise AnsibleFilterError(exc.msg) from None


def host_pattern(pattern, variable="the host pattern", limit=None, limited=None):
    """Filter: the play's host pattern, stripped, or an error naming ``variable`` (see host_pattern.yml).

    A playbook names it in its first play's ``hosts``, which ansible-playbook templates itself: the
    collection's filters are then loaded once, in the process each task's forks are copied from,
    instead of once per fork. Given the run's ``limit`` (``ansible_limit``) and ``limited`` (the hosts of
    the pattern within the limit), a limit that leaves none of them is an error too: every play of the
    run would be skipped, and the run would end with nothing done and rc 0.
    """
    if not isinstance(pattern, str):
        raise AnsibleFilterError("%s must be a host pattern (a string such as all, a group or host1,host2), not a %s"
                                 % (variable, type(pattern).__name__))
    if not pattern.strip():
        raise AnsibleFilterError("%s is empty: give a host pattern such as all, a group or host1,host2" % variable)
    if isinstance(limit, str) and limit.strip() and isinstance(limited, (list, tuple)) and not limited:
        raise AnsibleFilterError("The limit %r leaves no host of %s (%r) to act on: name hosts or groups of the"
                                 " inventory in the limit (AWX's Limit, --limit)" % (limit.strip(), variable, pattern.strip()))
    return pattern.strip()


def unknown_variables(names):
    """Filter: a sentence per fleetos_* variable name the collection does not read (see unknown_variables.yml)."""
    if isinstance(names, str) or not isinstance(names, (list, tuple)):
        raise AnsibleFilterError("unknown_variables needs a list of variable names")
    return _unknown_variables(names)


class FilterModule:
    """A job's inputs checked, its results for AWX / Automation Controller."""

    def filters(self):
        return {"host_pattern": host_pattern, "job_stats": job_stats, "unknown_variables": unknown_variables}
