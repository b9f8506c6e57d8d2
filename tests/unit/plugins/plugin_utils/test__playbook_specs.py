# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""_playbook_specs: the spec of each playbook and the sentence for each variable that fails it."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.fleetos.layering.plugins.filter.rollout import rollout_budget
from ansible_collections.fleetos.layering.plugins.module_utils._errors import InvalidInputError
from ansible_collections.fleetos.layering.plugins.plugin_utils import _playbook_specs

HOSTS = ["db-01", "db-02", "db-03", "web-01", "web-02", "web-03", "web-04"]


def results(values_of):
    """Results as validate_argument_spec registers them (failed_when: false), values per host."""
    return {host: {"failed": False, "validate_args_context": {"playbook": "rollout", "values": values_of(host)}}
            for host in HOSTS}


def test_every_playbook_has_a_spec():
    assert _playbook_specs.playbooks() == ["adopt", "compose", "plan", "rollback", "rollout", "status"]
    assert _playbook_specs.load_spec("plan")["fleetos_plan_read_status"]["type"] == "bool"


def test_a_playbook_without_a_spec_is_named_with_the_ones_that_have_one():
    with pytest.raises(InvalidInputError) as exc:
        _playbook_specs.load_spec("deploy")
    assert exc.value.msg == ("The playbook 'deploy' has no argument spec in playbooks/specs; expected one of adopt, "
                             "compose, plan, rollback, rollout, status.")


@pytest.mark.parametrize("values, sentences", [
    ({"fleetos_rollout_canary": 2, "fleetos_os_backend": "bootc", "fleetos_rollout_max_failures": "25%",
      "fleetos_pool_max_unavailable": 3, "fleetos_rollout_activate": "false", "fleetos_fleetlock_url": None}, []),
    ({"fleetos_rollout_max_failures": "many"},
     ["The variable fleetos_rollout_max_failures is 'many'; it must be a count or a percentage up to 100%, such as 2 "
      "or 25%."]),
    ({"fleetos_rollout_max_failures": "150%", "fleetos_rollout_canary": "two"},
     ["The variable fleetos_rollout_canary is 'two'; it must be an integer.",
      "The variable fleetos_rollout_max_failures is '150%'; it must be a count or a percentage up to 100%, such as 2 "
      "or 25%."]),
    ({"fleetos_os_backend": "bootcc"},
     ["The variable fleetos_os_backend is 'bootcc'; it must be one of auto, bootc, rpm-ostree."]),
    ({"fleetos_rollout_activate": "maybe", "fleetos_node_labels": ["zone=a"]},
     ["The variable fleetos_node_labels is [\"zone=a\"]; it must be a mapping.",
      "The variable fleetos_rollout_activate is 'maybe'; it must be true or false."]),
], ids=["valid", "budget", "two-variables", "choice", "bool-and-dict"])
def test_an_extra_variable_is_named_once_for_every_host(values, sentences):
    assert _playbook_specs.variable_errors(results(lambda host: values), "rollout") == sentences


@pytest.mark.parametrize("values", [
    {"fleetos_rollout_max_failures": "many", "fleetos_os_backend": "bootcc"},
    {"fleetos_node_labels": ["zone=a"], "fleetos_pool_paused": "maybe"},
    {"fleetos_rollout_canary": 2},
])
def test_plain_values_give_the_sentences_of_validate_argument_spec_results(values):
    plain = _playbook_specs.variable_errors({host: values for host in HOSTS}, "rollout")
    assert plain == _playbook_specs.variable_errors(results(lambda host: values), "rollout")


@pytest.mark.parametrize("option, value, key", [
    # A mapping or list is valid by its type alone when the option has no sub-options or element type.
    ({"type": "dict"}, {"zone": "a"}, ("a mapping", "dict")),
    ({"type": "dict"}, {"zone": "b"}, ("a mapping", "dict")),
    ({"type": "list", "elements": "str"}, ["a"], ('["a"]', "list")),
    ({"type": "str"}, "web", ('"web"', "str")),
    ({"type": "raw"}, 2, ("2", "int")),
])
def test_a_value_is_validated_once_per_key(option, value, key):
    assert _playbook_specs._key(option, value) == key


def test_an_inventory_variable_names_the_hosts_that_have_the_value():
    found = _playbook_specs.variable_errors(results(
        lambda host: {"fleetos_pool_paused": "maybe" if host.startswith("db") else False}), "rollout")
    assert found == ["The variable fleetos_pool_paused is 'maybe' on db-01, db-02, db-03; it must be true or false."]


def test_many_hosts_are_counted_after_the_first_five():
    found = _playbook_specs.variable_errors(results(
        lambda host: {"fleetos_pool_paused": "maybe" if host != "db-01" else True}), "rollout")
    assert found == ["The variable fleetos_pool_paused is 'maybe' on db-02, db-03, web-01, web-02, web-03 and 1 more "
                     "hosts; it must be true or false."]


def test_a_failure_this_filter_cannot_word_is_not_dropped():
    result = {"failed": False, "argument_errors": ["something\nelse went wrong"], "validate_args_context": {"values": {}}}
    found = _playbook_specs.variable_errors({"web-01": result}, "plan")
    assert found == ["The fleetos_ variables of web-01 failed their argument spec: something else went wrong."]


@pytest.mark.parametrize("value", [0, 2, "2", " 3 ", "25%", "100%", "12.5%", "0%", "many", "", "101%", "-1", -1, True,
                                   False, 2.5, "2.5", None, [1], "%"])
def test_a_budget_is_what_rollout_budget_reads(value):
    """One grammar: the check accepts exactly what the filter that reads the budget accepts."""
    try:
        rollout_budget(value, 10, minimum=0)
        expected = True
    except AnsibleFilterError:
        expected = False
    assert _playbook_specs.FORMS["fleetos_rollout_max_failures"][0](value) is expected


def test_each_bad_field_of_a_pools_maintenance_windows_is_named_with_its_hosts():
    good = [{"days": ["Sat", "Sun"], "start": "02:00", "length_minutes": 240}]
    bad = [{"days": ["Sat", "Sunday"], "start": "2:00", "length_minutes": 240}]

    def values(host):
        if host.startswith("db"):
            return {"fleetos_rollout_windows": bad, "fleetos_rollout_windows_timezone": "Europe/Berlin"}
        return {"fleetos_rollout_windows": good, "fleetos_rollout_windows_timezone": "Mars/Base"}
    found = _playbook_specs.variable_errors(results(values), "rollout")
    assert found == [
        "The variable fleetos_rollout_windows[0].days[1] is 'Sunday' on db-01, db-02, db-03; it must be a list of days"
        " among Mon, Tue, Wed, Thu, Fri, Sat, Sun, each once.",
        "The variable fleetos_rollout_windows[0].start is '2:00' on db-01, db-02, db-03; it must be \"HH:MM\" in"
        " 24-hour time, such as \"02:30\".",
        "The variable fleetos_rollout_windows_timezone is 'Mars/Base' on web-01, web-02, web-03, web-04; it must be an"
        " IANA time zone name such as Europe/Berlin, or localtime or UTC."]
    assert _playbook_specs.variable_errors(results(lambda host: {"fleetos_rollout_windows": good}), "plan") == []
    assert _playbook_specs.variable_errors(results(lambda host: {"fleetos_rollout_windows": "Sat 02:00"}), "rollout") == [
        "The variable fleetos_rollout_windows is 'Sat 02:00'; it must be a list of mappings with the keys days, start"
        " and length_minutes, or empty."]
