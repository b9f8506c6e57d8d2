# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""rpm_ostree_info: main() with arguments and a faked run_command."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ansible_collections.fleetos.layering.tests.unit.plugins.modules.utils import patch_module_args, ExitJson, FailJson, fake_module
from ansible_collections.fleetos.layering.plugins.modules import rpm_ostree_info

DIGEST = "sha256:" + "f5" * 32
INDEX = "sha256:" + "1d" * 32
REFERENCE = "ostree-unverified-registry:198.51.100.1:5000/fleetos/lab-os@" + DIGEST
SHARED = Path(os.environ.get("FLEETOS_SHARED", str(Path(__file__).resolve().parents[5] / "shared")))
FIXTURES = SHARED / "reference" / "fixtures"


class _Uname:
    def __init__(self, machine):
        self.machine = machine


@pytest.fixture
def fake(monkeypatch):
    state = fake_module(monkeypatch)
    monkeypatch.setattr(rpm_ostree_info.os, "uname", lambda: _Uname("x86_64"))
    return state


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
                                         "transport_kind": "registry",
                                         "name": "198.51.100.1:5000/fleetos/lab-os", "tag": None,
                                         "digest": DIGEST, "manifest_digest": DIGEST}
    assert result["architecture"] == "amd64"
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


@pytest.mark.parametrize(("machine", "architecture"), [
    ("x86_64", "amd64"), ("aarch64", "arm64"), ("ppc64le", "ppc64le"), ("s390x", "s390x"), ("armv7l", "arm"),
    ("i686", "386"), ("loongarch64", "loongarch64"),
])
def test_info_architecture(fake, monkeypatch, machine, architecture):
    monkeypatch.setattr(rpm_ostree_info.os, "uname", lambda: _Uname(machine))
    fake["results"] = [(0, _status(BOOTED), "")]
    with pytest.raises(ExitJson) as caught:
        _run({})
    assert caught.value.args[0]["architecture"] == architecture


def test_info_index_digest_and_manifest_digest(fake):
    """A reference pinned to an OCI index digest: digest is the pinned one, manifest_digest the reported one."""
    booted = dict(BOOTED, **{"container-image-reference": "ostree-image-signed:docker://quay.io/os@" + INDEX})
    fake["results"] = [(0, _status(booted), "")]
    with pytest.raises(ExitJson) as caught:
        _run({})
    image = caught.value.args[0]["booted"]["image"]
    assert (image["transport"], image["transport_kind"], image["digest"], image["manifest_digest"]) == (
        "ostree-image-signed", "signed", INDEX, DIGEST)


def test_info_real_sample_staged_rebase_to_a_tag(fake):
    """The real staged rebase of Fedora CoreOS to a tag: both digests are the reported manifest digest."""
    path = FIXTURES / "rpm-ostree-status__rpmostree-client-go__fcos-container-staged-rebase.json"
    if not path.is_file():
        pytest.skip("real rpm-ostree samples not found at %s (set FLEETOS_SHARED)" % FIXTURES)
    text = path.read_text(encoding="utf-8")
    raw = json.loads(text)["deployments"][0]
    fake["results"] = [(0, text, "")]
    with pytest.raises(ExitJson) as caught:
        _run({})
    result = caught.value.args[0]
    image = result["staged"]["image"]
    assert image["reference"] == raw["container-image-reference"]
    assert (image["tag"], image["transport_kind"]) == ("testing-devel", "registry")
    assert image["digest"] == image["manifest_digest"] == raw["container-image-reference-digest"]
    assert result["booted"]["image"] is None and result["reboot_required"] is True
