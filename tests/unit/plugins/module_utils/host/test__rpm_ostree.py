# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The rpm-ostree status parser (against the real samples) and the client."""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path

import pytest

from ansible_collections.fleetos.layering.tests.unit.plugins.module_utils.utils import FakeModule
from ansible_collections.fleetos.layering.plugins.module_utils._errors import (
    CommandError,
    InvalidInputError,
    TransactionBusyError,
)
from ansible_collections.fleetos.layering.plugins.module_utils.host import _deployments, _rpm_ostree

SHARED = Path(os.environ.get("FLEETOS_SHARED", str(Path(__file__).resolve().parents[6] / "shared")))
FIXTURES = SHARED / "reference" / "fixtures"
SAMPLE_PREFIX = "rpm-ostree-status__"


def _sample(name):
    path = FIXTURES / (SAMPLE_PREFIX + name + ".json")
    if not path.is_file():
        pytest.skip("real rpm-ostree samples not found at %s (set FLEETOS_SHARED)" % FIXTURES)
    return json.loads(path.read_text(encoding="utf-8"))


def _short(deployment):
    return deployment["checksum"][:12] if deployment else None


# sample, booted, staged, rollback, reboot_required, first image (transport, name, tag, digest prefix)
SAMPLES = [
    ("insights-core__rhcos-unverified-registry-digest", "40948b845a13", None, None, False,
     ("ostree-unverified-registry", "quay.io/openshift-release-dev/ocp-v4.0-art-dev", None, "sha256:90780b08939d")),
    ("insights-core__rhel-edge-layered-pending", "7c25253d45a3", None, "e2707b5fc7d4", False, None),
    ("insights-puptoo__bootc-default-stateroot-staged", None, "a7b1b7f5cc43", None, True,
     ("ostree-unverified-registry", "192.168.122.1:5000/bootc-insights", "latest", "sha256:758216cb799c")),
    ("rpm-ostree-client__silverblue-layered-overrides", "63335a77f985", None, "775d54e89bc7", False, None),
    ("rpmostree-client-go__fcos-container-staged-rebase", "a465c49fef18", "7239c56aa4fe", None, True,
     ("ostree-unverified-registry", "quay.io/fedora/fedora-coreos", "testing-devel", "sha256:25d3a07d5383")),
    ("zincati__oci-booted-plus-rollback", "5ff49ca469b1", None, "efc636201dd1", False,
     ("ostree-image-signed", "quay.io/fedora/fedora-coreos", "stable", "sha256:688fb50c9f19")),
    ("zincati__staged-refspec-pending", "01f074cc6cd8", "967b7b8d624e", None, True, None),
]


def test_every_real_sample_is_in_the_table():
    if not FIXTURES.is_dir():
        pytest.skip("real rpm-ostree samples not found at %s (set FLEETOS_SHARED)" % FIXTURES)
    present = {p.name[len(SAMPLE_PREFIX):-len(".json")] for p in FIXTURES.glob(SAMPLE_PREFIX + "*.json")}
    assert present == {case[0] for case in SAMPLES}


@pytest.mark.parametrize(("name", "booted", "staged", "rollback", "reboot_required", "image"), SAMPLES,
                         ids=[case[0] for case in SAMPLES])
def test_real_samples_parse(name, booted, staged, rollback, reboot_required, image):
    raw = _sample(name)
    status = _rpm_ostree.parse_status(raw)
    assert _short(status["booted"]) == booted
    assert _short(status["staged"]) == staged
    assert _short(status["rollback"]) == rollback
    assert status["reboot_required"] is reboot_required
    assert status["transaction"] is None
    assert [d["checksum"] for d in status["deployments"]] == [d["checksum"] for d in raw["deployments"]]
    first = status["deployments"][0]
    if image is None:
        assert first["image"] is None
        assert first["origin"] == raw["deployments"][0]["origin"]
    else:
        assert first["origin"] is None
        got = first["image"]
        assert (got["transport"], got["name"], got["tag"]) == image[:3]
        assert got["digest"].startswith(image[3]) and len(got["digest"]) == 71
        assert got["reference"] == raw["deployments"][0]["container-image-reference"]
    for parsed, source in zip(status["deployments"], raw["deployments"]):
        assert parsed["id"] == source["id"]
        assert parsed["staged"] is bool(source.get("staged", False))
        assert parsed["version"] == source.get("version")
        assert parsed["base_checksum"] == source.get("base-checksum", source["checksum"])
        assert parsed["layered_packages"] == source["packages"]


@pytest.mark.parametrize("name", [case[0] for case in SAMPLES if case[5] is not None])
def test_real_samples_digest_and_manifest_digest(name):
    """image.digest is the digest the reference pins, else the reported one; manifest_digest is the reported one."""
    raw = _sample(name)
    status = _rpm_ostree.parse_status(raw)
    images = 0
    for parsed, source in zip(status["deployments"], raw["deployments"]):
        reference = source.get("container-image-reference")
        if not reference:
            continue
        images += 1
        reported = source["container-image-reference-digest"]
        pinned = reference.rsplit("@", 1)[1] if "@" in reference else None
        image = parsed["image"]
        assert image["manifest_digest"] == reported
        assert image["digest"] == (pinned or reported)
        assert image["transport_kind"] == {"ostree-unverified-registry": "registry",
                                           "ostree-image-signed": "signed"}[image["transport"]]
        assert _deployments.has_digest(parsed, reported)
    assert images > 0


def test_real_sample_with_an_index_digest_pinned():
    """The real RHCOS sample, its reference rewritten to pin an OCI index digest (as a multi-arch tag resolves)."""
    raw = _sample("insights-core__rhcos-unverified-registry-digest")
    deployment = dict(raw["deployments"][0])
    reported = deployment["container-image-reference-digest"]
    name = deployment["container-image-reference"].rsplit("@", 1)[0]
    deployment["container-image-reference"] = name + "@" + INDEX
    status = _rpm_ostree.parse_status({"deployments": [deployment]})
    image = status["booted"]["image"]
    assert (image["digest"], image["manifest_digest"]) == (INDEX, reported)
    # Both identify the same content on this host; another digest does not.
    assert _deployments.has_digest(status["booted"], INDEX)
    assert _deployments.has_digest(status["booted"], reported)
    assert not _deployments.has_digest(status["booted"], DIGEST)


def test_missing_optional_keys_are_normal():
    status = _rpm_ostree.parse_status({"deployments": [{"id": "os-abc.0", "checksum": "abc", "booted": True}]})
    deployment = status["deployments"][0]
    assert deployment["staged"] is False and deployment["pinned"] is False
    assert deployment["version"] is None and deployment["image"] is None and deployment["custom_origin"] is None
    assert deployment["layered_packages"] == [] and deployment["base_checksum"] == "abc"
    assert status["transaction"] is None and status["reboot_required"] is False


def _dep(checksum, booted=False, staged=False, **extra):
    raw = {"id": "os-%s.0" % checksum, "osname": "os", "checksum": checksum, "serial": 0,
           "booted": booted, "staged": staged}
    raw.update(extra)
    return raw


DIGEST = "sha256:" + "ab" * 32
INDEX = "sha256:" + "cd" * 32


@pytest.mark.parametrize(("deployments", "booted", "staged", "rollback", "reboot_required"), [
    ([_dep("a", booted=True)], "a", None, None, False),
    ([_dep("a", booted=True), _dep("b")], "a", None, "b", False),
    ([_dep("s", staged=True), _dep("a", booted=True), _dep("b")], "a", "s", "b", True),
    # rpm-ostree rollback made the old deployment the default: pending, not staged.
    ([_dep("b"), _dep("a", booted=True)], "a", None, None, True),
    ([_dep("b"), _dep("a", booted=True), _dep("c")], "a", None, "c", True),
    ([], None, None, None, False),
])
def test_booted_staged_rollback_and_reboot_required(deployments, booted, staged, rollback, reboot_required):
    status = _rpm_ostree.parse_status({"deployments": deployments, "transaction": None})
    assert _short(status["booted"]) == booted
    assert _short(status["staged"]) == staged
    assert _short(status["rollback"]) == rollback
    assert status["reboot_required"] is reboot_required


@pytest.mark.parametrize(("extra", "expected"), [
    ({"custom-origin": ["https://example.com/os", "Managed by example"]},
     {"url": "https://example.com/os", "description": "Managed by example"}),
    ({"custom-origin": {"url": "u", "description": "d"}}, {"url": "u", "description": "d"}),
    ({}, None),
])
def test_custom_origin(extra, expected):
    status = _rpm_ostree.parse_status({"deployments": [_dep("a", booted=True, **extra)]})
    assert status["deployments"][0]["custom_origin"] == expected


@pytest.mark.parametrize(("extra", "image"), [
    ({"container-image-reference": "ostree-unverified-registry:quay.io/os@" + DIGEST},
     {"reference": "ostree-unverified-registry:quay.io/os@" + DIGEST, "transport": "ostree-unverified-registry",
      "transport_kind": "registry", "name": "quay.io/os", "tag": None, "digest": DIGEST, "manifest_digest": None}),
    ({"container-image-reference": "ostree-unverified-registry:quay.io/os:1",
      "container-image-reference-digest": DIGEST},
     {"reference": "ostree-unverified-registry:quay.io/os:1", "transport": "ostree-unverified-registry",
      "transport_kind": "registry", "name": "quay.io/os", "tag": "1", "digest": DIGEST, "manifest_digest": DIGEST}),
    ({"container-image-reference": "ostree-unverified-registry:quay.io/os:1"},
     {"reference": "ostree-unverified-registry:quay.io/os:1", "transport": "ostree-unverified-registry",
      "transport_kind": "registry", "name": "quay.io/os", "tag": "1", "digest": None, "manifest_digest": None}),
    # The reference pins an OCI index digest; rpm-ostree reports the per-platform manifest digest.
    ({"container-image-reference": "ostree-remote-image:fleet:docker://quay.io/os@" + INDEX,
      "container-image-reference-digest": DIGEST},
     {"reference": "ostree-remote-image:fleet:docker://quay.io/os@" + INDEX, "transport": "ostree-remote-image",
      "transport_kind": "remote", "name": "quay.io/os", "tag": None, "digest": INDEX, "manifest_digest": DIGEST}),
    # A transport this collection does not split is reported, not an error.
    ({"container-image-reference": "ostree-unverified-image:oci:/var/os", "container-image-reference-digest": DIGEST},
     {"reference": "ostree-unverified-image:oci:/var/os", "transport": "ostree-unverified-image",
      "transport_kind": "registry", "name": None, "tag": None, "digest": DIGEST, "manifest_digest": DIGEST}),
    ({"container-image-reference": "ostree-container:containers-storage:os"},
     {"reference": "ostree-container:containers-storage:os", "transport": "ostree-container",
      "transport_kind": None, "name": None, "tag": None, "digest": None, "manifest_digest": None}),
    # OpenShift's legacy pivot origin names the oscontainer it was provisioned from.
    ({"origin": "a" * 64, "custom-origin": ["pivot://quay.io/os@" + DIGEST, "Provisioned from oscontainer"]},
     {"reference": "pivot://quay.io/os@" + DIGEST, "transport": "pivot", "transport_kind": None,
      "name": "quay.io/os", "tag": None, "digest": DIGEST, "manifest_digest": None}),
    # Any other custom origin, or a pivot URL without a digest, names no image.
    ({"origin": "a" * 64, "custom-origin": ["pivot://quay.io/os:4.12", "Provisioned from oscontainer"]}, None),
    ({"origin": "a" * 64, "custom-origin": ["https://example.com/os@" + DIGEST, "Managed"]}, None),
])
def test_image(extra, image):
    status = _rpm_ostree.parse_status({"deployments": [_dep("a", booted=True, **extra)]})
    assert status["booted"]["image"] == image
    assert _deployments.has_digest(status["booted"], DIGEST) is (
        image is not None and DIGEST in (image["digest"], image["manifest_digest"]))


def test_transaction_and_text_input():
    text = json.dumps({"deployments": [_dep("a", booted=True)],
                       "transaction": ["UpdateDeployment", ":1.4", "/org/projectatomic/rpmostree1/transaction"]})
    assert _rpm_ostree.parse_status(text)["transaction"] == [
        "UpdateDeployment", ":1.4", "/org/projectatomic/rpmostree1/transaction"]


@pytest.mark.parametrize("doc", ["not json", "{}", {"deployments": "x"}, {"deployments": ["x"]}])
def test_bad_status_raises(doc):
    with pytest.raises(CommandError) as caught:
        _rpm_ostree.parse_status(doc)
    assert caught.value.msg.startswith("Failed to parse rpm-ostree status")


# --------------------------------------------------------------------------
# the client

BUSY = ("error: Transaction in progress: rebase to ostree-unverified-registry:quay.io/os\n"
        " You can cancel the current transaction with `rpm-ostree cancel`\n")


# A module whose rpm-ostree is at /usr/bin/rpm-ostree.
fake_module = functools.partial(FakeModule, found="/usr/bin/rpm-ostree")
REF = "ostree-unverified-registry:quay.io/os@" + DIGEST


@pytest.mark.parametrize(("lock", "results", "changed", "attempts"), [
    (False, [(0, "Staging deployment...done\n", "")], True, 1),
    (True, [(0, "", "")], True, 1),
    (False, [(77, "No change.\n", "")], False, 1),
    (False, [(1, "", BUSY), (1, "", BUSY), (0, "", "")], True, 3),
    (False, [(1, "", BUSY), (77, "", "")], False, 2),
])
def test_rebase_argv_and_rc(lock, results, changed, attempts):
    module = fake_module(results)
    sleeps = []
    client = _rpm_ostree.RpmOstreeClient(module, retries=3, retry_delay=7, sleep=sleeps.append)
    assert client.rebase(REF, lock_finalization=lock) is changed
    expected = ["/usr/bin/rpm-ostree", "rebase", "--unchanged-exit-77"]
    expected += ["--lock-finalization"] if lock else []
    expected += ["--", REF]
    assert [call[0] for call in module.calls] == [expected] * attempts
    assert all(call[1] == {"environ_update": {"LC_ALL": "C"}, "expand_user_and_vars": False}
               for call in module.calls)
    assert sleeps == [7] * (attempts - 1)


def test_rebase_still_busy_after_retries():
    module = fake_module([(1, "", BUSY)] * 3)
    sleeps = []
    client = _rpm_ostree.RpmOstreeClient(module, retries=2, retry_delay=1, sleep=sleeps.append)
    with pytest.raises(TransactionBusyError) as caught:
        client.rebase(REF)
    assert len(module.calls) == 3 and sleeps == [1, 1]
    assert caught.value.msg == (
        "Failed to rebase to '%s': another transaction was still in progress after 3 attempts "
        "(Transaction in progress: rebase to ostree-unverified-registry:quay.io/os)." % REF)
    assert caught.value.details["rc"] == 1 and caught.value.details["cmd"][-1] == REF


def test_rebase_failure_is_not_retried():
    err = "error: Pulling image: reading manifest sha256:abab in quay.io/os: manifest unknown\n"
    module = fake_module([(1, "", err)])
    client = _rpm_ostree.RpmOstreeClient(module, retries=3, sleep=lambda s: None)
    with pytest.raises(CommandError) as caught:
        client.rebase(REF)
    assert not isinstance(caught.value, TransactionBusyError)
    assert len(module.calls) == 1
    assert caught.value.msg == ("Failed to rebase to '%s': Pulling image: reading manifest sha256:abab in "
                                "quay.io/os: manifest unknown." % REF)
    assert caught.value.details == {"cmd": ["/usr/bin/rpm-ostree", "rebase", "--unchanged-exit-77", "--", REF],
                                    "rc": 1, "stdout": "", "stderr": err}


def test_status_uses_executable_and_parses(tmp_path):
    executable = tmp_path / "rpm-ostree"
    executable.write_text("#!/bin/sh\n")
    executable.chmod(0o755)
    doc = {"deployments": [_dep("a", booted=True)], "transaction": None}
    module = fake_module([(0, json.dumps(doc), "")])
    client = _rpm_ostree.RpmOstreeClient(module, executable=str(executable))
    status = client.status()
    assert module.calls[0][0] == [str(executable), "status", "--json"]
    assert status["booted"]["checksum"] == "a"


@pytest.mark.parametrize("mode", [None, 0o644])
def test_executable_must_be_an_executable_file(tmp_path, mode):
    executable = tmp_path / "rpm-ostree"
    if mode is not None:
        executable.write_text("")
        executable.chmod(mode)
    with pytest.raises(InvalidInputError) as caught:
        _rpm_ostree.RpmOstreeClient(fake_module([]), executable=str(executable))
    assert caught.value.msg == ("executable '%s' does not exist or is not an executable file: expected the "
                                "path of rpm-ostree." % executable)


def test_binary_is_looked_up_without_failing_the_module():
    module = fake_module([])
    assert _rpm_ostree.RpmOstreeClient(module).binary == "/usr/bin/rpm-ostree"
    assert module.looked_up == [("rpm-ostree", False)]


def test_missing_binary_raises_naming_the_option():
    with pytest.raises(CommandError) as caught:
        _rpm_ostree.RpmOstreeClient(fake_module([], found=None))
    assert caught.value.msg == ("Failed to find the rpm-ostree executable 'rpm-ostree' on the target: install "
                                "rpm-ostree or set executable.")


def test_busy_is_a_transaction_busy_error_with_the_cause():
    module = fake_module([(1, "", BUSY)])
    with pytest.raises(TransactionBusyError) as caught:
        _rpm_ostree.RpmOstreeClient(module).run(["upgrade"])
    assert caught.value.msg == ("Failed to run rpm-ostree upgrade because rpm-ostree is busy: Transaction in "
                                "progress: rebase to ostree-unverified-registry:quay.io/os.")
    assert caught.value.details == {"cmd": ["/usr/bin/rpm-ostree", "upgrade"], "rc": 1, "stdout": "", "stderr": BUSY}


@pytest.mark.parametrize(("result", "msg"), [
    ((0, "garbage", ""), "Failed to parse the output of rpm-ostree status --json"),
    ((1, "", "error: This system was not booted via libostree; cannot operate\n"),
     "Failed to run rpm-ostree status: This system was not booted via libostree; cannot operate."),
])
def test_status_errors(result, msg):
    client = _rpm_ostree.RpmOstreeClient(fake_module([result]))
    with pytest.raises(CommandError) as caught:
        client.status()
    assert caught.value.msg.startswith(msg)


@pytest.mark.parametrize(("text", "line"), [
    ("\n  error: Transaction in progress: x\n more\n", "Transaction in progress: x"),
    ('error: Pulling image: time="2026-11-29T22:39:07Z" level=fatal msg="reading manifest: manifest unknown"\n',
     "Pulling image: reading manifest: manifest unknown"),
    ('time="t" level=fatal msg="Error parsing image name \\"docker://x\\": unauthorized"', 'Error parsing image name "docker://x": unauthorized'),
    ("", ""),
    (None, ""),
])
def test_first_line(text, line):
    assert _rpm_ostree.first_line(text) == line
