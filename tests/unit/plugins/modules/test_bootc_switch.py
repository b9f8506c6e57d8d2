# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""bootc_switch: main() with arguments, a faked run_command, exact argv, digest -> changed."""

from __future__ import annotations

import hashlib
import json
import stat

import pytest

from ansible_collections.fleetos.layering.tests.unit.plugins.modules.utils import FailJson, fake_module, run_main
from ansible_collections.fleetos.layering.plugins.module_utils import _bootc
from ansible_collections.fleetos.layering.plugins.modules import bootc_switch

OLD = "sha256:" + "0a" * 32
NEW = "sha256:" + "1b" * 32
OTHER = "sha256:" + "2c" * 32
IMAGE = "198.51.100.1:5000/fleetos/lab-os"
BOOTC = "/usr/bin/bootc"
SKOPEO = "/usr/bin/skopeo"
ENV = {"environ_update": {"LC_ALL": "C"}, "expand_user_and_vars": False}
STATUS_ARGV = [BOOTC, "status", "--format=json"]


@pytest.fixture
def fake(monkeypatch, tmp_path):
    state = fake_module(monkeypatch)
    lock = tmp_path / "sysroot-lock"
    lock.write_bytes(b"")
    run_auth = tmp_path / "run" / "ostree" / "auth.json"
    monkeypatch.setattr(_bootc, "SYSROOT_LOCK", str(lock))
    monkeypatch.setattr(_bootc, "AUTH_FILES", (str(run_auth), str(tmp_path / "etc-auth.json")))
    state["run_auth"] = run_auth
    return state


def entry(digest, checksum, reference=None, transport="registry", download_only=False):
    return {"image": {"image": {"image": reference or "%s@%s" % (IMAGE, digest), "transport": transport},
                      "imageDigest": digest, "version": "1", "architecture": "amd64"},
            "pinned": False, "incompatible": False, "downloadOnly": download_only,
            "ostree": {"checksum": checksum, "deploySerial": 0, "stateroot": "default"}}


def status(booted, staged=None, rollback=None, rollback_queued=False):
    doc = {"apiVersion": "org.containers.bootc/v1", "kind": "BootcHost", "metadata": {"name": "host"},
           "spec": {"image": None}, "status": {"booted": booted, "staged": staged, "rollback": rollback,
                                               "rollbackQueued": rollback_queued, "type": "bootcHost"}}
    return (0, json.dumps(doc), "")


def switch_argv(image=IMAGE + "@" + NEW, transport="registry", *flags):
    return [BOOTC, "switch", "--quiet", "--transport", transport] + list(flags or ("--download-only",)) + ["--", image]


def summary(digest, checksum, reference=None, download_only=False, transport="registry"):
    return {"reference": reference or "%s@%s" % (IMAGE, digest), "transport": transport, "digest": digest,
            "checksum": checksum, "download_only": download_only}


def diff_text(s):
    return "reference: %s\ntransport: %s\ndigest: %s\n" % (s["reference"], s["transport"], s["digest"])


BOOTED_OLD = entry(OLD, "c0")
STAGED_NEW = entry(NEW, "c1", download_only=True)


# ---------------------------------------------------------------- unchanged by digest

@pytest.mark.parametrize("check_mode", [False, True])
@pytest.mark.parametrize(("host", "image", "expected"), [
    # booted at the digest, nothing pending
    (status(entry(NEW, "c1")), IMAGE + "@" + NEW, summary(NEW, "c1")),
    # booted at the digest under a tag: imageDigest decides, not the reference text
    (status(entry(NEW, "c1", reference=IMAGE + ":stable")), IMAGE + "@" + NEW,
     summary(NEW, "c1", reference=IMAGE + ":stable")),
    # staged (download-only) at the digest; the given image also carries a tag
    (status(BOOTED_OLD, staged=STAGED_NEW), IMAGE + ":2.0@" + NEW, summary(NEW, "c1", download_only=True)),
    # a queued rollback to the digest is the next boot
    (status(entry(OTHER, "c2"), rollback=entry(NEW, "c1"), rollback_queued=True), IMAGE + "@" + NEW,
     summary(NEW, "c1")),
])
def test_unchanged_when_the_next_deployment_has_the_digest(fake, host, image, expected, check_mode):
    fake["results"] = [host]
    result = run_main(bootc_switch.main, {"image": image}, check_mode=check_mode)
    assert [call[0] for call in fake["calls"]] == [STATUS_ARGV]
    assert result["changed"] is False
    assert result["image"] == IMAGE + "@" + NEW and result["digest"] == NEW
    assert result["before"] == result["after"] == expected
    assert result["diff"] == {"before": diff_text(expected), "after": diff_text(expected)}


# ---------------------------------------------------------------- staging

@pytest.mark.parametrize(("args", "flags"), [
    ({}, ["--download-only"]),
    ({"download_only": False}, []),
    ({"retain": True}, ["--download-only", "--retain"]),
    ({"retain": True, "enforce_container_sigpolicy": True},
     ["--download-only", "--retain", "--enforce-container-sigpolicy"]),
])
def test_stages_a_switch(fake, args, flags):
    staged = entry(NEW, "c1", download_only=args.get("download_only", True))
    fake["results"] = [status(BOOTED_OLD), (0, "", ""), status(BOOTED_OLD, staged=staged)]
    result = run_main(bootc_switch.main, dict({"image": IMAGE + "@" + NEW}, **args))
    switch = [BOOTC, "switch", "--quiet", "--transport", "registry"] + flags + ["--", IMAGE + "@" + NEW]
    assert [call[0] for call in fake["calls"]] == [STATUS_ARGV, switch, STATUS_ARGV]
    assert [call[1] for call in fake["calls"]] == [ENV] * 3
    assert result["changed"] is True and result["reboot_required"] is True
    before = summary(OLD, "c0")
    after = summary(NEW, "c1", download_only=args.get("download_only", True))
    assert (result["before"], result["after"]) == (before, after)
    assert result["diff"] == {"before": diff_text(before), "after": diff_text(after)}


def test_another_staged_digest_is_replaced(fake):
    fake["results"] = [status(BOOTED_OLD, staged=entry(OTHER, "c2")), (0, "", ""),
                       status(BOOTED_OLD, staged=STAGED_NEW)]
    result = run_main(bootc_switch.main, {"image": IMAGE + "@" + NEW})
    assert fake["calls"][1][0] == switch_argv()
    assert result["before"]["digest"] == OTHER and result["after"]["digest"] == NEW


def test_check_mode_predicts_without_switching(fake):
    fake["results"] = [status(BOOTED_OLD)]
    result = run_main(bootc_switch.main, {"image": IMAGE + "@" + NEW}, check_mode=True)
    assert [call[0] for call in fake["calls"]] == [STATUS_ARGV]
    after = {"reference": IMAGE + "@" + NEW, "transport": "registry", "digest": NEW, "checksum": None,
             "download_only": True}
    assert result["changed"] is True and result["after"] == after
    assert result["diff"] == {"before": diff_text(summary(OLD, "c0")), "after": diff_text(after)}


def test_oci_layout_switch(fake, tmp_path):
    layout = tmp_path / "layout"
    layout.mkdir()
    (layout / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [
        {"digest": NEW, "size": 1, "annotations": {"org.opencontainers.image.ref.name": "stable"}}]}))
    image = "%s:stable" % layout
    fake["results"] = [status(BOOTED_OLD), (0, "", ""),
                       status(BOOTED_OLD, staged=entry(NEW, "c1", reference=image, transport="oci"))]
    result = run_main(bootc_switch.main, {"image": image, "transport": "oci", "digest": NEW})
    assert fake["calls"][1][0] == switch_argv(image, "oci")
    assert result["changed"] is True and result["after"]["digest"] == NEW


def test_allow_tag_resolves_the_tag_with_skopeo_reading_the_manifest_only(fake):
    manifest = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                           "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                                      "digest": OTHER, "size": 1}, "layers": []}).encode()
    resolved = "sha256:" + hashlib.sha256(manifest).hexdigest()
    fake["results"] = [(0, manifest, ""), status(BOOTED_OLD), (0, "", ""),
                       status(BOOTED_OLD, staged=entry(resolved, "c1"))]
    result = run_main(bootc_switch.main, {"image": IMAGE + ":stable", "allow_tag": True})
    assert fake["calls"][0][0] == [SKOPEO, "inspect", "--raw", "--", "docker://%s:stable" % IMAGE]
    assert fake["calls"][2][0] == switch_argv(IMAGE + "@" + resolved)
    assert result["digest"] == resolved


# ---------------------------------------------------------------- labels: bootable, commit

def test_labels_commit_is_checked_after_staging(fake):
    labels = {"containers.bootc": "1", "ostree.commit": "c1"}
    fake["results"] = [status(BOOTED_OLD), (0, "", ""), status(BOOTED_OLD, staged=STAGED_NEW)]
    assert run_main(bootc_switch.main, {"image": IMAGE + "@" + NEW, "labels": labels})["changed"] is True
    fake["calls"].clear()
    fake["results"] = [status(BOOTED_OLD), (0, "", ""), status(BOOTED_OLD, staged=entry(NEW, "c9"))]
    result = run_main(bootc_switch.main, {"image": IMAGE + "@" + NEW, "labels": labels}, expect=FailJson)
    assert result["msg"] == ("Failed to switch to registry image '%s@%s': the staged commit c9 is not the commit c1 "
                             "its labels name." % (IMAGE, NEW))


# ---------------------------------------------------------------- bad input: one sentence, nothing staged

@pytest.mark.parametrize(("args", "msg"), [
    ({"image": IMAGE + "@" + NEW, "transport": "docker-daemon"},
     "transport must be one of registry, containers-storage, oci, oci-archive, got 'docker-daemon'."),
    ({"image": IMAGE + ":stable"},
     "image '%s:stable' has no digest: give %s@sha256:<64 hex digits>, or set allow_tag: true to resolve the tag "
     "to a digest on the host." % (IMAGE, IMAGE)),
    ({"image": IMAGE + "@" + NEW, "labels": {"version": "1"}},
     "image '%s@%s' is not bootable: its labels set neither containers.bootc nor ostree.bootable." % (IMAGE, NEW)),
    ({"image": IMAGE + "@" + NEW, "digest": NEW},
     "digest is only for the oci and oci-archive transports: pin a registry image in image as "
     "registry/repository@sha256:<64 hex digits>."),
    ({"image": "/var/tmp/layout:1", "transport": "oci"},
     "oci image '/var/tmp/layout:1' names no digest: set digest: sha256:<64 hex digits>, or allow_tag: true to use "
     "the digest its index.json names."),
])
def test_bad_input_fails_before_anything_runs(fake, args, msg):
    result = run_main(bootc_switch.main, args, expect=FailJson)
    assert result["msg"] == msg
    assert fake["calls"] == []


def test_busy_bootc_stages_nothing(fake, monkeypatch):
    monkeypatch.setattr(_bootc.BootcClient, "_lock_held", lambda self: True)
    monkeypatch.setattr("time.sleep", lambda seconds: fake.setdefault("sleeps", []).append(seconds))
    fake["results"] = [status(BOOTED_OLD)]
    result = run_main(bootc_switch.main, {"image": IMAGE + "@" + NEW, "retries": 1, "retry_delay": 2},
                      expect=FailJson)
    assert [call[0] for call in fake["calls"]] == [STATUS_ARGV]
    assert fake["sleeps"] == [2]
    assert result["msg"] == ("Failed to switch to registry image '%s@%s' because bootc is busy: another process still "
                             "held the ostree sysroot lock (%s) after 2 attempts." % (IMAGE, NEW, _bootc.SYSROOT_LOCK))


def test_bootc_without_switch_download_only_says_so(fake):
    refused = "error: unexpected argument '--download-only' found\n\nUsage: bootc switch [OPTIONS] <TARGET>\n"
    fake["results"] = [status(BOOTED_OLD), (2, "", refused)]
    result = run_main(bootc_switch.main, {"image": IMAGE + "@" + NEW}, expect=FailJson)
    assert result["msg"].startswith("Failed to switch to registry image '%s@%s': this bootc has no 'switch "
                                    "--download-only'" % (IMAGE, NEW))
    assert "set download_only: false" in result["msg"]
    assert result["cmd"] == switch_argv() and result["rc"] == 2


def test_failed_switch_names_bootc_cause(fake):
    fake["results"] = [status(BOOTED_OLD), (1, "", "error: Switching: Pulling: unauthorized: authentication required\n")]
    result = run_main(bootc_switch.main, {"image": IMAGE + "@" + NEW}, expect=FailJson)
    assert result["msg"] == ("Failed to switch to registry image '%s@%s': Switching: Pulling: unauthorized: "
                             "authentication required." % (IMAGE, NEW))


def test_staged_at_another_digest_after_switch_fails(fake):
    fake["results"] = [status(BOOTED_OLD), (0, "", ""), status(BOOTED_OLD, staged=entry(OTHER, "c2"))]
    result = run_main(bootc_switch.main, {"image": IMAGE + "@" + NEW}, expect=FailJson)
    assert result["msg"] == ("Failed to switch to registry image '%s@%s': bootc finished, but the staged deployment "
                             "is at %s." % (IMAGE, NEW, OTHER))


def test_not_a_bootc_host(fake):
    fake["results"] = [status(None)]
    result = run_main(bootc_switch.main, {"image": IMAGE + "@" + NEW}, expect=FailJson)
    assert result["msg"] == ("Failed to switch to registry image '%s@%s': bootc did not boot this host (its status "
                             "reports no booted deployment)." % (IMAGE, NEW))
    assert len(fake["calls"]) == 1


# ---------------------------------------------------------------- secrets

def test_auth_file_is_placed_for_the_switch_only_and_never_in_argv(fake, tmp_path):
    source = tmp_path / "pull-secret.json"
    source.write_bytes(b'{"auths": {"198.51.100.1:5000": {"auth": "c2VjcmV0"}}}')
    seen = {}

    def during_switch(argv):
        seen["data"] = fake["run_auth"].read_bytes()
        seen["mode"] = stat.S_IMODE(fake["run_auth"].stat().st_mode)

    fake["hooks"]["switch"] = during_switch
    fake["results"] = [status(BOOTED_OLD), (0, "", ""), status(BOOTED_OLD, staged=STAGED_NEW)]
    run_main(bootc_switch.main, {"image": IMAGE + "@" + NEW, "auth_file": str(source)})
    assert seen == {"data": source.read_bytes(), "mode": 0o600}
    assert not fake["run_auth"].exists()
    assert all(str(source) not in " ".join(call[0]) for call in fake["calls"])
