# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# This is a private module_util of fleetos.layering: its interface may change at any
# time and it is not meant to be used by other collections.

"""Read, edit and atomically write ostree deployment origin files (GKeyFile format).

The document keeps every line it was read from, so whatever an edit does not touch
(unknown groups and keys, their order, comments, blank lines, line endings) is written
back byte for byte. Parsing follows GLib's GKeyFile: ``#`` comments and blank lines,
``[group]`` headers, ``key=value`` pairs (whitespace around the key and before the
value is ignored), the last of two equal keys wins, a repeated group continues the
first one, and a trailing ``\\r`` is part of the line ending.
"""

from __future__ import annotations

import datetime
import errno
import os
import re
import stat

from ansible_collections.fleetos.layering.plugins.module_utils._errors import OriginError

ORIGIN_GROUP = "origin"
OSTREE_BASE_KEYS = ("refspec", "baserefspec")
CONTAINER_BASE_KEY = "container-image-reference"
LIST_SEPARATOR = ";"

_ESCAPES = {"s": " ", "n": "\n", "t": "\t", "r": "\r", "\\": "\\"}
# The longest group or key name this collection writes or reads.
NAME_MAX = 255
_INVALID_GROUP_CHARS = re.compile(r"[\[\]\x00-\x1f\x7f]")
_INVALID_KEY_CHARS = re.compile(r"[=\[\]\x00-\x1f\x7f]")
# Control characters a value may not hold: escape() writes tab, newline and carriage return
# so that GKeyFile reads them back; any other one (NUL ends a C string, a leading vertical
# tab or form feed is dropped as whitespace) would not survive.
_INVALID_VALUE_CHARS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
# A raw value (escaped) may hold a tab but no line break either.
_INVALID_RAW_CHARS = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
_CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f]")
_CONTROL_NAMES = ("NUL", "SOH", "STX", "ETX", "EOT", "ENQ", "ACK", "BEL", "BS", "HT", "LF", "VT", "FF", "CR",
                  "SO", "SI", "DLE", "DC1", "DC2", "DC3", "DC4", "NAK", "SYN", "ETB", "CAN", "EM", "SUB",
                  "ESC", "FS", "GS", "RS", "US")
_FILE_KINDS = ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"),
               (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a named pipe"), (stat.S_ISSOCK, "a socket"))


def unescape(value, separator=None):
    """A raw GKeyFile value -> its string, or its list when ``separator`` is given.

    Raises ValueError on an invalid escape sequence, like g_key_file_get_string().
    """
    out, pieces, i = [], [], 0
    while i < len(value):
        char = value[i]
        if char == "\\":
            i += 1
            if i == len(value):
                raise ValueError("escape character at end of value")
            nxt = value[i]
            if nxt in _ESCAPES:
                out.append(_ESCAPES[nxt])
            elif separator is not None and nxt == separator:
                out.append(separator)
            else:
                raise ValueError("invalid escape sequence \\%s" % nxt)
        elif separator is not None and char == separator:
            pieces.append("".join(out))
            out = []
        else:
            out.append(char)
        i += 1
    if separator is None:
        return "".join(out)
    if out:
        pieces.append("".join(out))
    return pieces


def escape(value, separator=None):
    """A string -> its raw GKeyFile value, as g_key_file_set_string() writes it.

    Leading spaces and tabs become \\s and \\t, newlines, carriage returns and
    backslashes are always escaped, and ``separator`` (for list items) as well.
    """
    out, leading = [], True
    for char in value:
        if char == " " and leading:
            out.append("\\s")
            continue
        if char == "\t" and leading:
            out.append("\\t")
            continue
        if char == "\n":
            out.append("\\n")
        elif char == "\r":
            out.append("\\r")
        elif char == "\\":
            out.append("\\\\")
        elif separator is not None and char == separator:
            out.append("\\" + separator)
        else:
            out.append(char)
        if char not in (" ", "\t"):
            leading = False
    return "".join(out)


def format_list(items, trailing_separator=True):
    """A list of strings -> a raw ``;`` list value (GKeyFile writes a trailing ``;``)."""
    raw = LIST_SEPARATOR.join(escape(item, LIST_SEPARATOR) for item in items)
    if items and trailing_separator:
        raw += LIST_SEPARATOR
    return raw


def check_group_name(group):
    """Raise ValueError unless ``group`` is a valid GKeyFile group name."""
    if not group or _INVALID_GROUP_CHARS.search(group) or len(group) > NAME_MAX:
        raise ValueError("a group name must be non-empty, at most %d characters, without [, ] or control characters"
                         % NAME_MAX)


def check_key_name(key):
    """Raise ValueError unless ``key`` is a valid (non-localized) GKeyFile key name."""
    if not key or _INVALID_KEY_CHARS.search(key) or key != key.strip() or len(key) > NAME_MAX:
        raise ValueError("a key must be non-empty, at most %d characters, without =, [, ], control characters "
                         "or surrounding whitespace" % NAME_MAX)


def describe_char(char):
    """A character -> ``U+0000 NUL`` (its code point and, for an ASCII control, its name)."""
    code = ord(char)
    if code < len(_CONTROL_NAMES):
        return "U+%04X %s" % (code, _CONTROL_NAMES[code])
    if code == 0x7F:
        return "U+007F DEL"
    return "U+%04X" % code


def invalid_value_char(value):
    """The first character of ``value`` that an origin value may not hold, or None.

    Every ASCII control character but tab, newline and carriage return (which escape()
    writes as GKeyFile does) is refused.
    """
    found = _INVALID_VALUE_CHARS.search(value)
    return found.group() if found else None


def invalid_name_char(name):
    """The first control character in a group or key name, or None."""
    found = _CONTROL_CHARS.search(name)
    return found.group() if found else None


def describe_file_type(mode):
    """An lstat st_mode -> ``a symbolic link``, ``a character device``, ..."""
    for test, kind in _FILE_KINDS:
        if test(mode):
            return kind
    return "an unknown type of file"


def check_regular_file(path, label=None):
    """lstat ``path``; raise OriginError unless it is a regular file (a symlink is not).

    ``label`` names the file in the message (default ``origin file '<path>'``); OSError
    from lstat (a missing file) propagates. Returns the lstat result.
    """
    st = os.lstat(path)
    if not stat.S_ISREG(st.st_mode):
        raise _not_regular(path, st.st_mode, label)
    return st


def _not_regular(path, mode, label=None):
    return OriginError("%s is not a regular file (%s): ostree_origin edits origin files only"
                       % (label or "origin file '%s'" % path, describe_file_type(mode)), path=path)


def _read_regular(path, label=None):
    """The bytes of the regular file at ``path``, opened without following a symlink."""
    check_regular_file(path, label)
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):   # replaced between the lstat and the open
            raise _not_regular(path, st.st_mode, label)
        chunks = []
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
    finally:
        os.close(fd)


class _Line:
    """One line of the file: ``kind`` is comment, group or key; ``end`` its terminator."""

    __slots__ = ("kind", "text", "end", "group", "key", "value_at")

    def __init__(self, kind, text, end, group=None, key=None, value_at=0):
        self.kind = kind
        self.text = text
        self.end = end
        self.group = group
        self.key = key
        self.value_at = value_at

    @property
    def value(self):
        return self.text[self.value_at:]


def _parse_line(text, end, group, name, lineno):
    stripped = text.lstrip()
    if not stripped or stripped.startswith("#"):
        return _Line("comment", text, end, group)
    if stripped.startswith("["):
        close = stripped.find("]")
        if close > 0 and not stripped[close + 1:].strip(" \t"):
            group_name = stripped[1:close]
            try:
                check_group_name(group_name)
            except ValueError as exc:
                raise OriginError("origin %s line %d has an invalid group name %r: %s"
                                  % (name, lineno, group_name, exc), path=name, line=lineno)
            return _Line("group", text, end, group_name)
    eq = stripped.find("=")
    if eq > 0:
        if group is None:
            raise OriginError("origin %s line %d has a key=value before any [group]" % (name, lineno),
                              path=name, line=lineno)
        key = stripped[:eq].rstrip()
        value_at = len(text) - len(stripped) + eq + 1
        while value_at < len(text) and text[value_at] in " \t\f\v":
            value_at += 1
        return _Line("key", text, end, group, key, value_at)
    raise OriginError("origin %s line %d is neither a [group], a key=value nor a comment" % (name, lineno),
                      path=name, line=lineno)


class Origin:
    """A parsed origin file that remembers every line it came from."""

    def __init__(self, lines, name):
        self._lines = lines
        self.name = name

    @classmethod
    def parse(cls, data, name="<origin>"):
        """Parse ``data`` (bytes or str); ``name`` names the file in error messages."""
        if isinstance(data, bytes):
            try:
                data = data.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise OriginError("origin %s is not valid UTF-8 at byte %d" % (name, exc.start), path=name)
        lines, group = [], None
        chunks = data.split("\n")
        for lineno, text in enumerate(chunks, start=1):
            end = "\n" if lineno < len(chunks) else ""
            if not end and not text:
                break
            if text.endswith("\r"):
                text, end = text[:-1], "\r" + end
            line = _parse_line(text, end, group, name, lineno)
            group = line.group
            lines.append(line)
        return cls(lines, name)

    @classmethod
    def read(cls, path, label=None):
        """Read and parse the origin file at ``path``, a regular file and not a symlink.

        ``label`` names the file when it is not one (see check_regular_file()).
        """
        try:
            data = _read_regular(path, label)
        except OSError as exc:
            raise OriginError("Failed to read %s: %s" % (label or "origin %s" % path, exc.strerror or exc), path=path)
        return cls.parse(data, path)

    def text(self):
        """The file's text: untouched lines exactly as read."""
        return "".join(line.text + line.end for line in self._lines)

    def to_bytes(self):
        return self.text().encode("utf-8")

    # Queries ------------------------------------------------------------------

    def groups(self):
        """Group names in first-appearance order."""
        seen = []
        for line in self._lines:
            if line.kind == "group" and line.group not in seen:
                seen.append(line.group)
        return seen

    def _key_lines(self, group, key):
        return [ln for ln in self._lines if ln.kind == "key" and ln.group == group and ln.key == key]

    def has(self, group, key):
        return bool(self._key_lines(group, key))

    def get_value(self, group, key, default=None):
        """The raw value (escapes kept), like g_key_file_get_value(); the last one wins."""
        found = self._key_lines(group, key)
        return found[-1].value if found else default

    def get_string(self, group, key, default=None):
        """The unescaped value, like g_key_file_get_string()."""
        raw = self.get_value(group, key)
        if raw is None:
            return default
        try:
            return unescape(raw)
        except ValueError as exc:
            raise OriginError("origin %s has an invalid value for %s.%s: %s" % (self.name, group, key, exc),
                              path=self.name)

    def get_list(self, group, key, default=None):
        """The ``;``-separated list, like g_key_file_get_string_list()."""
        raw = self.get_value(group, key)
        if raw is None:
            return default
        try:
            return unescape(raw, LIST_SEPARATOR)
        except ValueError as exc:
            raise OriginError("origin %s has an invalid list for %s.%s: %s" % (self.name, group, key, exc),
                              path=self.name)

    def to_dict(self):
        """{group: {key: raw value}} in file order; the last of equal keys wins."""
        out = {}
        for line in self._lines:
            if line.kind == "group":
                out.setdefault(line.group, {})
            elif line.kind == "key":
                out[line.group][line.key] = line.value
        return out

    # Edits --------------------------------------------------------------------

    def set_value(self, group, key, raw):
        """Set the raw value of group.key; returns True when the text changed.

        An existing key keeps its place and spelling up to the value (the last of
        equal keys is edited); a new key goes after the last key of the group's last
        section; a new group goes at the end, after a blank line.
        """
        check_group_name(group)
        check_key_name(key)
        if "\n" in raw or "\r" in raw:
            raise ValueError("a raw value cannot hold a line break")
        bad = _INVALID_RAW_CHARS.search(raw)
        if bad:
            raise ValueError("a raw value cannot hold a control character (%s)" % describe_char(bad.group()))
        found = self._key_lines(group, key)
        if found:
            line = found[-1]
            if line.value == raw:
                return False
            line.text = line.text[:line.value_at] + raw
            return True
        new = _Line("key", "%s=%s" % (key, raw), "\n", group, key, len(key) + 1)
        sections = [i for i, ln in enumerate(self._lines) if ln.kind == "group" and ln.group == group]
        if sections:
            at = sections[-1]
            for i in range(at + 1, len(self._lines)):
                if self._lines[i].kind == "group":
                    break
                if self._lines[i].kind == "key":
                    at = i
            self._insert(at + 1, [new])
            return True
        block = []
        if self._lines and self._lines[-1].text.strip():
            block.append(_Line("comment", "", "\n", self._lines[-1].group))
        block.append(_Line("group", "[%s]" % group, "\n", group))
        block.append(new)
        self._insert(len(self._lines), block)
        return True

    def set_string(self, group, key, value):
        return self.set_value(group, key, escape(value))

    def set_list(self, group, key, items, trailing_separator=True):
        return self.set_value(group, key, format_list(items, trailing_separator))

    def remove(self, group, key):
        """Remove every group.key line; returns True when one was there. Groups stay."""
        before = len(self._lines)
        self._lines = [ln for ln in self._lines
                       if not (ln.kind == "key" and ln.group == group and ln.key == key)]
        return len(self._lines) != before

    def _insert(self, index, new_lines):
        if index > 0 and not self._lines[index - 1].end:
            self._lines[index - 1].end = "\n"
        self._lines[index:index] = new_lines

    # Validation ---------------------------------------------------------------

    def validate(self):
        """Raise OriginError when [origin] names both an ostree and a container base."""
        ostree = [k for k in OSTREE_BASE_KEYS if self.has(ORIGIN_GROUP, k)]
        if ostree and self.has(ORIGIN_GROUP, CONTAINER_BASE_KEY):
            raise OriginError(
                "Refusing to write origin %s because [%s] would hold both %s and %s, "
                "an ostree base and a container image base at once"
                % (self.name, ORIGIN_GROUP, " and ".join(ostree), CONTAINER_BASE_KEY),
                path=self.name)


def backup_name(path, now=None):
    """``<path>.<UTC timestamp>.bak``: a new name for every backup, none overwritten."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    return "%s.%s.bak" % (path, now.strftime("%Y%m%dT%H%M%S.%fZ"))


def _open_new(path, mode):
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), mode)


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _copy_attributes(fd, st, src_path):
    os.fchmod(fd, st.st_mode & 0o7777)
    if os.geteuid() == 0 and (st.st_uid, st.st_gid) != (os.getuid(), os.getgid()):
        os.fchown(fd, st.st_uid, st.st_gid)
    # Keep the SELinux label of the original (libostree labels origin files).
    if hasattr(os, "getxattr"):
        try:
            label = os.getxattr(src_path, "security.selinux", follow_symlinks=False)
        except OSError:
            label = None
        if label is not None:
            try:
                os.setxattr(fd, "security.selinux", label)
            except OSError:
                pass


def _write_unique(candidates, data, st, src_path, made, what):
    """Create the first free name of candidates (O_EXCL) with data; return that name.

    Each file is recorded in ``made`` as soon as it exists, so the caller can remove it
    when a later step fails, even if writing it failed halfway.
    """
    for name in candidates:
        try:
            fd = _open_new(name, st.st_mode & 0o7777)
        except OSError as exc:
            if exc.errno == errno.EEXIST:
                continue
            raise
        made.append(name)
        try:
            _copy_attributes(fd, st, src_path)
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        return name
    raise OSError(errno.EEXIST, "no free %s file name" % what)


def _fsync_dir(directory):
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _unlink_quietly(path):
    try:
        os.unlink(path)
    except OSError:
        pass


def write_atomic(path, data, backup=False, label=None):
    """Replace the file at ``path`` with ``data`` (bytes), atomically.

    A temporary file is created next to it (O_EXCL, same mode, owner and SELinux label
    as the original), written, fsynced and renamed over ``path``; then the directory
    is fsynced. With ``backup`` the original bytes are first copied to
    backup_name(path). Returns the backup path or None. On any failure the original
    file is left as it was, and no temporary file (nor a backup made by this call)
    remains; OriginError is raised.

    ``path`` must be a regular file, not a symlink (checked with lstat before anything
    is written, else OriginError naming it as ``label``); the rename replaces the
    directory entry and never follows a symlink.
    """
    directory = os.path.dirname(os.path.abspath(path))
    base = os.path.basename(path)
    made = []
    try:
        st = check_regular_file(path, label)
        backup_path = None
        if backup:
            original = _read_regular(path, label)
            backups = (backup_name(path) + ("" if attempt == 0 else ".%d" % attempt) for attempt in range(100))
            backup_path = _write_unique(backups, original, st, path, made, "backup")
        temps = (os.path.join(directory, ".%s.%d.%d.tmp" % (base, os.getpid(), attempt)) for attempt in range(100))
        tmp = _write_unique(temps, data, st, path, made, "temporary")
        os.replace(tmp, path)
        made = []
        _fsync_dir(directory)
        return backup_path
    except OSError as exc:
        for leftover in made:
            _unlink_quietly(leftover)
        cause = exc.strerror or str(exc)
        if exc.errno == errno.EROFS:
            cause += " (the sysroot is mounted read-only)"
        raise OriginError("Failed to write origin %s: %s" % (path, cause), path=path)
