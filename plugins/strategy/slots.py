# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
name: slots
short_description: Each host moves on its own; a host waiting for a budget slot holds no fork
version_added: 0.3.0
description:
  - The strategy of the activation plays of C(fleetos.layering.rollout) and C(fleetos.layering.rollback).
    It is ansible-core's C(free) strategy (each host runs its tasks as fast as it can, with no wait for the
    other hosts) with one difference - a host whose next task asks for a budget slot
    (C(fleetos.layering.os_activate_slot) with O(fleetos.layering.os_activate_slot#module:op=acquire)) while
    every slot of its pool is held by a host still at work in the play is parked - it is not given a fork -
    until a slot of its pool is freed. Parked hosts are let go in the pool's rollout order, as many as there
    are free slots.
  - A fork is kept for every slot holder between two of its tasks - another host's task waits while the free
    forks are no more than those holders - so that a host that holds a slot always finds a fork for its next
    step, and hooks between the steps of an activation cannot stall a slot.
  - A host that reboots holds its slot but no fork - C(fleetos.layering.os_activate_slot) leaves the wait for the
    new boot to its next task (O(fleetos.layering.os_activate_slot#module:park_boot)), which is parked until four
    fifths of the shortest boot the run has seen went by since the reboot command. No fork is kept for it
    meanwhile. With fewer forks than the budget slots of the run plus 2, that wait gives its fork back every 6
    seconds - the task parks the host again for a quarter of its boot so far, 2 to 6 seconds - and the strategy
    runs the same task again.
  - Past that time, a host reached over ssh whose ssh port answered a knock when it asked for its slot stays
    parked until its port answers again - the strategy knocks on it about every second, without a fork (a TCP
    connection, closed at once, as C(ansible.builtin.wait_for) does; the host's sshd may log it) - or for 180
    seconds at most, after which its wait runs all the same (it ends the wait at its timeout). So a boot of up to
    three minutes costs one run of the wait, not one every few seconds. A host whose port stays shut is found
    failed at its reboot timeout, or 180 seconds after its wait was due if that timeout is shorter. A host whose
    ssh arguments (its variables C(ansible_ssh_common_args), C(ansible_ssh_extra_args), C(ansible_ssh_args)) name
    a ProxyCommand or a ProxyJump, whose address or port is a template, or whose port did not answer, is not
    knocked on. A jump host set in ssh's own configuration (C(~/.ssh/config)) is not seen - the host's address is
    knocked on, and if it does not answer the host is waited for as before.
  - So a rollout needs no more forks than the hosts that run a step at the same time (the hosts that hold a
    slot, plus those that stage or read), not one per host, and needs no C(serial) - the hosts of a pool take
    its slots one after the other, whatever the forks.
  - Every 30 seconds while hosts wait for a slot, one line per pool names them and the hosts that hold the pool's
    slots.
  - Its loop costs the controller less than C(free)'s, which looks at the next task of every host of the play
    about once a millisecond - most of the controller's CPU in a rollout, and more the more hosts wait. It does
    not look again at a host at work or done, and when nothing was started and nothing came back it waits for a
    result (or a write of a book of slots, or a second) before it looks again. What runs is what C(free) runs.
  - It keeps the hosts the play removed (a host ended after its verified activation, a failed or unreachable
    one) in a list whose membership test does not go through the list. ansible-core tests every host of the play
    against that list each time it gives a host a task; at 1,000 hosts, 900 of them ended, a plain list made that
    about 10 ms per task.
  - A host that asks when no holder of its pool is at work in the play (the slots are held by hosts that did
    not come back, or by another run through FleetLock) is not parked - it asks and waits in its task, up to
    the slot timeout, as with any other strategy.
author:
  - fleetos.layering contributors (@fleetos)
notes:
  - Like C(free), it does not support C(run_once) tasks, C(any_errors_fatal) or C(max_fail_percentage) in the
    play; the book of slots stops the activation at C(max_failures).
  - The forks a run needs, and the controller's memory, are in the collection's C(docs/rollout.md).
"""

import os
import time
from collections import namedtuple
from collections.abc import MutableMapping

from ansible.executor.play_iterator import IteratingStates
from ansible.plugins.strategy.free import StrategyModule as FreeStrategyModule
from ansible.utils.display import Display

from ansible_collections.fleetos.layering.plugins.plugin_utils.rollout import _slots
from ansible_collections.fleetos.layering.plugins.plugin_utils.rollout._book import Book
from ansible_collections.fleetos.layering.plugins.plugin_utils.rollout._door import Doors, door_of
from ansible_collections.fleetos.layering.plugins.plugin_utils.rollout._workers import (
    count_removed_hosts,
    heap_frozen,
    tender,
    wait_for_a_result,
    wait_for_a_worker,
)

display = Display()

# The task a host is parked before: the one that asks for a budget slot.
GATE_ACTIONS = ("fleetos.layering.os_activate_slot", "os_activate_slot")
# With parked hosts and no task at work for this long, every parked host is let go (it asks, and
# its task waits or is refused): a safety net, never the rule.
IDLE_RELEASE = 30.0
# Seconds between two looks at the parked hosts when no result came in and no book changed (a
# holder may have left the play).
LOOK_AGAIN = 1.0
# Seconds between two lines that name the hosts waiting for a budget slot and the hosts that hold them.
SAY_EVERY = 30.0
# Seconds between two looks for a result while nothing was started and nothing came back.
WAIT_STEP = 0.005
# Seconds a book as read answers the strategy's looks at the parked hosts and the free forks after its file was
# written again: at a thousand hosts the book changes every few milliseconds, and each read parses it. What a
# host's own last step wrote (a parked boot's wake_at) is always read fresh.
READ_GAP = 0.25
# Forks beyond the budget slots of a book (for the stages to collect and the hosts to read meanwhile): with
# fewer, a boot wait gives its fork back every _slots.BOOT_SLICE seconds, and runs again.
SPARE_FORKS = 2
# A host parked for its new boot whose ssh port answered a knock before its reboot: its boot wait runs when the
# port answers again, or DOOR_WAIT seconds after its wake_at (the boot wait then ends the wait, by its timeout),
# and the port is knocked on every KNOCK_GAP seconds at most. Longer than most boots: a boot wait run while the
# port is still shut runs again (with fewer forks than slots, every BOOT_SLICE), one more task for the host; at 30 s,
# about half of the hosts of boots drawn from 40-90 s ran theirs twice.
DOOR_WAIT = 180.0
KNOCK_GAP = 0.5


class _Busy:
    """What a look at the next task of a host at work answers: it has work (the result it waits for)."""

    def __bool__(self):
        return True

    def __str__(self):
        return "(the host is at work)"


BUSY = _Busy()

# A host waiting without a fork: its book's path, whether its task asks for a slot (``gate``) or waits for its new
# boot (``boot``), the wall time before which that boot wait is not looked at (``wake``, its wake_at when parked for
# it, else None), and what ansible-core queues.
_Parked = namedtuple("_Parked", "path gate boot wake host task task_vars play_context")


def _wake_of(book, name):
    """The wake_at of ``name`` in ``book`` (None when there is no book, or the host has no parked boot wait)."""
    return book.wakes_at(name) if book is not None else None


def own_facts(variable_manager, names):
    """Give each host of ``names`` a mapping of cached facts of its own: -> the hosts that shared one.

    ansible-core 2.21 hands every host of a C(run_once) C(set_fact) or C(debug) task one and the same
    (empty) mapping as its first cached facts, and later adds a host's facts to that mapping in place:
    from then on the C(ansible_facts) an action returns for one host (C(os_activate_next),
    C(os_activate_result)) are every host's, and a host runs another host's next step. Earlier cores
    copied the facts for each host."""
    cache = getattr(variable_manager, "_fact_cache", None)
    if cache is None:
        return []
    # A cache plugin (ansible-core 2.19 and later: get raises KeyError, set) or a mapping (before).
    plugin = hasattr(cache, "set") and not isinstance(cache, MutableMapping)
    seen, shared = set(), []
    for name in names:
        try:
            facts = cache.get(name) if plugin else cache[name]
        except KeyError:
            continue
        if id(facts) in seen:
            shared.append(name)
            if plugin:
                cache.set(name, dict(facts))
            else:
                cache[name] = dict(facts)
        seen.add(id(facts))
    return shared


class _Running:
    """The hosts still at work in the play (neither done, failed nor unreachable), looked up one by one."""

    def __init__(self, strategy):
        self._strategy = strategy

    def __contains__(self, name):
        strategy = self._strategy
        iterator = strategy._iterator
        if iterator is None or strategy._tqm._unreachable_hosts.get(name):
            return False
        host = strategy._inventory.get_host(name)
        if host is None or iterator.is_failed(host):
            return False
        try:
            return iterator.get_state_for_host(name).run_state != IteratingStates.COMPLETE
        except KeyError:
            return False


class StrategyModule(FreeStrategyModule):
    """ansible-core's free strategy; hosts waiting for a budget slot wait off the forks, and a fork is
    kept for each slot holder between two of its tasks."""

    _clock = staticmethod(time.monotonic)
    # The book's times (a parked boot's wake_at) are the workers' wall clock.
    _wall = staticmethod(time.time)

    def __init__(self, tqm):
        super().__init__(tqm)
        self._parked = []        # [_Parked], in the order parked
        self._launched = {}      # book path -> hosts let go to ask, not seen holding or done yet
        self._books = {}         # book path -> (file identity, book, when read)
        self._fixed = {}         # book path -> (each host's place in the rollout order, the book's slots)
        self._iterator = None
        self._running = _Running(self)
        self._idle_since = None
        self._looked_at = 0.0
        self._said_at = None
        self._inside = 0         # > 0 while ansible-core's own code handles a result or a meta task
        self._continuing = {}    # host -> (book path, the boot wait it runs, its wake_at), at work or parked
        self._repeat = {}        # host -> the op continue task it runs again (its boot wait goes on)
        self._acted = False      # a task was queued, parked or run since the last look for results
        self._doors = Doors(clock=self._wall)
        self._door_at = {}       # host -> its ssh (address, port), knocked on before its reboot
        self._trust = {}         # host -> whether its port answered that knock
        self._untried = set()    # hosts whose knock before the reboot has no answer yet
        self._at_door = set()    # hosts parked for their new boot while their port does not answer

    def run(self, iterator, play_context):
        self._iterator = iterator
        count_removed_hosts(iterator._play)
        own_facts(self._variable_manager, [host.get_name() for host in self._inventory.get_hosts(iterator._play.hosts)])
        iterator.get_next_task_for_host = self._next_task(iterator.get_next_task_for_host)
        try:
            return super().run(iterator, play_context)
        finally:
            del iterator.get_next_task_for_host
            self._doors.close()

    # -- the cost of a pass ------------------------------------------------------------

    def _next_task(self, real):
        """ansible-core's C(free) loop looks at the next task of every host of the play on every pass, about
        once a millisecond: a copy and a walk of the host's state each, most of the controller's CPU in a
        rollout (a host at work or done answers the same on every pass). Between its own passes the loop only
        asks whether a host has work: a host at work answers that it has (the result it waits for), a host done
        that it has none, without a copy. ansible-core's own looks (a failed result, a meta task) get the real
        answer."""
        def next_task(host, peek=False):
            if peek and not self._inside:
                name = host.get_name()
                if self._blocked_hosts.get(name, False):
                    return None, BUSY
                try:
                    state = self._iterator.get_state_for_host(name)
                except KeyError:
                    state = None
                if state is not None and state.run_state == IteratingStates.COMPLETE:
                    # Without its state: the loop uses a host's state only to queue its task, and formats it for a
                    # debug line on every pass (2.5% of the main process's samples at 1,000 hosts, most of them done).
                    return None, None
                if state is not None and name in self._repeat:
                    # The host's state stays where it is (the task after this one): the free loop sets it back.
                    return state, self._repeat[name]
            return real(host, peek=peek)
        return next_task

    def _execute_meta(self, task, play_context, iterator, target_host):
        self._acted = True
        self._inside += 1
        try:
            return super()._execute_meta(task, play_context, iterator, target_host)
        finally:
            self._inside -= 1

    def _await_change(self):
        """Nothing was started and nothing came back, and hosts are at work or parked: wait for a result (its host may go
        on), a book with parked hosts written, or LOOK_AGAIN seconds, instead of another pass over every host of the
        play; meanwhile, answer the workers' requests (ansible-core 2.22)."""
        wait_for_a_result(self._results, lambda: self._tqm._terminated, tender(self), timeout=LOOK_AGAIN,
                          step=WAIT_STEP, clock=self._clock, sleep=time.sleep,
                          also=lambda: bool(self._parked) and self._books_changed())

    # -- the book ----------------------------------------------------------------------

    @staticmethod
    def _book_path(task_vars):
        """The path of the book of slots the host's play activates with, or None."""
        book = (task_vars or {}).get("os_activate_book")
        path = book.get("path") if isinstance(book, dict) else None
        return path if isinstance(path, str) and path else None

    @staticmethod
    def _is_gate(task):
        """Whether ``task`` asks for a budget slot."""
        return task.action in GATE_ACTIONS and (task.args or {}).get("op") == "acquire"

    @staticmethod
    def _is_continue(task):
        """Whether ``task`` takes an activation on (the wait for a new boot among them)."""
        return task.action in GATE_ACTIONS and (task.args or {}).get("op") == "continue"

    @staticmethod
    def _identity(path):
        """What changes when the book's file is replaced (every write replaces it), or None without a file."""
        try:
            stat = os.stat(path)
        except OSError:
            return None
        return (stat.st_ino, stat.st_mtime_ns, stat.st_size)

    def _read_book(self, path, fresh=False):
        """The book at ``path``, or None: read again when its file was replaced, READ_GAP seconds after the last
        read at the soonest unless ``fresh``."""
        cached = self._books.get(path)
        # Within READ_GAP, no look at the file either: a look at the parked hosts asks once per host.
        if cached and not fresh and self._clock() - cached[2] < READ_GAP:
            return cached[1]
        identity = self._identity(path)
        if identity is None:
            return None
        if cached and cached[0] == identity:
            return cached[1]
        try:
            book = Book.read(path)
        except _slots.SlotError:
            return None
        # Each host's place in the rollout order (every look at the parked hosts) and the slots of all pools, once
        # per book: its hosts, their order and the budgets do not change.
        if path not in self._fixed:
            self._fixed[path] = ({h: i for i, h in enumerate(book.order)}, book.slot_count())
        self._books[path] = (identity, book, self._clock())
        return book

    # -- the decisions -----------------------------------------------------------------

    def _may_run(self, path, host, task):
        """Whether ``host`` may run ``task`` now: -> (yes, why it waits). A boot wait reads the book fresh: the host's
        last step may have parked it."""
        book = self._read_book(path, fresh=self._is_continue(task))
        if book is None or host not in book:
            return True, None
        if self._is_gate(task):
            return self._may_ask(path, book, host)
        wake = book.wakes_at(host)
        if wake is not None and self._is_continue(task):
            now = self._wall()
            if now < wake:
                return False, "it reboots, and its wait for the new boot starts in %.0f s" % (wake - now)
            if self._door_shut(host, wake, now):
                self._at_door.add(host)
                return False, "it reboots, and its ssh port does not answer yet"
        self._at_door.discard(host)
        return self._fork_free(book, host)

    def _door_shut(self, host, wake, now):
        """Whether the boot wait of ``host``, past its ``wake``, waits on: its port answered a knock before the reboot,
        has not answered one since ``wake``, and DOOR_WAIT seconds have not gone by since. Knocks again, KNOCK_GAP
        seconds after the last knock at the soonest."""
        if not self._trust.get(host) or now - wake >= DOOR_WAIT:
            return False
        if self._doors.answer(host, since=now - KNOCK_GAP) is None and self._doors.knock(host, self._door_at[host]):
            self._doors.settle()
        return not self._doors.answer(host, since=wake)

    def _knock_before_reboot(self, name, task_vars, play_context):
        """Knock once on the ssh port of a host that asks for its slot (it is up): if it answers, the host's boot
        wait will wait for it to answer again, off the forks."""
        if name in self._trust or name in self._untried:
            return
        door = door_of(task_vars, name, getattr(play_context, "connection", None))
        if door is not None and self._doors.knock(name, door):
            self._door_at[name] = door
            self._untried.add(name)
            self._settle_knocks()
        else:
            self._trust[name] = False

    def _settle_knocks(self):
        """Look at the knocks under way; a host's first answer says whether its port can be knocked on."""
        if self._doors.knocking():
            self._doors.settle()
        for name in [h for h in self._untried if self._doors.answer(h) is not None]:
            self._untried.discard(name)
            self._trust[name] = self._doors.answer(name)

    def _may_ask(self, path, book, host):
        """The slot request: it waits while every slot of its pool is held by a host at work, or spoken for."""
        reason = book.park_reason(host, self._running)
        if reason is not None:
            return False, reason
        launched = self._launched.setdefault(path, set())
        launched.intersection_update(h for h in launched if book.state(h) in ("queued", "waiting"))
        if book.state(host) not in ("queued", "waiting"):
            return True, None
        pool = book.pool(host)
        # Slots let go to hosts that have not asked yet are spoken for, but not against a host before them in the
        # rollout order: the book serves the waiting hosts in that order, and a host that goes first (a host a
        # killed run rebooted, which may hold the FleetLock slot the others need) must be able to ask.
        place = self._fixed[path][0]
        spoken = [h for h in launched if book.pool(h) == pool and h != host]
        ahead = all(place[host] < place[h] for h in spoken)
        if book.free_slots(pool) - len(spoken) > 0 or ahead:
            launched.add(host)
            return True, None
        return False, "the free slots of pool %s are spoken for" % pool

    def _fork_free(self, book, host):
        """Any other task: it waits while the free forks are no more than the slot holders between two tasks
        (a holder always finds a fork for its next step, so that hooks cannot stall a slot)."""
        if book.state(host) == "holding":
            return True, None
        # A holder that reboots with no fork (its boot wait parked) needs none before its wake_at.
        now = self._wall()
        idle = [h for h in book.holding() if not self._blocked_hosts.get(h, False) and h in self._running
                and not (book.wakes_at(h) or 0) > now and h not in self._at_door]
        if self._pending_results + len(idle) < len(self._workers):
            return True, None
        return False, "the free forks are kept for the slot holders %s" % ", ".join(sorted(idle))

    # -- the strategy's hooks ----------------------------------------------------------

    def _queue_task(self, host, task, task_vars, play_context):
        self._acted = True
        path = self._book_path(task_vars)
        wake = None
        if path is not None and self._is_continue(task):
            # A boot wait (an op continue of a host the book has parked in its reboot): with fewer forks than the
            # slots need, it ends within _slots.BOOT_SLICE and parks the host again, and it runs again here.
            name = host.get_name()
            self._repeat.pop(name, None)
            wake = _wake_of(self._read_book(path, fresh=True), name)
            if wake is not None and len(self._workers) < self._fixed[path][1] + SPARE_FORKS:
                task_vars[_slots.REPEATS_VAR] = True
                self._continuing[name] = (path, task, wake)
        if path is not None:
            gate = self._is_gate(task)
            if gate:
                self._knock_before_reboot(host.get_name(), task_vars, play_context)
            yes, reason = self._may_run(path, host.get_name(), task)
            if not yes:
                display.vvv("%s waits without a fork: %s" % (host.get_name(), reason))
                # A boot wait parked before its wake_at (read above, fresh) is not looked at before it.
                boot = self._is_continue(task)
                wake = wake if boot and wake is not None and wake > self._wall() else None
                self._parked.append(_Parked(path, gate, boot, wake, host, task, task_vars, play_context))
                return
        self._start(host, task, task_vars, play_context)

    def _start(self, host, task, task_vars, play_context):
        """Queue the task (ansible-core forks a worker for it) with the controller's heap frozen (``heap_frozen``).
        While every fork is busy it waits for one to end (ansible-core's loop would poll for one)."""
        wait_for_a_worker(self._workers, lambda: self._tqm._terminated, tender(self))
        with heap_frozen():
            super()._queue_task(host, task, task_vars, play_context)

    def _process_pending_results(self, iterator, one_pass=False, max_passes=None):
        self._inside += 1
        try:
            results = super()._process_pending_results(iterator, one_pass=one_pass, max_passes=max_passes)
        finally:
            self._inside -= 1
        if results and self._continuing:
            self._boot_waits_go_on()
        if self._doors.knocking() or self._untried:
            self._settle_knocks()
        if self._parked and (results or self._books_changed() or self._clock() - self._looked_at >= LOOK_AGAIN):
            self._let_go()
        if not results and not self._acted and (self._pending_results > 0 or self._parked):
            self._await_change()
        self._acted = False
        return results

    def _boot_waits_go_on(self):
        """A boot wait that is done, whose host its task parked again in the book (a new wake_at: the wait goes on),
        runs again as the host's next task; a host whose task failed (its rescue) or that left the play does not."""
        for name, (path, task, wake) in list(self._continuing.items()):
            if self._blocked_hosts.get(name, False):
                continue
            del self._continuing[name]
            if _wake_of(self._read_book(path, fresh=True), name) in (None, wake) or name not in self._running:
                continue
            try:
                state = self._iterator.get_state_for_host(name)
            except KeyError:
                continue
            if state.run_state == IteratingStates.TASKS and not state.fail_state:
                self._repeat[name] = task

    def _books_changed(self):
        """Whether a book with parked hosts was written since it was read, READ_GAP seconds ago or more (one stat
        per book)."""
        for path in set(item.path for item in self._parked):
            identity = self._identity(path)
            cached = self._books.get(path)
            if identity is None or not cached or cached[0] != identity and self._clock() - cached[2] >= READ_GAP:
                return True
        return False

    def _let_go(self):
        """Queue the parked hosts that may run now: slot requests in their pools' rollout order, first."""
        # Hosts parked for their new boot wait for a time, or for their port: not a stall.
        busy = self._pending_results > 0 or any(item.boot for item in self._parked)
        now = self._looked_at = self._clock()
        wall = self._wall()
        if busy:
            self._idle_since = None
        elif self._idle_since is None:
            self._idle_since = now
        stuck = self._idle_since is not None and now - self._idle_since >= IDLE_RELEASE
        waiting, full = [], {}
        for item in self._order(self._parked):
            path, gate, host = item.path, item.gate, item.host.get_name()
            # A boot wait parked before its wake_at: only the host's own task writes that time, and it is not at
            # work; the book is not read for it. With a thousand hosts, most of the parked hosts reboot.
            if not stuck and (gate and self._pool_full(path, host, full) or item.wake is not None and wall < item.wake):
                waiting.append(item)
                continue
            if stuck or self._may_run(path, host, item.task)[0]:
                self._acted = True
                self._start(item.host, item.task, item.task_vars, item.play_context)
            else:
                waiting.append(item)
        self._parked = waiting
        self._say(now)

    def _pool_full(self, path, host, full):
        """Whether ``host``, parked before its slot request, stays parked because every slot of its pool is held
        by a host at work (_slots.pool_parks), looked at once per pool and look at the parked hosts (``full``
        keeps the answers): with a thousand hosts waiting, a look per host reads the whole book a thousand
        times."""
        book = self._read_book(path)
        if book is None or book.state(host) not in ("queued", "waiting") or book.goes_first(host):
            return False
        key = (path, book.pool(host))
        if key not in full:
            full[key] = book.pool_parks(key[1], self._running)
        return full[key]

    def _say(self, now):
        """Every SAY_EVERY seconds while hosts wait for a slot: which, and who holds their pools' slots."""
        gates = [item for item in self._parked if item.gate]
        if not gates:
            self._said_at = None
            return
        if self._said_at is None:
            self._said_at = now
        if now - self._said_at < SAY_EVERY:
            return
        self._said_at = now
        by_pool = {}
        for item in gates:
            book, name = self._books.get(item.path, (None, None))[1], item.host.get_name()
            by_pool.setdefault((item.path, book.pool(name) if book and name in book else None), []).append(name)
        for (path, pool), hosts in sorted(by_pool.items(), key=lambda pair: str(pair[0][1])):
            book = self._books.get(path, (None, None))[1]
            held = book.holders(pool) if book and pool is not None else []
            display.display("%d host(s) wait for a budget slot of pool %s (%s); held by %s" % (
                len(hosts), pool, ", ".join(hosts[:10]) + (" and %d more" % (len(hosts) - 10) if len(hosts) > 10 else ""),
                ", ".join(held) or "nobody"))

    def _order(self, parked):
        """Slot requests first, each book's in its rollout order; then the other tasks as they were parked."""
        def position(item):
            places = self._fixed.get(item.path, ({}, 0))[0]
            return (0 if item.gate else 1, places.get(item.host.get_name(), len(places)) if item.gate else len(places))
        return sorted(parked, key=position)
