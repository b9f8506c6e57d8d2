# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Action plugin of fleetos.layering.os_reboot (documented in plugins/modules/os_reboot.py).

Like ansible.builtin.reboot it runs a reboot command and waits for a new boot id, but it
polls the boot id at a fixed interval: ansible.builtin.reboot backs off exponentially
(1, 2, 4, 8, 12 s), so it notices a host that is back after 12 s only after about 16 s.
"""

from __future__ import annotations

import math
import re
import time

from ansible.errors import AnsibleConnectionFailure, AnsibleError
from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action import ActionBase

from ansible_collections.fleetos.layering.plugins.module_utils._errors import InvalidInputError, sentence
from ansible_collections.fleetos.layering.plugins.module_utils import _params

ARGUMENT_SPEC = {
    "reboot_command": {"type": "str", "required": True},
    "boot_time_command": {"type": "str", "default": "cat /proc/sys/kernel/random/boot_id"},
    "reboot_timeout": {"type": "int", "default": 600},
    "poll_interval": {"type": "float", "default": 1.0},
    "connect_timeout": {"type": "int", "default": 5},
}
# The options that are shell commands: several lines and tabs are fine there.
COMMANDS = ("reboot_command", "boot_time_command")


# What a boot-time command may print (its last line): a boot id (a UUID) or a boot time.
BOOT_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
BOOT_ID_FORM = "a boot id (a UUID, or up to 128 letters, digits, '-', '_', '.' or ':', on its last line)"
QUOTE_MAX = 80


class BootIdError(AnsibleError):
    """The boot-time command ran but printed no boot id."""


def quote_output(text):
    """``text`` for a message: control characters escaped, cut to QUOTE_MAX characters."""
    shown = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    if len(shown) > QUOTE_MAX:
        shown = shown[:QUOTE_MAX - 3] + "..."
    return "'%s'" % shown


def check_arguments(args):
    """The first problem with the numeric options, as one sentence, or None."""
    if args["reboot_timeout"] < 1:
        return "reboot_timeout must be at least 1 second, got %s." % args["reboot_timeout"]
    if not (math.isfinite(args["poll_interval"]) and args["poll_interval"] > 0):
        return "poll_interval must be a number of seconds more than 0, got %s." % args["poll_interval"]
    if args["connect_timeout"] < 1:
        return "connect_timeout must be at least 1 second, got %s." % args["connect_timeout"]
    return None


def parse_boot_id(stdout):
    """The boot id in a boot-time command's output, its last non-blank line stripped; or None.

    With a tty (become), ssh mixes the login's messages into stdout before it, so earlier
    lines are dropped; None when that line does not look like a boot id (BOOT_ID).
    """
    lines = [line.strip() for line in to_text(stdout).splitlines() if line.strip()]
    if lines and BOOT_ID.fullmatch(lines[-1]):
        return lines[-1]
    return None


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)

    # Seams for the unit tests.
    _clock = staticmethod(time.monotonic)
    _sleep = staticmethod(time.sleep)

    def _boot_id(self, command):
        """The host's boot id; raises AnsibleConnectionFailure when it cannot be reached.

        Raises BootIdError when the command prints no boot id (see parse_boot_id()), and
        AnsibleError when it fails.
        """
        res = self._low_level_execute_command(command, sudoable=True)
        if res.get("rc") != 0:
            raise AnsibleError("%s failed (rc=%s): %s" % (quote_output(command), res.get("rc"),
                                                          quote_output(to_text(res.get("stderr") or res.get("stdout")).strip())))
        boot_id = parse_boot_id(res.get("stdout"))
        if boot_id is None:
            printed = to_text(res.get("stdout")).strip()
            raise BootIdError("boot_time_command %s printed %s and not %s"
                              % (quote_output(command), quote_output(printed) if printed else "nothing", BOOT_ID_FORM))
        return boot_id

    def _set_connect_timeout(self, value):
        """Set the connection's timeout; -> the previous value, or None when it has none."""
        for option in ("timeout", "connection_timeout"):
            try:
                previous = self._connection.get_option(option)
                self._connection.set_option(option, value)
                return option, previous
            except (AnsibleError, AttributeError, KeyError):
                continue
        return None, None

    def _reset(self):
        try:
            self._connection.reset()
        except (AnsibleConnectionFailure, AttributeError):
            pass

    def run(self, tmp=None, task_vars=None):
        self._supports_check_mode = True
        result = super().run(tmp, task_vars)
        result.update(changed=False, rebooted=False, went_down=False, elapsed=0.0, boot_id_before=None, boot_id=None)
        # Checked as given first: the argument spec would run a list given as a command as its Python text.
        try:
            _params.check_arguments(ARGUMENT_SPEC, self._task.args, text_options=COMMANDS)
        except InvalidInputError as exc:
            result.update(failed=True, msg=exc.msg)
            return result
        args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)[1]

        if self._connection.transport == "local":
            result.update(failed=True, msg="Refusing to reboot the controller (connection local).")
            return result
        problem = check_arguments(args)
        if problem:
            result.update(failed=True, msg=problem)
            return result
        if self._task.check_mode:
            result.update(changed=True)
            return result

        # A boot id that is not one (login noise, an empty file) would never change: refuse
        # it before the reboot rather than wait out reboot_timeout after it.
        try:
            before = self._boot_id(args["boot_time_command"])
        except BootIdError as exc:
            result.update(failed=True, msg="%s, so the reboot command was not run." % to_text(exc))
            return result
        except AnsibleError as exc:
            result.update(failed=True, msg=sentence("Failed to read the boot id before the reboot: %s" % to_text(exc)))
            return result
        result["boot_id_before"] = before

        start = self._clock()
        try:
            res = self._low_level_execute_command(args["reboot_command"], sudoable=True)
        except AnsibleConnectionFailure:
            res = {"rc": 0}     # the host went down before the command returned
        if res.get("rc") != 0:
            result.update(failed=True, rc=res.get("rc"), stdout=to_text(res.get("stdout")),
                          stderr=to_text(res.get("stderr")),
                          msg=sentence("The reboot command failed (rc=%s): %s" % (res.get("rc"), quote_output(to_text(
                              res.get("stderr") or res.get("stdout")).strip()))))
            return result

        option, previous = self._set_connect_timeout(args["connect_timeout"])
        last_error = "the boot id did not change"
        went_down = False
        back = False
        try:
            while True:
                self._sleep(args["poll_interval"])
                # A control master to a host that went down may linger: start a fresh connection.
                self._reset()
                try:
                    now = self._boot_id(args["boot_time_command"])
                except AnsibleConnectionFailure as exc:
                    went_down = True
                    last_error = to_text(exc).strip().splitlines()[-1] if to_text(exc).strip() else "unreachable"
                except AnsibleError as exc:
                    last_error = to_text(exc)
                else:
                    if now != before:
                        back = True
                        result.update(changed=True, rebooted=True, went_down=True, boot_id=now,
                                      elapsed=round(self._clock() - start, 2))
                        return result
                    last_error = "the boot id did not change"
                if self._clock() - start >= args["reboot_timeout"]:
                    break
        finally:
            if option is not None:
                try:
                    self._connection.set_option(option, previous)
                except (AnsibleError, AttributeError, KeyError):
                    pass
                # The connection that read the new boot id is kept for the host's next task (the
                # verification reads right after it): a new one costs an ssh handshake, on the
                # critical path of the slot hold. After a failure it is dropped.
                if not back:
                    self._reset()
        result.update(failed=True, went_down=went_down, elapsed=round(self._clock() - start, 2),
                      msg=sentence("The host did not come back with a new boot id within %d s of the reboot command "
                                   "(last check: %s)" % (args["reboot_timeout"], last_error)))
        return result
