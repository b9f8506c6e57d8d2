# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for plugin_utils/host/_bound.py: a host command cut on the controller's side after its bound."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from unittest.mock import MagicMock

import pytest

from ansible.errors import AnsibleConnectionFailure

from ansible_collections.fleetos.layering.plugins.plugin_utils.host import _bound


class Timer:
    """threading.Timer that fires when the test says so (``fire``), or never."""

    made = []

    def __init__(self, seconds, function):
        self.seconds = seconds
        self.function = function
        self.cancelled = False
        Timer.made.append(self)

    def start(self):
        pass

    def cancel(self):
        self.cancelled = True


def test_a_command_within_its_bound_returns_its_result_and_ends_nothing():
    ended = []
    connection = MagicMock()
    Timer.made = []
    result = _bound.bounded(lambda: {"rc": 0}, 30, connection, listing=lambda: {1, 2}, end=ended.extend, timer=Timer)
    assert result == {"rc": 0}
    assert Timer.made[0].seconds == 30 and Timer.made[0].cancelled
    assert ended == [] and not connection.reset.called


def test_a_command_past_its_bound_ends_the_processes_it_started_and_resets_the_connection():
    ended = []
    connection = MagicMock()
    Timer.made = []
    children = [{1, 2}, {1, 2, 7, 9}]

    def call():
        # The bound passes while the command runs; the connection plugin then returns what the ended ssh gave.
        Timer.made[0].function()
        return {"rc": 255}

    with pytest.raises(_bound.CommandTimeout) as caught:
        _bound.bounded(call, 40, connection, what="the health command", listing=lambda: children.pop(0),
                       end=ended.extend, timer=Timer)
    assert str(caught.value) == "the health command did not finish within 40 s"
    assert isinstance(caught.value, AnsibleConnectionFailure)
    # Only what the command started: 7 and 9, not the worker's other children.
    assert ended == [7, 9] and connection.reset.called


def test_a_connection_failure_past_the_bound_is_the_timeout():
    Timer.made = []

    def call():
        Timer.made[0].function()
        raise AnsibleConnectionFailure("Data could not be sent to remote host")

    with pytest.raises(_bound.CommandTimeout, match="did not finish within 2.5 s"):
        _bound.bounded(call, 2.5, MagicMock(), listing=set, end=list, timer=Timer)


def test_a_connection_failure_within_the_bound_is_left_as_it_is():
    def call():
        raise AnsibleConnectionFailure("Connection refused")

    with pytest.raises(AnsibleConnectionFailure, match="Connection refused") as caught:
        _bound.bounded(call, 30, MagicMock(), listing=set, end=list, timer=Timer)
    assert not isinstance(caught.value, _bound.CommandTimeout)


@pytest.mark.parametrize("seconds", [None, 0])
def test_no_bound(seconds):
    assert _bound.bounded(lambda: "done", seconds, MagicMock(), listing=None, timer=None) == "done"


def test_a_real_child_that_hangs_is_ended_after_the_bound():
    """With the real clock, /proc and kill: a child process that never ends (an ssh that gets no answer)."""
    began = time.monotonic()

    def call():
        proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        return {"rc": proc.wait()}

    with pytest.raises(_bound.CommandTimeout):
        _bound.bounded(call, 0.5, MagicMock())
    assert time.monotonic() - began < 30


def test_children_reads_the_kernels_list_of_each_thread(tmp_path):
    for tid, listed in (("42", "10 11 "), ("43", "12\n"), ("44", "")):
        (tmp_path / "42" / "task" / tid).mkdir(parents=True)
        (tmp_path / "42" / "task" / tid / "children").write_text(listed)
    # A process scan would find none: no process has a stat file here.
    assert _bound.children(42, proc=str(tmp_path)) == {10, 11, 12}


def test_children_sees_a_child_of_its_own():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert proc.pid in _bound.children()
    finally:
        proc.kill()
        proc.wait()
    assert proc.pid not in _bound.children()


def test_children_reads_the_parent_of_each_process(tmp_path):
    """Without the kernel's lists (no task/TID/children): the parent of every process."""
    for pid, stat in (("10", "10 (ssh) S 42 10"), ("11", "11 (a (b) c) S 42 11"), ("12", "12 (sh) S 1 12"),
                      ("self", "99 (x) S 42 1")):
        (tmp_path / pid).mkdir()
        (tmp_path / pid / "stat").write_text(stat)
    assert _bound.children(42, proc=str(tmp_path)) == {10, 11}
    assert os.getpid() not in _bound.children()
