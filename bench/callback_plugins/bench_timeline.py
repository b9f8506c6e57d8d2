# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A bench's timeline of one ansible-playbook run: a JSON line at each play and task start and at the end.

Not part of the collection: the benches enable it (bench/_timeline.py, ``--timeline``) with
ANSIBLE_CALLBACK_PLUGINS=bench/callback_plugins, ANSIBLE_CALLBACKS_ENABLED=bench_timeline and
BENCH_TIMELINE=<the file to write>. Each line:

    {"kind": "start" | "play" | "task" | "end", "name": ..., "t": seconds since the playbook started,
     "cpu": ansible-playbook's own user+sys seconds, "children": its reaped children's user+sys seconds (the
     forks, with the ssh clients they waited for), "uuid": the task's, "run_once": ...}

The end line adds "results": {task uuid: {"ok": n, "changed": n, "failed": n, "skipped": n, "unreachable": n}},
one count per task execution (a host's result of a task; a loop's items are not counted apart).
"""

from __future__ import annotations

import json
import os
import time

from ansible.plugins.callback import CallbackBase


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "bench_timeline"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        path = os.environ.get("BENCH_TIMELINE")
        self._out = open(path, "w", buffering=1, encoding="utf-8") if path else None
        self._began = time.monotonic()
        self._results = {}

    def _line(self, kind, name=None, **fields):
        if self._out is None:
            return
        times = os.times()
        fields.update(kind=kind, name=name, t=round(time.monotonic() - self._began, 4),
                      cpu=round(times.user + times.system, 3),
                      children=round(times.children_user + times.children_system, 3))
        self._out.write(json.dumps(fields, sort_keys=True) + "\n")

    def _count(self, result, what):
        counts = self._results.setdefault(result._task._uuid, {
            "ok": 0, "changed": 0, "failed": 0, "skipped": 0, "unreachable": 0})
        counts[what] += 1
        if what == "ok" and result._result.get("changed"):
            counts["changed"] += 1

    def v2_playbook_on_start(self, playbook):
        self._began = time.monotonic()
        self._line("start", getattr(playbook, "_file_name", None))

    def v2_playbook_on_play_start(self, play):
        self._line("play", play.get_name())

    def v2_playbook_on_task_start(self, task, is_conditional):
        self._line("task", task.get_name(), uuid=task._uuid, run_once=bool(task.run_once))

    def v2_playbook_on_handler_task_start(self, task):
        self._line("task", task.get_name(), uuid=task._uuid, run_once=bool(task.run_once))

    def v2_runner_on_ok(self, result):
        self._count(result, "ok")

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._count(result, "failed")

    def v2_runner_on_skipped(self, result):
        self._count(result, "skipped")

    def v2_runner_on_unreachable(self, result):
        self._count(result, "unreachable")

    def v2_playbook_on_stats(self, stats):
        self._line("end", results=self._results)
        if self._out is not None:
            self._out.close()
            self._out = None
