# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# This is a private plugin_util of fleetos.layering: its interface may change at any
# time and it is not meant to be used by other collections.

"""A playbook's report reduced to what an AWX workflow branches on (``set_stats``).

Every playbook of the collection gives the same shape under ``fleetos_last_<kind>``:
``kind``, ``result``, ``counts``, ``stop_reason``, ``rollout`` (the rollout id, when there
is one), ``report_dir``, ``hosts`` (host -> ``status``, ``target_digest``,
``booted_digest``; a rollout's also ``activation``, full or soft) and ``summary``: a short Markdown text of the result, the counts, why the run
stopped and the hosts that need a look (at most ``SUMMARY_ROWS`` of them, with their reasons), which
the playbook also prints, so that it outlives the job's files (AWX removes a job's private data
directory; the stats stay with the job). Timings stay in the report files.
"""

from __future__ import annotations

from ansible_collections.fleetos.layering.plugins.module_utils._errors import InvalidInputError

KINDS = ("plan", "rollout", "rollback", "adopt", "status", "compose")
STATS_PREFIX = "fleetos_last_"
# Rows the summary names at most (the others are counted): a fleet of thousands stays a few lines.
SUMMARY_ROWS = 20
# Statuses a summary does not name host by host: the host is where it should be.
_SETTLED = frozenset(("activated", "unchanged", "staged", "skipped", "planned", "booted", "stage", "activate", "pin",
                      "adopted", "composed", "rolled_back"))


def _host_row(kind, row):
    if kind == "plan":
        # A plan from the inventory alone names the image and decides no action: "planned".
        return row.get("action") or "planned", row.get("digest"), row.get("booted_digest")
    if kind == "status":
        return ("staged" if row.get("staged_digest") else "booted"), row.get("staged_digest"), row.get("booted_digest")
    if kind == "adopt":
        return row.get("status"), row.get("digest"), row.get("booted_digest")
    return row.get("status"), row.get("target_digest"), row.get("booted_digest")


def _compose_stats(report, report_dir):
    """compose.yml's rows are LayeredImages, not hosts: ``images`` maps each to its status and digests."""
    if not isinstance(report.get("images"), list):
        raise InvalidInputError("the compose report must be a mapping with a list of images")
    images = {row["name"]: {"status": row.get("status"), "digest": row.get("digest"),
                            "previous_digest": row.get("previous_digest")}
              for row in report["images"] if isinstance(row, dict) and row.get("name")}
    stats = {"kind": "compose", "result": report.get("result"), "counts": dict(report.get("counts") or {}),
             "stop_reason": report.get("stop_reason"), "rollout": None, "report_dir": report_dir, "hosts": {},
             "images": images, "lock": report.get("lock")}
    rows = [{"host": row.get("name"), "status": row.get("status"), "reason": row.get("error") or row.get("summary")}
            for row in report["images"] if isinstance(row, dict) and row.get("name")]
    stats["summary"] = summary(stats, rows, "LayeredImage")
    return stats


def job_stats(report, kind, report_dir=None):
    """``{"fleetos_last_<kind>": {...}}`` for ansible.builtin.set_stats, from a playbook's report."""
    if kind not in KINDS:
        raise InvalidInputError("kind must be one of %s, got %r" % (", ".join(KINDS), kind))
    if not isinstance(report, dict) or not isinstance(report.get("hosts"), list):
        raise InvalidInputError("the %s report must be a mapping with a list of hosts" % kind)
    if kind == "compose":
        return {STATS_PREFIX + kind: _compose_stats(report, report_dir)}
    hosts = {}
    counts = {}
    for row in report["hosts"]:
        if not isinstance(row, dict) or not row.get("host"):
            continue
        status, target, booted = _host_row(kind, row)
        hosts[row["host"]] = {"status": status, "target_digest": target, "booted_digest": booted}
        counts[status] = counts.get(status, 0) + 1
    if kind == "plan":
        result = "failed" if counts.get("error") else "success"
    elif kind == "status":
        result = "success"
    else:
        result = report.get("result")
        counts = dict(report.get("counts") or counts)
    stats = {
        "kind": kind, "result": result, "counts": counts, "stop_reason": report.get("stop_reason"),
        "rollout": report.get("rollout"), "report_dir": report_dir, "hosts": hosts,
    }
    if kind == "plan":
        # The plan's warnings: that no MachineImage source was read comes first.
        stats["warnings"] = list(report.get("warnings") or [])
    if kind == "rollout":
        # Each tag the run resolved, to its digest: after a verified canary batch, the next job of an AWX workflow
        # rolls out these digests (role os_plan, os_plan_canary_pins), never the tags resolved again.
        stats["images"] = dict(sorted(
            (row["wanted"], row["target_digest"]) for row in report["hosts"]
            if isinstance(row, dict) and row.get("target_digest") and isinstance(row.get("wanted"), str)
            and "@" not in row["wanted"]))
        # How many hosts rebooted fully and softly (fleetos_rollout_soft_reboot), and which were not activated
        # because a soft reboot was required and not possible.
        stats["activations"] = dict(report.get("activations") or {})
        stats["declined"] = sorted(report.get("declined") or {})
        for row in report["hosts"]:
            if isinstance(row, dict) and row.get("host") in hosts:
                hosts[row["host"]]["activation"] = row.get("activation")
        # Pool -> hosts left staged by its closed maintenance window, and when its next window opens.
        stats["windows_closed"] = dict((pool, {
            "remaining": len(info.get("hosts") or []), "next_open": info.get("next_open"),
            "next_open_local": info.get("next_open_local")}) for pool, info in (report.get("windows_closed") or {}).items())
    stats["summary"] = summary(stats, [row for row in report["hosts"] if isinstance(row, dict) and row.get("host")])
    return {STATS_PREFIX + kind: stats}


def summary(stats, rows, what="host"):
    """A short Markdown text of a run: its result, counts, stop reason and warnings, the windows that closed,
    and the rows whose status needs a look (at most ``SUMMARY_ROWS``, each with its reason)."""
    lines = ["**fleetos.layering %s: %s**%s" % (stats["kind"], stats["result"],
                                                " (rollout %s)" % stats["rollout"] if stats.get("rollout") else ""), ""]
    counts = stats.get("counts") or {}
    counted = ", ".join("%s %s" % (counts[status], status) for status in sorted(counts) if counts[status])
    lines.append("%ss: %s" % (what[:1].upper() + what[1:], counted or "none"))
    if stats.get("stop_reason"):
        lines.append("Stopped: %s" % stats["stop_reason"])
    for warning in (stats.get("warnings") or [])[:5]:
        lines.append("Warning: %s" % warning)
    for pool, closed in sorted((stats.get("windows_closed") or {}).items()):
        lines.append("Pool %s: maintenance window closed, %s host(s) left staged, next window %s (%s)" % (
            pool, closed.get("remaining"), closed.get("next_open_local"), closed.get("next_open")))
    notable = [row for row in rows if _status(stats["kind"], row) not in _SETTLED]
    if notable:
        lines += ["", "| %s | status | reason |" % what, "|---|---|---|"]
        for row in notable[:SUMMARY_ROWS]:
            reason = " ".join(str(row.get("error") or row.get("reason") or "-").split()).replace("|", "\\|")
            lines.append("| %s | %s | %s |" % (row.get("host"), _status(stats["kind"], row), reason))
        if len(notable) > SUMMARY_ROWS:
            lines.append("")
            lines.append("and %d more %ss in the report." % (len(notable) - SUMMARY_ROWS, what))
    if stats.get("report_dir"):
        lines += ["", "Report: %s" % stats["report_dir"]]
    return "\n".join(lines)


def _status(kind, row):
    return _host_row(kind, row)[0] if kind != "compose" else row.get("status")
