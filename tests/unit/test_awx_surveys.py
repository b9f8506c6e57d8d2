# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The AWX survey specs in docs/awx/: valid for AWX, and asking only what the playbooks read.

Each `<playbook>.survey.json` is checked against AWX's survey rules (the question types, a
default among the choices, an integer default within min and max) and against the
collection: every variable is one the collection reads (the names `unknown_variables`
refuses are refused here too), the playbook it is for exists, and a choice of a variable
that a role's argument spec restricts is one of the spec's choices. Each variable is in its
playbook's spec (playbooks/specs/), with a question type the spec's type takes, and every
choice and default passes the spec as the playbook checks it at its start.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from ansible_collections.fleetos.layering.plugins.plugin_utils._playbook_specs import load_spec, problem
from ansible_collections.fleetos.layering.plugins.plugin_utils._variables import unknown_variables

REPO = Path(__file__).resolve().parents[2]
SURVEYS = sorted((REPO / "docs" / "awx").glob("*.survey.json"))
AWX_TYPES = {"text", "textarea", "password", "integer", "float", "multiplechoice", "multiselect"}
# Role options that a survey variable feeds, by the fleet variable their default reads.
FEEDS = {"fleetos_os_backend": ("os_plan", "os_plan_backend")}
# The spec types an AWX question type can give (AWX sends text as a string, integer as an int).
SPEC_TYPES = {"text": {"str", "path", "raw"}, "textarea": {"str", "raw"}, "password": {"str"}, "integer": {"int", "raw"},
              "float": {"float", "raw"}, "multiplechoice": {"str", "bool", "raw"}, "multiselect": {"list"}}


def role_choices(role, option):
    spec = yaml.safe_load((REPO / "roles" / role / "meta" / "argument_specs.yml").read_text())
    return spec["argument_specs"]["main"]["options"][option].get("choices")


def test_there_are_surveys():
    assert {path.name for path in SURVEYS} >= {"plan.survey.json", "rollout.survey.json", "rollback.survey.json"}


@pytest.mark.parametrize("path", SURVEYS, ids=[p.name for p in SURVEYS])
def test_a_survey_is_valid_and_asks_what_its_playbook_reads(path):
    survey = json.loads(path.read_text())
    assert set(survey) == {"name", "description", "spec"}
    playbook = REPO / "playbooks" / path.name.replace(".survey.json", ".yml")
    assert playbook.is_file(), playbook
    variables = [question["variable"] for question in survey["spec"]]
    assert len(variables) == len(set(variables)), variables
    assert unknown_variables(variables) == []
    for question in survey["spec"]:
        assert question["type"] in AWX_TYPES, question
        assert {"question_name", "required", "type", "variable", "default"} <= set(question), question
        if question["type"] in ("multiplechoice", "multiselect"):
            assert question["choices"] and question["default"] in question["choices"], question
        if question["type"] == "integer":
            assert question["min"] <= question["default"] <= question["max"], question
        if question["variable"] in FEEDS:
            choices = role_choices(*FEEDS[question["variable"]])
            assert sorted(question["choices"]) == sorted(choices), question


def test_a_misspelt_survey_variable_would_be_refused():
    """The check above can fail: a name the collection does not read is named with the nearest one."""
    assert unknown_variables(["fleetos_rollout_canry"])[0].startswith("The variable fleetos_rollout_canry")


@pytest.mark.parametrize("path", SURVEYS, ids=[p.name for p in SURVEYS])
def test_a_survey_asks_only_what_its_playbook_spec_takes(path):
    spec = load_spec(path.name.replace(".survey.json", ""))
    for question in json.loads(path.read_text())["spec"]:
        name = question["variable"]
        assert name in spec, "%s is not in the spec of its playbook" % name
        assert spec[name]["type"] in SPEC_TYPES[question["type"]], question
        answers = question.get("choices") or ([question["default"]] if question["default"] != "" else [])
        for answer in answers:
            assert problem(name, spec[name], answer) is None, (name, answer)


def test_a_survey_choice_the_spec_refuses_would_be_refused():
    """The check above can fail: a choice outside the spec's gives the accepted form."""
    assert problem("fleetos_os_backend", load_spec("rollout")["fleetos_os_backend"], "bootcc") == \
        "one of auto, bootc, rpm-ostree"
    assert problem("fleetos_rollout_activate", load_spec("rollout")["fleetos_rollout_activate"], "maybe") == \
        "true or false"
