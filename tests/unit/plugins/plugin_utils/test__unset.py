# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""_unset: "" (an unset variable before ansible-core 2.19) and None are the same to a filter."""

from __future__ import annotations

import pytest

from ansible_collections.fleetos.layering.plugins.plugin_utils._unset import empty_means_unset, none_if_empty


@pytest.mark.parametrize(("value", "expected"), [
    ("", None), (None, None), ("quay.io/os:1", "quay.io/os:1"), (0, 0), (False, False), ({}, {}), ([], []),
])
def test_none_if_empty(value, expected):
    assert none_if_empty(value) == expected and type(none_if_empty(value)) is type(expected)


@empty_means_unset("pool", "image")
def _record(host, pool=None, image=None, labels=None):
    return host, pool, image, labels


@pytest.mark.parametrize(("args", "kwargs", "expected"), [
    (("h", "", ""), {}, ("h", None, None, None)),
    (("h",), {"pool": "", "image": "i", "labels": ""}, ("h", None, "i", "")),  # labels is not named: kept
    (("", "web"), {}, ("", "web", None, None)),  # host is not named: kept
    (("h",), {}, ("h", None, None, None)),
])
def test_the_named_arguments_are_none_where_empty_by_position_or_keyword(args, kwargs, expected):
    assert _record(*args, **kwargs) == expected


def test_a_wrong_call_gets_the_function_s_own_error():
    with pytest.raises(TypeError):
        _record()  # pylint: disable=no-value-for-parameter
