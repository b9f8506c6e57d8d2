# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Lookup rollout_owner: the running process's record."""

from __future__ import annotations

import os

import pytest
from ansible.errors import AnsibleLookupError

from ansible_collections.fleetos.layering.plugins.lookup.rollout_owner import LookupModule
from ansible_collections.fleetos.layering.plugins.plugin_utils.rollout._resume import process_start


def test_names_the_parent_process():
    [record] = LookupModule().run([], {})
    assert record["owner"]["pid"] == os.getppid()
    assert record["owner"]["start"] == process_start(os.getppid())
    assert record["rollout"][:8].isdigit() and record["started_at"] > 0


def test_refuses_terms():
    with pytest.raises(AnsibleLookupError, match="takes no terms, got 1"):
        LookupModule().run(["x"], {})
