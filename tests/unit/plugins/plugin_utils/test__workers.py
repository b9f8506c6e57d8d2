# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""_workers: the wait for a free fork, on real processes."""

from __future__ import annotations

import multiprocessing
import time

from ansible_collections.fleetos.layering.plugins.plugin_utils._workers import tender, wait_for_a_result, wait_for_a_worker

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
