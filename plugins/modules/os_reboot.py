#!/usr/bin/python
# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: os_reboot
short_description: Reboot a host with a given command and wait for its new boot id
version_added: 0.1.0
description:
  - Reads the host's boot id with O(boot_time_command), runs O(reboot_command), then reads
    the boot id again, over a fresh connection each time, until it differs from the first one or
    O(reboot_timeout) seconds have passed. While the host answers, the wait between two reads is
    O(poll_interval), or a tenth of the time since the reboot command when that is more (at most 5 s). Once a
    read finds it down, the next read lets ssh try to connect once a second, up to 30 times (ssh's
    C(ConnectionAttempts), with the ssh connection plugin), so the host is read within about a second of its
    sshd coming back, with one command of the controller's for up to 30 tries. Through a jump host (a
    ProxyCommand or ProxyJump) ssh does not try again; the host is then read at the growing interval while it is
    down too, at most 2 s apart.
  - Unlike M(ansible.builtin.reboot), it does not back off exponentially (1, 2, 4, 8, 12 s), so a host that is
    back after 12 s is noticed within about a second rather than after about 16 s, and a host that takes a
    minute costs the controller a few commands rather than 120; and it gathers no facts.
  - A host that never comes back ends B(failed), not unreachable, with RV(went_down)
    telling whether a check found it down.
  - When O(boot_time_command) does not print a boot id before the reboot, the task fails
    and the reboot command is not run.
  - This module is implemented as an action plugin; it runs nothing on the host but the
    two commands.
author:
  - fleetos.layering contributors (@fleetos)
extends_documentation_fragment:
  - fleetos.layering.attributes
attributes:
  check_mode:
    support: full
    details:
      - Reports C(changed) without running anything.
  diff_mode:
    support: none
  idempotent:
    support: none
    details:
      - Every run reboots the host.
options:
  reboot_command:
    description:
      - The command that reboots the host, run through the shell of the connection, for
        example C(rpm-ostree finalize-deployment --allow-unlocked <checksum>) or
        C(systemctl reboot).
      - A connection that drops while it runs counts as a reboot that started.
    type: str
    required: true
  boot_time_command:
    description:
      - Prints a value that changes on every boot; its last line is compared.
      - That line must look like a boot id or boot time, a UUID (as
        C(cat /proc/sys/kernel/random/boot_id) prints) or a token of at most 128 letters,
        digits, V(-), V(_), V(.) or V(:); earlier lines (login messages that ssh mixes in
        with a tty) are ignored.
      - Before the reboot, any other output fails the task without running O(reboot_command);
        while polling, it counts as not back yet.
    type: str
    default: cat /proc/sys/kernel/random/boot_id
  reboot_timeout:
    description:
      - Seconds, from the reboot command, to wait for the new boot id; at least V(1).
    type: int
    default: 600
  poll_interval:
    description:
      - Seconds between two reads of the boot id while the host answers, while a tenth of the time since the
        reboot command is less; more than V(0). Once the host is down, ssh waits for it a second between two
        tries (other connection plugins, and ssh through a jump host, read on the same schedule).
    type: float
    default: 1.0
  connect_timeout:
    description:
      - The connection's timeout, in seconds, while the host is polled; the previous value
        is restored afterwards; at least V(1).
    type: int
    default: 5
requirements:
  - a connection plugin that can run commands (ssh)
seealso:
  - module: ansible.builtin.reboot
  - module: fleetos.layering.rpm_ostree_info
notes:
  - The host must not be the controller (connection C(local)).
"""

EXAMPLES = r"""
- name: Boot the staged deployment
  fleetos.layering.os_reboot:
    reboot_command: rpm-ostree finalize-deployment --allow-unlocked {{ staged_checksum }}
    reboot_timeout: 900
  register: __reboot

- name: Show how long the host was away
  ansible.builtin.debug:
    msg: "back after {{ __reboot.elapsed }} s with boot id {{ __reboot.boot_id }}"
"""

RETURN = r"""
rebooted:
  description: Whether the host came back with a new boot id.
  returned: always
  type: bool
  sample: true
went_down:
  description: Whether a check after the reboot command found the host unreachable, or a new boot id.
  returned: always
  type: bool
  sample: true
elapsed:
  description: Seconds from the reboot command to the new boot id (or to the timeout).
  returned: always
  type: float
  sample: 12.4
boot_id_before:
  description: The boot id read before the reboot command.
  returned: always
  type: str
  sample: 5b2c6f0e-3c1a-4a70-9d5e-1b0c2f8e9a11
cmd:
  description: The reboot command that ran (not returned when it did not run, because the boot id could not be read).
  returned: when the reboot command ran
  type: str
  sample: systemctl reboot
boot_id:
  description: The new boot id; null when the host did not come back.
  returned: always
  type: str
  sample: 0f6d3a9e-8f47-4c8e-b2a8-7d1e5c4b3a29
rc:
  description: The reboot command's exit status, when it failed.
  returned: when the reboot command failed
  type: int
  sample: 1
stdout:
  description: The reboot command's standard output, when it failed.
  returned: when the reboot command failed
  type: str
  sample: ""
stderr:
  description: The reboot command's standard error, when it failed.
  returned: when the reboot command failed
  type: str
  sample: "error: Expected staged base checksum 5d39..., but found 8a1c..."
"""
