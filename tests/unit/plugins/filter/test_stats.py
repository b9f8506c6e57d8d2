# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.fleetos.layering.plugins.filter.stats import FilterModule, host_pattern


def test_a_host_pattern_is_returned_without_surrounding_space():
    assert host_pattern(" node01,node02 ", "fleetos_rollout_hosts") == "node01,node02"
    assert FilterModule().filters()["host_pattern"]("pool_a:&canary") == "pool_a:&canary"


@pytest.mark.parametrize("value, cause", [
    ("", "fleetos_rollout_hosts is empty: give a host pattern"),
    ("  ", "fleetos_rollout_hosts is empty: give a host pattern"),
    (["node01"], "fleetos_rollout_hosts must be a host pattern (a string such as all, a group or host1,host2), not a list"),
    (None, "not a NoneType"),
])
def test_a_pattern_that_is_not_a_nonempty_string_is_refused_naming_the_variable(value, cause):
    with pytest.raises(AnsibleFilterError) as exc:
        host_pattern(value, "fleetos_rollout_hosts")
    assert cause in str(exc.value)


def test_a_limit_that_leaves_none_of_the_hosts_is_refused():
    with pytest.raises(AnsibleFilterError, match=r"^The limit 'db' leaves no host of fleetos_rollout_hosts \('web'\) to act on"):
        host_pattern("web", "fleetos_rollout_hosts", limit="db", limited=[])
    assert host_pattern("web", "fleetos_rollout_hosts", limit="web-01", limited=["web-01"]) == "web"
    # No limit, or the hosts within it not given: nothing to check.
    assert host_pattern("web", "fleetos_rollout_hosts", limit="", limited=[]) == "web"
    assert host_pattern("web", "fleetos_rollout_hosts", limit="db") == "web"
