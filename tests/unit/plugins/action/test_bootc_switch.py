# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""bootc_switch: the action plugin with arguments on a faked connection, the exact argv the host runs,
digest -> changed; the host-side scripts (the sysroot lock probe, an OCI layout's index.json read with cat or
tar, the auth file placed and put back) run for real on the test's files, a held lock included."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import stat
import struct
import subprocess
import tarfile

import pytest

from ansible_collections.fleetos.layering.tests.unit.plugins.action.test_bootc_info import FIXTURES, load_sample
from ansible_collections.fleetos.layering.tests.unit.plugins.action.utils import fake_host, run_action
from ansible_collections.fleetos.layering.plugins.action import bootc_switch
from ansible_collections.fleetos.layering.plugins.module_utils.host import _bootc

OLD = "sha256:" + "0a" * 32
NEW = "sha256:" + "1b" * 32
OTHER = "sha256:" + "2c" * 32
IMAGE = "198.51.100.1:5000/fleetos/lab-os"
# Found by the host's shell when they run.
BOOTC = "bootc"
SKOPEO = "skopeo"
ENV = {"env": {"LC_ALL": "C"}, "data": None}
STATUS_ARGV = [BOOTC, "status", "--format=json"]
DOWNLOAD_ONLY = "bootc-status__bootc-fixture__staged-download-only.yaml"


def _really(state):
    """A hook that runs the command for real here (the lock probe, tar) and answers with its result."""
    def run(argv):
        proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False,
                              env=dict(os.environ, LC_ALL="C"))
        state["results"].insert(0, (proc.returncode, proc.stdout.decode("utf-8", "surrogateescape"),
                                    proc.stderr.decode("utf-8", "replace")))
    return run


@pytest.fixture
def fake(monkeypatch, tmp_path):
    state = fake_host(monkeypatch)
    lock = tmp_path / "sysroot" / "ostree" / "lock"
    lock.parent.mkdir(parents=True)
    lock.write_bytes(b"")
    run_auth = tmp_path / "run" / "ostree" / "auth.json"
    etc_auth = tmp_path / "etc" / "ostree" / "auth.json"
    monkeypatch.setattr(_bootc, "SYSROOT_LOCK", str(lock))
    monkeypatch.setattr(_bootc, "AUTH_FILES", (str(run_auth), str(etc_auth)))
    monkeypatch.setattr("time.sleep", lambda seconds: state.setdefault("sleeps", []).append(seconds))
    # sh -c LOCK_SCRIPT and tar -x -O run for real, on the test's files and this machine's /proc/locks.
    state["hooks"]["-c"] = _really(state)
    state["hooks"]["-x"] = _really(state)
    state.update(lock=lock, run_auth=run_auth, etc_auth=etc_auth)
    return state


def run(args, failed=False, check_mode=False):
    return run_action(bootc_switch, args, failed=failed, check_mode=check_mode)


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


def probe_argv(lock):
    return ["sh", "-c", _bootc.LOCK_SCRIPT, "sh", str(lock)]


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
@pytest.mark.parametrize(("host", "image", "expected", "staged", "reboot_required"), [
    # booted at the digest, nothing pending
    (status(entry(NEW, "c1")), IMAGE + "@" + NEW, summary(NEW, "c1"), False, False),
    # booted at the digest under a tag: imageDigest decides, not the reference text
    (status(entry(NEW, "c1", reference=IMAGE + ":stable")), IMAGE + "@" + NEW,
     summary(NEW, "c1", reference=IMAGE + ":stable"), False, False),
    # staged download-only at the digest (the given image also carries a tag): an ordinary reboot does not apply it
    (status(BOOTED_OLD, staged=STAGED_NEW), IMAGE + ":2.0@" + NEW, summary(NEW, "c1", download_only=True), True,
     False),
    # staged at the digest, applied by the next reboot
    (status(BOOTED_OLD, staged=entry(NEW, "c1")), IMAGE + "@" + NEW, summary(NEW, "c1"), True, True),
    # a queued rollback to the digest is the next boot
    (status(entry(OTHER, "c2"), rollback=entry(NEW, "c1"), rollback_queued=True), IMAGE + "@" + NEW,
     summary(NEW, "c1"), False, True),
])
def test_unchanged_when_the_next_deployment_has_the_digest(fake, host, image, expected, staged, reboot_required,
                                                           check_mode):
    fake["results"] = [host]
    result = run({"image": image}, check_mode=check_mode)
    assert [call[0] for call in fake["calls"]] == [STATUS_ARGV]
    assert result["changed"] is False
    assert result["image"] == IMAGE + "@" + NEW and result["digest"] == NEW
    assert result["before"] == result["after"] == expected
    assert (result["staged"], result["reboot_required"]) == (staged, reboot_required)
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
    download_only = args.get("download_only", True)
    staged = entry(NEW, "c1", download_only=download_only)
    fake["results"] = [status(BOOTED_OLD), (0, "", ""), status(BOOTED_OLD, staged=staged)]
    result = run(dict({"image": IMAGE + "@" + NEW}, **args))
    switch = [BOOTC, "switch", "--quiet", "--transport", "registry"] + flags + ["--", IMAGE + "@" + NEW]
    assert [call[0] for call in fake["calls"]] == [STATUS_ARGV, probe_argv(fake["lock"]), switch, STATUS_ARGV]
    assert [call[1] for call in fake["calls"]] == [ENV] * 4
    # Staged either way; only a deployment that is not download-only is applied by an ordinary reboot.
    assert result["changed"] is True and result["staged"] is True
    assert result["reboot_required"] is not download_only
    before = summary(OLD, "c0")
    after = summary(NEW, "c1", download_only=download_only)
    assert (result["before"], result["after"]) == (before, after)
    assert result["diff"] == {"before": diff_text(before), "after": diff_text(after)}


def test_another_staged_digest_is_replaced(fake):
    fake["results"] = [status(BOOTED_OLD, staged=entry(OTHER, "c2")), (0, "", ""),
                       status(BOOTED_OLD, staged=STAGED_NEW)]
    result = run({"image": IMAGE + "@" + NEW})
    assert fake["calls"][2][0] == switch_argv()
    assert result["before"]["digest"] == OTHER and result["after"]["digest"] == NEW


@pytest.mark.parametrize(("download_only", "reboot_required"), [(True, False), (False, True)])
def test_check_mode_predicts_without_switching(fake, tmp_path, download_only, reboot_required):
    given = tmp_path / "given.json"
    given.write_text("{}")
    fake["results"] = [status(BOOTED_OLD)]
    result = run({"image": IMAGE + "@" + NEW, "download_only": download_only, "auth_file": str(given)},
                 check_mode=True)
    # Neither the lock probe nor the switch; the auth file is not put in place.
    assert [call[0] for call in fake["calls"]] == [STATUS_ARGV]
    assert fake["files"] == [] and not fake["run_auth"].exists()
    after = {"reference": IMAGE + "@" + NEW, "transport": "registry", "digest": NEW, "checksum": None,
             "download_only": download_only}
    assert result["changed"] is True and result["after"] == after
    assert (result["staged"], result["reboot_required"]) == (True, reboot_required)
    assert result["diff"] == {"before": diff_text(summary(OLD, "c0")), "after": diff_text(after)}


def _layout(directory, *entries):
    directory.mkdir(parents=True, exist_ok=True)
    index = {"schemaVersion": 2, "manifests": [
        {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": digest, "size": 1,
         "annotations": {"org.opencontainers.image.ref.name": name}} for name, digest in entries]}
    (directory / "index.json").write_text(json.dumps(index))
    return directory


def test_oci_layout_switch_reads_index_json_on_the_host(fake, tmp_path):
    layout = _layout(tmp_path / "layout", ("stable", NEW), ("next", OTHER))
    image = "%s:stable" % layout
    fake["results"] = [status(BOOTED_OLD), (0, "", ""),
                       status(BOOTED_OLD, staged=entry(NEW, "c1", reference=image, transport="oci"))]
    result = run({"image": image, "transport": "oci", "digest": NEW})
    # index.json is read with the host's cat (the read script), then bootc gets the image as given.
    assert fake["files"] == [[str(layout) + "/index.json"]]
    assert [call[0] for call in fake["calls"]] == [STATUS_ARGV, probe_argv(fake["lock"]), switch_argv(image, "oci"),
                                                   STATUS_ARGV]
    assert result["changed"] is True and result["after"]["digest"] == NEW and result["digest"] == NEW


def test_oci_archive_digest_from_tar_and_a_mismatch_stages_nothing(fake, tmp_path):
    layout = _layout(tmp_path / "layout", ("stable", NEW), ("next", OTHER))
    archive = tmp_path / "os.ociarchive"
    with tarfile.open(archive, "w") as handle:
        handle.add(layout / "index.json", arcname="index.json")
    image = "%s:next" % archive
    tar = ["tar", "-x", "-O", "-f", str(archive), "index.json"]
    fake["results"] = [status(BOOTED_OLD), (0, "", ""), status(BOOTED_OLD, staged=entry(OTHER, "c2"))]
    result = run({"image": image, "transport": "oci-archive", "allow_tag": True})
    assert [call[0] for call in fake["calls"]] == [tar, STATUS_ARGV, probe_argv(fake["lock"]),
                                                   switch_argv(image, "oci-archive"), STATUS_ARGV]
    assert result["digest"] == OTHER and result["changed"] is True

    fake["calls"].clear()
    result = run({"image": image, "transport": "oci-archive", "digest": NEW}, failed=True)
    assert [call[0] for call in fake["calls"]] == [tar]
    assert result["msg"] == ("The oci-archive image '%s' is at %s, not at digest %s: nothing was staged."
                             % (image, OTHER, NEW))


@pytest.mark.parametrize(("transport", "make", "cause"), [
    ("oci", lambda tmp: tmp / "missing", "no index.json"),
    ("oci-archive", lambda tmp: tmp / "missing.tar", "Cannot open: No such file or directory"),
    ("oci-archive", lambda tmp: _empty_archive(tmp / "empty.tar"), "no index.json"),
])
def test_unreadable_oci_layout_fails_in_one_sentence(fake, tmp_path, transport, make, cause):
    path = make(tmp_path)
    result = run({"image": "%s:stable" % path, "transport": transport, "digest": NEW}, failed=True)
    assert result["msg"].startswith("Failed to read the OCI layout '%s': " % path)
    assert result["msg"].endswith(cause + ".")
    assert STATUS_ARGV not in [call[0] for call in fake["calls"]]


def _empty_archive(path):
    with tarfile.open(path, "w"):
        pass
    return path


def test_allow_tag_resolves_the_tag_with_skopeo_reading_the_manifest_only(fake):
    manifest = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                           "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                                      "digest": OTHER, "size": 1}, "layers": []})
    resolved = "sha256:" + hashlib.sha256(manifest.encode()).hexdigest()
    fake["etc_auth"].parent.mkdir(parents=True)
    fake["etc_auth"].write_text('{"auths": {}}')
    fake["results"] = [(0, manifest, ""), status(BOOTED_OLD), (0, "", ""),
                       status(BOOTED_OLD, staged=entry(resolved, "c1"))]
    result = run({"image": IMAGE + ":stable", "allow_tag": True})
    # The auth file bootc would read is the one skopeo reads.
    assert fake["calls"][0][0] == [SKOPEO, "inspect", "--raw", "--authfile", str(fake["etc_auth"]), "--",
                                   "docker://%s:stable" % IMAGE]
    assert fake["calls"][3][0] == switch_argv(IMAGE + "@" + resolved)
    assert result["digest"] == resolved and result["image"] == IMAGE + "@" + resolved


# ---------------------------------------------------------------- labels: bootable, commit

def test_labels_commit_is_checked_after_staging(fake):
    labels = {"containers.bootc": "1", "ostree.commit": "c1"}
    fake["results"] = [status(BOOTED_OLD), (0, "", ""), status(BOOTED_OLD, staged=STAGED_NEW)]
    assert run({"image": IMAGE + "@" + NEW, "labels": labels})["changed"] is True
    fake["results"] = [status(BOOTED_OLD), (0, "", ""), status(BOOTED_OLD, staged=entry(NEW, "c9"))]
    result = run({"image": IMAGE + "@" + NEW, "labels": labels}, failed=True)
    assert result["msg"] == ("Failed to switch to registry image '%s@%s': the staged commit c9 is not the commit c1 "
                             "its labels name." % (IMAGE, NEW))
    assert result["after"]["checksum"] == "c9"


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
    ({"image": IMAGE + "@" + NEW, "retries": -1}, "retries -1 is negative: expected 0 or more."),
    ({"image": IMAGE + "@" + NEW, "auth_file": "/dev/null"},
     "auth_file '/dev/null' does not exist or is not a regular file."),
])
def test_bad_input_fails_before_anything_runs(fake, args, msg):
    result = run(args, failed=True)
    assert result["msg"] == msg
    assert fake["calls"] == []


# ---------------------------------------------------------------- the sysroot lock, held for real

def _ofd_lock(path):
    """Take an exclusive open file description lock on ``path``, as libostree takes its sysroot lock; -> the fd."""
    fd = os.open(str(path), os.O_RDWR)
    # struct flock: l_type, l_whence, l_start, l_len, l_pid (0 for an OFD lock); the whole file.
    fcntl.fcntl(fd, fcntl.F_OFD_SETLK, struct.pack("hhqqi4x", fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0))
    return fd


def test_busy_bootc_stages_nothing(fake):
    fd = _ofd_lock(fake["lock"])
    try:
        fake["results"] = [status(BOOTED_OLD)]
        result = run({"image": IMAGE + "@" + NEW, "retries": 1, "retry_delay": 2}, failed=True)
    finally:
        os.close(fd)
    assert [call[0] for call in fake["calls"]] == [STATUS_ARGV] + [probe_argv(fake["lock"])] * 2
    assert fake["sleeps"] == [2]
    assert result["msg"] == ("Failed to switch to registry image '%s@%s' because bootc is busy: another process still "
                             "held the ostree sysroot lock (%s) after 2 attempts." % (IMAGE, NEW, fake["lock"]))


def test_a_lock_let_go_while_waiting_is_retried_then_switched(fake, monkeypatch):
    held = [_ofd_lock(fake["lock"])]

    def sleep(seconds):
        fake.setdefault("sleeps", []).append(seconds)
        os.close(held.pop())

    monkeypatch.setattr("time.sleep", sleep)
    fake["results"] = [status(BOOTED_OLD), (0, "", ""), status(BOOTED_OLD, staged=STAGED_NEW)]
    result = run({"image": IMAGE + "@" + NEW, "retries": 3, "retry_delay": 7})
    probe = probe_argv(fake["lock"])
    assert [call[0] for call in fake["calls"]] == [STATUS_ARGV, probe, probe, switch_argv(), STATUS_ARGV]
    assert fake["sleeps"] == [7] and result["changed"] is True


def test_no_lock_file_is_idle(fake):
    fake["lock"].unlink()
    fake["results"] = [status(BOOTED_OLD), (0, "", ""), status(BOOTED_OLD, staged=STAGED_NEW)]
    assert run({"image": IMAGE + "@" + NEW, "retries": 0})["changed"] is True
    assert fake["calls"][1][0] == probe_argv(fake["lock"]) and fake.get("sleeps") is None


# ---------------------------------------------------------------- bootc's own failures

def test_bootc_without_switch_download_only_says_so(fake):
    refused = "error: unexpected argument '--download-only' found\n\nUsage: bootc switch [OPTIONS] <TARGET>\n"
    fake["results"] = [status(BOOTED_OLD), (2, "", refused)]
    result = run({"image": IMAGE + "@" + NEW}, failed=True)
    assert result["msg"].startswith("Failed to switch to registry image '%s@%s': this bootc has no 'switch "
                                    "--download-only'" % (IMAGE, NEW))
    assert "set download_only: false" in result["msg"]
    assert result["cmd"] == switch_argv() and result["rc"] == 2


def test_failed_switch_names_bootc_cause(fake):
    fake["results"] = [status(BOOTED_OLD), (1, "", "error: Switching: Pulling: unauthorized: authentication required\n")]
    result = run({"image": IMAGE + "@" + NEW}, failed=True)
    assert result["msg"] == ("Failed to switch to registry image '%s@%s': Switching: Pulling: unauthorized: "
                             "authentication required." % (IMAGE, NEW))
    assert result["rc"] == 1 and "exception" not in result


def test_staged_at_another_digest_after_switch_fails(fake):
    fake["results"] = [status(BOOTED_OLD), (0, "", ""), status(BOOTED_OLD, staged=entry(OTHER, "c2"))]
    result = run({"image": IMAGE + "@" + NEW}, failed=True)
    assert result["msg"] == ("Failed to switch to registry image '%s@%s': bootc finished, but the staged deployment "
                             "is at %s." % (IMAGE, NEW, OTHER))


def test_not_a_bootc_host(fake):
    fake["results"] = [status(None)]
    result = run({"image": IMAGE + "@" + NEW}, failed=True)
    assert result["msg"] == ("Failed to switch to registry image '%s@%s': bootc did not boot this host (its status "
                             "reports no booted deployment)." % (IMAGE, NEW))
    assert len(fake["calls"]) == 1


def test_bootc_missing_from_path_is_named(fake):
    fake["results"] = [(127, "", "sh: 1: bootc: not found\n")]
    result = run({"image": IMAGE + "@" + NEW}, failed=True)
    assert result["msg"].startswith("Failed to read the bootc status: the host has no 'bootc' command in its PATH")


# ---------------------------------------------------------------- secrets

@pytest.mark.parametrize("previous", [None, b'{"auths": {"old": {}}}'])
@pytest.mark.parametrize("switch_rc", [0, 1])
def test_auth_file_is_placed_for_the_switch_only_and_never_in_argv(fake, tmp_path, previous, switch_rc):
    source = tmp_path / "pull-secret.json"
    source.write_bytes(b'{"auths": {"198.51.100.1:5000": {"auth": "c2VjcmV0"}}}')
    run_auth = fake["run_auth"]
    if previous is not None:
        run_auth.parent.mkdir(parents=True)
        run_auth.write_bytes(previous)
        os.chmod(run_auth, 0o640)
    seen = {}

    def during_switch(argv):
        seen["data"] = run_auth.read_bytes()
        seen["mode"] = stat.S_IMODE(run_auth.stat().st_mode)

    fake["hooks"]["switch"] = during_switch
    fake["results"] = [status(BOOTED_OLD), (switch_rc, "", "" if switch_rc == 0 else "error: boom\n"),
                       status(BOOTED_OLD, staged=STAGED_NEW)]
    run({"image": IMAGE + "@" + NEW, "auth_file": str(source)}, failed=switch_rc != 0)
    assert seen == {"data": source.read_bytes(), "mode": 0o600}
    if previous is None:
        assert not run_auth.exists()
    else:
        assert run_auth.read_bytes() == previous and stat.S_IMODE(run_auth.stat().st_mode) == 0o640
    assert sorted(p.name for p in run_auth.parent.iterdir()) == ([] if previous is None else ["auth.json"])
    assert all(str(source) not in " ".join(call[0]) for call in fake["calls"])
    assert all(call[1]["data"] is None for call in fake["calls"])


# ---------------------------------------------------------------- bootc's own download-only sample

@pytest.mark.skipif(not (FIXTURES / DOWNLOAD_ONLY).is_file(),
                    reason="bootc's staged-download-only sample is read from %s, which is absent" % FIXTURES)
@pytest.mark.parametrize("check_mode", [False, True])
def test_a_download_only_stage_of_the_target_is_staged_but_needs_no_ordinary_reboot(fake, check_mode):
    sample = load_sample(FIXTURES / DOWNLOAD_ONLY)
    staged = sample["status"]["staged"]
    assert staged["downloadOnly"] is True
    target = staged["image"]["imageDigest"]
    name = staged["image"]["image"]["image"].rsplit(":", 1)[0]
    fake["results"] = [(0, json.dumps(sample), "")]
    result = run({"image": "%s@%s" % (name, target)}, check_mode=check_mode)
    assert [call[0] for call in fake["calls"]] == [STATUS_ARGV]
    assert result["changed"] is False
    assert result["after"]["download_only"] is True
    assert result["after"]["checksum"] == staged["ostree"]["checksum"]
    assert (result["staged"], result["reboot_required"]) == (True, False)
