# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""rpm_ostree_info: main() with arguments and a faked run_command."""

from __future__ import annotations

import json

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.fleetos.layering.tests.unit.plugins.modules.utils import ExitJson, FailJson, fake_module
from ansible_collections.fleetos.layering.plugins.modules import rpm_ostree_info

DIGEST = "sha256:" + "f5" * 32
REFERENCE = "ostree-unverified-registry:198.51.100.1:5000/fleetos/lab-os@" + DIGEST


@pytest.fixture
def fake(monkeypatch):
    return fake_module(monkeypatch)


def _run(args, check_mode=False):
    if check_mode:
        args = dict(args, _ansible_check_mode=True)
    with patch_module_args(args):
        rpm_ostree_info.main()


def _status(*deployments, transaction=None):
    return json.dumps({"deployments": list(deployments), "transaction": transaction})


BOOTED = {"id": "fedora-coreos-aaa.0", "osname": "fedora-coreos", "checksum": "aaa", "serial": 0,
          "version": "1.0", "timestamp": 5, "booted": True, "staged": False, "pinned": False,
          "container-image-reference": REFERENCE, "container-image-reference-digest": DIGEST,
          "packages": []}
STAGED = {"id": "fedora-coreos-bbb.0", "osname": "fedora-coreos", "checksum": "bbb", "serial": 0,
          "timestamp": 6, "booted": False, "staged": True, "pinned": False,
          "origin": "fedora:fedora/x86_64/coreos/stable"}


@pytest.mark.parametrize("explicit", [False, True])
@pytest.mark.parametrize("check_mode", [False, True])
def test_info_reports_and_never_changes(fake, tmp_path, explicit, check_mode):
    args, binary = {}, "/usr/bin/rpm-ostree"
    if explicit:
        executable = tmp_path / "rpm-ostree"
        executable.write_text("#!/bin/sh\n")
        executable.chmod(0o755)
        args, binary = {"executable": str(executable)}, str(executable)
    fake["results"] = [(0, _status(STAGED, BOOTED, transaction=["UpdateDeployment", ":1.2", "/t"]), "")]
    with pytest.raises(ExitJson) as caught:
        _run(args, check_mode)
    result = caught.value.args[0]
    assert [call[0] for call in fake["calls"]] == [[binary, "status", "--json"]]
    assert fake["calls"][0][1] == {"environ_update": {"LC_ALL": "C"}, "expand_user_and_vars": False}
    assert result["changed"] is False
    assert [d["checksum"] for d in result["deployments"]] == ["bbb", "aaa"]
    assert result["booted"]["image"] == {"reference": REFERENCE, "transport": "ostree-unverified-registry",
                                         "name": "198.51.100.1:5000/fleetos/lab-os", "tag": None,
                                         "digest": DIGEST}
    assert result["staged"]["origin"] == "fedora:fedora/x86_64/coreos/stable"
    assert result["staged"]["image"] is None and result["staged"]["version"] is None
    assert result["rollback"] is None
    assert result["transaction"] == ["UpdateDeployment", ":1.2", "/t"]
    assert result["reboot_required"] is True


def test_info_idle_single_deployment(fake):
    fake["results"] = [(0, _status(BOOTED), "")]
    with pytest.raises(ExitJson) as caught:
        _run({})
    result = caught.value.args[0]
    assert result["staged"] is None and result["transaction"] is None
    assert result["reboot_required"] is False
    assert result["booted"]["base_checksum"] == "aaa"


def test_info_missing_executable(fake):
    with pytest.raises(FailJson) as caught:
        _run({"executable": "/nonexistent/rpm-ostree"})
    assert fake["calls"] == []
    assert caught.value.args[0]["msg"] == ("executable '/nonexistent/rpm-ostree' does not exist or is not an "
                                           "executable file: expected the path of rpm-ostree.")


@pytest.mark.parametrize(("rc", "out", "err", "msg"), [
    (1, "", "error: This system was not booted via libostree; cannot operate\n",
     "Failed to run rpm-ostree status: This system was not booted via libostree; cannot operate."),
    (0, "{not json", "", "Failed to parse the output of rpm-ostree status --json"),
])
def test_info_failures(fake, rc, out, err, msg):
    fake["results"] = [(rc, out, err)]
    with pytest.raises(FailJson) as caught:
        _run({})
    assert caught.value.args[0]["msg"].startswith(msg)
    assert caught.value.args[0]["cmd"] == ["/usr/bin/rpm-ostree", "status", "--json"]
