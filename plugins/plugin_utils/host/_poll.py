# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# This is a private plugin_util of fleetos.layering: its interface may change at any
# time and it is not meant to be used by other collections.

"""One wait: ask again every interval until there is an answer or the time is up."""

from __future__ import annotations


class PollTimeout(Exception):
    """The time was up without an answer; ``waited``: the seconds since the first try."""

    def __init__(self, waited):
        super().__init__("no answer within %.0f s" % waited)
        self.waited = waited


def poll_until(attempt, timeout, interval, sleep, clock, whole=False, waiting=None):
    """Call ``attempt()`` until it returns something else than None: -> that. Between two tries, ``sleep`` the
    ``interval``, or what is left of ``timeout`` (counted from the first try) when that is less; after a try that
    found the time up, raise PollTimeout. ``whole``: no try after a shortened interval, give up once a whole
    interval no longer fits. ``waiting(elapsed)`` is called before each sleep (a long wait says so)."""
    start = clock()
    deadline = start + timeout
    while True:
        answer = attempt()
        if answer is not None:
            return answer
        left = deadline - clock()
        if left <= 0 or (whole and left < interval):
            raise PollTimeout(clock() - start)
        if waiting is not None:
            waiting(clock() - start)
        sleep(min(interval, left))
