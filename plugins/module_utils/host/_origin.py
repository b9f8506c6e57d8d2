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

The file itself is read and written on a ``_host.Host`` by two POSIX shell scripts
(:data:`READ_SCRIPT` here, ``_host.REPLACE_SCRIPT``, the one writer of the host's files) with
the host's coreutils and util-linux, so the host needs no Python: see :func:`read_origin` and
:func:`write_origin`.
"""

from __future__ import annotations

import re

from ansible_collections.fleetos.layering.plugins.module_utils._errors import OriginError
from ansible_collections.fleetos.layering.plugins.module_utils.host._host import (
    EXIT_CHANGED,
    EXIT_MOUNT,
    EXIT_NOT_REGULAR,
    replace_argv,
)

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
# What ``stat -c %F`` prints for a file that is not a regular one -> how a message names it.
_STAT_KINDS = {"symbolic link": "a symbolic link", "directory": "a directory",
               "character special file": "a character device", "block special file": "a block device",
               "fifo": "a named pipe", "socket": "a socket"}


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


# On the host ---------------------------------------------------------------------------------------

# $1 the origin file. Exit 3 (what it is on stderr, as stat -c %F names it) when it is not a regular
# file: a symlink is not followed, a directory, device or pipe is not read. Else stdout is one line,
# ro or rw (whether the mount that holds it, or its file system, is read-only), then the
# file's bytes, read without following a symlink or waiting on a pipe put there meanwhile, and the
# file checked again once read. Exit 4: it cannot be looked at (missing); else dd's status.
READ_SCRIPT = r"""
p=$1
regular() {
  kind=$(stat -c %F -- "$p") || exit 4
  case $kind in
    "regular file"|"regular empty file") ;;
    *) printf '%s\n' "$kind" >&2; exit 3 ;;
  esac
}
regular
mode=rw
for column in VFS-OPTIONS FS-OPTIONS; do
  case ,$(findmnt -n -o "$column" -T "$p" 2>/dev/null), in *,ro,*) mode=ro ;; esac
done
printf '%s\n' "$mode"
dd if="$p" iflag=nofollow,nonblock bs=65536 status=none || exit
regular
"""

_NOT_FOUND = re.compile(r"(?:^|: )([^\s:]+): (?:command )?not found$")


def describe_kind(kind):
    """What ``stat -c %F`` printed -> ``a symbolic link``, ``a named pipe``, ..."""
    return _STAT_KINDS.get(kind.strip(), "an unknown type of file")


def not_regular(path, kind, label=None):
    """The refusal of ``path``, which ``stat -c %F`` calls ``kind``; ``label`` names it (default the origin file)."""
    return OriginError("%s is not a regular file (%s): ostree_origin edits origin files only"
                       % (label or "origin file '%s'" % path, describe_kind(kind)), path=path)


def _last_line(err):
    lines = [line.strip() for line in (err or "").splitlines() if line.strip()]
    return lines[-1] if lines else ""


def tool_cause(err, rc):
    """The cause in a host tool's message (``mv: cannot move 'a' to 'b': Read-only file system`` ->
    ``Read-only file system``), ``the host has no 'mktemp' command`` for a missing one, else the exit status."""
    line = _last_line(err)
    missing = _NOT_FOUND.search(line)
    if missing:
        return "the host has no '%s' command" % missing.group(1)
    return line.rsplit(": ", 1)[-1].rstrip(".") or "exit status %d" % rc


def _first_cause(text, rc):
    """tool_cause() of the first line of ``text`` (mount adds a second one, about dmesg)."""
    lines = [line for line in (text or "").splitlines() if line.strip()]
    return tool_cause(lines[0] if lines else "", rc)


def _script(script, args):
    return ["sh", "-c", script, "sh"] + list(args)


def read_origin(host, path, label=None):
    """-> (the bytes of the origin file ``path`` on ``host``, whether its mount is read-only).

    OriginError naming the file as ``label`` when it is not a regular file (a symlink, a directory, a
    device, a pipe: nothing is read), or cannot be read.
    """
    rc, out, err = host.run(_script(READ_SCRIPT, [path]), binary=True)
    if rc == EXIT_NOT_REGULAR:
        raise not_regular(path, _last_line(err), label)
    mode, newline, data = out.partition(b"\n")
    if rc != 0 or not newline or mode not in (b"ro", b"rw"):
        raise OriginError("Failed to read %s: %s" % (label or "origin %s" % path, tool_cause(err, rc)),
                          path=path, rc=rc, stderr=err)
    return data, mode == b"ro"


def write_origin(host, path, data, expected, backup=False, read_only=False, label=None):
    """Replace the origin file ``path`` on ``host`` with ``data`` if it still holds ``expected`` (the bytes
    read_origin() returned); with ``backup``, keep what it held in ``<path>.<UTC time>.bak``.

    -> (True, the backup's path or None) when written; (False, None) when the file changed meanwhile
    (read it again and edit again). ``read_only`` (from read_origin()) writes from a private mount
    namespace in which the mount that holds the file is writable; every other process keeps seeing
    it read-only. OriginError when the file is not a regular file or the write failed: the file is
    then left as it was, with no temporary file or backup beside it.
    """
    # The one writer of the host's files: the directory locked (no lock file among ostree's files), the
    # original's mode, owner and label kept.
    rc, out, err = host.run(replace_argv(path, expected, backup=backup, remount=read_only), data=data)
    if rc == 0:
        made = out[:-1] if out.endswith("\n") else out
        return True, made or None
    if rc == EXIT_CHANGED:
        return False, None
    if rc == EXIT_NOT_REGULAR:
        raise not_regular(path, _last_line(err), label)
    details = dict(path=path, rc=rc, stderr=err)
    if rc == EXIT_MOUNT:
        point, _newline, why = err.strip().partition("\n")
        cause = "cannot make %s writable in a private mount namespace (%s)" % (point, _first_cause(why, rc))
    elif read_only and _last_line(err).startswith("unshare:"):
        cause = "cannot make the mount that holds %s writable in a private mount namespace (%s)" % (
            path, tool_cause(err, rc))
    else:
        cause = tool_cause(err, rc)
        if cause == "Read-only file system":
            cause += " (the sysroot is mounted read-only)"
    raise OriginError("Failed to write origin %s: %s" % (path, cause.rstrip(".")), **details)
