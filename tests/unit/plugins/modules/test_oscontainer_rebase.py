# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""oscontainer_rebase: main() with faked skopeo/ostree/rpm-ostree, real layer tars in tmp_path."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import stat
import tarfile
import tempfile

import pytest

from ansible_collections.fleetos.layering.tests.unit.plugins.modules.utils import patch_module_args, ExitJson, FailJson, fake_module
from ansible_collections.fleetos.layering.plugins.modules import oscontainer_rebase

REGISTRY = "198.51.100.1:5000"
NAME = REGISTRY + "/fleetos/legacy"
DIGEST = "sha256:" + "1b" * 32
OTHER = "sha256:" + "2c" * 32
IMAGE = NAME + "@" + DIGEST
URL = "pivot://" + IMAGE
COMMIT = "c1" * 32
BOOTED = "c0" * 32
DESCRIPTION = "Managed by fleetos.layering"
SKOPEO = "/usr/bin/skopeo"
OSTREE = "/usr/bin/ostree"
RPM_OSTREE = "/usr/bin/rpm-ostree"
ENV = {"environ_update": {"LC_ALL": "C"}, "expand_user_and_vars": False}
BUSY = "error: Transaction in progress: rebase\n"
LABELS = {"com.coreos.ostree-commit": COMMIT, "version": "4.6"}
OK = (0, "", "")
MISSING = (1, "", "error: No such metadata object %s.commit\n" % COMMIT)


def inspect_output(labels=None, digest=DIGEST):
    return (0, json.dumps({"Name": NAME, "Digest": digest, "Labels": LABELS if labels is None else labels}), "")


def dep(checksum, booted=False, staged=False, url=None, reference=None):
    raw = {"id": "os-%s.0" % checksum[:4], "osname": "os", "checksum": checksum, "serial": 0,
           "booted": booted, "staged": staged, "origin": checksum}
    if url:
        raw["custom-origin"] = [url, DESCRIPTION]
    if reference:
        raw["container-image-reference"] = reference
        del raw["origin"]  # rpm-ostree shows no origin refspec for a container image
    return raw


def status(*deployments):
    return (0, json.dumps({"deployments": list(deployments), "transaction": None}), "")


BOOTED_BASE = dep(BOOTED, booted=True, reference="ostree-unverified-registry:%s/fleetos/lab-os@%s" % (REGISTRY, OTHER))
STAGED_NEW = dep(COMMIT, staged=True, url=URL)


@pytest.fixture
def fake(monkeypatch, tmp_path):
    state = fake_module(monkeypatch)
    for name in ("tmp", "var-tmp", "repo", "etc"):
        (tmp_path / name).mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    monkeypatch.setattr(oscontainer_rebase, "OSTREE_AUTH_FILES",
                        (str(tmp_path / "run-auth.json"), str(tmp_path / "etc" / "auth.json")))
    monkeypatch.setattr("time.sleep", lambda seconds: state.setdefault("sleeps", []).append(seconds))
    state["tmp_path"] = tmp_path
    state["seen"] = {}
    return state


def args(fake, **extra):
    base = {"image": IMAGE, "tmpdir": str(fake["tmp_path"] / "var-tmp"), "sysroot_repo": str(fake["tmp_path"] / "repo")}
    return dict(base, **extra)


def run(module_args, check_mode=False):
    if check_mode:
        module_args = dict(module_args, _ansible_check_mode=True)
    with patch_module_args(module_args):
        oscontainer_rebase.main()


def outcome(exc_info):
    return exc_info.value.args[0]


def argvs(fake):
    return [call[0] for call in fake["calls"]]


def inspect_argv(*options):
    return [SKOPEO, "inspect", "--no-tags"] + list(options) + ["--", "docker://" + IMAGE]


def show_argv(repo):
    return [OSTREE, "show", "--repo=" + str(repo), "--", COMMIT]


def rebase_argv(lock=False, description=DESCRIPTION):
    return ([RPM_OSTREE, "rebase", "--unchanged-exit-77"] + (["--lock-finalization"] if lock else [])
            + ["--custom-origin-url=" + URL, "--custom-origin-description=" + description, "--", ":" + COMMIT])


STATUS_ARGV = [RPM_OSTREE, "status", "--json"]


# ---------------------------------------------------------------- an image in an OCI layout

def tar_layer(entries):
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w:gz") as tar:
        for name, content in entries:
            info = tarfile.TarInfo(name)
            if content is None:
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            else:
                info.size, info.mode = len(content), 0o644
                tar.addfile(info, io.BytesIO(content))
    return data.getvalue()


LAYERS = [
    [("srv/", None), ("srv/repo/", None), ("srv/repo/config", b"[core]\nmode=archive\n"),
     ("srv/repo/objects/c1/old.filez", b"old"), ("usr/bin/ignored", b"x")],
    [("srv/repo/objects/c1/.wh.old.filez", b""), ("srv/repo/objects/c1/%s.commit" % COMMIT[2:], b"commit")],
]


def write_layout(destination, layers=None):
    """What ``skopeo copy ... oci:DIR:TAG`` leaves: index.json, manifest and layer blobs."""
    assert destination.startswith("oci:") and destination.endswith(":oscontainer")
    layout = destination[len("oci:"):-len(":oscontainer")]
    os.makedirs(os.path.join(layout, "blobs", "sha256"))

    def blob(data):
        digest = hashlib.sha256(data).hexdigest()
        with open(os.path.join(layout, "blobs", "sha256", digest), "wb") as handle:
            handle.write(data)
        return "sha256:" + digest

    described = [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": blob(tar_layer(entries))}
                 for entries in (LAYERS if layers is None else layers)]
    manifest = blob(json.dumps({"schemaVersion": 2, "layers": described}).encode())
    with open(os.path.join(layout, "index.json"), "w") as handle:
        json.dump({"manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": manifest,
                                  "annotations": {"org.opencontainers.image.ref.name": "oscontainer"}}]}, handle)


def repo_tree(root):
    found = {}
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            path = os.path.join(dirpath, name)
            with open(path, "rb") as handle:
                found[os.path.relpath(path, root)] = handle.read()
    return found


def install_hooks(fake, layers=None):
    """skopeo copy writes the layout; pull-local records the repository it was given."""
    def copy(argv):
        for flag in ("--src-authfile",):
            if flag in argv:
                path = argv[argv.index(flag) + 1]
                with open(path) as handle:
                    fake["seen"]["auth"] = (stat.S_IMODE(os.stat(path).st_mode), json.load(handle), path)
        write_layout(argv[-1], layers)

    def pull_local(argv):
        fake["seen"]["source"] = argv[-2]
        fake["seen"]["repo"] = repo_tree(argv[-2])

    fake["hooks"]["copy"] = copy
    fake["hooks"]["pull-local"] = pull_local


def leftovers(fake):
    return (os.listdir(str(fake["tmp_path"] / "var-tmp")), os.listdir(str(fake["tmp_path"] / "tmp")))


# ---------------------------------------------------------------- the whole rebase with a fetch

def test_fetch_pull_local_and_rebase(fake):
    install_hooks(fake)
    fake["results"] = [inspect_output(), status(BOOTED_BASE), MISSING, OK, OK, OK, OK, OK,
                       status(STAGED_NEW, BOOTED_BASE)]
    with pytest.raises(ExitJson) as caught:
        run(args(fake))
    result = outcome(caught)
    calls = argvs(fake)
    work = os.path.dirname(fake["seen"]["source"])
    repo = str(fake["tmp_path"] / "repo")
    assert os.path.basename(work).startswith("fleetos-oscontainer-")
    assert os.path.dirname(work) == str(fake["tmp_path"] / "var-tmp")
    assert calls == [
        inspect_argv(), STATUS_ARGV, show_argv(repo),
        [SKOPEO, "copy", "--quiet", "--remove-signatures", "--", "docker://" + IMAGE, "oci:%s/oci:oscontainer" % work],
        show_argv(work + "/repo"),
        [OSTREE, "pull-local", "--repo=" + repo, "--untrusted", "--", work + "/repo", COMMIT],
        show_argv(repo), rebase_argv(), STATUS_ARGV]
    assert all(call[1] == ENV for call in fake["calls"])
    # Only srv/repo, with the whiteout of the second layer applied.
    assert fake["seen"]["repo"] == {"config": b"[core]\nmode=archive\n",
                                    "objects/c1/%s.commit" % COMMIT[2:]: b"commit"}
    assert result["changed"] is True
    assert result["fetched"] is True
    assert result["commit"] == COMMIT
    assert result["digest"] == DIGEST
    assert result["reference"] == URL
    assert result["reboot_required"] is True
    assert result["before"] == {"reference": BOOTED_BASE["container-image-reference"], "digest": OTHER,
                                "checksum": BOOTED, "origin": None}
    assert result["after"] == {"reference": URL, "digest": DIGEST, "checksum": COMMIT, "origin": COMMIT}
    assert result["diff"]["after"] == "checksum: %s\nreference: %s\ndigest: %s\n" % (COMMIT, URL, DIGEST)
    assert leftovers(fake) == ([], [])


def test_auth_file_entry_and_cert_options_reach_skopeo_in_a_temporary_file(fake):
    install_hooks(fake)
    auth_file = fake["tmp_path"] / "auth.json"
    auth_file.write_text(json.dumps({"auths": {
        REGISTRY: {"auth": base64.b64encode(b"fleet:pa$$ word").decode()},
        "quay.io": {"auth": base64.b64encode(b"other:secret").decode()}}}))
    fake["results"] = [inspect_output(), status(BOOTED_BASE), MISSING, OK, OK, OK, OK, (0, "", ""),
                       status(STAGED_NEW, BOOTED_BASE)]
    with pytest.raises(ExitJson):
        run(args(fake, auth_file=str(auth_file), ca_cert_dir="/etc/pki/reg", validate_certs=False,
                 lock_finalization=True, custom_description="OCP 4.6 -x"))
    mode, document, path = fake["seen"]["auth"]
    options = ["--authfile", path, "--cert-dir", "/etc/pki/reg", "--tls-verify=false"]
    assert argvs(fake)[0] == inspect_argv(*options)
    assert argvs(fake)[3][:9] == [SKOPEO, "copy", "--quiet", "--remove-signatures", "--src-authfile", path, "--src-cert-dir",
                                  "/etc/pki/reg", "--src-tls-verify=false"]
    assert argvs(fake)[7] == rebase_argv(lock=True, description="OCP 4.6 -x")
    assert mode == 0o600
    assert document == {"auths": {REGISTRY: {"auth": base64.b64encode(b"fleet:pa$$ word").decode()}}}
    assert not any("pa$$" in part for argv in argvs(fake) for part in argv)
    assert leftovers(fake) == ([], [])


@pytest.mark.parametrize("has_entry", [True, False])
def test_default_ostree_auth_file(fake, has_entry):
    (fake["tmp_path"] / "etc" / "auth.json").write_text(json.dumps({"auths": {
        (REGISTRY if has_entry else "quay.io"): {"auth": base64.b64encode(b"fleet:pw").decode()}}}))
    fake["results"] = [inspect_output(), status(STAGED_NEW, BOOTED_BASE)]
    with pytest.raises(ExitJson) as caught:
        run(args(fake))
    assert ("--authfile" in argvs(fake)[0]) is has_entry
    assert outcome(caught)["changed"] is False


# ---------------------------------------------------------------- unchanged, commit already there, rc

@pytest.mark.parametrize("check_mode", [False, True])
@pytest.mark.parametrize("deployments,reboot_required", [
    ([STAGED_NEW, BOOTED_BASE], True),
    ([dep(COMMIT, booted=True, url=URL)], False),
])
def test_unchanged_when_next_boot_is_the_commit_and_digest(fake, deployments, reboot_required, check_mode):
    fake["results"] = [inspect_output(), status(*deployments)]
    with pytest.raises(ExitJson) as caught:
        run(args(fake), check_mode)
    result = outcome(caught)
    assert argvs(fake) == [inspect_argv(), STATUS_ARGV]
    assert result["changed"] is False
    assert result["fetched"] is False
    assert result["before"] == result["after"]
    assert result["after"]["checksum"] == COMMIT
    assert result["reboot_required"] is reboot_required


@pytest.mark.parametrize("next_deployment", [
    # the commit, but the pivot origin names another digest of the image
    dep(COMMIT, booted=True, url="pivot://%s@%s" % (NAME, OTHER)),
    # the commit, with a plain checksum origin (no custom origin)
    dep(COMMIT, booted=True),
    # the digest in the origin, but another commit
    dep(BOOTED, booted=True, url=URL),
])
def test_commit_already_in_the_repo_is_not_fetched(fake, next_deployment):
    fake["results"] = [inspect_output(), status(next_deployment), OK, OK,
                       status(dep(COMMIT, staged=True, url=URL), next_deployment)]
    with pytest.raises(ExitJson) as caught:
        run(args(fake))
    result = outcome(caught)
    assert argvs(fake) == [inspect_argv(), STATUS_ARGV, show_argv(fake["tmp_path"] / "repo"), rebase_argv(),
                           STATUS_ARGV]
    assert result["changed"] is True
    assert result["fetched"] is False
    assert result["before"]["checksum"] == next_deployment["checksum"]


def test_partial_commit_in_the_repo_is_fetched_again(fake):
    install_hooks(fake)
    state = fake["tmp_path"] / "repo" / "state"
    state.mkdir()
    (state / (COMMIT + ".commitpartial")).write_text("")

    def pulled(argv):
        fake["seen"]["source"] = argv[-2]
        (state / (COMMIT + ".commitpartial")).unlink()

    fake["hooks"]["pull-local"] = pulled
    fake["results"] = [inspect_output(), status(BOOTED_BASE), OK, OK, OK, OK, OK, OK,
                       status(STAGED_NEW, BOOTED_BASE)]
    with pytest.raises(ExitJson) as caught:
        run(args(fake))
    assert outcome(caught)["fetched"] is True
    assert argvs(fake)[5][1] == "pull-local"


@pytest.mark.parametrize("rebase_results,changed,sleeps", [
    ([(77, "No change.\n", "")], False, []),
    ([(1, "", BUSY), (0, "", "")], True, [2]),
])
def test_rebase_rc_and_busy_retries(fake, rebase_results, changed, sleeps):
    booted_commit = dep(COMMIT, booted=True)
    fake["results"] = [inspect_output(), status(booted_commit), OK] + rebase_results + [
        status(dep(COMMIT, booted=True, url=URL))]
    with pytest.raises(ExitJson) as caught:
        run(args(fake, retry_delay=2))
    assert argvs(fake)[3:-1] == [rebase_argv()] * len(rebase_results)
    assert outcome(caught)["changed"] is changed
    assert outcome(caught)["reboot_required"] is False
    assert fake.get("sleeps", []) == sleeps


def test_busy_after_the_retries_fails(fake):
    fake["results"] = [inspect_output(), status(BOOTED_BASE), OK, (1, "", BUSY), (1, "", BUSY)]
    with pytest.raises(FailJson) as caught:
        run(args(fake, retries=1, retry_delay=0))
    assert outcome(caught)["msg"] == (
        "Failed to rebase to commit %s of '%s': another transaction was still in progress after 2 attempts "
        "(Transaction in progress: rebase)." % (COMMIT, URL))


# ---------------------------------------------------------------- check mode

@pytest.mark.parametrize("present,deployments,reboot_required", [
    (False, [BOOTED_BASE], True),
    (True, [BOOTED_BASE], True),
    # booted at the target, another deployment staged: the rebase only drops it
    (True, [dep(BOOTED, staged=True), dep(COMMIT, booted=True, url=URL)], False),
])
def test_check_mode_predicts_without_fetching(fake, present, deployments, reboot_required):
    fake["results"] = [inspect_output(), status(*deployments), OK if present else MISSING]
    with pytest.raises(ExitJson) as caught:
        run(args(fake, lock_finalization=True), check_mode=True)
    result = outcome(caught)
    assert argvs(fake) == [inspect_argv(), STATUS_ARGV, show_argv(fake["tmp_path"] / "repo")]
    assert result["changed"] is True
    assert result["fetched"] is (not present)
    assert result["reboot_required"] is reboot_required
    assert result["after"] == {"reference": URL, "digest": DIGEST, "checksum": COMMIT, "origin": COMMIT}
    assert result["before"]["checksum"] == deployments[0]["checksum"]
    assert result["diff"]["before"].startswith("checksum: %s\n" % deployments[0]["checksum"])
    assert leftovers(fake) == ([], [])


# ---------------------------------------------------------------- bad input and bad images

@pytest.mark.parametrize("extra,message", [
    ({"image": NAME + ":4.6"},
     "image '%s:4.6' has no digest: give %s@sha256:<64 hex digits>, as a legacy oscontainer is only rebased "
     "to by digest." % (NAME, NAME)),
    ({"image": "ostree-unverified-registry:" + IMAGE}, "names an rpm-ostree transport"),
    ({"image": NAME + "@sha256:abc"}, "has an invalid digest"),
    ({"custom_description": "two\nlines"}, "custom_description 'two\\nlines' is invalid"),
    ({"custom_description": " "}, "custom_description ' ' is invalid"),
    ({"retries": -1}, "retries -1 is negative"),
    ({"tmpdir": "/nonexistent/tmp"}, "tmpdir '/nonexistent/tmp' does not exist or is not a directory."),
    ({"sysroot_repo": "/nonexistent/repo"}, "sysroot_repo '/nonexistent/repo' does not exist"),
    ({"auth_file": "/nonexistent/auth.json"}, "Failed to read the auth file '/nonexistent/auth.json'"),
])
def test_bad_input_fails_before_anything_runs(fake, extra, message):
    with pytest.raises(FailJson) as caught:
        run(args(fake, **extra))
    assert message in outcome(caught)["msg"]
    assert fake["calls"] == []


def test_auth_file_without_an_entry_for_the_registry(fake):
    auth_file = fake["tmp_path"] / "auth.json"
    auth_file.write_text(json.dumps({"auths": {"quay.io": {"auth": base64.b64encode(b"u:p").decode()}}}))
    with pytest.raises(FailJson) as caught:
        run(args(fake, auth_file=str(auth_file)))
    assert outcome(caught)["msg"] == (
        "Failed to find credentials for image '%s': the auth file '%s' has no entry for "
        "'%s/fleetos/legacy' or '%s/fleetos' or '%s' (entries: quay.io)." % (
            IMAGE, auth_file, REGISTRY, REGISTRY, REGISTRY))
    assert fake["calls"] == []


@pytest.mark.parametrize("inspected,message", [
    (inspect_output({"ostree.bootable": "true", "ostree.commit": COMMIT}),
     "Image '%s' is not a legacy oscontainer: it has no label com.coreos.ostree-commit (it is a bootable "
     "container image; rebase to a bootable image with fleetos.layering.rpm_ostree_rebase)." % IMAGE),
    (inspect_output(digest=OTHER),
     "Failed to verify image '%s': the registry serves digest %s, not the pinned digest %s." % (IMAGE, OTHER, DIGEST)),
    ((1, "", 'time="x" level=fatal msg="manifest unknown"\n'),
     "Failed to inspect image '%s': the registry has no such image (manifest unknown)." % IMAGE),
])
def test_wrong_images_fail_after_the_inspection_only(fake, inspected, message):
    fake["results"] = [inspected]
    with pytest.raises(FailJson) as caught:
        run(args(fake))
    assert outcome(caught)["msg"] == message
    assert argvs(fake) == [inspect_argv()]


# ---------------------------------------------------------------- failures clean up and stage nothing

@pytest.mark.parametrize("layers,results,message", [
    # pull-local fails
    (None, [OK, (1, "", "error: Writing content object: No space left on device\n")],
     "Failed to pull commit {commit} into the repository '{repo}': Writing content object: No space left on device."),
    # the image's repository does not hold the commit its label names
    (None, [MISSING], "does not carry the commit {commit} that its label com.coreos.ostree-commit names"),
    # a layer tries to escape
    ([[("srv/repo/../../../../escaped", b"evil")]], [], "has an absolute path or a '..' component"),
    # no repository in the image at all
    ([[("usr/bin/tool", b"x")]], [], "its layers hold no ostree repository at /srv/repo"),
    # pull-local "succeeds" but the commit is not there
    (None, [OK, OK, MISSING], "ostree pull-local finished, but the repository '{repo}' does not hold it"),
])
def test_fetch_failures_remove_the_work_dir_and_never_rebase(fake, layers, results, message):
    install_hooks(fake, layers)
    fake["results"] = [inspect_output(), status(BOOTED_BASE), MISSING, OK] + results
    with pytest.raises(FailJson) as caught:
        run(args(fake))
    msg = outcome(caught)["msg"]
    assert message.format(commit=COMMIT, repo=fake["tmp_path"] / "repo") in msg
    assert "rebase" not in [argv[1] for argv in argvs(fake)]
    assert leftovers(fake) == ([], [])
    assert not (fake["tmp_path"] / "escaped").exists()
    assert "exception" not in outcome(caught)


def test_copy_failure_cleans_up(fake):
    fake["results"] = [inspect_output(), status(BOOTED_BASE), MISSING,
                       (1, "", 'time="x" level=fatal msg="unauthorized: authentication required"\n')]
    with pytest.raises(FailJson) as caught:
        run(args(fake))
    assert outcome(caught)["msg"] == (
        "Failed to pull image '%s': the registry refused the credentials (unauthorized)." % IMAGE)
    assert leftovers(fake) == ([], [])


def test_rebase_that_does_not_reach_the_commit_fails(fake):
    fake["results"] = [inspect_output(), status(BOOTED_BASE), OK, OK, status(BOOTED_BASE)]
    with pytest.raises(FailJson) as caught:
        run(args(fake))
    assert outcome(caught)["msg"] == (
        "Failed to rebase to commit %s of '%s': rpm-ostree finished, but the next boot is at %s." % (
            COMMIT, URL, BOOTED))
    assert outcome(caught)["after"]["checksum"] == BOOTED


def test_unexpected_error_is_one_sentence_with_a_traceback(fake, monkeypatch):
    def broken(*a, **k):
        raise RuntimeError("boom")

    monkeypatch.setattr(oscontainer_rebase, "run_module", broken)
    with pytest.raises(FailJson) as caught:
        run(args(fake))
    assert outcome(caught)["msg"] == "Failed to rebase to legacy oscontainer '%s': unexpected error: boom." % IMAGE
    assert "RuntimeError" in outcome(caught)["exception"]
