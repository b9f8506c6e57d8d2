# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""What a job is given and what it gives back: documented in job_stats.yml and unknown_variables.yml."""

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


def unknown_variables(names):
    """Filter: a sentence per fleetos_* variable name the collection does not read (see unknown_variables.yml)."""
    if isinstance(names, str) or not isinstance(names, (list, tuple)):
        raise AnsibleFilterError("unknown_variables needs a list of variable names")
    return _unknown_variables(names)


class FilterModule:
    """A job's inputs checked, its results for AWX / Automation Controller."""

    def filters(self):
        return {"job_stats": job_stats, "unknown_variables": unknown_variables}
