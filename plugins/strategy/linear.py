# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
name: linear
short_description: ansible-core's linear strategy, waiting for a free fork without polling for one
version_added: 0.3.0
description:
  - ansible-core's C(linear) strategy (every host runs a task before any host runs the next one), with two
    differences in how the controller waits. While every fork is busy, it waits for one of them to end instead of
    looking at every fork again ten thousand times a second - on a play of more hosts than forks, ansible-core's
    loop keeps a core of the controller busy for as long as the forks are full; here that core is left to the
    forks. While it waits for the results of a task, it looks for one every 5 ms instead of every millisecond
    (ansible-core's C(internal_poll_interval)).
  - It keeps the hosts the play removed (ended, failed or unreachable) in a list whose membership test does not go
    through the list. ansible-core tests every host of the play against that list each time it gives a host a task,
    so with a plain list a large play whose hosts end or fail costs more per task the more hosts it removed.
  - It forks each task's worker with the controller's heap frozen (Python's C(gc.freeze)), as
    C(fleetos.layering.slots) does. A worker's garbage collector then leaves alone what it inherited (the inventory,
    every host's variables and facts), where a full collection would walk all of it and copy the pages it touches
    into the worker. At 1,000 hosts that took about 0.9 s of a worker's CPU per such collection.
  - What runs, and in what order, is what C(linear) runs.
  - The plays of C(fleetos.layering.rollout) and C(fleetos.layering.rollback) that contact every host (the plan's
    read and lease, the stage's start, and the short plays of a few hosts between them) run with it, unless
    C(fleetos_rollout_strategy) is C(free) - then they run with ansible-core's C(linear).
author:
  - fleetos.layering contributors (@fleetos)
notes:
  - The controller's CPU a rollout spends, with and without it, is in the collection's C(docs/rollout.md).
"""

from ansible.plugins.strategy.linear import StrategyModule as LinearStrategyModule

from ansible_collections.fleetos.layering.plugins.plugin_utils.rollout._workers import (
    count_removed_hosts,
    heap_frozen,
    tender,
    wait_for_a_result,
    wait_for_a_worker,
)


class StrategyModule(LinearStrategyModule):
    """ansible.builtin.linear, with a blocking wait for a free fork, and fewer looks for a result."""

    _waiting = False

    def _terminated(self):
        return self._tqm._terminated

    def run(self, iterator, play_context):
        count_removed_hosts(iterator._play)
        return super().run(iterator, play_context)

    def _queue_task(self, host, task, task_vars, play_context):
        wait_for_a_worker(self._workers, self._terminated, tender(self))
        with heap_frozen():
            super()._queue_task(host, task, task_vars, play_context)

    def _wait_on_pending_results(self, iterator):
        self._waiting = True
        try:
            return super()._wait_on_pending_results(iterator)
        finally:
            self._waiting = False

    def _process_pending_results(self, iterator, one_pass=False, max_passes=None):
        # Only inside the wait for the results of a task: between two hosts queued, linear takes what came back
        # without a wait.
        if self._waiting:
            wait_for_a_result(self._results, self._terminated, tender(self))
        return super()._process_pending_results(iterator, one_pass=one_pass, max_passes=max_passes)
