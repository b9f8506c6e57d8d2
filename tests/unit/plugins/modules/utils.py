# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Shared harness for module unit tests: main() with arguments and a faked run_command."""

from __future__ import annotations

import contextlib
import json
import os
import stat
from unittest import mock

import pytest
from ansible.module_utils import basic

try:
    from ansible.module_utils.testing import patch_module_args
except ImportError:  # ansible-core before 2.19 has no testing helper: set the arguments it reads itself.
    @contextlib.contextmanager
    def patch_module_args(args=None):
        """Expose ``args`` to AnsibleModule instances created within this context (ansible-core < 2.19)."""
        data = json.dumps({"ANSIBLE_MODULE_ARGS": args or {}}).encode()
        with mock.patch.object(basic, "_ANSIBLE_ARGS", data):
            yield


class ExitJson(Exception):
    """Raised instead of AnsibleModule.exit_json; args[0] is the result."""


class FailJson(Exception):
    """Raised instead of AnsibleModule.fail_json; args[0] is the result."""


def fake_module(monkeypatch):
    """Fake run_command (replaying state['results'], recording state['calls']) and the exits.

    state['hooks'] maps argv[1] (the subcommand) to a callable run before the result
    is returned, so a test can change files the way the real command would.
    """
    state = {"calls": [], "results": [], "hooks": {}}

    def run_command(self, argv, **kwargs):
        state["calls"].append((argv, kwargs))
        hook = state["hooks"].get(argv[1]) if len(argv) > 1 else None
        if hook:
            hook(argv)
        return state["results"].pop(0)

    def exit_json(self, **kwargs):
        raise ExitJson(kwargs)

    def fail_json(self, **kwargs):
        raise FailJson(kwargs)

    monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
    monkeypatch.setattr(basic.AnsibleModule, "exit_json", exit_json)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", fail_json)
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path",
                        lambda self, name, required=False: "/usr/bin/" + name)
    return state


def snapshot_dir(directory):
    """{name: (file type, bytes or link target)} for every entry of directory (links not followed)."""
    out = {}
    for entry in directory.iterdir():
        st = entry.lstat()
        if stat.S_ISLNK(st.st_mode):
            out[entry.name] = ("link", os.readlink(entry))
        elif stat.S_ISREG(st.st_mode):
            out[entry.name] = ("file", entry.read_bytes())
        else:
            out[entry.name] = (stat.S_IFMT(st.st_mode), st.st_ino)
    return out


def run_main(main, args, expect=ExitJson, check_mode=False):
    """Run a module's main() with ``args``; -> its result (exit_json or, with expect=FailJson, fail_json)."""
    if check_mode:
        args = dict(args, _ansible_check_mode=True)
    with patch_module_args(args):
        with pytest.raises(expect) as caught:
            main()
    return caught.value.args[0]
