# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A host for the unit tests of shared code that acts on a host: this machine, its own tools."""

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
