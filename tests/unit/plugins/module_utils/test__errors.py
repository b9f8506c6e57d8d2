# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The domain exceptions: a message and the result's extra keys; and the one-line, one-sentence forms of a msg."""

from __future__ import annotations

import pytest

from ansible_collections.fleetos.layering.plugins.module_utils._errors import (
    CommandError,
    FleetosError,
    ImageError,
    InvalidInputError,
    OriginError,
    TransactionBusyError,
    one_line,
    sentence,
)


def test_an_error_keeps_its_sentence_and_the_keys_of_the_result():
    error = CommandError("Failed to list the deployments: rpm-ostree exited 1.", cmd=["rpm-ostree", "status"], rc=1,
                         stderr="error: busy")
    assert (error.msg, str(error)) == ("Failed to list the deployments: rpm-ostree exited 1.",) * 2
    assert error.details == {"cmd": ["rpm-ostree", "status"], "rc": 1, "stderr": "error: busy"}
    assert FleetosError("no details").details == {}


@pytest.mark.parametrize(("kind", "a_command_error"), [
    (InvalidInputError, False),
    (CommandError, True),
    (TransactionBusyError, True),
    (ImageError, False),
    (OriginError, False),
])
def test_each_error_is_a_fleetos_error_and_only_a_tool_failure_a_command_error(kind, a_command_error):
    error = kind("msg", rc=4)
    assert isinstance(error, FleetosError) and error.details == {"rc": 4}
    assert isinstance(error, CommandError) is a_command_error


@pytest.mark.parametrize(("msg", "default", "expected"), [
    ("rpm-ostree:\n  error:\tbusy  ", "", "rpm-ostree: error: busy"),
    ("one line", "", "one line"),
    ("", "no output", "no output"),
    (None, "no output", "no output"),
    (None, "", ""),
    ("  \n ", "ignored: the text is white space", ""),
    (127, "", "127"),
])
def test_one_line(msg, default, expected):
    assert one_line(msg, default) == expected


@pytest.mark.parametrize(("msg", "expected"), [
    ("Failed to pull\nthe image", "Failed to pull the image."),
    ("Done.", "Done."),
    ("Is it booted?", "Is it booted?"),
    ("Stop!", "Stop!"),
    ("  ", ""),
    ("", ""),
    (404, "404."),
])
def test_sentence(msg, expected):
    assert sentence(msg) == expected
