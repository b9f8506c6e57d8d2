# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""rpm_ostree_rebase: the action plugin with arguments on a faked connection, the exact argv the host runs,
rc -> changed; the auth file placed and put back by the host-side scripts, run for real on the test's files."""

from __future__ import annotations

import hashlib
import json
import os
import stat

import pytest

from ansible_collections.fleetos.layering.tests.unit.plugins.action.utils import fake_host, run_action
from ansible_collections.fleetos.layering.plugins.action import rpm_ostree_rebase
from ansible_collections.fleetos.layering.plugins.plugin_utils.host import _rebase

OLD = "sha256:" + "0a" * 32
OTHER = "sha256:" + "2c" * 32
AMD = "sha256:" + "3d" * 32
ARM = "sha256:" + "4e" * 32
REGISTRY = "198.51.100.1:5000"
IMAGE = REGISTRY + "/fleetos/lab-os"
# Found by the host's shell when they run.
RPM_OSTREE = "rpm-ostree"
SKOPEO = "skopeo"
ENV = RAW_ENV = {"env": {"LC_ALL": "C"}, "data": None}
# The target manifest as the registry serves it; NEW is the sha256 of these bytes.
MANIFEST = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                       "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                                  "digest": "sha256:" + "5f" * 32, "size": 1}, "layers": []}).encode()
NEW = "sha256:" + hashlib.sha256(MANIFEST).hexdigest()
# A multi-arch target: INDEX_DIGEST names the index, AMD its amd64 manifest.
INDEX = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": [
    {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": AMD, "size": 1,
     "platform": {"architecture": "amd64", "os": "linux"}},
    {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": ARM, "size": 1,
     "platform": {"architecture": "arm64", "os": "linux"}}]}).encode()
INDEX_DIGEST = "sha256:" + hashlib.sha256(INDEX).hexdigest()
RESOLVED = (0, MANIFEST, b"")
BUSY = "error: Transaction in progress: rebase to x\n You can cancel the current transaction with `rpm-ostree cancel`\n"


class ExitJson(Exception):
    """The task's result, when it did not fail; args[0] is the result."""


class FailJson(Exception):
    """The task's result, when it failed; args[0] is the result."""


@pytest.fixture
def fake(monkeypatch, tmp_path):
    state = fake_host(monkeypatch)
    run_auth = tmp_path / "run" / "ostree" / "auth.json"
    etc_auth = tmp_path / "etc" / "ostree" / "auth.json"
    monkeypatch.setattr(_rebase, "RUN_AUTH_FILE", str(run_auth))
    monkeypatch.setattr(_rebase, "OSTREE_AUTH_FILES", (str(run_auth), str(etc_auth)))
    monkeypatch.setattr("time.sleep", lambda seconds: state.setdefault("sleeps", []).append(seconds))
    state["run_auth"] = run_auth
    state["etc_auth"] = etc_auth
    return state


def run(args, check_mode=False):
    """The action's result, raised as ExitJson or FailJson (as a module's main() would end)."""
    result = run_action(rpm_ostree_rebase, args, failed=None, check_mode=check_mode)
    raise (FailJson if result.get("failed") else ExitJson)(result)


def dep(checksum, digest, booted=False, staged=False, reference=None):
    return {"id": "os-%s.0" % checksum, "osname": "os", "checksum": checksum, "serial": 0,
            "booted": booted, "staged": staged,
            "container-image-reference": reference or "ostree-unverified-registry:%s@%s" % (IMAGE, digest),
            "container-image-reference-digest": digest}


def status(*deployments):
    return (0, json.dumps({"deployments": list(deployments), "transaction": None}), "")


STATUS_ARGV = [RPM_OSTREE, "status", "--json"]


def raw_argv(image=IMAGE + "@" + NEW, *options):
    """skopeo reading the target's manifest (only) to resolve it."""
    return [SKOPEO, "inspect", "--raw"] + list(options) + ["--", "docker://" + image]


RAW_ARGV = raw_argv()


def rebase_argv(reference, lock=False):
    return [RPM_OSTREE, "rebase", "--unchanged-exit-77"] + (["--lock-finalization"] if lock else []) + ["--", reference]


def ref(digest, transport="ostree-unverified-registry:"):
    return "%s%s@%s" % (transport, IMAGE, digest)


BOOTED_OLD = dep("c0", OLD, booted=True)
STAGED_NEW = dep("c1", NEW, staged=True)


def outcome(exc_info):
    return exc_info.value.args[0]


# ---------------------------------------------------------------- unchanged by digest

@pytest.mark.parametrize("check_mode", [False, True])
@pytest.mark.parametrize(("deployments", "image"), [
    # booted at the digest, nothing pending
    ([dep("c1", NEW, booted=True)], IMAGE + "@" + NEW),
    # booted at the digest under another spelling (signed transport, a tag)
    ([dep("c1", NEW, booted=True, reference="ostree-image-signed:docker://%s:stable" % IMAGE)],
     IMAGE + "@" + NEW),
    # staged at the digest; the given reference also carries a tag
    ([STAGED_NEW, BOOTED_OLD], IMAGE + ":2.0@" + NEW),
])
def test_unchanged_when_next_boot_has_the_digest(fake, deployments, image, check_mode):
    fake["results"] = [status(*deployments)]
    with pytest.raises(ExitJson) as caught:
        run({"image": image}, check_mode)
    result = outcome(caught)
    assert [c[0] for c in fake["calls"]] == [STATUS_ARGV]
    assert result["changed"] is False
    assert result["digest"] == NEW
    assert result["reference"] == ref(NEW)
    assert result["before"] == result["after"] == {
        "reference": deployments[0]["container-image-reference"], "digest": NEW,
        "checksum": "c1"}
    assert result["diff"]["before"] == result["diff"]["after"]
    assert result["reboot_required"] is (len(deployments) > 1)


# ---------------------------------------------------------------- rc -> changed

@pytest.mark.parametrize(("args", "rebase_results", "changed", "attempts"), [
    ({}, [(0, "Staging deployment...done\n", "")], True, 1),
    ({"lock_finalization": True}, [(0, "", "")], True, 1),
    ({}, [(77, "No change.\n", "")], False, 1),
    ({"retry_delay": 2}, [(1, "", BUSY), (0, "", "")], True, 2),
    ({"retries": 1, "retry_delay": 0}, [(1, "", BUSY), (77, "", "")], False, 2),
])
def test_rebase_rc_to_changed(fake, args, rebase_results, changed, attempts):
    fake["results"] = [status(BOOTED_OLD), RESOLVED] + rebase_results + [status(STAGED_NEW, BOOTED_OLD)]
    with pytest.raises(ExitJson) as caught:
        run(dict({"image": IMAGE + "@" + NEW}, **args))
    result = outcome(caught)
    lock = args.get("lock_finalization", False)
    assert [c[0] for c in fake["calls"]] == ([STATUS_ARGV, RAW_ARGV] + [rebase_argv(ref(NEW), lock)] * attempts
                                             + [STATUS_ARGV])
    assert [c[1] for c in fake["calls"]] == [ENV, RAW_ENV] + [ENV] * (attempts + 1)
    assert result["changed"] is changed
    assert fake.get("sleeps", []) == [args.get("retry_delay", 5)] * (attempts - 1)
    assert result["before"] == {"reference": ref(OLD), "digest": OLD, "checksum": "c0"}
    assert result["after"] == {"reference": ref(NEW), "digest": NEW, "checksum": "c1"}
    assert result["diff"] == {"before": "reference: %s\ndigest: %s\n" % (ref(OLD), OLD),
                              "after": "reference: %s\ndigest: %s\n" % (ref(NEW), NEW)}
    assert result["reboot_required"] is True


@pytest.mark.parametrize(("transport", "remote", "reference"), [
    ("registry", None, "ostree-unverified-registry:%s@%s" % (IMAGE, NEW)),
    ("remote", "fedora", "ostree-remote-image:fedora:docker://%s@%s" % (IMAGE, NEW)),
    ("signed", None, "ostree-image-signed:docker://%s@%s" % (IMAGE, NEW)),
])
def test_transports(fake, transport, remote, reference):
    fake["results"] = [status(BOOTED_OLD), RESOLVED, (0, "", ""),
                       status(dep("c1", NEW, staged=True, reference=reference), BOOTED_OLD)]
    args = {"image": IMAGE + "@" + NEW, "transport": transport}
    if remote:
        args["ostree_remote"] = remote
    with pytest.raises(ExitJson) as caught:
        run(args)
    assert fake["calls"][1][0] == RAW_ARGV
    assert fake["calls"][2][0] == rebase_argv(reference)
    assert outcome(caught)["reference"] == reference
    assert outcome(caught)["changed"] is True


def test_staged_other_digest_is_replaced(fake):
    fake["results"] = [status(dep("c2", OTHER, staged=True), BOOTED_OLD), RESOLVED, (0, "", ""),
                       status(STAGED_NEW, BOOTED_OLD)]
    with pytest.raises(ExitJson) as caught:
        run({"image": IMAGE + "@" + NEW})
    assert [c[0] for c in fake["calls"]] == [STATUS_ARGV, RAW_ARGV, rebase_argv(ref(NEW)), STATUS_ARGV]
    assert outcome(caught)["before"]["digest"] == OTHER
    assert outcome(caught)["after"]["digest"] == NEW


def test_booted_at_digest_with_another_staged_is_a_change(fake):
    """The next boot decides: a different staged deployment means the host would not boot NEW."""
    booted_new = dep("c1", NEW, booted=True)
    fake["results"] = [status(dep("c2", OTHER, staged=True), booted_new), RESOLVED, (0, "", ""), status(booted_new)]
    with pytest.raises(ExitJson) as caught:
        run({"image": IMAGE + "@" + NEW})
    result = outcome(caught)
    assert fake["calls"][2][0] == rebase_argv(ref(NEW))
    assert result["changed"] is True and result["reboot_required"] is False


# ---------------------------------------------------------------- check mode

@pytest.mark.parametrize(("deployments", "before_digest", "reboot_required"), [
    ([BOOTED_OLD], OLD, True),
    ([dep("c2", OTHER, staged=True), BOOTED_OLD], OTHER, True),
    ([dep("c2", OTHER, staged=True), dep("c1", NEW, booted=True)], OTHER, False),
])
def test_check_mode_predicts_without_rebasing(fake, deployments, before_digest, reboot_required):
    fake["results"] = [status(*deployments), RESOLVED]
    with pytest.raises(ExitJson) as caught:
        run({"image": IMAGE + "@" + NEW, "lock_finalization": True}, check_mode=True)
    result = outcome(caught)
    assert [c[0] for c in fake["calls"]] == [STATUS_ARGV, RAW_ARGV]
    assert result["changed"] is True
    assert result["before"]["digest"] == before_digest
    assert result["after"] == {"reference": ref(NEW), "digest": NEW, "checksum": None}
    assert result["diff"]["after"] == "reference: %s\ndigest: %s\n" % (ref(NEW), NEW)
    assert result["reboot_required"] is reboot_required


# ---------------------------------------------------------------- tags

def test_tag_refused_without_allow_tag(fake):
    with pytest.raises(FailJson) as caught:
        run({"image": IMAGE + ":2.0"})
    assert fake["calls"] == []
    assert outcome(caught)["msg"] == (
        "image '%s:2.0' has no digest: give %s@sha256:<64 hex digits>, or set allow_tag: true to resolve "
        "the tag to a digest on the host." % (IMAGE, IMAGE))


@pytest.mark.parametrize(("auth", "authfile"), [(None, None), ("etc", "etc"), ("given", "given")])
def test_tag_resolved_with_allow_tag(fake, tmp_path, auth, authfile):
    given = tmp_path / "given.json"
    given.write_text('{"auths": {}}')
    if auth == "etc":
        fake["etc_auth"].parent.mkdir(parents=True)
        fake["etc_auth"].write_text('{"auths": {}}')
    args = {"image": IMAGE + ":2.0", "allow_tag": True}
    if auth == "given":
        args["auth_file"] = str(given)
    fake["results"] = [RESOLVED, status(BOOTED_OLD), (0, "", ""), status(STAGED_NEW, BOOTED_OLD)]
    with pytest.raises(ExitJson) as caught:
        run(args)
    options = []
    if authfile:
        options = ["--authfile", str(given) if authfile == "given" else str(fake["etc_auth"])]
    # One manifest read resolves the tag and tells that OLD is not the target for this host.
    expected_skopeo = raw_argv(IMAGE + ":2.0", *options)
    assert [c[0] for c in fake["calls"]] == [expected_skopeo, STATUS_ARGV, rebase_argv(ref(NEW)), STATUS_ARGV]
    assert fake["calls"][0][1] == RAW_ENV
    assert outcome(caught)["digest"] == NEW and outcome(caught)["changed"] is True


@pytest.mark.parametrize(("result", "msg"), [
    ((1, b"", b"time=\"x\" level=fatal msg=\"Error parsing image name: manifest unknown\"\n"),
     "Failed to resolve image '%s:2.0': the registry has no such image (manifest unknown)." % IMAGE),
    ((0, b"{}", b""), "Failed to resolve image '%s:2.0': the registry served no image manifest (its schemaVersion "
                      "is None, not 2)." % IMAGE),
])
def test_tag_resolution_failure(fake, result, msg):
    fake["results"] = [result]
    with pytest.raises(FailJson) as caught:
        run({"image": IMAGE + ":2.0", "allow_tag": True})
    assert outcome(caught)["msg"] == msg
    assert len(fake["calls"]) == 1


# ---------------------------------------------------------------- state=booted

def test_state_booted_passes(fake):
    fake["results"] = [status(dep("c2", OTHER, staged=True), dep("c1", NEW, booted=True))]
    with pytest.raises(ExitJson) as caught:
        run({"image": IMAGE + "@" + NEW, "state": "booted"})
    result = outcome(caught)
    assert [c[0] for c in fake["calls"]] == [STATUS_ARGV]
    assert result["changed"] is False
    assert result["before"] == result["after"] == {"reference": ref(NEW), "digest": NEW, "checksum": "c1"}


@pytest.mark.parametrize("check_mode", [False, True])
def test_state_booted_fails_when_only_staged(fake, check_mode):
    fake["results"] = [status(STAGED_NEW, BOOTED_OLD), RESOLVED]
    with pytest.raises(FailJson) as caught:
        run({"image": IMAGE + "@" + NEW, "state": "booted"}, check_mode)
    assert [c[0] for c in fake["calls"]] == [STATUS_ARGV, RAW_ARGV]
    assert outcome(caught)["msg"] == ("The host is not booted at image digest %s: the booted deployment "
                                      "is at %s." % (NEW, OLD))
    assert outcome(caught)["reboot_required"] is True


# ---------------------------------------------------------------- failures

def test_still_busy_after_retries(fake):
    fake["results"] = [status(BOOTED_OLD), RESOLVED] + [(1, "", BUSY)] * 3
    with pytest.raises(FailJson) as caught:
        run({"image": IMAGE + "@" + NEW, "retries": 2, "retry_delay": 1})
    assert [c[0] for c in fake["calls"]] == [STATUS_ARGV, RAW_ARGV] + [rebase_argv(ref(NEW))] * 3
    assert outcome(caught)["msg"] == (
        "Failed to rebase to '%s': another transaction was still in progress after 3 attempts "
        "(Transaction in progress: rebase to x)." % ref(NEW))
    assert fake["sleeps"] == [1, 1]


def test_registry_without_the_digest_fails_before_the_rebase(fake):
    err = 'time="t" level=fatal msg="reading manifest %s in %s: manifest unknown: manifest unknown"\n' % (NEW, IMAGE)
    fake["results"] = [status(BOOTED_OLD), (1, b"", err.encode())]
    with pytest.raises(FailJson) as caught:
        run({"image": IMAGE + "@" + NEW})
    result = outcome(caught)
    assert result["msg"] == "Failed to resolve image '%s@%s': the registry has no such image (manifest unknown)." % (
        IMAGE, NEW)
    assert result["rc"] == 1 and result["cmd"] == RAW_ARGV and result["stderr"] == err
    assert [c[0] for c in fake["calls"]] == [STATUS_ARGV, RAW_ARGV]


def test_rebase_failure_keeps_the_output(fake):
    err = "error: Pulling image: reading blob sha256:abab: unexpected EOF\n"
    fake["results"] = [status(BOOTED_OLD), RESOLVED, (1, "Pulling manifest: x\n", err)]
    with pytest.raises(FailJson) as caught:
        run({"image": IMAGE + "@" + NEW})
    result = outcome(caught)
    assert result["msg"] == "Failed to rebase to '%s': Pulling image: reading blob sha256:abab: unexpected EOF." % (
        ref(NEW))
    assert result["rc"] == 1 and result["cmd"] == rebase_argv(ref(NEW)) and result["stderr"] == err


def test_rebase_that_does_not_reach_the_digest_fails(fake):
    fake["results"] = [status(BOOTED_OLD), RESOLVED, (0, "", ""), status(dep("c2", OTHER, staged=True), BOOTED_OLD)]
    with pytest.raises(FailJson) as caught:
        run({"image": IMAGE + "@" + NEW})
    assert outcome(caught)["msg"] == ("Failed to rebase to '%s': rpm-ostree finished, but the next boot is "
                                      "at %s." % (ref(NEW), OTHER))


@pytest.mark.parametrize(("args", "msg"), [
    ({"image": IMAGE + "@sha256:12"},
     "image reference '%s@sha256:12' has an invalid digest: expected sha256: and 64 hex digits" % IMAGE),
    ({"image": "ostree-unverified-registry:%s@%s" % (IMAGE, NEW)}, "already names an rpm-ostree transport"),
    ({"image": IMAGE + "@" + NEW, "transport": "remote"}, "transport is remote but all of the following are missing: ostree_remote"),
    ({"image": IMAGE + "@" + NEW, "auth_file": "/nonexistent/auth.json"},
     "auth_file '/nonexistent/auth.json' does not exist or is not a regular file."),
])
def test_bad_input_fails_before_anything(fake, args, msg):
    with pytest.raises(FailJson) as caught:
        run(args)
    assert fake["calls"] == []
    assert msg in outcome(caught)["msg"]


# ---------------------------------------------------------------- auth_file

def _mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.mark.parametrize("previous", [None, b'{"auths": {"old": {}}}'])
@pytest.mark.parametrize("rebase_rc", [0, 1])
def test_auth_file_in_place_during_rebase_only(fake, tmp_path, previous, rebase_rc):
    given = tmp_path / "given.json"
    given.write_bytes(b'{"auths": {"198.51.100.1:5000": {"auth": "eDp5"}}}')
    run_auth = fake["run_auth"]
    if previous is not None:
        run_auth.parent.mkdir(parents=True)
        run_auth.write_bytes(previous)
        os.chmod(run_auth, 0o640)
    seen = {}

    def during_rebase(argv):
        seen["content"] = run_auth.read_bytes()
        seen["mode"] = _mode(run_auth)

    fake["hooks"]["rebase"] = during_rebase
    fake["results"] = [status(BOOTED_OLD), RESOLVED, (rebase_rc, "", "" if rebase_rc == 0 else "error: boom\n"),
                       status(STAGED_NEW, BOOTED_OLD)]
    expected = ExitJson if rebase_rc == 0 else FailJson
    with pytest.raises(expected):
        run({"image": IMAGE + "@" + NEW, "auth_file": str(given)})
    assert seen == {"content": given.read_bytes(), "mode": 0o600}
    if previous is None:
        assert not run_auth.exists()
    else:
        assert run_auth.read_bytes() == previous and _mode(run_auth) == 0o640
    assert sorted(p.name for p in run_auth.parent.iterdir()) == ([] if previous is None else ["auth.json"])


def test_auth_file_not_touched_in_check_mode(fake, tmp_path):
    given = tmp_path / "given.json"
    given.write_text("{}")
    fake["hooks"]["rebase"] = lambda argv: pytest.fail("rebase called in check mode")
    fake["results"] = [status(BOOTED_OLD), RESOLVED]
    with pytest.raises(ExitJson):
        run({"image": IMAGE + "@" + NEW, "auth_file": str(given)}, check_mode=True)
    assert fake["calls"][1][0] == raw_argv(IMAGE + "@" + NEW, "--authfile", str(given))
    assert not fake["run_auth"].exists()


# ---------------------------------------------------------------- multi-arch targets (an index)

INDEX_RAW_ARGV = raw_argv(IMAGE + "@" + INDEX_DIGEST)
RESOLVED_INDEX = (0, INDEX, b"")


def machine(monkeypatch, name):
    """The host's ``uname -m`` (fake_host answers it)."""
    from ansible.plugins.action import ActionBase
    execute = ActionBase._low_level_execute_command

    def answer(self, cmd, *args, **kwargs):
        if cmd == "LC_ALL=C uname -m":
            return {"rc": 0, "stdout": name + "\n", "stderr": ""}
        return execute(self, cmd, *args, **kwargs)
    monkeypatch.setattr(ActionBase, "_low_level_execute_command", answer)


@pytest.mark.parametrize("check_mode", [False, True])
@pytest.mark.parametrize(("name", "deployment"), [
    # rebased earlier to the amd64 manifest itself
    ("x86_64", dep("c1", AMD, booted=True)),
    # following a tag: rpm-ostree reports the manifest digest it pulled
    ("x86_64", dep("c1", AMD, booted=True, reference="ostree-unverified-registry:%s:stable" % IMAGE)),
    ("aarch64", dep("c1", ARM, booted=True, reference="ostree-unverified-registry:%s:stable" % IMAGE)),
])
def test_index_target_reached_through_the_platform_digest(fake, monkeypatch, name, deployment, check_mode):
    machine(monkeypatch, name)
    fake["results"] = [status(deployment), RESOLVED_INDEX]
    with pytest.raises(ExitJson) as caught:
        run({"image": IMAGE + "@" + INDEX_DIGEST}, check_mode)
    result = outcome(caught)
    assert [c[0] for c in fake["calls"]] == [STATUS_ARGV, INDEX_RAW_ARGV]
    assert result["changed"] is False
    assert result["digest"] == INDEX_DIGEST and result["reference"] == ref(INDEX_DIGEST)
    assert result["before"] == result["after"]


def test_index_target_with_another_platform_digest_is_a_change(fake, monkeypatch):
    """An arm64 host running the amd64 manifest is not at the index: it needs the arm64 one."""
    machine(monkeypatch, "aarch64")
    fake["results"] = [status(dep("c1", AMD, booted=True)), RESOLVED_INDEX, (0, "", ""),
                       status(dep("c2", INDEX_DIGEST, staged=True), dep("c1", AMD, booted=True))]
    with pytest.raises(ExitJson) as caught:
        run({"image": IMAGE + "@" + INDEX_DIGEST})
    assert [c[0] for c in fake["calls"]] == [STATUS_ARGV, INDEX_RAW_ARGV, rebase_argv(ref(INDEX_DIGEST)), STATUS_ARGV]
    assert outcome(caught)["changed"] is True


def test_state_booted_passes_through_the_platform_digest(fake):
    fake["results"] = [status(dep("c1", AMD, booted=True)), RESOLVED_INDEX]
    with pytest.raises(ExitJson) as caught:
        run({"image": IMAGE + "@" + INDEX_DIGEST, "state": "booted"})
    assert outcome(caught)["changed"] is False
    assert [c[0] for c in fake["calls"]] == [STATUS_ARGV, INDEX_RAW_ARGV]


def test_index_without_the_host_architecture_fails_before_the_rebase(fake, monkeypatch):
    machine(monkeypatch, "s390x")
    fake["results"] = [status(BOOTED_OLD), RESOLVED_INDEX]
    with pytest.raises(FailJson) as caught:
        run({"image": IMAGE + "@" + INDEX_DIGEST})
    assert outcome(caught)["msg"] == ("Failed to resolve image '%s@%s': its index has no linux entry for architecture "
                                      "s390x (entries: amd64, arm64)." % (IMAGE, INDEX_DIGEST))
    assert [c[0] for c in fake["calls"]] == [STATUS_ARGV, INDEX_RAW_ARGV]


def test_tag_of_an_index_is_resolved_once(fake, tmp_path):
    skopeo = tmp_path / "skopeo"
    skopeo.write_text("#!/bin/sh\n")
    skopeo.chmod(0o755)
    fake["results"] = [RESOLVED_INDEX, status(dep("c1", AMD, booted=True))]
    with pytest.raises(ExitJson) as caught:
        run({"image": IMAGE + ":stable", "allow_tag": True, "skopeo_executable": str(skopeo)})
    result = outcome(caught)
    assert [c[0] for c in fake["calls"]] == [[str(skopeo), "inspect", "--raw", "--", "docker://%s:stable" % IMAGE],
                                             STATUS_ARGV]
    assert (result["changed"], result["digest"]) == (False, INDEX_DIGEST)


def test_ostree_origin_needs_no_resolution(fake):
    """A host on a plain ostree origin reports no digest: the target cannot be there already."""
    plain = {"id": "os-c0.0", "osname": "os", "checksum": "c0", "serial": 0, "booted": True, "staged": False,
             "origin": "fedora:fedora/x86_64/coreos/stable"}
    fake["results"] = [status(plain), (0, "", ""), status(STAGED_NEW, plain)]
    with pytest.raises(ExitJson) as caught:
        run({"image": IMAGE + "@" + NEW})
    assert [c[0] for c in fake["calls"]] == [STATUS_ARGV, rebase_argv(ref(NEW)), STATUS_ARGV]
    assert outcome(caught)["changed"] is True


def test_transient_registry_failure_is_retried(fake):
    refused = b'level=fatal msg="dial tcp 198.51.100.1:5000: connect: connection refused"'
    fake["results"] = [status(BOOTED_OLD), (1, b"", refused), RESOLVED, (0, "", ""), status(STAGED_NEW, BOOTED_OLD)]
    with pytest.raises(ExitJson) as caught:
        run({"image": IMAGE + "@" + NEW, "retry_delay": 4})
    assert [c[0] for c in fake["calls"]] == [STATUS_ARGV, RAW_ARGV, RAW_ARGV, rebase_argv(ref(NEW)), STATUS_ARGV]
    assert fake["sleeps"] == [4]
    assert outcome(caught)["changed"] is True
