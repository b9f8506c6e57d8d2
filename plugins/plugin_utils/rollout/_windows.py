# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# This is a private plugin_util of fleetos.layering: its interface may change at any
# time and it is not meant to be used by other collections.

"""The maintenance windows of a pool: when a host of it may start an activation.

Like Zincati's periodic strategy, ``fleetos_rollout_windows`` is a list of
``{days, start, length_minutes}`` read in the zone ``fleetos_rollout_windows_timezone`` (an
IANA name, ``localtime`` for the controller's zone, default ``UTC``); an empty list means
no restriction. A window opens at the wall-clock ``start`` on each of its ``days`` and lasts
``length_minutes`` of real elapsed time, so it may cross midnight and the end of the week.
Around a daylight-saving change: a ``start`` in the skipped hour opens at the first instant
after the gap (02:30 on a day Europe/Berlin springs from 02:00 to 03:00 opens at 03:00
CEST); a ``start`` in the repeated hour opens at its first occurrence. Overlapping or
touching windows are one open period.

Every question takes ``now`` (an aware datetime); only ``now()`` reads the clock.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
KEYS = ("days", "start", "length_minutes")
MAX_MINUTES = 7 * 24 * 60
# The end ``open_at`` gives for a schedule without windows: it never closes.
NEVER = datetime.max.replace(tzinfo=timezone.utc)
_START = re.compile(r"([01][0-9]|2[0-3]):([0-5][0-9])")
# Local days around ``now`` whose windows are computed: a window lasts at most a week, and
# every window comes back within a week, so the next opening is always among them.
_BEFORE, _AFTER = 8, 15
FORMS = {
    "windows": "a list of mappings with the keys days, start and length_minutes, or empty",
    "window": "a mapping with the keys days, start and length_minutes",
    "days": "a list of days among %s, each once" % ", ".join(DAYS),
    "start": '"HH:MM" in 24-hour time, such as "02:30"',
    "length_minutes": "an integer from 1 to %d" % MAX_MINUTES,
    "timezone": "an IANA time zone name such as Europe/Berlin, or localtime or UTC",
}


def now():
    """The current time, aware, in UTC."""
    return datetime.now(timezone.utc)


def _named(key):
    try:
        return ZoneInfo(key)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        return None


def _local_zone():
    """The controller's zone and its name: ``TZ`` if it names a zone, else /etc/localtime, else UTC."""
    key = os.environ.get("TZ", "").lstrip(":")
    if key and _named(key):
        return _named(key), key
    try:
        with open("/etc/localtime", "rb") as handle:
            zone = ZoneInfo.from_file(handle, key="localtime")
    except (OSError, ValueError):
        return timezone.utc, "UTC"
    path = os.path.realpath("/etc/localtime")
    return zone, path.split("zoneinfo/", 1)[1] if "zoneinfo/" in path else "localtime"


def _zone(name):
    """``(tzinfo, display name)`` for a zone setting, or None when it names no zone."""
    if name is None or name == "UTC":
        return timezone.utc, "UTC"
    if name == "localtime":
        return _local_zone()
    zone = _named(name) if isinstance(name, str) else None
    return None if zone is None else (zone, name)


def _window_problems(window, field):
    if not isinstance(window, dict):
        return [(field, window, FORMS["window"])]
    found = []
    extra = sorted(str(key) for key in window if key not in KEYS)
    if extra:
        found.append((field, window, "%s only, not %s" % (FORMS["window"], ", ".join(extra))))
    days = window.get("days")
    if not isinstance(days, list) or not days:
        found.append((field + ".days", days, FORMS["days"]))
    else:
        for index, day in enumerate(days):
            if day not in DAYS or day in days[:index]:
                found.append(("%s.days[%d]" % (field, index), day, FORMS["days"]))
    start = window.get("start")
    if not isinstance(start, str) or not _START.fullmatch(start):
        found.append((field + ".start", start, FORMS["start"]))
    length = window.get("length_minutes")
    if isinstance(length, bool) or not isinstance(length, int) or not 1 <= length <= MAX_MINUTES:
        found.append((field + ".length_minutes", length, FORMS["length_minutes"]))
    return found


def problems(windows, zone="UTC", name="fleetos_rollout_windows"):
    """One ``(field, value, form)`` per bad value; ``form`` finishes "it must be ...". [] when good."""
    found = []
    if windows is not None and not isinstance(windows, list):
        found.append((name, windows, FORMS["windows"]))
    for index, window in enumerate(windows if isinstance(windows, list) else []):
        found += _window_problems(window, "%s[%d]" % (name, index))
    if _zone(zone) is None:
        found.append((name + "_timezone", zone, FORMS["timezone"]))
    return found


def _opening(day, hour, minute, zone):
    """The UTC instant the wall clock of ``zone`` shows ``hour:minute`` on ``day`` (first one; after a gap)."""
    wall = datetime(day.year, day.month, day.day, hour, minute)
    first = wall.replace(tzinfo=zone).astimezone(timezone.utc)
    if first.astimezone(zone).replace(tzinfo=None) == wall:
        return first
    # A skipped time: fold=1 reads it with the offset after the change, fold=0 with the one
    # before; the change lies between. Find the first second whose wall clock is past ``wall``.
    low = int(wall.replace(tzinfo=zone, fold=1).timestamp())
    high = int(first.timestamp())
    while high - low > 1:
        middle = (low + high) // 2
        if datetime.fromtimestamp(middle, zone).replace(tzinfo=None) > wall:
            high = middle
        else:
            low = middle
    return datetime.fromtimestamp(high, timezone.utc)


def _utc(moment):
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError("The time %s has no time zone; the maintenance windows need an aware datetime." % moment)
    return moment.astimezone(timezone.utc)


@dataclass(frozen=True)
class Schedule:
    """The maintenance windows of a pool: ``(weekdays, hour, minute, minutes)`` each, in ``zone``."""

    windows: tuple
    zone: object
    zone_name: str

    @property
    def always(self):
        """True when there is no window: always open."""
        return not self.windows

    def periods(self, moment):
        """The merged open periods ``[start, end)`` in UTC from 8 days before ``moment`` to 15 after."""
        today = _utc(moment).astimezone(self.zone).date()
        spans = []
        for offset in range(-_BEFORE, _AFTER + 1):
            day = today + timedelta(days=offset)
            for weekdays, hour, minute, minutes in self.windows:
                if day.weekday() in weekdays:
                    start = _opening(day, hour, minute, self.zone)
                    spans.append((start, start + timedelta(minutes=minutes)))
        merged = []
        for start, end in sorted(spans):
            if merged and start <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], end))
            else:
                merged.append((start, end))
        return merged

    def open_at(self, moment):
        """The end (UTC) of the open period holding ``moment``, ``NEVER`` when always open, None when closed."""
        if self.always:
            return NEVER
        moment = _utc(moment)
        return next((end for start, end in self.periods(moment) if start <= moment < end), None)

    def seconds_left(self, moment):
        """Seconds until the open period holding ``moment`` ends: 0.0 when closed, ``math.inf`` when always open."""
        if self.always:
            return math.inf
        end = self.open_at(moment)
        return 0.0 if end is None else (end - _utc(moment)).total_seconds()

    def next_open(self, moment):
        """``moment`` (in UTC) when open, else the next opening (UTC) after it."""
        moment = _utc(moment)
        if self.always:
            return moment
        # The first period not over yet: open now if it has begun.
        return next(max(start, moment) for start, end in self.periods(moment) if end > moment)

    def next_window(self, moment):
        """The opening (UTC) of the next window after the one open at ``moment`` ends; ``next_open`` when
        closed; ``moment`` when always open."""
        end = self.open_at(moment)
        if end is None:
            return self.next_open(moment)
        if end == NEVER:
            return _utc(moment)
        # Merged periods: the next one starts after this one's end.
        return next(period[0] for period in self.periods(end) if period[0] > end)

    def local(self, moment):
        """``moment`` on the wall clock of the zone: ``2026-12-06 02:00 Europe/Berlin``."""
        return "%s %s" % (_utc(moment).astimezone(self.zone).strftime("%Y-%m-%d %H:%M"), self.zone_name)

    def when(self, moment):
        """``moment`` in the zone and in UTC: ``2026-12-06 02:00 Europe/Berlin (2026-12-06 01:00 UTC)``."""
        utc = _utc(moment).strftime("%Y-%m-%d %H:%M UTC")
        return utc if self.zone_name == "UTC" else "%s (%s)" % (self.local(moment), utc)

    def may_start(self, moment, needed_seconds):
        """``(True, None)`` when open for ``needed_seconds`` more, else ``(False, one sentence why not)``."""
        left = self.seconds_left(moment)
        if left <= 0:
            return False, "outside every maintenance window; the next opens at %s" % self.when(self.next_open(moment))
        if left < needed_seconds:
            return False, "the maintenance window closes at %s, %d s left, less than the %d s an activation takes" % (
                self.when(self.open_at(moment)), left, needed_seconds)
        return True, None

    def describe_next(self, moment):
        """Where ``moment`` stands, JSON-safe: open, closes_at, next_open (ISO UTC), next_open_local, zone."""
        end = self.open_at(moment)
        start = self.next_open(moment)
        return {
            "open": end is not None,
            "closes_at": None if end is None or end == NEVER else end.isoformat(),
            "next_open": start.isoformat(),
            "next_open_local": self.local(start),
            "zone": self.zone_name,
        }


def schedule(windows, zone="UTC", name="fleetos_rollout_windows"):
    """The ``Schedule`` of ``windows`` in ``zone``; ValueError naming the first bad value."""
    found = problems(windows, zone, name)
    if found:
        field, value, form = found[0]
        raise ValueError("The maintenance windows cannot be used: %s is %r, and it must be %s." % (field, value, form))
    tzinfo, zone_name = _zone(zone)
    parsed = tuple(
        (frozenset(DAYS.index(day) for day in window["days"]), int(window["start"][:2]),
         int(window["start"][3:]), window["length_minutes"])
        for window in windows or [])
    return Schedule(parsed, tzinfo, zone_name)
