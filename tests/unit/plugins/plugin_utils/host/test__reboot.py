# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for plugin_utils/host/_reboot.py: the boot marker of a soft reboot, and the kind of a reboot seen."""

from __future__ import annotations

import os
import stat
import subprocess

import pytest

from ansible_collections.fleetos.layering.plugins.plugin_utils.host import _reboot


def _fake_systemctl(tmp_path, body):
    """A systemctl on PATH that runs ``body`` (sh)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    tool = bindir / "systemctl"
    tool.write_text("#!/bin/sh\n%s\n" % body)
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    return dict(os.environ, PATH="%s:%s" % (bindir, os.environ["PATH"]))


@pytest.mark.parametrize("shell", ["/bin/sh", "/usr/bin/dash", "/bin/bash"])
@pytest.mark.parametrize("body, count", [
    ('[ "$*" = "show -P SoftRebootsCount" ] && echo 3', "3"),
    # A systemd older than 256 has no such property (prints nothing), or none at all: the count stays as it is.
    ("exit 1", "0"),
])
def test_soft_boot_time_command_prints_boot_id_and_count(tmp_path, shell, body, count):
    if not os.path.exists(shell):
        pytest.skip("%s is not on this machine" % shell)
    env = _fake_systemctl(tmp_path, body)
    # The boot-time command's last line is the boot id (login noise before it, as with a tty).
    command = _reboot.soft_boot_time_command("echo 'Last login: today'; echo 0e9b-boot")
    proc = subprocess.run([shell, "-c", command], capture_output=True, text=True, env=env, check=False)
    assert proc.returncode == 0 and proc.stdout == "0e9b-boot:%s\n" % count
    assert _reboot.parse_boot_id(proc.stdout) == "0e9b-boot:%s" % count


def test_soft_boot_time_command_fails_with_the_boot_time_command(tmp_path):
    env = _fake_systemctl(tmp_path, "echo 0")
    proc = subprocess.run(["/bin/sh", "-c", _reboot.soft_boot_time_command("cat /nonexistent/boot_id")],
                          capture_output=True, text=True, env=env, check=False)
    assert proc.returncode != 0 and proc.stdout == ""


@pytest.mark.parametrize("before, after, kind", [
    ("b1:0", "b1:1", "soft"),
    ("b1:0", "b2:0", "full"),
    # A full reboot after soft ones: the count starts again at 0 with the new boot id.
    ("b1:4", "b2:0", "full"),
    # Plain boot ids (a full reboot's wait): a changed one is a full reboot.
    ("b1", "b2", "full"),
])
def test_reboot_kind(before, after, kind):
    assert _reboot.reboot_kind(before, after) == kind
