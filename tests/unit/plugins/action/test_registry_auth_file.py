# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""registry_auth_file: the action plugin on files in a temporary directory (the file scripts run for real)."""

from __future__ import annotations

import json
import os
import stat

import pytest

from ansible_collections.fleetos.layering.tests.unit.plugins.action.utils import fake_host, run_action
from ansible_collections.fleetos.layering.plugins.action import registry_auth_file
from ansible_collections.fleetos.layering.plugins.plugin_utils.host import _auth_file

SECRET = "c2VjcmV0OnBhJCQgd29yZCdgJChpZCk="
AUTH = {"auths": {"registry.example.com:5000": {"auth": SECRET}}}


@pytest.fixture
def fake(monkeypatch, tmp_path):
    monkeypatch.setattr(_auth_file, "LOCK", str(tmp_path / "auth.lock"))
    return fake_host(monkeypatch)


def _run(args, failed=False, check_mode=False):
    return run_action(registry_auth_file, args, failed=failed, check_mode=check_mode)


def test_install_is_0600_idempotent_and_never_shows_the_secret(fake, tmp_path):
    path = str(tmp_path / "etc" / "ostree" / "auth.json")
    assert _run(dict(path=path, auth=AUTH), check_mode=True)["changed"] is True
    assert not os.path.exists(path)
    result = _run(dict(path=path, auth=json.dumps(AUTH)))
    assert result["changed"] is True
    assert result["diff"] == {"before": {"path": path, "state": "absent"}, "after": {"path": path, "state": "present"}}
    assert json.load(open(path)) == AUTH
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert sorted(os.listdir(os.path.dirname(path))) == ["auth.json"]
    assert _run(dict(path=path, auth=AUTH))["changed"] is False
    # The secret went to the host on stdin only, never in a command line or the result.
    assert all(SECRET not in line for line in fake["lines"])
    assert SECRET not in json.dumps(result)
    os.chmod(path, 0o644)
    assert _run(dict(path=path, auth=AUTH))["changed"] is True
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_remove(fake, tmp_path):
    path = tmp_path / "auth.json"
    path.write_text("{}")
    assert _run(dict(path=str(path), state="absent"), check_mode=True)["changed"] is True
    assert path.exists()
    assert _run(dict(path=str(path), state="absent"))["changed"] is True
    assert not path.exists()
    assert _run(dict(path=str(path), state="absent"))["changed"] is False


@pytest.mark.parametrize("kind", ["symlink", "directory", "fifo"])
def test_not_a_regular_file_is_refused_and_kept(fake, tmp_path, kind):
    path = tmp_path / "auth.json"
    target = tmp_path / "elsewhere"
    target.write_text("keep")
    {"symlink": lambda: path.symlink_to(target), "directory": path.mkdir, "fifo": lambda: os.mkfifo(str(path))}[kind]()
    for args in (dict(path=str(path), auth=AUTH), dict(path=str(path), state="absent")):
        result = _run(args, failed=True)
        assert result["msg"].startswith("The option path '%s' is not a regular file" % path)
        assert result["msg"].endswith("nothing was changed.")
    assert os.path.lexists(str(path)) and target.read_text() == "keep"


@pytest.mark.parametrize("auth,message", [
    ("{not json", "The option auth is not JSON"),
    ({"auths": {}}, "non-empty 'auths'"),
    (["a"], "non-empty 'auths'"),
])
def test_bad_auth_is_one_sentence_before_anything(fake, tmp_path, auth, message):
    path = tmp_path / "auth.json"
    result = _run(dict(path=str(path), auth=auth), failed=True)
    assert message in result["msg"] and len(result["msg"].splitlines()) == 1
    assert not path.exists() and fake["lines"] == []


def test_state_present_needs_auth(fake, tmp_path):
    result = _run(dict(path=str(tmp_path / "auth.json")), failed=True)
    assert "auth" in result["msg"]
