# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""backend_command: each backend's commands, as the roles and playbooks run them."""

from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.fleetos.layering.plugins.filter.backend import FilterModule

CHECKSUM = "c" * 64
backend_command = FilterModule().filters()["backend_command"]


@pytest.mark.parametrize("backend,what,checksum,line", [
    ("rpm-ostree", "finalize", CHECKSUM, "rpm-ostree finalize-deployment --allow-unlocked " + CHECKSUM),
    ("rpm-ostree", "finalize", None, ""),
    ("rpm-ostree", "rollback", None, "rpm-ostree rollback --reboot"),
    ("rpm-ostree", "cancel", None, "rpm-ostree cleanup --pending"),
    ("bootc", "finalize", CHECKSUM, "bootc upgrade --from-downloaded --apply"),
    ("bootc", "rollback", None, "bootc rollback --apply"),
    ("bootc", "cancel", None, ""),
])
def test_commands(backend, what, checksum, line):
    assert backend_command(backend, what, staged_checksum=checksum) == line


def test_a_checksum_is_one_quoted_word():
    assert backend_command("rpm-ostree", "finalize", staged_checksum="x; reboot") == (
        "rpm-ostree finalize-deployment --allow-unlocked 'x; reboot'")


@pytest.mark.parametrize("backend,what,message", [
    ("apt", "rollback", "Unknown backend 'apt': expected bootc or rpm-ostree."),
    (None, "rollback", "Unknown backend 'None': expected bootc or rpm-ostree."),
    ("bootc", "reboot", "Unknown backend command 'reboot': expected one of finalize, rollback, cancel."),
])
def test_unknown_is_one_sentence(backend, what, message):
    with pytest.raises(AnsibleFilterError) as caught:
        backend_command(backend, what)
    assert caught.value.message == message
