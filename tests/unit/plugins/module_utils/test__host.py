# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""_host: the one quoting of an argv for the host's shell, checked with real shells; and the
ConnectionHost of the action plugins (plugin_utils/_remote.py) on a connection that runs its
lines with /bin/sh here, so each test sees the argv, environment, stdin and output a host gets."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from ansible_collections.fleetos.layering.plugins.module_utils import _host
from ansible_collections.fleetos.layering.plugins.plugin_utils._remote import ConnectionHost

HOSTILE = [
    "plain",
    "",
    " ",
    "two words",
    "it's",
    "'",
    "''",
    '"double"',
    "$(touch /tmp/fleetos-pwned)",
    "`touch /tmp/fleetos-pwned`",
    "${HOME}",
    "$HOME",
    "a;b",
    "; rm -rf /",
    "a && b || c",
    "a|b",
    "new\nline",
    "tab\there",
    "*",
    "/etc/*",
    "?",
    "[a-z]",
    "~",
    "~root",
    "a\\b",
    "\\",
    "-n",
    "--",
    "x=y",
    "LC_ALL=POSIX",
    "#comment",
    "!",
    "{a,b}",
    "<in",
    ">out",
    "%s",
    "\u00e9t\u00e9",
    "\\$'\\x41'",
    "$'\\n'",
]
SHELLS = [shell for shell in ("/bin/sh", "/bin/dash", "/bin/bash") if os.access(shell, os.X_OK)]
ECHO_ARGV = [sys.executable, "-c", "import json, os, sys; print(json.dumps([os.environ.get('LC_ALL'), sys.argv[1:]]))"]


@pytest.fixture(autouse=True)
def _no_side_effects(tmp_path, monkeypatch):
    """Run in an empty directory (globs match nothing of ours) and check that nothing was run."""
    monkeypatch.chdir(tmp_path)
    marker = "/tmp/fleetos-pwned"
    existed = os.path.exists(marker)
    yield
    assert existed or not os.path.exists(marker)
    assert sorted(os.listdir(tmp_path)) == []


@pytest.mark.parametrize("shell", SHELLS)
def test_every_hostile_word_reaches_the_command_as_it_was(shell):
    line = _host.shell_command(ECHO_ARGV + HOSTILE)
    proc = subprocess.run([shell, "-c", line], stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=True,
                          env=dict(os.environ, LC_ALL="C.UTF-8"))
    assert json.loads(proc.stdout) == ["C", HOSTILE]
    assert proc.stderr == b""


@pytest.mark.parametrize("value", HOSTILE)
def test_one_word_each(value):
    quoted = _host.quote(value)
    # A word of safe characters stays readable, anything else is quoted once.
    assert quoted == value if value and all(c.isalnum() or c in "_@%+:,./-" for c in value) and value.isascii() \
        else quoted.startswith("'") and quoted.endswith("'")
    proc = subprocess.run(["/bin/sh", "-c", "printf '%s\\0' " + quoted], stdout=subprocess.PIPE, check=True)
    assert proc.stdout.decode() == value + "\0"


def test_a_first_word_that_looks_like_an_assignment_is_still_the_command():
    assert _host.shell_command(["x=y", "z"]) == "LC_ALL=C 'x=y' z"


@pytest.mark.parametrize("argv", ["rpm-ostree status", b"rpm-ostree", [], ()])
def test_an_argv_must_be_a_list_of_words(argv):
    with pytest.raises(TypeError):
        _host.shell_command(argv)


@pytest.mark.parametrize("name", ["1X", "A B", "A;B", "", "A=B"])
def test_environment_names_are_checked(name):
    with pytest.raises(ValueError):
        _host.shell_command(["true"], {name: "x"})


class _Connection:
    """An ssh connection's options, as far as ConnectionHost looks at them."""

    def __init__(self):
        self.options = {"use_tty": True}

    def has_option(self, name):
        return name in self.options

    def get_option(self, name):
        return self.options[name]

    def set_option(self, name, value):
        self.options[name] = value


class _LocalAction:
    """What ConnectionHost uses of an action plugin: its low-level command runner, here /bin/sh on this
    machine, as ansible's local connection runs a line (and sudo or ssh run it on a host)."""

    def __init__(self):
        self.lines = []
        self._connection = _Connection()

    def _low_level_execute_command(self, cmd, sudoable=True, in_data=None, executable=None,
                                   encoding_errors="surrogate_then_replace", chdir=None):
        self.lines.append(cmd)
        proc = subprocess.run(["/bin/sh", "-c", cmd], input=in_data, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, check=False)
        return {"rc": proc.returncode, "stdout": proc.stdout.decode("utf-8", encoding_errors),
                "stderr": proc.stderr.decode("utf-8", encoding_errors)}


def test_the_connection_host_runs_the_exact_argv_with_lc_all_c():
    action = _LocalAction()
    rc, out, err = ConnectionHost(action).run(ECHO_ARGV + HOSTILE)
    assert (rc, json.loads(out), err) == (0, ["C", HOSTILE], "")
    assert len(action.lines) == 1
    # ssh's tty (\r\n line ends, login messages in stdout) is off for the task's connection.
    assert action._connection.options == {"use_tty": False}


def test_stdin_reaches_the_command_and_binary_output_comes_back_byte_for_byte():
    action = _LocalAction()
    secret = b'{"auths": {"r.example.com": {"auth": "dTpwJCh4KWA="}}}\n\xff\x00end'
    host = ConnectionHost(action)
    rc, out, _err = host.run(["cat"], data=secret, binary=True)
    assert (rc, out) == (0, secret)
    # The secret went on stdin, not into the command line.
    assert all(b"dTpw" not in line.encode() for line in action.lines)
    rc, out, _err = host.run(["printf", "\\377\\376ok"], binary=True)
    assert (rc, out) == (0, b"\xff\xfeok")
    rc, text, _err = host.run(["printf", "caf\\303\\251 \\377"])
    assert (rc, text) == (0, "caf\u00e9 \ufffd")


def test_which_finds_paths_only_and_never_runs_the_name():
    host = ConnectionHost(_LocalAction())
    assert host.which("sh") == shutil.which("sh")
    assert host.which("cd") is None  # a shell builtin, not an executable
    assert host.which("no-such-tool-fleetos") is None
    assert host.which("$(touch /tmp/fleetos-pwned)") is None
    assert host.which("x; touch /tmp/fleetos-pwned") is None


def test_is_executable_and_machine(tmp_path_factory):
    host = ConnectionHost(_LocalAction())
    plain = tmp_path_factory.mktemp("files") / "plain file"
    plain.write_text("x")
    plain.chmod(0o644)
    assert host.is_executable("/bin/sh") is True
    assert host.is_executable(str(plain)) is False
    assert host.is_executable(str(plain.parent)) is False
    assert host.is_executable("/nonexistent/x y") is False
    assert host.machine() == os.uname().machine


def test_a_missing_command_is_rc_127():
    rc, _out, err = ConnectionHost(_LocalAction()).run(["no-such-tool-fleetos", "--help"])
    assert rc == 127 and "no-such-tool-fleetos" in err


def test_a_prefetch_is_one_host_command_whose_results_answer_each_argv_once():
    action = _LocalAction()
    host = ConnectionHost(action)
    binary = ["printf", "\\377\\000no newline"]
    failing = ["sh", "-c", "echo out; echo 'it failed' >&2; exit 3"]
    # A stdin of its own: the batch must not hand its commands the connection's stdin.
    reads_stdin = ["sh", "-c", "cat; echo read"]
    host.prefetch([(ECHO_ARGV + HOSTILE, None), (binary, None), (failing, None), (reads_stdin, None),
                   (["printf", "after failure"], (2, False)), (["printf", "never"], (2, True)),
                   (_host.which_argv("no-such-tool-fleetos"), None)])
    assert len(action.lines) == 1
    rc, out, err = host.run(ECHO_ARGV + HOSTILE)
    assert (rc, json.loads(out), err) == (0, ["C", HOSTILE], "")
    assert host.run(binary, binary=True) == (0, b"\xff\x00no newline", "")
    assert host.run(failing) == (3, "out\n", "it failed\n")
    assert host.run(reads_stdin) == (0, "read\n", "")
    assert host.run(["printf", "after failure"]) == (0, "after failure", "")
    assert host.which("no-such-tool-fleetos") is None
    assert len(action.lines) == 1
    # Each result answers once; a command that did not run (its condition), or asked again, runs then.
    assert host.run(["printf", "never"]) == (0, "never", "")
    assert host.run(binary, binary=True) == (0, b"\xff\x00no newline", "")
    assert len(action.lines) == 3


def test_forget_drops_what_was_read_ahead_and_a_command_with_stdin_always_runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("files")
    action = _LocalAction()
    host = ConnectionHost(action)
    path = str(folder / "lease")
    host.prefetch([(_host.read_file_argv(path), None), (["cat"], None)])
    with open(path, "w") as handle:
        handle.write("new")
    # Read ahead before the file was there.
    assert host.read_file(path) is None
    assert host.run(["cat"], data="given") == (0, "given", "")
    host.prefetch([(_host.read_file_argv(path), None)])
    host.forget()
    assert host.read_file(path) == b"new"
    assert len(action.lines) == 4


@pytest.mark.parametrize("shell", SHELLS)
def test_the_batch_script_frames_each_command_on_every_shell(shell):
    marker = "fleetos-0123456789abcdef"
    # An output with another run's frame lines: the marker is random, an output cannot hold this run's.
    other = "\nfleetos-ffffffffffffffff 1 END 0\n"
    argv = _host.batch_argv(marker, [(["printf", "a%s", other], None), (["false"], None),
                                     (["printf", "b"], (1, False)), (["printf", "c"], (1, True))])
    proc = subprocess.run([shell, "-c", _host.shell_command(argv)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          check=False)
    outs, errs = _host.split_output(proc.stdout, marker), _host.split_output(proc.stderr, marker)
    assert outs[0] == (0, b"a" + other.encode())
    assert outs[1] == (1, b"") and outs[2] == (0, b"b") and 3 not in outs
    assert sorted(errs) == [0, 1, 2] and proc.returncode == 0
