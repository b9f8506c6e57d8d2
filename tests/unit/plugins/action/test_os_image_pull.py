# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""os_image_pull: the action plugin with arguments on a faked connection, the exact argv skopeo gets on
the host, the credentials on stdin into a private file that is removed on every path, the cache; the
host-side scripts (the auth file, the blob listing, test, cat, mkdir, rm) run for real on the test's files."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shlex
import stat
import subprocess
from pathlib import Path
from unittest.mock import MagicMock

import pytest
from ansible.plugins.action import ActionBase

from ansible_collections.fleetos.layering.tests.unit.plugins.action.utils import fake_host, new_action
from ansible_collections.fleetos.layering.plugins.action import os_image_pull
from ansible_collections.fleetos.layering.plugins.module_utils.images import _auth
from ansible_collections.fleetos.layering.plugins.plugin_utils.host import _pull

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
# Found by the host's shell when it runs.
SKOPEO = "skopeo"
ENV = {"env": {"LC_ALL": "C"}, "data": None}
LABELS = {"ostree.bootable": "true", "ostree.commit": COMMIT, "version": "1.0",
          "org.opencontainers.image.version": "1.0"}
# The host-side scripts of the step that run for real here, on the test's files.
REAL_SCRIPTS = (_auth.PRIVATE_AUTH_SCRIPT, _pull.BLOBS_SCRIPT)


def fake_pull_host(monkeypatch, tmp_path):
    """fake_host (tests/unit/plugins/action/utils.py), with the step's own host-side scripts, ``mkdir`` and
    ``rm`` run for real under ``tmp_path`` (their argv and stdin in ``state["host"]``), the private auth
    files made under ``state["run"]`` instead of /run, rpm-ostree's auth files and the caches there too;
    ``state["auth_files"]`` records (path, mode, document) of each ``--authfile`` skopeo got, as it ran."""
    state = fake_host(monkeypatch)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    monkeypatch.setattr(_auth, "PRIVATE_DIRS", (str(run_dir),))
    monkeypatch.setattr(_pull, "OSTREE_AUTH_FILES", (str(tmp_path / "run-ostree-auth.json"),
                                                     str(tmp_path / "etc-ostree-auth.json")))
    monkeypatch.setattr(_pull, "OSTREE_CACHE", str(tmp_path / "sysroot-cache"))
    monkeypatch.setattr(_pull, "DEFAULT_CACHE", str(tmp_path / "var-cache"))
    monkeypatch.setattr("time.sleep", lambda seconds: state.setdefault("sleeps", []).append(seconds))
    state.update(run=run_dir, host=[], auth_files=[], copy_writes=None)
    execute = ActionBase._low_level_execute_command

    def answer(self, cmd, *args, **kwargs):
        words = shlex.split(cmd)
        while words and "=" in words[0] and words[0].split("=", 1)[0].isidentifier():
            words.pop(0)
        if words[:2] == ["sh", "-c"] and words[2] in REAL_SCRIPTS or words[:1] in (["mkdir"], ["rm"]):
            if words[0] in ("mkdir", "rm"):
                assert words[-1].startswith(str(tmp_path) + "/"), words
            state["lines"].append(cmd)
            state["host"].append((words, kwargs.get("in_data")))
            proc = subprocess.run(words, input=kwargs.get("in_data"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  check=False)
            return {"rc": proc.returncode, "stdout": proc.stdout.decode("utf-8", "surrogateescape"),
                    "stderr": proc.stderr.decode("utf-8", "replace")}
        return execute(self, cmd, *args, **kwargs)

    def skopeo_ran(argv):
        for flag in ("--authfile", "--src-authfile"):
            if flag in argv:
                path = argv[argv.index(flag) + 1]
                state["auth_files"].append((path, stat.S_IMODE(os.stat(path).st_mode),
                                            json.loads(Path(path).read_text(encoding="utf-8"))))
        if argv[1] == "copy" and state["copy_writes"] is not None:
            state["copy_writes"](argv[-1])

    monkeypatch.setattr(ActionBase, "_low_level_execute_command", answer)
    state["hooks"].update(inspect=skopeo_ran, copy=skopeo_ran)
    return state


@pytest.fixture
def fake(monkeypatch, tmp_path):
    return fake_pull_host(monkeypatch, tmp_path)


def run(args, check_mode=False, diff=False, failed=False, transport="ssh"):
    """The action's result for a task with ``args`` over a connection of ``transport``; it must be failed or not,
    as ``failed`` says (None: either)."""
    connection = MagicMock()
    connection.transport = transport
    action = new_action(os_image_pull, dict(args), check_mode=check_mode, connection=connection)
    action._task.diff = diff
    result = action.run(task_vars={})
    assert failed is None or bool(result.get("failed")) is failed, result
    return result


def inspect_output(labels=None, digest=DIGEST, layers=(LAYER,)):
    return json.dumps({"Name": NAME, "Digest": digest, "Labels": LABELS if labels is None else labels,
                       "Architecture": "amd64", "Os": "linux", "Layers": list(layers)})


def inspect_argv(*options, image=PINNED):
    return [SKOPEO, "inspect", "--no-tags"] + list(options) + ["--", "docker://" + image]


def raw_argv(*options, image=IMAGE):
    return [SKOPEO, "inspect", "--raw"] + list(options) + ["--", "docker://" + image]


def config_argv(*options, image=PINNED):
    return [SKOPEO, "inspect", "--config"] + list(options) + ["--", "docker://" + image]


def calls(*options):
    """What state=inspected runs: resolve the reference, then inspect the pinned manifest."""
    return [raw_argv(*options), inspect_argv(*options)]


def served(labels=None):
    """skopeo's answers to calls(): the raw manifest, then the inspection."""
    return [(0, MANIFEST, b""), (0, inspect_output(labels), "")]


def skopeo_calls(fake):
    return [call[0] for call in fake["calls"]]


def auth_of(document):
    ((key, entry),) = document["auths"].items()
    return key, base64.b64decode(entry["auth"]).decode("utf-8")


def private_runs(fake):
    """(argv, stdin) of each private auth file written on the host."""
    return [(argv, data) for argv, data in fake["host"] if argv[:3] == ["sh", "-c", _auth.PRIVATE_AUTH_SCRIPT]]


def removals(fake):
    return [argv for argv, _data in fake["host"] if argv[0] == "rm"]


def assert_private_and_removed(fake, path, mode, document):
    """The auth file skopeo read was 0600 in a private directory under the run directory, held only
    ``document``, went to the host on stdin, and its directory was removed afterwards."""
    directory = os.path.dirname(path)
    assert os.path.dirname(directory) == str(fake["run"])
    assert os.path.basename(directory).startswith("fleetos-auth-") and os.path.basename(path) == "auth.json"
    assert mode == 0o600
    ((argv, data),) = private_runs(fake)
    assert argv == ["sh", "-c", _auth.PRIVATE_AUTH_SCRIPT, "sh", "fleetos-auth-", "auth.json", str(fake["run"])]
    assert json.loads(data) == document
    assert removals(fake) == [["rm", "-rf", "--", directory]]
    assert list(fake["run"].iterdir()) == []


# ---------------------------------------------------------------- credentials

def test_inspected_with_username_password(fake):
    fake["results"] = served()
    result = run({"image": IMAGE, "username": "fleet", "password": PASSWORD})
    assert result["changed"] is False
    assert (result["digest"], result["image"]) == (DIGEST, PINNED)
    assert (result["index"], result["manifests"], result["platform_digest"]) == (False, {}, DIGEST)
    assert (result["ostree_commit"], result["version"], result["architecture"]) == (COMMIT, "1.0", "amd64")
    (path, mode, document), (path2, _mode, _document) = fake["auth_files"]
    assert path2 == path
    assert skopeo_calls(fake) == calls("--authfile", path)
    assert [call[1] for call in fake["calls"]] == [ENV, ENV]
    assert auth_of(document) == (REGISTRY, "fleet:" + PASSWORD)
    assert_private_and_removed(fake, path, mode, document)
    token = base64.b64encode(("fleet:" + PASSWORD).encode()).decode()
    assert not [line for line in fake["lines"] if PASSWORD in line or token in line]
    assert PASSWORD not in json.dumps(result) and token not in json.dumps(result)


def test_auth_file_on_the_host_keeps_only_the_matching_entry(fake, tmp_path):
    auth_file = tmp_path / "auth.json"
    auth_file.write_text(json.dumps({"auths": {
        REGISTRY: {"auth": base64.b64encode(b"fleet:pw").decode()},
        "quay.io": {"auth": base64.b64encode(b"other:secret").decode()}}}), encoding="utf-8")
    ca = tmp_path / "ca"
    ca.mkdir()
    fake["results"] = served()
    result = run({"image": IMAGE, "auth_file": str(auth_file), "ca_cert_dir": str(ca), "validate_certs": False})
    path, mode, document = fake["auth_files"][0]
    assert skopeo_calls(fake) == calls("--authfile", path, "--cert-dir", str(ca), "--tls-verify=false")
    assert auth_of(document) == (REGISTRY, "fleet:pw")
    assert_private_and_removed(fake, path, mode, document)
    # The auth file was read with cat (the read script of _host), the CA directory tested there.
    assert [str(auth_file)] in fake["files"]
    assert ["test", "-d", str(ca)] in fake["lookups"]
    assert result["digest"] == DIGEST
    # The secrets of every entry, the other registry's included, are masked wherever they would show.
    assert "secret" not in json.dumps(result)


@pytest.mark.parametrize("encode", [False, True])
def test_pull_secret_raw_or_base64(fake, encode):
    text = json.dumps({"auths": {"https://%s/v1/" % REGISTRY: {"username": "fleet", "password": PASSWORD}}})
    secret = base64.b64encode(text.encode("utf-8")).decode("ascii") if encode else text
    fake["results"] = served()
    result = run({"image": IMAGE, "pull_secret": secret})
    path, mode, document = fake["auth_files"][0]
    assert auth_of(document) == (REGISTRY, "fleet:" + PASSWORD)
    assert skopeo_calls(fake) == calls("--authfile", path)
    assert_private_and_removed(fake, path, mode, document)
    assert PASSWORD not in json.dumps(result)


def test_no_credentials_no_authfile(fake):
    fake["results"] = served()
    result = run({"image": "docker://" + IMAGE})
    assert skopeo_calls(fake) == calls()
    assert private_runs(fake) == [] and removals(fake) == []
    assert result["digest"] == DIGEST


@pytest.mark.parametrize("which", [0, 1])
def test_without_credentials_the_auth_file_rpm_ostree_reads_is_used(fake, which):
    auth_file = Path(_pull.OSTREE_AUTH_FILES[which])
    auth_file.write_text(json.dumps({"auths": {
        REGISTRY: {"auth": base64.b64encode(b"fleet:pw").decode()}}}), encoding="utf-8")
    fake["results"] = served()
    run({"image": IMAGE})
    path, mode, document = fake["auth_files"][0]
    assert skopeo_calls(fake) == calls("--authfile", path)
    assert auth_of(document) == (REGISTRY, "fleet:pw")
    assert_private_and_removed(fake, path, mode, document)
    assert [["test", "-e", p] for p in _pull.OSTREE_AUTH_FILES[:which + 1]] == [
        w for w in fake["lookups"] if w[:2] == ["test", "-e"]]


def test_an_ostree_auth_file_without_an_entry_for_the_image_is_not_an_error(fake):
    other = base64.b64encode(b"other:quay-secret").decode()
    Path(_pull.OSTREE_AUTH_FILES[1]).write_text(json.dumps({"auths": {"quay.io": {"auth": other}}}), encoding="utf-8")
    fake["results"] = served()
    result = run({"image": IMAGE})
    assert skopeo_calls(fake) == calls()
    assert private_runs(fake) == []
    assert result["digest"] == DIGEST


def test_unauthorized_fails_and_removes_the_auth_file(fake):
    stderr = 'level=fatal msg="reading manifest 1.0 in x: unauthorized: authentication required"'
    fake["results"] = [(1, "", stderr)]
    seen = []
    fake["hooks"]["inspect"] = lambda argv: seen.append(os.path.exists(argv[argv.index("--authfile") + 1]))
    result = run({"image": IMAGE, "username": "fleet", "password": PASSWORD}, failed=True)
    assert result["msg"] == ("Failed to resolve image '%s': the registry refused the credentials (unauthorized)."
                             % IMAGE)
    assert (result["rc"], result["stderr"]) == (1, stderr)
    path = result["cmd"][result["cmd"].index("--authfile") + 1]
    assert result["cmd"] == raw_argv("--authfile", path)
    assert seen == [True]
    assert removals(fake) == [["rm", "-rf", "--", os.path.dirname(path)]]
    assert list(fake["run"].iterdir()) == []
    assert PASSWORD not in json.dumps(result)


def test_a_secret_a_tool_prints_is_masked_in_the_result(fake):
    """As a module's no_log_values: the password, and the auth token made of it, never show."""
    token = base64.b64encode(("fleet:" + PASSWORD).encode()).decode()
    stderr = 'level=fatal msg="bad credentials %s for fleet:%s"' % (token, PASSWORD)
    fake["results"] = [(1, "", stderr)]
    result = run({"image": IMAGE, "username": "fleet", "password": PASSWORD}, failed=True)
    # user:password is a secret of its own (what the token encodes); ansible-core 2.17 masks the password in it
    # first (fleet:********), later cores the whole of it.
    assert result["stderr"] in ('level=fatal msg="bad credentials ******** for ********"',
                                'level=fatal msg="bad credentials ******** for fleet:********"')
    assert PASSWORD not in json.dumps(result) and token not in json.dumps(result)


def test_a_pull_secret_mapping_is_masked_leaf_by_leaf(fake):
    secret = {"auths": {REGISTRY: {"username": "robot-7", "password": PASSWORD}}}
    fake["results"] = [(1, "", "level=fatal msg=\"robot-7 unauthorized\"")]
    result = run({"image": IMAGE, "pull_secret": secret}, failed=True)
    assert result["stderr"] == "level=fatal msg=\"******** unauthorized\""
    assert result["msg"] == ("Failed to resolve image '%s': the registry refused the credentials (unauthorized)."
                             % IMAGE)


def test_credentials_for_another_registry_fail_before_skopeo(fake):
    secret = {"auths": {"quay.io": {"auth": base64.b64encode(b"robot:quay-secret").decode()}}}
    result = run({"image": IMAGE, "pull_secret": secret}, failed=True)
    assert result["msg"] == ("Failed to find credentials for image '%s': the pull secret has no entry for "
                             "'%s/fleetos/lab-os' or '%s/fleetos' or '%s' (entries: quay.io)."
                             % (IMAGE, REGISTRY, REGISTRY, REGISTRY))
    assert fake["calls"] == [] and fake["host"] == []


@pytest.mark.parametrize(("make", "cause"), [
    (None, "No such file or directory"),
    ("mkdir", "it is not a regular file"),
    ("symlink", "it is not a regular file"),
])
def test_an_auth_file_that_cannot_be_read_fails_naming_it(fake, tmp_path, make, cause):
    path = tmp_path / "auth.json"
    if make == "mkdir":
        path.mkdir()
    elif make == "symlink":
        target = tmp_path / "target.json"
        target.write_text('{"auths": {}}')
        path.symlink_to(target)
    result = run({"image": IMAGE, "auth_file": str(path)}, failed=True)
    assert result["msg"] == "Failed to read the auth file '%s': %s." % (path, cause)
    assert fake["calls"] == [] and fake["host"] == []


def test_no_writable_directory_for_the_auth_file_fails_in_one_sentence(fake, monkeypatch, tmp_path):
    monkeypatch.setattr(_auth, "PRIVATE_DIRS", (str(tmp_path / "missing"),))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "missing-too"))
    monkeypatch.setenv("TMPDIR", str(tmp_path / "plain-file"))
    (tmp_path / "plain-file").write_text("")
    result = run({"image": IMAGE, "username": "fleet", "password": PASSWORD}, failed=True)
    assert result["msg"] == ("Failed to write the registry credentials to a private file on the host: no directory "
                             "to write to: /run, $XDG_RUNTIME_DIR, $TMPDIR and /tmp are not writable.")
    assert fake["calls"] == [] and removals(fake) == []


def test_the_auth_file_goes_to_xdg_runtime_dir_when_run_is_not_usable(fake, monkeypatch, tmp_path):
    runtime = tmp_path / "user-run"
    runtime.mkdir()
    monkeypatch.setattr(_auth, "PRIVATE_DIRS", (str(tmp_path / "missing"),))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    fake["results"] = [(0, MANIFEST, b"")]
    run({"image": IMAGE, "state": "resolved", "username": "fleet", "password": PASSWORD})
    ((path, mode, _document),) = fake["auth_files"]
    assert (os.path.dirname(os.path.dirname(path)), mode) == (str(runtime), 0o600)
    assert list(runtime.iterdir()) == []


# ---------------------------------------------------------------- expected digest, bad input

def test_expected_digest_mismatch_fails_before_any_pull(fake, tmp_path):
    fake["results"] = served()
    result = run({"image": IMAGE, "expected_digest": OTHER, "state": "present", "cache_dir": str(tmp_path / "cache")},
                 failed=True)
    assert result["msg"] == ("Failed to verify image '%s': the registry serves digest %s, not the expected "
                             "digest %s." % (IMAGE, DIGEST, OTHER))
    assert (result["digest"], result["expected_digest"]) == (DIGEST, OTHER)
    assert skopeo_calls(fake) == [raw_argv()]
    assert not (tmp_path / "cache").exists()


def test_pinned_reference_against_other_expected_digest_reads_only_the_manifest(fake):
    fake["results"] = [(0, MANIFEST, b"")]
    result = run({"image": PINNED, "expected_digest": OTHER}, failed=True)
    assert result["msg"] == ("Failed to verify image '%s': the registry serves digest %s, not the expected digest %s."
                             % (PINNED, DIGEST, OTHER))
    assert skopeo_calls(fake) == [raw_argv(image=PINNED)]


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
    ({"executable": "/nonexistent/skopeo"},
     "executable '/nonexistent/skopeo' does not exist or is not an executable file: expected the path of skopeo."),
    ({"auth_file": "/a", "username": "robot", "password": "robot-secret"},
     "parameters are mutually exclusive: auth_file|pull_secret|username"),
    ({"username": "robot"}, "parameters are required together: username, password"),
])
def test_invalid_input_fails_before_anything_runs(fake, args, msg):
    result = run(dict({"image": IMAGE}, **args), failed=True)
    assert result["msg"] == msg
    assert fake["calls"] == [] and fake["host"] == [] and fake["files"] == []


# ---------------------------------------------------------------- labels

@pytest.mark.parametrize(("labels", "commit", "version"), [
    ({"ostree.commit": "a", "com.coreos.ostree-commit": "b", "io.openshift.os-commit": "c"}, "a", None),
    ({"com.coreos.ostree-commit": "b", "io.openshift.os-commit": "c"}, "b", None),
    ({"io.openshift.os-commit": "c", "org.opencontainers.image.version": "9"}, "c", "9"),
    ({"version": "1", "org.opencontainers.image.version": "2"}, None, "1"),
    ({"version": "", "org.opencontainers.image.version": "2"}, None, "2"),
    ({}, None, None),
])
def test_label_fallbacks(fake, labels, commit, version):
    fake["results"] = served(labels)
    result = run({"image": IMAGE})
    assert (result["ostree_commit"], result["version"], result["labels"]) == (commit, version, labels)


def test_labels_from_config_when_inspect_has_none(fake):
    data = json.loads(inspect_output())
    del data["Labels"]
    config = {"config": {"Labels": {"com.coreos.ostree-commit": "abc"}}}
    fake["results"] = [(0, MANIFEST, b""), (0, json.dumps(data), ""), (0, json.dumps(config), "")]
    result = run({"image": IMAGE})
    assert skopeo_calls(fake) == calls() + [config_argv()]
    assert result["ostree_commit"] == "abc"


@pytest.mark.parametrize("name", ["skopeo-inspect-labels__mco-test__okd-fcos-37.json",
                                  "skopeo-inspect-labels__mco-test__rhcos-412.86-el8.6.json"])
def test_real_image_labels(fake, name):
    path = FIXTURES / name
    if not path.is_file():
        pytest.skip("reference fixture %s is absent (../shared not available)" % path)
    labels = json.loads(path.read_text(encoding="utf-8"))
    # Both name ostree.final-diffid: the configuration is read for its diff_ids.
    diff_ids = ["sha256:" + "c" * 64, labels["ostree.final-diffid"]]
    config = {"config": {"Labels": labels}, "rootfs": {"type": "layers", "diff_ids": diff_ids}}
    fake["results"] = served(labels) + [(0, json.dumps(config), "")]
    result = run({"image": IMAGE})
    assert result["ostree_commit"] == labels["ostree.commit"]
    assert result["version"] == labels["version"]
    assert len(result["ostree_commit"]) == 64
    assert skopeo_calls(fake) == calls() + [config_argv()]
    assert result["diff_ids"] == diff_ids


def test_no_final_diffid_label_reads_no_configuration(fake):
    fake["results"] = served()
    result = run({"image": IMAGE})
    assert skopeo_calls(fake) == calls()
    assert result["diff_ids"] is None


# ---------------------------------------------------------------- state=present

def blob_writer(cache, blobs):
    """What skopeo copy does to an OCI layout: blobs, then index.json with the tag."""
    def write(destination):
        _transport, path, tag = destination.split(":")
        assert path == str(cache)
        for blob in blobs:
            algo, hexd = blob.split(":")
            (cache / "blobs" / algo).mkdir(parents=True, exist_ok=True)
            (cache / "blobs" / algo / hexd).write_text("x", encoding="utf-8")
        (cache / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [
            {"digest": DIGEST, "annotations": {"org.opencontainers.image.ref.name": tag}}]}), encoding="utf-8")
    return write


def host_commands(fake):
    """The host-side commands that ran for real, by what they are."""
    names = {_auth.PRIVATE_AUTH_SCRIPT: "auth", _pull.BLOBS_SCRIPT: "blobs"}
    return [names[argv[2]] + " " + argv[4] if argv[0] == "sh" else " ".join(argv) for argv, _data in fake["host"]]


def test_present_check_apply_check_apply(fake, tmp_path):
    cache = tmp_path / "cache"
    args = {"image": IMAGE, "state": "present", "cache_dir": str(cache)}
    tag = _pull.layout_tag(NAME, DIGEST)

    fake["results"] = served()
    result = run(args, check_mode=True, diff=True)
    assert (result["changed"], result["fetched_blobs"]) == (True, sorted([DIGEST, LAYER]))
    assert result["diff"] == {"before": {"image": PINNED, "cached": False}, "after": {"image": PINNED, "cached": True}}
    assert skopeo_calls(fake) == calls()
    assert host_commands(fake) == ["blobs %s" % cache]
    assert not cache.exists()

    fake["calls"][:], fake["host"][:] = [], []
    fake["results"] = served() + [(0, "", "")]
    fake["copy_writes"] = blob_writer(cache, [DIGEST, LAYER, CONFIG])
    result = run(args)
    assert skopeo_calls(fake)[2] == [SKOPEO, "copy", "--quiet", "--remove-signatures", "--", "docker://" + PINNED,
                                     "oci:%s:%s" % (cache, tag)]
    assert host_commands(fake) == ["blobs %s" % cache, "mkdir -p -m 755 -- %s" % cache, "blobs %s" % cache]
    assert (result["changed"], result["cache_dir"]) == (True, str(cache))
    assert result["fetched_blobs"] == sorted([DIGEST, LAYER, CONFIG])
    assert "diff" not in result

    for check_mode in (True, False):
        fake["calls"][:], fake["host"][:] = [], []
        fake["results"] = served()
        result = run(args, check_mode=check_mode, diff=True)
        assert (result["changed"], result["fetched_blobs"]) == (False, [])
        assert result["diff"]["before"]["cached"] is True
        assert skopeo_calls(fake) == calls()
        assert host_commands(fake) == ["blobs %s" % cache]


def test_present_copy_of_known_blobs_is_not_a_change(fake, tmp_path):
    """Blobs already in the layout (another tag) but this image not indexed: copy, no change."""
    cache = tmp_path / "cache"
    blob_writer(cache, [DIGEST, LAYER, CONFIG])("oci:%s:other" % cache)
    (cache / "index.json").write_text('{"schemaVersion": 2, "manifests": []}', encoding="utf-8")
    fake["results"] = served() + [(0, "", "")]
    fake["copy_writes"] = blob_writer(cache, [DIGEST, LAYER, CONFIG])
    result = run({"image": IMAGE, "state": "present", "cache_dir": str(cache)})
    assert skopeo_calls(fake)[:2] == calls() and skopeo_calls(fake)[2][1] == "copy"
    assert (result["changed"], result["fetched_blobs"]) == (False, [])


@pytest.mark.parametrize("index", ["not json", "[1, 2]", '{"manifests": "x"}', None])
def test_a_broken_or_missing_index_is_not_cached(fake, tmp_path, index):
    cache = tmp_path / "cache"
    blob_writer(cache, [DIGEST, LAYER])("oci:%s:x" % cache)
    if index is None:
        (cache / "index.json").unlink()
    else:
        (cache / "index.json").write_text(index, encoding="utf-8")
    fake["results"] = served()
    result = run({"image": IMAGE, "state": "present", "cache_dir": str(cache)}, check_mode=True)
    # Every blob is there, but the image is not listed: skopeo would copy (no blob fetched).
    assert (result["changed"], result["fetched_blobs"]) == (False, [])
    assert [argv for argv in fake["files"] if argv[0].endswith("index.json")] == [[str(cache / "index.json")]]


@pytest.mark.parametrize(("ostree_cache_exists", "expected"), [(True, "OSTREE_CACHE"), (False, "DEFAULT_CACHE")])
def test_cache_dir_default(fake, ostree_cache_exists, expected):
    if ostree_cache_exists:
        os.mkdir(_pull.OSTREE_CACHE)
    fake["results"] = served()
    result = run({"image": IMAGE, "state": "present"}, check_mode=True)
    assert result["cache_dir"] == getattr(_pull, expected)
    assert ["test", "-d", _pull.OSTREE_CACHE] in fake["lookups"]


def test_present_with_credentials_passes_the_authfile_to_copy(fake, tmp_path):
    cache = tmp_path / "cache"
    fake["results"] = served() + [(0, "", "")]
    fake["copy_writes"] = blob_writer(cache, [DIGEST, LAYER])
    run({"image": IMAGE, "state": "present", "cache_dir": str(cache), "username": "fleet", "password": PASSWORD})
    (path1, _m1, _d1), (path2, _m2, _d2), (path3, mode, document) = fake["auth_files"]
    assert path1 == path2 == path3
    assert skopeo_calls(fake)[2][:6] == [SKOPEO, "copy", "--quiet", "--remove-signatures", "--src-authfile", path1]
    assert auth_of(document) == (REGISTRY, "fleet:" + PASSWORD)
    assert_private_and_removed(fake, path1, mode, document)
    assert not [line for line in fake["lines"] if PASSWORD in line]


def test_a_cache_directory_that_cannot_be_made_fails_in_one_sentence(fake, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    cache = blocker / "cache"
    fake["results"] = served()
    result = run({"image": IMAGE, "state": "present", "cache_dir": str(cache)}, failed=True)
    assert result["msg"] == ("Failed to pull image '%s': cannot create the cache directory '%s': Not a directory."
                             % (PINNED, cache))
    assert result["cmd"] == ["mkdir", "-p", "-m", "755", "--", str(cache)]
    assert [call[0][1] for call in fake["calls"]] == ["inspect", "inspect"]


# ---------------------------------------------------------------- state=resolved, indexes, architecture

@pytest.mark.parametrize("check_mode", [False, True])
def test_resolved_reads_only_the_manifest(fake, check_mode):
    fake["results"] = [(0, MANIFEST, b"")]
    result = run({"image": IMAGE, "state": "resolved", "auth_file": None}, check_mode=check_mode)
    assert skopeo_calls(fake) == [raw_argv()]
    assert {key: result[key] for key in ("changed", "image", "digest", "index", "manifests", "platform_digest")} == {
        "changed": False, "image": PINNED, "digest": DIGEST, "index": False, "manifests": {}, "platform_digest": DIGEST}
    assert "labels" not in result and "fetched_blobs" not in result


@pytest.mark.parametrize(("machine", "platform"), [("x86_64", AMD), ("aarch64", ARM)])
def test_resolved_index_for_the_host_architecture(fake, machine, platform):
    fake["machine"] = machine
    fake["results"] = [(0, INDEX, b"")]
    result = run({"image": IMAGE, "state": "resolved"})
    assert skopeo_calls(fake) == [raw_argv()]
    assert ["uname", "-m"] in fake["lookups"]
    assert result["image"] == NAME + "@" + INDEX_DIGEST
    assert result["digest"] == INDEX_DIGEST
    assert (result["index"], result["platform_digest"]) == (True, platform)
    assert result["manifests"] == {"amd64": AMD, "arm64/v8": ARM}


def test_a_given_architecture_needs_no_uname(fake):
    fake["results"] = [(0, INDEX, b"")]
    result = run({"image": IMAGE, "state": "resolved", "architecture": "arm64"})
    assert ["uname", "-m"] not in fake["lookups"]
    assert result["platform_digest"] == ARM


def test_resolved_index_without_the_architecture_fails(fake):
    fake["results"] = [(0, INDEX, b"")]
    result = run({"image": IMAGE, "state": "resolved", "architecture": "s390x"}, failed=True)
    assert result["msg"] == ("Failed to resolve image '%s': its index has no linux entry for architecture s390x "
                             "(entries: amd64, arm64/v8)." % IMAGE)


@pytest.mark.parametrize("expected", [INDEX_DIGEST, ARM])
def test_expected_digest_matches_the_index_or_the_platform(fake, expected):
    fake["results"] = [(0, INDEX, b"")]
    result = run({"image": IMAGE, "state": "resolved", "architecture": "arm64", "expected_digest": expected})
    assert (result["digest"], result["platform_digest"]) == (INDEX_DIGEST, ARM)


def test_expected_digest_of_another_platform_fails_naming_both(fake):
    fake["results"] = [(0, INDEX, b"")]
    result = run({"image": IMAGE, "state": "resolved", "architecture": "arm64", "expected_digest": AMD}, failed=True)
    assert result["msg"] == ("Failed to verify image '%s': the registry serves digest %s (for arm64: %s), not the "
                             "expected digest %s." % (IMAGE, INDEX_DIGEST, ARM, AMD))


def test_inspected_index_reads_the_platform_manifest(fake):
    fake["results"] = [(0, INDEX, b""), (0, inspect_output(digest=ARM), "")]
    result = run({"image": IMAGE, "architecture": "arm64"})
    assert skopeo_calls(fake) == [raw_argv(), inspect_argv(image=NAME + "@" + ARM)]
    assert (result["image"], result["digest"], result["platform_digest"]) == (NAME + "@" + INDEX_DIGEST,
                                                                              INDEX_DIGEST, ARM)
    assert result["ostree_commit"] == COMMIT


def test_inspection_of_another_digest_fails(fake):
    fake["results"] = [(0, MANIFEST, b""), (0, inspect_output(digest=OTHER), "")]
    result = run({"image": IMAGE}, failed=True)
    assert result["msg"] == ("Failed to inspect image '%s': the inspection reported digest %s, not the resolved digest "
                             "%s."
                             % (PINNED, OTHER, DIGEST))


def test_present_index_fetches_the_platform_image(fake, tmp_path):
    cache = tmp_path / "cache"
    fake["results"] = [(0, INDEX, b""), (0, inspect_output(digest=AMD), "")]
    result = run({"image": IMAGE, "state": "present", "architecture": "amd64", "cache_dir": str(cache)},
                 check_mode=True, diff=True)
    assert result["fetched_blobs"] == sorted([AMD, LAYER])
    assert result["diff"]["after"] == {"image": NAME + "@" + AMD, "cached": True}
    assert skopeo_calls(fake) == [raw_argv(), inspect_argv(image=NAME + "@" + AMD)]


def test_transient_failure_is_retried(fake):
    refused = 'level=fatal msg="dial tcp 198.51.100.1:5000: connect: connection refused"'
    fake["results"] = [(1, b"", refused)] + served()
    result = run({"image": IMAGE, "retries": 2, "retry_delay": 9})
    assert skopeo_calls(fake) == [raw_argv()] + calls()
    assert fake["sleeps"] == [9]
    assert result["digest"] == DIGEST


def test_a_missing_skopeo_is_named(fake):
    fake["results"] = [(127, "", "sh: 1: skopeo: not found\n")]
    result = run({"image": IMAGE, "state": "resolved"}, failed=True)
    assert result["msg"] == ("Failed to resolve image '%s': the host has no 'skopeo' command in its PATH (exit "
                             "status 127): install it or give the path of the executable." % IMAGE)


def test_the_host_needs_no_interpreter(fake, tmp_path):
    cache = tmp_path / "cache"
    fake["results"] = served() + [(0, "", "")]
    fake["copy_writes"] = blob_writer(cache, [DIGEST, LAYER])
    run({"image": IMAGE, "state": "present", "cache_dir": str(cache), "username": "fleet", "password": PASSWORD})
    assert len(fake["lines"]) > 5
    assert not [line for line in fake["lines"] if "python" in line.lower()]


def test_the_argument_spec_is_the_documented_one():
    """The action checks its arguments against _pull.ARGUMENT_SPEC; the module file documents them (with the
    registry and retries doc fragments): each option with the same type, default and choices."""
    import yaml

    from ansible_collections.fleetos.layering.plugins.doc_fragments import registry, retries
    from ansible_collections.fleetos.layering.plugins.modules import os_image_pull as documentation

    documented = dict(yaml.safe_load(documentation.DOCUMENTATION)["options"])
    for fragment in (registry, retries):
        documented.update(yaml.safe_load(fragment.ModuleDocFragment.DOCUMENTATION)["options"])
    assert sorted(documented) == sorted(_pull.ARGUMENT_SPEC)
    for name, option in _pull.ARGUMENT_SPEC.items():
        doc = documented[name]
        assert (doc["type"], doc.get("default"), doc.get("choices"), bool(doc.get("required"))) == (
            option["type"], option.get("default"), option.get("choices"), bool(option.get("required"))), name
