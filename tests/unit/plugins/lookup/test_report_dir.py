# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Lookup report_dir: where a report goes."""

from __future__ import annotations

import pytest

from ansible_collections.fleetos.layering.plugins.lookup.report_dir import report_dir


@pytest.mark.parametrize("configured, environ, expected", [
    (None, {"PWD": "/home/ops/fleet"}, "/home/ops/fleet/rollout-report"),
    ("", {"PWD": "/home/ops/fleet"}, "/home/ops/fleet/rollout-report"),
    (None, {"PWD": "/runner/project", "AWX_ISOLATED_DATA_DIR": "/runner/artifacts/42"},
     "/runner/artifacts/42/rollout-report"),
    (None, {"AWX_ISOLATED_DATA_DIR": ""}, "/srv/cwd/rollout-report"),
    (None, {}, "/srv/cwd/rollout-report"),
    ("/var/reports", {"AWX_ISOLATED_DATA_DIR": "/runner/artifacts/42"}, "/var/reports"),
    ("reports/today", {"PWD": "/home/ops"}, "/home/ops/reports/today"),
])
def test_report_dir(configured, environ, expected):
    assert report_dir("rollout-report", configured, environ=environ, cwd="/srv/cwd") == expected
