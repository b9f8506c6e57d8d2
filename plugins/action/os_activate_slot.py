# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Action plugin of fleetos.layering.os_activate_slot (documented in plugins/modules/os_activate_slot.py).

The budget slots of one activation run live in a book on the controller
(plugin_utils/_slots.py), shared by every fork of the run under a file lock. With a
FleetLock URL the slot is also taken from FleetLock, by the host itself (the uri module
runs on the host, as Zincati calls it), so that other controllers and sliced jobs share
the budget.
"""

from __future__ import annotations

import os
import time

from ansible.plugins.action import ActionBase

from ansible_collections.fleetos.layering.plugins.module_utils import _deployments, _fleetlock, _lease, _params
from ansible_collections.fleetos.layering.plugins.module_utils._errors import FleetosError, one_line
from ansible_collections.fleetos.layering.plugins.plugin_utils import _reboot, _slots
from ansible_collections.fleetos.layering.plugins.plugin_utils._remote import ConnectionHost

# The steps of the slot hold that op acquire with activate runs itself, named as the tasks that run
# them otherwise (roles/os_activate/tasks/hold.yml), so that a failure reads the same either way.
STEP_REBOOT = "Finalize the staged deployment and reboot"
STEP_VERIFY = "Read and verify the booted deployment"

OPS = ("open", "acquire", "drop", "prepare", "rebooting", "event", "booted", "fail", "release", "unlock", "canary",
       "close")

ARGUMENT_SPEC = {
    "op": {"type": "str", "required": True, "choices": list(OPS)},
    "book": {"type": "path"},
    "host": {"type": "str"},
    "hosts": {"type": "list", "elements": "dict"},
    "budgets": {"type": "dict"},
    "max_failures": {"type": "int", "default": 1},
    "canary": {"type": "int", "default": 0},
    "stop_after_canary": {"type": "bool", "default": False},
    "mode": {"type": "str", "default": "finalize", "choices": list(_slots.MODES)},
    "target_digest": {"type": "str"},
    "old_digest": {"type": "str"},
    "timeout": {"type": "int", "default": 3600},
    "poll_interval": {"type": "float", "default": 0.1},
    "event": {"type": "str", "choices": list(_slots.EVENTS)},
    "status": {"type": "dict"},
    "backend": {"type": "str", "default": "rpm-ostree", "choices": ["rpm-ostree", "bootc"]},
    "task": {"type": "str"},
    "result": {"type": "dict"},
    "rollback": {"type": "bool", "default": True},
    "reboot": {"type": "dict"},
    "lease": {"type": "dict"},
    "rebooting": {"type": "bool", "default": False},
    "lease_release": {"type": "bool", "default": False},
    "activate": {"type": "dict", "options": _reboot.ARGUMENT_SPEC},
    "health": {"type": "bool", "default": True},
    "probe": {"type": "dict"},
    "reason": {"type": "str"},
    "failed": {"type": "bool", "default": False},
    "reboot_timeout": {"type": "int", "default": 600},
    "fleetlock_url": {"type": "str"},
    "fleetlock_group": {"type": "str"},
    "fleetlock_id": {"type": "str"},
    "fleetlock_timeout": {"type": "int", "default": 600},
    "fleetlock_retry_delay": {"type": "float", "default": 5},
}
REQUIRED_IF = [
    ("op", "open", ("hosts", "budgets")),
    ("op", "acquire", ("book", "target_digest")),
    ("op", "drop", ("book", "reason")),
    ("op", "prepare", ("book",)),
    ("op", "rebooting", ("book",)),
    ("op", "event", ("book", "event")),
    ("op", "booted", ("book",)),
    ("op", "fail", ("book",)),
    ("op", "release", ("book",)),
    ("op", "unlock", ("fleetlock_url",)),
    ("op", "canary", ("book",)),
    ("op", "close", ("book",)),
]


class ActionModule(ActionBase):
    """Take, record and free the budget slots of an activation."""

    TRANSFERS_FILES = False
    _clock = staticmethod(time.time)
    _sleep = staticmethod(time.sleep)
    # The run's controller process (ansible-playbook): a worker outlives it when it is killed,
    # and is then reparented.
    _controller = staticmethod(os.getppid)

    def run(self, tmp=None, task_vars=None):
        self._supports_check_mode = True
        result = super().run(tmp, task_vars)
        del tmp
        validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC, required_if=REQUIRED_IF)
        del validation
        args = dict(args)
        args["host"] = args["host"] or (task_vars or {}).get("inventory_hostname")
        try:
            result.update(getattr(self, "_op_" + args["op"])(args, task_vars or {}))
        except _slots.SlotError as exc:
            result.update(failed=True, msg="The budget slot operation %s failed: %s." % (args["op"], exc))
        result.setdefault("changed", False)
        return result

    # -- FleetLock, called from the host -------------------------------------------------

    def _fleetlock(self, op, args, task_vars):
        """POST /v1/<op> from the host (curl over the connection): -> (granted, answer)."""
        return _fleetlock.post(ConnectionHost(self), args["fleetlock_url"], op, args["fleetlock_id"] or args["host"],
                               args["fleetlock_group"] or "default")

    # -- the operations ------------------------------------------------------------------

    def _op_open(self, args, task_vars):
        book = _slots.new_book(args["hosts"], args["budgets"], args["max_failures"], args["canary"], self._clock())
        path = _slots.create_book_file(book)
        return {"book": path, "canary": book["canary"], "budgets": _slots.summary(book)["budgets"]}

    def _controller_gone(self, controller):
        """Why a worker of a killed run stops waiting (it would take slots no one frees), or None."""
        if self._controller() == controller:
            return None
        return "the run's controller process %d is gone" % controller

    def _write_lease(self, args, task_vars, **fields):
        """Write the host's rollout lease (``lease``) with ``fields`` (os_rollout_lease's options); -> its message
        when it failed, or None."""
        lease = args["lease"]
        options = dict(fields, rollout=lease.get("rollout"), owner=lease.get("owner"), started_at=lease.get("started_at"))
        if lease.get("ttl") is not None:
            options["ttl"] = lease["ttl"]
        written = self._lease_task(options)
        return one_line(written.get("msg"), "no message") if written.get("failed") else None

    def _lease_task(self, options):
        """The result of os_rollout_lease with ``options`` on this host, over the connection, as the task runs it."""
        params = _params.defaults(_lease.ARGUMENT_SPEC, **options)
        return _lease.task_result(ConnectionHost(self), params, check_mode=self._task.check_mode)

    def _write_rebooting(self, args, task_vars, target_digest):
        """With ``lease``: the host's rollout lease records phase rebooting to the target; -> a problem, or None."""
        if not args["lease"]:
            return None
        problem = self._write_lease(args, task_vars, phase="rebooting", target_digest=target_digest)
        if problem:
            return "recording the reboot in the rollout lease of %s failed: %s" % (args["host"], problem)
        return None

    def _write_activated(self, args, task_vars):
        """The activated host's rollout lease records phase activated (held) or, with ``lease_release``,
        done (released), as the role's task after the hold does; -> a problem, or None."""
        release = args["lease_release"]
        problem = self._write_lease(args, task_vars, state="released" if release else "acquired",
                                    phase="done" if release else "activated")
        if problem:
            return "%s was activated, but recording it in its rollout lease failed: %s" % (args["host"], problem)
        return None

    def _op_acquire(self, args, task_vars):
        host = args["host"]
        problem = _reboot.check_arguments(args["activate"]) if args["activate"] else None
        if problem:
            return {"failed": True, "msg": "activate." + problem}
        controller = self._controller()
        # From here on the run may reboot the host at any moment: its lease says so before the host
        # waits for a slot, so that the write is not in the slot hold. A host with a whole round of its
        # pool ahead of it writes it once that round got its slots (_slots.lease_can_wait), so that the
        # first hosts of each pool, granted at once, do not wait for every host's write. A killed
        # run's rerun verifies a host booted on the target, and activates (or frees the FleetLock
        # slot of) one that is not.
        written = not args["lease"]
        deadline = self._clock() + args["timeout"]
        while True:
            with _slots.locked_book(args["book"]) as book:
                answer, reason = _slots.try_acquire(book, host, self._clock(), take=written)
                if not written and (answer in ("free", "granted") or (
                        answer == "wait" and not _slots.lease_can_wait(book, host))):
                    reason = self._controller_gone(controller)
                    answer = "refused" if reason else "write"
                elif answer == "wait" and self._clock() >= deadline:
                    pool = book["hosts"][host]["pool"]
                    reason = "no budget slot of pool %s was freed within %s s (held by %s)" % (
                        pool, args["timeout"], ", ".join(_slots.holders(book, pool)) or "nobody")
                    answer = "refused"
                elif answer == "wait":
                    reason = self._controller_gone(controller)
                    answer = "refused" if reason else answer
                if answer == "refused":
                    _slots.give_back(book, host, reason, self._clock())
            if answer == "write":
                problem = self._write_rebooting(args, task_vars, args["target_digest"])
                if problem:
                    with _slots.locked_book(args["book"]) as book:
                        _slots.give_back(book, host, problem, self._clock())
                    return {"granted": False, "reason": problem}
                written = True
                continue
            if answer != "wait":
                break
            self._sleep(args["poll_interval"])
        if answer != "granted":
            return {"granted": False, "reason": reason}
        locked = False
        if args["fleetlock_url"]:
            locked, reason = self._fleetlock_slot(args, task_vars, controller)
            if not locked:
                with _slots.locked_book(args["book"]) as book:
                    _slots.give_back(book, host, reason, self._clock(), stop=reason)
                return {"granted": False, "reason": reason}
        with _slots.locked_book(args["book"]) as book:
            book["hosts"][host]["locked"] = locked
            record = _slots.new_record(book, host, args["mode"], args["target_digest"], args["old_digest"],
                                       fleetlock=bool(args["fleetlock_url"]))
            if (args["rebooting"] or args["activate"]) and args["mode"] != "verify":
                # Nothing runs between the grant and the reboot: one task less in the slot hold.
                record = _slots.record_event(book, host, "reboot_start", self._clock())
        result = {"granted": True, "reason": None, "changed": locked, "released": False, "failure": None, "lease_written": False,
                  "ansible_facts": {"os_activate_result": record}}
        if args["activate"]:
            held = self._hold(args, task_vars, controller)
            held["changed"] = locked or held.pop("changed", False)
            result.update(held)
        return result

    def _hold(self, args, task_vars, controller):
        """op acquire with ``activate``, once the slot is granted: the rest of the slot hold, in this task.

        Reboot into the target (not in mode verify), read and verify the booted digest, free the
        slot; no task boundary (a fork, a connection, a result sent back) in between. A failure is
        returned as ``failure`` (the step, as the tasks of hold.yml are named, its message and rc),
        not raised: the task's facts carry the record, and the caller's rescue handles it.

        A worker outlives a killed ansible-playbook (it runs in a session of its own): once the
        run's ``controller`` process is gone, it does not reboot the host, and after the reboot it
        changes nothing more (no record, no FleetLock steady-state, no lease write), as the reboot
        task alone would have, so that a rerun finds the host as the killed run left it.
        """
        gone = self._controller_gone(controller)
        if gone:
            return {"failed": True, "msg": "%s, so %s was not rebooted." % (gone, args["host"])}
        reboot = {}
        if args["mode"] != "verify":
            if self._connection.transport == "local":
                reboot = {"failed": True, "msg": "Refusing to reboot the controller (connection local)."}
            elif self._task.check_mode:
                reboot = {"changed": True, "rebooted": False}
            else:
                reboot = _reboot.reboot(self, args["activate"])
            if reboot.get("failed"):
                return {"failure": {"step": STEP_REBOOT, "msg": reboot["msg"], "rc": reboot.get("rc")}, "reboot": reboot}
        gone = self._controller_gone(controller)
        if gone:
            return {"failed": True, "msg": "%s, so %s is left as it booted, unverified." % (gone, args["host"]),
                    "reboot": reboot, "changed": reboot.get("changed", False)}
        booted = self._booted(args, task_vars, reboot, health=False)
        if booted.get("failed"):
            with _slots.locked_book(args["book"]) as book:
                record = _slots.record_of(book, args["host"])
            return {"failure": {"step": STEP_VERIFY, "msg": booted["msg"], "rc": None}, "reboot": reboot,
                    "changed": reboot.get("changed", False), "booted": booted.get("booted"),
                    "ansible_facts": {"os_activate_result": record}}
        released = self._op_release(args, task_vars)
        result = dict(released, reboot=reboot, released=True, booted=booted["booted"], lease_written=False,
                      changed=reboot.get("changed", False) or released["changed"])
        if args["lease"] and released["ansible_facts"]["os_activate_result"]["status"] == "activated":
            # After the slot is freed: bookkeeping on the host, which the next host of the pool need not wait for.
            problem = self._write_activated(args, task_vars)
            if problem:
                result.update(failed=True, msg=problem)
            else:
                result["lease_written"] = True
        return result

    def _fleetlock_slot(self, args, task_vars, controller):
        """FleetLock pre-reboot, asked again every retry delay until the timeout: -> (locked, reason)."""
        deadline = self._clock() + args["fleetlock_timeout"]
        while True:
            gone = self._controller_gone(controller)
            if gone:
                return False, gone
            ok, status = self._fleetlock("pre-reboot", args, task_vars)
            if ok:
                return True, None
            if self._clock() + args["fleetlock_retry_delay"] > deadline:
                return False, "FleetLock gave no slot within %s s (%s refused, last answer %s)" % (
                    args["fleetlock_timeout"], args["host"], status)
            self._sleep(args["fleetlock_retry_delay"])

    def _op_drop(self, args, task_vars):
        """The host will not ask for its slot (its stage failed, or left nothing to activate)."""
        with _slots.locked_book(args["book"]) as book:
            _slots.drop(book, args["host"], args["reason"], self._clock(), failed=args["failed"])
            stop = book["stop"]
        return {"stop_reason": stop}

    def _read_deployments(self, args, task_vars):
        """The host's deployments, as fleetos.layering.os_info returns them (without the architecture).

        The backend's status command runs on the host over the connection and is parsed here
        (module_utils/_deployments.py): one command, no Python on the host.
        """
        try:
            return _deployments.read_host(ConnectionHost(self), args["backend"], architecture=False)
        except FleetosError as exc:
            return {"failed": True, "msg": exc.msg}

    def _op_prepare(self, args, task_vars):
        """Before the reboot: read the host's deployments and check that they are what the mode needs."""
        host = args["host"]
        with _slots.locked_book(args["book"]) as book:
            record = _slots.record_of(book, host)
        status = self._read_deployments(args, task_vars)
        if status.get("failed"):
            return {"failed": True, "msg": "Reading the deployments of %s before the reboot failed: %s" % (
                host, one_line(status.get("msg"), "no message"))}
        problem = _slots.prepare_problem(record, status, args["backend"])
        result = {"status": status}
        if problem:
            result.update(failed=True, msg=problem)
        return result

    def _op_rebooting(self, args, task_vars):
        """The host is about to reboot: the book records the reboot start (with ``lease``, the host's
        rollout lease first says so, when op acquire was not given it)."""
        host = args["host"]
        with _slots.locked_book(args["book"]) as book:
            record = _slots.record_of(book, host)
        problem = self._write_rebooting(args, task_vars, record["target_digest"])
        if problem:
            return {"failed": True, "msg": problem[0].upper() + problem[1:]}
        if record["mode"] == "verify":
            # Rebooted by a killed run already: nothing reboots now.
            return {"ansible_facts": {"os_activate_result": record}}
        with _slots.locked_book(args["book"]) as book:
            record = _slots.record_event(book, host, "reboot_start", self._clock(), args["status"])
        return {"ansible_facts": {"os_activate_result": record}}

    def _op_event(self, args, task_vars):
        with _slots.locked_book(args["book"]) as book:
            record = _slots.record_event(book, args["host"], args["event"], self._clock(), args["status"])
        return {"ansible_facts": {"os_activate_result": record}}

    def _op_booted(self, args, task_vars):
        """The host is back: read its booted deployment on the host and check it is the target."""
        return self._booted(args, task_vars, args["reboot"] or {}, args["health"])

    def _booted(self, args, task_vars, reboot, health):
        """op booted, after the reboot whose result is ``reboot``; ``health``: whether a health check follows."""
        host = args["host"]
        if reboot.get("unreachable"):
            # Before reboot_end: the failure is one of the reboot phase, which probes the host.
            return {"failed": True, "msg": "%s was unreachable after its reboot: %s" % (
                host, one_line(reboot.get("msg"), "no answer"))}
        with _slots.locked_book(args["book"]) as book:
            _slots.record_event(book, host, "reboot_end", self._clock())
        status = self._read_deployments(args, task_vars)
        if status.get("failed"):
            return {"failed": True, "msg": "Reading the booted deployment of %s failed: %s" % (
                host, status.get("msg") or "no message")}
        with _slots.locked_book(args["book"]) as book:
            record = _slots.record_event(book, host, "booted", self._clock(), status)
            on_target = record["booted_digest"] == record["target_digest"]
            if on_target and not health:
                # No health check follows: booted on the target is verified.
                record = _slots.record_event(book, host, "verified", self._clock())
        result = {"booted": status.get("booted"), "ansible_facts": {"os_activate_result": record}}
        if not on_target:
            result.update(failed=True, msg="%s booted %s, not %s" % (host, record["booted_digest"], record["target_digest"]))
        return result

    def _op_fail(self, args, task_vars):
        with _slots.locked_book(args["book"]) as book:
            record, roll_back = _slots.record_failure(
                book, args["host"], args["task"], args["result"], self._clock(), rollback=args["rollback"],
                reboot=args["reboot"], probe=args["probe"], reboot_timeout=args["reboot_timeout"])
        return {"roll_back": roll_back, "ansible_facts": {"os_activate_result": record}}

    def _op_release(self, args, task_vars):
        with _slots.locked_book(args["book"]) as book:
            record = _slots.record_of(book, args["host"])
            unlock = book["hosts"][args["host"]]["locked"] and not record["holds_slot"]
        unlocked = False
        if unlock:
            # steady-state frees the host's FleetLock slot; tried three times, as a reboot manager does.
            for attempt in range(3):
                unlocked = self._fleetlock("steady-state", args, task_vars)[0]
                if unlocked:
                    break
                if attempt < 2:
                    self._sleep(args["fleetlock_retry_delay"])
        with _slots.locked_book(args["book"]) as book:
            if unlock and not unlocked:
                record = _slots.record_of(book, args["host"])
                record.update(status="failed", reason="%s; FleetLock steady-state failed: its FleetLock slot stays"
                              " taken" % (record.get("reason") or "activated"))
            record = _slots.release(book, args["host"], self._clock())
            book["hosts"][args["host"]]["locked"] = unlock and not unlocked
        return {"unlocked": unlocked, "changed": unlocked, "ansible_facts": {"os_activate_result": record}}

    def _op_unlock(self, args, task_vars):
        unlocked, status = self._fleetlock("steady-state", args, task_vars)
        if not unlocked:
            return {"failed": True, "msg": "FleetLock steady-state for %s failed with status %s."
                    % (args["fleetlock_id"] or args["host"], status)}
        return {"unlocked": True, "changed": True}

    def _op_canary(self, args, task_vars):
        with _slots.locked_book(args["book"]) as book:
            stop = _slots.close_canary(book, args["stop_after_canary"])
            verified = book["canary_verified"]
        return {"stop_reason": stop, "canary_verified": verified}

    def _op_close(self, args, task_vars):
        with _slots.locked_book(args["book"]) as book:
            summary = _slots.summary(book)
            summary["most_held"] = _slots.most_held(book)
        _slots.remove_book_file(args["book"])
        return {"ansible_facts": {"os_activate_summary": summary}}
