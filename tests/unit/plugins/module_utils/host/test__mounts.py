# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ansible_collections.fleetos.layering.plugins.module_utils.host import _mounts

# As /proc/self/mountinfo shows a Fedora CoreOS host: / is a deployment bind-mounted
# from the root file system, /sysroot the read-only mount of that file system.
MOUNTINFO = textwrap.dedent("""\
    60 1 252:4 /ostree/deploy/fedora-coreos/deploy/abc.0 / rw,relatime shared:1 - xfs /dev/vda4 rw,prjquota
    61 60 252:4 / /sysroot ro,relatime shared:4 - xfs /dev/vda4 rw,prjquota
    62 60 0:22 / /usr ro,relatime shared:5 - overlay overlay ro
    63 61 0:40 / /sysroot/with\\040space rw shared:6 - tmpfs tmpfs rw
    """)


@pytest.mark.parametrize(("path", "point"), [
    ("/sysroot/ostree/deploy/fedora-coreos/deploy", "/sysroot"),
    ("/sysroot", "/sysroot"),
    ("/sysrootx/ostree", "/"),
    ("/usr/lib", "/usr"),
    ("/etc", "/"),
    ("/sysroot/with space/a", "/sysroot/with space"),
])
def test_mount_point_is_the_longest_prefix(path, point):
    assert _mounts.mount_point(path, MOUNTINFO) == point


def test_mount_point_needs_a_mount():
    with pytest.raises(_mounts.MountError, match="no mount holds"):
        _mounts.mount_point("/etc", "garbage line\n")


def test_writable_mount_runs_the_function_here(tmp_path):
    calls = []
    assert _mounts.call_writable(str(tmp_path), lambda: calls.append(os.getpid()) or "done") == "done"
    assert calls == [os.getpid()]


CHILD = textwrap.dedent("""\
    import json, os, subprocess, sys
    from ansible_collections.fleetos.layering.plugins.module_utils.host import _mounts
    from ansible_collections.fleetos.layering.plugins.module_utils._errors import FleetosError
    target = sys.argv[1]
    subprocess.run(["mount", "--make-rprivate", "/"], check=True)
    subprocess.run(["mount", "--bind", target, target], check=True)
    subprocess.run(["mount", "-o", "remount,bind,ro", target], check=True)
    out = {"ro_before": _mounts.is_read_only(target)}
    def write():
        with open(os.path.join(target, "origin"), "w") as handle:
            handle.write("written")
        return os.getpid()
    out["writer"] = _mounts.call_writable(target, write)
    out["me"] = os.getpid()
    out["ro_after"] = _mounts.is_read_only(target)
    try:
        _mounts.call_writable(target, lambda: (_ for _ in ()).throw(FleetosError("refused", path="p")))
    except FleetosError as exc:
        out["error"] = [exc.msg, exc.details]
    print(json.dumps(out))
""")


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="needs root and unshare(1)")
def test_read_only_mount_is_written_from_a_private_namespace(tmp_path):
    """A real read-only bind mount, inside a throwaway mount namespace of the test's own."""
    target = tmp_path / "sysroot"
    target.mkdir()
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    proc = subprocess.run(["unshare", "--mount", sys.executable, str(script), str(target)],
                          capture_output=True, text=True, check=False,
                          env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    assert proc.returncode == 0, proc.stderr
    out = __import__("json").loads(proc.stdout)
    assert out["ro_before"] is True and out["ro_after"] is True
    assert out["writer"] != out["me"]
    assert out["error"] == ["refused", {"path": "p"}]
    # The bind mount lived in the test's namespace only; the file is on the real directory.
    assert Path(target, "origin").read_text() == "written"
