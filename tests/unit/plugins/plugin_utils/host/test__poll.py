# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for the one wait of the collection's steps: poll_until."""

from __future__ import annotations

import pytest

from ansible_collections.fleetos.layering.plugins.plugin_utils.host._poll import PollTimeout, poll_until


class Clock:
    def __init__(self, cost=0.0):
        self.now, self.sleeps, self.cost = 100.0, [], cost

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds


def answers(clock, *values):
    """An attempt that answers ``values`` in turn, each try taking the clock's ``cost``."""
    values = list(values)

    def attempt():
        clock.now += clock.cost
        return values.pop(0)
    return attempt


def test_the_first_answer_that_is_not_none_is_returned_after_the_sleeps_between_tries():
    clock = Clock()
    assert poll_until(answers(clock, None, None, False), 10, 3, clock.sleep, clock) is False
    assert clock.sleeps == [3, 3]


def test_the_last_sleep_is_what_is_left_and_a_try_at_the_deadline_comes_after_it():
    clock = Clock(cost=1.0)
    with pytest.raises(PollTimeout) as caught:
        poll_until(answers(clock, None, None, None, "late"), 7, 3, clock.sleep, clock)
    # Tries end at 101, 105 and 108: the second sleep is the 2 s left before the deadline (107), and the try
    # after it is the last; "late" is never asked for.
    assert clock.sleeps == [3, 2] and caught.value.waited == 8.0


def test_whole_gives_up_once_a_whole_interval_no_longer_fits():
    clock = Clock(cost=1.0)
    seen = []
    with pytest.raises(PollTimeout):
        poll_until(answers(clock, None, None, None), 7, 3, clock.sleep, clock, whole=True, waiting=seen.append)
    # After the try at 105, 2 s are left of 7: less than an interval, no try after a shortened sleep.
    assert clock.sleeps == [3] and seen == [1.0]


def test_no_time_means_one_try():
    clock = Clock()
    with pytest.raises(PollTimeout):
        poll_until(answers(clock, None), 0, 5, clock.sleep, clock)
    assert clock.sleeps == []
    assert poll_until(answers(clock, 0), 0, 5, clock.sleep, clock) == 0


def test_an_error_of_a_try_ends_the_wait():
    clock = Clock()

    def attempt():
        raise ValueError("the host has no such job")
    with pytest.raises(ValueError, match="no such job"):
        poll_until(attempt, 10, 1, clock.sleep, clock)
    assert clock.sleeps == []
