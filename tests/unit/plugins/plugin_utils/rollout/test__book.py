# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for the book of slots as an object and a file: its methods, its lock, its hosts' files."""

from __future__ import annotations

import json
import multiprocessing
import os
import stat

import pytest

from ansible_collections.fleetos.layering.plugins.plugin_utils.rollout import _book, _slots
from ansible_collections.fleetos.layering.plugins.plugin_utils.rollout._book import Book

T = "sha256:" + "b" * 64


def new(names, budget, max_failures=1, canary=0):
    return Book.new([{"host": name, "pool": "a"} for name in names], {"a": budget}, max_failures, canary, now=0)


def written(tmp_path, names, budget, **kwargs):
    return new(names, budget, **kwargs).create_file(str(tmp_path), owner=os.getpid())


def grant(book, name, now=1.0):
    assert book.try_acquire(name, now) == ("granted", None)
    return book.new_record(name, "finalize", T)


def _take(path, name, out):
    while True:
        with Book.locked(path) as book:
            if book.try_acquire(name, 1)[0] == "granted":
                out.put(len(book.holders("a")))
                book.new_record(name, "finalize", T)
                book.record_event(name, "verified", 2)
                book.release(name, 2)
                return


def test_the_book_file_is_private_and_shared_by_processes(tmp_path):
    path = new(["n%d" % i for i in range(8)], 2).create_file(str(tmp_path))
    assert stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode) == 0o700
    queue = multiprocessing.get_context("fork").Queue()
    procs = [multiprocessing.get_context("fork").Process(target=_take, args=(path, "n%d" % i, queue)) for i in range(8)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(30)
    held = sorted(queue.get(timeout=5) for proc in procs)
    # Every process got its slot, and none saw more than the budget held.
    assert len(held) == 8 and max(held) <= 2
    with open(path) as handle:
        assert sorted(json.load(handle)["grants"]) == sorted("n%d" % i for i in range(8))
    Book.remove(path)
    assert not os.path.exists(os.path.dirname(path))


def test_each_host_s_record_and_activation_are_a_file_of_their_own_read_when_asked_for(tmp_path):
    names = ["n%03d" % i for i in range(100)]
    path = written(tmp_path, names, 100, max_failures=50)
    for name in names:
        with Book.locked(path) as book:
            grant(book, name)
            book.start(name, {"mode": "finalize", "reboot": {"boot_time_command": "x" * 200}})
            if name == "n007":
                book.record_failure(name, "Check", {"msg": "unhealthy"}, 3.0, rollback=False)
            else:
                book.record_event(name, "verified", 3.0)
    # The book's own file holds a few names per host, however much each host's record and activation hold: the
    # hosts' entries are their pool's file, the order and the budgets the static part's.
    assert os.path.getsize(path) < 40 * len(names)
    assert sorted(os.listdir(path + ".d")) == sorted(["a%d.json" % i for i in range(100)]
                                                     + ["r%d.json" % i for i in range(100)] + ["p0.json", "s.json"])
    with Book.locked(path) as book:
        # Who failed is known without reading any record.
        records = book.data["records"]
        assert _slots.failed_hosts(book.data) == ["n007"] and records.loaded == {}
        assert book.record("n042")["status"] == "activated" and list(records.loaded) == ["n042"]
        assert book.config("n042")["reboot"]["boot_time_command"] == "x" * 200
        assert "n042" in records and "nope" not in records and len(records) == 100
        # A record changed in a step counts in that step, and is written with it.
        book.record_failure("n042", "Check", {"msg": "unhealthy"}, 4.0, rollback=False)
        assert book.summary()["failed"] == ["n007", "n042"]
    with Book.locked(path) as book:
        assert book.summary()["failed"] == ["n007", "n042"] and book.record("n042")["reason"].endswith("unhealthy")
        assert book.summary()["records"]["n099"]["status"] == "activated"
    Book.remove(path)
    assert not os.path.exists(os.path.dirname(path))


def test_a_new_book_removes_the_books_of_runs_that_are_gone(tmp_path):
    gone = multiprocessing.get_context("fork").Process(target=os._exit, args=(0,))
    gone.start()
    gone.join(30)
    stale = new(["n1"], 1).create_file(str(tmp_path), owner=gone.pid)
    with Book.locked(stale):
        pass
    live = written(tmp_path, ["n1"], 1)
    older = tmp_path / "fleetos-slots-k2j3"  # a book without a process id is left alone
    older.mkdir()
    fresh = written(tmp_path, ["n1"], 1)
    assert not os.path.exists(os.path.dirname(stale))
    assert os.path.exists(live) and os.path.exists(fresh) and older.is_dir()
    assert os.path.basename(os.path.dirname(fresh)).startswith("fleetos-slots-%d-" % os.getpid())
    assert _book.remove_stale_books(str(tmp_path)) == []


def test_a_book_of_another_version_is_refused(tmp_path):
    path = tmp_path / "book.json"
    path.write_text(json.dumps({"version": 99}))
    with pytest.raises(_slots.SlotError, match="not a book of this collection's version"):
        with Book.locked(str(path)):
            pass


def test_the_book_is_read_without_its_lock(tmp_path):
    path = written(tmp_path, ["n1", "n2"], 1)
    with Book.locked(path) as book:
        grant(book, "n1")
    read = Book.read(path)
    assert read.state("n1") == "holding" and read.holding() == ["n1"] and read.path == path
    with open(path, "w") as handle:
        handle.write("[]")
    with pytest.raises(_slots.SlotError, match="is not a book of this collection's version"):
        Book.read(path)


def test_a_block_that_changes_nothing_leaves_the_file_as_it_was(tmp_path):
    path = written(tmp_path, ["n1"], 1)
    before = os.stat(path)
    with Book.locked(path) as book:
        assert book.state("n1") == "queued" and book.config("n1") == {} and book.record("n1", required=False) is None
    after = os.stat(path)
    # The strategy reads the book again only when its file was replaced.
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_the_steps_bookkeeping_goes_through_the_methods(tmp_path):
    path = written(tmp_path, ["n1", "n2", "n3"], 2)
    with Book.locked(path) as book:
        grant(book, "n1")
        book.start("n1", {"mode": "finalize", "book": path})
        book.lock_fleetlock("n1", True)
        assert book.stop_before("n1", "pre_reboot")["host"] == "n1"
    with Book.locked(path) as book:
        assert book.next_step("n1") == "pre_reboot" and book.config("n1") == {"mode": "finalize", "book": path}
        assert book.fleetlock_holders() == ["n1"] and book.holds_fleetlock("n1") and not book.holds_fleetlock("n2")
        # What the caller does with the config it got does not change the book's.
        book.config("n1")["mode"] = "rollback"
        assert book.config("n1")["mode"] == "finalize"
        book.record_event("n1", "verified", 5.0)
        book.keep_fleetlock("n1")
        assert book.release("n1", 6.0)["fleetlock_held"] is True
        book.lock_fleetlock("n1", False)
    book = Book.read(path)
    record = book.record("n1")
    assert record["reason"] == ("verified on the target digest; FleetLock did not answer its steady-state, so its"
                                " FleetLock slot stays taken until FleetLock answers")
    assert book.state("n1") == "done" and book.fleetlock_holders() == [] and book.next_step("n1") == "pre_reboot"
    assert book.state("nope") is None and "nope" not in book and "n2" in book
    with pytest.raises(_slots.SlotError, match="host nope is not one of the hosts to activate"):
        book.pool("nope")


def test_the_slots_of_a_book_are_each_pool_s_budget_at_most_its_hosts():
    book = Book.new([{"host": "n1", "pool": "a"}, {"host": "n2", "pool": "a"}, {"host": "n3", "pool": "b"}],
                    {"a": 5, "b": 1, "c": 3}, 1)
    # Pool a has 2 hosts for 5 slots, pool b 1 for 1; pool c has no host.
    assert book.slot_count() == 3


def test_drop_answers_why_the_run_stopped():
    book = new(["n1", "n2", "n3"], 1, max_failures=1)
    assert book.drop("n2", "nothing staged", 1) is None
    assert book.drop("n3", "stage failed: registry down", 1, failed=True) == (
        "1 stage(s) failed (n3), max_failures is 1")
    assert book.stop == "1 stage(s) failed (n3), max_failures is 1" and book.try_acquire("n1", 2)[0] == "refused"


def test_a_step_of_one_host_reads_and_writes_its_pool_s_file_only(tmp_path):
    hosts = [{"host": "%s%d" % (pool, i), "pool": pool} for pool in "abc" for i in range(3)]
    path = Book.new(hosts, {"a": 1, "b": 1, "c": 1}, 1).create_file(str(tmp_path), owner=os.getpid())
    folder = path + ".d"

    def identities():
        return {name: os.stat(os.path.join(folder, name)).st_ino for name in sorted(os.listdir(folder))}
    before = identities()
    assert sorted(before) == ["p0.json", "p1.json", "p2.json", "s.json"]
    with Book.locked(path) as book:
        grant(book, "b1")
        assert sorted(book.data["hosts"]._pools) == ["b"]
    after = identities()
    # Pool b's file was replaced (b1 holds its slot, and has a record); the others, and the static part, were not.
    assert [name for name in before if before[name] != after.get(name)] == ["p1.json"] and "r4.json" in after
    book = Book.read(path)
    assert book.state("b1") == "holding" and book.holding() == ["b1"] and book.state("a1") == "queued"
    assert book.data["pools_written"] == {"a": 1, "b": 2, "c": 1}
    # A step that changes nothing writes nothing.
    with Book.locked(path) as book:
        assert book.try_acquire("b1", 2) == ("granted", None)
    assert identities() == after
