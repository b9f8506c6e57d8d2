# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for the maintenance windows: validation, midnight, daylight saving, merging, reasons."""

from __future__ import annotations

import json
import math
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from ansible_collections.fleetos.layering.plugins.plugin_utils.rollout import _windows

UTC = timezone.utc
NAME = "fleetos_rollout_windows"
GOOD = {"days": ["Mon", "Thu"], "start": "02:30", "length_minutes": 60}


def utc(*args):
    return datetime(*args, tzinfo=UTC)


def window(days, start, minutes):
    return {"days": days.split(","), "start": start, "length_minutes": minutes}


def with_(**changes):
    return dict(GOOD, **changes)


def without(key):
    return {k: v for k, v in GOOD.items() if k != key}


@pytest.mark.parametrize("windows, zone, field, value, form", [
    ([with_(start="25:00")], "UTC", NAME + "[0].start", "25:00", "start"),
    ([GOOD, with_(start="2:30")], "UTC", NAME + "[1].start", "2:30", "start"),
    ([with_(start=230)], "UTC", NAME + "[0].start", 230, "start"),
    ([with_(start="02:60")], "UTC", NAME + "[0].start", "02:60", "start"),
    ([without("start")], "UTC", NAME + "[0].start", None, "start"),
    ([without("days")], "UTC", NAME + "[0].days", None, "days"),
    ([without("length_minutes")], "UTC", NAME + "[0].length_minutes", None, "length_minutes"),
    ([with_(days=["Mon", "monday"])], "UTC", NAME + "[0].days[1]", "monday", "days"),
    ([with_(days=["Mon", "Tue", "Mon"])], "UTC", NAME + "[0].days[2]", "Mon", "days"),
    ([with_(days=[])], "UTC", NAME + "[0].days", [], "days"),
    ([with_(days="Mon")], "UTC", NAME + "[0].days", "Mon", "days"),
    ([with_(length_minutes=0)], "UTC", NAME + "[0].length_minutes", 0, "length_minutes"),
    ([with_(length_minutes=10081)], "UTC", NAME + "[0].length_minutes", 10081, "length_minutes"),
    ([with_(length_minutes=True)], "UTC", NAME + "[0].length_minutes", True, "length_minutes"),
    ([with_(length_minutes="60")], "UTC", NAME + "[0].length_minutes", "60", "length_minutes"),
    ({"days": ["Mon"]}, "UTC", NAME, {"days": ["Mon"]}, "windows"),
    ("Mon 02:30", "UTC", NAME, "Mon 02:30", "windows"),
    ([GOOD, GOOD, "Mon"], "UTC", NAME + "[2]", "Mon", "window"),
    ([GOOD], "Mars/Base", NAME + "_timezone", "Mars/Base", "timezone"),
    ([GOOD], "/etc/localtime", NAME + "_timezone", "/etc/localtime", "timezone"),
    ([], 2, NAME + "_timezone", 2, "timezone"),
])
def test_each_bad_value_is_named_once(windows, zone, field, value, form):
    assert _windows.problems(windows, zone) == [(field, value, _windows.FORMS[form])]
    with pytest.raises(ValueError) as caught:
        _windows.schedule(windows, zone)
    assert str(caught.value) == "The maintenance windows cannot be used: %s is %r, and it must be %s." % (
        field, value, _windows.FORMS[form])


def test_an_unknown_key_is_named_in_the_form():
    bad = with_(colour="red", Start="03:00")
    assert _windows.problems([GOOD, bad], "UTC") == [
        (NAME + "[1]", bad, _windows.FORMS["window"] + " only, not Start, colour")]


def test_every_bad_value_of_a_window_is_listed_under_its_own_name():
    found = _windows.problems([{"days": ["Sun", "Funday"], "start": "24:00", "length_minutes": -1}], "Nowhere",
                              name="pool_windows")
    assert [field for field, _value, _form in found] == [
        "pool_windows[0].days[1]", "pool_windows[0].start", "pool_windows[0].length_minutes", "pool_windows_timezone"]


@pytest.mark.parametrize("windows, zone", [
    ([], "UTC"), (None, "UTC"), ([GOOD], None), ([GOOD], "Europe/Berlin"), ([GOOD], "localtime"),
    ([window("Mon,Tue,Wed,Thu,Fri,Sat,Sun", "00:00", 1), window("Sun", "23:59", 10080)], "America/New_York"),
])
def test_good_input_has_no_problem(windows, zone):
    assert _windows.problems(windows, zone) == []


@pytest.mark.parametrize("windows", [[], None])
def test_no_windows_is_always_open(windows):
    sched = _windows.schedule(windows, "Europe/Berlin")
    moment = utc(2026, 12, 5, 12, 0)
    assert sched.always
    assert sched.open_at(moment) == _windows.NEVER
    assert sched.seconds_left(moment) == math.inf
    assert sched.next_open(moment) == moment
    assert sched.may_start(moment, 10 ** 9) == (True, None)
    assert sched.describe_next(moment) == {
        "open": True, "closes_at": None, "next_open": "2026-12-05T12:00:00+00:00",
        "next_open_local": "2026-12-05 13:00 Europe/Berlin", "zone": "Europe/Berlin"}


def test_a_window_crosses_midnight_and_the_week_end():
    sched = _windows.schedule([window("Sun", "23:00", 120)])
    assert not sched.always
    assert sched.open_at(utc(2026, 12, 6, 22, 59)) is None
    assert sched.open_at(utc(2026, 12, 6, 23, 0)) == utc(2026, 12, 7, 1, 0)
    assert sched.open_at(utc(2026, 12, 7, 0, 30)) == utc(2026, 12, 7, 1, 0)
    assert sched.seconds_left(utc(2026, 12, 7, 0, 30)) == 30 * 60
    assert sched.open_at(utc(2026, 12, 7, 1, 0)) is None
    assert sched.seconds_left(utc(2026, 12, 7, 1, 0)) == 0.0
    assert sched.next_open(utc(2026, 12, 7, 1, 0)) == utc(2026, 12, 13, 23, 0)


def test_a_start_in_the_skipped_hour_opens_when_the_gap_ends():
    # Europe/Berlin springs from 02:00 CET to 03:00 CEST on Sunday 2026-03-29 (01:00 UTC).
    sched = _windows.schedule([window("Sun", "02:30", 60)], "Europe/Berlin")
    assert sched.next_open(utc(2026, 3, 28, 23, 0)) == utc(2026, 3, 29, 1, 0)
    assert sched.open_at(utc(2026, 3, 29, 0, 59, 59)) is None
    assert sched.open_at(utc(2026, 3, 29, 1, 0)) == utc(2026, 3, 29, 2, 0)
    assert sched.describe_next(utc(2026, 3, 29, 0, 0)) == {
        "open": False, "closes_at": None, "next_open": "2026-03-29T01:00:00+00:00",
        "next_open_local": "2026-03-29 03:00 Europe/Berlin", "zone": "Europe/Berlin"}
    # The Sundays around it open at 02:30 local as usual.
    assert sched.next_open(utc(2026, 3, 29, 2, 0)) == utc(2026, 4, 5, 0, 30)
    assert sched.next_open(utc(2026, 3, 21, 0, 0)) == utc(2026, 3, 22, 1, 30)


def test_a_start_in_the_repeated_hour_opens_at_its_first_occurrence():
    # America/New_York falls back from 02:00 EDT to 01:00 EST on Sunday 2026-11-01 (06:00 UTC).
    sched = _windows.schedule([window("Sun", "01:30", 60)], "America/New_York")
    assert sched.next_open(utc(2026, 11, 1, 0, 0)) == utc(2026, 11, 1, 5, 30)
    assert sched.open_at(utc(2026, 11, 1, 6, 15)) == utc(2026, 11, 1, 6, 30)
    assert sched.seconds_left(utc(2026, 11, 1, 5, 30)) == 3600
    # The second 01:30 (EST, 06:30 UTC) opens nothing: the next opening is a week later.
    assert sched.open_at(utc(2026, 11, 1, 6, 30)) is None
    assert sched.next_open(utc(2026, 11, 1, 6, 30)) == utc(2026, 11, 8, 6, 30)


@pytest.mark.parametrize("zone, start, moment, opens, closes_local", [
    # New York falls back during the window: 22:00 EDT to 01:00 EST is 4 real hours.
    ("America/New_York", "22:00", utc(2026, 10, 31, 12, 0), utc(2026, 11, 1, 2, 0), "2026-11-01 01:00 EST"),
    # New York springs forward during the window: 22:00 EST to 03:00 EDT is 4 real hours.
    ("America/New_York", "22:00", utc(2026, 3, 7, 12, 0), utc(2026, 3, 8, 3, 0), "2026-03-08 03:00 EDT"),
    # Berlin falls back during the window: 23:30 CEST to 02:30 CET is 4 real hours.
    ("Europe/Berlin", "23:30", utc(2026, 10, 24, 0, 0), utc(2026, 10, 24, 21, 30), "2026-10-25 02:30 CET"),
])
def test_a_window_lasts_its_minutes_of_real_time_across_a_change(zone, start, moment, opens, closes_local):
    sched = _windows.schedule([window("Sat", start, 240)], zone)
    assert sched.next_open(moment) == opens
    closes = sched.open_at(opens + timedelta(minutes=1))
    assert closes - opens == timedelta(minutes=240)
    assert closes.astimezone(ZoneInfo(zone)).strftime("%Y-%m-%d %H:%M %Z") == closes_local


def test_a_window_shorter_than_an_activation_does_not_let_it_start():
    sched = _windows.schedule([window("Tue", "10:00", 10)], "Europe/Berlin")
    moment = utc(2026, 12, 8, 9, 6)  # 10:06 CET, 240 s before the window closes
    assert sched.seconds_left(moment) == 240
    assert sched.may_start(moment, 900) == (False, (
        "the maintenance window closes at 2026-12-08 10:10 Europe/Berlin (2026-12-08 09:10 UTC), "
        "240 s left, less than the 900 s an activation takes"))
    assert sched.may_start(moment, 240) == (True, None)
    assert sched.may_start(moment, 60) == (True, None)


def test_windows_in_utc_name_the_time_once():
    sched = _windows.schedule([window("Tue", "10:00", 10)])
    assert sched.may_start(utc(2026, 12, 8, 10, 9), 120) == (False, (
        "the maintenance window closes at 2026-12-08 10:10 UTC, 60 s left, less than the 120 s an activation takes"))


def test_outside_every_window_the_next_opening_is_named_across_the_week_end():
    sched = _windows.schedule([window("Mon", "02:00", 60), window("Thu", "02:00", 60)], "Europe/Berlin")
    saturday = utc(2026, 12, 5, 12, 0)
    assert sched.next_open(saturday) == utc(2026, 12, 7, 1, 0)
    assert sched.may_start(saturday, 0) == (False, (
        "outside every maintenance window; the next opens at 2026-12-07 02:00 Europe/Berlin (2026-12-07 01:00 UTC)"))
    described = sched.describe_next(saturday)
    assert described == {
        "open": False, "closes_at": None, "next_open": "2026-12-07T01:00:00+00:00",
        "next_open_local": "2026-12-07 02:00 Europe/Berlin", "zone": "Europe/Berlin"}
    assert json.loads(json.dumps(described)) == described
    # Right after Monday's window, Thursday's is next.
    assert sched.next_open(utc(2026, 12, 7, 2, 0)) == utc(2026, 12, 10, 1, 0)


@pytest.mark.parametrize("second_start, closes", [("02:00", utc(2026, 12, 7, 4, 0)), ("03:00", utc(2026, 12, 7, 5, 0))])
def test_overlapping_and_touching_windows_are_one_period(second_start, closes):
    sched = _windows.schedule([window("Mon", second_start, 120), window("Mon", "01:00", 120)])
    assert sched.open_at(utc(2026, 12, 7, 1, 30)) == closes
    assert sched.seconds_left(utc(2026, 12, 7, 1, 30)) == (closes - utc(2026, 12, 7, 1, 30)).total_seconds()
    # The first window alone would leave 60 s at 02:59.
    assert sched.may_start(utc(2026, 12, 7, 2, 59), 3600) == (True, None)
    assert sched.describe_next(utc(2026, 12, 7, 1, 30))["closes_at"] == closes.isoformat()


def test_a_window_open_all_week_stays_open_beyond_the_next_week():
    sched = _windows.schedule([window("Sun", "00:00", 10080)])
    assert sched.seconds_left(utc(2026, 12, 5, 12, 0)) > 14 * 86400
    assert sched.next_open(utc(2026, 12, 5, 12, 0)) == utc(2026, 12, 5, 12, 0)


def test_localtime_follows_tz(monkeypatch):
    monkeypatch.setenv("TZ", "Europe/Berlin")
    local = _windows.schedule([window("Mon", "02:00", 60)], "localtime")
    berlin = _windows.schedule([window("Mon", "02:00", 60)], "Europe/Berlin")
    saturday = utc(2026, 12, 5, 12, 0)
    assert local.next_open(saturday) == berlin.next_open(saturday) == utc(2026, 12, 7, 1, 0)
    assert local.describe_next(saturday)["zone"] == "Europe/Berlin"


def test_localtime_builds_and_answers(monkeypatch):
    monkeypatch.delenv("TZ", raising=False)
    sched = _windows.schedule([window("Mon,Wed,Fri", "02:00", 60)], "localtime")
    saturday = utc(2026, 12, 5, 12, 0)
    opens = sched.next_open(saturday)
    assert saturday < opens < saturday + timedelta(days=3)
    assert sched.open_at(opens) == opens + timedelta(minutes=60)
    assert sched.describe_next(saturday)["next_open"] == opens.isoformat()


def test_a_naive_time_is_refused():
    with pytest.raises(ValueError, match="no time zone"):
        _windows.schedule([GOOD]).open_at(datetime(2026, 12, 5, 12, 0))


def test_now_is_aware_utc():
    moment = _windows.now()
    assert moment.utcoffset() == timedelta(0)
    assert abs((moment - datetime.now(UTC)).total_seconds()) < 5


def test_the_next_window_after_the_open_one_ends():
    sched = _windows.schedule([{"days": ["Mon", "Thu"], "start": "02:00", "length_minutes": 60}], "Europe/Berlin")
    # Monday 2026-12-07 02:30 Berlin (01:30 UTC), inside Monday's window: the next is Thursday's.
    inside = datetime(2026, 12, 7, 1, 30, tzinfo=timezone.utc)
    assert sched.next_window(inside) == datetime(2026, 12, 10, 1, 0, tzinfo=timezone.utc)
    # Closed: the next opening.
    outside = datetime(2026, 12, 8, 12, 0, tzinfo=timezone.utc)
    assert sched.next_window(outside) == datetime(2026, 12, 10, 1, 0, tzinfo=timezone.utc)
    assert _windows.schedule([]).next_window(outside) == outside
