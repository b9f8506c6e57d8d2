# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The edits of an origin file as ostree_origin's options give them: group.key names, raw GKeyFile values,
which deployment. The edit of a file on a host and the deployment lookup run through the task:
tests/unit/plugins/action/test_ostree_origin.py."""

from __future__ import annotations

import pytest

from ansible_collections.fleetos.layering.plugins.module_utils._errors import InvalidInputError
from ansible_collections.fleetos.layering.plugins.plugin_utils.host._origin_edit import (
    check_absolute,
    check_deployment,
    parse_edits,
    raw_value,
    split_name,
)


@pytest.mark.parametrize(("name", "group", "key"), [
    ("origin.container-image-reference", "origin", "container-image-reference"),
    ("rpmostree.override.remove", "rpmostree", "override.remove"),  # split on the first dot only
    ("x-fleetos.k", "x-fleetos", "k"),
])
def test_a_name_is_split_on_its_first_dot(name, group, key):
    assert split_name("set", name, "set key") == (group, key)


@pytest.mark.parametrize(("name", "message"), [
    ("nodot", "Invalid remove entry 'nodot': expected group.key (it has no dot)"),
    (".k", "Invalid remove entry '.k': expected group.key (a group name must be non-empty"),
    ("[o].k", "Invalid remove entry '[o].k': expected group.key (a group name must be non-empty"),
    ("origin.k=v", "Invalid remove entry 'origin.k=v': expected group.key (a key must be non-empty"),
    ("origin. k", "Invalid remove entry 'origin. k': expected group.key (a key must be non-empty"),
    ("origin.\x07", "remove[2] 'origin.\\x07' contains a control character (U+0007 BEL): group and key names hold "
                    "no control characters"),
])
def test_a_name_that_is_no_group_key_is_refused(name, message):
    with pytest.raises(InvalidInputError) as caught:
        split_name("remove", name, "remove[2]")
    assert caught.value.msg.startswith(message)


@pytest.mark.parametrize(("value", "raw"), [
    (True, "true"),
    (False, "false"),
    (0, "0"),
    (42, "42"),
    (1.5, "1.5"),
    ("plain", "plain"),
    ("  lead", "\\s\\slead"),
    ("a\\b", "a\\\\b"),
    ("line\nnext\r", "line\\nnext\\r"),
    ("a;b", "a;b"),  # a string is no list: its ; stays
    (["htop", "tmux"], "htop;tmux;"),
    (["a;b", 3, 1.5], "a\\;b;3;1.5;"),
    ([], ""),
])
def test_raw_value(value, raw):
    assert raw_value("origin.k", value) == raw


@pytest.mark.parametrize(("value", "message"), [
    ({"k": 1}, "Invalid set value for origin.k: expected a string, number, boolean or list of strings, got dict"),
    (None, "Invalid set value for origin.k: expected a string, number, boolean or list of strings, got NoneType"),
    (["a", True], "Invalid set value for origin.k: a list may hold only strings and numbers"),
    (["a", ["b"]], "Invalid set value for origin.k: a list may hold only strings and numbers"),
    ("a\x00", "set['origin.k'] contains a control character (U+0000 NUL): only tab, newline and carriage return are "
              "allowed in origin values"),
    (["a", "b\x1b"], "set['origin.k'][1] contains a control character (U+001B ESC)"),
])
def test_a_value_an_origin_cannot_hold_is_refused(value, message):
    with pytest.raises(InvalidInputError) as caught:
        raw_value("origin.k", value)
    assert caught.value.msg.startswith(message)


def test_parse_edits_gives_the_raw_sets_and_the_removes_in_order():
    sets, removes = parse_edits({"origin.container-image-reference": "ostree-unverified-registry:q/os@sha256:1",
                                 "packages.requested": ["htop"], "origin.unlocked": False},
                                ["origin.refspec", "origin.baserefspec"])
    assert sets == [("origin", "container-image-reference", "ostree-unverified-registry:q/os@sha256:1"),
                    ("packages", "requested", "htop;"), ("origin", "unlocked", "false")]
    assert removes == [("origin", "refspec"), ("origin", "baserefspec")]
    assert parse_edits({}, []) == ([], [])


def test_a_key_both_set_and_removed_is_refused_naming_each():
    with pytest.raises(InvalidInputError) as caught:
        parse_edits({"origin.b": "1", "origin.a": "2", "origin.c": "3"}, ["origin.c", "origin.a", "origin.z"])
    assert caught.value.msg == "Invalid options: origin.a, origin.c is both in set and in remove"


@pytest.mark.parametrize("deployment", ["booted", "staged", "0", "12"])
def test_a_deployment_is_booted_staged_or_an_index(deployment):
    check_deployment(deployment)


@pytest.mark.parametrize("deployment", ["next", "-1", "1.0", "", "Booted"])
def test_any_other_deployment_is_refused(deployment):
    with pytest.raises(InvalidInputError) as caught:
        check_deployment(deployment)
    assert caught.value.msg == "Invalid deployment '%s': expected booted, staged or an index (0, 1, ...)" % deployment


def test_a_path_must_be_absolute():
    check_absolute("path", "/sysroot/ostree/deploy/x.origin")
    with pytest.raises(InvalidInputError) as caught:
        check_absolute("sysroot", "./sysroot")
    assert caught.value.msg == "sysroot './sysroot' is not an absolute path: expected one that starts with /"
