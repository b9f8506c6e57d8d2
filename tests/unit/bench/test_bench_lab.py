# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""bench/_lab.py: the controller's memory, the summed RSS of a process tree read from /proc.

bench/ is not part of the collection (the copy ansible-test sees has no bench/): the module is
loaded from the working tree by path, and these tests are skipped where it is missing.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

LAB_PY = Path(__file__).resolve().parents[3] / "bench" / "_lab.py"
if not LAB_PY.is_file() or not (LAB_PY.parents[1] / "lab" / "fleetlablib").is_dir():
    pytest.skip("bench/_lab.py or lab/fleetlablib is not in this tree", allow_module_level=True)
pytest.importorskip("yaml")
_SPEC = importlib.util.spec_from_file_location("bench_lab", str(LAB_PY))
lab = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(lab)

# pid: (ppid, RSS KiB); a process missing from RSS has ended
TREE = {1: 0, 10: 1, 20: 10, 21: 20, 22: 20, 23: 22, 30: 10, 40: 1}
RSS = {1: 5, 10: 7, 20: 100, 21: 30, 22: 40, 23: 8, 30: 9, 40: 1000}


def children_of(parents):
    return lambda pid: [child for child, ppid in parents.items() if ppid == pid]


@pytest.mark.parametrize("roots,expected", [
    ([23], 8),                         # a leaf
    ([20], 100 + 30 + 40 + 8),         # a process and all its descendants, nothing else
    ([22], 40 + 8),
    ([20, 22], 100 + 30 + 40 + 8),     # a process under two roots counted once
    ([20, 30], 178 + 9),
    ([99], 0),                         # ended: no RSS, no children
])
def test_tree_rss_kib(roots, expected):
    assert lab.tree_rss_kib(roots, children_of(TREE), lambda pid: RSS.get(pid, 0)) == expected


def test_tree_rss_kib_shares_seen():
    seen = set()
    assert lab.tree_rss_kib([22], children_of(TREE), RSS.get, seen) == 48
    assert lab.tree_rss_kib([20], children_of(TREE), RSS.get, seen) == 130   # 22 and 23 already counted
    assert seen == {20, 21, 22, 23}


def fake_proc(root, procs):
    """A /proc of the processes {pid: (ppid, comm, VmRSS KiB or None: a zombie)}."""
    for pid, (ppid, comm, rss) in procs.items():
        entry = root / str(pid)
        entry.mkdir(exist_ok=True)
        (entry / "stat").write_text("%d (%s) S %d 1 1 0 -1 4194560 0 0 0 0 7 3\n" % (pid, comm, ppid))
        (entry / "status").write_text("Name:\t%s\nState:\tS\n%s" % (
            comm, "" if rss is None else "VmRSS:\t%8d kB\nRssAnon:\t1 kB\n" % rss))
    (root / "self").mkdir(exist_ok=True)             # not a process


def test_proc_tree_sample(tmp_path):
    # 10: the bench; 20: ansible-playbook; 21: a fork, 22 its ssh client, 23 that client's master
    # (still its child); 24: a zombie; 30: a master of an earlier run, adopted; 31: an adopted non-ssh.
    procs = {10: (1, "python3", 50), 20: (10, "ansible-playboo", 100), 21: (20, "ansible-playboo", 60),
             22: (21, "ssh", 7), 23: (22, "ssh", 9), 24: (20, "sh", None), 25: (21, "odd) (name", 3),
             30: (10, "ssh", 11), 31: (10, "fleetlab", 500), 40: (1, "sshd", 2000)}
    fake_proc(tmp_path, procs)
    tree = lab.ProcTree(tmp_path)
    assert tree.sample(20, 10) == (100 + 60 + 7 + 9 + 3, 11)
    assert tree.outside == {10, 31, 40}
    # The ssh client ends, its master is adopted by the bench; the fork starts another client.
    for pid in (22, 25):
        for name in ("stat", "status"):
            (tmp_path / str(pid) / name).unlink()
        (tmp_path / str(pid)).rmdir()
    fake_proc(tmp_path, {23: (10, "ssh", 9), 26: (21, "ssh", 6)})
    assert tree.sample(20, 10) == (100 + 60 + 6, 11 + 9)


def test_parents_reads_each_process_once_by_its_stat(tmp_path):
    # scale.py counts the adopted ssh masters and simfleet.py the hosts' processes from it.
    fake_proc(tmp_path, {10: (1, "python3", 50), 22: (10, "ssh", 7), 25: (22, "odd) (name", 3), 24: (10, "sh", None)})
    assert lab.parents(tmp_path) == {10: (1, "python3"), 22: (10, "ssh"), 25: (22, "odd) (name"), 24: (10, "sh")}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_run_sampled_real_tree():
    # The process and its child each hold 40 MiB (touched): the peak is of their sum.
    child = "import time; y = b'1' * (40 << 20); time.sleep(0.8)"
    script = "import subprocess, sys; x = b'1' * (40 << 20); subprocess.run([sys.executable, '-c', %r]); " \
        "print('done')" % child
    proc, sampler = lab.run_sampled([sys.executable, "-c", script], 30, interval=0.05)
    assert (proc.returncode, proc.stdout) == (0, "done\n")
    assert sampler.samples >= 3
    assert sampler.peak_kib >= 80 * 1024
    assert sampler.peak_with_masters_kib >= sampler.peak_kib
    assert 0 < sampler.peak_pss_kib <= sampler.peak_kib
    assert sampler.peak_pss_with_masters_kib >= sampler.peak_pss_kib


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_pss_counts_the_pages_a_fork_shares_once():
    # A child forked after its parent touched 60 MiB maps the same pages: its RSS counts them, its PSS half.
    shared = b"1" * (60 << 20)
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.write(ready_w, b"x")
        os.read(go_r, 1)
        os._exit(0)
    try:
        os.read(ready_r, 1)
        tree = lab.ProcTree()
        rss, pss = tree.rss_kib(pid), tree.pss_kib(pid)
    finally:
        os.write(go_w, b"x")
        os.waitpid(pid, 0)
        for fd in (ready_r, ready_w, go_r, go_w):
            os.close(fd)
    if pss == 0:
        pytest.skip("/proc/%d/smaps_rollup cannot be read here" % pid)
    assert len(shared) == 60 << 20 and rss >= 60 * 1024
    assert rss - pss >= 25 * 1024, (rss, pss)


def test_pss_of_a_process_reads_smaps_rollup(tmp_path):
    (tmp_path / "7").mkdir()
    (tmp_path / "7" / "smaps_rollup").write_text("00400000-7ffd [rollup]\nRss:   900 kB\nPss:   321 kB\n")
    tree = lab.ProcTree(tmp_path)
    assert (tree.pss_kib(7), tree.pss_kib(8)) == (321, 0)
