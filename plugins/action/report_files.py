# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Action plugin of fleetos.layering.report_files (documented in plugins/modules/report_files.py).

Writes a playbook's report files into one directory on the controller, each atomically (a
temporary file in the same directory, then a rename), in one task. ansible.builtin.copy does
the same per file with a stat and a copy module run, about a second of controller time each;
a report is an artefact of the run on the controller, not a file on a managed host.
"""

from __future__ import annotations

import os

from ansible.module_utils.common.text.converters import to_bytes
from ansible.plugins.action import ActionBase

from ansible_collections.fleetos.layering.plugins.module_utils._files import replace_file

ARGUMENT_SPEC = {
    "path": {"type": "path", "required": True},
    "files": {"type": "dict", "required": True},
    "mode": {"type": "raw", "default": "0644"},
}
DIRECTORY_MODE = 0o755


def file_mode(value):
    """An octal mode (a string like "0644", or an int) -> the int, or ValueError."""
    if isinstance(value, int) and not isinstance(value, bool):
        mode = value
    elif isinstance(value, str) and value.isdigit():
        mode = int(value, 8)
    else:
        raise ValueError("mode must be an octal string such as '0644', got %r" % (value,))
    if not 0 <= mode <= 0o777:
        raise ValueError("mode must be an octal string such as '0644', got %r" % (value,))
    return mode


def check_files(files):
    """The first problem with ``files`` (name -> text), as one sentence, or None."""
    if not files:
        return "files must name at least one file."
    for name, content in files.items():
        if not name or name in (".", "..") or "/" in name or "\0" in name:
            return "files key %r must be a plain file name, without a directory." % (name,)
        if not isinstance(content, str):
            return "files %s must be text, got %s." % (name, type(content).__name__)
    return None


def differs(path, data, mode):
    """Whether the file at ``path`` is missing, or holds other bytes than ``data``, or another mode."""
    try:
        with open(path, "rb") as handle:
            return handle.read() != data or (os.fstat(handle.fileno()).st_mode & 0o777) != mode
    except OSError:
        return True


def write_file(path, data, mode):
    """Write ``data`` (bytes) to ``path`` atomically with ``mode``; -> True when the file changed."""
    if not differs(path, data, mode):
        return False
    replace_file(path, data, mode)
    return True


class ActionModule(ActionBase):
    """Write report files into a directory on the controller."""

    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        self._supports_check_mode = True
        result = super().run(tmp, task_vars)
        del tmp
        validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        del validation
        directory = args["path"]
        files = args["files"]
        problem = check_files(files)
        try:
            mode = file_mode(args["mode"])
        except ValueError as exc:
            problem = problem or "%s." % exc
        if problem:
            result.update(failed=True, msg=problem)
            return result
        paths = [os.path.join(directory, name) for name in files]
        result.update(path=directory, files=paths, changed=False, written=[])
        if self._task.check_mode:
            result["written"] = [p for p, text in zip(paths, files.values()) if differs(p, to_bytes(text), mode)]
            result["changed"] = bool(result["written"])
            return result
        try:
            os.makedirs(directory, mode=DIRECTORY_MODE, exist_ok=True)
            for path, text in zip(paths, files.values()):
                if write_file(path, to_bytes(text), mode):
                    result["written"].append(path)
        except OSError as exc:
            result.update(failed=True, msg="Writing the report files into %s failed: %s." % (
                directory, exc.strerror or exc))
            return result
        result["changed"] = bool(result["written"])
        return result
