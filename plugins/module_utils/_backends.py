# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# This is a private module_util of fleetos.layering: its interface may change at any
# time and it is not meant to be used by other collections.

"""The tool that manages a host's deployments, one class each: its commands to apply a staged
deployment, roll back and cancel a stage (its reads: _deployments.py). The roles and playbooks
ask these (the filter fleetos.layering.backend_command) instead of checking the backend in YAML."""

from __future__ import annotations

from ansible_collections.fleetos.layering.plugins.module_utils._errors import InvalidInputError
from ansible_collections.fleetos.layering.plugins.module_utils._host import shell_command

COMMANDS = ("finalize", "rollback", "cancel")


class Backend:
    """A backend; subclasses give its name and argvs."""

    name = None

    def finalize_argv(self, staged_checksum):
        """What applies the staged deployment (``staged_checksum``) and reboots into it, or None without one
        where the backend needs it."""
        raise NotImplementedError

    def rollback_argv(self):
        """What makes the previous deployment the default and reboots into it."""
        raise NotImplementedError

    def cancel_argv(self):
        """What discards a staged deployment without a reboot, or None when rolling back discards it."""
        raise NotImplementedError

    def command(self, what, staged_checksum=None):
        """The shell line of ``what`` (one of COMMANDS), or an empty string when the backend has none (an
        empty string, not None: older ansible-core renders a template's None as the text "None")."""
        if what not in COMMANDS:
            raise InvalidInputError("Unknown backend command '%s': expected one of %s." % (what, ", ".join(COMMANDS)))
        argv = self.finalize_argv(staged_checksum) if what == "finalize" else getattr(self, what + "_argv")()
        return "" if argv is None else shell_command(argv, environ={})


class RpmOstree(Backend):
    name = "rpm-ostree"

    def finalize_argv(self, staged_checksum):
        # The checksum names the deployment the stage made: another one staged meanwhile is refused.
        # Without one there is nothing to finalize.
        return ["rpm-ostree", "finalize-deployment", "--allow-unlocked", staged_checksum] if staged_checksum else None

    def rollback_argv(self):
        return ["rpm-ostree", "rollback", "--reboot"]

    def cancel_argv(self):
        return ["rpm-ostree", "cleanup", "--pending"]


class Bootc(Backend):
    name = "bootc"

    def finalize_argv(self, staged_checksum):
        # bootc applies the download-only deployment it staged; it takes no checksum.
        return ["bootc", "upgrade", "--from-downloaded", "--apply"]

    def rollback_argv(self):
        return ["bootc", "rollback", "--apply"]

    def cancel_argv(self):
        # bootc rollback discards a staged deployment itself.
        return None


BACKENDS = {backend.name: backend for backend in (RpmOstree(), Bootc())}


def backend(name):
    """The Backend called ``name`` (``rpm-ostree`` or ``bootc``); InvalidInputError otherwise."""
    try:
        return BACKENDS[name]
    except (KeyError, TypeError):
        raise InvalidInputError("Unknown backend '%s': expected %s." % (name, " or ".join(sorted(BACKENDS)))) from None
