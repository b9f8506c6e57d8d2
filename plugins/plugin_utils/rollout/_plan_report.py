# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# This is a private plugin_util of fleetos.layering: its interface may change at any
# time and it is not meant to be used by other collections.

"""The report of playbooks/plan.yml: the printed table, one block of lines per host, plan.md.

Written in Python rather than in the playbook's Jinja loops: with 10,000 hosts, templating a
line per host took longer than planning them. The texts are those the playbook printed and
wrote before (``default(x, true)`` is ``_or``; a value that is not set shows ``-``, a
deployment that was not read ``not read``).
"""

from __future__ import annotations

import json

from ansible_collections.fleetos.layering.plugins.plugin_utils._stats import job_stats

TABLE_FORMAT = "%-12s %-8s %-9s %-24s %-6s %-9s %-19s %-19s %s"
TABLE_HEADER = ("HOST", "POOL", "SOURCE", "OBJECT", "PAUSED", "ACTION", "CHOSEN", "BOOTED", "STAGED")
MARKDOWN_COLUMNS = ("host", "pool", "labels", "source", "object", "image", "layered image", "digest chosen",
                    "transport", "booted", "staged", "update agents", "action", "reboot", "reason")


def _or(value, fallback):
    """Jinja's ``value | default(fallback, true)``: the fallback for any false value."""
    return value if value else fallback


def _text(value):
    """A value as Jinja renders it inside a text."""
    return "%s" % (value,)


def _not_read(row):
    return "-" if row.get("status_read") else "not read"


def _labels(row):
    labels = row.get("labels")
    if not labels:
        return "-"
    return ", ".join("%s=%s" % (key, _text(value)) for key, value in sorted(labels.items(), key=_key_lower))


def _key_lower(item):
    key = item[0]
    return key.lower() if isinstance(key, str) else key


def _agents(row):
    """The host's update agents, one line: what the plan read, and the policy when one is set."""
    agents = row.get("update_agents")
    if not isinstance(agents, dict):
        return _not_read(row) if not row.get("status_read") else "-"
    policy = row.get("update_agents_policy")
    return "%s%s" % (agents.get("summary"), " (fleetos_update_agents: %s)" % policy if policy else "")


def _reboot(row):
    """How an activation would reboot the host, and why not soft: ``full (rpm-ostree has no soft reboot)``."""
    if not row.get("reboot"):
        return "-"
    return "%s (%s)" % (row["reboot"], row["reboot_reason"]) if row.get("reboot_reason") else row["reboot"]


def host_key(name):
    """Hosts in the order Ansible's ``sort`` filter gives (case-insensitive)."""
    return (name.lower(), name) if isinstance(name, str) else (str(name), str(name))


def rows_of(plans):
    """The report's rows: a fleet record (``_fleet.plan_fleet``) or a list of plans, sorted by host."""
    if isinstance(plans, dict):
        plans = [entry.get("plan") for entry in (plans.get("hosts") or {}).values() if isinstance(entry, dict)]
    rows = [plan for plan in plans or [] if isinstance(plan, dict)]
    return sorted(rows, key=lambda row: host_key(row.get("host")))


def table(rows):
    """The printed plan: a header and a line per host, each stripped."""
    lines = [TABLE_FORMAT % TABLE_HEADER]
    for row in rows:
        lines.append(TABLE_FORMAT % (
            row.get("host"), row.get("pool") or "-", row.get("source"), (row.get("name") or "-")[:24],
            "yes" if row.get("paused") else "no", row.get("action") or "-",
            (row.get("digest") or row.get("wanted") or "-")[:19],
            (row.get("booted_digest") or row.get("booted_image") or _not_read(row))[:19],
            (row.get("staged_digest") or row.get("staged_image") or _not_read(row))[:19]))
    return [line.strip() for line in lines if line.strip()]


def host_lines(row):
    """The lines the plan prints for one host."""
    layered = row.get("layered")
    up_to_date = row.get("up_to_date")
    return [
        "%s pool=%s source=%s object=%s%s" % (row.get("host"), _or(row.get("pool"), "-"), row.get("source"),
                                              _or(row.get("name"), "-"), " (paused)" if row.get("paused") else ""),
        "labels: %s" % _labels(row),
        "image:  %s [%s]" % (_or(_or(row.get("image"), row.get("wanted")), "-"), _or(row.get("transport"), "-")),
        "action: %s" % _or(row.get("action"), "-"),
        "layered: %s" % ("%s (%s) %s" % (layered.get("name"), layered.get("summary"), layered.get("digest"))
                         if layered else "-"),
        "digest: %s" % _or(row.get("digest"), "-"),
        "booted: %s staged: %s up to date: %s" % (
            _or(_or(row.get("booted_digest"), row.get("booted_image")), _not_read(row)),
            _or(_or(row.get("staged_digest"), row.get("staged_image")), _not_read(row)),
            _or(up_to_date, "?") if up_to_date is not None else "?"),
        "update agents: %s" % _agents(row),
        "reboot: %s" % _reboot(row),
        "reason: %s" % row.get("reason"),
    ]


def markdown(rows, manifest_errors=(), warnings=()):
    """plan.md."""
    parts = ["# OS image plan\n\n"]
    parts.extend("Error: %s\n\n" % error for error in manifest_errors or ())
    parts.extend("Warning: %s\n\n" % warning for warning in warnings or ())
    parts.append("| %s |\n" % " | ".join(MARKDOWN_COLUMNS))
    parts.append("|%s\n" % ("---|" * len(MARKDOWN_COLUMNS)))
    for row in rows:
        layered = row.get("layered")
        cells = [
            row.get("host"), _or(row.get("pool"), "-"), _labels(row), row.get("source"),
            _or(row.get("name"), "-") + (" (paused)" if row.get("paused") else ""),
            _text(_or(_or(row.get("image"), row.get("wanted")), "-")).split("@", maxsplit=1)[0],
            "%s: %s" % (layered.get("name"), layered.get("summary")) if layered else "-",
            _or(row.get("digest"), "-"), _or(row.get("transport"), "-"),
            _or(_or(row.get("booted_digest"), row.get("booted_image")), _not_read(row)),
            _or(row.get("staged_digest"), _not_read(row)),
            _agents(row).replace("|", "\\|"),
            _or(row.get("action"), "-"),
            _reboot(row).replace("|", "\\|"),
            _text(row.get("reason")).replace("|", "\\|"),
        ]
        parts.append("| %s |\n" % " | ".join(_text(cell) for cell in cells))
    return "".join(parts)


def plan_json(rows, manifest_errors=(), warnings=()):
    """plan.json, as ``to_nice_json`` writes it."""
    errors = sum(1 for row in rows if row.get("action") == "error")
    return json.dumps({"manifest_errors": list(manifest_errors or ()), "hosts": rows, "errors": errors,
                       "warnings": list(warnings or ())}, indent=4, sort_keys=True, separators=(",", ": "))


def report(plans, manifest_errors=(), warnings=(), report_dir=None, each_host=True):
    """Everything plan.yml prints and writes, without the rows themselves (each result of a task is
    handled again by Ansible: the rows of 10,000 hosts once are enough):
    ``{table, hosts, markdown, json, stats, count, errors, reasons, manifest_errors, warnings}``.
    ``hosts`` (each host's lines) is empty unless ``each_host``: a plan too large to read host by
    host on a terminal is all in its table, plan.md and plan.json."""
    manifest_errors, warnings = list(manifest_errors or ()), list(warnings or ())
    rows = rows_of(plans)
    errors = [row for row in rows if row.get("action") == "error"]
    reasons = []
    for row in errors:
        if row.get("reason") not in reasons:
            reasons.append(row.get("reason"))
    return {
        "table": table(rows),
        "hosts": [host_lines(row) for row in rows] if each_host else [],
        "markdown": markdown(rows, manifest_errors, warnings),
        "json": plan_json(rows, manifest_errors, warnings),
        "stats": job_stats({"hosts": rows, "warnings": warnings}, "plan", report_dir=report_dir),
        "count": len(rows),
        "errors": len(errors),
        "reasons": reasons,
        "manifest_errors": manifest_errors,
        "warnings": warnings,
    }
