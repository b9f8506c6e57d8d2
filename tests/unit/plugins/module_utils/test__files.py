# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The one atomic writer that runs in Python: whole or not at all, and no temporary file left."""

from __future__ import annotations

import os
import stat

import pytest

from ansible_collections.fleetos.layering.plugins.module_utils._files import place_file, replace_file


def test_replace_file_writes_whole_with_its_mode(tmp_path):
    path = tmp_path / "book.json"
    path.write_bytes(b"old")
    replace_file(str(path), b"new", mode=0o640, fsync=True)
    assert path.read_bytes() == b"new"
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert sorted(os.listdir(tmp_path)) == ["book.json"]
    replace_file(str(path), b"newer")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_a_failed_fill_leaves_the_file_as_it_was_and_no_temporary_file(tmp_path):
    path = tmp_path / "index.json"
    path.write_bytes(b"old")

    def fill(handle):
        handle.write(b"half")
        raise ValueError("the digest does not match")

    with pytest.raises(ValueError):
        place_file(str(path), fill, prefix=".tmp-")
    assert path.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["index.json"]
