# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for the budget slot rules: grants, releases, failures, the canary, the records."""

from __future__ import annotations

import pytest

from ansible_collections.fleetos.layering.plugins.plugin_utils.host import _backends
from ansible_collections.fleetos.layering.plugins.plugin_utils.rollout import _slots

T = "sha256:" + "b" * 64
OLD = "sha256:" + "a" * 64


def hosts(spec):
    """'a:n1,n2 b:n3' -> [{host: n1, pool: a}, ...]"""
    out = []
    for part in spec.split():
        pool, names = part.split(":")
        out += [{"host": name, "pool": pool} for name in names.split(",")]
    return out


def book(spec="a:n1,n2,n3 b:n4,n5", budgets=None, max_failures=1, canary=0):
    return _slots.new_book(hosts(spec), budgets or {"a": 2, "b": 1}, max_failures, canary, now=0)


def ask(b, *names, now=1.0):
    return [_slots.try_acquire(b, name, now)[0] for name in names]


def grant(b, name, now=1.0, mode="finalize"):
    assert _slots.try_acquire(b, name, now)[0] == "granted"
    return _slots.new_record(b, name, mode, T, OLD)


def activate(b, name, now=2.0):
    grant(b, name, now)
    _slots.record_event(b, name, "reboot_start", now)
    _slots.record_event(b, name, "reboot_end", now + 1)
    _slots.record_event(b, name, "booted", now + 1, {"booted": {"image": {"digest": T}}})
    _slots.record_event(b, name, "verified", now + 2)
    return _slots.release(b, name, now + 3)


def first(b, *names):
    for name in names:
        b["hosts"][name]["first"] = True
    return b


def test_free_slots_go_to_the_waiting_hosts_in_rollout_order():
    # n3 asks first, but n1 goes first (a killed run rebooted it): n3 lets n1 arrive, and n1 gets the slot.
    b = first(book("a:n1,n2,n3", {"a": 1}), "n1")
    assert ask(b, "n3", now=1) == ["wait"]
    assert ask(b, "n1", "n3", now=2) == ["granted", "wait"]
    # A host that goes first and never asks delays it only SETTLE seconds.
    b = first(book("a:n1,n2,n3", {"a": 2}), "n1")
    assert ask(b, "n3", now=1) == ["wait"]
    assert ask(b, "n3", now=1 + _slots.SETTLE) == ["granted"]
    # The others are served as they ask: n2, still staging, does not hold n3 back.
    b = book("a:n1,n2,n3", {"a": 2})
    assert ask(b, "n3", "n1", now=1) == ["granted", "granted"]
    assert _slots.new_book([{"host": "n1", "pool": "a", "first": 1}], {"a": 1}, 1)["hosts"]["n1"]["first"] is True
    b = book()
    assert ask(b, "n1", "n2", "n3", "n4", "n5") == ["granted", "granted", "wait", "granted", "wait"]
    # A slot freed is a slot taken: n1 done, n3 gets it at once; pool b is untouched.
    _slots.new_record(b, "n1", "finalize", T)
    _slots.record_event(b, "n1", "verified", 5)
    _slots.release(b, "n1", 5)
    assert ask(b, "n5", "n3") == ["wait", "granted"]
    assert b["grants"] == ["n1", "n2", "n4", "n3"]


def test_an_earlier_waiting_host_is_served_first():
    b = book("a:n1,n2,n3", {"a": 1})
    assert ask(b, "n1", "n3", "n2") == ["granted", "wait", "wait"]
    _slots.new_record(b, "n1", "finalize", T)
    _slots.record_event(b, "n1", "verified", 3)
    _slots.release(b, "n1", 3)
    # n3 asks first after the release, but n2 is earlier in the rollout order and waiting.
    assert ask(b, "n3", "n2", "n3") == ["wait", "granted", "wait"]


def test_a_slot_is_recursive_and_a_done_host_is_not_granted_again():
    b = book()
    assert ask(b, "n1", "n1") == ["granted", "granted"]
    assert b["grants"] == ["n1"]
    activate(b, "n1")
    answer, reason = _slots.try_acquire(b, "n1", 9)
    assert answer == "refused" and "activated already" in reason


def test_a_host_that_did_not_come_back_keeps_its_slot_and_a_full_pool_of_them_refuses():
    b = book("a:n1,n2,n3", {"a": 1}, max_failures=5)
    grant(b, "n1")
    _slots.record_event(b, "n1", "reboot_start", 2)
    record, roll_back = _slots.record_failure(b, "n1", "Finalize", {"msg": "timed out"}, 9,
                                              reboot={"boot_id_before": "x"}, probe={"unreachable": True},
                                              reboot_timeout=30)
    assert not roll_back and record["holds_slot"] and "did not come back within 30 s" in record["reason"]
    _slots.release(b, "n1", 10)
    assert b["hosts"]["n1"]["state"] == "lost"
    answer, reason = _slots.try_acquire(b, "n2", 11)
    assert answer == "refused" and reason == ("no free budget slot in pool a: 1 slot(s) held by hosts that did not"
                                              " come back (n1)")
    summary = _slots.summary(b)
    assert summary["stop_reason"] == reason and summary["not_activated"] == ["n2", "n3"]
    assert summary["slots"][0]["holds_slot"] and summary["slots"][0]["released_at"] is None


@pytest.mark.parametrize(
    ("reboot", "probe", "went_down"),
    [
        ({"boot_id_before": "old"}, {"unreachable": True}, True),
        ({"boot_id_before": "old"}, {"failed": True, "rc": 255}, True),
        ({"boot_id_before": "old"}, {"stdout": "banner\nnew\n"}, True),
        ({"boot_id_before": "old"}, {"stdout": "banner\nold\n"}, False),
        ({}, {"stdout": "old"}, False),
    ],
)
def test_went_down(reboot, probe, went_down):
    assert _slots.went_down(reboot, probe) is went_down


@pytest.mark.parametrize(
    ("phase_events", "rollback", "status", "holds", "roll_back", "reason"),
    [
        ([], True, "failed", False, False, "prepare: Check: no staged deployment (rc=1)"),
        (["reboot_start"], True, "failed", False, False, "the reboot did not start: reboot: Check: no staged"),
        (["reboot_start", "reboot_end"], True, "started", True, True, "verify: Check: no staged"),
        (["reboot_start", "reboot_end"], False, "failed", False, False, "verify: Check: no staged"),
        (["reboot_start", "reboot_end", "booted"], True, "started", True, True, "health: Check"),
        (["reboot_start", "reboot_end", "booted", "verified"], True, "failed", False, False, "post: Check"),
    ],
)
def test_a_failure_is_handled_by_its_phase(phase_events, rollback, status, holds, roll_back, reason):
    b = book()
    grant(b, "n1")
    for event in phase_events:
        _slots.record_event(b, "n1", event, 3, {"booted": {"image": {"digest": T}}})
    record, answer = _slots.record_failure(b, "n1", "Check", {"msg": "no staged  deployment", "rc": 1}, 4,
                                           rollback=rollback, reboot={"boot_id_before": "x"},
                                           probe={"stdout": "x"})
    assert (record["status"], record["holds_slot"], answer) == (status, holds, roll_back)
    assert record["reason"].startswith(reason)


def test_a_rollback_frees_the_slot_and_a_failed_rollback_keeps_it():
    b = book("a:n1,n2", {"a": 2}, max_failures=2)
    for name in ("n1", "n2"):
        grant(b, name)
        _slots.record_event(b, name, "reboot_start", 2, {"booted": {"image": {"digest": OLD}}})
        _slots.record_event(b, name, "reboot_end", 3)
        _slots.record_event(b, name, "booted", 3, {"booted": {"image": {"digest": T}}})
        assert _slots.record_failure(b, name, "Run the health command", {"msg": "unhealthy"}, 4)[1]
        _slots.record_event(b, name, "rollback_start", 4)
    one = _slots.record_event(b, "n1", "rolled_back", 6, {"booted": {"image": {"digest": OLD}}})
    assert (one["status"], one["holds_slot"], one["rolled_back"], one["booted_digest"]) == ("failed", False, True, OLD)
    assert one["reason"] == "health: Run the health command: unhealthy; rolled back to " + OLD
    two, again = _slots.record_failure(b, "n2", "Reboot", {"msg": "no answer"}, 7)
    assert not again and two["holds_slot"] and not two["rolled_back"]
    assert two["reason"].endswith("; the rollback failed too: rollback: Reboot: no answer")
    _slots.release(b, "n1", 6)
    _slots.release(b, "n2", 7)
    assert b["stop"] == "2 activation(s) failed (n1, n2), max_failures is 2"


def test_max_failures_stops_new_grants_but_not_the_hosts_in_flight():
    b = book("a:n1,n2,n3 b:n4,n5", {"a": 2, "b": 1}, max_failures=1)
    grant(b, "n1")
    grant(b, "n4")
    _slots.record_failure(b, "n1", "Pre", {"msg": "drain failed"}, 2)
    _slots.release(b, "n1", 2)
    assert b["stop"] == "1 activation(s) failed (n1), max_failures is 1"
    answer, reason = _slots.try_acquire(b, "n2", 3)
    assert answer == "refused" and reason == b["stop"]
    # n4 holds its slot still and finishes.
    assert activate(b, "n4")["status"] == "activated"
    summary = _slots.summary(b)
    assert summary["failed"] == ["n1"] and summary["started"] == ["n1", "n4"]
    assert summary["not_activated"] == ["n2", "n3", "n5"] and summary["stop_reason"] == b["stop"]


def test_verify_mode_reboots_nothing_and_takes_the_previous_digest_from_the_rollback_deployment():
    b = book()
    grant(b, "n1", mode="verify")
    record = _slots.record_event(b, "n1", "reboot_end", 3)
    assert record["reboot_end"] is None and record["phase"] == "verify"
    record = _slots.record_event(b, "n1", "booted", 3, {"booted": {"image": {"digest": T}},
                                                        "rollback": {"image": {"digest": OLD}}})
    assert record["old_digest"] == OLD and record["phase"] == "health"


def test_a_wrong_booted_digest_stays_in_phase_verify():
    b = book()
    grant(b, "n1")
    record = _slots.record_event(b, "n1", "booted", 3, {"booted": {"image": None}})
    assert record["booted_digest"] is None and record["phase"] == "verify"


@pytest.mark.parametrize(
    ("failures", "stop_after", "stop", "verified"),
    [
        ([], False, None, False),
        ([], True, "the canary batch (n1, n2) is verified healthy; os_activate_stop_after_canary ends the run here,"
                   " a rerun continues with the other hosts", True),
        (["n2"], True, "the canary batch failed (n2)", False),
    ],
)
def test_close_canary(failures, stop_after, stop, verified):
    b = book("a:n1,n2,n3", {"a": 2}, max_failures=3, canary=2)
    assert b["canary"] == ["n1", "n2"]
    for name in ("n1", "n2"):
        if name in failures:
            grant(b, name)
            _slots.record_failure(b, name, "Pre", {"msg": "x"}, 3)
            _slots.release(b, name, 3)
        else:
            activate(b, name)
    assert _slots.close_canary(b, stop_after) == stop
    assert _slots.summary(b)["canary_verified"] is verified


def test_no_host_after_the_canary_batch_gets_a_slot_before_the_canary_gate_ran():
    b = book("a:n1,n2,n3", {"a": 2}, max_failures=3, canary=1)
    activate(b, "n1")
    # The gate (close_canary) did not run - a limit emptied its play: the rest is refused, never granted.
    assert _slots.try_acquire(b, "n2", 4) == (
        "refused", "the canary batch (n1) was not closed: no host after it is activated without the canary gate")
    assert b["hosts"]["n2"]["state"] == "not_activated" and "n2" not in b["grants"]
    assert _slots.close_canary(b) is None
    assert _slots.try_acquire(b, "n3", 5) == ("granted", None)


def test_give_back_frees_the_slot_and_stops():
    b = book("a:n1,n2", {"a": 1})
    grant(b, "n1")
    _slots.give_back(b, "n1", "FleetLock gave no slot", 3, stop="FleetLock gave no slot")
    assert b["hosts"]["n1"]["state"] == "not_activated" and b["grants"] == []
    assert _slots.try_acquire(b, "n2", 4) == ("refused", "FleetLock gave no slot")


def test_most_held_counts_slots_over_time():
    b = book("a:n1,n2,n3", {"a": 2}, max_failures=3)
    assert ask(b, "n1", "n2", "n3", now=1) == ["granted", "granted", "wait"]
    for name, end in (("n1", 5), ("n2", 7)):
        _slots.new_record(b, name, "finalize", T)
        _slots.record_event(b, name, "verified", end)
        _slots.release(b, name, end)
    assert ask(b, "n3", now=5) == ["granted"]
    assert _slots.most_held(b) == {"a": 2}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((hosts("a:n1"), {"b": 1}, 1), "pool a of host n1 has no budget"),
        ((hosts("a:n1,n1"), {"a": 1}, 1), "host n1 is given twice"),
        ((hosts("a:n1"), {"a": 1}, 0), "max_failures must be at least 1"),
        ((hosts("a:n1"), {"a": -1}, 1), "the budget of pool a must be at least 0"),
        (([{"host": "n1"}], {"a": 1}, 1), "every host must be a mapping with host and pool"),
        (("n1", {"a": 1}, 1), "hosts must be a list"),
    ],
)
def test_new_book_refuses_bad_input(args, message):
    with pytest.raises(_slots.SlotError, match=message):
        _slots.new_book(*args)


def test_unknown_host_and_event_are_refused():
    b = book()
    with pytest.raises(_slots.SlotError, match="host n9 is not one of the hosts to activate"):
        _slots.try_acquire(b, "n9", 1)
    with pytest.raises(_slots.SlotError, match="host n1 holds no slot"):
        _slots.record_event(b, "n1", "verified", 1)
    grant(b, "n1")
    with pytest.raises(_slots.SlotError, match="event must be one of"):
        _slots.record_event(b, "n1", "exploded", 1)


def test_failure_text_is_one_line_and_cut():
    text = _slots.failure_text("health", "Run", {"msg": "a\n  b " + "x" * 400, "rc": 2})
    assert text.startswith("health: Run: a b x") and text.endswith(" (rc=2)") and "\n" not in text
    assert len(text) == len("health: Run: ") + _slots.ERROR_MAX + len(" (rc=2)")


def test_lease_can_wait_while_a_whole_round_of_the_pool_is_ahead_without_a_slot():
    hosts = [{"host": "h%d" % i, "pool": "a"} for i in range(1, 6)] + [{"host": "b1", "pool": "b"}]
    book = _slots.new_book(hosts, {"a": 2, "b": 0}, 1, 0, 0.0)
    assert [_slots.lease_can_wait(book, h["host"]) for h in hosts] == [False, False, True, True, True, False]
    for host in ("h1", "h2"):
        assert _slots.try_acquire(book, host, 1.0)[0] == "granted"
    # h3 and h4 are the next round now; h5 still has them ahead.
    assert [_slots.lease_can_wait(book, h) for h in ("h3", "h4", "h5")] == [False, False, True]
    # Both slots are held: h3 waits, with take or without.
    assert _slots.try_acquire(book, "h3", 3.0, take=False) == ("wait", None)


def test_try_acquire_without_take_says_a_slot_is_free_and_leaves_it_free():
    book = _slots.new_book([{"host": "h1", "pool": "a"}, {"host": "h2", "pool": "a"}], {"a": 1}, 1, 0, 0.0)
    assert _slots.try_acquire(book, "h1", 1.0, take=False) == ("free", None)
    assert book["hosts"]["h1"]["state"] == "waiting" and book["grants"] == []
    assert _slots.try_acquire(book, "h1", 2.0) == ("granted", None) and book["grants"] == ["h1"]
    assert _slots.try_acquire(book, "h2", 3.0, take=False) == ("wait", None)


def running_book():
    """Pool a (1 slot) held by n1; pool b (1 slot) free."""
    b = book("a:n1,n2,n3 b:n4,n5", {"a": 1, "b": 1})
    assert ask(b, "n1") == ["granted"]
    return b


def test_a_host_is_parked_while_a_holder_at_work_has_every_slot_of_its_pool():
    b = running_book()
    assert _slots.park_reason(b, "n2", running={"n1", "n2"}) == "every budget slot of pool a is held (n1)"
    # Pool b has a free slot; n1 holds its slot already (a slot is recursive).
    assert _slots.park_reason(b, "n4", running={"n1", "n4"}) is None
    assert _slots.park_reason(b, "n1", running={"n1"}) is None
    # The holder left the play (it went unreachable): nobody here frees the slot, so n2 asks and waits in its task.
    assert _slots.park_reason(b, "n2", running={"n2"}) is None
    assert _slots.free_slots(b, "a") == 0 and _slots.free_slots(b, "b") == 1


def test_a_whole_pool_is_parked_at_one_look_as_each_of_its_hosts_would_be():
    b = running_book()
    assert _slots.pool_parks(b, "a", running={"n1"}) is True
    assert _slots.pool_parks(b, "b", running={"n1"}) is False    # a free slot
    assert _slots.pool_parks(b, "a", running={"n2"}) is False    # the holder left the play
    # Every host of a pool that pool_parks parks is parked by park_reason too, and the other way round.
    for running in ({"n1", "n2", "n3"}, {"n2", "n3"}):
        assert all((_slots.park_reason(b, h, running) is not None) == _slots.pool_parks(b, "a", running)
                   for h in ("n2", "n3"))
    b["stop"] = "max_failures"
    assert _slots.pool_parks(b, "a", running={"n1"}) is False


def test_a_host_is_parked_while_a_host_that_goes_first_is_at_work_and_has_not_asked():
    # n2 goes first (a killed run rebooted it; it may hold the FleetLock slot the pool needs). However
    # long n2 takes to come to its request, n3 waits off the forks while n2 is at work: the book's
    # settle (SETTLE seconds) would have let n3 take the slot n2 needs.
    b = first(book("a:n1,n2,n3 b:n4", {"a": 1, "b": 1}), "n2")
    assert _slots.park_reason(b, "n3", running={"n2", "n3"}) == (
        "n2 of pool a, which a killed run left rebooted or holding a FleetLock slot, goes first")
    # Not a host before n2 in the order, nor another pool's, nor n2 itself.
    assert _slots.park_reason(b, "n1", running={"n1", "n2"}) is None
    assert _slots.park_reason(b, "n4", running={"n2", "n4"}) is None
    assert _slots.park_reason(b, "n2", running={"n2", "n3"}) is None
    # n2 left the play (a failed stage, unreachable): n3 asks, and the book's settle bounds its wait.
    assert _slots.park_reason(b, "n3", running={"n3"}) is None
    # n2 asked: n3 waits for n2's slot as for any holder's.
    assert ask(b, "n2", now=1) == ["granted"]
    assert _slots.park_reason(b, "n3", running={"n2", "n3"}) == "every budget slot of pool a is held (n2)"


def test_a_host_is_not_parked_when_the_run_stops_or_its_pool_is_lost():
    b = running_book()
    b["stop"] = "stopped"
    assert _slots.park_reason(b, "n2", running={"n1", "n2"}) is None
    b = running_book()
    _slots.new_record(b, "n1", "finalize", T)
    _slots.record_failure(b, "n1", "reboot", {"msg": "boom"}, 3, rollback=False)
    # max_failures (1) reached: n2 asks, and is refused by the book.
    assert _slots.park_reason(b, "n2", running={"n1", "n2"}) is None
    assert ask(b, "n2") == ["refused"]
    # A host not in the book, or done, is never parked.
    assert _slots.park_reason(running_book(), "other", running={"n1"}) is None


def test_a_failed_stage_counts_toward_max_failures_when_it_happens():
    b = book("a:n1,n2,n3 b:n4,n5", {"a": 1, "b": 1}, max_failures=2)
    _slots.drop(b, "n4", "stage failed: registry down", 1, failed=True)
    assert b["hosts"]["n4"]["state"] == "not_activated" and b["stop"] is None
    # A stage that left nothing to activate is no failure.
    _slots.drop(b, "n5", "its stage left nothing to activate", 1)
    assert b["stop"] is None and b.get("stage_failed") == ["n4"]
    assert ask(b, "n1") == ["granted"]
    _slots.new_record(b, "n1", "finalize", T)
    _slots.record_failure(b, "n1", "Pre", {"msg": "drain failed"}, 3)
    _slots.release(b, "n1", 3)
    assert b["stop"] == "1 activation(s) failed (n1); 1 stage(s) failed (n4), max_failures is 2"
    assert ask(b, "n2") == ["refused"]
    summary = _slots.summary(b)
    assert summary["stage_failed"] == ["n4"] and summary["failed"] == ["n1"]
    assert set(summary["not_activated"]) == {"n2", "n3", "n4", "n5"}


def test_dropping_a_host_that_asked_changes_nothing():
    b = book("a:n1,n2", {"a": 1})
    assert ask(b, "n1") == ["granted"]
    _slots.drop(b, "n1", "late", 2, failed=True)
    assert b["hosts"]["n1"]["state"] == "holding" and not b.get("stage_failed")
    # A failed canary stage fails the canary batch.
    b = book("a:n1,n2", {"a": 1}, max_failures=5, canary=1)
    _slots.drop(b, "n1", "stage failed: x", 1, failed=True)
    assert _slots.close_canary(b) == "the canary batch failed (n1)"


# Saturday 2026-12-05 10:00 UTC, and a window of pool a from then on for an hour.
SAT_10 = 1796464800.0
SAT_WINDOW = [{"days": ["Sat"], "start": "10:00", "length_minutes": 60}]


def windowed(seconds=600, spec="a:n1,n2,n3 b:n4", budgets=None):
    items = hosts(spec)
    for item in items:
        if item["pool"] == "a":
            item.update(windows=SAT_WINDOW, windows_timezone="UTC", activation_seconds=seconds)
    return _slots.new_book(items, budgets or {"a": 1, "b": 1}, 1, now=SAT_10)


def test_a_slot_is_granted_only_while_the_window_has_an_activation_left_in_it():
    b = windowed()
    assert _slots.try_acquire(b, "n1", SAT_10 + 60) == ("granted", None)
    activate(b, "n1", SAT_10 + 120)
    # 10:55: 300 s left, less than the 600 s an activation takes: refused, not a failure, the run goes on.
    answer, reason = _slots.try_acquire(b, "n2", SAT_10 + 3300)
    assert answer == "refused"
    assert reason == ("the maintenance window of pool a: the maintenance window closes at 2026-12-05 11:00 UTC, 300 s"
                      " left, less than the 600 s an activation takes")
    assert b["stop"] is None and _slots.failed_hosts(b) == []
    # Pool b has no window: its host is served.
    assert _slots.try_acquire(b, "n4", SAT_10 + 3300) == ("granted", None)
    # After the close: outside every window, the next named.
    answer, reason = _slots.try_acquire(b, "n3", SAT_10 + 7200)
    assert answer == "refused" and reason.endswith("outside every maintenance window; the next opens at"
                                                   " 2026-12-12 10:00 UTC")
    closed = _slots.summary(b)["windows_closed"]
    assert list(closed) == ["a"] and closed["a"]["hosts"] == ["n2", "n3"]
    assert closed["a"]["next_open"] == "2026-12-12T10:00:00+00:00"
    assert closed["a"]["next_open_local"] == "2026-12-12 10:00 UTC"
    assert closed["a"]["reason"].startswith("the maintenance window closes at 2026-12-05 11:00 UTC")


def test_the_activation_time_is_the_longest_measured_in_the_pool_else_the_reboot_timeout():
    b = windowed(seconds=None)
    # 10:10, 3000 s left: enough for the reboot timeout (1200 s) before anything was measured.
    assert _slots.try_acquire(b, "n1", SAT_10 + 600, activation_seconds=1200)[0] == "granted"
    _slots.new_record(b, "n1", "finalize", T)
    _slots.record_event(b, "n1", "verified", SAT_10 + 800)
    _slots.release(b, "n1", SAT_10 + 900)
    # 10:50, 600 s left: n1 took 300 s, so n2 is granted although the reboot timeout is 1200 s.
    assert _slots.try_acquire(b, "n2", SAT_10 + 3000, activation_seconds=1200)[0] == "granted"
    # Nothing measured yet in a new book: the reboot timeout decides.
    assert windowed(seconds=None)["pools"]["a"]["windows"]["activation_seconds"] is None
    assert _slots.try_acquire(windowed(seconds=None), "n1", SAT_10 + 3000, activation_seconds=1200)[0] == "refused"


def test_a_host_that_only_verifies_is_not_held_by_the_window_and_a_closed_pool_parks_nobody():
    b = first(windowed(), "n1")
    assert _slots.try_acquire(b, "n1", SAT_10 + 7200)[0] == "granted"
    assert _slots.try_acquire(b, "n2", SAT_10 + 7200)[0] == "refused"
    # n3 is let go to ask (and be told the window is closed) although n1 holds pool a's only slot.
    assert _slots.park_reason(b, "n3", running={"n1"}) is None


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"windows_timezone": "Europe/Berlin"}, "the hosts n1 and n2 of pool a have different maintenance windows"),
        ({"activation_seconds": 60}, "the hosts n1 and n2 of pool a have different maintenance windows"),
        ({"windows": [{"days": ["Sat"], "start": "25:00", "length_minutes": 60}]},
         r"host n2: The maintenance windows cannot be used: fleetos_rollout_windows\[0\].start is '25:00'"),
    ],
)
def test_the_windows_of_a_pool_are_one(change, message):
    items = [dict(item, windows=SAT_WINDOW, windows_timezone="UTC", activation_seconds=600) for item in hosts("a:n1,n2")]
    items[1].update(change)
    with pytest.raises(_slots.SlotError, match=message):
        _slots.new_book(items, {"a": 1}, 1)


def test_before_the_reboot_the_deployments_are_checked_for_the_mode_and_the_backend():
    rpm_ostree, bootc = _backends.backend("rpm-ostree"), _backends.backend("bootc")
    finalize = {"host": "n1", "mode": "finalize", "target_digest": T}
    assert _slots.prepare_problem(finalize, {"staged": {"image": {"digest": T}}}, rpm_ostree) is None
    assert _slots.prepare_problem(finalize, {"staged": None}, bootc) == (
        "n1 has no staged deployment at %s (staged: nothing)" % T)
    # A rollback with a deployment still staged: bootc's rollback discards it, rpm-ostree's would not.
    rollback = {"host": "n1", "mode": "rollback", "target_digest": OLD}
    status = {"staged": {"image": {"digest": T}}, "rollback": {"image": {"digest": OLD}}}
    assert _slots.prepare_problem(rollback, status, bootc) is None
    assert _slots.prepare_problem(rollback, status, rpm_ostree) == (
        "n1 has no previous deployment at %s or still has a staged one" % OLD)
    assert _slots.prepare_problem(rollback, dict(status, staged=None), rpm_ostree) is None
    assert _slots.prepare_problem({"host": "n1", "mode": "verify", "target_digest": T}, {}, rpm_ostree) is None
