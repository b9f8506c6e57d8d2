# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# This is a private plugin_util of fleetos.layering: its interface may change at any
# time and it is not meant to be used by other collections.

"""Reboot a host over an action plugin's connection and wait for its new boot id.

Used by the action plugins ``fleetos.layering.os_reboot`` (the task) and
``fleetos.layering.os_activate_slot`` (op acquire with ``activate``: the whole slot hold in
one task). Like ansible.builtin.reboot it runs a reboot command and waits for a new boot id,
but not with backoff: ansible.builtin.reboot backs off exponentially (1, 2, 4, 8, 12 s), so it
notices a host that is back after 12 s only after about 16 s. While the host still answers it is
polled at an interval that grows with the wait; once it is down, ssh itself waits for it (its
ConnectionAttempts, a try a second), so the host is seen within about a second of its sshd coming
back, with one command on the controller for up to 30 tries. Through a jump host ssh does not try
again (a ProxyCommand's failure is not a failed connect): the host is then polled on the growing
interval while it is down too, at most 2 s apart.
"""

from __future__ import annotations

import math
import re

from ansible.errors import AnsibleConnectionFailure, AnsibleError
from ansible.module_utils.common.text.converters import to_text

from ansible_collections.fleetos.layering.plugins.module_utils._errors import sentence

# What a boot-time command may print (its last line): a boot id (a UUID) or a boot time.
BOOT_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
BOOT_ID_FORM = "a boot id (a UUID, or up to 128 letters, digits, '-', '_', '.' or ':', on its last line)"
QUOTE_MAX = 80
DEFAULT_BOOT_TIME_COMMAND = "cat /proc/sys/kernel/random/boot_id"

# The options of a reboot: os_reboot's, and the suboptions of os_activate_slot's activate.
ARGUMENT_SPEC = {
    "reboot_command": {"type": "str", "required": True},
    "boot_time_command": {"type": "str", "default": DEFAULT_BOOT_TIME_COMMAND},
    "reboot_timeout": {"type": "int", "default": 600},
    "poll_interval": {"type": "float", "default": 1.0},
    "connect_timeout": {"type": "int", "default": 5},
}


# A soft reboot (systemctl soft-reboot) keeps the kernel, and with it the boot id: what is waited for is then
# the boot id and systemd's count of soft reboots, on one line (BOOT_ID allows the ':').
SOFT_REBOOTS_COMMAND = "systemctl show -P SoftRebootsCount 2>/dev/null || echo 0"


def soft_boot_time_command(boot_time_command):
    """A command that prints ``boot_time_command``'s boot id (its last line) and the host's SoftRebootsCount as
    ``BOOT_ID:COUNT``: it changes with a full reboot (the boot id) and with a soft one (the count)."""
    return ("__fleetos_boot=$(%s) && printf '%%s:%%s\\n' \"$(printf '%%s\\n' \"$__fleetos_boot\" | tail -n 1)\" "
            "\"$(%s)\"" % (boot_time_command, SOFT_REBOOTS_COMMAND))


def reboot_kind(before, after):
    """``full`` when the boot id of ``after`` (a soft_boot_time_command() output, or a boot id) is not the one of
    ``before``; else ``soft`` (the same kernel: only the soft-reboot count moved)."""
    if ":" not in before or ":" not in after or before == after:
        return "full"
    return "soft" if before.rpartition(":")[0] == after.rpartition(":")[0] else "full"


class BootIdError(AnsibleError):
    """The boot-time command ran but printed no boot id."""


def quote_output(text):
    """``text`` for a message: control characters escaped, cut to QUOTE_MAX characters."""
    shown = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    if len(shown) > QUOTE_MAX:
        shown = shown[:QUOTE_MAX - 3] + "..."
    return "'%s'" % shown


def check_arguments(args):
    """The first problem with the numeric options (reboot_timeout, poll_interval, connect_timeout), as one sentence, or None."""
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


def read_boot_id(action, command):
    """The host's boot id; raises AnsibleConnectionFailure when it cannot be reached.

    Raises BootIdError when the command prints no boot id (see parse_boot_id()), and
    AnsibleError when it fails.
    """
    res = action._low_level_execute_command(command, sudoable=True)
    if res.get("rc") != 0:
        raise AnsibleError("%s failed (rc=%s): %s" % (quote_output(command), res.get("rc"),
                                                      quote_output(to_text(res.get("stderr") or res.get("stdout")).strip())))
    boot_id = parse_boot_id(res.get("stdout"))
    if boot_id is None:
        printed = to_text(res.get("stdout")).strip()
        raise BootIdError("boot_time_command %s printed %s and not %s"
                          % (quote_output(command), quote_output(printed) if printed else "nothing", BOOT_ID_FORM))
    return boot_id


def _set_connect_timeout(connection, value):
    """Set the connection's timeout; -> (the option, its previous value), or (None, None) when it has none."""
    for option in ("timeout", "connection_timeout"):
        try:
            previous = connection.get_option(option)
            connection.set_option(option, value)
            return option, previous
        except (AnsibleError, AttributeError, KeyError):
            continue
    return None, None


def reset(connection):
    """Drop the connection (an ssh control master), so that the next command opens a fresh one."""
    try:
        connection.reset()
    except (AnsibleConnectionFailure, AttributeError):
        pass


# The wait between two polls of the boot id grows with the time since the reboot command, to this share of it and
# at most POLL_MAX seconds: a new boot is seen within a tenth of its own length (at least poll_interval), and a host
# that takes a minute to boot is polled some 40 times, not 120 (each poll an ssh connection of the controller's).
POLL_SHARE = 0.1
POLL_MAX = 5.0


# After a poll ssh did not wait in, the same share, but at most UNWAITED_MAX seconds: through a jump host (a
# ProxyCommand or ProxyJump) ssh does not try again on a host that is down, whatever ConnectionAttempts, and a host
# that is booting may refuse a login for a moment (pam_nologin); the one is not asked every poll_interval through a
# whole boot, the other is asked again within 2 s.
UNWAITED_MAX = 2.0


def poll_delay(poll_interval, elapsed, most=POLL_MAX):
    """Seconds to wait before the next poll, ``elapsed`` seconds after the reboot command."""
    return max(poll_interval, min(most, elapsed * POLL_SHARE))


# A host that went down is waited for by ssh itself: the next poll lets ssh try to connect once a second
# (ConnectionAttempts, each try bounded by connect_timeout) up to WAIT_ATTEMPTS times, so that the controller runs
# one command where it would run one per try, and sees the host back within about a second of its sshd.
WAIT_ATTEMPTS = 30
_NO_OPTION = object()


def _extra_args(connection):
    """The connection's ssh_extra_args, or _NO_OPTION when it has none (not the ssh connection plugin)."""
    try:
        value = connection.get_option("ssh_extra_args")
    except (AnsibleError, AttributeError, KeyError):
        return _NO_OPTION
    return value if isinstance(value, str) or value is None else _NO_OPTION


def _set_extra_args(connection, value):
    try:
        connection.set_option("ssh_extra_args", value)
    except (AnsibleError, AttributeError, KeyError):
        pass


def wait_attempts(args, elapsed, per_try):
    """How many times ssh tries to connect in one poll of a host that is down, ``elapsed`` seconds after the
    reboot command, each try taking ``per_try`` seconds (a refused connection and ssh's second between two
    tries; with connect_timeout more where the host does not answer): WAIT_ATTEMPTS, fewer when the tries would
    outlast reboot_timeout, or the caller's bound on one command (``command_timeout`` in ``args``, when there is
    one); at least 1."""
    per_try = max(1.0, per_try)
    left = args["reboot_timeout"] - elapsed
    if args.get("command_timeout"):
        left = min(left, args["command_timeout"] - per_try)
    return int(max(1, min(WAIT_ATTEMPTS, left // per_try)))


def _result(before=None):
    """reboot()'s result before anything happened; ``before``: the boot id before the reboot."""
    return {"changed": False, "rebooted": False, "went_down": False, "elapsed": 0.0,
            "boot_id_before": before, "boot_id": None}


def _next_poll(args, elapsed, polled, took):
    """Seconds before the next poll starts: poll_delay() after a poll the host answered (``polled``, or any poll
    when ssh does not wait), at most UNWAITED_MAX after one ssh did not wait in (it took less than poll_interval),
    else none."""
    if polled:
        return poll_delay(args["poll_interval"], elapsed)
    return poll_delay(args["poll_interval"], elapsed, UNWAITED_MAX) if took < args["poll_interval"] else 0.0


def reboot(action, args):
    """Read the boot id, run the reboot command and poll the boot id until it changes.

    ``action`` is the calling action plugin (its connection, ``_clock`` and ``_sleep``); ``args``
    has reboot_command, boot_time_command, reboot_timeout, poll_interval and connect_timeout,
    checked (check_arguments()). -> the result of fleetos.layering.os_reboot: changed, rebooted,
    went_down, elapsed, boot_id_before, boot_id, and failed with msg (and rc, stdout, stderr when
    the reboot command failed), also when the host cannot be reached before the reboot or does
    not come back.
    """
    result, sent = send(action, args)
    if sent is None:
        return result
    return wait(action, args, sent)


def send(action, args):
    """Read the boot id and run the reboot command, without waiting for the new boot.

    -> (the result so far, as reboot() returns it; failed when the reboot command was not run or
    failed), (what wait() needs: ``before``, the boot id before, and ``start``, the time of the
    command by ``action._clock``; None after a failure). The two halves may run in two tasks:
    the wait in a later one, with the same clock."""
    result = _result()
    # A boot id that is not one (login noise, an empty file) would never change: refuse
    # it before the reboot rather than wait out reboot_timeout after it.
    try:
        before = read_boot_id(action, args["boot_time_command"])
    except BootIdError as exc:
        result.update(failed=True, msg="%s, so the reboot command was not run." % to_text(exc))
        return result, None
    except AnsibleError as exc:
        result.update(failed=True, msg=sentence("Failed to read the boot id before the reboot: %s" % to_text(exc)))
        return result, None
    result["boot_id_before"] = before

    start = action._clock()
    try:
        res = action._low_level_execute_command(args["reboot_command"], sudoable=True)
    except AnsibleConnectionFailure:
        res = {"rc": 0}     # the host went down before the command returned
    if res.get("rc") != 0:
        result.update(failed=True, rc=res.get("rc"), stdout=to_text(res.get("stdout")),
                      stderr=to_text(res.get("stderr")),
                      msg=sentence("The reboot command failed (rc=%s): %s" % (res.get("rc"), quote_output(to_text(
                          res.get("stderr") or res.get("stdout")).strip()))))
        return result, None
    return result, {"before": before, "start": start}


def wait(action, args, sent, first_sleep=True, until=None):
    """Poll the boot id until it is not ``sent["before"]``, up to reboot_timeout after ``sent["start"]``.

    -> reboot()'s result. ``first_sleep`` False: the first poll is at once (the wait began in an earlier
    task, which already let the host go down). ``until`` (a time by ``action._clock``): no poll starts after
    it, and ssh's tries end about then; the result is then ``waiting`` (neither back nor failed) when
    reboot_timeout is not over."""
    before, start = sent["before"], sent["start"]
    result = _result(before)
    connection = action._connection
    option, previous = _set_connect_timeout(connection, args["connect_timeout"])
    extra = _extra_args(connection)
    last_error = "the boot id did not change"
    went_down = False
    back = False
    answered = True
    took, tries = 0.0, 0
    per_try = args["connect_timeout"] + 1.0    # at worst, until a poll shows how long a try takes
    try:
        while True:
            if answered or extra is _NO_OPTION:
                if extra is not _NO_OPTION:
                    _set_extra_args(connection, extra)
                if first_sleep:
                    action._sleep(_next_poll(args, action._clock() - start, True, took))
                first_sleep = True
            else:
                # Down at the last poll: ssh waits for it (no sleep here, unless ssh did not wait: through a jump
                # host, or a refusal it does not try again, such as a login the booting host refuses; each poll
                # then a new connection, on the schedule of an answered one, at most UNWAITED_MAX apart).
                if took < args["poll_interval"]:
                    action._sleep(_next_poll(args, action._clock() - start, False, took))
                if tries > 1:
                    per_try = took / tries
                tries = wait_attempts(args, action._clock() - start, per_try)
                if until is not None:
                    tries = int(max(1, min(tries, (until - action._clock()) // max(1.0, per_try))))
                _set_extra_args(connection, ("%s -o ConnectionAttempts=%d" % (extra or "", tries)).strip())
            # A control master to a host that went down may linger: start a fresh connection. After a poll the
            # host did not answer there is none.
            if answered:
                reset(connection)
            answered = True
            began = action._clock()
            try:
                now = read_boot_id(action, args["boot_time_command"])
            except AnsibleConnectionFailure as exc:
                went_down, answered = True, False
                last_error = to_text(exc).strip().splitlines()[-1] if to_text(exc).strip() else "unreachable"
            except AnsibleError as exc:
                last_error = to_text(exc)
            else:
                if now != before:
                    back = True
                    result.update(changed=True, rebooted=True, went_down=True, boot_id=now,
                                  elapsed=round(action._clock() - start, 2))
                    return result
                last_error = "the boot id did not change"
            took = action._clock() - began
            if action._clock() - start >= args["reboot_timeout"]:
                break
            if until is not None and _next_poll(args, action._clock() - start, answered or extra is _NO_OPTION,
                                                took) + action._clock() >= until:
                result.update(waiting=True, went_down=went_down, elapsed=round(action._clock() - start, 2))
                return result
    finally:
        if extra is not _NO_OPTION:
            _set_extra_args(connection, extra)
        if option is not None:
            try:
                connection.set_option(option, previous)
            except (AnsibleError, AttributeError, KeyError):
                pass
        # The connection that read the new boot id is kept for what follows (the verification
        # reads right after it): a new one costs an ssh handshake, on the critical path of the
        # slot hold. After a failure it is dropped.
        if not back:
            reset(connection)
    result.update(failed=True, went_down=went_down, elapsed=round(action._clock() - start, 2),
                  msg=sentence("The host did not come back with a new boot id within %d s of the reboot command "
                               "(last check: %s)" % (args["reboot_timeout"], last_error)))
    return result
