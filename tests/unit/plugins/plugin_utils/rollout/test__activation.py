# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for the order of one host's activation."""

from __future__ import annotations

import pytest

from ansible_collections.fleetos.layering.plugins.plugin_utils.rollout._activation import steps_after

NONE = {"pre": False, "health": False, "post": False}
ALL = {"pre": True, "health": True, "post": True}
REBOOT, BOOT = ("reboot", False), ("reboot", True)
VERIFIED, RELEASE = ("verified", None), ("release", None)


@pytest.mark.parametrize("after, hooks, mode, expected", [
    # Without hooks: one step from the slot to its release.
    ("granted", NONE, "finalize", [REBOOT, VERIFIED, RELEASE]),
    # The boot wait the reboot left to the next task goes on the same way.
    ("boot", NONE, "finalize", [BOOT, VERIFIED, RELEASE]),
    # With every hook, the activation stops before each.
    ("granted", ALL, "finalize", [("stop", "pre")]),
    ("pre", ALL, "finalize", [REBOOT, ("stop", "health")]),
    ("boot", ALL, "rollback", [BOOT, ("stop", "health")]),
    ("health", ALL, "finalize", [VERIFIED, ("stop", "post")]),
    ("post", ALL, "finalize", [RELEASE]),
    # Mode verify reboots nothing: no pre hook.
    ("granted", ALL, "verify", [REBOOT, ("stop", "health")]),
    ("granted", dict(NONE, post=True), "finalize", [REBOOT, VERIFIED, ("stop", "post")]),
    ("health", dict(NONE, health=True), "finalize", [VERIFIED, RELEASE]),
])
def test_the_steps_after_each_point_of_an_activation(after, hooks, mode, expected):
    assert steps_after(after, hooks, mode) == expected


def test_an_activation_is_taken_on_only_after_a_known_point():
    with pytest.raises(ValueError, match="not 'rebooted'"):
        steps_after("rebooted", NONE, "finalize")
