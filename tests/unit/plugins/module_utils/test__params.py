# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The arguments as given: type errors named as such, values cut short, control characters refused."""

from __future__ import annotations

import os

import pytest

from ansible_collections.fleetos.layering.plugins.module_utils import _params
from ansible_collections.fleetos.layering.plugins.module_utils._errors import InvalidInputError, sentence
from ansible_collections.fleetos.layering.plugins.module_utils.images._image_ref import shown

from ansible_collections.fleetos.layering.tests.unit.plugins.module_utils.utils import LocalHost

SPEC = dict(
    image=dict(type="str", required=True),
    path=dict(type="path"),
    state=dict(type="str", choices=["staged", "booted"], default="staged"),
    retries=dict(type="int", default=3),
    poll_interval=dict(type="float", default=1.0),
    backup=dict(type="bool", default=False),
    set=dict(type="dict", default={}),
    remove=dict(type="list", elements="str", default=[]),
    pull_secret=dict(type="raw", no_log=True),
    command=dict(type="str"),
)
HUGE = "a" * 100000


def refusal(arguments, text_options=("command",)):
    with pytest.raises(InvalidInputError) as raised:
        _params.check_arguments(SPEC, arguments, text_options)
    return raised.value.msg


@pytest.mark.parametrize(("arguments", "message"), [
    ({"image": ["a", "b"]}, "image must be a string, got a list."),
    ({"image": {"a": "b"}}, "image must be a string, got a dict."),
    ({"image": 5}, "image must be a string, got an integer."),
    ({"image": True}, "image must be a string, got a boolean."),
    ({"path": 5.5}, "path must be a string, got a number."),
    ({"image": "x\x00y"}, "image contains a control character (U+0000 NUL): expected one line of printable text."),
    ({"image": "x\ny"}, "image contains a control character (U+000A LF): expected one line of printable text."),
    ({"path": "/tmp/\x1b[31m"}, "path contains a control character (U+001B ESC): expected one line of printable text."),
    ({"image": "x\x85"}, "image contains a control character (U+0085): expected one line of printable text."),
    ({"image": HUGE}, "image is 100000 characters long: expected at most 4096."),
    ({"command": "#" + HUGE}, "command is 100001 characters long: expected at most 65536."),
    ({"command": "true\x00"}, "command contains a control character (U+0000 NUL): expected text without control "
                              "characters other than tab and newline."),
    ({"state": "present"}, "state must be one of staged, booted, got 'present'."),
    ({"state": "x" * 200}, "state must be one of staged, booted, got '%s'." % shown("x" * 200, 60)),
    ({"retries": "many"}, "retries must be an integer, got the string 'many'."),
    ({"retries": True}, "retries must be an integer, got a boolean."),
    ({"retries": 1.5}, "retries must be an integer, got a number."),
    ({"retries": "9" * 5000}, "retries must be an integer, got the string '%s'." % shown("9" * 5000, 60)),
    ({"retries": "9" * 100}, "retries must be an integer of at most 2147483647, got %s." % shown("9" * 100, 40)),
    ({"retries": -(2 ** 31)}, "retries must be an integer of at most 2147483647, got -2147483648."),
    ({"poll_interval": "nan"}, "poll_interval must be a finite number, got nan."),
    ({"poll_interval": [1]}, "poll_interval must be a number, got a list."),
    ({"backup": "please"}, "backup must be a boolean (true or false), got the string 'please'."),
    ({"backup": {"yes": True}}, "backup must be a boolean (true or false), got a dict."),
    ({"set": ["origin.k=v"]}, "set must be a dict, got a list."),
    ({"remove": {"a": 1}}, "remove must be a list, got a dict."),
    ({"remove": ["origin.k", 5]}, "remove[1] must be a string, got an integer."),
    ({"remove": ["origin.k", ["x"]]}, "remove[1] must be a string, got a list."),
    ({"remove": ["\x1b"]}, "remove[0] contains a control character (U+001B ESC): expected one line of printable text."),
])
def test_refused_as_given(arguments, message):
    msg = refusal(dict({"image": "quay.io/os:1"}, **arguments))
    assert msg == message
    assert msg == sentence(msg) and len(msg) < 300


@pytest.mark.parametrize("arguments", [
    {},
    None,
    {"image": "quay.io/os:1", "path": "/tmp/x y", "state": "booted", "retries": "3", "poll_interval": "0.5",
     "backup": "yes", "set": {"origin.k": "a\x00b"}, "remove": "origin.a,origin.b", "command": "a\n\tb",
     "pull_secret": ["anything", 1]},
    {"image": None, "retries": 0, "poll_interval": 1, "backup": False, "remove": []},
    {"image": "x" * 4096},
])
def test_accepted_as_given(arguments):
    _params.check_arguments(SPEC, arguments, ("command",))


def test_a_text_option_keeps_tab_and_newline_but_a_plain_one_does_not():
    _params.check_arguments(SPEC, {"command": "a\n\tb"}, ("command",))
    assert refusal({"command": "a\tb"}, ()) == ("command contains a control character (U+0009 HT): expected one "
                                                "line of printable text.")


@pytest.mark.parametrize(("value", "text"), [
    (["a"], "a list"), ({}, "a dict"), (1, "an integer"), (1.0, "a number"), (False, "a boolean"), (None, "null"),
    ("x", "the string 'x'"), ("\x1b", "the string '\\x1b'"), (b"x", "a bytes"),
])
def test_kind(value, text):
    assert _params.kind(value) == text


def test_check_directory(tmp_path):
    (tmp_path / "file").write_text("x")
    os.symlink(str(tmp_path), str(tmp_path / "link"))
    _params.check_directory("tmpdir", str(tmp_path))
    _params.check_directory("tmpdir", str(tmp_path / "link"))
    _params.check_directory("cache_dir", str(tmp_path / "new"), missing_ok=True)
    for path, message in ((tmp_path / "file", "cache_dir '%s' is not a directory."),
                          (tmp_path / "new", "cache_dir '%s' does not exist: expected a directory."),
                          (tmp_path / "file" / "x", "cache_dir '%s' cannot be read: Not a directory.")):
        with pytest.raises(InvalidInputError) as raised:
            _params.check_directory("cache_dir", str(path))
        assert raised.value.msg == message % path
    with pytest.raises(InvalidInputError) as raised:
        _params.check_directory("cache_dir", "/dev/null", missing_ok=True)
    assert raised.value.msg == "cache_dir '/dev/null' is not a directory."


def test_check_directory_on_a_host(tmp_path):
    """The same answers with test(1) on a host, the bare-bones way (one test for an existing directory)."""
    host = LocalHost()
    (tmp_path / "file").write_text("x")
    os.symlink(str(tmp_path), str(tmp_path / "link"))
    os.symlink(str(tmp_path / "gone"), str(tmp_path / "dangling"))
    for path in (tmp_path, tmp_path / "link"):
        del host.argvs[:]
        _params.check_directory("tmpdir", str(path), host=host)
        assert host.argvs == [["test", "-d", str(path)]]
    for path in (tmp_path / "new", tmp_path / "dangling"):
        _params.check_directory("cache_dir", str(path), missing_ok=True, host=host)
    for path, message in ((tmp_path / "file", "cache_dir '%s' is not a directory."),
                          ("/dev/null", "cache_dir '%s' is not a directory."),
                          (tmp_path / "new", "cache_dir '%s' does not exist: expected a directory."),
                          (tmp_path / "file" / "x", "cache_dir '%s' does not exist: expected a directory.")):
        with pytest.raises(InvalidInputError) as raised:
            _params.check_directory("cache_dir", str(path), host=host)
        assert raised.value.msg == message % path


def test_no_log_values():
    spec = {"password": {"type": "str", "no_log": True}, "pull_secret": {"type": "raw", "no_log": True},
            "auth_file": {"type": "path", "no_log": False}, "username": {"type": "str"}}
    arguments = {"password": "pw", "auth_file": "/etc/auth.json", "username": "robot",
                 "pull_secret": {"auths": {"r": {"username": "u1", "password": "p1", "n": 5, "b": True, "e": ""}},
                                 "list": ["l1", None]}}
    assert _params.no_log_values(spec, arguments) == {"pw", "u1", "p1", "5", "l1"}
    assert _params.no_log_values(spec, {"pull_secret": '{"auths": {}}'}) == {'{"auths": {}}'}
    assert _params.no_log_values(spec, {"password": None}) == set()


@pytest.mark.parametrize(("msg", "text"), [
    ("a b", "a b."), ("a b.", "a b."), ("line one\nline two", "line one line two."), ("  x  ", "x."),
    ("index (0, 1, ...)", "index (0, 1, ...)."), ("", ""),
])
def test_sentence(msg, text):
    assert sentence(msg) == text


@pytest.mark.parametrize(("value", "text"), [
    ("short", "short"),
    ("a\x00b\x1b", "a\\x00b\\x1b"),
    ("x" * 200, "x" * 96 + "... (200 characters)"),
    ("\x00" * 100, "\\x00" * 24 + "... (400 characters)"),
    (["a"], ["a"]),
])
def test_shown(value, text):
    assert shown(value) == text
