# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# This is a private plugin_util of fleetos.layering: its interface may change at any
# time and it is not meant to be used by other collections.

"""The ``fleetos_*`` variables the collection knows, and a typo's nearest known name.

A variable the collection does not read is silently ignored by Ansible: ``-e
fleetos_plan_read_stauts=false`` would plan as if it was not given. The known names are
every ``fleetos_<name>`` the collection's playbooks, roles and plugins mention (read once
from the installed collection, so that they cannot drift from what the content reads),
plus two families of names that are not the collection's inputs: ``fleetos_lab_*`` (the
lab inventory's own) and ``fleetos_last_*`` (the ``set_stats`` results an AWX workflow
passes to its next job).
"""

from __future__ import annotations

import difflib
import os
import re

ALLOWED_PREFIXES = ("fleetos_lab_", "fleetos_last_")
# A whole name: not the start of a family written with a wildcard (fleetos_lab_*).
_NAME = re.compile(r"\bfleetos_[a-z0-9_]*[a-z0-9](?![a-z0-9_*])")
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_SCANNED = ("playbooks", "roles", "plugins")
_SUFFIXES = (".yml", ".yaml", ".py", ".j2")
# This check's own code and documentation name misspelt variables as examples.
_NOT_SCANNED = ("_variables.py", "unknown_variables.yml")
_KNOWN = {}


def known_variables(root=_ROOT):
    """Every ``fleetos_*`` name mentioned in the collection's playbooks, roles and plugins."""
    if root not in _KNOWN:
        names = set()
        for top in _SCANNED:
            for directory, _dirs, files in os.walk(os.path.join(root, top)):
                for name in files:
                    if name.endswith(_SUFFIXES) and name not in _NOT_SCANNED:
                        with open(os.path.join(directory, name), encoding="utf-8", errors="replace") as handle:
                            names.update(_NAME.findall(handle.read()))
        _KNOWN[root] = frozenset(names)
    return _KNOWN[root]


def unknown_variables(names, known=None):
    """One sentence per name of ``names`` that starts with ``fleetos_`` and is not known."""
    known = known_variables() if known is None else known
    problems = []
    for name in sorted(set(names or [])):
        if not isinstance(name, str) or not name.startswith("fleetos_") or name in known \
                or name.startswith(ALLOWED_PREFIXES):
            continue
        nearest = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
        problems.append("The variable %s is not one fleetos.layering reads%s." % (
            name, "; the nearest known one is %s" % nearest[0] if nearest else ""))
    return problems
