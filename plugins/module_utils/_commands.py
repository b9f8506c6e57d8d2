# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# This is a private module_util of fleetos.layering: its interface may change at any
# time and it is not meant to be used by other collections.

"""Finding the external tools the modules run (skopeo, ostree)."""

from __future__ import annotations

from ansible_collections.fleetos.layering.plugins.module_utils._errors import CommandError


def find_executable(module, executable, name, option):
    """The path of ``name``: ``executable`` when it is a path, else looked up in PATH.

    ``option`` is the module option that sets it, named in the error when nothing is found.
    """
    if executable and "/" in executable:
        return executable
    binary = module.get_bin_path(executable or name, required=False)
    if not binary:
        raise CommandError("Failed to find the %s executable '%s' on the target: install %s or set %s."
                           % (name, executable or name, name, option))
    return binary
