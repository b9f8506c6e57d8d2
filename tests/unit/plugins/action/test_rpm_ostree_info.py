# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""rpm_ostree_info: the action plugin with arguments, on a faked connection (the exact argv the host runs)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ansible_collections.fleetos.layering.tests.unit.plugins.action.utils import fake_host, run_action
from ansible_collections.fleetos.layering.plugins.action import rpm_ostree_info

DIGEST = "sha256:" + "f5" * 32
INDEX = "sha256:" + "1d" * 32
REFERENCE = "ostree-unverified-registry:198.51.100.1:5000/fleetos/lab-os@" + DIGEST
SHARED = Path(os.environ.get("FLEETOS_SHARED", str(Path(__file__).resolve().parents[5] / "shared")))
FIXTURES = SHARED / "reference" / "fixtures"


@pytest.fixture
def fake(monkeypatch):
    return fake_host(monkeypatch)


def _run(args, check_mode=False, failed=False):
    return run_action(rpm_ostree_info, args, failed=failed, check_mode=check_mode)


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
    args, binary = {}, "rpm-ostree"  # found by the host's shell when it runs
    if explicit:
        executable = tmp_path / "rpm-ostree"
        executable.write_text("#!/bin/sh\n")
        executable.chmod(0o755)
        args, binary = {"executable": str(executable)}, str(executable)
    fake["results"] = [(0, _status(STAGED, BOOTED, transaction=["UpdateDeployment", ":1.2", "/t"]), "")]
    result = _run(args, check_mode)
    assert [call[0] for call in fake["calls"]] == [[binary, "status", "--json"]]
    assert fake["calls"][0][1] == {"env": {"LC_ALL": "C"}, "data": None}
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
    result = _run({})
    assert result["staged"] is None and result["transaction"] is None
    assert result["reboot_required"] is False
    assert result["booted"]["base_checksum"] == "aaa"


def test_info_missing_executable(fake):
    result = _run({"executable": "/nonexistent/rpm-ostree"}, failed=True)
    assert fake["calls"] == []
    assert result["msg"] == ("executable '/nonexistent/rpm-ostree' does not exist or is not an "
                             "executable file: expected the path of rpm-ostree.")


@pytest.mark.parametrize(("rc", "out", "err", "msg"), [
    (1, "", "error: This system was not booted via libostree; cannot operate\n",
     "Failed to run rpm-ostree status: This system was not booted via libostree; cannot operate."),
    (0, "{not json", "", "Failed to parse the output of rpm-ostree status --json"),
])
def test_info_failures(fake, rc, out, err, msg):
    fake["results"] = [(rc, out, err)]
    result = _run({}, failed=True)
    assert result["msg"].startswith(msg)
    assert result["cmd"] == ["rpm-ostree", "status", "--json"]


@pytest.mark.parametrize(("machine", "architecture"), [
    ("x86_64", "amd64"), ("aarch64", "arm64"), ("ppc64le", "ppc64le"), ("s390x", "s390x"), ("armv7l", "arm"),
    ("i686", "386"), ("loongarch64", "loongarch64"),
])
def test_info_architecture(fake, machine, architecture):
    fake["machine"] = machine
    fake["results"] = [(0, _status(BOOTED), "")]
    assert _run({})["architecture"] == architecture


def test_info_index_digest_and_manifest_digest(fake):
    """A reference pinned to an OCI index digest: digest is the pinned one, manifest_digest the reported one."""
    booted = dict(BOOTED, **{"container-image-reference": "ostree-image-signed:docker://quay.io/os@" + INDEX})
    fake["results"] = [(0, _status(booted), "")]
    image = _run({})["booted"]["image"]
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
    result = _run({})
    image = result["staged"]["image"]
    assert image["reference"] == raw["container-image-reference"]
    assert (image["tag"], image["transport_kind"]) == ("testing-devel", "registry")
    assert image["digest"] == image["manifest_digest"] == raw["container-image-reference-digest"]
    assert result["booted"]["image"] is None and result["reboot_required"] is True


def test_a_host_without_rpm_ostree_is_told_in_one_sentence(fake):
    fake["results"] = [(127, "", "sh: 1: rpm-ostree: not found\n")]
    result = _run({}, failed=True)
    assert result["msg"] == ("Failed to run rpm-ostree status: the host has no 'rpm-ostree' command in its PATH (exit "
                             "status 127): install it or give the path of the executable.")
    assert (result["cmd"], result["rc"]) == (["rpm-ostree", "status", "--json"], 127)
