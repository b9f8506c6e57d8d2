# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Credentials -> a temporary auth file; registry matching as containers-auth.json(5)."""

from __future__ import annotations

import base64
import json
import os
import stat
from pathlib import Path

import pytest

from ansible_collections.fleetos.layering.tests.unit.plugins.module_utils.utils import LocalHost
from ansible_collections.fleetos.layering.plugins.module_utils.images import _auth
from ansible_collections.fleetos.layering.plugins.module_utils._errors import CommandError, InvalidInputError
from ansible_collections.fleetos.layering.plugins.module_utils.host._host import READ_SCRIPT

SHARED = Path(os.environ.get("FLEETOS_SHARED") or Path(__file__).resolve().parents[6] / "shared")
FIXTURES = SHARED / "reference" / "fixtures"
PASSWORD = "p$a ss'wörd"


def b64(text):
    return base64.b64encode(text.encode("utf-8")).decode("ascii")


def fixture_json(name):
    path = FIXTURES / name
    if not path.is_file():
        pytest.skip("reference fixture %s is absent (../shared not available)" % path)
    return json.loads(path.read_text(encoding="utf-8"))


def decoded(document):
    """(key, user:password) of the one entry of an auth document."""
    ((key, entry),) = document["auths"].items()
    return key, base64.b64decode(entry["auth"]).decode("utf-8")


@pytest.mark.parametrize(("key", "expected"), [
    ("198.51.100.1:5000", "198.51.100.1:5000"),
    ("quay.io", "quay.io"),
    ("quay.io/openshift-release-dev", "quay.io/openshift-release-dev"),
    ("https://index.docker.io/v1/", "docker.io"),
    ("index.docker.io", "docker.io"),
    ("http://foo.example.com", "foo.example.com"),
    ("https://normalize.example.org/v1", "normalize.example.org"),
    ("https://reg.example.com:5000/v2/", "reg.example.com:5000"),
    ("reg.example.com/", "reg.example.com"),
])
def test_normalize_key(key, expected):
    assert _auth.normalize_key(key) == expected


@pytest.mark.parametrize(("image", "scopes"), [
    ("198.51.100.1:5000/fleetos/lab-os:1.0",
     ["198.51.100.1:5000/fleetos/lab-os", "198.51.100.1:5000/fleetos", "198.51.100.1:5000"]),
    ("docker://quay.io/a/b/c@sha256:" + "1" * 64,
     ["quay.io/a/b/c", "quay.io/a/b", "quay.io/a", "quay.io"]),
    ("fedora:39", ["docker.io/library/fedora", "docker.io/library", "docker.io"]),
    ("index.docker.io/team/app", ["docker.io/team/app", "docker.io/team", "docker.io"]),
    ("ostree-unverified-registry:localhost:5000/os", ["localhost:5000/os", "localhost:5000"]),
])
def test_image_scopes_most_specific_first(image, scopes):
    assert _auth.image_scopes(image) == scopes


# image -> the user:password of the entry of the real containers/image fixture it uses.
FULL_HOST_FORMS = [
    ("example.org/ns/repo:1", "example:org"),
    ("docker.io/library/busybox", "docker:io"),
    ("busybox", "docker:io"),
    ("index.docker.io/team/app", "docker:io"),
    ("localhost/os", "local:host"),
    ("localhost:5000/os", "local:host-5000"),
    ("10.10.30.45/os", "10.10:30.45"),
    ("10.10.30.45:5000/os", "10.10:30.45-5000"),
    ("normalize.example.org/os", "normalize:example"),
    ("localhost:5001/os", None),
    ("other.example.org/os", None),
]


@pytest.mark.parametrize(("image", "credential"), FULL_HOST_FORMS)
def test_matching_real_auth_json(image, credential, tmp_path):
    document = fixture_json("auth-json__containers-image__full-host-forms.json")
    path = tmp_path / "auth.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    found = _auth.from_auth_file(str(path)).for_image(image)
    if credential is None:
        assert found is None
    else:
        assert decoded(found)[1] == credential


NAMESPACED = {"auths": {
    "reg.example.com": {"auth": b64("registry:r")},
    "reg.example.com/team": {"auth": b64("team:t")},
    "reg.example.com/team/app": {"auth": b64("app:a")},
    "reg.example.com:5000": {"auth": b64("port:p")},
}}


@pytest.mark.parametrize(("image", "key", "credential"), [
    ("reg.example.com/team/app:1", "reg.example.com/team/app", "app:a"),
    ("reg.example.com/team/app/sub", "reg.example.com/team/app", "app:a"),
    ("reg.example.com/team/other", "reg.example.com/team", "team:t"),
    ("reg.example.com/solo", "reg.example.com", "registry:r"),
    ("reg.example.com:5000/team/app", "reg.example.com:5000", "port:p"),
    ("reg.example.com:5001/team/app", None, None),
])
def test_matching_namespaces(image, key, credential):
    found = _auth.from_pull_secret(NAMESPACED).for_image(image)
    if key is None:
        assert found is None
    else:
        assert decoded(found) == (key, credential)


def test_exact_key_wins_over_legacy_url_key():
    secret = {"auths": {"docker.io": {"auth": b64("new:n")},
                        "https://index.docker.io/v1/": {"auth": b64("old:o")}}}
    assert decoded(_auth.from_pull_secret(secret).for_image("fedora")) == ("docker.io", "new:n")
    reversed_order = {"auths": dict(reversed(list(secret["auths"].items())))}
    assert decoded(_auth.from_pull_secret(reversed_order).for_image("fedora")) == ("docker.io", "new:n")


def test_real_dockerconfigjson_username_password_form():
    document = fixture_json("dockerconfigjson__kubernetes-testdata__username-password-form.json")
    auths = _auth.from_pull_secret(json.dumps(document))
    assert sorted(auths.keys()) == ["bar.example.com", "foo.example.com"]
    assert decoded(auths.for_image("foo.example.com/os:1")) == ("foo.example.com", "foo:bar")
    assert decoded(auths.for_image("bar.example.com/os:1")) == ("bar.example.com", "bar:baz")
    assert {"bar", "baz", b64("foo:bar"), "foo:bar"} <= auths.secrets()


SECRET = {"auths": {"198.51.100.1:5000": {"auth": b64("fleet:" + PASSWORD)}}}


@pytest.mark.parametrize("form", ["dict", "json", "json-spaced", "base64", "base64-wrapped"])
def test_pull_secret_forms(form):
    text = json.dumps(SECRET)
    value = {
        "dict": SECRET,
        "json": text,
        "json-spaced": "\n  " + json.dumps(SECRET, indent=2) + "\n",
        "base64": b64(text),
        "base64-wrapped": "\n".join(b64(text)[i:i + 20] for i in range(0, len(b64(text)), 20)),
    }[form]
    found = _auth.from_pull_secret(value).for_image("198.51.100.1:5000/fleetos/lab-os:1.0")
    assert decoded(found) == ("198.51.100.1:5000", "fleet:" + PASSWORD)


@pytest.mark.parametrize(("secret", "fragment"), [
    ("", "empty"),
    ("not json " + PASSWORD, "neither JSON nor base64"),
    ('["a"]', "not a JSON object"),
    ('{"auths": ["x"]}', "'auths' that is not a mapping"),
    ({"auths": {"r.example.com": {"auth": "!!" + PASSWORD}}}, "invalid auth value"),
    ({"auths": {"r.example.com": {"auth": b64("nocolon" + PASSWORD)}}}, "invalid auth value"),
    ({"auths": {"r.example.com": {"email": "x@example.com"}}}, "has no credentials"),
    ({"auths": {"r.example.com": PASSWORD}}, "is not a mapping"),
])
def test_bad_pull_secret_never_echoes_the_secret(secret, fragment):
    with pytest.raises(InvalidInputError) as raised:
        _auth.from_pull_secret(secret)
    assert fragment in raised.value.msg
    assert PASSWORD not in raised.value.msg
    assert b64("nocolon" + PASSWORD) not in raised.value.msg


def test_username_password_entry_for_the_image_registry():
    auths = _auth.from_username("198.51.100.1:5000/fleetos/lab-os:1.0", "fleet", PASSWORD)
    found = auths.for_image("198.51.100.1:5000/fleetos/lab-os@sha256:" + "a" * 64)
    assert decoded(found) == ("198.51.100.1:5000", "fleet:" + PASSWORD)
    assert PASSWORD in auths.secrets()
    assert found["auths"]["198.51.100.1:5000"]["auth"] in auths.secrets()


@pytest.mark.parametrize(("username", "password", "fragment"), [
    ("a:b", "pw", "must not contain ':'"),
    ("user", "", "non-empty password"),
    ("", "pw", "non-empty password"),
])
def test_username_password_invalid(username, password, fragment):
    with pytest.raises(InvalidInputError) as raised:
        _auth.from_username("quay.io/os", username, password)
    assert fragment in raised.value.msg


def test_auth_file_missing_names_the_path(tmp_path):
    missing = tmp_path / "nope.json"
    with pytest.raises(InvalidInputError) as raised:
        _auth.from_auth_file(str(missing))
    assert raised.value.msg == "Failed to read the auth file '%s': No such file or directory" % missing


def test_auth_file_not_json(tmp_path):
    path = tmp_path / "auth.json"
    path.write_text("{" + PASSWORD, encoding="utf-8")
    with pytest.raises(InvalidInputError) as raised:
        _auth.from_auth_file(str(path))
    assert raised.value.msg == "The auth file '%s' is not valid JSON" % path


@pytest.mark.parametrize(("kwargs", "source"), [
    ({}, None),
    ({"pull_secret": SECRET}, "pull secret"),
    ({"username": "u", "password": "p"}, "username and password"),
])
def test_credentials_source(kwargs, source):
    found = _auth.credentials("198.51.100.1:5000/os", **kwargs)
    assert (found.source if found else None) == source


def test_temporary_auth_file_is_private_and_removed(tmp_path):
    document = _auth.from_username("quay.io/os", "u", PASSWORD).for_image("quay.io/os")
    with _auth.temporary_auth_file(document, tmpdir=str(tmp_path)) as path:
        directory = os.path.dirname(path)
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        assert stat.S_IMODE(os.stat(directory).st_mode) == 0o700
        assert os.path.basename(directory).startswith(_auth.TEMP_PREFIX)
        assert json.loads(Path(path).read_text(encoding="utf-8")) == document
    assert not os.path.exists(directory)
    assert list(tmp_path.iterdir()) == []


def test_temporary_auth_file_removed_when_the_block_raises(tmp_path):
    seen = []
    with pytest.raises(RuntimeError):
        with _auth.temporary_auth_file({"auths": {}}, tmpdir=str(tmp_path)) as path:
            seen.append(path)
            assert os.path.exists(path)
            raise RuntimeError("skopeo failed")
    assert seen and not os.path.exists(seen[0])
    assert list(tmp_path.iterdir()) == []


def test_no_document_no_file(tmp_path):
    with _auth.temporary_auth_file(None, tmpdir=str(tmp_path)) as path:
        assert path is None
        assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------- on a host (the shell scripts run for real here)

def test_auth_file_read_on_a_host(tmp_path):
    host = LocalHost()
    path = tmp_path / "auth.json"
    path.write_text(json.dumps({"auths": {"quay.io": {"auth": b64("u:" + PASSWORD)}}}), encoding="utf-8")
    found = _auth.credentials("quay.io/os", auth_file=str(path), host=host)
    assert decoded(found.for_image("quay.io/os")) == ("quay.io", "u:" + PASSWORD)
    assert found.source == "auth file '%s'" % path
    assert host.argvs == [["sh", "-c", READ_SCRIPT, "sh", str(path)]]


@pytest.mark.parametrize(("make", "cause"), [
    (None, "No such file or directory"),
    ("dir", "it is not a regular file"),
    ("fifo", "it is not a regular file"),
])
def test_auth_file_on_a_host_that_cannot_be_read(tmp_path, make, cause):
    path = tmp_path / "auth.json"
    if make == "dir":
        path.mkdir()
    elif make == "fifo":
        os.mkfifo(str(path))
    with pytest.raises(InvalidInputError) as raised:
        _auth.from_auth_file(str(path), host=LocalHost())
    assert raised.value.msg == "Failed to read the auth file '%s': %s" % (path, cause)


def test_auth_file_on_a_host_not_json(tmp_path):
    path = tmp_path / "auth.json"
    path.write_text("{" + PASSWORD, encoding="utf-8")
    with pytest.raises(InvalidInputError) as raised:
        _auth.from_auth_file(str(path), host=LocalHost())
    assert raised.value.msg == "The auth file '%s' is not valid JSON" % path
    assert PASSWORD not in raised.value.msg


@pytest.fixture
def private_dirs(monkeypatch, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    monkeypatch.setattr(_auth, "PRIVATE_DIRS", (str(run),))
    return run


def test_host_auth_file_is_private_sent_on_stdin_and_removed(private_dirs):
    host = LocalHost()
    document = _auth.from_username("quay.io/os", "u", PASSWORD).for_image("quay.io/os")
    with _auth.host_auth_file(host, document) as path:
        directory = os.path.dirname(path)
        assert os.path.dirname(directory) == str(private_dirs)
        assert os.path.basename(directory).startswith(_auth.TEMP_PREFIX)
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        assert stat.S_IMODE(os.stat(directory).st_mode) == 0o700
        assert json.loads(Path(path).read_text(encoding="utf-8")) == document
    assert host.argvs == [["sh", "-c", _auth.PRIVATE_AUTH_SCRIPT, "sh", _auth.TEMP_PREFIX, "auth.json",
                           str(private_dirs)], ["rm", "-rf", "--", directory]]
    assert not any(PASSWORD in word or b64("u:" + PASSWORD) in word for argv in host.argvs for word in argv)
    assert list(private_dirs.iterdir()) == []


def test_host_auth_file_removed_when_the_block_raises(private_dirs):
    seen = []
    with pytest.raises(RuntimeError):
        with _auth.host_auth_file(LocalHost(), {"auths": {}}) as path:
            seen.append(os.path.exists(path))
            raise RuntimeError("skopeo failed")
    assert seen == [True]
    assert list(private_dirs.iterdir()) == []


def test_host_auth_file_without_a_document_runs_nothing():
    host = LocalHost()
    with _auth.host_auth_file(host, None) as path:
        assert path is None
    assert host.argvs == []


@pytest.mark.parametrize("fallback", ["XDG_RUNTIME_DIR", "TMPDIR"])
def test_host_auth_file_falls_back_to_the_user_s_own_directories(monkeypatch, tmp_path, fallback):
    monkeypatch.setattr(_auth, "PRIVATE_DIRS", (str(tmp_path / "not-there"),))
    chosen = tmp_path / "chosen"
    chosen.mkdir()
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(chosen) if fallback == "XDG_RUNTIME_DIR" else "")
    monkeypatch.setenv("TMPDIR", str(chosen))
    with _auth.host_auth_file(LocalHost(), {"auths": {}}) as path:
        assert os.path.dirname(os.path.dirname(path)) == str(chosen)
    assert list(chosen.iterdir()) == []


class _Host(LocalHost):
    """A host whose commands answer as ``answers`` says (argv[0] -> (rc, out, err)), else run here."""

    def __init__(self, answers):
        super().__init__()
        self.answers = answers

    def run(self, argv, data=None, binary=False):
        if argv[0] in self.answers:
            self.argvs.append(list(argv))
            return self.answers[argv[0]]
        return super().run(argv, data, binary)


@pytest.mark.parametrize(("answer", "cause"), [
    ((0, "banner\n", ""), "the script printed no private directory"),
    ((0, "/etc\n", ""), "the script printed no private directory"),
    ((1, "", "sh: mktemp: not found\n"), "sh: mktemp: not found"),
])
def test_host_auth_file_refuses_what_it_cannot_clean_up(answer, cause):
    host = _Host({"sh": answer})
    with pytest.raises(CommandError) as raised:
        with _auth.host_auth_file(host, {"auths": {}}):
            pytest.fail("the block ran")
    assert raised.value.msg == "Failed to write the registry credentials to a private file on the host: %s." % cause
    assert [argv[0] for argv in host.argvs] == ["sh"]


def test_host_auth_file_that_cannot_be_removed_fails_the_step(private_dirs):
    host = _Host({"rm": (1, "", "rm: cannot remove 'x': Device or resource busy\n")})
    with pytest.raises(CommandError) as raised:
        with _auth.host_auth_file(host, {"auths": {}}) as path:
            pass
    assert raised.value.msg == ("Failed to remove the private auth file directory '%s' from the host: rm: cannot "
                                "remove 'x': Device or resource busy." % os.path.dirname(path))


@pytest.mark.parametrize("make", [None, "file", "dir"])
def test_the_auth_file_check_runs_the_test_a_batched_read_answers(tmp_path, make):
    # os_stage_phase batches auth_file_test's argv with its other reads: the check must ask that argv, and only it.
    path = tmp_path / "auth.json"
    if make == "file":
        path.write_text("{}", encoding="utf-8")
    elif make == "dir":
        path.mkdir()
    host = LocalHost()
    if make == "file":
        _auth.check_auth_file(host, str(path))
    else:
        with pytest.raises(InvalidInputError) as raised:
            _auth.check_auth_file(host, str(path))
        assert raised.value.msg == "auth_file '%s' does not exist or is not a regular file." % path
    assert host.argvs == [_auth.auth_file_test(str(path))] == [["test", "-f", str(path)]]
    _auth.check_auth_file(host, "")
    assert len(host.argvs) == 1
