# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# This is a private plugin_util of fleetos.layering: its interface may change at any
# time and it is not meant to be used by other collections.

"""The order of one host's activation: what comes after a step, decided in one place.

The action plugin ``fleetos.layering.os_activate_slot`` takes these steps (it performs them on the host,
through its backend and the book of slots, plugin_utils/_book.py); this module only says which, in what order,
and where the activation stops for a hook task of the user's (``os_activate_next``).
"""

from __future__ import annotations

# The hooks the activation stops before: the user's task files (pre, health, post), and the wait for the new
# boot that the reboot left to the next task (boot).
HOOKS = ("pre", "boot", "health", "post")
# Where an activation can be taken on from: its slot was just granted, or a hook ran.
AFTER = ("granted",) + HOOKS


def steps_after(after, hooks, mode):
    """The steps of the activation after ``after`` (AFTER), in order: -> a list of (step, argument).

    ``("stop", hook)``: the activation stops before that hook (the last step); ``("reboot", booting)``: check the
    deployments, reboot into the target, verify the boot and run the health command, or with ``booting`` wait for
    the boot the task before began and go on from there (either may stop before ``boot`` instead, when the wait
    is left to the next task); ``("verified", None)``: the host is verified healthy; ``("release", None)``: free
    its slot (the last step). ``hooks``: pre, health and post, each true when the user gave task files;
    ``mode``: finalize, rollback or verify (nothing to reboot: no pre hook).
    """
    if after not in AFTER:
        raise ValueError("an activation is taken on after one of %s, not %r" % (", ".join(AFTER), after))
    if after == "granted" and hooks["pre"] and mode != "verify":
        return [("stop", "pre")]
    steps = []
    if after in ("granted", "pre", "boot"):
        steps.append(("reboot", after == "boot"))
        if hooks["health"]:
            return steps + [("stop", "health")]
    if after != "post":
        steps.append(("verified", None))
        if hooks["post"]:
            return steps + [("stop", "post")]
    return steps + [("release", None)]
