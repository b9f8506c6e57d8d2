# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for the report_files action plugin: real files in the test's directory."""

from __future__ import annotations

import os
import stat

import pytest

from ansible_collections.fleetos.layering.plugins.action import report_files
from ansible_collections.fleetos.layering.tests.unit.plugins.action.utils import new_action


def run(check_mode=False, **args):
    return new_action(report_files, args, check_mode).run(task_vars={"inventory_hostname": "localhost"})


def test_writes_every_file_into_a_new_directory_then_leaves_them_alone(tmp_path):
    folder = tmp_path / "a" / "report"
    files = {"r.json": '{"x": 1}\n', "r.md": "# Report\n\nné\n"}
    result = run(path=str(folder), files=files)
    assert not result.get("failed"), result
    assert result["changed"] is True
    assert result["written"] == [str(folder / "r.json"), str(folder / "r.md")]
    assert (folder / "r.md").read_text(encoding="utf-8") == "# Report\n\nné\n"
    assert stat.S_IMODE(os.stat(folder / "r.json").st_mode) == 0o644
    assert stat.S_IMODE(os.stat(folder).st_mode) & 0o755 == 0o755
    again = run(path=str(folder), files=files)
    assert again["changed"] is False and again["written"] == []
    # No temporary file is left beside the report.
    assert sorted(p.name for p in folder.iterdir()) == ["r.json", "r.md"]


def test_only_a_file_whose_text_or_mode_differs_is_written(tmp_path):
    (tmp_path / "same.md").write_text("same\n")
    os.chmod(tmp_path / "same.md", 0o644)
    (tmp_path / "other.md").write_text("old\n")
    os.chmod(tmp_path / "other.md", 0o644)
    (tmp_path / "mode.md").write_text("m\n")
    os.chmod(tmp_path / "mode.md", 0o600)
    result = run(path=str(tmp_path), files={"same.md": "same\n", "other.md": "new\n", "mode.md": "m\n"})
    assert result["written"] == [str(tmp_path / "other.md"), str(tmp_path / "mode.md")]
    assert (tmp_path / "other.md").read_text() == "new\n"
    assert stat.S_IMODE(os.stat(tmp_path / "mode.md").st_mode) == 0o644


def test_check_mode_names_what_would_be_written_and_writes_nothing(tmp_path):
    folder = tmp_path / "report"
    result = run(check_mode=True, path=str(folder), files={"r.json": "{}\n"})
    assert result["changed"] is True and result["written"] == [str(folder / "r.json")]
    assert not folder.exists()


@pytest.mark.parametrize("files, message", [
    ({}, "files must name at least one file."),
    ({"../r.json": "x"}, "files key '../r.json' must be a plain file name, without a directory."),
    ({"..": "x"}, "files key '..' must be a plain file name, without a directory."),
    ({"r.json": {"a": 1}}, "files r.json must be text, got dict."),
])
def test_bad_files_fail_in_one_sentence_and_write_nothing(tmp_path, files, message):
    result = run(path=str(tmp_path / "report"), files=files)
    assert result["failed"] and result["msg"] == message
    assert not (tmp_path / "report").exists()


def test_bad_mode_fails_in_one_sentence(tmp_path):
    result = run(path=str(tmp_path), files={"r.md": "x"}, mode="rw-r--r--")
    assert result["failed"] and result["msg"] == "mode must be an octal string such as '0644', got 'rw-r--r--'."
    assert list(tmp_path.iterdir()) == []


def test_a_directory_that_cannot_be_made_fails_naming_it(tmp_path):
    (tmp_path / "file").write_text("not a directory")
    result = run(path=str(tmp_path / "file" / "report"), files={"r.md": "x"})
    assert result["failed"]
    assert result["msg"] == "Writing the report files into %s failed: Not a directory." % (tmp_path / "file" / "report")
