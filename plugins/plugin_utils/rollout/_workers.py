# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# This is a private plugin_util of fleetos.layering: its interface may change at any
# time and it is not meant to be used by other collections.

"""Waiting for a free fork, or for a result, without spending the controller's CPU.

ansible-core's strategies queue a task with ``StrategyBase._queue_task``, which, when every worker is busy,
looks at the workers again every 0.1 ms until one is free: on a play of more hosts than forks, the
controller's main process spends a core polling while the workers run. ``wait_for_a_worker`` blocks on the
busy workers' process sentinels instead (``multiprocessing.connection.wait``), and returns as soon as one
exits; the task is then queued at once. While it waits for the results of a task, ansible-core looks for one every
``internal_poll_interval`` (1 ms); ``wait_for_a_result`` looks every 5 ms. Meanwhile both do what ansible-core's
loops do on each look besides (from ansible-core 2.22, they answer the workers' requests: ``tend``). A worker is
forked with the controller's heap frozen (``heap_frozen``).

``RemovedHosts`` keeps the hosts a play removed (ended, failed, unreachable) as ansible-core's list, with a test of
membership that does not go through it: ansible-core tests each host of the play against that list in every
``VariableManager.get_vars``, once for each task it gives a host."""

from __future__ import annotations

import gc
import time
from collections import Counter
from contextlib import contextmanager
from multiprocessing.connection import wait

from ansible_collections.fleetos.layering.plugins.plugin_utils.host._poll import PollTimeout, poll_until

# Seconds between two looks at the strategy's end (ansible-core's _terminated) and at the workers' requests while
# every worker is busy.
STEP = 0.01
# Seconds between two looks for a result, and the longest wait for one before ansible-core's own look.
RESULT_STEP = 0.005
RESULT_WAIT = 0.05


def tender(strategy):
    """What ansible-core's loops do on each look besides, for ``strategy``: from ansible-core 2.22, answer the
    workers' requests (``_process_rpc_queue``); None before."""
    return strategy._process_rpc_queue if getattr(strategy, "_rpc_queue", None) is not None else None


def wait_for_a_worker(workers, terminated=lambda: False, tend=None, step=STEP):
    """Return once a slot of ``workers`` (a strategy's ``_workers``: a process or None each) is free - None, or
    its process exited - or once ``terminated()`` is true; -> whether a slot is free. ``tend`` is called before each
    look. A worker that cannot be waited for (not started, or closed) counts as free: ansible-core's own loop then
    handles it, as before."""
    while not terminated():
        if tend is not None:
            tend()
        sentinels = []
        for worker in workers:
            if worker is None:
                return True
            try:
                if not worker.is_alive():
                    return True
                sentinels.append(worker.sentinel)
            except (AssertionError, ValueError):
                return True
        if not sentinels:
            return True
        wait(sentinels, timeout=step)
    return False


@contextmanager
def heap_frozen():
    """Fork the worker of a task inside this (ansible-core forks it in ``StrategyBase._queue_task``): the controller's
    heap is frozen (``gc.freeze``) while the worker starts, and collected as before once it has started.

    The worker's garbage collector then leaves alone the objects it inherited: the inventory, every host's
    variables and facts, the results so far. Otherwise a full collection in a worker walks all of them, and copies
    every page of the heap it touches into the worker. At 1,000 hosts such a collection took about 0.9 s of a
    worker's CPU, and its pages count in the controller's memory once per worker."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def wait_for_a_result(results, terminated=lambda: False, tend=None, timeout=RESULT_WAIT, step=RESULT_STEP,
                      clock=time.monotonic, sleep=time.sleep, also=None):
    """Return once ``results`` (a strategy's ``_results``, which ansible-core's results thread fills) holds a result,
    ``terminated()`` is true, ``also()`` is true (when given), or ``timeout`` seconds went by; -> whether a result is
    there. ``tend`` is called before each look."""
    def attempt():
        if tend is not None:
            tend()
        return bool(results) if results or terminated() or (also is not None and also()) else None

    try:
        return poll_until(attempt, timeout, step, sleep, clock)
    except PollTimeout:
        return False


class RemovedHosts(list):
    """A play's ``_removed_hosts`` (ansible-core appends a host it ends, fails or finds unreachable, and removes one
    that a rescue or ``meta: clear_host_errors`` brings back), whose ``in`` does not go through the list.

    ``VariableManager._get_magic_variables`` builds ``ansible_play_hosts`` and ``ansible_play_batch`` with
    ``x not in play._removed_hosts`` for every host of the play, in every ``get_vars`` (once for each task given to
    a host). With a list, a play in which hosts end one after the other (``meta: end_host`` after a verified
    activation) makes that O(hosts x ended) per task: about 10 ms per ``get_vars`` at 1,000 hosts, 900 of them
    ended (0.2 ms with this class). The order and the contents stay a list's; every change goes through a method
    that keeps the count, and a copy or a pickle is made again from the items."""

    def __init__(self, items=()):
        super().__init__(items)
        self._counts = Counter(self)

    def __contains__(self, item):
        return self._counts.get(item, 0) > 0

    def __reduce__(self):
        return type(self), (list(self),)

    def append(self, item):
        super().append(item)
        self._counts[item] += 1

    def extend(self, items):
        items = list(items)
        super().extend(items)
        self._counts.update(items)

    def __iadd__(self, items):
        self.extend(items)
        return self

    def insert(self, index, item):
        super().insert(index, item)
        self._counts[item] += 1

    def remove(self, item):
        super().remove(item)
        self._forget(item)

    def pop(self, index=-1):
        item = super().pop(index)
        self._forget(item)
        return item

    def clear(self):
        super().clear()
        self._counts.clear()

    def __setitem__(self, index, value):
        super().__setitem__(index, value)
        self._counts = Counter(self)

    def __delitem__(self, index):
        super().__delitem__(index)
        self._counts = Counter(self)

    def _forget(self, item):
        self._counts[item] -= 1
        if self._counts[item] <= 0:
            del self._counts[item]


def count_removed_hosts(play):
    """Give ``play`` (an ansible-core Play) a ``_removed_hosts`` whose ``in`` does not go through it
    (:class:`RemovedHosts`), with the hosts it holds; once per play."""
    removed = getattr(play, "_removed_hosts", None)
    if isinstance(removed, list) and not isinstance(removed, RemovedHosts):
        play._removed_hosts = RemovedHosts(removed)
