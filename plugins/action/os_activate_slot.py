# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Action plugin of fleetos.layering.os_activate_slot (documented in plugins/modules/os_activate_slot.py).

One host's activation, from "staged" to "verified" or "rolled back", in one place: take a budget
slot of the book (plugin_utils/_book.py, one file on the controller shared by the run's forks
under a lock) and of FleetLock, finalize and reboot (plugin_utils/_reboot.py), verify the booted
digest, run the health command, free the slot, and write the host's rollout lease at each turn; on
a failure, roll back through the same reboot path. The user's hook task files are the only steps
that are tasks of their own: the activation stops before each (the fact ``os_activate_next``
names it) and op continue takes it on from there. Everything that runs on the host is a plain
command over the connection (no Python there).
"""

from __future__ import annotations

import os
import time

from ansible.errors import AnsibleConnectionFailure, AnsibleError
from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.fleetos.layering.plugins.module_utils import _deployments, _params

from ansible_collections.fleetos.layering.plugins.plugin_utils import _backends, _fleetlock, _lease
from ansible_collections.fleetos.layering.plugins.module_utils._errors import FleetosError, one_line
from ansible_collections.fleetos.layering.plugins.module_utils._host import quote
from ansible_collections.fleetos.layering.plugins.plugin_utils import _activation, _bound, _reboot, _slots
from ansible_collections.fleetos.layering.plugins.plugin_utils._book import Book
from ansible_collections.fleetos.layering.plugins.plugin_utils._poll import PollTimeout, poll_until
from ansible_collections.fleetos.layering.plugins.plugin_utils._remote import ConnectionHost

# The steps of an activation, as its failures name them.
STEP_PREPARE = "Read and check the deployments before the reboot"
STEP_REBOOT = "Finalize the staged deployment and reboot"
STEP_VERIFY = "Read and verify the booted deployment"
STEP_HEALTH = "Run the health command"
STEP_ROLLBACK = "Make the previous deployment the default and reboot into it"
STEP_ROLLBACK_VERIFY = "Verify the previous digest is booted"
# The hooks, in the order they run: before the reboot, after the verified boot (health), after the health.
HOOKS = ("pre", "health", "post")
# Seconds between two lines of a host that waits for its FleetLock slot.
SAY_EVERY = 30
# Seconds coreutils timeout gives a timed-out health command between its TERM and a KILL; the controller
# waits that long and HEALTH_MARGIN more for the host's answer before it cuts the connection.
HEALTH_KILL_AFTER = 5
HEALTH_MARGIN = 5
# The exit statuses of coreutils timeout for a command it ended: TERM (124), KILL after --kill-after (137).
TIMED_OUT = (124, 137)

display = Display()

OPS = ("open", "acquire", "continue", "fail", "drop", "canary", "close", "unlock")

REBOOT_SPEC = dict((name, spec) for name, spec in _reboot.ARGUMENT_SPEC.items() if name != "reboot_command")
HEALTH_SPEC = {
    "command": {"type": "str"},
    "retries": {"type": "int", "default": 3},
    "delay": {"type": "float", "default": 5},
    "timeout": {"type": "int", "default": 300},
}
HOOKS_SPEC = dict((name, {"type": "bool", "default": False}) for name in HOOKS)
FLEETLOCK_SPEC = {
    "url": {"type": "str"},
    "group": {"type": "str"},
    "id": {"type": "str"},
    "timeout": {"type": "int", "default": 600},
    "retry_delay": {"type": "float", "default": 5},
    "request_timeout": {"type": "int", "default": _fleetlock.TIMEOUT},
}

ARGUMENT_SPEC = {
    "op": {"type": "str", "required": True, "choices": list(OPS)},
    "book": {"type": "path"},
    "host": {"type": "str"},
    "hosts": {"type": "list", "elements": "dict"},
    "budgets": {"type": "dict"},
    "max_failures": {"type": "int", "default": 1},
    "canary": {"type": "int", "default": 0},
    "stop_after_canary": {"type": "bool", "default": False},
    "reason": {"type": "str"},
    "failed": {"type": "bool", "default": False},
    "mode": {"type": "str", "default": "finalize", "choices": list(_slots.MODES)},
    "target_digest": {"type": "str"},
    "old_digest": {"type": "str"},
    "staged_checksum": {"type": "str"},
    "backend": {"type": "str", "default": "rpm-ostree", "choices": ["rpm-ostree", "bootc"]},
    "timeout": {"type": "int", "default": 3600},
    "command_timeout": {"type": "int", "default": 300},
    "poll_interval": {"type": "float", "default": 0.1},
    "lease": {"type": "dict"},
    "lease_release": {"type": "bool", "default": False},
    "reboot": {"type": "dict", "options": REBOOT_SPEC},
    "health": {"type": "dict", "options": HEALTH_SPEC},
    "hooks": {"type": "dict", "options": HOOKS_SPEC},
    "rollback": {"type": "bool", "default": True},
    "park_boot": {"type": "bool", "default": False},
    "soft_reboot": {"type": "str", "default": "never", "choices": list(_backends.SOFT_REBOOT)},
    "fleetlock": {"type": "dict", "options": FLEETLOCK_SPEC},
    "task": {"type": "str"},
    "result": {"type": "dict"},
}
REQUIRED_IF = [
    ("op", "open", ("hosts", "budgets")),
    ("op", "acquire", ("book", "target_digest")),
    ("op", "continue", ("book",)),
    ("op", "fail", ("book",)),
    ("op", "drop", ("book", "reason")),
    ("op", "canary", ("book",)),
    ("op", "close", ("book",)),
]


class Stop(Exception):
    """A step of the activation failed: ``step`` names it, ``result`` is its result (msg, rc)."""

    def __init__(self, step, result, reboot=None):
        super().__init__(step)
        self.step = step
        self.result = result
        self.reboot = reboot


class ActionModule(ActionBase):
    """Take a budget slot and activate the host in it: reboot, verify, free; roll back a failure."""

    TRANSFERS_FILES = False
    _clock = staticmethod(time.time)
    _sleep = staticmethod(time.sleep)
    # The run's controller process (ansible-playbook): a worker outlives it when it is killed,
    # and is then reparented.
    _controller = staticmethod(os.getppid)
    # Seconds a host command over the connection may take before the connection is cut (op acquire's
    # command_timeout, kept in the book for the steps that follow); None: no bound.
    _command_timeout = None
    # The strategy fleetos.layering.slots runs this task again while the host is parked (_slots.REPEATS_VAR).
    _repeats = False

    def run(self, tmp=None, task_vars=None):
        self._supports_check_mode = True
        result = super().run(tmp, task_vars)
        del tmp
        validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC, required_if=REQUIRED_IF)
        del validation
        args = dict(args)
        args["host"] = args["host"] or (task_vars or {}).get("inventory_hostname")
        self._command_timeout = args["command_timeout"]
        self._repeats = bool((task_vars or {}).get(_slots.REPEATS_VAR))
        try:
            result.update(getattr(self, "_op_" + args["op"])(args))
        except _slots.SlotError as exc:
            result.update(failed=True, msg="The budget slot operation %s failed: %s." % (args["op"], exc))
        result.setdefault("changed", False)
        return result

    # -- the book ------------------------------------------------------------------------

    @staticmethod
    def _book(path):
        return Book.locked(path)

    def _record(self, path, host, event=None, status=None):
        """The host's record, after ``event`` (with the deployments ``status`` read for it) is recorded."""
        with self._book(path) as book:
            if event:
                return book.record_event(host, event, self._clock(), status)
            return book.record(host)

    def _config(self, path, host):
        """What op acquire was given for the host (kept in the book for the steps that follow)."""
        with self._book(path) as book:
            config, hook = book.config(host), book.next_step(host)
        if config.get("command_timeout"):
            self._command_timeout = config["command_timeout"]
        return config, hook

    # -- the host ------------------------------------------------------------------------

    def _low_level_execute_command(self, cmd, *args, **kwargs):
        """Every command this action runs on the host, bounded on the controller's side (plugin_utils/_bound.py):
        a connection that stops answering in the middle of a command is cut after ``_command_timeout`` seconds
        (CommandTimeout, an AnsibleConnectionFailure: the host did not answer)."""
        call = super()._low_level_execute_command
        return _bound.bounded(lambda: call(cmd, *args, **kwargs), self._command_timeout, self._connection)

    def _fleetlock(self, op, config, host):
        """POST /v1/<op> from the host (curl over the connection): -> (granted, answer)."""
        fleetlock = config["fleetlock"]
        return _fleetlock.post(ConnectionHost(self), fleetlock["url"], op, fleetlock["id"] or host,
                               fleetlock["group"] or "default", timeout=fleetlock.get("request_timeout") or _fleetlock.TIMEOUT)

    def _controller_gone(self, controller):
        """Why a worker of a killed run stops (it would take slots no one frees), or None."""
        if self._controller() == controller:
            return None
        return "the run's controller process %d is gone" % controller

    def _lease_task(self, options):
        """The result of os_rollout_lease with ``options`` on this host, over the connection, as the task runs it."""
        params = _params.defaults(_lease.ARGUMENT_SPEC, **options)
        return _lease.task_result(ConnectionHost(self), params, check_mode=self._task.check_mode)

    def _write_lease(self, config, host, **fields):
        """The one place the activation writes the host's rollout lease: -> a problem, or None (or no lease)."""
        lease = config.get("lease") or {}
        if not lease:
            return None
        options = dict(fields, rollout=lease.get("rollout"), owner=lease.get("owner"), started_at=lease.get("started_at"))
        if lease.get("ttl") is not None:
            options["ttl"] = lease["ttl"]
        written = self._lease_task(options)
        if written.get("failed"):
            return "recording phase %s in the rollout lease of %s failed: %s" % (
                fields.get("phase"), host, one_line(written.get("msg"), "no message"))
        return None

    def _read_deployments(self, config):
        """The host's deployments, as fleetos.layering.os_info returns them (the backend's status command, parsed
        here); FleetosError when they cannot be read."""
        return _deployments.read_host(ConnectionHost(self), config["backend"], architecture=False)

    def _probe(self, config):
        """The boot id the host answers with now, as a result: stdout, or unreachable / failed."""
        try:
            return {"stdout": _reboot.read_boot_id(self, config["reboot"]["boot_time_command"])}
        except AnsibleConnectionFailure as exc:
            return {"unreachable": True, "msg": to_text(exc)}
        except AnsibleError as exc:
            return {"failed": True, "msg": to_text(exc)}

    def _reboot(self, config, command, kind="full"):
        """Run ``command`` and wait for the new boot id (plugin_utils/_reboot.py): the activation's and the
        rollback's one reboot path. -> os_reboot's result."""
        if self._connection.transport == "local":
            return {"failed": True, "msg": "Refusing to reboot the controller (connection local)."}
        if self._task.check_mode:
            return {"changed": True, "rebooted": False}
        return _reboot.reboot(self, self._reboot_args(config, command, kind))

    def _reboot_args(self, config, command, kind="full"):
        """The reboot's arguments; a soft reboot (``kind``) keeps the boot id, so its wait reads the boot id and the
        soft-reboot count (_reboot.soft_boot_time_command())."""
        args = dict(config["reboot"], reboot_command=command, command_timeout=self._command_timeout)
        if kind == "soft":
            args["boot_time_command"] = _reboot.soft_boot_time_command(args["boot_time_command"])
        return args

    def _health_command(self, config):
        """The health command on the host, tried ``retries`` times ``delay`` s apart; Stop when it never passes.

        Each try is bounded by ``timeout`` twice: on the host, by coreutils timeout (the command's processes end
        there, whatever the connection), and on the controller, a few seconds later (a connection that stops
        answering is cut). A try that timed out is not tried again: a hung check that is retried holds its
        pool's slot for as many bounds, and a service that is still starting fails fast, not by hanging.
        """
        health = config["health"]
        attempts = max(health["retries"], 1)
        seconds = health.get("timeout") or HEALTH_SPEC["timeout"]["default"]
        line = health_line(health["command"], seconds)
        for attempt in range(attempts):
            bound, self._command_timeout = self._command_timeout, seconds + HEALTH_KILL_AFTER + HEALTH_MARGIN
            try:
                res = self._low_level_execute_command(line, sudoable=True)
            except _bound.CommandTimeout as exc:
                # The host did not answer in time: the connection was cut.
                res = {"rc": TIMED_OUT[0], "cut": to_text(exc)}
            except AnsibleConnectionFailure as exc:
                res = {"rc": None, "stderr": to_text(exc)}
            finally:
                self._command_timeout = bound
            if res.get("rc") == 0:
                return
            if res.get("rc") in TIMED_OUT:
                raise Stop(STEP_HEALTH, {"msg": "the health command %s did not finish within %s s%s" % (
                    _reboot.quote_output(health["command"]), _bound.seconds_text(seconds),
                    " (%s: the host stopped answering)" % res["cut"] if res.get("cut") else ""),
                    "rc": res.get("rc"), "timed_out": True})
            if attempt + 1 < attempts:
                self._sleep(health["delay"])
        raise Stop(STEP_HEALTH, {"msg": "the health command %s failed %d time(s), last: %s" % (
            _reboot.quote_output(health["command"]), attempts,
            _reboot.quote_output(to_text(res.get("stderr") or res.get("stdout")).strip())), "rc": res.get("rc")})

    # -- open, drop, canary, close, unlock ------------------------------------------------

    def _op_open(self, args):
        book = Book.new(args["hosts"], args["budgets"], args["max_failures"], args["canary"], self._clock())
        path = book.create_file()
        return {"book": path, "canary": book.canary, "budgets": book.summary()["budgets"]}

    def _op_drop(self, args):
        """The host will not ask for its slot (its stage failed, or left nothing to activate)."""
        with self._book(args["book"]) as book:
            stop = book.drop(args["host"], args["reason"], self._clock(), failed=args["failed"])
        return {"stop_reason": stop}

    def _op_canary(self, args):
        with self._book(args["book"]) as book:
            stop = book.close_canary(args["stop_after_canary"])
            verified = book.canary_verified
        return {"stop_reason": stop, "canary_verified": verified}

    def _op_close(self, args):
        with self._book(args["book"]) as book:
            summary = book.summary()
            summary["most_held"] = book.most_held()
        Book.remove(args["book"])
        return {"ansible_facts": {"os_activate_summary": summary}}

    def _op_unlock(self, args):
        config = {"fleetlock": args["fleetlock"] or {}}
        if not config["fleetlock"].get("url"):
            return {"failed": True, "msg": "fleetlock.url is required for op unlock."}
        unlocked, status = self._fleetlock("steady-state", config, args["host"])
        if not unlocked:
            return {"failed": True, "msg": "FleetLock steady-state for %s failed with status %s."
                    % (config["fleetlock"]["id"] or args["host"], status)}
        return {"unlocked": True, "changed": True}

    # -- the activation ------------------------------------------------------------------

    def _check_acquire(self, args):
        """The first problem with op acquire's numbers, as one sentence, or None."""
        reboot = dict(args["reboot"] or _params.defaults(REBOOT_SPEC), reboot_command="-")
        problem = _reboot.check_arguments(reboot)
        if problem:
            return "reboot." + problem
        health = args["health"] or {}
        if args["command_timeout"] < 1:
            return "command_timeout must be at least 1 second, got %s." % args["command_timeout"]
        if health.get("timeout") is not None and health["timeout"] < 1:
            return "health.timeout must be at least 1 second, got %s." % health["timeout"]
        fleetlock = args["fleetlock"] or {}
        if fleetlock.get("request_timeout") is not None and fleetlock["request_timeout"] < 1:
            return "fleetlock.request_timeout must be at least 1 second, got %s." % fleetlock["request_timeout"]
        if health.get("retries") is not None and health["retries"] < 0:
            return "health.retries must be 0 or more, got %s." % health["retries"]
        if health.get("delay") is not None and health["delay"] < 0:
            return "health.delay must be 0 or more seconds, got %s." % health["delay"]
        return None

    def _op_acquire(self, args):
        host = args["host"]
        problem = self._check_acquire(args)
        if problem:
            return {"failed": True, "msg": problem}
        config = {
            "mode": args["mode"], "backend": args["backend"], "staged_checksum": args["staged_checksum"] or None,
            "reboot": args["reboot"] or _params.defaults(REBOOT_SPEC),
            "health": args["health"] or _params.defaults(HEALTH_SPEC),
            "hooks": args["hooks"] or _params.defaults(HOOKS_SPEC),
            "rollback": args["rollback"], "park_boot": args["park_boot"], "soft_reboot": args["soft_reboot"],
            "lease": args["lease"] or {}, "lease_release": args["lease_release"],
            "fleetlock": args["fleetlock"] or _params.defaults(FLEETLOCK_SPEC),
            "controller": self._controller(), "book": args["book"], "command_timeout": args["command_timeout"],
        }
        declined = self._declined(args, config)
        if declined:
            with self._book(args["book"]) as book:
                book.decline(host, declined, self._clock())
            return {"granted": False, "declined": True, "reason": declined, "ansible_facts": {"os_activate_next": None}}
        granted, reason = self._take_slot(args, config)
        if not granted:
            return {"granted": False, "reason": reason, "ansible_facts": {"os_activate_next": None}}
        with self._book(args["book"]) as book:
            book.start(host, config)
        result = self._advance(args["book"], host, config, "granted")
        result.update(granted=True, reason=None)
        return result

    def _declined(self, args, config):
        """With soft_reboot required, why the host cannot soft-reboot into its staged deployment (read now, before
        it takes a slot), or None. A host whose deployments cannot be read is declined too: nothing was done."""
        if config["soft_reboot"] != "required" or config["mode"] != "finalize":
            return None
        backend = _backends.backend(config["backend"])
        staged = None
        if backend.no_soft_reboot is None:
            try:
                staged = self._read_deployments(config).get("staged")
            except (FleetosError, AnsibleConnectionFailure) as exc:
                return "soft reboot required, and its deployments could not be read: %s" % one_line(
                    getattr(exc, "msg", None) or to_text(exc), "no answer")
        kind, why = backend.soft_reboot("required", staged)
        return None if kind == "soft" else "soft reboot required, and %s" % why

    def _take_slot(self, args, config):
        """Wait for a slot of the host's pool (and of FleetLock): -> (granted, reason)."""
        host = args["host"]
        controller = config["controller"]
        # From here on the run may reboot the host at any moment: its lease says so before the host
        # waits for a slot, so that the write is not in the slot hold. A host with a whole round of its
        # pool ahead of it writes it once that round got its slots (_slots.lease_can_wait), so that the
        # first hosts of each pool, granted at once, do not wait for every host's write. A killed
        # run's rerun verifies a host booted on the target, and activates (or frees the FleetLock
        # slot of) one that is not.
        written = not config["lease"]
        deadline = self._clock() + args["timeout"]
        while True:
            with self._book(args["book"]) as book:
                answer, reason = book.try_acquire(host, self._clock(), take=written,
                                                  activation_seconds=config["reboot"]["reboot_timeout"])
                if not written and (answer in ("free", "granted") or (
                        answer == "wait" and not book.lease_can_wait(host))):
                    reason = self._controller_gone(controller)
                    answer = "refused" if reason else "write"
                elif answer == "wait" and self._clock() >= deadline:
                    pool = book.pool(host)
                    reason = "no budget slot of pool %s was freed within %s s (held by %s)" % (
                        pool, args["timeout"], ", ".join(book.holders(pool)) or "nobody")
                    answer = "refused"
                elif answer == "wait":
                    reason = self._controller_gone(controller)
                    answer = "refused" if reason else answer
                if answer == "refused":
                    book.give_back(host, reason, self._clock())
            if answer == "write":
                problem = self._write_lease(config, host, phase="rebooting", target_digest=args["target_digest"])
                if problem:
                    with self._book(args["book"]) as book:
                        book.give_back(host, problem, self._clock())
                    return False, problem
                written = True
                continue
            if answer != "wait":
                break
            self._sleep(args["poll_interval"])
        if answer != "granted":
            return False, reason
        locked = False
        if config["fleetlock"].get("url"):
            locked, reason = self._fleetlock_slot(config, host, controller)
            if not locked:
                with self._book(args["book"]) as book:
                    book.give_back(host, reason, self._clock(), stop=reason)
                return False, reason
        with self._book(args["book"]) as book:
            book.lock_fleetlock(host, locked)
            book.new_record(host, args["mode"], args["target_digest"], args["old_digest"],
                            fleetlock=bool(config["fleetlock"].get("url")))
        return True, None

    def _fleetlock_slot(self, config, host, controller):
        """FleetLock pre-reboot, asked again every retry delay until the timeout: -> (locked, reason)."""
        fleetlock = config["fleetlock"]
        last = {"said": 0.0}

        def attempt():
            gone = self._controller_gone(controller)
            if gone:
                return False, gone
            ok, last["status"] = self._fleetlock("pre-reboot", config, host)
            return (True, None) if ok else None

        def waiting(elapsed):
            if elapsed - last["said"] >= SAY_EVERY:
                # A wait is never silent: FleetLock does not name its holders, the book names this run's.
                last["said"] = elapsed
                display.display("%s waits for a FleetLock slot of group %s: %d s so far, last answer %s; this run's"
                                " hosts that hold one: %s" % (host, fleetlock["group"] or "default", elapsed,
                                                              last["status"], self._locked_hosts(config) or "none"))

        try:
            return poll_until(attempt, fleetlock["timeout"], fleetlock["retry_delay"], self._sleep, self._clock,
                              whole=True, waiting=waiting)
        except PollTimeout:
            # FleetLock does not name its holders: the book names this run's.
            return False, "FleetLock gave no slot within %s s (%s refused, last answer %s; this run's hosts that" \
                " hold one: %s)" % (fleetlock["timeout"], host, last["status"], self._locked_hosts(config) or "none")

    def _locked_hosts(self, config):
        """The hosts of this run's book that hold a FleetLock slot now, as text."""
        with self._book(config["book"]) as book:
            return ", ".join(book.fleetlock_holders())

    def _op_continue(self, args):
        """The hook the activation stopped before ran: take it on from there."""
        config, hook = self._config(args["book"], args["host"])
        if not config or hook is None:
            return {"failed": True, "msg": "%s has no activation waiting for op continue: take a slot first (op acquire)."
                    % args["host"]}
        return self._advance(args["book"], args["host"], config, hook)

    def _advance(self, path, host, config, after):
        """Run the activation from ``after`` (granted, or the hook that just ran) to the next hook or the end.

        -> the result: ``ansible_facts`` with the record (``os_activate_result``) and the hook to run next
        (``os_activate_next``, None at the end); on a failure, failed with its message, after the failure was
        handled (rolled back or recorded, the slot freed or kept).
        """
        result = {"changed": False}
        steps = _activation.steps_after(after, config["hooks"], config["mode"])
        try:
            for step, argument in steps:
                if step == "stop":
                    return self._stop_before(path, host, argument, result)
                if step == "reboot":
                    verified = self._reboot_and_verify(path, host, config, booting=argument)
                    if verified is None:
                        return self._stop_before(path, host, "boot", result)
                    result.update(verified)
                elif step == "verified":
                    self._record(path, host, "verified")
        except Stop as stop:
            return self._failed(path, host, config, stop.step, stop.result, reboot=stop.reboot, partial=result)
        released = self._release(path, host, config)
        released["changed"] = released["changed"] or result["changed"]
        result.update(released)
        result["ansible_facts"]["os_activate_next"] = None
        return result

    def _stop_before(self, path, host, hook, result):
        with self._book(path) as book:
            record = book.stop_before(host, hook)
        result["ansible_facts"] = {"os_activate_result": record, "os_activate_next": hook}
        return result

    def _reboot_and_verify(self, path, host, config, booting=False):
        """Check the deployments where needed, reboot into the target (not in mode verify), verify the booted
        digest and run the health command. Stop on a failure. -> the result's reboot, booted and changed; None
        when the wait for the new boot is left to the next task (park_boot: the reboot command ran, and the book
        has what the wait needs). ``booting``: that wait, in the task after the one that rebooted the host."""
        if booting:
            reboot = self._wait_boot(path, host, config)
            return None if reboot is None else self._verify(path, host, config, reboot)
        gone = self._controller_gone(config["controller"])
        if gone:
            raise Stop(STEP_REBOOT, {"msg": "%s, so %s was not rebooted" % (gone, host)})
        mode = config["mode"]
        checksum = config["staged_checksum"]
        status = None
        backend = _backends.backend(config["backend"])
        # Finalize: the target is staged; rollback: the previous deployment is the target. Not read when the
        # staged checksum is known and the backend's finalize names it (rpm-ostree's finalize-deployment refuses
        # any other staged deployment, so it stays the guard). bootc's --from-downloaded takes no checksum: the
        # read is the guard there.
        if mode == "rollback" or (mode == "finalize" and not (checksum and backend.finalize_names_deployment)):
            status = self._read(STEP_PREPARE, "before the reboot", host, config)
            problem = _slots.prepare_problem(self._record(path, host), status, backend)
            if problem:
                raise Stop(STEP_PREPARE, {"msg": problem})
            checksum = checksum or (status.get("staged") or {}).get("checksum")
        reboot = {}
        if mode != "verify":
            # A rollback reboots fully: the deployment it goes back to may have another kernel.
            kind, why = backend.soft_reboot(config.get("soft_reboot", "never") if mode == "finalize" else "never",
                                            (status or {}).get("staged"))
            if kind != "soft" and mode == "finalize" and config.get("soft_reboot") == "required":
                # Capable when its slot was asked for (_declined()), no longer now: nothing is rebooted.
                raise Stop(STEP_PREPARE, {"msg": "soft reboot required, and %s" % why})
            self._record(path, host, "reboot_start", status)
            with self._book(path) as book:
                book.record_activation(host, kind, why)
            command = backend.command("finalize" if mode == "finalize" else "rollback",
                                      staged_checksum=checksum if mode == "finalize" else None, soft=kind == "soft")
            if self._parks_boot(config):
                reboot, sent = _reboot.send(self, self._reboot_args(config, command, kind))
                if sent is not None:
                    with self._book(path) as book:
                        book.park_boot(host, dict(sent, command=command, kind=kind))
                    return None
            else:
                reboot = self._reboot_kind(path, host, self._reboot(config, command, kind), kind)
            reboot["command"] = command
            self._reboot_failed(path, host, config, reboot)
        return self._verify(path, host, config, reboot)

    def _reboot_kind(self, path, host, reboot, kind):
        """Record how the host came back after a reboot meant as ``kind``: a soft reboot that changed the boot id
        was a full one (the backend chose it). -> ``reboot``, with its ``kind``."""
        if kind == "soft" and reboot.get("rebooted") and reboot.get("boot_id_before") and reboot.get("boot_id"):
            seen = _reboot.reboot_kind(reboot["boot_id_before"], reboot["boot_id"])
            if seen != kind:
                with self._book(path) as book:
                    book.record_activation(host, seen, "the host rebooted fully (a new boot id)")
                kind = seen
        reboot["kind"] = kind
        return reboot

    def _parks_boot(self, config):
        """Whether the wait for the new boot is left to the next task (park_boot; not in check mode, where
        nothing is rebooted, nor on the controller, which is never rebooted)."""
        return config.get("park_boot") and not self._task.check_mode and self._connection.transport != "local"

    def _wait_boot(self, path, host, config):
        """The wait for the new boot of a host the task before rebooted: -> os_reboot's result; None when the
        strategy runs this task again (``_repeats``) and the host was not back within BOOT_SLICE seconds (it is
        parked again)."""
        with self._book(path) as book:
            sent = book.unpark_boot(host)
        if sent is None:
            raise Stop(STEP_REBOOT, {"msg": "%s has no reboot to wait for in the book of slots" % host})
        until = self._clock() + _slots.BOOT_SLICE if self._repeats else None
        kind = sent.get("kind", "full")
        reboot = _reboot.wait(self, self._reboot_args(config, sent["command"], kind), sent, first_sleep=False, until=until)
        if reboot.get("waiting"):
            with self._book(path) as book:
                book.park_boot(host, sent, now=self._clock())
            return None
        reboot = self._reboot_kind(path, host, reboot, kind)
        reboot["command"] = sent["command"]
        self._reboot_failed(path, host, config, reboot)
        return reboot

    def _reboot_failed(self, path, host, config, reboot):
        """Stop when ``reboot`` (os_reboot's result, with its command) failed."""
        if not reboot.get("failed"):
            return
        msg = reboot["msg"]
        if reboot.get("rc") is not None and config["mode"] == "finalize":
            msg = "%s %s" % (msg, self._why_not_finalized(config, host, self._record(path, host)["target_digest"]))
        raise Stop(STEP_REBOOT, {"msg": msg, "rc": reboot.get("rc")}, reboot=reboot)

    def _verify(self, path, host, config, reboot):
        """After the reboot (``reboot``, os_reboot's result; empty in mode verify): verify the booted digest and run
        the health command; Stop on a failure. -> the result's reboot, booted and changed."""
        gone = self._controller_gone(config["controller"])
        if gone:
            # The reboot alone would have changed nothing more: a rerun finds the host as it booted.
            raise Stop(STEP_VERIFY, {"msg": "%s, so %s is left as it booted, unverified" % (gone, host)}, reboot=reboot)
        self._record(path, host, "reboot_end")
        status = self._read(STEP_VERIFY, "after its reboot", host, config, reboot)
        record = self._record(path, host, "booted", status)
        if record["booted_digest"] != record["target_digest"]:
            wrong = "%s booted %s, not %s" % (host, record["booted_digest"], record["target_digest"])
            raise Stop(STEP_VERIFY, {"msg": wrong}, reboot=reboot)
        if config["health"].get("command"):
            self._health_command(config)
        return {"reboot": reboot, "booted": status.get("booted"), "changed": bool(reboot.get("changed"))}

    def _why_not_finalized(self, config, host, target):
        """After a finalize command that failed: what the host's deployments say now, as a sentence."""
        try:
            status = self._read_deployments(config)
        except FleetosError as exc:
            return "Reading the deployments of %s again failed too: %s" % (host, one_line(exc.msg, "no message"))
        staged = _deployments.status_digest(status, "staged")
        if staged != target:
            return ("The staged deployment at %s is gone (staged now: %s): another run cancelled or replaced it."
                    % (target, staged or "nothing"))
        return "The staged deployment at %s is still there." % target

    def _read(self, step, when, host, config, reboot=None):
        """The host's deployments; Stop (as ``step``) when they cannot be read."""
        try:
            return self._read_deployments(config)
        except FleetosError as exc:
            raise Stop(step, {"msg": "Reading the deployments of %s %s failed: %s" % (host, when, one_line(exc.msg, "no message"))},
                       reboot=reboot)
        except AnsibleConnectionFailure as exc:
            # A connection cut after the command bound, or one that failed: the host did not answer.
            raise Stop(step, {"msg": "Reading the deployments of %s %s failed: %s" % (
                host, when, one_line(to_text(exc), "no answer"))}, reboot=reboot)

    def _release(self, path, host, config):
        """The host is done: free its slot (unless its record keeps it) and its FleetLock slot, and record it
        in its rollout lease. -> the result's ansible_facts, unlocked and changed; failed when the lease write
        of an activated host failed."""
        with self._book(path) as book:
            record = book.stop_before(host, None)
            unlock = book.holds_fleetlock(host) and not record["holds_slot"]
        unlocked = False
        if unlock:
            # steady-state frees the host's FleetLock slot; tried three times, as a reboot manager does.
            for attempt in range(3):
                unlocked = self._fleetlock("steady-state", config, host)[0]
                if unlocked or attempt == 2:
                    break
                self._sleep(config["fleetlock"]["retry_delay"])
        with self._book(path) as book:
            if unlock and not unlocked:
                # Not a failure of the host: it is on its target, or rolled back, as recorded. Its FleetLock slot
                # is freed when FleetLock answers again: by this run at its end, or by the next run.
                book.keep_fleetlock(host)
            record = book.release(host, self._clock())
            book.lock_fleetlock(host, unlock and not unlocked)
        result = {"unlocked": unlocked, "changed": unlocked, "released": True,
                  "ansible_facts": {"os_activate_result": record}}
        if self._controller_gone(config["controller"]):
            return result
        # After the slot is freed: bookkeeping on the host, which the next host of the pool need not wait for.
        if record["status"] == "activated":
            release = config["lease_release"]
            problem = self._write_lease(config, host, state="released" if release else "acquired",
                                        phase="done" if release else "activated")
            if problem:
                result.update(failed=True, msg="%s was activated, but %s." % (host, problem))
        elif not record["holds_slot"]:
            # A host that is up again is done with this rollout's reboot; one that keeps its slot may still
            # boot the target, and keeps phase rebooting for a rerun to verify.
            self._write_lease(config, host, phase="failed")
        return result

    # -- failures ------------------------------------------------------------------------

    def _op_fail(self, args):
        """A step failed (a hook task, or a step of this action that handled its failure already)."""
        host = args["host"]
        with self._book(args["book"]) as book:
            state, record = book.state(host), book.record(host, required=False)
            open_hold = record is not None and state == "holding"
            if record is None and state in ("queued", "waiting"):
                # Failed before its slot (a bad option): it will not be activated.
                book.give_back(host, one_line((args["result"] or {}).get("msg"), "failed"), self._clock())
        if not open_hold:
            return {"ansible_facts": {"os_activate_result": record, "os_activate_next": None}}
        config = self._config(args["book"], host)[0]
        return self._failed(args["book"], host, config, args["task"], args["result"] or {}, recorded_failure=False)

    def _failed(self, path, host, config, step, result, reboot=None, partial=None, recorded_failure=True):
        """Handle the failure of ``step``: record it; probe a host that failed while rebooting (did it go
        down?); roll it back through the activation's reboot path when it failed verification or health;
        free its slot unless it keeps it. -> the result, failed with the failure's message when it was this
        action's own step (``recorded_failure``)."""
        if self._controller_gone(config["controller"]):
            # A killed run's worker changes nothing more: a rerun finds the host as this run left it.
            out = dict(partial or {})
            out.update(failed=True, msg=sentence_of(step, result),
                       ansible_facts={"os_activate_result": self._record(path, host), "os_activate_next": None})
            return out
        record = self._record(path, host)
        probe = self._probe(config) if record["phase"] == "reboot" else None
        with self._book(path) as book:
            record, roll_back = book.record_failure(
                host, step, result, self._clock(), rollback=config["rollback"], reboot=reboot, probe=probe,
                reboot_timeout=config["reboot"]["reboot_timeout"])
        out = dict(partial or {})
        if roll_back:
            out["rollback"] = self._roll_back(path, host, config)
        released = self._release(path, host, config)
        released["changed"] = released["changed"] or out.get("changed", False)
        out.update(released)
        out["ansible_facts"]["os_activate_next"] = None
        if recorded_failure:
            out.update(failed=True, msg=sentence_of(step, result))
        return out

    def _roll_back(self, path, host, config):
        """Boot the previous deployment again (the backend's rollback command, through the one reboot path)
        and verify its digest; a failure is recorded (phase rollback: the host keeps its slot)."""
        record = self._record(path, host, "rollback_start")
        old = record["old_digest"]
        command = _backends.backend(config["backend"]).command("rollback")
        try:
            status = self._read(STEP_ROLLBACK, "before the rollback", host, config)
            if _deployments.status_digest(status, "booted") != old:
                reboot = self._reboot(config, command)
                if reboot.get("failed"):
                    raise Stop(STEP_ROLLBACK, {"msg": "did not come back within %s s of the rollback reboot: %s" % (
                        config["reboot"]["reboot_timeout"], one_line(reboot.get("msg"), "no answer"))})
                status = self._read(STEP_ROLLBACK_VERIFY, "after the rollback", host, config)
            if _deployments.status_digest(status, "booted") != old:
                raise Stop(STEP_ROLLBACK_VERIFY, {"msg": "%s is not back on %s after the rollback" % (host, old)})
        except Stop as stop:
            with self._book(path) as book:
                book.record_failure(host, stop.step, stop.result, self._clock())
            return {"rolled_back": False, "command": command, "msg": stop.result["msg"]}
        self._record(path, host, "rolled_back", status)
        return {"rolled_back": True, "command": command}


def health_line(command, seconds):
    """The health command's line on the host: the user's shell line under coreutils timeout, which ends it (and
    what it started) after ``seconds``, and KILLs it HEALTH_KILL_AFTER seconds later if it is still there."""
    return "timeout -k %d %d sh -c %s" % (HEALTH_KILL_AFTER, seconds, quote(command))


def sentence_of(step, result):
    """A failed step's message, as the task's msg: ``step: message``."""
    msg = one_line((result or {}).get("msg"), "failed")
    return "%s: %s%s" % (step, msg, "" if msg.endswith(".") else ".")
