# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""bootc_info: the action plugin with arguments on a faked connection, against the real bootc samples.

The samples live in ../shared/reference/fixtures (bootc-status__*.json / .yaml); every
expected value is computed from the sample's own fields here, not copied from it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from ansible_collections.fleetos.layering.tests.unit.plugins.action.utils import fake_host, run_action
from ansible_collections.fleetos.layering.plugins.action import bootc_info

SHARED = Path(os.environ.get("FLEETOS_SHARED", str(Path(__file__).resolve().parents[5] / "shared")))
FIXTURES = SHARED / "reference" / "fixtures"
SAMPLES = sorted(p for p in FIXTURES.glob("bootc-status__*") if p.suffix in (".json", ".yaml")
                 and not p.name.endswith(".schema.json")) if FIXTURES.is_dir() else []
NO_SHARED = "the bootc samples are read from %s, which is absent" % FIXTURES
BOOTC = "bootc"  # found by the host's shell when it runs
ENV = {"env": {"LC_ALL": "C"}, "data": None}


class _StringTimestamps(yaml.SafeLoader):
    """A YAML loader that keeps RFC 3339 timestamps as text, as bootc's JSON output has them."""


_StringTimestamps.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def load_sample(path):
    with open(path, encoding="utf-8") as handle:
        return yaml.load(handle, Loader=_StringTimestamps)  # noqa: S506 - a SafeLoader subclass


@pytest.fixture
def fake(monkeypatch):
    return fake_host(monkeypatch)


def _split(reference):
    """(name, tag, digest) of a registry reference, by plain string rules (independent of the module)."""
    digest = None
    if "@" in reference:
        reference, digest = reference.split("@", 1)
    tag = None
    if reference.rfind(":") > reference.rfind("/"):
        reference, tag = reference.rsplit(":", 1)
    return reference, tag, digest


def expected_entry(raw, role):
    if raw is None:
        return None
    image_status = raw["image"]
    tracked = image_status["image"]
    name, tag, pinned = _split(tracked["image"])
    cached = raw.get("cachedUpdate")
    cached_update = None
    if cached and cached["imageDigest"] != image_status["imageDigest"]:
        cached_update = {"digest": cached["imageDigest"], "version": cached.get("version")}
    return {
        "booted": role == "booted",
        "staged": role == "staged",
        "image": {"reference": tracked["image"], "transport": tracked["transport"], "name": name, "tag": tag,
                  "digest": pinned or image_status["imageDigest"], "manifest_digest": image_status["imageDigest"],
                  "signature": tracked.get("signature")},
        "version": image_status.get("version"),
        "timestamp": image_status.get("timestamp"),
        "architecture": image_status.get("architecture"),
        "checksum": raw["ostree"]["checksum"],
        "stateroot": raw["ostree"].get("stateroot"),
        "deploy_serial": raw["ostree"]["deploySerial"],
        "composefs_verity": None,
        "pinned": raw["pinned"],
        "incompatible": raw["incompatible"],
        "download_only": raw.get("downloadOnly", False),
        "soft_reboot_capable": raw.get("softRebootCapable", False),
        "cached_update": cached_update,
    }


@pytest.mark.skipif(not SAMPLES, reason=NO_SHARED)
@pytest.mark.parametrize("path", SAMPLES, ids=[p.name for p in SAMPLES])
@pytest.mark.parametrize("check_mode", [False, True])
def test_reads_every_bootc_sample(fake, path, check_mode):
    sample = load_sample(path)
    status = sample["status"]
    fake["results"] = [(0, json.dumps(sample), "")]
    result = run_action(bootc_info, {}, check_mode=check_mode)

    assert [call[0] for call in fake["calls"]] == [[BOOTC, "status", "--format=json"]]
    assert fake["calls"][0][1] == ENV
    assert result["changed"] is False
    assert result["api_version"] == sample["apiVersion"]
    assert result["is_bootc"] is (status.get("booted") is not None)
    assert result["type"] == status.get("type")
    for role in ("booted", "staged", "rollback"):
        assert result[role] == expected_entry(status.get(role), role), role
    assert [d["image"]["manifest_digest"] for d in result["deployments"]] == [
        status[role]["image"]["imageDigest"] for role in ("staged", "booted", "rollback") if status.get(role)]
    rollback_queued = status.get("rollbackQueued", False)
    assert result["rollback_queued"] is rollback_queued
    # The next boot changes the deployment: a queued rollback, or a staged one that is not download-only.
    staged = status.get("staged")
    assert result["reboot_required"] is ((staged is not None and not staged.get("downloadOnly", False))
                                         or rollback_queued)
    next_entry = status.get("staged") or status["booted"]
    cached = next_entry.get("cachedUpdate")
    if cached and cached["imageDigest"] != next_entry["image"]["imageDigest"]:
        assert result["cached_update"] == {"digest": cached["imageDigest"], "version": cached["version"]}
    else:
        assert result["cached_update"] is None
    booted_arch = status["booted"]["image"].get("architecture")
    assert result["architecture"] == (booted_arch or "amd64")
    assert result["spec_image"]["reference"] == sample["spec"]["image"]["image"]


DOWNLOAD_ONLY = FIXTURES / "bootc-status__bootc-fixture__staged-download-only.yaml"


@pytest.mark.skipif(not DOWNLOAD_ONLY.is_file(), reason="bootc's staged-download-only sample is read from %s, which "
                    "is absent" % FIXTURES)
def test_a_download_only_staged_deployment_needs_no_ordinary_reboot(fake):
    sample = load_sample(DOWNLOAD_ONLY)
    fake["results"] = [(0, json.dumps(sample), "")]
    result = run_action(bootc_info, {})
    assert sample["status"]["staged"]["downloadOnly"] is True and not sample["status"].get("rollbackQueued")
    assert result["staged"]["download_only"] is True
    assert result["staged"]["checksum"] == sample["status"]["staged"]["ostree"]["checksum"]
    assert result["booted"]["download_only"] is False
    assert result["reboot_required"] is False


# ---------------------------------------------------------------- own minimal samples

DIGEST = "sha256:" + "ab" * 32
NEWER = "sha256:" + "cd" * 32


def _entry(image="quay.io/example/os:1", transport="registry", digest=DIGEST, **extra):
    entry = {"image": {"image": {"image": image, "transport": transport}, "imageDigest": digest,
                       "architecture": "amd64", "version": "1"},
             "pinned": False, "incompatible": False, "ostree": {"checksum": "c" * 64, "deploySerial": 0,
                                                                "stateroot": "default"}}
    entry.update(extra)
    return entry


def _host(api_version="org.containers.bootc/v1", **status):
    return json.dumps({"apiVersion": api_version, "kind": "BootcHost", "metadata": {"name": "host"},
                       "spec": {"image": None, "bootOrder": "default"}, "status": status})


def test_not_a_bootc_host_is_a_result(fake):
    fake["results"] = [(0, _host(booted=None, staged=None, rollback=None, rollbackQueued=False, type=None), "")]
    result = run_action(bootc_info, {})
    assert result["is_bootc"] is False
    assert (result["booted"], result["staged"], result["rollback"], result["cached_update"]) == (None,) * 4
    assert result["deployments"] == [] and result["reboot_required"] is False
    assert result["architecture"] == "amd64"


def test_older_bootc_without_format_uses_json(fake):
    refused = "error: unexpected argument '--format' found\n\nUsage: bootc status [OPTIONS]\n"
    fake["results"] = [(2, "", refused), (0, _host("org.containers.bootc/v1alpha1", booted=_entry()), "")]
    result = run_action(bootc_info, {})
    assert [call[0] for call in fake["calls"]] == [[BOOTC, "status", "--format=json"], [BOOTC, "status", "--json"]]
    assert result["booted"]["image"]["digest"] == DIGEST


@pytest.mark.parametrize(("output", "cause"), [
    ("not json", "the output is not JSON"),
    (_host("org.containers.bootc/v2", booted=None), "apiVersion 'org.containers.bootc/v2' is not one of"),
])
def test_unreadable_status_fails_in_one_sentence(fake, output, cause):
    fake["results"] = [(0, output, "")]
    result = run_action(bootc_info, {}, failed=True)
    assert result["msg"].startswith("Failed to parse the bootc status: " + cause)
    assert result["msg"].endswith(".") and "\n" not in result["msg"]


def test_failing_bootc_names_its_stderr(fake):
    fake["results"] = [(1, "", "error: Status: opening sysroot: Permission denied\n")]
    result = run_action(bootc_info, {}, failed=True)
    assert result["msg"] == "Failed to read the bootc status: Status: opening sysroot: Permission denied."
    assert result["cmd"] == [BOOTC, "status", "--format=json"] and result["rc"] == 1


def test_queued_rollback_pinned_reference_and_oci(fake):
    booted = _entry(image="quay.io/example/os@" + NEWER, digest=DIGEST,
                    cachedUpdate={"image": {"image": "quay.io/example/os", "transport": "registry"},
                                  "imageDigest": NEWER, "version": "2"})
    rollback = _entry(image="/var/tmp/os-layout:stable", transport="oci", pinned=True)
    fake["results"] = [(0, _host(booted=booted, staged=None, rollback=rollback, rollbackQueued=True), "")]
    result = run_action(bootc_info, {})
    # The digest the reference pins decides (an index digest); imageDigest is the manifest digest.
    assert result["booted"]["image"]["digest"] == NEWER
    assert result["booted"]["image"]["manifest_digest"] == DIGEST
    assert result["cached_update"] == {"digest": NEWER, "version": "2"}
    assert result["rollback"]["image"]["name"] == "/var/tmp/os-layout"
    assert result["rollback"]["image"]["tag"] == "stable"
    assert result["rollback"]["pinned"] is True
    assert result["rollback_queued"] is True and result["reboot_required"] is True


def test_executable_option(fake, tmp_path):
    binary = tmp_path / "bootc"
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    fake["results"] = [(0, _host(booted=_entry()), "")]
    run_action(bootc_info, {"executable": str(binary)})
    assert fake["calls"][0][0] == [str(binary), "status", "--format=json"]
