# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""bench/_timeline.py and its callback: a run's timeline, read back play by play and task by task."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[3] / "bench"
if not (BENCH / "_timeline.py").is_file():
    pytest.skip("bench/_timeline.py is not in this tree", allow_module_level=True)
sys.path.insert(0, str(BENCH))
import _timeline  # noqa: E402

PLAYBOOK = """
- name: First
  hosts: all
  gather_facts: false
  tasks:
    - name: Say
      ansible.builtin.debug:
        msg: hello
    - name: Never
      ansible.builtin.debug:
        msg: never
      when: false
    - name: Once
      ansible.builtin.set_fact:
        once: true
      run_once: true

- name: Second
  hosts: all
  gather_facts: false
  tasks:
    - name: Change
      ansible.builtin.command: "true"
"""


def _event(kind, t, cpu=0.0, children=0.0, name=None, **fields):
    return dict(kind=kind, t=t, cpu=cpu, children=children, name=name, **fields)


def test_a_real_run_counts_each_task_execution_in_its_play_and_its_spans_follow_each_other(tmp_path):
    playbook = Path(sys.executable).parent / "ansible-playbook"
    if not playbook.is_file():
        pytest.skip("no ansible-playbook next to %s" % sys.executable)
    (tmp_path / "play.yml").write_text(PLAYBOOK)
    (tmp_path / "hosts").write_text("a ansible_connection=local ansible_python_interpreter=%s\n"
                                    "b ansible_connection=local ansible_python_interpreter=%s\n"
                                    % (sys.executable, sys.executable))
    timeline = tmp_path / "timeline.jsonl"
    env = _timeline.environ(timeline, {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_CALLBACK")})
    proc = subprocess.run([str(playbook), "-i", str(tmp_path / "hosts"), str(tmp_path / "play.yml")], env=env,
                          cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300,
                          check=False)
    assert proc.returncode == 0, proc.stdout
    summary = _timeline.summarise(_timeline.read(timeline))
    first, second = summary["plays"]
    assert (first["name"], first["tasks"], first["executed"], first["skipped"]) == ("First", 3, 3, 2)
    assert (second["name"], second["tasks"], second["executed"], second["skipped"]) == ("Second", 1, 2, 0)
    assert (summary["executed"], summary["skipped"]) == (5, 2)
    assert abs(first["start_s"] + first["wall_s"] - second["start_s"]) <= 0.02
    assert all(play["wall_s"] >= 0 and play["main_cpu_s"] >= 0 and play["workers_cpu_s"] >= 0
               for play in summary["plays"])
    once = next(task for task in summary["tasks"] if task["name"] == "Once")
    assert once["run_once"] is True and once["executed"] == 1 and once["play"] == "First"


def test_a_task_started_again_by_another_host_is_one_task_and_plays_span_to_the_next():
    events = [_event("start", 0.0), _event("play", 1.0, 0.5, 1.0, "P1"),
              _event("task", 1.5, 0.6, 1.0, "T1", uuid="u1", run_once=False),
              _event("task", 3.0, 1.0, 2.0, "T2", uuid="u2", run_once=True),
              _event("task", 4.0, 1.5, 2.5, "T1", uuid="u1", run_once=False),
              _event("play", 6.0, 2.0, 4.0, "P2"),
              _event("end", 10.0, 3.0, 7.0, results={"u1": {"ok": 3, "changed": 1, "failed": 1, "skipped": 2,
                                                            "unreachable": 1},
                                                     "u2": {"ok": 1, "changed": 0, "failed": 0, "skipped": 0,
                                                            "unreachable": 0}})]
    summary = _timeline.summarise(events, top=1)
    assert summary["plays"] == [
        {"name": "P1", "start_s": 1.0, "wall_s": 5.0, "main_cpu_s": 1.5, "workers_cpu_s": 3.0, "executed": 6,
         "skipped": 2, "tasks": 2},
        {"name": "P2", "start_s": 6.0, "wall_s": 4.0, "main_cpu_s": 1.0, "workers_cpu_s": 3.0, "executed": 0,
         "skipped": 0, "tasks": 0}]
    assert summary["tasks"] == [{"name": "T1", "play": "P1", "run_once": False, "executed": 5, "skipped": 2,
                                 "start_s": 1.5, "wall_s": 1.5, "main_cpu_s": 0.4, "workers_cpu_s": 1.0}]
    assert (summary["executed"], summary["skipped"]) == (6, 2)
    lines = _timeline.table(summary, hosts=3)
    assert lines[1].split() == ["1.0", "5.0", "1.5", "3.0", "6", "2", "P1"]
    assert lines[-1] == "task executions: 6, skipped: 2 (2.00 and 0.67 per host of 3)"


def test_the_environment_adds_the_callback_to_those_already_set(tmp_path):
    given = {"ANSIBLE_CALLBACKS_ENABLED": "timer", "ANSIBLE_CALLBACK_PLUGINS": "/x", "HOME": "/root"}
    env = _timeline.environ(tmp_path / "t.jsonl", given)
    assert given["ANSIBLE_CALLBACKS_ENABLED"] == "timer"
    assert env == {"ANSIBLE_CALLBACKS_ENABLED": "timer,bench_timeline", "HOME": "/root",
                   "ANSIBLE_CALLBACK_PLUGINS": "/x:%s" % (BENCH / "callback_plugins"),
                   "BENCH_TIMELINE": str(tmp_path / "t.jsonl")}


def test_a_timeline_without_its_end_is_refused():
    with pytest.raises(ValueError, match="did not finish"):
        _timeline.summarise([_event("start", 0.0), _event("play", 1.0, name="P")])
