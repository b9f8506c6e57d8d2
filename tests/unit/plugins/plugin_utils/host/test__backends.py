# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for plugin_utils/host/_backends.py: the backends' commands and how each reboots into a staged
deployment."""

from __future__ import annotations

import pytest

from ansible_collections.fleetos.layering.plugins.plugin_utils.host import _backends
from ansible_collections.fleetos.layering.plugins.module_utils._errors import InvalidInputError

CAPABLE = {"staged": True, "soft_reboot_capable": True}
NOT_CAPABLE = {"staged": True, "soft_reboot_capable": False}


def test_finalize_commands_soft_and_full():
    bootc, rpm = _backends.backend("bootc"), _backends.backend("rpm-ostree")
    assert bootc.command("finalize") == "bootc upgrade --from-downloaded --apply"
    assert bootc.command("finalize", soft=True) == "bootc upgrade --from-downloaded --apply --soft-reboot auto"
    # Only the finalize command soft-reboots: a rollback may go back to another kernel.
    assert bootc.command("rollback", soft=True) == "bootc rollback --apply"
    assert rpm.command("finalize", staged_checksum="abc") == "rpm-ostree finalize-deployment --allow-unlocked abc"


@pytest.mark.parametrize("name, setting, staged, expected", [
    ("bootc", "never", CAPABLE, ("full", None)),
    ("bootc", "auto", CAPABLE, ("soft", None)),
    ("bootc", "auto", NOT_CAPABLE, ("full", "not soft-reboot capable")),
    ("bootc", "auto", None, ("full", "was not read")),
    ("rpm-ostree", "auto", CAPABLE, ("full", "rpm-ostree has no soft reboot")),
    ("rpm-ostree", "never", CAPABLE, ("full", None)),
    # required decides as auto: a full answer means the host is not activated (the caller's part).
    ("bootc", "required", CAPABLE, ("soft", None)),
    ("bootc", "required", NOT_CAPABLE, ("full", "bootc says the staged deployment is not soft-reboot capable")),
])
def test_soft_reboot_decision(name, setting, staged, expected):
    kind, why = _backends.backend(name).soft_reboot(setting, staged)
    assert kind == expected[0]
    if expected[1] is None:
        assert why is None
    else:
        assert expected[1] in why


def test_soft_reboot_rejects_unknown_setting():
    with pytest.raises(InvalidInputError, match="soft_reboot must be one of never, auto, required, not .always."):
        _backends.backend("bootc").soft_reboot("always", CAPABLE)
