# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What the unit tests of shared code act on: a host (this machine, its own tools) and a module for the host-tool
clients."""

from __future__ import annotations

import os
import shutil
import subprocess

from ansible_collections.fleetos.layering.plugins.module_utils.host._host import ENVIRON, Host


class LocalHost(Host):
    """This machine as a ``_host.Host``: each argv runs as it is (no shell), in the C locale, so the
    host-side scripts of the shared code run for real on the test's files. ``argvs`` records them."""

    def __init__(self):
        self.argvs = []

    def run(self, argv, data=None, binary=False):
        self.argvs.append(list(argv))
        if isinstance(data, str):
            data = data.encode()
        try:
            proc = subprocess.run(list(argv), input=data, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  env=dict(os.environ, **ENVIRON), check=False)
        except FileNotFoundError as exc:
            return 127, b"" if binary else "", str(exc)
        out = proc.stdout if binary else proc.stdout.decode("utf-8", "replace")
        return proc.returncode, out, proc.stderr.decode("utf-8", "replace")

    def which(self, name):
        return shutil.which(name)

    def is_executable(self, path):
        return os.path.isfile(path) and os.access(path, os.X_OK)

    def machine(self):
        return os.uname().machine


class FakeModule:
    """An AnsibleModule as the host-tool clients use one: ``run_command`` answers ``results`` in turn and records each
    call (argv and keyword arguments) in ``calls``; ``get_bin_path`` answers ``found`` (None: not found) and records
    each lookup (name and required) in ``looked_up``."""

    def __init__(self, results=(), found="/usr/bin/tool"):
        self.results = list(results)
        self.found = found
        self.calls = []
        self.looked_up = []

    def get_bin_path(self, name, required=False):
        self.looked_up.append((name, required))
        return self.found

    def run_command(self, argv, **kwargs):
        self.calls.append((argv, kwargs))
        return self.results.pop(0)
