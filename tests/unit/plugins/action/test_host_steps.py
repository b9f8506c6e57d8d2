# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Every option of a host-side action plugin that reaches a command, with hostile strings: the host runs
exactly the argv the step meant (the fake connection splits each line as a POSIX shell does), and a
value never becomes a command of its own."""

from __future__ import annotations

import json

import pytest

from ansible_collections.fleetos.layering.tests.unit.plugins.action.utils import fake_host, run_action
from ansible_collections.fleetos.layering.tests.unit.plugins.module_utils.test__host import HOSTILE
from ansible_collections.fleetos.layering.plugins.action import bootc_info, os_info, rpm_ostree_info

RPM_OSTREE_STATUS = json.dumps({"deployments": [{"booted": True, "checksum": "a" * 64, "osname": "fedora-coreos",
                                                 "origin": "fedora:fedora/x86_64/coreos/stable"}],
                                "transaction": None})
BOOTC_STATUS = json.dumps({"apiVersion": "org.containers.bootc/v1", "kind": "BootcHost", "metadata": {"name": "h"},
                           "spec": {"image": None}, "status": {"booted": {
                               "image": None, "pinned": False, "ostree": {"checksum": "b" * 64, "deploySerial": 0}},
                               "staged": None, "rollback": None}})
# (plugin, option, status argv after the binary, what it prints)
STEPS = [
    (rpm_ostree_info, "executable", ["status", "--json"], RPM_OSTREE_STATUS),
    (bootc_info, "executable", ["status", "--format=json"], BOOTC_STATUS),
    (os_info, "rpm_ostree_executable", ["status", "--json"], RPM_OSTREE_STATUS),
]
PRINTABLE = [value for value in HOSTILE if value.isprintable()]
NAMES = [value for value in PRINTABLE if value and "/" not in value]


@pytest.mark.parametrize("value", NAMES)
@pytest.mark.parametrize(("plugin", "option", "argv", "output"), STEPS)
def test_an_executable_name_is_looked_up_as_one_word_and_run_as_one(monkeypatch, plugin, option, argv, output, value):
    fake = fake_host(monkeypatch)
    fake["which"]["bootc"] = None
    fake["results"] = [(0, output, "")]
    args = {option: value}
    if plugin is os_info:
        args["backend"] = "rpm-ostree"
    run_action(plugin, args)
    assert fake["lookups"][0] == ["sh", "-c", 'command -v -- "$1"', "sh", value]
    assert [call[0] for call in fake["calls"]] == [["/usr/bin/" + value] + argv]
    assert fake["calls"][0][1] == {"env": {"LC_ALL": "C"}, "data": None}


@pytest.mark.parametrize("value", ["/opt/bin/" + v for v in PRINTABLE])
@pytest.mark.parametrize(("plugin", "option", "argv", "output"), STEPS)
def test_an_executable_path_is_tested_as_one_word(monkeypatch, plugin, option, argv, output, value):
    fake = fake_host(monkeypatch)
    result = run_action(plugin, {option: value}, failed=True)
    assert fake["lookups"] == [["test", "-f", value, "-a", "-x", value]]
    assert fake["calls"] == []
    assert result["msg"].startswith("%s '" % option)
    assert result["msg"].endswith("' does not exist or is not an executable file: expected the path of %s."
                                  % ("bootc" if plugin is bootc_info else "rpm-ostree"))


@pytest.mark.parametrize("value", [value for value in HOSTILE if not value.isprintable()])
@pytest.mark.parametrize(("plugin", "option", "argv", "output"), STEPS)
def test_a_control_character_is_refused_before_anything_runs(monkeypatch, plugin, option, argv, output, value):
    fake = fake_host(monkeypatch)
    for given in (value, "/opt/bin/" + value):
        result = run_action(plugin, {option: given}, failed=True)
        assert result["msg"].startswith("%s contains a control character" % option)
    assert fake["lookups"] == [] and fake["calls"] == []
