# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""_variables: the fleetos_ names the collection reads, and typos."""

from __future__ import annotations

import re
from pathlib import Path

from ansible_collections.fleetos.layering.plugins.plugin_utils._variables import known_variables, unknown_variables

ROOT = Path(__file__).resolve().parents[4]


def test_every_variable_a_playbook_or_role_default_reads_is_known():
    read = set()
    for path in list((ROOT / "playbooks").glob("*.yml")) + list((ROOT / "roles").glob("*/defaults/main.yml")):
        read.update(re.findall(r"\bfleetos_[a-z0-9_]*[a-z0-9]\b", path.read_text()))
    read = {name for name in read if not name.startswith(("fleetos_lab_", "fleetos_last_"))}
    assert read and read <= known_variables()
    assert {"fleetos_plan_read_status", "fleetos_rollout_break_lease", "fleetos_pool_max_unavailable"} <= read


def test_a_typo_is_named_with_the_nearest_known_name():
    assert unknown_variables(["fleetos_plan_read_stauts", "fleetos_pool"]) == [
        "The variable fleetos_plan_read_stauts is not one fleetos.layering reads; "
        "the nearest known one is fleetos_plan_read_status."]


def test_lab_and_workflow_families_and_other_names_pass():
    assert unknown_variables(["fleetos_lab_registry", "fleetos_last_rollout", "ansible_host", "__fleetos_x"]) == []


def test_a_name_far_from_every_known_one_has_no_suggestion():
    assert unknown_variables(["fleetos_qqqqqqqqqqqqqqqqqqqqqqqq"], known={"fleetos_pool"}) == [
        "The variable fleetos_qqqqqqqqqqqqqqqqqqqqqqqq is not one fleetos.layering reads."]


def test_a_wildcard_family_in_the_docs_is_not_a_name():
    assert "fleetos_lab" not in known_variables() and "fleetos_last" not in known_variables()
