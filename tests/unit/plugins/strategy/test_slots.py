# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for the strategy fleetos.layering.slots: which host runs its next task, which waits off the forks."""

from __future__ import annotations

import os
import socket
from collections.abc import MutableMapping

from ansible.executor.play_iterator import IteratingStates

from ansible_collections.fleetos.layering.plugins.plugin_utils.rollout import _book, _slots
from ansible_collections.fleetos.layering.plugins.strategy import slots

T = "sha256:" + "b" * 64


class Host:
    def __init__(self, name):
        self.name = name

    def get_name(self):
        return self.name


class Task:
    def __init__(self, action="ansible.builtin.raw", op=None):
        self.action = action
        self.args = {"op": op} if op else {}


class State:
    def __init__(self, run_state, fail_state=0):
        self.run_state = run_state
        self.fail_state = fail_state


class Iterator:
    """Every host at work, but those named done or failed."""

    def __init__(self, done=(), failed=()):
        self.done, self.failed = set(done), set(failed)

    def is_failed(self, host):
        return host.name in self.failed

    def get_state_for_host(self, name):
        return State(IteratingStates.COMPLETE if name in self.done else IteratingStates.TASKS,
                     1 if name in self.failed else 0)


class Inventory:
    def get_host(self, name):
        return Host(name)


class TQM:
    _unreachable_hosts = {}
    _terminated = False


def strategy(path, forks=4, iterator=None):
    """A strategy without a task queue manager: _queue_task of the free strategy is recorded, not run."""
    module = slots.StrategyModule.__new__(slots.StrategyModule)
    module._parked, module._launched, module._books, module._fixed = [], {}, {}, {}
    module._iterator = iterator or Iterator()
    module._running = slots._Running(module)
    module._idle_since, module._looked_at, module._said_at = None, 0.0, None
    module._tqm, module._inventory = TQM(), Inventory()
    module._blocked_hosts, module._pending_results, module._workers = {}, 0, [None] * forks
    module._inside, module._acted, module._results = 0, False, []
    module._continuing, module._repeat = {}, {}

    def wall():
        return module._wall()  # as the test sets it
    module._doors = slots.Doors(clock=wall, resolve=no_names)
    module._door_at, module._trust, module._untried, module._at_door = {}, {}, set(), set()
    module.queued = []
    return module


def no_names(address, *args):
    """getaddrinfo() for numeric addresses only: a test never asks a resolver."""
    return socket.getaddrinfo(address, *args, flags=socket.AI_NUMERICHOST)


def queue(module, name, task, path, **host_vars):
    module._queue_task(Host(name), task, dict(host_vars, os_activate_book={"path": path}), None)


def write(tmp_path, book):
    path = str(tmp_path / "book.json")
    _book._write_new(path, book)
    return path


def fresh(tmp_path):
    """Pool a (1 slot): n1 holds it; n2, n3 queued. Pool b (1 slot): n4 queued."""
    book = _slots.new_book([{"host": h, "pool": p} for h, p in (("n1", "a"), ("n2", "a"), ("n3", "a"), ("n4", "b"))],
                           {"a": 1, "b": 1}, 2, now=0)
    assert _slots.try_acquire(book, "n1", 1)[0] == "granted"
    return book, write(tmp_path, book)


def patch_queue(monkeypatch):
    def fake(self, host, task, task_vars, play_context):
        self.queued.append(host.get_name())
        self._pending_results += 1
    monkeypatch.setattr(slots.FreeStrategyModule, "_queue_task", fake)


def test_a_slot_request_waits_off_the_forks_until_its_pool_has_a_free_slot(tmp_path, monkeypatch):
    patch_queue(monkeypatch)
    book, path = fresh(tmp_path)
    module = strategy(path)
    clock = [1000.0]
    module._clock = lambda: clock[0]
    acquire = Task("fleetos.layering.os_activate_slot", "acquire")
    for name in ("n3", "n2", "n4"):
        queue(module, name, acquire, path)
    # n4's pool has a free slot; n2 and n3 wait without a fork.
    assert module.queued == ["n4"]
    assert [item.host.get_name() for item in module._parked] == ["n3", "n2"]
    # n1 is verified and frees the slot: one host goes, the first in the rollout order.
    _slots.new_record(book, "n1", "finalize", T)
    _slots.record_event(book, "n1", "verified", 2)
    _slots.release(book, "n1", 2)
    os.utime(write(tmp_path, book), ns=(1, 10 ** 18))
    # Within READ_GAP of its last read the book as read answers: the new one is not read, nobody goes yet.
    clock[0] += slots.READ_GAP / 2
    module._let_go()
    assert module.queued == ["n4"] and not module._books_changed()
    clock[0] += slots.READ_GAP / 2
    assert module._books_changed()
    module._let_go()
    assert module.queued == ["n4", "n2"]
    # The slot is spoken for until n2 asks: n3 stays.
    module._let_go()
    assert module.queued == ["n4", "n2"] and len(module._parked) == 1


def test_the_hosts_of_a_full_pool_stay_parked_at_one_look_for_the_pool(tmp_path, monkeypatch):
    patch_queue(monkeypatch)
    book = _slots.new_book([{"host": "n%d" % i, "pool": "a"} for i in range(1, 41)], {"a": 1}, 2, now=0)
    assert _slots.try_acquire(book, "n1", 1)[0] == "granted"
    path = write(tmp_path, book)
    module = strategy(path)
    acquire = Task("fleetos.layering.os_activate_slot", "acquire")
    for i in range(2, 41):
        queue(module, "n%d" % i, acquire, path)
    assert module.queued == [] and len(module._parked) == 39
    looks = []
    monkeypatch.setattr(_slots, "park_reason", lambda *a: looks.append(a) or "held")
    pool_looks = []
    pool_parks = _slots.pool_parks
    monkeypatch.setattr(_slots, "pool_parks", lambda *a: pool_looks.append(a) or pool_parks(*a))
    module._let_go()
    assert len(module._parked) == 39 and looks == [] and len(pool_looks) == 1


def test_a_slot_request_asks_when_no_holder_of_its_pool_is_at_work(tmp_path, monkeypatch):
    patch_queue(monkeypatch)
    path = fresh(tmp_path)[1]
    # n1 went unreachable and left the play: nobody here frees the slot, so n2 asks (and waits in its task).
    module = strategy(path, iterator=Iterator(failed=["n1"]))
    queue(module, "n2", Task("fleetos.layering.os_activate_slot", "acquire"), path)
    assert module.queued == ["n2"] and module._parked == []


def test_a_fork_is_kept_for_each_slot_holder_between_two_tasks(tmp_path, monkeypatch):
    patch_queue(monkeypatch)
    path = fresh(tmp_path)[1]
    module = strategy(path, forks=2)
    module._pending_results = 1
    # One fork at work, one free: n1 holds a slot and is between two tasks, so the free fork is its.
    queue(module, "n4", Task("ansible.builtin.raw"), path)
    assert module.queued == [] and module._parked[0].host.get_name() == "n4"
    queue(module, "n1", Task("ansible.builtin.include_tasks"), path)
    assert module.queued == ["n1"]
    # n1's task is at work (blocked): n4 still waits for a fork; once a fork is free, n4 runs.
    module._blocked_hosts["n1"] = True
    module._let_go()
    assert module.queued == ["n1"]
    module._pending_results = 0
    module._let_go()
    assert module.queued == ["n1", "n4"] and module._parked == []


def test_tasks_outside_a_book_are_never_held(tmp_path, monkeypatch):
    patch_queue(monkeypatch)
    module = strategy(None)
    module._queue_task(Host("x"), Task("fleetos.layering.os_activate_slot", "acquire"), {}, None)
    queue(module, "y", Task(), str(tmp_path / "missing.json"))
    assert module.queued == ["x", "y"]


def test_every_parked_host_goes_when_nothing_ran_for_a_while(tmp_path, monkeypatch):
    patch_queue(monkeypatch)
    path = fresh(tmp_path)[1]
    module = strategy(path)
    queue(module, "n2", Task("fleetos.layering.os_activate_slot", "acquire"), path)
    assert module.queued == []
    clock = [100.0]
    monkeypatch.setattr(module, "_clock", lambda: clock[0])
    module._let_go()
    assert module.queued == []
    clock[0] += slots.IDLE_RELEASE
    module._let_go()
    assert module.queued == ["n2"]


def test_a_host_that_goes_first_always_asks_and_the_later_ones_wait_for_it(tmp_path, monkeypatch):
    """n2 goes first (a killed run rebooted it, and it may hold the FleetLock slot n3 waits for): n3, which came to
    its request before n2, waits off the forks until n2 asked, however long that takes; n2 asks although the pool
    is full; once n2 left the play, n3 asks."""
    patch_queue(monkeypatch)
    book = _slots.new_book([{"host": "n1", "pool": "b"}, {"host": "n2", "pool": "a", "first": True},
                            {"host": "n3", "pool": "a"}], {"a": 1, "b": 1}, 2, now=0)
    path = write(tmp_path, book)
    module = strategy(path)
    acquire = Task("fleetos.layering.os_activate_slot", "acquire")
    queue(module, "n3", acquire, path)
    queue(module, "n2", acquire, path)
    assert module.queued == ["n2"] and [item.host.get_name() for item in module._parked] == ["n3"]
    # n2 asked and holds the slot: n3 stays parked behind a holder at work.
    assert _slots.try_acquire(book, "n2", 1)[0] == "granted"
    os.utime(write(tmp_path, book), ns=(1, 10 ** 18))
    module._let_go()
    assert module.queued == ["n2"] and [item.host.get_name() for item in module._parked] == ["n3"]
    # Without n2 asking (it left the play), n3 asks: the book lets it wait SETTLE seconds, then grants it.
    book = _slots.new_book([{"host": "n2", "pool": "a", "first": True}, {"host": "n3", "pool": "a"}], {"a": 1}, 2, now=0)
    module = strategy(write(tmp_path, book), iterator=Iterator(failed={"n2"}))
    queue(module, "n3", acquire, path)
    assert module.queued == ["n3"]
    assert _slots.try_acquire(book, "n3", 1)[0] == "wait"
    assert _slots.try_acquire(book, "n3", 1 + _slots.SETTLE)[0] == "granted"
    assert _slots.park_reason(book, "n2", {"n2", "n3"}) is None


def test_a_later_host_waits_while_the_free_slot_is_spoken_for(tmp_path, monkeypatch):
    patch_queue(monkeypatch)
    book = _slots.new_book([{"host": h, "pool": "a"} for h in ("n1", "n2", "n3")], {"a": 1}, 2, now=0)
    path = write(tmp_path, book)
    module = strategy(path)
    acquire = Task("fleetos.layering.os_activate_slot", "acquire")
    # n2 is let go for the free slot; n3 comes after it and waits; n1 comes before it and asks too.
    for name in ("n2", "n3", "n1"):
        queue(module, name, acquire, path)
    assert module.queued == ["n2", "n1"] and [item.host.get_name() for item in module._parked] == ["n3"]


def test_hosts_waiting_for_a_slot_are_named_every_30_s(tmp_path, monkeypatch):
    patch_queue(monkeypatch)
    said = []
    monkeypatch.setattr(slots.display, "display", said.append)
    path = fresh(tmp_path)[1]
    module = strategy(path)
    module._pending_results = 1
    for name in ("n2", "n3"):
        queue(module, name, Task("fleetos.layering.os_activate_slot", "acquire"), path)
    clock = [100.0]
    monkeypatch.setattr(module, "_clock", lambda: clock[0])
    module._let_go()
    clock[0] = 110.0
    module._let_go()
    assert said == []
    clock[0] = 100.0 + slots.SAY_EVERY
    module._let_go()
    assert said == ["2 host(s) wait for a budget slot of pool a (n2, n3); held by n1"]


def _cached_facts(variable_manager, name):
    """A host's cached facts: a cache plugin from ansible-core 2.19 on, a mapping before."""
    cache = variable_manager._fact_cache
    return cache[name] if isinstance(cache, MutableMapping) else cache.get(name)


def test_each_host_gets_cached_facts_of_its_own_before_the_activation():
    """ansible-core 2.21 sets one mapping as the first cached facts of every host of a run_once set_fact;
    the strategy gives each host a copy, so that one host's os_activate_next is not another's."""
    from ansible.parsing.dataloader import DataLoader
    from ansible.vars.manager import VariableManager

    names = ["node01", "node02", "node03"]
    manager = VariableManager(loader=DataLoader())
    shared = {}
    for name in names:
        manager.set_host_facts(name, shared)
    # What the strategy guards against: a fact set for one host shows on the others.
    manager.set_host_facts("node01", {"probe": 1})
    assert _cached_facts(manager, "node03").get("probe") == 1

    assert slots.own_facts(manager, names + ["node04"]) == ["node02", "node03"]
    manager.set_host_facts("node01", {"os_activate_next": "post"})
    manager.set_host_facts("node02", {"os_activate_next": "health"})
    assert [_cached_facts(manager, name).get("os_activate_next") for name in names] == ["post", "health", None]
    assert slots.own_facts(manager, names) == []


def test_a_pass_looks_at_no_host_at_work_or_done():
    looked = []

    def real(host, peek=False):
        looked.append((host.name, peek))
        return "state", "task"

    module = strategy(None, iterator=Iterator(done=["n3"]))
    module._blocked_hosts["n1"] = True
    next_task = module._next_task(real)
    assert next_task(Host("n1"), peek=True) == (None, slots.BUSY) and slots.BUSY
    # A host done: no task, and no state to format for the loop's debug line.
    assert next_task(Host("n3"), peek=True) == (None, None)
    assert next_task(Host("n2"), peek=True) == ("state", "task")
    assert looked == [("n2", True)]
    # ansible-core's own looks (a result, a meta task) and every advance get the real answer.
    module._inside = 1
    assert next_task(Host("n1"), peek=True) == ("state", "task")
    module._inside = 0
    assert next_task(Host("n1")) == ("state", "task")
    assert looked == [("n2", True), ("n1", True), ("n1", False)]


def test_with_nothing_started_and_nothing_back_the_loop_waits_for_a_result(tmp_path, monkeypatch):
    module = strategy(None)
    clock = [0.0]
    module._clock = lambda: clock[0]
    slept = []

    def sleep(seconds):
        slept.append(seconds)
        clock[0] += seconds
        if len(slept) == 3:
            module._results.append("a result")
    monkeypatch.setattr(slots.time, "sleep", sleep)
    monkeypatch.setattr(slots.FreeStrategyModule, "_process_pending_results", lambda self, *a, **k: [])
    module._pending_results = 1
    module._process_pending_results(None)
    assert slept == [slots.WAIT_STEP] * 3
    # A task queued in the pass: no wait, the next pass may find more to start.
    del slept[:]
    module._results = []
    module._acted = True
    module._process_pending_results(None)
    assert slept == [] and module._acted is False
    # Nothing at work and nobody parked: no wait either (the play is ending).
    module._pending_results = 0
    module._process_pending_results(None)
    assert slept == []
    # Without a result the wait ends after LOOK_AGAIN seconds, to look at the parked hosts again.
    module._pending_results = 1
    clock[0] = 100.0
    monkeypatch.setattr(slots.time, "sleep", lambda seconds: clock.__setitem__(0, clock[0] + seconds))
    module._process_pending_results(None)
    assert 100.0 + slots.LOOK_AGAIN <= clock[0] < 100.0 + slots.LOOK_AGAIN + 2 * slots.WAIT_STEP


def test_a_host_that_reboots_waits_for_its_boot_off_the_forks_and_keeps_none(tmp_path, monkeypatch):
    patch_queue(monkeypatch)
    book, path = fresh(tmp_path)
    # n1 ran its reboot command at 100 s; this book saw a 20 s boot, so its wait starts at 116 s.
    book["shortest_boot"] = 20.0
    _slots.park_boot(book, "n1", {"before": "boot-1", "start": 100.0, "command": "reboot"})
    assert _slots.wakes_at(book, "n1") == 116.0
    path = write(tmp_path, book)
    module = strategy(path, forks=1)
    now = [110.0]
    module._wall = lambda: now[0]
    queue(module, "n1", Task("fleetos.layering.os_activate_slot", "continue"), path)
    assert module.queued == [] and module._parked[0].host.get_name() == "n1"
    # Its only fork is not kept for it while it boots: another host's task runs.
    queue(module, "n4", Task("ansible.builtin.raw"), path)
    assert module.queued == ["n4"]
    module._pending_results = 0
    # Before its wake_at, a look at the parked hosts does not read the book for it.
    looked, may_run = [], module._may_run
    module._may_run = lambda path, host, task: looked.append(host) or may_run(path, host, task)
    module._let_go()
    assert module.queued == ["n4"] and looked == []
    now[0] = 116.0
    module._let_go()
    assert module.queued == ["n4", "n1"] and module._parked == [] and looked == ["n1"]


def test_a_boot_wait_that_parked_its_host_again_runs_again_and_no_other_continue_does(tmp_path, monkeypatch):
    patch_queue(monkeypatch)
    book, path = fresh(tmp_path)
    boot = Task("fleetos.layering.os_activate_slot", "continue")
    # The continue after the pre-activate tasks runs the reboot command and parks n1: it is not a boot wait, and
    # is never run again (its condition would skip it, again and again).
    module = strategy(path, forks=3)
    module._queue_task(Host("n1"), boot, {"os_activate_book": {"path": path}}, None)
    assert module.queued == ["n1"] and module._continuing == {}
    _slots.park_boot(book, "n1", {"before": "b1", "start": 0.0, "command": "reboot"})
    path = write(tmp_path, book)
    module._boot_waits_go_on()
    assert module._repeat == {}
    # The same strategy read the book before the reboot command parked n1 (within READ_GAP): its boot wait reads
    # the book fresh, and is told that it runs again.
    module._wall = lambda: 0.0
    task_vars = {"os_activate_book": {"path": path}}
    module._queue_task(Host("n1"), boot, task_vars, None)
    assert module.queued == ["n1", "n1"] and task_vars[_slots.REPEATS_VAR] is True
    # The boot wait, with forks enough for the 2 slots and the spare ones: it waits to the end, in one run.
    module = strategy(path, forks=2 + slots.SPARE_FORKS)
    task_vars = {"os_activate_book": {"path": path}}
    module._queue_task(Host("n1"), boot, task_vars, None)
    assert module.queued == ["n1"] and _slots.REPEATS_VAR not in task_vars and module._continuing == {}
    # Fewer: the task is told that it runs again (its wait for the boot is then bounded).
    module = strategy(path, forks=3)
    module._wall = lambda: 0.0
    task_vars = {"os_activate_book": {"path": path}}
    module._queue_task(Host("n1"), boot, task_vars, None)
    assert module.queued == ["n1"] and task_vars[_slots.REPEATS_VAR] is True
    module._blocked_hosts["n1"] = True
    module._boot_waits_go_on()
    assert module._repeat == {}
    # Done, and its host parked again in the book: the same task is n1's next, its state left where it is.
    _slots.park_boot(book, "n1", {"before": "b1", "start": 0.0, "command": "reboot"}, now=10.0)
    path = write(tmp_path, book)
    module._blocked_hosts["n1"] = False
    module._boot_waits_go_on()
    looked = []
    next_task = module._next_task(lambda host, peek=False: looked.append(host.name) or ("state", "next"))
    state, task = next_task(Host("n1"), peek=True)
    assert task is boot and state.run_state == IteratingStates.TASKS and looked == []
    # Queued again, it is parked until its wake_at (12.5 s), and then no longer repeated.
    module._queue_task(Host("n1"), boot, {"os_activate_book": {"path": path}}, None)
    assert module.queued == ["n1"] and module._parked[0].host.get_name() == "n1" and module._repeat == {}
    assert next_task(Host("n1"), peek=True) == ("state", "next")
    # Done without a new wake_at (skipped, or failed before it waited), or with its host failed: run once.
    module._blocked_hosts["n1"] = False
    module._boot_waits_go_on()
    assert module._repeat == {} and module._continuing == {}
    module._continuing = {"n1": (path, boot, 0.0)}
    _slots.unpark_boot(book, "n1")
    path = write(tmp_path, book)
    module._boot_waits_go_on()
    assert module._repeat == {} and module._continuing == {}
    _slots.park_boot(book, "n1", {"before": "b1", "start": 0.0, "command": "reboot"}, now=20.0)
    path = write(tmp_path, book)
    module._iterator = Iterator(failed=["n1"])
    module._continuing = {"n1": (path, boot, 0.0)}
    module._boot_waits_go_on()
    assert module._repeat == {}


def door(port=0):
    """A listening socket on loopback (a host's sshd), on ``port`` or a free one."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", port))
    server.listen(8)
    return server


def test_a_host_whose_port_answered_before_its_reboot_waits_off_the_forks_until_it_answers_again(tmp_path, monkeypatch):
    patch_queue(monkeypatch)
    book, path = fresh(tmp_path)
    module = strategy(path, forks=1)
    now = [90.0]
    module._wall = lambda: now[0]
    server = door()
    port = server.getsockname()[1]
    try:
        # n1 asks for its slot (it holds it): its port answers, so its boot wait will wait for the port.
        queue(module, "n1", Task("fleetos.layering.os_activate_slot", "acquire"), path,
              ansible_host="127.0.0.1", ansible_port=port)
        assert module.queued == ["n1"] and module._trust == {"n1": True}
    finally:
        server.close()
    module._pending_results = 0
    book["shortest_boot"] = 20.0
    _slots.park_boot(book, "n1", {"before": "boot-1", "start": 100.0, "command": "reboot"})
    path = write(tmp_path, book)
    # Past its wake_at (116 s), its port does not answer: it stays parked, and keeps no fork.
    now[0] = 116.0
    queue(module, "n1", Task("fleetos.layering.os_activate_slot", "continue"), path)
    assert module.queued == ["n1"] and module._parked[0].host.get_name() == "n1" and module._at_door == {"n1"}
    queue(module, "n4", Task("ansible.builtin.raw"), path)
    assert module.queued == ["n1", "n4"]
    module._pending_results = 0
    now[0] = 130.0
    module._let_go()
    assert module.queued == ["n1", "n4"]
    # Its sshd is back: the next look lets its boot wait run.
    server = door(port)
    try:
        now[0] = 131.0
        module._let_go()
    finally:
        server.close()
    assert module.queued == ["n1", "n4", "n1"] and module._parked == [] and module._at_door == set()


def test_a_boot_wait_at_a_shut_port_runs_after_door_wait_and_an_untried_port_is_not_waited_for(tmp_path, monkeypatch):
    patch_queue(monkeypatch)
    book, path = fresh(tmp_path)
    server = door()
    port = server.getsockname()[1]
    server.close()
    module = strategy(path, forks=2)
    now = [90.0]
    module._wall = lambda: now[0]
    # n1's port does not answer while it is up (reached another way): its boot wait starts at its wake_at.
    queue(module, "n1", Task("fleetos.layering.os_activate_slot", "acquire"), path,
          ansible_host="127.0.0.1", ansible_port=port)
    # n4 is not reached over ssh: never knocked on.
    queue(module, "n4", Task("fleetos.layering.os_activate_slot", "acquire"), path, ansible_connection="local")
    assert module._trust == {"n1": False, "n4": False} and not module._doors.knocking()
    _slots.park_boot(book, "n1", {"before": "boot-1", "start": 100.0, "command": "reboot"})
    path = write(tmp_path, book)
    module._pending_results = 0
    now[0] = 100.0
    queue(module, "n1", Task("fleetos.layering.os_activate_slot", "continue"), path)
    assert module.queued == ["n1", "n4", "n1"]
    # A port that answered, shut since: its boot wait runs DOOR_WAIT seconds after its wake_at all the same.
    module._trust["n1"], module._door_at["n1"] = True, ("127.0.0.1", port)
    module._pending_results = 0
    queue(module, "n1", Task("fleetos.layering.os_activate_slot", "continue"), path)
    assert module.queued == ["n1", "n4", "n1"] and module._at_door == {"n1"}
    now[0] = 100.0 + slots.DOOR_WAIT
    module._let_go()
    assert module.queued == ["n1", "n4", "n1", "n1"] and module._at_door == set()


def test_hosts_parked_for_their_boot_are_not_a_stall(tmp_path, monkeypatch):
    patch_queue(monkeypatch)
    book, path = fresh(tmp_path)
    _slots.park_boot(book, "n1", {"before": "boot-1", "start": 100.0, "command": "reboot"})
    book["hosts"]["n1"]["boot"]["wake_at"] = 200.0
    path = write(tmp_path, book)
    module = strategy(path)
    module._wall = lambda: 150.0
    queue(module, "n1", Task("fleetos.layering.os_activate_slot", "continue"), path)
    queue(module, "n2", Task("fleetos.layering.os_activate_slot", "acquire"), path)
    assert module.queued == [] and len(module._parked) == 2
    clock = [100.0]
    monkeypatch.setattr(module, "_clock", lambda: clock[0])
    module._let_go()
    clock[0] += slots.IDLE_RELEASE
    module._let_go()
    # Nothing at work for IDLE_RELEASE seconds, but n1 waits for its boot: n2 is not let go to wait in its task.
    assert module.queued == [] and len(module._parked) == 2
