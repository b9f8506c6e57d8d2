# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""_host: the one quoting of an argv for the host's shell, checked with real shells; and the
ConnectionHost of the action plugins (plugin_utils/host/_remote.py) on a connection that runs its
lines with /bin/sh here, so each test sees the argv, environment, stdin and output a host gets."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from ansible_collections.fleetos.layering.plugins.module_utils.host import _host
from ansible_collections.fleetos.layering.tests.unit.plugins.module_utils.utils import LocalHost
from ansible_collections.fleetos.layering.plugins.plugin_utils.host._remote import ConnectionHost

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


# ---------------------------------------------------------------- the one compare-and-swap writer
# REPLACE_SCRIPT runs for real on each shell a host may call sh (bash as Fedora CoreOS's sh runs in POSIX mode), on
# files in a directory of its own (the test's own directory stays empty).

WRITER_SHELLS = [[shell] for shell in SHELLS] + ([["/bin/bash", "--posix"]] if "/bin/bash" in SHELLS else [])
OLD = b"old\n"
NEW = b"new \x00\xff\n"


def _write(shell, path, data=NEW, expected=OLD, **options):
    """Run ``_host.replace_argv(path, expected, **options)`` with ``shell`` as its sh; -> (rc, stdout, stderr)."""
    argv = _host.replace_argv(str(path), expected, **options)
    at = argv.index("sh")
    argv[at:at + 1] = shell
    proc = subprocess.run(argv, input=data, stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False,
                          env=dict(os.environ, **_host.ENVIRON))
    return proc.returncode, proc.stdout.decode(), proc.stderr.decode()


@pytest.fixture
def files(tmp_path_factory):
    return tmp_path_factory.mktemp("cas")


def _entries(directory):
    return sorted(os.listdir(directory))


def stat_mode(path):
    return os.stat(path).st_mode & 0o7777


@pytest.mark.parametrize("shell", WRITER_SHELLS, ids=" ".join)
@pytest.mark.parametrize("lock", [None, "x.lock"])
@pytest.mark.parametrize("backup", [False, True])
def test_the_writer_replaces_a_file_under_its_lock(shell, files, lock, backup):
    path = files / "x"
    path.write_bytes(OLD)
    os.chmod(path, 0o604)
    inode = path.stat().st_ino
    rc, out, err = _write(shell, path, lock=lock and str(files / lock), backup=backup)
    assert (rc, err) == (0, "")
    assert path.read_bytes() == NEW and path.stat().st_ino != inode
    assert stat_mode(path) == 0o604                         # no mode given: the original's is kept
    made = [name for name in _entries(files) if name.startswith("x.") and name.endswith(".bak")]
    assert out == (str(files / made[0]) + "\n" if backup else "\n")
    assert len(made) == (1 if backup else 0)
    if backup:
        assert (files / made[0]).read_bytes() == OLD and stat_mode(files / made[0]) == 0o604
    # A lock file is made when one is named; a directory lock leaves nothing beside the file.
    assert _entries(files) == sorted(["x"] + made + ([lock] if lock else []))


@pytest.mark.parametrize("shell", WRITER_SHELLS, ids=" ".join)
@pytest.mark.parametrize("lock", [None, "x.lock"])
def test_the_writer_makes_a_missing_file_and_its_directory_with_the_mode_given(shell, files, lock):
    path = files / "new" / "x"
    rc, out, _err = _write(shell, path, expected=None, mode=0o640, lock=lock and str(files / lock), missing=True,
                           backup=True)
    assert (rc, out) == (0, "\n")                          # nothing to back up
    assert path.read_bytes() == NEW and stat_mode(path) == 0o640 and stat_mode(path.parent) == 0o700
    assert _entries(path.parent) == ["x"] and _entries(files) == sorted(["new"] + ([lock] if lock else []))


@pytest.mark.parametrize("shell", WRITER_SHELLS, ids=" ".join)
@pytest.mark.parametrize("there, expected, missing", [
    (True, b"other\n", False),      # it changed since it was read
    (True, b"other\n", True),
    (True, None, True),             # it was made since it was read as missing
    (False, OLD, True),             # it was removed since it was read
])
@pytest.mark.parametrize("lock", [None, "x.lock"])
def test_the_writer_refuses_a_file_that_changed_and_leaves_nothing(shell, files, there, expected, missing, lock):
    path = files / "x"
    if there:
        path.write_bytes(OLD)
    rc, out, _err = _write(shell, path, expected=expected, mode=0o600 if missing else None, missing=missing,
                           lock=lock and str(files / lock), backup=True)
    assert (rc, out) == (_host.EXIT_CHANGED, "")
    if there:
        assert path.read_bytes() == OLD
    assert _entries(files) == sorted((["x"] if there else []) + ([lock] if lock else []))


@pytest.mark.parametrize("shell", WRITER_SHELLS, ids=" ".join)
def test_the_writer_says_a_required_file_is_missing(shell, files):
    rc, _out, err = _write(shell, files / "x", backup=True)
    assert rc == _host.EXIT_MISSING and err.strip().endswith("No such file or directory")
    assert _entries(files) == []


@pytest.mark.parametrize("shell", WRITER_SHELLS, ids=" ".join)
@pytest.mark.parametrize("which, make, kind", [
    ("x", lambda p: p.symlink_to("elsewhere"), "symbolic link"),
    ("x", lambda p: p.mkdir(), "directory"),
    ("x", os.mkfifo, "fifo"),
    ("x.lock", lambda p: p.symlink_to("elsewhere"), "symbolic link"),
    ("x.lock", lambda p: p.mkdir(), "directory"),
])
@pytest.mark.parametrize("mode, missing", [(None, False), (0o600, True)])
def test_the_writer_refuses_what_is_not_a_regular_file(shell, files, which, make, kind, mode, missing):
    path = files / "x"
    if which != "x":
        path.write_bytes(OLD)
    make(files / which)
    before = _entries(files)
    rc, out, err = _write(shell, path, mode=mode, missing=missing, lock=str(files / "x.lock"), backup=True)
    # The first line names the file, the second says what it is (as stat -c %F calls it).
    assert (rc, out, err) == (_host.EXIT_NOT_REGULAR, "", "%s is not a regular file\n%s\n" % (files / which, kind))
    assert _entries(files) == before


@pytest.mark.parametrize("shell", WRITER_SHELLS, ids=" ".join)
@pytest.mark.parametrize("backup", [False, True])
def test_a_lock_that_cannot_be_opened_leaves_no_temporary_file(shell, files, backup):
    # A shell exits when exec's redirection fails (POSIX: a special built-in): the writer's own cleanup runs first.
    path = files / "x"
    path.write_bytes(OLD)
    rc, _out, err = _write(shell, path, lock=str(files / "none" / "x.lock"), backup=backup)
    assert rc == 1 and "x.lock" in err
    assert path.read_bytes() == OLD and _entries(files) == ["x"]


@pytest.mark.parametrize("lock", [None, "x.lock"])
def test_the_writer_waits_for_its_lock(files, lock):
    import fcntl
    import time

    path = files / "x"
    path.write_bytes(OLD)
    held = os.open(str(files / lock) if lock else str(files), (os.O_WRONLY | os.O_CREAT) if lock else os.O_RDONLY)
    try:
        fcntl.flock(held, fcntl.LOCK_EX)
        argv = _host.replace_argv(str(path), OLD, lock=lock and str(files / lock))
        writer = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        writer.stdin.write(NEW)
        writer.stdin.close()
        time.sleep(0.5)
        assert writer.poll() is None and path.read_bytes() == OLD
    finally:
        os.close(held)
    assert writer.wait(timeout=30) == 0 and path.read_bytes() == NEW
    writer.stdout.close()
    writer.stderr.close()


def test_the_writer_argv():
    digest = _host.digest_of(OLD)
    assert _host.replace_argv("/p", OLD) == ["sh", "-c", _host.REPLACE_SCRIPT, "sh", "/p", digest, "", "", "", "", ""]
    assert _host.replace_argv("/p", None, mode=0o644, lock="/p.lock", missing=True, backup=True) == [
        "sh", "-c", _host.REPLACE_SCRIPT, "sh", "/p", "-", "/p.lock", "644", "1", "1", ""]
    assert _host.replace_argv("/p", OLD, remount=True) == _host.UNSHARE + [
        "sh", "-c", _host.REPLACE_SCRIPT, "sh", "/p", digest, "", "", "", "", "1"]
    with pytest.raises(ValueError):
        _host.replace_argv("/p", None, missing=True)


@pytest.mark.parametrize("which", ["x", "x.lock"])
def test_replace_file_refuses_naming_the_file(files, which):
    path = files / "x"
    (files / which).symlink_to("elsewhere")
    with pytest.raises(_host.HostFileError) as caught:
        LocalHost().replace_file(str(path), NEW, None)
    assert str(caught.value) == "%s is not a regular file" % (files / which) and caught.value.refused
    assert _entries(files) == [which]


def test_replace_file_writes_once_and_then_sees_the_change(files):
    path = files / "x"
    host = LocalHost()
    assert host.replace_file(str(path), OLD, None, mode=0o644) is True
    assert path.read_bytes() == OLD and stat_mode(path) == 0o644
    assert host.replace_file(str(path), NEW, None) is False
    assert host.replace_file(str(path), NEW, OLD) is True and stat_mode(path) == 0o600
    assert _entries(files) == ["x", "x.lock"]
