# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The registry auth file a host gets: the document the option auth gives, the bytes written, and the install on
this machine's files (its file scripts run for real). The task around it (check mode, removal, a file that is not
regular, the secret kept off command lines): tests/unit/plugins/action/test_registry_auth_file.py."""

from __future__ import annotations

import json
import stat

import pytest

from ansible_collections.fleetos.layering.tests.unit.plugins.module_utils.utils import LocalHost
from ansible_collections.fleetos.layering.plugins.module_utils._errors import FleetosError, InvalidInputError
from ansible_collections.fleetos.layering.plugins.plugin_utils.host import _auth_file

AUTH = {"auths": {"registry.example.com:5000": {"auth": "dXNlcjpwYXNz"}, "quay.io": {"auth": "cTpx"}}}
CONTENT = (b'{\n  "auths": {\n    "quay.io": {\n      "auth": "cTpx"\n    },\n'
           b'    "registry.example.com:5000": {\n      "auth": "dXNlcjpwYXNz"\n    }\n  }\n}\n')


@pytest.fixture(autouse=True)
def lock(monkeypatch, tmp_path):
    """The one lock of the auth files, in the test's directory."""
    path = tmp_path / "auth.lock"
    monkeypatch.setattr(_auth_file, "LOCK", str(path))
    return path


def test_the_document_is_the_mapping_or_its_json_text():
    assert _auth_file.document(AUTH) is AUTH
    assert _auth_file.document(json.dumps(AUTH)) == AUTH


@pytest.mark.parametrize(("auth", "message"), [
    ("{not json", "The option auth is not JSON: give a dockerconfigjson mapping or its JSON text (the text is not "
                  "shown)."),
    ("[1]", "The option auth must be a dockerconfigjson document with a non-empty 'auths' mapping of registries."),
    ({"auths": {}}, "The option auth must be a dockerconfigjson document with a non-empty 'auths' mapping of "
                    "registries."),
    ({"auths": ["quay.io"]}, "The option auth must be a dockerconfigjson document with a non-empty 'auths' mapping "
                             "of registries."),
    ({"credHelpers": {"quay.io": "x"}}, "The option auth must be a dockerconfigjson document with a non-empty "
                                        "'auths' mapping of registries."),
])
def test_a_document_that_is_not_one_is_refused(auth, message):
    with pytest.raises(InvalidInputError) as caught:
        _auth_file.document(auth)
    assert caught.value.msg == message


def test_the_content_has_sorted_keys_and_a_final_newline_whatever_the_order_given():
    assert _auth_file.content(AUTH) == CONTENT
    assert _auth_file.content({"auths": dict(reversed(list(AUTH["auths"].items())))}) == CONTENT


def params(path, state="present", auth=None):
    return {"path": str(path), "state": state, "auth": AUTH if auth is None else auth}


def test_install_writes_the_content_0600_and_reports_what_it_did(tmp_path):
    path = tmp_path / "etc" / "ostree" / "auth.json"
    result = _auth_file.install(LocalHost(), params(path), False)
    assert result == {"changed": True, "path": str(path), "state": "present",
                      "diff": {"before": {"path": str(path), "state": "absent"},
                               "after": {"path": str(path), "state": "present"}}}
    assert path.read_bytes() == CONTENT and stat.S_IMODE(path.stat().st_mode) == 0o600
    # The same document as JSON text laid out otherwise: the same bytes, nothing to do.
    assert _auth_file.install(LocalHost(), params(path, auth=json.dumps(AUTH, indent=4)), False)["changed"] is False


def test_a_file_another_writer_changes_meanwhile_is_left_to_it(tmp_path):
    path = tmp_path / "auth.json"
    path.write_bytes(b"{}\n")

    class Racing(LocalHost):
        """Another writer replaces the file between the read and the write."""

        def read_file(self, path, siblings=()):
            data = super().read_file(path, siblings)
            with open(path, "wb") as handle:
                handle.write(b'{"auths": {"other": {}}}\n')
            return data

    with pytest.raises(FleetosError) as caught:
        _auth_file.install(Racing(), params(path), False)
    assert caught.value.msg == ("Failed to write the auth file %s: it changed while it was written; run the task "
                                "again." % path)
    assert path.read_bytes() == b'{"auths": {"other": {}}}\n'


def test_a_relative_path_and_a_path_that_cannot_be_written_fail_in_one_sentence(tmp_path):
    host = LocalHost()
    with pytest.raises(InvalidInputError) as caught:
        _auth_file.install(host, params("etc/auth.json"), False)
    assert (caught.value.msg, host.argvs) == ("The option path 'etc/auth.json' is not an absolute path.", [])
    (tmp_path / "file").write_text("")
    path = tmp_path / "file" / "auth.json"
    with pytest.raises(FleetosError) as caught:
        _auth_file.install(host, params(path), False)
    assert not isinstance(caught.value, InvalidInputError)  # a failed write, not a refused path
    assert caught.value.msg.startswith("Failed to write the auth file %s: " % path) and caught.value.msg.endswith(".")
    assert len(caught.value.msg.splitlines()) == 1
