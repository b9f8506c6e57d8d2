# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The stage step of a bootc host, its checks: the input refused before anything runs and the diff it shows. The
switch on a host runs through the task: tests/unit/plugins/action/test_bootc_switch.py."""

from __future__ import annotations

import pytest

from ansible_collections.fleetos.layering.tests.unit.plugins.module_utils.utils import LocalHost
from ansible_collections.fleetos.layering.plugins.module_utils._errors import InvalidInputError
from ansible_collections.fleetos.layering.plugins.plugin_utils.host._switch import check_input, diff_text

IMAGE = "198.51.100.1:5000/fleetos/lab-os@sha256:" + "1b" * 32


def params(**changes):
    given = {"image": IMAGE, "retries": 0, "retry_delay": 0, "labels": None, "auth_file": None}
    given.update(changes)
    return given


@pytest.mark.parametrize("labels", [
    None,  # not inspected: nothing to check
    {"containers.bootc": "1"},
    {"ostree.bootable": "true", "version": "43"},
])
def test_input_that_passes(tmp_path, labels):
    auth_file = tmp_path / "auth.json"
    auth_file.write_text("{}")
    host = LocalHost()
    check_input(host, params(labels=labels, auth_file=str(auth_file), retries=3, retry_delay=1))
    assert host.argvs == [["test", "-f", str(auth_file)]]


@pytest.mark.parametrize(("change", "message"), [
    (dict(retry_delay=-1), "retry_delay -1 is negative: expected 0 or more."),
    (dict(labels={}), "image '%s' is not bootable: its labels set neither containers.bootc nor ostree.bootable."
     % IMAGE),
    (dict(labels={"ostree.bootable": "false", "com.coreos.ostree-commit": "c" * 64}),
     "image '%s' is not bootable: its labels set neither containers.bootc nor ostree.bootable." % IMAGE),
    (dict(auth_file="/nonexistent/fleetos/auth.json"),
     "auth_file '/nonexistent/fleetos/auth.json' does not exist or is not a regular file."),
])
def test_bad_input_is_refused_before_anything_runs(change, message):
    host = LocalHost()
    with pytest.raises(InvalidInputError) as caught:
        check_input(host, params(**change))
    assert caught.value.msg == message
    assert all(argv[0] == "test" for argv in host.argvs)


def test_diff_text():
    summary = {"reference": IMAGE, "transport": "registry", "digest": "sha256:" + "1b" * 32, "checksum": "c0" * 32,
               "download_only": True}
    assert diff_text(summary) == "reference: %s\ntransport: registry\ndigest: sha256:%s\n" % (IMAGE, "1b" * 32)
