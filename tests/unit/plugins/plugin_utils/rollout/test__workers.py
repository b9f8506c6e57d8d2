# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""_workers: the wait for a free fork, on real processes; the heap frozen while a worker is forked; the removed
hosts' list with a count for ``in``."""

from __future__ import annotations

import copy
import gc
import multiprocessing
import pickle
import time

from ansible_collections.fleetos.layering.plugins.plugin_utils.rollout._workers import (
    RemovedHosts,
    count_removed_hosts,
    heap_frozen,
    tender,
    wait_for_a_result,
    wait_for_a_worker,
)

CONTEXT = multiprocessing.get_context("fork")


def _started(seconds):
    process = CONTEXT.Process(target=time.sleep, args=(seconds,))
    process.start()
    return process


def test_it_returns_when_one_busy_worker_exits_and_tends_meanwhile():
    short, long = _started(0.3), _started(60)
    tended = []
    try:
        assert wait_for_a_worker([long, short], tend=lambda: tended.append(1)) is True
        # The short one ended; the long one still runs: the wait did not outlast the first exit.
        assert short.exitcode == 0 and long.is_alive()
        assert tended
    finally:
        long.terminate()
        long.join()
        short.join()


def test_a_free_slot_returns_at_once_without_a_look_at_the_others():
    class Untouchable:
        def is_alive(self):
            raise AssertionError("looked at")

    assert wait_for_a_worker([None, Untouchable()]) is True
    done = _started(0)
    done.join()
    assert wait_for_a_worker([done, Untouchable()]) is True


def test_a_worker_that_cannot_be_waited_for_counts_as_free():
    assert wait_for_a_worker([CONTEXT.Process(target=time.sleep, args=(1,))]) is True
    closed = _started(0)
    closed.join()
    closed.close()
    assert wait_for_a_worker([closed]) is True


def test_the_end_of_the_run_stops_the_wait():
    busy = _started(60)
    looks = []
    try:
        assert wait_for_a_worker([busy], terminated=lambda: len(looks) > 2, tend=lambda: looks.append(1),
                                 step=0.01) is False
        assert busy.is_alive() and len(looks) == 3
    finally:
        busy.terminate()
        busy.join()


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def test_a_result_ends_the_wait_for_one():
    clock, results, looks = Clock(), [], []

    def tend():
        looks.append(clock.now)
        if len(looks) == 3:
            results.append("result")

    assert wait_for_a_result(results, tend=tend, clock=clock, sleep=clock.sleep) is True
    # Looks 5 ms apart, not ansible-core's 1 ms.
    assert looks == [0.0, 0.005, 0.01]


def test_the_wait_for_a_result_is_short_and_ends_with_the_run():
    clock = Clock()
    assert wait_for_a_result([], clock=clock, sleep=clock.sleep) is False
    assert 0.05 <= clock.now < 0.06
    assert wait_for_a_result([], terminated=lambda: True, clock=clock, sleep=clock.sleep) is False
    assert 0.05 <= clock.now < 0.06


def test_another_change_ends_the_wait_for_a_result_without_one():
    clock = Clock()
    # A book written after 20 ms (the slots strategy's parked hosts may go on): the wait ends at the next look.
    assert wait_for_a_result([], timeout=1.0, clock=clock, sleep=clock.sleep, also=lambda: clock.now >= 0.02) is False
    assert 0.02 <= clock.now < 0.025


def test_the_workers_requests_are_answered_from_ansible_core_2_22_only():
    class Before:
        pass

    class From222:
        _rpc_queue = object()

        def _process_rpc_queue(self):
            return "answered"

    assert tender(Before()) is None
    assert tender(From222())() == "answered"


def test_the_removed_hosts_stay_a_list_with_a_count_for_in():
    removed = RemovedHosts(["n1", "n2"])
    assert isinstance(removed, list) and removed == ["n1", "n2"]
    removed.append("n3")
    removed.append("n1")  # failed, then ended: ansible-core appends a host twice
    removed.remove("n1")  # a rescue brings it back once
    assert removed == ["n2", "n3", "n1"] and "n1" in removed
    removed.remove("n1")
    assert "n1" not in removed and "n2" in removed
    removed += ["n4"]
    removed.extend(iter(["n5"]))
    removed.insert(0, "n6")
    assert removed.pop() == "n5" and "n5" not in removed
    removed[0] = "n7"
    del removed[1]
    assert removed == ["n7", "n3", "n4"]
    assert [host for host in ("n2", "n3", "n4", "n6", "n7") if host in removed] == ["n3", "n4", "n7"]
    for copied in (copy.copy(removed), copy.deepcopy(removed), pickle.loads(pickle.dumps(removed))):
        assert isinstance(copied, RemovedHosts) and copied == removed
        copied.remove("n3")
        assert "n3" not in copied and "n3" in removed
    removed.clear()
    assert "n3" not in removed and removed == []


def test_a_play_gets_its_removed_hosts_counted_once():
    class Play:
        _removed_hosts = ["n1"]

    play = Play()
    count_removed_hosts(play)
    counted = play._removed_hosts
    assert isinstance(counted, RemovedHosts) and counted == ["n1"] and "n1" in counted
    count_removed_hosts(play)
    assert play._removed_hosts is counted


def test_a_worker_forked_with_the_heap_frozen_inherits_it_frozen_and_the_controller_collects_as_before():
    inherited = [{"host": "n%d" % index} for index in range(1000)]
    # (Python 3.12 starts with a few hundred objects frozen)
    before = gc.get_freeze_count()
    reader, writer = CONTEXT.Pipe(duplex=False)
    with heap_frozen():
        # What the controller held when the worker was forked is out of reach of the worker's collections.
        frozen = gc.get_freeze_count()
        assert frozen >= before + len(inherited)
        worker = CONTEXT.Process(target=lambda: writer.send(gc.get_freeze_count()))
        worker.start()
    try:
        # (less a few objects the fork itself let go)
        assert len(inherited) <= reader.recv() <= frozen
    finally:
        worker.join()
    assert worker.exitcode == 0 and gc.get_freeze_count() == 0


def test_the_heap_thaws_when_the_fork_fails():
    try:
        with heap_frozen():
            raise OSError("fork: Resource temporarily unavailable")
    except OSError:
        pass
    assert gc.get_freeze_count() == 0
