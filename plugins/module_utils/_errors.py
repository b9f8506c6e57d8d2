# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# This is a private module_util of fleetos.layering: its interface may change at any
# time and it is not meant to be used by other collections.

"""Domain exceptions of fleetos.layering; only a module's main() turns them into fail_json."""

from __future__ import annotations


class FleetosError(Exception):
    """Base of every error the collection's utils raise.

    ``msg`` is one sentence naming the action, the object and the cause; ``details``
    holds extra keys for the module result (``cmd``, ``rc``, ``stdout``, ``stderr``).
    """

    def __init__(self, msg, **details):
        super().__init__(msg)
        self.msg = msg
        self.details = details


class InvalidInputError(FleetosError):
    """Bad input: raised before anything changes; names the field and the accepted form."""


class CommandError(FleetosError):
    """An external tool (rpm-ostree, skopeo, ostree) failed."""


class TransactionBusyError(CommandError):
    """rpm-ostree is busy with another transaction."""


class ImageError(FleetosError):
    """An image could not be inspected, pulled or verified (digest mismatch, auth, TLS)."""


class OriginError(FleetosError):
    """An ostree origin file is unreadable, corrupt, or the edit would make it invalid."""


def one_line(msg, default=""):
    """``msg`` (``default`` when empty) on one line, its runs of white space made single spaces."""
    return " ".join(str(msg or default).split())


def sentence(msg):
    """``msg`` as the one sentence a task's ``msg`` is: on one line, ending with a period."""
    text = " ".join(str(msg).split())
    if text and not text.endswith((".", "!", "?")):
        text += "."
    return text
