# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The strategy fleetos.layering.slots in a real ansible-playbook, against ansible-core's free strategy.

Outside a book of slots the strategy must run a play exactly as C(free) does: its shortcuts in the loop (no
look at the next task of a host at work or done, a wait for a result instead of another pass) must not
change what runs. One play over eight local hosts on three forks, with includes, meta tasks, a rescued
block, a failed host, an ended host and a slow one (connection local); run with the
ansible-core of the running interpreter.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[4]
RUNTIME = REPO / ".build" / "runtime"
ENV = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(RUNTIME), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
           ANSIBLE_STDOUT_CALLBACK="default", ANSIBLE_DEPRECATION_WARNINGS="False", ANSIBLE_HOST_KEY_CHECKING="False")

PLAY = """
- hosts: all
  gather_facts: false
  strategy: %s
  tasks:
    - ansible.builtin.set_fact:
        first: "{{ inventory_hostname }}"
    - ansible.builtin.include_tasks: inc.yml
      when: inventory_hostname not in ['h3', 'h6']
    - block:
        - ansible.builtin.fail:
            msg: boom
          when: inventory_hostname in ['h2', 'h7']
      rescue:
        - ansible.builtin.set_fact:
            rescued: true
    - ansible.builtin.meta: end_host
      when: inventory_hostname == 'h4'
    - ansible.builtin.fail:
        msg: fatal
      when: inventory_hostname == 'h5'
    - ansible.builtin.command: sleep 1
      changed_when: false
      when: inventory_hostname == 'h8'
    - ansible.builtin.debug:
        msg: "done {{ inventory_hostname }} {{ inc | default('-') }} {{ rescued | default(false) }}"
"""

INCLUDED = """
- ansible.builtin.set_fact:
    inc: here
- ansible.builtin.meta: noop
- ansible.builtin.debug:
    msg: "included {{ inventory_hostname }}"
"""


def run(tmp_path, strategy):
    work = tmp_path / strategy.replace(".", "_")
    work.mkdir()
    (work / "play.yml").write_text(PLAY % strategy)
    (work / "inc.yml").write_text(INCLUDED)
    (work / "hosts.ini").write_text("".join("h%d ansible_connection=local ansible_python_interpreter=%s\n"
                                            % (i, sys.executable) for i in range(1, 9)))
    began = time.monotonic()
    proc = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "play.yml", "-i", "hosts.ini",
                           "--forks", "3"], env=ENV, cwd=str(work), text=True, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, check=False, timeout=120)
    recap = sorted(re.findall(r"^(h\d)\s+:\s+(.*)$", proc.stdout, re.M))
    said = sorted(re.findall(r'"msg": "((?:done|included) h\d[^"]*)"', proc.stdout))
    return proc, recap, said, time.monotonic() - began


def test_outside_a_book_the_play_runs_as_with_the_free_strategy(tmp_path):
    free, free_recap, free_said = run(tmp_path, "free")[:3]
    slots, slots_recap, slots_said, took = run(tmp_path, "fleetos.layering.slots")
    assert free.returncode == slots.returncode == 2, slots.stdout
    assert len(slots_recap) == 8 and slots_recap == free_recap, (free.stdout, slots.stdout)
    assert slots_said == free_said
    assert "done h1 here False" in slots_said and "done h2 here True" in slots_said and "done h3 - False" in slots_said
    assert not any(line.startswith(("done h4", "done h5")) for line in slots_said)
    # A wait for a result, not a pass every millisecond, and never a wait that outlasts its result by much.
    assert took < 60
