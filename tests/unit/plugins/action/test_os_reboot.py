# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for the os_reboot action plugin, with a scripted connection and clock."""

from __future__ import annotations

import re

from unittest.mock import MagicMock

import pytest

from ansible.errors import AnsibleConnectionFailure
from ansible_collections.fleetos.layering.plugins.action import os_reboot
from ansible_collections.fleetos.layering.plugins.plugin_utils.host import _reboot
from ansible_collections.fleetos.layering.tests.unit.plugins.action.utils import new_action

BOOT = "cat /run/lab-boot-id"
REBOOT = "rpm-ostree finalize-deployment --allow-unlocked abc"
LASTLOG = "lastlog_openseek: Couldn't stat /var/log/lastlog"
NOISY_OLD_ID = LASTLOG + "\r\nold-id\r\n"


class Host:
    """Answers each command from a script; each poll advances the fake clock by the sleep."""

    def __init__(self, polls, reboot_rc=0, before=NOISY_OLD_ID):
        self.polls = list(polls)      # per poll: a boot id, or None for unreachable
        self.reboot_rc = reboot_rc
        self.before = before          # what the boot-time command prints before the reboot
        self.commands = []
        self.now = 100.0
        self.sleeps = []
        self.tries = []               # per poll: how many times ssh was let try to connect
        self.options = {}

    def execute(self, cmd, sudoable=True):
        self.commands.append(cmd)
        if cmd == REBOOT:
            return {"rc": self.reboot_rc, "stdout": "", "stderr": "error: Expected staged base checksum abc" if self.reboot_rc else ""}
        if len(self.commands) == 1:
            return {"rc": 0, "stdout": self.before, "stderr": ""}
        # As ssh does with ConnectionAttempts: a try a second until one connects or none is left.
        match = re.search(r"-o ConnectionAttempts=(\d+)", self.options.get("ssh_extra_args") or "")
        tries = int(match.group(1)) if match else 1
        self.tries.append(tries)
        while True:
            answer = self.polls.pop(0) if self.polls else "old-id"
            if answer is not None:
                return {"rc": 0, "stdout": answer + "\n", "stderr": ""}
            tries -= 1
            if tries < 1:
                raise AnsibleConnectionFailure("Failed to connect to the host via ssh: Connection refused")
            self.now += 1.0

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds


def run(host, check_mode=False, transport="ssh", **args):
    connection = MagicMock()
    connection.transport = transport
    host.options.update({"timeout": 10, "ssh_extra_args": "-o ServerAliveInterval=9"})
    connection.get_option.side_effect = lambda name: host.options[name]
    connection.set_option.side_effect = host.options.__setitem__
    action = new_action(os_reboot, dict({"reboot_command": REBOOT, "boot_time_command": BOOT, "reboot_timeout": 20}, **args),
                        check_mode, connection)
    action._low_level_execute_command = host.execute
    action._sleep = host.sleep
    action._clock = lambda: host.now
    host.connection = connection
    return action.run(task_vars={})


def test_back_after_the_boot_id_changes_at_the_poll_interval():
    host = Host(["old-id", None, None, "new-id"])
    result = run(host, poll_interval=0.5)
    connection = host.connection
    assert not result.get("failed"), result
    assert result["rebooted"] is True and result["changed"] is True and result["went_down"] is True
    assert result["boot_id_before"] == "old-id"      # the login's noise before it is dropped
    assert result["boot_id"] == "new-id"
    # The interval while a tenth of the wait is less; once the host is down, ssh tries again itself, a second
    # later (3 tries: 20 s left, a try is 5 s of connect timeout and a second at worst).
    assert host.sleeps == [0.5, 0.5, 0.5]
    assert host.tries == [1, 1, 3]
    assert result["elapsed"] == 2.5
    assert host.commands == [BOOT, REBOOT, BOOT, BOOT, BOOT]
    assert result["cmd"] == REBOOT                    # the command that ran, for -v and the rescue
    # The timeout of the connection and its ssh_extra_args are set for the polls and then restored.
    connection.set_option.assert_any_call("timeout", 5)
    connection.set_option.assert_any_call("ssh_extra_args", "-o ServerAliveInterval=9 -o ConnectionAttempts=3")
    assert host.options == {"timeout": 10, "ssh_extra_args": "-o ServerAliveInterval=9"}
    # A fresh connection for each poll after one the host answered (none is left after one it did not); the one
    # that read the new boot id is kept for the next task.
    assert connection.reset.call_count == 2


def test_a_connection_without_ssh_extra_args_is_polled_on_the_schedule():
    host = Host(["old-id", None, None, "new-id"])
    connection = MagicMock()
    connection.transport = "paramiko"
    connection.get_option.side_effect = lambda name: {"timeout": 10}[name]
    action = new_action(os_reboot, {"reboot_command": REBOOT, "boot_time_command": BOOT, "reboot_timeout": 20,
                                    "poll_interval": 0.5}, False, connection)
    action._low_level_execute_command, action._sleep, action._clock = host.execute, host.sleep, lambda: host.now
    result = action.run(task_vars={})
    assert result["boot_id"] == "new-id" and host.sleeps == [0.5] * 4 and host.tries == [1] * 4


def test_never_back_fails_after_the_timeout_not_unreachable():
    host = Host([None] * 100)
    result = run(host, reboot_timeout=20, poll_interval=1)
    assert result["failed"] is True
    assert result["rebooted"] is False and result["went_down"] is True and result["boot_id"] is None
    assert result["elapsed"] >= 20
    # First as often as 6 s each (connect timeout and a second) fit in what is left of the 20 s; once a poll
    # shows a try takes a second (refused at once), as often as seconds are left: a few polls, not one a second.
    assert host.tries == [1, 3, 16, 1, 1], host.tries
    assert "within 20 s" in result["msg"] and "Connection refused" in result["msg"]


def test_an_answered_poll_waits_a_tenth_of_the_time_since_the_reboot():
    host = Host(["old-id"] * 100)
    result = run(host, reboot_timeout=20, poll_interval=1)
    assert result["failed"] is True and result["went_down"] is False
    assert host.sleeps[:10] == [1] * 10 and len(host.sleeps) < 20
    waited = 0.0
    for seconds in host.sleeps:
        assert seconds == pytest.approx(max(1, min(5.0, waited / 10))), host.sleeps
        waited += seconds


def test_a_slow_boot_is_waited_for_by_ssh_and_seen_within_a_second():
    # Down from the first poll for 60 s (at the interval of 0.5 s, 120 polls), then back.
    host = Host([None] * 1000)
    host.polls = _Down(host, 60.0)
    result = run(host, reboot_timeout=600, poll_interval=0.5)
    assert result["rebooted"] is True and result["boot_id"] == "new-id"
    # One poll finds it down, then ssh tries 30 times a poll: three polls more.
    assert host.tries == [1, 30, 30, 30], host.tries
    assert 60.0 <= result["elapsed"] <= 61.0, result["elapsed"]


@pytest.mark.parametrize(("elapsed", "per_try", "bound", "tries"), [
    (0, 6, None, 30), (560, 6, None, 6), (599.5, 6, None, 1), (0, 1, None, 30), (590, 0.2, None, 10),
    # The caller's bound on one command (os_activate_slot's command_timeout) is kept too.
    (0, 6, 60, 9), (0, 1, 20, 19), (0, 6, 3, 1),
])
def test_ssh_tries_as_often_as_the_time_left_allows(elapsed, per_try, bound, tries):
    args = {"reboot_timeout": 600, "connect_timeout": 5, "command_timeout": bound}
    assert _reboot.wait_attempts(args, elapsed, per_try) == tries


class _JumpHost(Host):
    """A host reached through a jump host: a ProxyCommand that fails ends ssh at once, whatever ConnectionAttempts."""

    def __init__(self, polls):
        super().__init__(polls)
        self.asked = []              # per poll after the reboot command: the ConnectionAttempts asked for, or none

    def execute(self, cmd, sudoable=True):
        extra = self.options.get("ssh_extra_args") or ""
        if self.commands:
            match = re.search(r"-o ConnectionAttempts=(\d+)", extra)
            self.asked.append(int(match.group(1)) if match else None)
        self.options["ssh_extra_args"] = re.sub(r" ?-o ConnectionAttempts=\d+", "", extra)
        try:
            return super().execute(cmd, sudoable)
        finally:
            self.options["ssh_extra_args"] = extra


def test_a_host_behind_a_jump_host_is_polled_on_the_growing_interval_while_down():
    # Down for 60 s: at the interval of 0.5 s, 120 connections through the jump host; a tenth of the wait each.
    host = _JumpHost([None] * 1000)
    host.polls = _Down(host, 60.0)
    result = run(host, reboot_timeout=600, poll_interval=0.5)
    assert result["rebooted"] is True and result["boot_id"] == "new-id"
    # Asked to try 30 times, ssh tried once; a poll every 0.5 s first, every 2 s from 20 s on: 45 in all.
    assert host.asked[:3] == [None, None, 30] and set(host.tries) == {1}, (host.asked, host.tries)
    assert len(host.tries) == 45, host.tries
    # Seen within 2 s of its sshd.
    assert 60.0 <= result["elapsed"] <= 62.0, result["elapsed"]
    waited = 0.0
    for seconds in host.sleeps:
        assert seconds == pytest.approx(max(0.5, min(2.0, waited / 10))), host.sleeps
        waited += seconds


def test_a_refusal_ssh_does_not_try_again_is_not_polled_again_without_a_wait():
    # A booting host whose login fails at once, whatever the tries: no poll without a wait before it.
    host = Host([None] * 1000)
    host.execute_base = host.execute

    def refuse(cmd, sudoable=True):
        if len(host.commands) >= 2:
            host.commands.append(cmd)
            raise AnsibleConnectionFailure("Failed to connect to the host via ssh: Permission denied")
        return host.execute_base(cmd, sudoable)
    host.execute = refuse
    result = run(host, reboot_timeout=10, poll_interval=1)
    assert result["failed"] is True
    assert len(host.sleeps) == len(host.commands) - 2 <= 11 and all(s >= 1 for s in host.sleeps)


@pytest.mark.parametrize("up", [5.0, 30.0, 60.0])
def test_a_login_refused_while_the_host_boots_is_asked_again_within_two_seconds(up):
    host = Host([])
    host.polls = _Refusing(host, up, refusing=0.5)
    result = run(host, reboot_timeout=600, poll_interval=0.5)
    assert result["rebooted"] is True
    assert up + 0.5 <= result["elapsed"] <= up + 0.5 + 2.0, (result["elapsed"], host.sleeps)


class _Down(list):
    """Polls that find the host down until ``until`` seconds on its clock, then its new boot id."""

    def __init__(self, host, until):
        super().__init__([None])
        self.host, self.until, self.start = host, until, host.now

    def pop(self, index=-1):
        return None if self.host.now - self.start < self.until else "new-id"


class _Refusing(_Down):
    """As _Down, but once up the host's sshd refuses logins (pam_nologin) for ``refusing`` seconds: at once, whatever
    ConnectionAttempts."""

    def __init__(self, host, until, refusing):
        super().__init__(host, until)
        self.refusing = refusing

    def pop(self, index=-1):
        if 0 <= self.host.now - self.start - self.until < self.refusing:
            raise AnsibleConnectionFailure("Failed to connect to the host via ssh: System is booting up.")
        return super().pop(index)


def test_never_went_down_says_so():
    host = Host([])
    result = run(host, reboot_timeout=3, poll_interval=1)
    assert result["failed"] is True and result["went_down"] is False
    assert "the boot id did not change" in result["msg"]


def test_a_failed_reboot_command_does_not_wait():
    host = Host([], reboot_rc=1)
    result = run(host)
    assert result["failed"] is True and result["rebooted"] is False
    assert result["rc"] == 1 and "Expected staged base checksum" in result["msg"]
    assert host.commands == [BOOT, REBOOT] and host.sleeps == []


def test_a_connection_dropped_by_the_reboot_command_counts_as_started():
    host = Host(["new-id"])

    def execute(cmd, sudoable=True):
        if cmd == REBOOT:
            host.commands.append(cmd)
            raise AnsibleConnectionFailure("Shared connection to node closed.")
        return Host.execute(host, cmd, sudoable)

    task_host = host
    task_host.execute = execute
    result = run(task_host)
    assert result["rebooted"] is True and result["boot_id"] == "new-id"


@pytest.mark.parametrize(("check_mode", "transport", "failed", "changed"),
                         [(True, "ssh", False, True), (False, "local", True, False)])
def test_check_mode_and_local_run_nothing(check_mode, transport, failed, changed):
    host = Host([])
    result = run(host, check_mode=check_mode, transport=transport)
    assert bool(result.get("failed")) is failed and result["changed"] is changed
    assert host.commands == []


# --- the boot id is checked before the reboot -----------------------------------------------------

FORM = "a boot id (a UUID, or up to 128 letters, digits, '-', '_', '.' or ':', on its last line)"
LONG = "x" * 129


@pytest.mark.parametrize("stdout, printed", [
    ("", "nothing"),
    ("\r\n\n", "nothing"),
    (LASTLOG + "\r\n", "'%s'" % LASTLOG),
    ("Last login: Mon Jan  1 00:00:00 2024\n" + LASTLOG + "\n", "'Last login: Mon Jan  1 00:00:00 2024\\nlastlog_openseek: Couldn't stat /var/lo...'"),
    ("old-id\n" + LASTLOG + "\n", "'old-id\\n%s'" % LASTLOG),
    (LONG + "\n", "'%s...'" % ("x" * 77)),
    ("two words\n", "'two words'"),
    ("id/with/slash\n", "'id/with/slash'"),
    ("id\x00nul\n", "'id\\x00nul'"),
    ("id\ttab\n", "'id\\ttab'"),
])
def test_a_boot_id_that_is_not_one_is_refused_before_the_reboot(stdout, printed):
    host = Host(["new-id"], before=stdout)
    result = run(host)
    assert result["failed"] is True
    assert result["msg"] == "boot_time_command '%s' printed %s and not %s, so the reboot command was not run." % (BOOT, printed, FORM)
    assert host.commands == [BOOT]          # the reboot command never ran
    assert host.sleeps == []
    assert result["rebooted"] is False and result["changed"] is False and result["boot_id_before"] is None
    assert "cmd" not in result


@pytest.mark.parametrize("stdout, boot_id", [
    ("5b2c6f0e-3c1a-4a70-9d5e-1b0c2f8e9a11\n", "5b2c6f0e-3c1a-4a70-9d5e-1b0c2f8e9a11"),
    ("  1733011200.25  \n", "1733011200.25"),
    ("boot:2024_12_01-a.b\n", "boot:2024_12_01-a.b"),
    ("y" * 128, "y" * 128),
    (LASTLOG + "\r\n5b2c6f0e-3c1a-4a70-9d5e-1b0c2f8e9a11\r\n", "5b2c6f0e-3c1a-4a70-9d5e-1b0c2f8e9a11"),
])
def test_boot_ids_that_look_like_one_are_accepted(stdout, boot_id):
    host = Host(["new-id"], before=stdout)
    result = run(host)
    assert not result.get("failed"), result
    assert result["boot_id_before"] == boot_id
    assert result["boot_id"] == "new-id"
    assert host.commands == [BOOT, REBOOT, BOOT]


def test_noise_after_the_reboot_is_not_a_new_boot_id():
    host = Host([LASTLOG, "", "new-id"])
    result = run(host, poll_interval=1)
    assert not result.get("failed"), result
    assert result["boot_id"] == "new-id"
    assert host.commands == [BOOT, REBOOT, BOOT, BOOT, BOOT]


def test_noise_until_the_timeout_names_it():
    host = Host([LASTLOG] * 10)
    result = run(host, reboot_timeout=3, poll_interval=1)
    assert result["failed"] is True and result["rebooted"] is False and result["boot_id"] is None
    assert result["msg"] == ("The host did not come back with a new boot id within 3 s of the reboot command (last check: "
                             "boot_time_command '%s' printed '%s' and not %s)." % (BOOT, LASTLOG, FORM))


# --- numeric options -----------------------------------------------------------------------------------

@pytest.mark.parametrize("args, message", [
    ({"reboot_timeout": 0}, "reboot_timeout must be at least 1 second, got 0."),
    ({"reboot_timeout": -5}, "reboot_timeout must be at least 1 second, got -5."),
    ({"poll_interval": 0}, "poll_interval must be a number of seconds more than 0, got 0.0."),
    ({"poll_interval": -0.5}, "poll_interval must be a number of seconds more than 0, got -0.5."),
    ({"poll_interval": "nan"}, "poll_interval must be a finite number, got nan."),
    ({"poll_interval": "inf"}, "poll_interval must be a finite number, got inf."),
    ({"connect_timeout": 0}, "connect_timeout must be at least 1 second, got 0."),
    ({"connect_timeout": -1}, "connect_timeout must be at least 1 second, got -1."),
    # As given, before the argument spec converts them: type errors named, huge values cut short.
    ({"reboot_timeout": "soon"}, "reboot_timeout must be an integer, got the string 'soon'."),
    ({"reboot_timeout": "9" * 100000}, "reboot_timeout must be an integer, got the string '%s... (100000 characters)'."
     % ("9" * 36)),
    ({"reboot_timeout": 10 ** 12}, "reboot_timeout must be an integer of at most 2147483647, got 1000000000000."),
    ({"reboot_command": ["systemctl", "reboot"]}, "reboot_command must be a string, got a list."),
    ({"reboot_command": {"a": 1}}, "reboot_command must be a string, got a dict."),
    ({"boot_time_command": 5}, "boot_time_command must be a string, got an integer."),
    ({"reboot_command": "reboot\x00"}, "reboot_command contains a control character (U+0000 NUL): expected text "
                                       "without control characters other than tab and newline."),
    ({"boot_time_command": "#" + "a" * 100000}, "boot_time_command is 100001 characters long: expected at most 65536."),
])
@pytest.mark.parametrize("check_mode", [False, True])
def test_bad_numbers_are_refused_before_anything_runs(args, message, check_mode):
    host = Host(["new-id"])
    result = run(host, check_mode=check_mode, **args)
    assert result["failed"] is True and result["changed"] is False
    assert result["msg"] == message
    assert host.commands == [] and host.sleeps == []


def test_a_multi_line_command_is_a_command():
    host = Host(["new-id"])
    result = run(host, boot_time_command="set -e\n\tcat /run/lab-boot-id", poll_interval=1)
    assert not result.get("failed"), result
    assert host.commands[0] == "set -e\n\tcat /run/lab-boot-id"


def test_a_host_that_never_came_back_has_its_connection_dropped_after_the_last_poll():
    host = Host([None] * 100)
    result = run(host, reboot_timeout=3, poll_interval=1)
    assert result["failed"] and len(host.sleeps) == 3
    # Before the first poll, and after the last: no master is left after a poll the host did not answer.
    assert host.connection.reset.call_count == 1 + 1
