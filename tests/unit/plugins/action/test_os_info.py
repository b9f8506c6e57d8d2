# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""os_info: which tool reads the host (backend auto, bootc, rpm-ostree), and one shape from both; the
action plugin on a faked connection."""

from __future__ import annotations

import json

import pytest

from ansible_collections.fleetos.layering.tests.unit.plugins.action.utils import fake_host, run_action
from ansible_collections.fleetos.layering.plugins.action import os_info
from ansible_collections.fleetos.layering.plugins.module_utils.images._image_ref import parse
from ansible_collections.fleetos.layering.plugins.plugin_utils.rollout._plan import host_plan

BOOTC = "bootc"  # found by the host's shell when it runs
RPM_OSTREE = "rpm-ostree"
DIGEST = "sha256:" + "ab" * 32
OLD = "sha256:" + "cd" * 32
NAME = "registry.example.com/os/node"


@pytest.fixture
def fake(monkeypatch):
    state = fake_host(monkeypatch)
    state["machine"] = "aarch64"
    return state


def _entry(image, digest, signature=None, transport="registry", checksum="c" * 64):
    tracked = {"image": image, "transport": transport}
    if signature is not None:
        tracked["signature"] = signature
    return {"image": {"image": tracked, "imageDigest": digest, "version": "1"},
            "pinned": False, "incompatible": False, "ostree": {"checksum": checksum, "deploySerial": 0}}


def _bootc(**status):
    entries = dict({"booted": None, "staged": None, "rollback": None}, **status)
    return json.dumps({"apiVersion": "org.containers.bootc/v1", "kind": "BootcHost", "metadata": {"name": "host"},
                       "spec": {"image": None}, "status": entries})


def _rpm_ostree(reference, digest):
    return json.dumps({"deployments": [{"booted": True, "checksum": "d" * 64, "container-image-reference": reference,
                                        "container-image-reference-digest": digest, "osname": "default"}],
                       "transaction": None})


def test_auto_reads_a_bootc_host_with_bootc(fake):
    fake["results"] = [(0, _bootc(booted=_entry("%s@%s" % (NAME, DIGEST), DIGEST),
                                  staged=_entry(NAME + ":2", OLD, signature="containerPolicy")), "")]
    result = run_action(os_info, {})
    assert [call[0] for call in fake["calls"]] == [[BOOTC, "status", "--format=json"]]
    assert result["backend"] == "bootc" and result["changed"] is False
    booted, staged = result["booted"], result["staged"]
    # The reference is the one bootc writes in the origin: the planner parses it with the grammar.
    assert booted["image"]["reference"] == "ostree-unverified-registry:%s@%s" % (NAME, DIGEST)
    assert parse(booted["image"]["reference"]).digest == DIGEST
    assert staged["image"]["reference"] == "ostree-image-signed:docker://%s:2" % NAME
    assert (staged["image"]["transport"], staged["image"]["transport_kind"]) == ("ostree-image-signed", "signed")
    assert staged["image"]["bootc_transport"] == "registry" and staged["image"]["signature"] == "containerPolicy"
    assert result["deployments"][0] is not None and result["deployments"][0]["image"] == staged["image"]
    assert result["reboot_required"] is True
    assert result["architecture"] == "arm64"


@pytest.mark.parametrize(("download_only", "reboot_required"), [(True, False), (False, True)])
def test_a_download_only_staged_deployment_is_reported_and_needs_no_ordinary_reboot(fake, download_only,
                                                                                    reboot_required):
    staged = dict(_entry(NAME + "@" + DIGEST, DIGEST), downloadOnly=download_only)
    fake["results"] = [(0, _bootc(booted=_entry(NAME + "@" + OLD, OLD), staged=staged), "")]
    result = run_action(os_info, {"backend": "bootc"})
    assert result["staged"]["download_only"] is download_only
    assert result["staged"]["image"]["digest"] == DIGEST
    assert result["reboot_required"] is reboot_required


@pytest.mark.parametrize(("signature", "transport", "image", "expected"), [
    ({"ostreeRemote": "fleet"}, "registry", NAME + ":1", "ostree-remote-image:fleet:docker://%s:1" % NAME),
    (None, "oci", "/var/tmp/layout:stable", "ostree-unverified-image:oci:/var/tmp/layout:stable"),
    ("insecure", "containers-storage", NAME + ":1", "ostree-unverified-image:containers-storage:%s:1" % NAME),
])
def test_bootc_references_follow_the_origin_bootc_writes(fake, signature, transport, image, expected):
    fake["results"] = [(0, _bootc(booted=_entry(image, DIGEST, signature=signature, transport=transport)), "")]
    result = run_action(os_info, {"backend": "bootc"})
    assert result["booted"]["image"]["reference"] == expected
    assert result["booted"]["image"]["transport"] == expected.split(":", 1)[0]


def test_auto_reads_rpm_ostree_where_bootc_did_not_boot_the_host(fake):
    fake["results"] = [(0, _bootc(), ""), (0, _rpm_ostree("ostree-unverified-registry:%s@%s" % (NAME, DIGEST), DIGEST), "")]
    result = run_action(os_info, {})
    assert [call[0][0] for call in fake["calls"]] == [BOOTC, RPM_OSTREE]
    assert result["backend"] == "rpm-ostree"
    assert result["booted"]["image"]["digest"] == DIGEST and result["booted"]["checksum"] == "d" * 64


def test_auto_without_bootc_asks_rpm_ostree_only(fake):
    fake["which"]["bootc"] = None
    fake["results"] = [(0, _rpm_ostree("ostree-unverified-registry:%s@%s" % (NAME, DIGEST), DIGEST), "")]
    result = run_action(os_info, {})
    assert [call[0] for call in fake["calls"]] == [[RPM_OSTREE, "status", "--json"]]
    assert result["backend"] == "rpm-ostree"


def test_auto_takes_a_failing_bootc_for_a_package_mode_host(fake):
    fake["results"] = [(1, "", "error: Status: not booted via ostree\n"),
                       (0, _rpm_ostree("ostree-unverified-registry:%s@%s" % (NAME, DIGEST), DIGEST), "")]
    assert run_action(os_info, {})["backend"] == "rpm-ostree"


def test_backend_bootc_on_a_host_bootc_did_not_boot_fails(fake):
    fake["results"] = [(0, _bootc(), "")]
    result = run_action(os_info, {"backend": "bootc"}, failed=True)
    assert result["msg"] == "Failed to read the host with bootc: bootc did not boot it (status.booted is null)."
    assert len(fake["calls"]) == 1


def test_backend_rpm_ostree_never_asks_bootc(fake):
    fake["results"] = [(0, _rpm_ostree("ostree-unverified-registry:%s@%s" % (NAME, DIGEST), DIGEST), "")]
    assert run_action(os_info, {"backend": "rpm-ostree"})["backend"] == "rpm-ostree"
    assert [call[0][0] for call in fake["calls"]] == [RPM_OSTREE]


def test_a_bootc_host_plans_like_an_rpm_ostree_host(fake):
    """The planner gets the same action from both tools' view of the same deployment."""
    fake["results"] = [(0, _bootc(booted=_entry("%s@%s" % (NAME, DIGEST), DIGEST)), ""),
                       (0, _rpm_ostree("ostree-unverified-registry:%s@%s" % (NAME, DIGEST), DIGEST), "")]
    by_bootc = run_action(os_info, {"backend": "bootc"})
    by_rpm_ostree = run_action(os_info, {"backend": "rpm-ostree"})
    resolutions = {"%s@%s" % (NAME, DIGEST): {"digest": DIGEST, "index": False}}
    plans = [host_plan({"image": "%s@%s" % (NAME, DIGEST)}, "node", resolutions=resolutions, status=status)
             for status in (by_bootc, by_rpm_ostree)]
    assert [p["action"] for p in plans] == ["unchanged", "unchanged"]
    assert [p["backend"] for p in plans] == ["bootc", "rpm-ostree"]


def test_a_bootc_host_cannot_take_an_ostree_remote_transport(fake):
    fake["results"] = [(0, _bootc(booted=_entry("%s@%s" % (NAME, OLD), OLD)), "")]
    status = run_action(os_info, {})
    resolutions = {"%s@%s" % (NAME, DIGEST): {"digest": DIGEST, "index": False}}
    plan = host_plan({"image": "%s@%s" % (NAME, DIGEST), "transport": "ostree-remote-image:fleet"}, "node",
                     resolutions=resolutions, status=status)
    assert plan["action"] == "error"
    assert plan["reason"].startswith("transport ostree-remote-image:fleet cannot be used on a bootc host")
    signed = host_plan({"image": "%s@%s" % (NAME, DIGEST), "transport": "ostree-image-signed"}, "node",
                       resolutions=resolutions, status=status)
    assert signed["action"] == "stage" and signed["backend"] == "bootc"


@pytest.mark.parametrize("option", ["bootc_executable", "rpm_ostree_executable"])
def test_an_executable_that_is_not_a_file_is_named_by_its_option(fake, tmp_path, option):
    result = run_action(os_info, {option: str(tmp_path)}, failed=True)
    assert result["msg"].startswith("%s '%s' does not exist or is not an executable file" % (option, tmp_path))
    assert fake["calls"] == []


def test_a_bootc_host_on_a_disk_images_commit_is_staged_not_pinned(fake):
    """The rollout's pin (origin rewrite) needs a commit bootc imported from an image."""
    checksum = "e" * 64
    fake["results"] = [(0, _bootc(booted={"image": None, "pinned": False, "incompatible": False,
                                          "ostree": {"checksum": checksum, "deploySerial": 0}}), "")]
    status = run_action(os_info, {})
    assert status["backend"] == "bootc" and status["booted"]["image"] is None
    image = "%s@%s" % (NAME, DIGEST)
    resolutions = {image: {"digest": DIGEST, "index": False}}
    inspections = {image: {"labels": {"ostree.bootable": "true", "ostree.commit": checksum}}}
    plan = host_plan({"image": image}, "node", resolutions=resolutions, status=status, inspections=inspections)
    assert plan["commit"] == checksum and plan["action"] == "stage"
    assert host_plan({"image": image}, "node", resolutions=resolutions, inspections=inspections,
                     status=dict(status, backend="rpm-ostree"))["action"] == "pin"
