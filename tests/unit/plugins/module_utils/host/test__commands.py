# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The one command runner: argv, environment, bytes, rc -> exception, one-sentence messages."""

from __future__ import annotations

import inspect

import pytest

from ansible_collections.fleetos.layering.tests.unit.plugins.module_utils.utils import FakeModule
from ansible_collections.fleetos.layering.plugins.module_utils._errors import CommandError, ImageError
from ansible_collections.fleetos.layering.plugins.module_utils.host._bootc import BootcClient
from ansible_collections.fleetos.layering.plugins.module_utils.host._commands import (
    ToolClient,
    default_cause,
    first_line,
    run_command,
    strip_decoration,
)
from ansible_collections.fleetos.layering.plugins.module_utils.host._rpm_ostree import RpmOstreeClient
from ansible_collections.fleetos.layering.plugins.module_utils.images._skopeo import Skopeo

ARGV = ["/usr/bin/tool", "sub", "--", "$HOME ~x"]


@pytest.mark.parametrize(("kwargs", "expected"), [
    ({}, {}),
    ({"binary": True}, {"encoding": None}),
    ({"data": "secret"}, {"data": "secret", "binary_data": True}),
])
def test_run_command_kwargs(kwargs, expected):
    module = FakeModule([(0, "out", "err")])
    assert run_command(module, tuple(ARGV), "run the tool", **kwargs) == (0, "out", "err")
    ((argv, run_kwargs),) = module.calls
    assert argv == ARGV
    assert run_kwargs == dict({"environ_update": {"LC_ALL": "C"}, "expand_user_and_vars": False}, **expected)


def test_binary_stdout_stays_bytes_and_stderr_becomes_text():
    module = FakeModule([(0, b"\x00\xff", b"warn\xff")])
    assert run_command(module, ARGV, "run the tool", binary=True) == (0, b"\x00\xff", "warn\ufffd")


@pytest.mark.parametrize(("result", "ok_rcs", "msg"), [
    ((1, "", "error: Something broke.\nmore\n"), (0,), "Failed to run the tool: Something broke."),
    ((2, "printed on stdout\n", ""), (0,), "Failed to run the tool: printed on stdout."),
    ((3, "", ""), (0, 77), "Failed to run the tool: exit status 3."),
    ((1, "", 'time="2026-01-01T00:00:00Z" level=fatal msg="reading manifest: \\"x\\" unknown"\n'), (0,),
     'Failed to run the tool: reading manifest: "x" unknown.'),
])
def test_failure_raises_one_sentence_with_details(result, ok_rcs, msg):
    module = FakeModule([result])
    with pytest.raises(CommandError) as raised:
        run_command(module, ARGV, "run the tool", ok_rcs=ok_rcs)
    assert raised.value.msg == msg
    assert raised.value.details == {"cmd": ARGV, "rc": result[0], "stdout": result[1], "stderr": result[2]}


def test_ok_rcs_are_returned():
    assert run_command(FakeModule([(77, "No change.", "")]), ARGV, "x", ok_rcs=(0, 77))[0] == 77


def test_error_class_and_describe():
    module = FakeModule([(1, b"\x01", b"boom")])
    with pytest.raises(ImageError) as raised:
        run_command(module, ARGV, "pull image 'x'", binary=True, error=ImageError,
                    describe=lambda out, err, rc: "cause from %s and %d" % (err, rc))
    assert raised.value.msg == "Failed to pull image 'x': cause from boom and 1."
    assert raised.value.details["stdout"] == "\x01"


@pytest.mark.parametrize(("line", "stripped"), [
    ("  error: Transaction in progress  ", "Transaction in progress"),
    ('level=error msg="bare logrus"', "bare logrus"),
    ('error: Pulling: time="t" level=fatal msg="inner \\"q\\""', 'Pulling: inner "q"'),
    ("plain", "plain"),
])
def test_strip_decoration(line, stripped):
    assert strip_decoration(line) == stripped


@pytest.mark.parametrize(("text", "line"), [
    ("\n\n  second\nthird", "second"),
    (b"error: bytes too\n", "bytes too"),
    (None, ""),
])
def test_first_line(text, line):
    assert first_line(text) == line


def test_default_cause_order():
    assert default_cause("out", "err", 1) == "err"
    assert default_cause("out", "", 1) == "out"
    assert default_cause("", "", 4) == "exit status 4"


class Tool(ToolClient):
    tool = "tool"


def test_a_tool_client_runs_args_then_action_then_ok_rcs():
    module = FakeModule([(3, "out", b"err\xff")])
    client = Tool(module)
    assert client.binary == "/usr/bin/tool"
    assert client.run(["sub", "x"], "do the thing", (0, 3)) == (3, "out", "err\ufffd")
    assert [argv for argv, _kwargs in module.calls] == [["/usr/bin/tool", "sub", "x"]]
    with pytest.raises(CommandError, match=r"^Failed to run tool sub: broke\.$"):
        Tool(FakeModule([(1, "", "broke")])).run(["sub"])
    with pytest.raises(CommandError, match=r"^Failed to do the thing: broke\.$"):
        Tool(FakeModule([(3, "", "broke")])).run(["sub"], "do the thing")


@pytest.mark.parametrize("client", [RpmOstreeClient, BootcClient, Skopeo])
def test_every_client_of_a_host_tool_runs_in_one_order(client):
    assert issubclass(client, ToolClient)
    assert list(inspect.signature(client.run).parameters) == ["self", "args", "action", "ok_rcs"]
    assert client(FakeModule(found="/usr/bin/%s" % client.tool)).binary == "/usr/bin/%s" % client.tool


def test_one_retry_policy_tries_retries_times_more_then_gives_up():
    slept, seen = [], []

    def attempt(attempts):
        seen.append(attempts)
        if attempts < 3:
            raise ImageError("Failed to pull: busy.")
        return "done"

    client = Tool(FakeModule(), retries=2, retry_delay=7, sleep=slept.append)
    assert client.retrying(attempt, ImageError) == "done"
    assert seen == [1, 2, 3] and slept == [7, 7]
    # One more failure than the retries: the last error, or what gave_up makes of it.
    del seen[:], slept[:]
    client.retries = 1
    with pytest.raises(ImageError, match="busy"):
        client.retrying(attempt, ImageError)
    assert seen == [1, 2] and slept == [7]
    with pytest.raises(CommandError, match=r"^gave up after 2$"):
        client.retrying(attempt, ImageError, gave_up=lambda exc, attempts: CommandError("gave up after %d" % attempts))
    # An error that accept refuses, or of another class, is raised at once.
    del seen[:], slept[:]
    with pytest.raises(ImageError):
        client.retrying(attempt, ImageError, accept=lambda exc: False)
    with pytest.raises(ImageError):
        client.retrying(attempt, CommandError)
    assert seen == [1, 1] and slept == []
