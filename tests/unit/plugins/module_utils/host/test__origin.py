# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests of the private _origin module_util (GKeyFile origin files)."""

from __future__ import annotations

import os
import re
import shutil
import stat
from pathlib import Path

import pytest

from ansible_collections.fleetos.layering.plugins.module_utils.host import _host, _origin
from ansible_collections.fleetos.layering.tests.unit.plugins.module_utils.utils import LocalHost
from ansible_collections.fleetos.layering.tests.unit.plugins.modules.utils import snapshot_dir
from ansible_collections.fleetos.layering.plugins.module_utils._errors import OriginError
from ansible_collections.fleetos.layering.plugins.module_utils.host._origin import (
    Origin,
    escape,
    format_list,
    read_origin,
    unescape,
    write_origin,
)


def _shared_dir():
    env = os.environ.get("FLEETOS_SHARED")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[6] / "shared"


FIXTURES = _shared_dir() / "reference" / "fixtures"
ORIGIN_FIXTURES = sorted(FIXTURES.glob("origin__*.origin")) if FIXTURES.is_dir() else []

COMMENTED = (
    "# written by hand\n"
    "[origin]\n"
    "  # indented comment\n"
    "refspec = fedora:fedora/x86_64/coreos/stable\n"
    "\n"
    "[x-unknown]\n"
    "zeta=1\n"
    "alpha=2\n"
    "\n"
    "# trailing comment\n"
)


# --- real samples -------------------------------------------------------------------

@pytest.mark.skipif(not ORIGIN_FIXTURES, reason="no origin__*.origin samples in %s (set FLEETOS_SHARED)" % FIXTURES)
@pytest.mark.parametrize("fixture", ORIGIN_FIXTURES, ids=lambda p: p.name)
def test_real_origin_round_trips_byte_for_byte(fixture):
    data = fixture.read_bytes()
    doc = Origin.parse(data, str(fixture))
    assert doc.to_bytes() == data
    assert "origin" in doc.to_dict()


@pytest.mark.skipif(not ORIGIN_FIXTURES, reason="no origin__*.origin samples in %s (set FLEETOS_SHARED)" % FIXTURES)
@pytest.mark.parametrize("fixture", ORIGIN_FIXTURES, ids=lambda p: p.name)
def test_real_origin_edit_touches_one_line(fixture):
    data = fixture.read_text()
    doc = Origin.parse(data, str(fixture))
    assert doc.set_string("origin", "fleetos-test-marker", "yes") is True
    after = doc.text().splitlines()
    assert [line for line in after if line not in data.splitlines()] == ["fleetos-test-marker=yes"]
    assert doc.remove("origin", "fleetos-test-marker") is True
    assert doc.text() == data


@pytest.mark.skipif(not ORIGIN_FIXTURES, reason="no origin__*.origin samples in %s (set FLEETOS_SHARED)" % FIXTURES)
def test_real_complex_origin_lists():
    path = FIXTURES / "origin__rpm-ostree-unittest__complex-layered-overrides-pinned.origin"
    data, read_only = read_origin(LocalHost(), str(path))
    assert (data, read_only) == (path.read_bytes(), False)
    doc = Origin.parse(data, str(path))
    assert doc.get_list("packages", "requested") == ["libvirt", "fish"]
    assert doc.get_list("rpmostree", "initramfs-args") == ["-I", "/etc/foobar.conf"]
    assert doc.get_list("overrides", "replace") == ["repo=foobar,systemd", "repo=bazboo,kernel,kernel-core,kernel-modules"]
    assert doc.get_string("libostree-transient", "pinned") == "true"
    assert doc.groups() == ["origin", "rpmostree", "packages", "overrides", "libostree-transient"]


# --- parsing --------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("", {}),
    ("[origin]\nrefspec=a:b\n", {"origin": {"refspec": "a:b"}}),
    ("[origin]\nrefspec=a:b", {"origin": {"refspec": "a:b"}}),
    ("[origin]\r\nrefspec=a:b\r\n", {"origin": {"refspec": "a:b"}}),
    ("[origin]  \n  key  =   spaced value \n", {"origin": {"key": "spaced value "}}),
    ("[a]\nk=1\nk=2\n", {"a": {"k": "2"}}),
    ("[a]\nk=1\n[b]\nx=y\n[a]\nk=3\n", {"a": {"k": "3"}, "b": {"x": "y"}}),
    ("[a]\nk=v=w\n", {"a": {"k": "v=w"}}),
    ("[a]\nempty=\n", {"a": {"empty": ""}}),
    ("[a]\n[b]\n", {"a": {}, "b": {}}),
    (COMMENTED, {"origin": {"refspec": "fedora:fedora/x86_64/coreos/stable"}, "x-unknown": {"zeta": "1", "alpha": "2"}}),
])
def test_parse_to_dict_and_round_trip(text, expected):
    doc = Origin.parse(text, "/x.origin")
    assert doc.to_dict() == expected
    assert doc.text() == text


@pytest.mark.parametrize("text, message", [
    ("[origin]\nrefspec=a\nnot a pair\n", "origin /x.origin line 3 is neither a [group], a key=value nor a comment"),
    ("[origin]\n=value\n", "origin /x.origin line 2 is neither a [group], a key=value nor a comment"),
    ("[origin] trailing\n", "origin /x.origin line 1 is neither a [group], a key=value nor a comment"),
    ("[origin\n", "origin /x.origin line 1 is neither a [group], a key=value nor a comment"),
    ("refspec=a\n[origin]\n", "origin /x.origin line 1 has a key=value before any [group]"),
    ("# c\n[]\n", "origin /x.origin line 2 has an invalid group name ''"),
    (b"[origin]\nrefspec=\xff\n", "origin /x.origin is not valid UTF-8 at byte 17"),
])
def test_parse_errors_name_file_and_line(text, message):
    with pytest.raises(OriginError) as info:
        Origin.parse(text, "/x.origin")
    assert info.value.msg.startswith(message)
    assert info.value.details["path"] == "/x.origin"


# --- escapes and lists ------------------------------------------------------------------

@pytest.mark.parametrize("value, raw", [
    ("plain", "plain"),
    ("  two leading", "\\s\\stwo leading"),
    ("inner  spaces ", "inner  spaces "),
    ("\tlead tab\tinner", "\\tlead tab\tinner"),
    ("line\nbreak", "line\\nbreak"),
    ("cr\rhere", "cr\\rhere"),
    ("back\\slash", "back\\\\slash"),
    (" \\x", "\\s\\\\x"),
    ("semi;colon", "semi;colon"),
    ("", ""),
])
def test_escape_and_unescape_are_inverse(value, raw):
    assert escape(value) == raw
    assert unescape(raw) == value


@pytest.mark.parametrize("raw, message", [
    ("bad\\q", "invalid escape sequence \\q"),
    ("end\\", "escape character at end of value"),
    ("a\\;b", "invalid escape sequence \\;"),
])
def test_unescape_rejects_what_gkeyfile_rejects(raw, message):
    with pytest.raises(ValueError) as info:
        unescape(raw)
    assert str(info.value) == message


@pytest.mark.parametrize("raw, items", [
    ("a;b;", ["a", "b"]),
    ("a;b", ["a", "b"]),
    ("a", ["a"]),
    ("", []),
    ("a;;b;", ["a", "", "b"]),
    ("x\\;y;z;", ["x;y", "z"]),
    ("\\sa;b\\nc;", [" a", "b\nc"]),
])
def test_get_list(raw, items):
    doc = Origin.parse("[packages]\nrequested=%s\n" % raw, "/x.origin")
    assert doc.get_list("packages", "requested") == items
    assert doc.get_list("packages", "missing", default=["d"]) == ["d"]


@pytest.mark.parametrize("items, trailing, raw", [
    (["htop", "tmux"], True, "htop;tmux;"),
    (["htop", "tmux"], False, "htop;tmux"),
    ([], True, ""),
    (["a;b", " c"], True, "a\\;b;\\sc;"),
])
def test_set_list_writes_gkeyfile_lists(items, trailing, raw):
    assert format_list(items, trailing) == raw
    doc = Origin.parse("[packages]\nrequested=old;\n", "/x.origin")
    doc.set_list("packages", "requested", items, trailing_separator=trailing)
    assert doc.get_value("packages", "requested") == raw
    assert doc.get_list("packages", "requested") == items


def test_get_string_invalid_escape_is_origin_error():
    doc = Origin.parse("[origin]\nk=a\\q\n", "/x.origin")
    with pytest.raises(OriginError) as info:
        doc.get_string("origin", "k")
    assert info.value.msg == "origin /x.origin has an invalid value for origin.k: invalid escape sequence \\q"


# --- edits keep everything else -----------------------------------------------------------

@pytest.mark.parametrize("edit, expected", [
    (lambda d: d.set_string("origin", "refspec", "other:ref"),
     COMMENTED.replace("refspec = fedora:fedora/x86_64/coreos/stable", "refspec = other:ref")),
    (lambda d: d.set_string("x-unknown", "beta", "3"),
     COMMENTED.replace("alpha=2\n", "alpha=2\nbeta=3\n")),
    (lambda d: d.set_string("origin", "custom-description", " lead"),
     COMMENTED.replace("stable\n", "stable\ncustom-description=\\slead\n")),
    (lambda d: d.set_string("newgroup", "k", "v"),
     COMMENTED + "\n[newgroup]\nk=v\n"),
    (lambda d: d.remove("x-unknown", "zeta"),
     COMMENTED.replace("zeta=1\n", "")),
    (lambda d: d.remove("x-unknown", "absent"), COMMENTED),
    (lambda d: d.set_string("x-unknown", "zeta", "1"), COMMENTED),
])
def test_edits_keep_comments_order_and_unknown_groups(edit, expected):
    doc = Origin.parse(COMMENTED, "/x.origin")
    changed = edit(doc)
    assert doc.text() == expected
    assert changed is (expected != COMMENTED)


@pytest.mark.parametrize("text, group, expected", [
    ("[origin]\nrefspec=a", "origin", "[origin]\nrefspec=a\nk=v\n"),
    ("[origin]\r\nrefspec=a\r\n", "origin", "[origin]\r\nrefspec=a\r\nk=v\n"),
    ("", "origin", "[origin]\nk=v\n"),
    ("[a]\nj=1\n[b]\n[a]\nx=2\n\n", "a", "[a]\nj=1\n[b]\n[a]\nx=2\nk=v\n\n"),
    ("[a]\n# only a comment\n\n[b]\n", "a", "[a]\nk=v\n# only a comment\n\n[b]\n"),
])
def test_new_key_placement(text, group, expected):
    doc = Origin.parse(text, "/x.origin")
    assert doc.set_value(group, "k", "v") is True
    assert doc.text() == expected


def test_remove_drops_every_duplicate():
    doc = Origin.parse("[a]\nk=1\nk=2\nj=0\n", "/x.origin")
    assert doc.remove("a", "k") is True
    assert doc.text() == "[a]\nj=0\n"
    assert doc.has("a", "k") is False


@pytest.mark.parametrize("group, key", [("", "k"), ("a]b", "k"), ("a", ""), ("a", "k=v"), ("a", " k"), ("a", "k\n")])
def test_set_refuses_invalid_names(group, key):
    doc = Origin.parse("[a]\n", "/x.origin")
    with pytest.raises(ValueError):
        doc.set_value(group, key, "v")
    assert doc.text() == "[a]\n"


# --- both kinds of base -----------------------------------------------------------------------

@pytest.mark.parametrize("text, ok", [
    ("[origin]\ncontainer-image-reference=ostree-unverified-registry:r/os@sha256:aa\n", True),
    ("[origin]\nrefspec=fedora:fedora/x86_64/coreos/stable\n", True),
    ("[origin]\nrefspec=a:b\ncontainer-image-reference=ostree-unverified-registry:r/os\n", False),
    ("[origin]\nbaserefspec=a:b\ncontainer-image-reference=ostree-unverified-registry:r/os\n", False),
    ("[origin]\nrefspec=a:b\n[other]\ncontainer-image-reference=x\n", True),
])
def test_validate_refuses_both_bases(text, ok):
    doc = Origin.parse(text, "/x.origin")
    if ok:
        doc.validate()
    else:
        with pytest.raises(OriginError) as info:
            doc.validate()
        assert info.value.msg.startswith("Refusing to write origin /x.origin because [origin] would hold both ")
        assert "container-image-reference" in info.value.msg


# --- on the host: the read and write scripts, run for real --------------------------------------------

class ShellHost(LocalHost):
    """This machine with its scripts run by ``shell`` (Fedora CoreOS's /bin/sh is bash, Debian's dash)."""

    def __init__(self, shell):
        super().__init__()
        self.shell = shell

    def run(self, argv, data=None, binary=False):
        given = list(argv)
        at = given.index("sh") if "sh" in given else None
        run = list(given)
        if at is not None and given[at + 1:at + 2] == ["-c"]:
            run[at:at + 1] = self.shell
        result = super().run(run, data=data, binary=binary)
        self.argvs[-1] = given      # recorded as the step gave it
        return result


SHELLS = [["dash"], ["bash", "--posix"]]


@pytest.fixture(params=SHELLS, ids=lambda shell: shell[0])
def host(request):
    if not shutil.which(request.param[0]):
        pytest.skip("no %s here" % request.param[0])
    return ShellHost(request.param)


ORIGINAL = b"[origin]\nrefspec=a:b\n"
EDITED = b"[origin]\nrefspec=c:d\n"


def _dir_entries(path):
    return sorted(p.name for p in path.parent.iterdir())


@pytest.fixture
def target(tmp_path):
    path = tmp_path / "abc.0.origin"
    path.write_bytes(ORIGINAL)
    return path


def _fake_tools(monkeypatch, tmp_path, **tools):
    """Put shell scripts named after host tools first in PATH (``tools``: name -> script body)."""
    bin_dir = tmp_path.parent / (tmp_path.name + "-bin")
    bin_dir.mkdir(exist_ok=True)
    for name, body in tools.items():
        tool = bin_dir / name
        tool.write_text("#!/bin/sh\n" + body)
        tool.chmod(0o755)
    monkeypatch.setenv("PATH", "%s:%s" % (bin_dir, os.environ["PATH"]))


@pytest.mark.parametrize("data", [ORIGINAL, b"", b"[origin]\nrefspec=a:b", b"\xff\x00\r\n" * 40000])
def test_read_returns_the_bytes_as_they_are(host, tmp_path, data):
    path = tmp_path / "abc.0.origin"
    path.write_bytes(data)
    assert read_origin(host, str(path)) == (data, False)
    assert host.argvs == [["sh", "-c", _origin.READ_SCRIPT, "sh", str(path)]]


def test_read_missing_file_names_it(host, tmp_path):
    missing = tmp_path / "none.origin"
    with pytest.raises(OriginError) as info:
        read_origin(host, str(missing))
    assert info.value.msg == "Failed to read origin %s: No such file or directory" % missing
    assert info.value.details["rc"] == _host.EXIT_MISSING


def test_write_replaces_and_keeps_mode(host, target):
    os.chmod(target, 0o640)
    inode = target.stat().st_ino
    assert write_origin(host, str(target), EDITED, ORIGINAL) == (True, None)
    assert target.read_bytes() == EDITED
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert target.stat().st_ino != inode           # renamed into place, never written in place
    assert _dir_entries(target) == ["abc.0.origin"]


def test_write_backup(host, target):
    os.chmod(target, 0o604)
    written, backup = write_origin(host, str(target), EDITED, ORIGINAL, backup=True)
    assert written is True
    assert Path(backup).parent == target.parent
    assert re.fullmatch(r"abc\.0\.origin\.\d{8}T\d{6}\.\d{6}Z\.bak", Path(backup).name)
    assert Path(backup).read_bytes() == ORIGINAL
    assert stat.S_IMODE(Path(backup).stat().st_mode) == 0o604
    second = write_origin(host, str(target), b"[origin]\nrefspec=e:f\n", EDITED, backup=True)[1]
    assert second != backup
    assert Path(second).read_bytes() == EDITED
    assert _dir_entries(target) == sorted(["abc.0.origin", Path(backup).name, Path(second).name])


@pytest.mark.parametrize("backup", [False, True])
def test_write_refuses_a_file_that_changed(host, target, backup):
    # What the controller read is not what the file holds now: nothing is written, nothing is left.
    assert write_origin(host, str(target), EDITED, b"[origin]\nrefspec=old\n", backup=backup) == (False, None)
    assert target.read_bytes() == ORIGINAL
    assert _dir_entries(target) == ["abc.0.origin"]


@pytest.mark.parametrize("backup", [False, True])
@pytest.mark.parametrize("message, cause", [
    ("mv: cannot move 'a' to 'b': No space left on device", "No space left on device"),
    ("mv: cannot move 'a' to 'b': Read-only file system", "Read-only file system (the sysroot is mounted read-only)"),
])
def test_write_failure_leaves_file_and_no_temp(host, target, monkeypatch, tmp_path, backup, message, cause):
    _fake_tools(monkeypatch, tmp_path, mv="echo \"%s\" >&2\nexit 1\n" % message)
    with pytest.raises(OriginError) as info:
        write_origin(host, str(target), EDITED, ORIGINAL, backup=backup)
    assert info.value.msg == "Failed to write origin %s: %s" % (target, cause)
    assert info.value.details == {"path": str(target), "rc": 1, "stderr": message + "\n"}
    assert target.read_bytes() == ORIGINAL
    assert _dir_entries(target) == ["abc.0.origin"]


def test_write_failure_while_writing(host, target, monkeypatch, tmp_path):
    # The new content cannot be written out whole: the origin is left as it was.
    _fake_tools(monkeypatch, tmp_path, cat="head -c 3 >/dev/null\necho 'cat: write error: Input/output error' >&2\n"
                                           "exit 1\n")
    with pytest.raises(OriginError) as info:
        write_origin(host, str(target), EDITED, ORIGINAL, backup=True)
    assert info.value.msg == "Failed to write origin %s: Input/output error" % target
    assert target.read_bytes() == ORIGINAL
    assert _dir_entries(target) == ["abc.0.origin"]


@pytest.mark.parametrize("backup", [False, True])
def test_write_failure_of_the_backup_removes_it(host, target, monkeypatch, tmp_path, backup):
    # chmod fails on the second file it is given (the backup): the temporary file goes too.
    state = tmp_path.parent / (tmp_path.name + "-chmod-calls")
    _fake_tools(monkeypatch, tmp_path, chmod='echo x >> "%s"\n[ "$(wc -l < "%s")" -lt 2 ] && exec /bin/chmod "$@"\n'
                                             "echo 'chmod: changing permissions: Operation not permitted' >&2\n"
                                             "exit 1\n" % (state, state))
    if backup:
        with pytest.raises(OriginError) as info:
            write_origin(host, str(target), EDITED, ORIGINAL, backup=True)
        assert info.value.msg == "Failed to write origin %s: Operation not permitted" % target
        assert target.read_bytes() == ORIGINAL
    else:
        assert write_origin(host, str(target), EDITED, ORIGINAL) == (True, None)
        assert target.read_bytes() == EDITED
    assert _dir_entries(target) == ["abc.0.origin"]


def _symlink(tmp_path):
    real = tmp_path / "real.origin"
    real.write_bytes(ORIGINAL)
    link = tmp_path / "abc.0.origin"
    link.symlink_to(real.name)
    return link


def _dangling_symlink(tmp_path):
    link = tmp_path / "abc.0.origin"
    link.symlink_to("nowhere.origin")
    return link


def _directory(tmp_path):
    path = tmp_path / "abc.0.origin"
    path.mkdir()
    return path


def _fifo(tmp_path):
    path = tmp_path / "abc.0.origin"
    os.mkfifo(path)
    return path


def _char_device(tmp_path):
    path = tmp_path / "abc.0.origin"
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))   # like /dev/null
    except (OSError, AttributeError) as exc:
        pytest.skip("cannot make a device node here: %s" % exc)
    return path


NOT_REGULAR = [
    (_symlink, "a symbolic link"),
    (_dangling_symlink, "a symbolic link"),
    (_directory, "a directory"),
    (_fifo, "a named pipe"),
    (_char_device, "a character device"),
]


_snapshot = snapshot_dir


@pytest.mark.parametrize("make, kind", NOT_REGULAR)
def test_read_refuses_what_is_not_a_regular_file(host, tmp_path, make, kind):
    path = make(tmp_path)
    with pytest.raises(OriginError) as info:
        read_origin(host, str(path))
    assert info.value.msg == "origin file '%s' is not a regular file (%s): ostree_origin edits origin files only" % (path, kind)
    with pytest.raises(OriginError) as labelled:
        read_origin(host, str(path), "path '%s'" % path)
    assert labelled.value.msg == "path '%s' is not a regular file (%s): ostree_origin edits origin files only" % (path, kind)


@pytest.mark.parametrize("make, kind", NOT_REGULAR)
@pytest.mark.parametrize("backup", [False, True])
def test_write_refuses_what_is_not_a_regular_file(host, tmp_path, make, kind, backup):
    path = make(tmp_path)
    before = _snapshot(tmp_path)
    with pytest.raises(OriginError) as info:
        write_origin(host, str(path), EDITED, ORIGINAL, backup=backup, label="path '%s'" % path)
    assert info.value.msg == "path '%s' is not a regular file (%s): ostree_origin edits origin files only" % (path, kind)
    assert _snapshot(tmp_path) == before      # no temporary file, no backup, the link and its target as they were


# A stat that calls the file a regular one the first time only: the file is replaced between the check and
# the read.
STAT_ONCE = 'if [ ! -e "{state}" ]; then : > "{state}"; echo "regular file"; else exec /usr/bin/stat "$@"; fi\n'


def test_read_opens_without_following_a_symlink(host, tmp_path, monkeypatch):
    link = _symlink(tmp_path)
    _fake_tools(monkeypatch, tmp_path, stat=STAT_ONCE.format(state=tmp_path.parent / (tmp_path.name + "-stat-called")))
    with pytest.raises(OriginError) as info:
        read_origin(host, str(link))
    assert info.value.msg == "Failed to read origin %s: Too many levels of symbolic links" % link


def test_read_checks_the_file_again_and_never_waits_on_a_pipe(host, tmp_path, monkeypatch):
    fifo = _fifo(tmp_path)
    _fake_tools(monkeypatch, tmp_path, stat=STAT_ONCE.format(state=tmp_path.parent / (tmp_path.name + "-stat-called")))
    with pytest.raises(OriginError) as info:
        read_origin(host, str(fifo))
    assert info.value.msg == "origin file '%s' is not a regular file (a named pipe): ostree_origin edits origin files only" % fifo


def test_write_keeps_a_regular_file_regular(host, target):
    write_origin(host, str(target), EDITED, ORIGINAL)
    assert stat.S_ISREG(target.lstat().st_mode)
    assert target.stat().st_size == len(EDITED)


@pytest.mark.parametrize("err, rc, cause", [
    ("stat: cannot statx '/x': No such file or directory\n", 4, "No such file or directory"),
    ("mv: cannot move '/a: b' to '/c': Read-only file system\n", 1, "Read-only file system"),
    ("sh: 13: dd: not found\n", 127, "the host has no 'dd' command"),
    ("sh: line 1: mktemp: command not found\n", 127, "the host has no 'mktemp' command"),
    ("first\n\nunshare: unshare failed: Operation not permitted\n\n", 1, "Operation not permitted"),
    ("no free name\n", 1, "no free name"),
    ("", 9, "exit status 9"),
])
def test_tool_cause(err, rc, cause):
    assert _origin.tool_cause(err, rc) == cause


@pytest.mark.parametrize("kind, described", [
    ("symbolic link", "a symbolic link"),
    ("directory\n", "a directory"),
    ("fifo", "a named pipe"),
    ("character special file", "a character device"),
    ("block special file", "a block device"),
    ("socket", "a socket"),
    ("weird file", "an unknown type of file"),
])
def test_describe_kind(kind, described):
    assert _origin.describe_kind(kind) == described


# --- control characters ------------------------------------------------------------------------------

@pytest.mark.parametrize("char, described", [
    ("\x00", "U+0000 NUL"),
    ("\x01", "U+0001 SOH"),
    ("\t", "U+0009 HT"),
    ("\n", "U+000A LF"),
    ("\x0b", "U+000B VT"),
    ("\x1b", "U+001B ESC"),
    ("\x1f", "U+001F US"),
    ("\x7f", "U+007F DEL"),
    ("\u00e9", "U+00E9"),
])
def test_describe_char(char, described):
    assert _origin.describe_char(char) == described


@pytest.mark.parametrize("value, bad", [
    ("plain", None),
    ("tab\tinside", None),
    ("\tleading tab", None),
    ("line\nbreak", None),
    ("carriage\rreturn", None),
    ("caf\u00e9 \u2603", None),
    ("nul\x00", "\x00"),
    ("\x00", "\x00"),
    ("bell\x07", "\x07"),
    ("backspace\x08", "\x08"),
    ("\x0bvertical tab", "\x0b"),
    ("\x0cform feed", "\x0c"),
    ("esc\x1b[31m", "\x1b"),
    ("ok\tthen\x1f", "\x1f"),
    ("del\x7f", "\x7f"),
])
def test_invalid_value_char(value, bad):
    assert _origin.invalid_value_char(value) == bad


@pytest.mark.parametrize("name, bad", [
    ("origin.refspec", None),
    ("origin.a\tb", "\t"),
    ("origin.a\x00b", "\x00"),
    ("x\x7f.k", "\x7f"),
])
def test_invalid_name_char(name, bad):
    assert _origin.invalid_name_char(name) == bad


@pytest.mark.parametrize("raw, message", [
    ("nul\x00", "a raw value cannot hold a control character (U+0000 NUL)"),
    ("esc\x1b", "a raw value cannot hold a control character (U+001B ESC)"),
    ("\x0bv", "a raw value cannot hold a control character (U+000B VT)"),
    ("del\x7f", "a raw value cannot hold a control character (U+007F DEL)"),
    ("line\nbreak", "a raw value cannot hold a line break"),
])
def test_set_value_refuses_control_characters(raw, message):
    doc = Origin.parse("[a]\nk=1\n", "/x.origin")
    with pytest.raises(ValueError) as info:
        doc.set_value("a", "k", raw)
    assert str(info.value) == message
    assert doc.text() == "[a]\nk=1\n"


@pytest.mark.parametrize("value, line", [
    ("a\tb", "k=a\tb"),
    ("\ta", "k=\\ta"),
    ("a\nb", "k=a\\nb"),
    ("a\rb", "k=a\\rb"),
])
def test_set_string_writes_allowed_controls_as_gkeyfile_does(value, line):
    doc = Origin.parse("[a]\nk=1\n", "/x.origin")
    assert doc.set_string("a", "k", value) is True
    assert doc.text() == "[a]\n%s\n" % line
    assert Origin.parse(doc.text(), "/x.origin").get_string("a", "k") == value
