# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for the os_activate_slot action plugin: a book on disk, a fake clock, a fake FleetLock."""

from __future__ import annotations

import os
import tempfile
from unittest.mock import MagicMock

import pytest

from ansible.playbook.task import Task
from ansible_collections.fleetos.layering.plugins.action import os_activate_slot

T = "sha256:" + "b" * 64
URL = "http://198.51.100.1:8080/"


@pytest.fixture(autouse=True)
def books_in_tmp_path(tmp_path, monkeypatch):
    """The books this module opens go to the test's own directory, not the machine's /tmp."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))


class World:
    """The clock, the sleeps and FleetLock's answers (a list of statuses for pre-reboot)."""

    def __init__(self, answers=()):
        self.now = 1000.0
        self.sleeps = []
        self.answers = list(answers)
        self.calls = []

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds

    def module(self, module_name, module_args, task_vars):
        self.calls.append((module_name, module_args["url"], module_args["body"]["client_params"]))
        status = self.answers.pop(0) if self.answers else 200
        return {"status": status, "failed": status != 200}


def run(world, host="n1", controller=None, **args):
    task = MagicMock(Task)
    task.args = args
    task.async_val = 0
    task.check_mode = False
    connection = MagicMock()
    connection._shell.tmpdir = None
    action = os_activate_slot.ActionModule(task, connection, MagicMock(), MagicMock(), MagicMock(), MagicMock())
    action._clock = lambda: world.now
    action._sleep = world.sleep
    action._execute_module = world.module
    if controller:
        action._controller = controller
    return action.run(task_vars={"inventory_hostname": host})


def open_book(world, budgets=None, **args):
    hosts = [{"host": "n1", "pool": "a"}, {"host": "n2", "pool": "a"}]
    result = run(world, op="open", hosts=hosts, budgets=budgets or {"a": 1}, **args)
    assert not result.get("failed"), result
    return result["book"]


def test_a_host_waits_for_the_slot_and_gets_it_when_it_is_freed():
    world = World()
    book = open_book(world)
    first = run(world, "n1", op="acquire", book=book, target_digest=T)
    assert first["granted"] and first["ansible_facts"]["os_activate_result"]["status"] == "started"
    # n2 waits until its timeout: n1 holds the pool's only slot.
    second = run(world, "n2", op="acquire", book=book, target_digest=T, timeout=2, poll_interval=0.5)
    assert not second["granted"] and second["reason"] == "no budget slot of pool a was freed within 2 s (held by n1)"
    assert world.sleeps == [0.5] * 4
    run(world, "n1", op="event", book=book, event="verified")
    released = run(world, "n1", op="release", book=book)
    assert released["ansible_facts"]["os_activate_result"]["status"] == "activated"
    summary = run(world, op="close", book=book)["ansible_facts"]["os_activate_summary"]
    assert summary["started"] == ["n1"] and summary["not_activated"] == ["n2"] and summary["most_held"] == {"a": 1}
    assert not os.path.exists(book)


def test_fleetlock_is_asked_from_the_host_until_it_grants_and_freed_after():
    world = World(answers=[409, 409, 200])
    book = open_book(world)
    result = run(world, "n1", op="acquire", book=book, target_digest=T, fleetlock_url=URL, fleetlock_group="blue",
                 fleetlock_retry_delay=2)
    assert result["granted"] and result["changed"] and world.sleeps == [2, 2]
    assert world.calls[0] == ("ansible.legacy.uri", "http://198.51.100.1:8080/v1/pre-reboot", {"id": "n1", "group": "blue"})
    run(world, "n1", op="event", book=book, event="verified")
    released = run(world, "n1", op="release", book=book, fleetlock_url=URL, fleetlock_group="blue")
    assert released["unlocked"] and world.calls[-1][1] == "http://198.51.100.1:8080/v1/steady-state"


def test_fleetlock_that_never_grants_gives_the_slot_back_and_stops_the_run():
    world = World(answers=[409] * 10)
    book = open_book(world)
    result = run(world, "n1", op="acquire", book=book, target_digest=T, fleetlock_url=URL, fleetlock_timeout=4,
                 fleetlock_retry_delay=1)
    assert not result["granted"] and result["reason"].startswith("FleetLock gave no slot within 4 s (n1 refused")
    second = run(world, "n2", op="acquire", book=book, target_digest=T)
    assert not second["granted"] and second["reason"] == result["reason"]


def test_a_host_that_kept_its_slot_is_not_unlocked_from_fleetlock():
    world = World()
    book = open_book(world, budgets={"a": 2})
    run(world, "n1", op="acquire", book=book, target_digest=T, fleetlock_url=URL)
    run(world, "n1", op="event", book=book, event="reboot_start")
    failed = run(world, "n1", op="fail", book=book, task="Finalize", result={"msg": "timeout"},
                 reboot={"boot_id_before": "x"}, probe={"unreachable": True})
    assert failed["roll_back"] is False
    released = run(world, "n1", op="release", book=book, fleetlock_url=URL)
    assert not released["unlocked"] and released["ansible_facts"]["os_activate_result"]["holds_slot"]
    assert [c[1].rsplit("/", 1)[1] for c in world.calls] == ["pre-reboot"]


def test_bad_input_is_one_sentence():
    world = World()
    result = run(world, op="open", hosts=[{"host": "n1", "pool": "a"}], budgets={"b": 1})
    assert result["failed"] and result["msg"] == "The budget slot operation open failed: pool a of host n1 has no budget."


def _status(digest):
    return {"booted": {"checksum": "c" * 64, "image": {"digest": digest}}, "staged": None, "rollback": None}


def _granted(world, digest):
    """n1 holds the slot, is past its reboot, and os_info on it answers ``digest`` booted."""
    book = open_book(world)
    assert run(world, "n1", op="acquire", book=book, target_digest=T, old_digest="sha256:" + "a" * 64)["granted"]
    run(world, "n1", op="event", book=book, event="reboot_start")
    world.reads = []

    def module(module_name, module_args, task_vars):
        world.reads.append((module_name, module_args))
        return _status(digest)
    world.module = module
    return book


def test_booted_reads_the_host_and_moves_to_health_on_the_target():
    world = World()
    book = _granted(world, T)
    world.now += 12
    result = run(world, "n1", op="booted", book=book, backend="bootc", reboot={"changed": True})
    record = result["ansible_facts"]["os_activate_result"]
    assert not result.get("failed") and world.reads == [("fleetos.layering.os_info", {"backend": "bootc"})]
    assert record["phase"] == "health" and record["booted_digest"] == T and record["reboot_end"] == 1012.0
    assert result["booted"]["image"]["digest"] == T


def test_booted_on_another_digest_fails_in_the_verify_phase():
    world = World()
    other = "sha256:" + "9" * 64
    book = _granted(world, other)
    result = run(world, "n1", op="booted", book=book, reboot={"changed": True})
    assert result["failed"] and result["msg"] == "n1 booted %s, not %s" % (other, T)
    failed = run(world, "n1", op="fail", book=book, task="Read and verify the booted deployment", result=result)
    record = failed["ansible_facts"]["os_activate_result"]
    assert failed["roll_back"] and record["reason"].startswith("verify: Read and verify the booted deployment: n1 booted")


def test_booted_after_an_unreachable_reboot_fails_in_the_reboot_phase_without_reading():
    world = World()
    book = _granted(world, T)
    result = run(world, "n1", op="booted", book=book, reboot={"unreachable": True, "msg": "timed\n out"})
    assert result["failed"] and result["msg"] == "n1 was unreachable after its reboot: timed out"
    assert world.reads == []
    failed = run(world, "n1", op="fail", book=book, task="Read and verify the booted deployment", result=result,
                 reboot={"boot_id_before": "b1"}, probe={"unreachable": True}, reboot_timeout=30)
    record = failed["ansible_facts"]["os_activate_result"]
    assert not failed["roll_back"] and record["holds_slot"] and "did not come back within 30 s" in record["reason"]


def test_a_worker_whose_controller_is_gone_stops_waiting_and_takes_no_fleetlock_slot():
    world = World()
    book = open_book(world, budgets={"a": 1})
    assert run(world, "n1", op="acquire", book=book, target_digest=T)["granted"]
    parents = iter([4242, 4242, 1])  # ansible-playbook was killed: the worker is reparented

    result = run(world, "n2", controller=lambda: next(parents), op="acquire", book=book, target_digest=T,
                 fleetlock_url=URL, poll_interval=0.5)
    assert not result["granted"] and result["reason"] == "the run's controller process 4242 is gone"
    assert world.sleeps == [0.5] and world.calls == []
    summary = run(world, op="close", book=book)["ansible_facts"]["os_activate_summary"]
    assert summary["not_activated"] == ["n2"]
