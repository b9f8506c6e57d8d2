# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Action plugin of fleetos.layering.os_activate_slot (documented in plugins/modules/os_activate_slot.py).

The shell over one host's activation (plugin_utils/rollout/_activation.py: steps_after() decides its steps, Activation
performs them): the task's options, its ops on the book of slots (plugin_utils/rollout/_book.py), and the host's
commands over the connection (no Python there), each bounded on the controller's side. The user's hook task
files are the only steps that are tasks of their own: the activation stops before each (the fact
``os_activate_next`` names it) and op continue takes it on from there.
"""

from __future__ import annotations

import os
import time

from ansible.errors import AnsibleConnectionFailure, AnsibleError
from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action import ActionBase

from ansible_collections.fleetos.layering.plugins.module_utils import _params
from ansible_collections.fleetos.layering.plugins.module_utils.host import _deployments

from ansible_collections.fleetos.layering.plugins.module_utils._errors import one_line
from ansible_collections.fleetos.layering.plugins.plugin_utils.host import _backends, _bound, _reboot
from ansible_collections.fleetos.layering.plugins.plugin_utils.host._remote import ConnectionHost
from ansible_collections.fleetos.layering.plugins.plugin_utils.rollout import _activation, _fleetlock, _lease, _slots
from ansible_collections.fleetos.layering.plugins.plugin_utils.rollout._book import Book

# The hooks, in the order they run: before the reboot, after the verified boot (health), after the health.
HOOKS = ("pre", "health", "post")

OPS = ("open", "acquire", "continue", "fail", "drop", "canary", "close", "unlock")

REBOOT_SPEC = dict((name, spec) for name, spec in _reboot.ARGUMENT_SPEC.items() if name != "reboot_command")
HEALTH_SPEC = {
    "command": {"type": "str"},
    "retries": {"type": "int", "default": 3},
    "delay": {"type": "float", "default": 5},
    "timeout": {"type": "int", "default": _activation.HEALTH_TIMEOUT},
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

    def _config(self, path, host):
        """What op acquire was given for the host (kept in the book for the steps that follow)."""
        with self._book(path) as book:
            config, hook = book.config(host), book.next_step(host)
        if config.get("command_timeout"):
            self._command_timeout = config["command_timeout"]
        return config, hook

    # -- the host's commands, for the activation (plugin_utils/rollout/_activation.py) -------------

    def _low_level_execute_command(self, cmd, *args, **kwargs):
        """Every command this action runs on the host, bounded on the controller's side (plugin_utils/host/_bound.py):
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
        """Run ``command`` and wait for the new boot id (plugin_utils/host/_reboot.py): the activation's and the
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
        activation = _activation.Activation(self, args["book"], host, config)
        declined = activation.declined()
        if declined:
            with self._book(args["book"]) as book:
                book.decline(host, declined, self._clock())
            return {"granted": False, "declined": True, "reason": declined, "ansible_facts": {"os_activate_next": None}}
        granted, reason = activation.take_slot(args)
        if not granted:
            return {"granted": False, "reason": reason, "ansible_facts": {"os_activate_next": None}}
        with self._book(args["book"]) as book:
            book.start(host, config)
        result = activation.advance("granted")
        result.update(granted=True, reason=None)
        return result

    def _op_continue(self, args):
        """The hook the activation stopped before ran: take it on from there."""
        config, hook = self._config(args["book"], args["host"])
        if not config or hook is None:
            return {"failed": True, "msg": "%s has no activation waiting for op continue: take a slot first (op acquire)."
                    % args["host"]}
        return _activation.Activation(self, args["book"], args["host"], config).advance(hook)

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
        activation = _activation.Activation(self, args["book"], host, config)
        return activation.failed(args["task"], args["result"] or {}, recorded_failure=False)
