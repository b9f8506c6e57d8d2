# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# This is a private module_util of fleetos.layering: its interface may change at any
# time and it is not meant to be used by other collections.

"""The managed host as the collection's shared code sees it: run an argv, find a tool, read a
file, replace a file atomically under a lock.

Two kinds of host implement :class:`Host`:

- :class:`ModuleHost`, a module running on the host itself (it needs Python there);
- ``plugin_utils.host._remote.ConnectionHost``, an action plugin on the controller that runs
  the host's own tools over the connection, as ``ansible.builtin.reboot`` does: the host
  needs a POSIX shell and those tools, no Python.

The clients of the tools (``_rpm_ostree.RpmOstreeClient``, ``_bootc.BootcClient``,
``_commands.run_command``) take either, so the same parsing and decisions serve both.
Over a connection every command is one shell line built by :func:`shell_command`, the one
place where an argv is quoted; no value reaches the host's shell any other way. The file
operations are small POSIX shell scripts run through :meth:`Host.run` with the paths as their
arguments and the data on stdin, so a module and an action plugin do the same thing, with the
host's own coreutils and util-linux ``flock``.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re

# Every tool runs in the C locale, so that its messages are the ones the parsers know.
ENVIRON = {"LC_ALL": "C"}

# What POSIX sh passes through unquoted: letters, digits and a few marks that are never special
# (not "=": a first word with one would be an assignment).
_SAFE = re.compile(r"[A-Za-z0-9_@%+:,./-]+")


def quote(value):
    """``value`` as one word of a POSIX shell command line, whatever it holds.

    A word of safe characters stays as it is; anything else goes in single quotes, where the
    shell expands nothing (``$``, backticks, ``\\``, globs, newlines are all literal), and each
    single quote of the value becomes ``'"'"'``.
    """
    value = str(value)
    if value and _SAFE.fullmatch(value):
        return value
    return "'" + value.replace("'", "'\"'\"'") + "'"


def shell_command(argv, environ=None):
    """The shell line that runs ``argv`` (a non-empty list of strings) with ``environ`` (default ENVIRON).

    The variables are the shell's own assignments before the command (``LC_ALL=C 'rpm-ostree' ...``),
    which every POSIX shell knows; each word of argv is one quoted word.
    """
    if isinstance(argv, (str, bytes)) or not argv:
        raise TypeError("argv must be a non-empty list of strings")
    environ = ENVIRON if environ is None else environ
    for key in environ:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            raise ValueError("%r is not a shell variable name" % key)
    assignments = ["%s=%s" % (key, quote(value)) for key, value in sorted(environ.items())]
    return " ".join(assignments + [quote(word) for word in argv])


class HostFileError(Exception):
    """A file operation on the host was refused or failed; ``str()`` is its cause, ``path`` the file."""

    def __init__(self, path, cause, refused=False):
        super().__init__(cause)
        self.path = path
        self.refused = refused


# A shell function: status 3 (and the cause on stderr) when one of its arguments exists and is not a
# regular file (a symlink, a directory, a device).
_REGULAR = r"""
regular() {
  for f in "$@"; do
    if [ -L "$f" ] || { [ -e "$f" ] && [ ! -f "$f" ]; }; then printf '%s is not a regular file\n' "$f" >&2; return 3; fi
  done
}
"""

# $1 the file, then the files that must be regular files or missing as well (a lock beside it).
# Exit 4: the file is missing; 3: one of them is not a regular file; else cat's.
READ_SCRIPT = _REGULAR + r"""
regular "$@" || exit 3
[ -e "$1" ] || exit 4
exec cat -- "$1"
"""


def digest_of(data):
    """What REPLACE_SCRIPT compares: the sha256 of ``data`` (bytes), or ``-`` for no file."""
    return "-" if data is None else hashlib.sha256(data).hexdigest()


# What the one writer's exit statuses mean (the scripts that read and remove a file use 3 and 4 alike).
EXIT_NOT_REGULAR = 3
EXIT_MISSING = 4
EXIT_CHANGED = 5
EXIT_MOUNT = 7

# The one compare-and-swap writer of a host's files. $1 the file, $2 the sha256 of the content the caller read
# (- for no file), $3 the lock file ('' to lock the file's directory, so that no lock file is left beside it), $4
# the new file's mode in octal ('' to keep the original's mode, owner when root, and SELinux label), $5 non-empty
# when the file may be missing (its directory is then made, 0700, when missing), $6 non-empty to keep a backup,
# $7 non-empty to make the mount that holds the file writable first (run under UNSHARE: only in this private
# mount namespace); the new content on stdin.
#
# The new content goes to a temporary file (mktemp) beside the file, with its mode. Then, under an exclusive
# flock of the lock, only if the file is still a regular file holding what the caller read (else exit 5: read
# again and decide again), the backup is made (a new name, never an existing file), both are synced, the
# temporary file is renamed over the file and the directory synced. Stdout: the backup's path (an empty line
# for none). Exit 3: the file or its lock is not a regular file (stderr: "<it> is not a regular file", then
# what stat -c %F calls it); 4: the file is missing (stat's message) and may not be; 7: the mount could not be
# made writable (stderr: the mount point, then the cause); else 1 with the tool's message. On every failure
# the file is left as it was and neither the temporary file nor the backup remains.
REPLACE_SCRIPT = r"""
p=$1 want=$2 lock=$3 mode=$4 missing=$5 backup=$6 remount=$7
tmp='' bak=''
fail() { rm -f -- ${tmp:+"$tmp"} ${bak:+"$bak"}; exit "$1"; }
regular() {
  # The shell's own tests first (no process): stat only says what a file that is not one is, or why it is missing.
  if [ -f "$1" ] && [ ! -L "$1" ]; then return 0; fi
  if [ -n "$2" ] && [ ! -e "$1" ] && [ ! -L "$1" ]; then return 1; fi
  kind=$(stat -c %F -- "$1") || return 1
  case $kind in
    "regular file"|"regular empty file") ;;
    *) printf '%s is not a regular file\n%s\n' "$1" "$kind" >&2; fail 3 ;;
  esac
}
attributes() {
  if [ -n "$mode" ]; then chmod -- "$mode" "$1"; return; fi
  chmod --reference="$p" -- "$1" || return 1
  if [ "$(id -u)" = 0 ]; then chown --reference="$p" -- "$1" || return 1; fi
  chcon --reference="$p" -- "$1" 2>/dev/null || :
}
case $p in
  */*) dir=${p%/*} base=${p##*/}; [ -n "$dir" ] || dir=/ ;;
  *) dir=. base=$p ;;
esac
if [ -n "$remount" ]; then
  point=$(findmnt -n -o TARGET -T "$dir") && [ -n "$point" ] || { printf '%s\nno mount holds it\n' "$dir" >&2; exit 7; }
  # A bind remount clears the per-mount flags it is not given (or is refused clearing a locked one): keep them.
  keep=''
  opts=$(findmnt -n -o VFS-OPTIONS -T "$dir") || opts=
  set -f; IFS=,
  for o in $opts; do
    case $o in nosuid|nodev|noexec|noatime|nodiratime|relatime) keep=$keep,$o ;; esac
  done
  unset IFS; set +f
  why=$(mount -o "remount,bind,rw$keep" -- "$point" 2>&1) || { printf '%s\n%s\n' "$point" "$why" >&2; exit 7; }
fi
regular "$p" "$missing" || [ -n "$missing" ] || fail 4
[ -z "$lock" ] || regular "$lock" 1 || :
if [ ! -d "$dir" ]; then mkdir -p -m 0700 -- "$dir" || exit 1; fi
umask 077
tmp=$(mktemp -- "$dir/.$base.XXXXXX") || fail 1
cat > "$tmp" && attributes "$tmp" || fail 1
if [ -n "$lock" ]; then command exec 9>>"$lock"; else command exec 9<"$dir"; fi || fail 1
flock -x 9 || fail 1
if regular "$p" "$missing"; then
  have=$(sha256sum < "$p") || fail 1
  have=${have%% *}
else
  [ -n "$missing" ] || fail 4
  have=-
fi
[ "$have" = "$want" ] || fail 5
if [ -n "$backup" ] && [ "$have" != - ]; then
  stamp=$(date -u +%Y%m%dT%H%M%S.%6NZ) || fail 1
  name=$p.$stamp.bak n=0
  while [ -e "$name" ] || [ -L "$name" ]; do
    n=$((n + 1))
    name=$p.$stamp.bak.$n
  done
  (set -C; : > "$name") || fail 1
  bak=$name
  cat -- "$p" > "$bak" && attributes "$bak" || fail 1
fi
sync -- "$tmp" ${bak:+"$bak"} 2>/dev/null || sync
mv -f -T -- "$tmp" "$p" || fail 1
tmp=''
sync -- "$dir" 2>/dev/null || sync
printf '%s\n' "$bak"
"""

# The private mount namespace REPLACE_SCRIPT runs in when it makes the file's mount writable (as rpm-ostree
# writes under a read-only /sysroot): its mounts private, so that nothing it remounts propagates back.
UNSHARE = ["unshare", "-m", "--propagation", "private"]


def _flag(value):
    return "1" if value else ""


def replace_argv(path, expected, mode=None, lock=None, missing=False, backup=False, remount=False):
    """The argv of the one compare-and-swap writer (:data:`REPLACE_SCRIPT`), the new content to go on its stdin.

    ``path`` is replaced only if it still holds ``expected`` (the bytes read before, None for no file): under
    an exclusive flock of the file ``lock``, else of the file's directory; made ``mode`` (an int), else with the
    original's mode, owner and SELinux label; ``missing``: the file may not be there (then ``mode`` is needed);
    ``backup``: what it held is kept in ``<path>.<UTC time>.bak``; ``remount``: in a private mount namespace
    (:data:`UNSHARE`) where the mount that holds it is made writable first.
    """
    if missing and mode is None:
        raise ValueError("a file that may be missing needs a mode: there may be no original to take it from")
    args = [path, digest_of(expected), lock or "", "" if mode is None else "%o" % mode, _flag(missing),
            _flag(backup), _flag(remount)]
    return (list(UNSHARE) if remount else []) + ["sh", "-c", REPLACE_SCRIPT, "sh"] + args


# Not the one writer: a file the host already has is put in place for a while and what was there put back
# (RESTORE_SCRIPT), with no content read before to compare with; the job script (_job) runs it as well.
# $1 the file to put in place, $2 where, $3 where the file that was there is kept meanwhile. Exit 6: $1
# is $2 already (nothing to do); 3: $2 is not a regular file; else the copy, 0600, renamed into place.
PLACE_SCRIPT = _REGULAR + r"""
src=$1 dst=$2 keep=$3
[ "$src" -ef "$dst" ] && exit 6
regular "$dst" "$keep" || exit 3
[ -f "$src" ] || { printf '%s is not a regular file\n' "$src" >&2; exit 3; }
dir=$(dirname -- "$dst") || exit 1
mkdir -p -- "$dir" || exit 1
umask 077
rm -f -- "$keep"
if [ -e "$dst" ]; then cp -p -- "$dst" "$keep" || exit 1; fi
tmp="$dst.$$.tmp"
cp -- "$src" "$tmp" && chmod 600 "$tmp" && mv -f -- "$tmp" "$dst" || { rm -f -- "$tmp" "$keep"; exit 1; }
"""

# $1 the file to remove. Exit 4: it is not there; 3: it is not a regular file (nothing removed).
REMOVE_SCRIPT = _REGULAR + r"""
regular "$1" || exit 3
[ -e "$1" ] || exit 4
rm -f -- "$1"
"""

# What PLACE_SCRIPT's third argument is: the name beside the target where what was there is kept meanwhile.
KEEP_SUFFIX = ".fleetos-kept"

# $1 the file PLACE_SCRIPT put in place, $2 where it kept what was there: put that back, or remove $1.
RESTORE_SCRIPT = r"""
if [ -e "$2" ]; then mv -f -- "$2" "$1"; else rm -f -- "$1"; fi
"""


def error_line(err, rc):
    """What a failed host command says, for a message: the last line of its stderr (without a final
    period), else its exit status."""
    lines = (err or "").strip().splitlines()
    return lines[-1].strip().rstrip(".") if lines else "exit status %d" % rc


# $1 a marker unique to this run, then the commands, each a shell line (shell_command) after its condition and a
# colon: "-" (always), or "N+" / "N-" (only when the command N, counted from 1, ran and exited 0 / ran and did not).
# Each command runs in a subshell, its stdin empty; its output goes to stdout and its messages to stderr, each
# between the lines "MARK N BEGIN" and "MARK N END RC" (a newline before each, so that an output without a final
# newline stays as it was): split_output() takes them apart.
BATCH_SCRIPT = r"""
m=$1; shift; i=0
for c do
  i=$((i + 1)); when=${c%%:*}; c=${c#*:}
  if [ "$when" != - ]; then
    n=${when%?}; eval "got=\${r_$n-}"
    case $when in
      *+) [ "$got" = 0 ] || continue ;;
      *) [ -n "$got" ] && [ "$got" != 0 ] || continue ;;
    esac
  fi
  printf '\n%s %s BEGIN\n' "$m" "$i"; printf '\n%s %s BEGIN\n' "$m" "$i" >&2
  (eval "$c") </dev/null
  r=$?; eval "r_$i=$r"
  printf '\n%s %s END %s\n' "$m" "$i" "$r"; printf '\n%s %s END %s\n' "$m" "$i" "$r" >&2
done
exit 0
"""


def batch_argv(marker, commands):
    """The argv that runs ``commands`` (``[(argv, when)]``, ``when`` None or ``(index, ok)`` of an earlier command:
    only after it exited 0, ``ok`` True, or non-zero) in one host command, with :data:`BATCH_SCRIPT`."""
    lines = []
    for argv, when in commands:
        condition = "-" if when is None else "%d%s" % (when[0] + 1, "+" if when[1] else "-")
        lines.append("%s:%s" % (condition, shell_command(list(argv))))
    return ["sh", "-c", BATCH_SCRIPT, "sh", marker] + lines


def chain(*groups):
    """The commands of several :meth:`Host.prefetch` lists as one: the conditions of each group name its own
    commands (counted from 0 in the group)."""
    commands = []
    for group in groups:
        base = len(commands)
        commands.extend((argv, None if when is None else (when[0] + base, when[1])) for argv, when in group)
    return commands


# $1 a name: the shell's word for it (a path, for an executable file); exit 1 when the shell knows none.
WHICH_SCRIPT = 'command -v -- "$1"'


def which_argv(name):
    """The argv that asks the host's shell where the executable ``name`` is (:data:`WHICH_SCRIPT`)."""
    return ["sh", "-c", WHICH_SCRIPT, "sh", name]


def read_file_argv(path, siblings=()):
    """The argv of :meth:`Host.read_file` (:data:`READ_SCRIPT`): what a prefetch of the file runs."""
    return ["sh", "-c", READ_SCRIPT, "sh", path] + list(siblings)


def split_output(output, marker):
    """``{index: (rc, output)}`` of the commands of a :data:`BATCH_SCRIPT` run that ran to their end, from its
    stdout or stderr ``output`` (bytes); ``marker`` (text) as it was given."""
    head = b"\n" + marker.encode("ascii") + b" "
    found, pos = {}, 0
    while True:
        at = output.find(head, pos)
        if at < 0:
            return found
        line_end = output.find(b"\n", at + len(head))
        words = output[at + len(head):line_end].split() if line_end >= 0 else []
        if len(words) != 2 or words[1] != b"BEGIN" or not words[0].isdigit():
            return found
        tail = head + words[0] + b" END "
        end = output.find(tail, line_end)
        rc_end = output.find(b"\n", end + len(tail)) if end >= 0 else -1
        rc = output[end + len(tail):rc_end] if rc_end >= 0 else b""
        if not rc.isdigit():
            return found
        found[int(words[0]) - 1] = (int(rc), output[line_end + 1:end])
        pos = rc_end


class Host:
    """What a host-side step needs of the host. Subclasses run commands their own way."""

    #: Whether the step runs on the host itself (a module), so that Python's own I/O is the host's.
    local = False
    #: Whether a tool given by its bare name is found by the host's shell when it runs (rc 127 when it
    #: is missing), so that no look-up of its own is needed first: one command instead of two.
    finds_on_run = False

    def run(self, argv, data=None, binary=False):
        """Run ``argv`` with ``LC_ALL=C``, ``data`` (bytes or text) on stdin; -> ``(rc, stdout, stderr)``.

        ``stdout`` is bytes, exactly as the tool wrote them, when ``binary``; else text. ``stderr``
        is text. A command that cannot start is rc 127, as the shell reports it.
        """
        raise NotImplementedError

    def prefetch(self, commands):
        """Run ``commands`` (``[(argv, when)]``, as :func:`batch_argv` takes them) ahead, where one host command
        costs more than the work it runs: each result then answers the first :meth:`run` of its argv without
        stdin. A host that runs its commands itself (a module) runs them when they are asked for."""

    def forget(self):
        """Drop what :meth:`prefetch` read and no command asked for yet: the host may have changed since."""

    def which(self, name):
        """The path of the executable ``name`` found in the host's PATH, or None."""
        raise NotImplementedError

    def is_executable(self, path):
        """True when ``path`` is an executable file on the host."""
        raise NotImplementedError

    def machine(self):
        """The host's machine name, as ``uname -m`` prints it (``x86_64``, ``aarch64``)."""
        raise NotImplementedError

    def test(self, *expression):
        """Whether ``test EXPRESSION`` (the words of test(1): ``"-f", path``) holds on the host."""
        return self.run(["test"] + list(expression))[0] == 0

    @contextlib.contextmanager
    def placed_file(self, source, target):
        """Put a copy of the host's file ``source`` at ``target`` (0600) for the duration of the block: what was
        at ``target`` is put back, or the copy removed, on every path. Nothing is done when they are one file.
        HostFileError when ``target`` is not a regular file or the copy failed."""
        keep = target + KEEP_SUFFIX
        if self._script(PLACE_SCRIPT, [source, target, keep], target, codes=(0, 6))[0] == 6:
            yield
            return
        try:
            yield
        finally:
            self.run(["sh", "-c", RESTORE_SCRIPT, "sh", target, keep])

    def read_file(self, path, siblings=()):
        """The bytes of the regular file ``path``, or None when it does not exist.

        HostFileError (refused) when ``path`` or one of ``siblings`` exists and is not a regular file.
        """
        rc, out = self._script(READ_SCRIPT, [path] + list(siblings), path, binary=True, codes=(0, 4))
        return out if rc == 0 else None

    def replace_file(self, path, data, expected, mode=0o600, lock=None):
        """Write ``data`` (bytes) to ``path`` atomically, under an exclusive flock of ``lock`` (default
        ``<path>.lock``), if the file still holds ``expected`` (the bytes read before, None for no file).

        -> True when written, False when the file changed meanwhile (read it again and decide again).
        The directory is made (0700) when missing. HostFileError when the file or its lock is not a
        regular file (refused, nothing changed) or the write failed. The one writer
        (:func:`replace_argv`) with a lock file, the mode given, the file allowed to be missing.
        """
        argv = replace_argv(path, expected, mode=mode, lock=lock or path + ".lock", missing=True)
        return self._command(argv, path, data=data, codes=(0, EXIT_CHANGED))[0] == 0

    def remove_file(self, path):
        """Remove the regular file ``path``; -> False when it was not there.

        HostFileError (refused, nothing removed) when ``path`` is not a regular file.
        """
        return self._script(REMOVE_SCRIPT, [path], path, codes=(0, 4))[0] == 0

    def mode(self, path):
        """The permission bits of ``path`` on the host (``stat -c %a``), or None when it does not exist."""
        rc, out, _err = self.run(["stat", "-c", "%a", "--", path])
        return int(out.strip(), 8) if rc == 0 and out.strip() else None

    def _script(self, script, args, path, data=None, binary=False, codes=(0,)):
        """Run one of the file scripts with ``args``, as :meth:`_command` does."""
        return self._command(["sh", "-c", script, "sh"] + list(args), path, data=data, binary=binary, codes=codes)

    def _command(self, argv, path, data=None, binary=False, codes=(0,)):
        """Run the file script ``argv``; -> (rc, stdout) for the exit ``codes`` the caller reads, else
        HostFileError about ``path``: refused for exit 3 (not a regular file), whose cause is the first line of
        stderr, which names the file (the one writer says on a second line what it is); else the last line."""
        rc, out, err = self.run(argv, data=data, binary=binary)
        if rc in codes:
            return rc, out
        lines = err.strip().splitlines()
        cause = (lines[0] if rc == EXIT_NOT_REGULAR else lines[-1]) if lines else "exit status %d" % rc
        raise HostFileError(path, cause, refused=rc == EXIT_NOT_REGULAR)


class ModuleHost(Host):
    """The host a module runs on, through its AnsibleModule."""

    local = True

    def __init__(self, module):
        self.module = module

    def run(self, argv, data=None, binary=False):
        kwargs = dict(environ_update=dict(ENVIRON), expand_user_and_vars=False)
        if binary:
            kwargs["encoding"] = None
        if data is not None:
            kwargs.update(data=data, binary_data=True)
        return self.module.run_command(list(argv), **kwargs)

    def which(self, name):
        return self.module.get_bin_path(name, required=False)

    def is_executable(self, path):
        return os.path.isfile(path) and os.access(path, os.X_OK)

    def machine(self):
        return os.uname().machine


def as_host(value):
    """``value`` as a :class:`Host`: itself, or the host of the AnsibleModule it is."""
    return value if isinstance(value, Host) else ModuleHost(value)
