# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# This is a private plugin_util of fleetos.layering: its interface may change at any
# time and it is not meant to be used by other collections.

"""The rollout's report, in its own unit as the plan's is (``_plan_report``): one row per host from the hosts'
variables (``rollout_report``), and its Markdown and SVG timeline renderings. The filters of the same names
(plugins/filter/rollout.py) are these functions."""

from __future__ import annotations

from html import escape

from ansible.errors import AnsibleFilterError
from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.fleetos.layering.plugins.plugin_utils.rollout._fleet import host_values


def _short(digest):
    if not digest:
        return "-"
    return digest.split(":", 1)[-1][:12]


def _cell(value):
    text = "-" if value is None or value == "" else str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def _fmt_ts(value, start):
    if value is None or start is None:
        return "-"
    return "+%.1fs" % (float(value) - float(start))


def rollout_report_markdown(report):
    """A readable summary of a rollout report (the mapping written to rollout-report.json)."""
    if not isinstance(report, dict) or "hosts" not in report:
        raise AnsibleFilterError("rollout_report_markdown: the input must be a rollout report with 'hosts'")
    start = report.get("started_at")
    lines = ["# OS image rollout", ""]
    lines.append("Rollout %s started %s, %s hosts, result: **%s**." % (
        report.get("rollout") or "-", report.get("started_at_text") or "-", len(report["hosts"]),
        report.get("result", "-")))
    if report.get("stop_reason"):
        lines.append("")
        lines.append("Stopped: %s" % report["stop_reason"])
    windows = report.get("windows_closed") or {}
    for name in sorted(windows):
        lines.append("")
        lines.append("Pool %s: its maintenance window gave no more slots (%s); %d host(s) left staged; its next window"
                     " opens at %s." % (_cell(name), windows[name].get("reason"), len(windows[name].get("hosts") or []),
                                        _next_window_text(windows[name])))
    lines += ["", "## Pools", "", "| pool | budget | hosts | " + " | ".join(_STATUSES) + " |",
              "|---|---|---|" + "---|" * len(_STATUSES)]
    for name in sorted(report.get("pools", {})):
        pool = report["pools"][name]
        counts = pool.get("counts", {})
        cells = " | ".join(str(counts.get(s, 0)) for s in _STATUSES)
        lines.append("| %s | %s | %s | %s |" % (_cell(name), _cell(pool.get("max_unavailable")), pool.get("hosts", 0), cells))
    slots = report.get("slots") or []
    if slots:
        lines += ["", "## Budget slots", "",
                  "In the order they were granted; a host holds its pool's slot from its grant until it is verified"
                  " healthy, rolled back or known undisrupted, and a freed slot goes to the next waiting host.", ""]
        for index, slot in enumerate(slots, 1):
            lines.append("%d. %s (%s): %s to %s%s" % (
                index, _cell(slot.get("host")), _cell(slot.get("pool")), _fmt_ts(slot.get("granted_at"), start),
                _fmt_ts(slot.get("released_at"), start), ", still held" if slot.get("holds_slot") else ""))
    lines += ["", "## Hosts", "",
              "| host | pool | status | old | new | staged at | reboot | reboot start | reboot end | verified |"
              " rolled back | reason |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in report["hosts"]:
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            _cell(row.get("host")), _cell(row.get("pool")), _cell(row.get("status")),
            _short(row.get("old_digest")), _short(row.get("target_digest")),
            _fmt_ts(row.get("staged_at"), start), _cell(row.get("activation")),
            _fmt_ts(row.get("reboot_start"), start),
            _fmt_ts(row.get("reboot_end"), start), _fmt_ts(row.get("verified_at"), start),
            "yes" if row.get("rolled_back") else "no", _cell(_reason(row))))
    lines += ["", "Times are seconds after the start of the rollout. Timeline: rollout-timeline.svg.", ""]
    return "\n".join(lines)


def _next_window_text(info):
    """``2026-12-12 02:00 Europe/Berlin (2026-12-12T01:00:00+00:00)``: a pool's next window, in its zone and UTC."""
    local, utc = info.get("next_open_local"), info.get("next_open")
    return "%s (%s)" % (local, utc) if local and utc else local or utc or "-"


def _reason(row):
    """A row's reason, and the deployment staged before the run that the rollout replaced or left."""
    reason = row.get("reason") or ""
    if row.get("activation_reason"):
        reason += "%s%s reboot: %s" % ("; " if reason else "", row.get("activation"), row["activation_reason"])
    if row.get("staged_before"):
        reason += "%s%s was staged before this run" % ("; " if reason else "", _short(row["staged_before"]))
    return reason


# Every final status a host can have, in report order.
_STATUSES = ("activated", "unchanged", "staged", "failed", "plan_failed", "stage_failed", "not_activated", "skipped")
# A host of the play that has no plan: it was unreachable, or its play stopped before the plan.
NO_PLAN = "no plan: the host was unreachable, or its play stopped before the plan"
UNREACHABLE_IN_STAGE = "unreachable during the stage (or its play stopped): not known to be staged, never rebooted"

_COLORS = {"slot": "#dadce0", "stage": "#8ab4f8", "reboot": "#f28b82", "soft reboot": "#c58af9", "verify": "#81c995",
           "rollback": "#fbbc04"}


def rollout_timeline_svg(report, width=900):
    """An SVG timeline: one row per host, bars for its budget slot, stage, reboot and verify (and rollback)."""
    if not isinstance(report, dict) or "hosts" not in report:
        raise AnsibleFilterError("rollout_timeline_svg: the input must be a rollout report with 'hosts'")
    rows = report["hosts"]
    start = report.get("started_at")
    keys = ("stage_start", "staged_at", "granted_at", "released_at", "reboot_start", "reboot_end", "verified_at",
            "ended_at")
    times = [float(r.get(k)) for r in rows for k in keys if r.get(k) is not None]
    start = float(start) if start is not None else (min(times) if times else 0.0)
    end = float(report.get("ended_at") or (max(times) if times else start + 1.0))
    span = max(end - start, 1.0)
    left, row_h, top = 150, 22, 40
    plot = width - left - 20
    height = top + row_h * len(rows) + 50

    def x(t):
        return left + plot * (float(t) - start) / span

    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" '
           'font-size="12">' % (width, height),
           '<title>OS image rollout timeline</title>',
           '<text x="10" y="20" font-size="14">OS image rollout: %s hosts, %.1f s</text>' % (len(rows), span)]
    for index, row in enumerate(rows):
        y = top + index * row_h
        label = (escape(str(row.get("host"))), escape(str(row.get("status"))))
        out.append('<text x="10" y="%d">%s (%s)</text>' % ((y + 14,) + label))
        # The slot: from its grant to its release (to the end of the run while it is still held).
        slot_end = row.get("released_at") if row.get("released_at") is not None else (
            end if row.get("granted_at") is not None and row.get("slot_held") else None)
        bars = (("slot", row.get("granted_at"), slot_end),
                ("stage", row.get("stage_start"), row.get("staged_at")),
                ("soft reboot" if row.get("activation") == "soft" else "reboot", row.get("reboot_start"),
                 row.get("reboot_end")),
                ("verify", row.get("reboot_end"), row.get("verified_at")),
                ("rollback", row.get("rollback_start"), row.get("rollback_end")))
        for name, begin, finish in bars:
            if begin is None or finish is None:
                continue
            x0 = x(begin)
            w = max(x(finish) - x0, 1.0)
            out.append('<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"><title>%s %s: %.1fs</title></rect>'
                       % (x0, y + 3, w, row_h - 6, _COLORS[name], escape(str(row.get("host"))), name,
                          float(finish) - float(begin)))
    axis_y = top + row_h * len(rows) + 15
    out.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#555"/>' % (left, axis_y, left + plot, axis_y))
    for tick in range(0, 6):
        t = span * tick / 5.0
        tick_x = left + plot * tick / 5.0
        out.append('<text x="%.1f" y="%d" text-anchor="middle">%.0fs</text>' % (tick_x, axis_y + 15, t))
    legend_x = left
    for name in ("slot", "stage", "reboot", "soft reboot", "verify", "rollback"):
        out.append('<rect x="%d" y="%d" width="10" height="10" fill="%s"/><text x="%d" y="%d">%s</text>'
                   % (legend_x, axis_y + 22, _COLORS[name], legend_x + 14, axis_y + 31, name))
        legend_x += 90
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _get(mapping, key):
    try:
        value = mapping.get(key)
    except Exception:  # pylint: disable=broad-except
        return None
    return value if isinstance(value, dict) else None


def _num(value):
    return None if value is None or value == "" else float(value)


# What the report reads of a host; the first marks a host of the run (set on every host of its first play).
REPORT_NAMES = ("__fleetos_rollout_started", "__fleetos_rollout_plan", "os_stage_result", "os_activate_result")


def rollout_report(hosts, summary=None, started_at=None, ended_at=None, started_at_text=None, activate=True,
                   rollout=None, hostvars=None):
    """Build the rollout report from each host's variables (``hostvars[host]``).

    Reads ``inventory_hostname``, ``__fleetos_rollout_plan`` (action, pool, image,
    target and old digests, reason), ``os_stage_result`` and ``os_activate_result``;
    ``summary`` is ``os_activate_summary`` (started, budgets, stop_reason, slots, records).
    A host without a plan is ``plan_failed``. With ``activate`` false (stage only), a
    host staged as planned is ``staged``, and a run that staged and failed nothing has
    the result ``staged``. With ``hostvars``, ``hosts`` are host names: each host's variables are
    looked up once, and the hosts of the run (``__fleetos_rollout_started``) reported.
    """
    if not isinstance(hosts, (list, tuple)):
        raise AnsibleFilterError("rollout_report: the input must be a list of host variable mappings")
    if hostvars is not None:
        found = host_values(hostvars, hosts, REPORT_NAMES)
        hosts = [dict(found[host], inventory_hostname=host) for host in hosts
                 if "__fleetos_rollout_started" in found.get(host, ())]
    summary = summary if isinstance(summary, dict) else {}
    started = set(summary.get("started") or [])
    records = summary.get("records") if isinstance(summary.get("records"), dict) else {}
    windows = summary.get("windows_closed") if isinstance(summary.get("windows_closed"), dict) else {}
    # Host -> why it was not activated as asked (a soft reboot required and not possible): no failure.
    declined = summary.get("declined") if isinstance(summary.get("declined"), dict) else {}
    # Host -> the reason its pool's maintenance window gave it no slot.
    closed = dict((host, "%s; the next window of pool %s opens at %s" % (
        info.get("reason"), pool, _next_window_text(info))) for pool, info in windows.items() for host in info.get("hosts") or [])
    rows = []
    for hv in hosts:
        plan = _get(hv, "__fleetos_rollout_plan") or {}
        host = plan.get("host") or hv.get("inventory_hostname")
        action = plan.get("action")
        stage = _get(hv, "os_stage_result") if action == "stage" else None
        if not isinstance(stage, dict) or "status" not in stage:
            # A task result, not a record: the host went unreachable in the stage's task (or it was skipped).
            stage = None
        # The record the slot book built; a host's fact where the summary has none.
        act = (records.get(host) or _get(hv, "os_activate_result")) if host in started else None
        row = {
            "host": host, "pool": plan.get("pool"), "backend": plan.get("backend"), "image": plan.get("image"),
            "action": action, "wanted": plan.get("wanted"), "old_digest": plan.get("old_digest"),
            "target_digest": plan.get("digest"),
            "booted_digest": plan.get("old_digest"), "status": None, "reason": plan.get("reason"),
            "stage_start": None, "staged_at": None, "stage_changed": False, "fetched_blobs": 0,
            "reboot_start": None, "reboot_end": None, "verified": False, "verified_at": None,
            "rolled_back": False, "rollback_start": None, "rollback_end": None, "slot_held": False,
            "granted_at": None, "released_at": None,
            # How the host rebooted into its target (full, soft: fleetos_rollout_soft_reboot), why not soft, and the
            # seconds it was down for it (from the reboot command to the host back).
            "activation": None, "activation_reason": None, "disruption_s": None,
            # A deployment of another image that was staged before this run (an earlier run's, or a person's).
            "staged_before": plan.get("staged_digest") if plan.get("staged_digest") not in (None, plan.get("digest"))
            else None,
        }
        if stage:
            row.update(stage_start=_num(stage.get("stage_start")), staged_at=_num(stage.get("staged_at")),
                       stage_changed=bool(stage.get("changed")), fetched_blobs=int(stage.get("fetched_blobs") or 0))
        if not plan:
            row.update(status="plan_failed", reason=NO_PLAN)
        elif action in ("skipped", "unchanged", "pin", "error"):
            # A pinned host was already booted on the image's commit: its origin was rewritten, no reboot.
            row["status"] = {"skipped": "skipped", "unchanged": "unchanged", "pin": "unchanged",
                             "error": "plan_failed"}[action]
        elif stage and stage.get("status") != "staged":
            row["status"] = "stage_failed"
            row["reason"] = "stage failed, never rebooted: %s" % stage.get("error")
        elif action == "stage" and not stage:
            # No stage result: the host dropped out of the play (unreachable) before its stage was known.
            row["status"] = "stage_failed"
            row["reason"] = UNREACHABLE_IN_STAGE
        elif act:
            row.update(reboot_start=_num(act.get("reboot_start")), reboot_end=_num(act.get("reboot_end")),
                       verified_at=_num(act.get("verified_at")), rolled_back=bool(act.get("rolled_back")),
                       rollback_start=_num(act.get("rollback_start")), rollback_end=_num(act.get("rollback_end")),
                       slot_held=bool(act.get("holds_slot")), granted_at=_num(act.get("granted_at")),
                       released_at=_num(act.get("released_at")), activation=act.get("activation"),
                       activation_reason=act.get("activation_reason"))
            if row["reboot_start"] is not None and row["reboot_end"] is not None:
                row["disruption_s"] = round(row["reboot_end"] - row["reboot_start"], 1)
            row["verified"] = row["verified_at"] is not None
            if act.get("old_digest"):
                row["old_digest"] = act.get("old_digest")
            if act.get("status") == "activated":
                row["status"] = "activated"
                row["booted_digest"] = act.get("booted_digest")
                # A host a killed rollout had rebooted: the plan's reason says so ("verified on rerun").
                row["reason"] = plan.get("reason") if action == "verify" else "verified on the target digest"
                if act.get("fleetlock_held"):
                    row["reason"] += "; FleetLock did not answer its steady-state, so its FleetLock slot stays taken" \
                        " until FleetLock answers (this run tries again at its end, the next run at its start)"
            else:
                row["status"] = "failed"
                row["booted_digest"] = act.get("booted_digest") if not act.get("holds_slot") else None
                row["reason"] = act.get("reason") or "unreachable during the activation; its budget slot stays taken"
                if act.get("status") == "started":
                    row["slot_held"] = True
        elif host in declined:
            # Not a failure: staged, and left so (fleetos_rollout_soft_reboot required, and no soft reboot possible).
            row["status"] = "not_activated"
            row["reason"] = "staged, not activated: %s" % declined[host]
        elif host in closed:
            # Not a failure: staged, for a rerun inside the pool's next window.
            row["status"] = "staged"
            row["reason"] = "staged, not activated: %s" % closed[host]
        elif not activate and not summary.get("stop_reason"):
            row["status"] = "staged"
            row["reason"] = "staged for the next boot; activation was not requested (fleetos_rollout_activate: false)"
        else:
            row["status"] = "not_activated"
            row["reason"] = "staged, not activated: %s" % (summary.get("stop_reason") or "activation was not requested")
        times = [t for t in (row["staged_at"], row["reboot_end"], row["verified_at"], row["rollback_end"])
                 if t is not None]
        row["ended_at"] = max(times) if times else None
        rows.append(row)
    rows.sort(key=lambda r: str(r["host"]))
    budgets = summary.get("budgets") or {}
    pools = {}
    for row in rows:
        empty = {"hosts": 0, "max_unavailable": budgets.get(row["pool"]), "counts": dict((s, 0) for s in _STATUSES)}
        pool = pools.setdefault(row["pool"] or "-", empty)
        pool["hosts"] += 1
        pool["counts"][row["status"]] += 1
    bad = [r for r in rows if r["status"] in ("failed", "plan_failed", "stage_failed", "not_activated")
           and r["host"] not in declined]
    # A host left staged on purpose: its pool's choice (fleetos_rollout_soft_reboot required) kept it from a reboot.
    staged = [r for r in rows if r["status"] == "staged" or r["host"] in declined]
    # Stopped on purpose after a verified canary batch (os_activate_stop_after_canary): the
    # hosts left staged wait for a rerun, which is not a failure.
    canary_verified = boolean(summary.get("canary_verified") or False, strict=False) \
        and all(r["status"] == "not_activated" for r in bad)
    return {
        "rollout": rollout,
        "started_at": _num(started_at), "started_at_text": started_at_text, "ended_at": _num(ended_at),
        "result": "canary_verified" if canary_verified else "failed" if bad else "window_closed" if closed
        else "staged" if staged else "success",
        # None when the run did not stop (ansible-core before 2.19 renders an unset reason as "").
        "stop_reason": summary.get("stop_reason") or None,
        "max_failures": summary.get("max_failures"),
        "slots": summary.get("slots") or [],
        # Pool -> {reason, hosts (left staged), next_open (UTC), next_open_local, zone}.
        "windows_closed": windows,
        "most_held": summary.get("most_held") or {},
        "pools": pools,
        "counts": dict((s, sum(1 for r in rows if r["status"] == s)) for s in _STATUSES),
        "declined": dict((r["host"], declined[r["host"]]) for r in rows if r["host"] in declined),
        "reboots": sum(1 for r in rows if r["reboot_start"] is not None)
        + sum(1 for r in rows if r["rollback_start"] is not None and r["rolled_back"]),
        # The reboots into the target by kind (a rollback's reboot is full, and counted in reboots only).
        "activations": dict((kind, sum(1 for r in rows if r["activation"] == kind)) for kind in ("full", "soft")),
        "hosts": rows,
    }
