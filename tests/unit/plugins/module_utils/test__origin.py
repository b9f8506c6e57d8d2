# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests of the private _origin module_util (GKeyFile origin files)."""

from __future__ import annotations

import datetime
import os
import stat
from pathlib import Path

import pytest

from ansible_collections.fleetos.layering.plugins.module_utils import _origin
from ansible_collections.fleetos.layering.tests.unit.plugins.modules.utils import snapshot_dir
from ansible_collections.fleetos.layering.plugins.module_utils._errors import OriginError
from ansible_collections.fleetos.layering.plugins.module_utils._origin import (
    Origin,
    backup_name,
    escape,
    format_list,
    unescape,
    write_atomic,
)


def _shared_dir():
    env = os.environ.get("FLEETOS_SHARED")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[5] / "shared"


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
    doc = Origin.read(str(FIXTURES / "origin__rpm-ostree-unittest__complex-layered-overrides-pinned.origin"))
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


def test_read_missing_file_names_it(tmp_path):
    missing = tmp_path / "none.origin"
    with pytest.raises(OriginError) as info:
        Origin.read(str(missing))
    assert info.value.msg == "Failed to read origin %s: No such file or directory" % missing


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


# --- atomic write ---------------------------------------------------------------------------------

def _dir_entries(path):
    return sorted(p.name for p in path.parent.iterdir())


def test_write_atomic_replaces_and_keeps_mode(tmp_path):
    target = tmp_path / "abc.0.origin"
    target.write_bytes(b"[origin]\nrefspec=a:b\n")
    os.chmod(target, 0o640)
    assert write_atomic(str(target), b"[origin]\nrefspec=c:d\n") is None
    assert target.read_bytes() == b"[origin]\nrefspec=c:d\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert _dir_entries(target) == ["abc.0.origin"]


def test_write_atomic_backup(tmp_path):
    target = tmp_path / "abc.0.origin"
    target.write_bytes(b"[origin]\nrefspec=a:b\n")
    os.chmod(target, 0o600)
    backup = write_atomic(str(target), b"[origin]\nrefspec=c:d\n", backup=True)
    assert Path(backup).parent == tmp_path
    assert Path(backup).name.startswith("abc.0.origin.") and backup.endswith("Z.bak")
    assert Path(backup).read_bytes() == b"[origin]\nrefspec=a:b\n"
    assert stat.S_IMODE(Path(backup).stat().st_mode) == 0o600
    second = write_atomic(str(target), b"[origin]\nrefspec=e:f\n", backup=True)
    assert second != backup
    assert Path(second).read_bytes() == b"[origin]\nrefspec=c:d\n"


def test_backup_name_format():
    now = datetime.datetime(2025, 1, 2, 3, 4, 5, 6, tzinfo=datetime.timezone.utc)
    assert backup_name("/d/x.origin", now) == "/d/x.origin.20250102T030405.000006Z.bak"


@pytest.mark.parametrize("backup", [False, True])
def test_write_atomic_failure_leaves_file_and_no_temp(tmp_path, monkeypatch, backup):
    target = tmp_path / "abc.0.origin"
    target.write_bytes(b"[origin]\nrefspec=a:b\n")

    def failing_replace(src, dst):
        assert Path(src).read_bytes() == b"[origin]\nrefspec=c:d\n"
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(_origin.os, "replace", failing_replace)
    with pytest.raises(OriginError) as info:
        write_atomic(str(target), b"[origin]\nrefspec=c:d\n", backup=backup)
    assert info.value.msg == "Failed to write origin %s: No space left on device" % target
    assert target.read_bytes() == b"[origin]\nrefspec=a:b\n"
    assert _dir_entries(target) == ["abc.0.origin"]


def test_write_atomic_failure_while_writing(tmp_path, monkeypatch):
    target = tmp_path / "abc.0.origin"
    target.write_bytes(b"[origin]\nrefspec=a:b\n")
    real_write = os.write

    def half_write(fd, data):
        real_write(fd, bytes(data[:3]))
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(_origin.os, "write", half_write)
    with pytest.raises(OriginError) as info:
        write_atomic(str(target), b"[origin]\nrefspec=c:d\n")
    assert info.value.msg == "Failed to write origin %s: Input/output error" % target
    assert target.read_bytes() == b"[origin]\nrefspec=a:b\n"
    assert _dir_entries(target) == ["abc.0.origin"]


def test_write_atomic_read_only_names_cause(tmp_path, monkeypatch):
    target = tmp_path / "abc.0.origin"
    target.write_bytes(b"[origin]\n")

    def erofs(*args, **kwargs):
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(_origin, "_open_new", erofs)
    with pytest.raises(OriginError) as info:
        write_atomic(str(target), b"[origin]\nk=v\n")
    assert info.value.msg == ("Failed to write origin %s: Read-only file system "
                              "(the sysroot is mounted read-only)" % target)
    assert target.read_bytes() == b"[origin]\n"


# --- only regular files ---------------------------------------------------------------------------

ORIGINAL = b"[origin]\nrefspec=a:b\n"


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
def test_read_refuses_what_is_not_a_regular_file(tmp_path, make, kind):
    path = make(tmp_path)
    with pytest.raises(OriginError) as info:
        Origin.read(str(path))
    assert info.value.msg == "origin file '%s' is not a regular file (%s): ostree_origin edits origin files only" % (path, kind)
    with pytest.raises(OriginError) as labelled:
        Origin.read(str(path), "path '%s'" % path)
    assert labelled.value.msg == "path '%s' is not a regular file (%s): ostree_origin edits origin files only" % (path, kind)


@pytest.mark.parametrize("make, kind", NOT_REGULAR)
@pytest.mark.parametrize("backup", [False, True])
def test_write_atomic_refuses_what_is_not_a_regular_file(tmp_path, make, kind, backup):
    path = make(tmp_path)
    before = _snapshot(tmp_path)
    with pytest.raises(OriginError) as info:
        write_atomic(str(path), b"[origin]\nrefspec=c:d\n", backup=backup, label="path '%s'" % path)
    assert info.value.msg == "path '%s' is not a regular file (%s): ostree_origin edits origin files only" % (path, kind)
    assert _snapshot(tmp_path) == before      # no temporary file, no backup, the link and its target as they were


def test_read_opens_without_following_a_symlink(tmp_path, monkeypatch):
    # A symlink put in place between the lstat check and the open is not followed.
    link = _symlink(tmp_path)
    monkeypatch.setattr(_origin, "check_regular_file", lambda path, label=None: None)
    with pytest.raises(OriginError) as info:
        Origin.read(str(link))
    assert info.value.msg == "Failed to read origin %s: Too many levels of symbolic links" % link


def test_read_checks_the_opened_file_too(tmp_path, monkeypatch):
    # A named pipe put in place between the lstat check and the open is refused, without blocking.
    fifo = _fifo(tmp_path)
    monkeypatch.setattr(_origin, "check_regular_file", lambda path, label=None: None)
    with pytest.raises(OriginError) as info:
        Origin.read(str(fifo))
    assert info.value.msg == "origin file '%s' is not a regular file (a named pipe): ostree_origin edits origin files only" % fifo


def test_write_atomic_keeps_a_regular_file_regular(tmp_path):
    target = tmp_path / "abc.0.origin"
    target.write_bytes(ORIGINAL)
    write_atomic(str(target), b"[origin]\nrefspec=c:d\n")
    assert stat.S_ISREG(target.lstat().st_mode)
    assert _origin.check_regular_file(str(target)).st_size == len(b"[origin]\nrefspec=c:d\n")


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
