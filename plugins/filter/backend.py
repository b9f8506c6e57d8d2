# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""A backend's commands, for the roles and playbooks: documented in backend_command.yml."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.fleetos.layering.plugins.plugin_utils.host._backends import backend
from ansible_collections.fleetos.layering.plugins.module_utils._errors import FleetosError


def backend_command(name, what, staged_checksum=None):
    """Filter: the shell line of the backend ``name``'s command ``what`` (see backend_command.yml)."""
    try:
        return backend(name).command(what, staged_checksum)
    except FleetosError as exc:
        raise AnsibleFilterError(exc.msg) from None


class FilterModule:
    """The backends' commands."""

    def filters(self):
        return {"backend_command": backend_command}
