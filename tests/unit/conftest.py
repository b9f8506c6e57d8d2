# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Make ``ansible_collections.fleetos.layering`` importable from the working tree.

The unit tests import the collection by its full name. ``.build/runtime`` holds a
symlink ``ansible_collections/fleetos/layering`` to the repository root (created here
when missing) and goes first on ``sys.path``.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
RUNTIME = REPO_ROOT / ".build" / "runtime"


def _collection_link():
    link = RUNTIME / "ansible_collections" / "fleetos" / "layering"
    link.parent.mkdir(parents=True, exist_ok=True)
    if not link.is_symlink():
        try:
            link.symlink_to(REPO_ROOT)
        except FileExistsError:
            pass
    return RUNTIME


if str(_collection_link()) not in sys.path:
    sys.path.insert(0, str(RUNTIME))
