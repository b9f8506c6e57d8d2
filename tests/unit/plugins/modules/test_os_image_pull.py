# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""os_image_pull: main() with a faked skopeo (run_command), exact argv, secrets, cache."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import stat
import tempfile
from pathlib import Path

import pytest

from ansible_collections.fleetos.layering.tests.unit.plugins.modules.utils import patch_module_args
from ansible.module_utils import basic

from ansible_collections.fleetos.layering.plugins.modules import os_image_pull

SHARED = Path(os.environ.get("FLEETOS_SHARED") or Path(__file__).resolve().parents[5] / "shared")
FIXTURES = SHARED / "reference" / "fixtures"

REGISTRY = "198.51.100.1:5000"
NAME = REGISTRY + "/fleetos/lab-os"
IMAGE = NAME + ":1.0"
OTHER = "sha256:" + "0" * 64
LAYER = "sha256:" + "76ecbef4dc4358a12dbb5c29e66d839636ce69d49f84d54c8378a86753063548"
CONFIG = "sha256:" + "6045d131c132c03c0066ddb8e3474a22676edcca5d41549001eb6f1827cf0710"
# The manifest as the registry serves it (skopeo inspect --raw); DIGEST is the sha256 of these bytes.
MANIFEST = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                       "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": CONFIG,
                                  "size": 1},
                       "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": LAYER,
                                   "size": 1}]}, indent=3).encode()
DIGEST = "sha256:" + hashlib.sha256(MANIFEST).hexdigest()
PINNED = NAME + "@" + DIGEST
AMD = "sha256:" + "a1" * 32
ARM = "sha256:" + "b2" * 32
INDEX = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": [
    {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": AMD, "size": 1,
     "platform": {"architecture": "amd64", "os": "linux"}},
    {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": ARM, "size": 1,
     "platform": {"architecture": "arm64", "os": "linux", "variant": "v8"}}]}).encode()
INDEX_DIGEST = "sha256:" + hashlib.sha256(INDEX).hexdigest()
COMMIT = "5d3965ddc23da6be463b043cd818e26108286f028f95f1bdf9806372b17368fd"
PASSWORD = "s3cr$t 'pä ss"
SKOPEO = "/usr/bin/skopeo"
LABELS = {"ostree.bootable": "true", "ostree.commit": COMMIT, "version": "1.0",
          "org.opencontainers.image.version": "1.0"}


def inspect_output(labels=None, digest=DIGEST, layers=(LAYER,)):
    return json.dumps({"Name": REGISTRY + "/fleetos/lab-os", "Digest": digest,
                       "Labels": LABELS if labels is None else labels,
                       "Architecture": "amd64", "Os": "linux", "Layers": list(layers)})


class Exit(Exception):
    pass


class Skopeo:
    """Fake run_command: records argv and what the auth file held while skopeo ran."""

    def __init__(self, results, copy_writes=None):
        self.results = list(results)
        self.calls = []
        self.auth_files = []
        self.copy_writes = copy_writes

    def __call__(self, argv, **kwargs):
        self.calls.append(argv)
        assert kwargs["environ_update"] == {"LC_ALL": "C"}
        assert kwargs["expand_user_and_vars"] is False
        for flag in ("--authfile", "--src-authfile"):
            if flag in argv:
                path = argv[argv.index(flag) + 1]
                self.auth_files.append((path, stat.S_IMODE(os.stat(path).st_mode),
                                        json.loads(Path(path).read_text(encoding="utf-8"))))
        if argv[1] == "copy" and self.copy_writes is not None:
            self.copy_writes(argv[-1])
        return self.results.pop(0)


def run(monkeypatch, args, skopeo, check_mode=False, diff=False, ostree_auth=None):
    monkeypatch.setattr(os_image_pull, "ostree_auth_file", lambda: ostree_auth)
    if check_mode:
        args = dict(args, _ansible_check_mode=True)
    if diff:
        args = dict(args, _ansible_diff=True)
    result = {}

    def exit_json(module, **kwargs):
        result.update(kwargs)
        raise Exit()

    def fail_json(module, **kwargs):
        result.update(kwargs, failed=True)
        raise Exit()

    monkeypatch.setattr(basic.AnsibleModule, "run_command", lambda module, argv, **kwargs: skopeo(argv, **kwargs))
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda module, name, required=False: SKOPEO)
    monkeypatch.setattr(basic.AnsibleModule, "exit_json", exit_json)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", fail_json)
    with patch_module_args(args):
        with pytest.raises(Exit):
            os_image_pull.main()
    return result


def inspect_argv(*options, image=PINNED):
    return [SKOPEO, "inspect", "--no-tags"] + list(options) + ["--", "docker://" + image]


def raw_argv(*options, image=IMAGE):
    return [SKOPEO, "inspect", "--raw"] + list(options) + ["--", "docker://" + image]


def calls(*options):
    """What state=inspected runs: resolve the reference, then inspect the pinned manifest."""
    return [raw_argv(*options), inspect_argv(*options)]


def served(labels=None):
    """skopeo's answers to calls(): the raw manifest, then the inspection."""
    return [(0, MANIFEST, b""), (0, inspect_output(labels), "")]


def auth_of(document):
    ((key, entry),) = document["auths"].items()
    return key, base64.b64decode(entry["auth"]).decode("utf-8")


@pytest.fixture(autouse=True)
def private_tmp(monkeypatch, tmp_path):
    """Temporary auth files go to a directory the test can list afterwards."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    return tmp


def test_inspected_with_username_password(monkeypatch, private_tmp):
    skopeo = Skopeo(served())
    result = run(monkeypatch, {"image": IMAGE, "username": "fleet", "password": PASSWORD}, skopeo)
    assert result["changed"] is False
    assert result["digest"] == DIGEST
    assert result["image"] == PINNED
    assert (result["index"], result["manifests"], result["platform_digest"]) == (False, {}, DIGEST)
    assert result["ostree_commit"] == COMMIT
    assert result["version"] == "1.0"
    assert result["architecture"] == "amd64"
    (path, mode, document), (path2, dummy, dummy2) = skopeo.auth_files
    assert path2 == path
    assert skopeo.calls == calls("--authfile", path)
    assert mode == 0o600
    assert auth_of(document) == (REGISTRY, "fleet:" + PASSWORD)
    assert not any(PASSWORD in part for part in skopeo.calls[0])
    assert not os.path.exists(path)
    assert list(private_tmp.iterdir()) == []
    assert PASSWORD not in json.dumps(result)


def test_auth_file_keeps_only_the_matching_entry(monkeypatch, tmp_path, private_tmp):
    auth_file = tmp_path / "auth.json"
    auth_file.write_text(json.dumps({"auths": {
        REGISTRY: {"auth": base64.b64encode(b"fleet:pw").decode()},
        "quay.io": {"auth": base64.b64encode(b"other:secret").decode()}}}), encoding="utf-8")
    skopeo = Skopeo(served())
    result = run(monkeypatch, {"image": IMAGE, "auth_file": str(auth_file), "ca_cert_dir": "/etc/pki/reg",
                               "validate_certs": False}, skopeo)
    path, mode, document = skopeo.auth_files[0]
    assert skopeo.calls == calls("--authfile", path, "--cert-dir", "/etc/pki/reg", "--tls-verify=false")
    assert auth_of(document) == (REGISTRY, "fleet:pw")
    assert mode == 0o600
    assert result["digest"] == DIGEST
    assert list(private_tmp.iterdir()) == []


@pytest.mark.parametrize("encode", [False, True])
def test_pull_secret_raw_or_base64(monkeypatch, private_tmp, encode):
    text = json.dumps({"auths": {"https://%s/v1/" % REGISTRY: {"username": "fleet", "password": PASSWORD}}})
    secret = base64.b64encode(text.encode("utf-8")).decode("ascii") if encode else text
    skopeo = Skopeo(served())
    result = run(monkeypatch, {"image": IMAGE, "pull_secret": secret}, skopeo)
    path, dummy, document = skopeo.auth_files[0]
    assert auth_of(document) == (REGISTRY, "fleet:" + PASSWORD)
    assert skopeo.calls == calls("--authfile", path)
    assert PASSWORD not in json.dumps(result)
    assert list(private_tmp.iterdir()) == []


def test_no_credentials_no_authfile(monkeypatch):
    skopeo = Skopeo(served())
    result = run(monkeypatch, {"image": "docker://" + IMAGE}, skopeo)
    assert skopeo.calls == calls()
    assert result["digest"] == DIGEST


def test_without_credentials_the_auth_file_rpm_ostree_reads_is_used(monkeypatch, tmp_path, private_tmp):
    auth_file = tmp_path / "ostree-auth.json"
    auth_file.write_text(json.dumps({"auths": {
        REGISTRY: {"auth": base64.b64encode(b"fleet:pw").decode()}}}), encoding="utf-8")
    skopeo = Skopeo(served())
    run(monkeypatch, {"image": IMAGE}, skopeo, ostree_auth=str(auth_file))
    path, mode, document = skopeo.auth_files[0]
    assert skopeo.calls == calls("--authfile", path)
    assert (auth_of(document), mode) == ((REGISTRY, "fleet:pw"), 0o600)
    assert list(private_tmp.iterdir()) == []


def test_an_ostree_auth_file_without_an_entry_for_the_image_is_not_an_error(monkeypatch, tmp_path):
    auth_file = tmp_path / "ostree-auth.json"
    auth_file.write_text(json.dumps({"auths": {"quay.io": {"auth": "b3RoZXI6cw=="}}}), encoding="utf-8")
    skopeo = Skopeo(served())
    result = run(monkeypatch, {"image": IMAGE}, skopeo, ostree_auth=str(auth_file))
    assert skopeo.calls == calls()
    assert result["digest"] == DIGEST


def test_unauthorized_fails_and_removes_the_auth_file(monkeypatch, private_tmp):
    stderr = 'level=fatal msg="reading manifest 1.0 in x: unauthorized: authentication required"'
    skopeo = Skopeo([(1, "", stderr)])
    result = run(monkeypatch, {"image": IMAGE, "username": "fleet", "password": PASSWORD}, skopeo)
    assert result["failed"] is True
    assert result["msg"] == ("Failed to resolve image '%s': the registry refused the credentials (unauthorized)."
                             % IMAGE)
    assert result["rc"] == 1
    assert result["stderr"] == stderr
    ((path, dummy, dummy2),) = skopeo.auth_files
    assert result["cmd"] == raw_argv("--authfile", path)
    assert not os.path.exists(path)
    assert list(private_tmp.iterdir()) == []
    assert PASSWORD not in json.dumps(result)


def test_credentials_for_another_registry_fail_before_skopeo(monkeypatch):
    secret = {"auths": {"quay.io": {"auth": base64.b64encode(b"u:p").decode()}}}
    skopeo = Skopeo([])
    result = run(monkeypatch, {"image": IMAGE, "pull_secret": secret}, skopeo)
    assert result["msg"] == ("Failed to find credentials for image '%s': the pull secret has no entry for "
                             "'%s/fleetos/lab-os' or '%s/fleetos' or '%s' (entries: quay.io)."
                             % (IMAGE, REGISTRY, REGISTRY, REGISTRY))
    assert skopeo.calls == []


def test_expected_digest_mismatch_fails_before_any_pull(monkeypatch, tmp_path):
    skopeo = Skopeo(served())
    result = run(monkeypatch, {"image": IMAGE, "expected_digest": OTHER, "state": "present",
                               "cache_dir": str(tmp_path / "cache")}, skopeo)
    assert result["msg"] == ("Failed to verify image '%s': the registry serves digest %s, not the expected "
                             "digest %s." % (IMAGE, DIGEST, OTHER))
    assert (result["digest"], result["expected_digest"]) == (DIGEST, OTHER)
    assert skopeo.calls == [raw_argv()]
    assert not (tmp_path / "cache").exists()


def test_pinned_reference_against_other_expected_digest_reads_only_the_manifest(monkeypatch):
    skopeo = Skopeo([(0, MANIFEST, b"")])
    result = run(monkeypatch, {"image": PINNED, "expected_digest": OTHER}, skopeo)
    assert result["msg"] == ("Failed to verify image '%s': the registry serves digest %s, not the expected digest %s."
                             % (PINNED, DIGEST, OTHER))
    assert skopeo.calls == [raw_argv(image=PINNED)]


@pytest.mark.parametrize(("args", "msg"), [
    ({"expected_digest": "sha256:abc"},
     "The option expected_digest 'sha256:abc' is not a digest: expected sha256: and 64 hex digits."),
    ({"architecture": "AMD64"},
     "The option architecture 'AMD64' is invalid: expected an OCI architecture such as amd64, arm64 or arm/v7."),
    ({"retries": -1}, "The option retries -1 is negative: expected 0 or more."),
    ({"image": "Bad Image"}, "image reference 'Bad Image' contains whitespace."),
    ({"image": ["a", "b"]}, "image must be a string, got a list."),
    ({"image": {"a": "b"}}, "image must be a string, got a dict."),
    ({"image": IMAGE + "\x1b[31m"}, "image contains a control character (U+001B ESC): expected one line of printable "
                                    "text."),
    ({"image": "a" * 100000}, "image is 100000 characters long: expected at most 4096."),
    ({"username": ["robot"], "password": "x"}, "username must be a string, got a list."),
    ({"retries": "many"}, "retries must be an integer, got the string 'many'."),
    ({"state": "x" * 100000}, "state is 100000 characters long: expected at most 4096."),
    ({"state": "absent"}, "state must be one of resolved, inspected, present, got 'absent'."),
    ({"validate_certs": "perhaps"}, "validate_certs must be a boolean (true or false), got the string 'perhaps'."),
    ({"expected_digest": "sha256:" + "a" * 200},
     "The option expected_digest '%s... (207 characters)' is not a digest: expected sha256: and 64 hex digits."
     % ("sha256:" + "a" * 49)),
    ({"state": "present", "cache_dir": "/dev/null"}, "cache_dir '/dev/null' is not a directory."),
    ({"ca_cert_dir": "/dev/null"}, "ca_cert_dir '/dev/null' is not a directory."),
])
def test_invalid_input(monkeypatch, args, msg):
    skopeo = Skopeo([])
    result = run(monkeypatch, dict({"image": IMAGE}, **args), skopeo)
    assert result["msg"] == msg
    assert skopeo.calls == []


@pytest.mark.parametrize(("labels", "commit", "version"), [
    ({"ostree.commit": "a", "com.coreos.ostree-commit": "b", "io.openshift.os-commit": "c"}, "a", None),
    ({"com.coreos.ostree-commit": "b", "io.openshift.os-commit": "c"}, "b", None),
    ({"io.openshift.os-commit": "c", "org.opencontainers.image.version": "9"}, "c", "9"),
    ({"version": "1", "org.opencontainers.image.version": "2"}, None, "1"),
    ({"version": "", "org.opencontainers.image.version": "2"}, None, "2"),
    ({}, None, None),
])
def test_label_fallbacks(monkeypatch, labels, commit, version):
    result = run(monkeypatch, {"image": IMAGE}, Skopeo(served(labels)))
    assert (result["ostree_commit"], result["version"], result["labels"]) == (commit, version, labels)


def test_labels_from_config_when_inspect_has_none(monkeypatch):
    data = json.loads(inspect_output())
    del data["Labels"]
    config = {"config": {"Labels": {"com.coreos.ostree-commit": "abc"}}}
    skopeo = Skopeo([(0, MANIFEST, b""), (0, json.dumps(data), ""), (0, json.dumps(config), "")])
    result = run(monkeypatch, {"image": IMAGE}, skopeo)
    assert skopeo.calls == calls() + [[SKOPEO, "inspect", "--config", "--", "docker://" + PINNED]]
    assert result["ostree_commit"] == "abc"


@pytest.mark.parametrize("name", ["skopeo-inspect-labels__mco-test__okd-fcos-37.json",
                                  "skopeo-inspect-labels__mco-test__rhcos-412.86-el8.6.json"])
def test_real_image_labels(monkeypatch, name):
    path = FIXTURES / name
    if not path.is_file():
        pytest.skip("reference fixture %s is absent (../shared not available)" % path)
    labels = json.loads(path.read_text(encoding="utf-8"))
    # Both name ostree.final-diffid: the configuration is read for its diff_ids.
    diff_ids = ["sha256:" + "c" * 64, labels["ostree.final-diffid"]]
    config = {"config": {"Labels": labels}, "rootfs": {"type": "layers", "diff_ids": diff_ids}}
    skopeo = Skopeo(served(labels) + [(0, json.dumps(config), "")])
    result = run(monkeypatch, {"image": IMAGE}, skopeo)
    assert result["ostree_commit"] == labels["ostree.commit"]
    assert result["version"] == labels["version"]
    assert len(result["ostree_commit"]) == 64
    assert skopeo.calls == calls() + [[SKOPEO, "inspect", "--config", "--", "docker://" + PINNED]]
    assert result["diff_ids"] == diff_ids


def test_no_final_diffid_label_reads_no_configuration(monkeypatch):
    skopeo = Skopeo(served())
    result = run(monkeypatch, {"image": IMAGE}, skopeo)
    assert skopeo.calls == calls()
    assert result["diff_ids"] is None


def blob_writer(cache, blobs):
    """What skopeo copy does to an OCI layout: blobs, then index.json with the tag."""
    def write(destination):
        dummy, path, tag = destination.split(":")
        assert path == str(cache)
        for blob in blobs:
            algo, hexd = blob.split(":")
            (cache / "blobs" / algo).mkdir(parents=True, exist_ok=True)
            (cache / "blobs" / algo / hexd).write_text("x", encoding="utf-8")
        (cache / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [
            {"digest": DIGEST, "annotations": {"org.opencontainers.image.ref.name": tag}}]}), encoding="utf-8")
    return write


def test_present_check_apply_check_apply(monkeypatch, tmp_path):
    cache = tmp_path / "cache"
    args = {"image": IMAGE, "state": "present", "cache_dir": str(cache)}
    tag = os_image_pull.layout_tag(REGISTRY + "/fleetos/lab-os", DIGEST)
    pinned = REGISTRY + "/fleetos/lab-os@" + DIGEST

    skopeo = Skopeo(served())
    result = run(monkeypatch, args, skopeo, check_mode=True, diff=True)
    assert (result["changed"], result["fetched_blobs"]) == (True, sorted([DIGEST, LAYER]))
    assert result["diff"] == {"before": {"image": pinned, "cached": False}, "after": {"image": pinned, "cached": True}}
    assert skopeo.calls == calls()
    assert not cache.exists()

    skopeo = Skopeo(served() + [(0, "", "")], blob_writer(cache, [DIGEST, LAYER, CONFIG]))
    result = run(monkeypatch, args, skopeo)
    assert skopeo.calls[2] == [SKOPEO, "copy", "--quiet", "--remove-signatures", "--", "docker://" + pinned,
                               "oci:%s:%s" % (cache, tag)]
    assert (result["changed"], result["cache_dir"]) == (True, str(cache))
    assert result["fetched_blobs"] == sorted([DIGEST, LAYER, CONFIG])

    for check_mode in (True, False):
        skopeo = Skopeo(served())
        result = run(monkeypatch, args, skopeo, check_mode=check_mode, diff=True)
        assert (result["changed"], result["fetched_blobs"]) == (False, [])
        assert result["diff"]["before"]["cached"] is True
        assert skopeo.calls == calls()


def test_present_copy_of_known_blobs_is_not_a_change(monkeypatch, tmp_path):
    """Blobs already in the layout (another tag) but this image not indexed: copy, no change."""
    cache = tmp_path / "cache"
    blob_writer(cache, [DIGEST, LAYER, CONFIG])("oci:%s:other" % cache)
    (cache / "index.json").write_text('{"schemaVersion": 2, "manifests": []}', encoding="utf-8")
    skopeo = Skopeo(served() + [(0, "", "")], blob_writer(cache, [DIGEST, LAYER, CONFIG]))
    result = run(monkeypatch, {"image": IMAGE, "state": "present", "cache_dir": str(cache)}, skopeo)
    assert skopeo.calls[:2] == calls() and skopeo.calls[2][1] == "copy"
    assert (result["changed"], result["fetched_blobs"]) == (False, [])


@pytest.mark.parametrize(("ostree_cache_exists", "expected"), [(True, "ostree"), (False, "default")])
def test_cache_dir_default(monkeypatch, tmp_path, ostree_cache_exists, expected):
    paths = {"ostree": tmp_path / "sysroot-cache", "default": tmp_path / "var-cache"}
    if ostree_cache_exists:
        paths["ostree"].mkdir()
    monkeypatch.setattr(os_image_pull, "OSTREE_CACHE", str(paths["ostree"]))
    monkeypatch.setattr(os_image_pull, "DEFAULT_CACHE", str(paths["default"]))
    result = run(monkeypatch, {"image": IMAGE, "state": "present"}, Skopeo(served()),
                 check_mode=True)
    assert result["cache_dir"] == str(paths[expected])


def test_present_with_credentials_passes_the_authfile_to_copy(monkeypatch, tmp_path, private_tmp):
    cache = tmp_path / "cache"
    skopeo = Skopeo(served() + [(0, "", "")], blob_writer(cache, [DIGEST, LAYER]))
    run(monkeypatch, {"image": IMAGE, "state": "present", "cache_dir": str(cache), "username": "fleet",
                      "password": PASSWORD}, skopeo)
    (path1, dummy, dummy2), (path2, dummy3, dummy4), (path3, mode, document) = skopeo.auth_files
    assert path1 == path2 == path3 and mode == 0o600
    assert skopeo.calls[2][:6] == [SKOPEO, "copy", "--quiet", "--remove-signatures", "--src-authfile", path1]
    assert auth_of(document) == (REGISTRY, "fleet:" + PASSWORD)
    assert not any(PASSWORD in part for argv in skopeo.calls for part in argv)
    assert list(private_tmp.iterdir()) == []


@pytest.mark.parametrize(("args", "fragment"), [
    ({"auth_file": "/a", "username": "u", "password": "p"}, "mutually exclusive"),
    ({"username": "u"}, "parameters are required together"),
])
def test_spec_constraints(monkeypatch, args, fragment):
    skopeo = Skopeo([])
    result = run(monkeypatch, dict({"image": IMAGE}, **args), skopeo)
    assert fragment in result["msg"]
    assert skopeo.calls == []


# ---------------------------------------------------------------- state=resolved, indexes, architecture

@pytest.mark.parametrize("check_mode", [False, True])
def test_resolved_reads_only_the_manifest(monkeypatch, check_mode):
    skopeo = Skopeo([(0, MANIFEST, b"")])
    result = run(monkeypatch, {"image": IMAGE, "state": "resolved", "auth_file": None}, skopeo, check_mode=check_mode)
    assert skopeo.calls == [raw_argv()]
    assert result == {"changed": False, "image": PINNED, "digest": DIGEST, "index": False, "manifests": {},
                      "platform_digest": DIGEST}


@pytest.mark.parametrize(("machine", "platform"), [("x86_64", AMD), ("aarch64", ARM)])
def test_resolved_index_for_the_host_architecture(monkeypatch, machine, platform):
    monkeypatch.setattr(os, "uname", type("Uname", (), {"machine": machine}))
    skopeo = Skopeo([(0, INDEX, b"")])
    result = run(monkeypatch, {"image": IMAGE, "state": "resolved"}, skopeo)
    assert skopeo.calls == [raw_argv()]
    assert result["image"] == NAME + "@" + INDEX_DIGEST
    assert result["digest"] == INDEX_DIGEST
    assert (result["index"], result["platform_digest"]) == (True, platform)
    assert result["manifests"] == {"amd64": AMD, "arm64/v8": ARM}


def test_resolved_index_without_the_architecture_fails(monkeypatch):
    result = run(monkeypatch, {"image": IMAGE, "state": "resolved", "architecture": "s390x"},
                 Skopeo([(0, INDEX, b"")]))
    assert result["msg"] == ("Failed to resolve image '%s': its index has no linux entry for architecture s390x "
                             "(entries: amd64, arm64/v8)." % IMAGE)


@pytest.mark.parametrize("expected", [INDEX_DIGEST, ARM])
def test_expected_digest_matches_the_index_or_the_platform(monkeypatch, expected):
    skopeo = Skopeo([(0, INDEX, b"")])
    result = run(monkeypatch, {"image": IMAGE, "state": "resolved", "architecture": "arm64",
                               "expected_digest": expected}, skopeo)
    assert "failed" not in result
    assert (result["digest"], result["platform_digest"]) == (INDEX_DIGEST, ARM)


def test_expected_digest_of_another_platform_fails_naming_both(monkeypatch):
    result = run(monkeypatch, {"image": IMAGE, "state": "resolved", "architecture": "arm64", "expected_digest": AMD},
                 Skopeo([(0, INDEX, b"")]))
    assert result["msg"] == ("Failed to verify image '%s': the registry serves digest %s (for arm64: %s), not the "
                             "expected digest %s." % (IMAGE, INDEX_DIGEST, ARM, AMD))


def test_inspected_index_reads_the_platform_manifest(monkeypatch):
    skopeo = Skopeo([(0, INDEX, b""), (0, inspect_output(digest=ARM), "")])
    result = run(monkeypatch, {"image": IMAGE, "architecture": "arm64"}, skopeo)
    assert skopeo.calls == [raw_argv(), inspect_argv(image=NAME + "@" + ARM)]
    assert (result["image"], result["digest"], result["platform_digest"]) == (NAME + "@" + INDEX_DIGEST,
                                                                              INDEX_DIGEST, ARM)
    assert result["ostree_commit"] == COMMIT


def test_inspection_of_another_digest_fails(monkeypatch):
    skopeo = Skopeo([(0, MANIFEST, b""), (0, inspect_output(digest=OTHER), "")])
    result = run(monkeypatch, {"image": IMAGE}, skopeo)
    assert result["msg"] == ("Failed to inspect image '%s': skopeo reported digest %s, not the resolved digest %s."
                             % (PINNED, OTHER, DIGEST))


def test_present_index_fetches_the_platform_image(monkeypatch, tmp_path):
    cache = tmp_path / "cache"
    skopeo = Skopeo([(0, INDEX, b""), (0, inspect_output(digest=AMD), "")])
    result = run(monkeypatch, {"image": IMAGE, "state": "present", "architecture": "amd64", "cache_dir": str(cache)},
                 skopeo, check_mode=True, diff=True)
    assert result["fetched_blobs"] == sorted([AMD, LAYER])
    assert result["diff"]["after"] == {"image": NAME + "@" + AMD, "cached": True}
    assert skopeo.calls == [raw_argv(), inspect_argv(image=NAME + "@" + AMD)]


def test_transient_failure_is_retried(monkeypatch):
    refused = 'level=fatal msg="dial tcp 198.51.100.1:5000: connect: connection refused"'
    skopeo = Skopeo([(1, b"", refused)] + served())
    sleeps = []
    monkeypatch.setattr("time.sleep", sleeps.append)
    result = run(monkeypatch, {"image": IMAGE, "retries": 2, "retry_delay": 9}, skopeo)
    assert skopeo.calls == [raw_argv()] + calls()
    assert sleeps == [9]
    assert result["digest"] == DIGEST
