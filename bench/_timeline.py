# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Where an ansible-playbook run's time and controller CPU go: the timeline bench/callback_plugins/bench_timeline.py
writes, read back play by play and task by task.

A play's span runs from its start to the next play's (or the run's end); a task's from its first start to the next
task's or play's start. Under linear strategies that is the task; under the free and slots strategies tasks overlap,
and only the plays' spans say where the time went. "main_cpu_s" is ansible-playbook's own process, "workers_cpu_s"
its forks with the ssh clients they waited for, counted as each fork is reaped (a little after it ends), without
the ssh ControlPersist masters (the benches count those apart). "executed" and "skipped" count task executions: a
host's result of a task."""

from __future__ import annotations

import json
import os
from pathlib import Path

CALLBACKS = Path(__file__).resolve().parent / "callback_plugins"
NAME = "bench_timeline"


def environ(path, env=None):
    """The environment variables that have ansible-playbook write its timeline to path, added to env's own
    callback settings (a copy of os.environ when env is None)."""
    env = dict(os.environ if env is None else env)
    plugins = [p for p in env.get("ANSIBLE_CALLBACK_PLUGINS", "").split(os.pathsep) if p]
    enabled = [c for c in env.get("ANSIBLE_CALLBACKS_ENABLED", "").split(",") if c.strip()]
    env.update(ANSIBLE_CALLBACK_PLUGINS=os.pathsep.join(plugins + [str(CALLBACKS)]),
               ANSIBLE_CALLBACKS_ENABLED=",".join(enabled + [NAME]), BENCH_TIMELINE=str(path))
    return env


def read(path):
    """The timeline's events, in order."""
    with open(path, encoding="utf-8") as stream:
        return [json.loads(line) for line in stream if line.strip()]


def _span(event, following):
    return {"start_s": round(event["t"], 2), "wall_s": round(following["t"] - event["t"], 2),
            "main_cpu_s": round(following["cpu"] - event["cpu"], 2),
            "workers_cpu_s": round(following["children"] - event["children"], 2)}


def summarise(events, top=10):
    """-> {"plays": [{"name", "start_s", "wall_s", "main_cpu_s", "workers_cpu_s", "executed", "skipped",
    "tasks"}, ...], "tasks": the `top` tasks of the longest spans, each with its "play", "run_once", "executed" and
    "skipped", "executed": every task execution of the run, "skipped"}; ValueError when the run did not end (no end
    event: the playbook was killed, or ran without the callback)."""
    ends = [e for e in events if e["kind"] == "end"]
    if not ends:
        raise ValueError("the timeline has no end: the run did not finish")
    results = ends[-1].get("results") or {}
    marks = [e for e in events if e["kind"] in ("play", "task", "end")]
    plays, tasks, seen, play = [], [], set(), None
    for index, (event, following) in enumerate(zip(marks, marks[1:])):
        if event["kind"] == "play":
            play_end = next(e for e in marks[index + 1:] if e["kind"] in ("play", "end"))
            play = dict(name=event["name"], executed=0, skipped=0, tasks=0, **_span(event, play_end))
            plays.append(play)
        elif event["kind"] == "task" and event["uuid"] not in seen:
            seen.add(event["uuid"])
            counts = results.get(event["uuid"], {})
            executed = sum(counts.get(k, 0) for k in ("ok", "failed", "unreachable"))
            skipped = counts.get("skipped", 0)
            tasks.append(dict(name=event["name"], play=play["name"] if play else None, run_once=event.get("run_once"),
                              executed=executed, skipped=skipped, **_span(event, following)))
            if play is not None:
                play["executed"] += executed
                play["skipped"] += skipped
                play["tasks"] += 1
    longest = sorted(tasks, key=lambda task: -task["wall_s"])[:top]
    return {"plays": plays, "tasks": longest, "executed": sum(t["executed"] for t in tasks),
            "skipped": sum(t["skipped"] for t in tasks)}


def _row(span, label):
    return "%8.1f %8.1f %9.1f %11.1f %9d %8d  %s" % (
        span["start_s"], span["wall_s"], span["main_cpu_s"], span["workers_cpu_s"], span["executed"], span["skipped"],
        label)


def table(summary, hosts=None):
    """The summary as lines to print: the plays, then the longest tasks; per host too with hosts."""
    heading = ("start s", "wall s", "main CPU", "workers CPU", "executed", "skipped", "play")
    lines = ["%8s %8s %9s %11s %9s %8s  %s" % heading]
    lines.extend(_row(play, play["name"]) for play in summary["plays"])
    lines.append("longest tasks:")
    lines.extend(_row(task, task["name"] + (" (run once)" if task["run_once"] else "")) for task in summary["tasks"])
    total = "task executions: %d, skipped: %d" % (summary["executed"], summary["skipped"])
    if hosts:
        total += " (%.2f and %.2f per host of %d)" % (summary["executed"] / hosts, summary["skipped"] / hosts, hosts)
    lines.append(total)
    return lines
