# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The playbook_spec filters: the spec variables each host has, input that is not what a filter needs, and a
failure of plugin_utils/_playbook_specs as a filter error (its sentences: test__playbook_specs.py)."""

from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError
from ansible_collections.fleetos.layering.plugins.filter.playbook_spec import (
    FilterModule,
    playbook_argument_spec,
    playbook_variable_errors,
    playbook_variables,
)

UNKNOWN = ("The playbook 'deploy' has no argument spec in playbooks/specs; expected one of adopt, compose, plan, "
           "rollback, rollout, status.")


def test_playbook_variables_reads_the_spec_variables_each_host_has():
    hostvars = {"web-01": {"fleetos_pool": "web", "fleetos_node_labels": {"zone": "a"}, "not_a_spec_variable": 1},
                "db-01": {}}
    assert playbook_variables(["web-01", "db-01"], hostvars, "plan") == {
        "web-01": {"fleetos_pool": "web", "fleetos_node_labels": {"zone": "a"}}, "db-01": {}}


def test_a_playbook_without_a_spec_is_a_filter_error_with_its_sentence():
    for call in (lambda: playbook_argument_spec("deploy"), lambda: playbook_variables([], {}, "deploy"),
                 lambda: playbook_variable_errors({}, "deploy")):
        with pytest.raises(AnsibleFilterError) as caught:
            call()
        assert caught.value.message == UNKNOWN


@pytest.mark.parametrize(("call", "message"), [
    (lambda: playbook_variables("web-01", {}, "plan"),
     "playbook_variables needs a list of host names, such as ansible_play_hosts"),
    (lambda: playbook_variable_errors(["web-01"], "plan"),
     "playbook_variable_errors needs a mapping of host to its values of the variables"),
], ids=["playbook_variables", "playbook_variable_errors"])
def test_input_that_is_not_what_the_filter_needs_is_refused(call, message):
    with pytest.raises(AnsibleFilterError) as caught:
        call()
    assert caught.value.message == message


def test_the_filters():
    assert FilterModule().filters() == {"playbook_argument_spec": playbook_argument_spec,
                                        "playbook_variables": playbook_variables,
                                        "playbook_variable_errors": playbook_variable_errors}
