# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# This is a private module_util of fleetos.layering: its interface may change at any
# time and it is not meant to be used by other collections.

"""The one command runner of the collection, and finding the tools it runs.

Every external tool (rpm-ostree, skopeo, ostree) runs through :func:`run_command` on a
host (``_host.Host``: the module's own, or an action plugin's connection): an argv list,
``LC_ALL=C``, no ``$``/``~`` expansion of the arguments, and on failure
a domain exception with a one-sentence ``msg`` and ``cmd``/``rc``/``stdout``/``stderr``
details. It never calls ``fail_json``. :class:`ToolClient` is the base of the clients of one
tool (rpm-ostree, bootc, skopeo): ``run(args, action, ok_rcs)`` in one order, and one retry policy.
"""

from __future__ import annotations

import re
import time

from ansible_collections.fleetos.layering.plugins.module_utils._errors import CommandError, InvalidInputError
from ansible_collections.fleetos.layering.plugins.module_utils.host._host import as_host
from ansible_collections.fleetos.layering.plugins.module_utils.images._image_ref import shown

# The shell's status for a command it could not find (POSIX).
NOT_FOUND = 127

# The retry options of every module that talks to a registry or to rpm-ostree
# (documented by the fleetos.layering.retries doc fragment).
RETRY_ARGS = dict(
    retries=dict(type="int", default=3),
    retry_delay=dict(type="int", default=5),
)

# containers-image tools (skopeo, rpm-ostree's image code) log errors as: time="..." level=fatal msg="..."
_LOGRUS_RE = re.compile(r'time="[^"]*" level=\w+ msg="(?P<msg>.*)"\s*$')
_LOGRUS_BARE_RE = re.compile(r'^level=\w+ msg="(?P<msg>.*)"\s*$')


def strip_decoration(line):
    """``line`` without an ``error:`` prefix and without logrus ``time=... level=... msg="..."`` decoration."""
    line = line.strip()
    if line.startswith("error: "):
        line = line[len("error: "):]
    for regex in (_LOGRUS_RE, _LOGRUS_BARE_RE):
        line = regex.sub(lambda match: match.group("msg").replace('\\"', '"'), line)
    return line


def first_line(text):
    """The first non-empty line of a tool's output, without ``error:`` and log decoration."""
    for line in to_text(text).splitlines():
        if line.strip():
            return strip_decoration(line)
    return ""


def to_text(value):
    """Output of a command as text (bytes are decoded as UTF-8, undecodable bytes replaced)."""
    if value is None:
        return ""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return value


def default_cause(stdout, stderr, rc):
    """The first line of stderr, else of stdout, else the exit status."""
    return first_line(stderr) or first_line(stdout) or "exit status %d" % rc


def _is_error_line(line):
    return bool(re.match(r"(?i)error\b", line) or re.search(r"\blevel=(error|fatal)\b", line))


def last_cause(stdout, stderr, rc):
    """The cause a command gives in its combined output (a job's, where stdout and stderr are one): its last
    line that says error (``error: ...``, a logrus ``level=fatal``), else its last line, without decoration;
    else the exit status. The last, not the first: progress lines come before the error."""
    lines = [line.strip() for line in (to_text(stdout) + "\n" + to_text(stderr)).splitlines() if line.strip()]
    errors = [line for line in lines if _is_error_line(line)]
    line = (errors or lines or [""])[-1]
    return strip_decoration(line) if line else "exit status %d" % rc


def run_command(host, argv, action, ok_rcs=(0,), binary=False, data=None, error=CommandError, describe=None):
    """Run ``argv`` on ``host`` (a ``_host.Host``, or the AnsibleModule of a module on the host);
    -> ``(rc, stdout, stderr)``.

    ``stdout`` is bytes, exactly as the tool wrote them, when ``binary`` (``stderr`` is
    always text). ``data`` goes to stdin as given (no newline is added). An exit code
    outside ``ok_rcs`` raises ``error`` with the message ``Failed to ACTION: CAUSE.``,
    the cause from ``describe(stdout, stderr, rc)`` (default: :func:`default_cause`).
    """
    argv = list(argv)
    host = as_host(host)
    rc, out, err = host.run(argv, data=data, binary=binary)
    return checked(host, argv, action, rc, out, to_text(err), ok_rcs=ok_rcs, error=error, describe=describe)


def checked(host, argv, action, rc, out, err, ok_rcs=(0,), error=CommandError, describe=None):
    """What :func:`run_command` makes of ``argv``'s exit status ``rc`` and output once it has run on ``host``
    (also detached, as a job: ``_job``); -> ``(rc, out, err)``, or the error it raises."""
    if rc == NOT_FOUND and host.finds_on_run and "/" not in argv[0]:
        raise CommandError("Failed to %s: the host has no '%s' command in its PATH (exit status %d): install it or "
                           "give the path of the executable." % (action, shown(argv[0], 80), rc),
                           cmd=argv, rc=rc, stdout=to_text(out), stderr=err)
    if rc in ok_rcs:
        return rc, out, err
    cause = (describe or default_cause)(out, err, rc)
    raise error("Failed to %s: %s." % (action, cause.rstrip(".")),
                cmd=argv, rc=rc, stdout=to_text(out), stderr=err)


def find_executable(host, executable, name, option):
    """The path of ``name`` on ``host``: ``executable`` when it is a path, else looked up in PATH.

    ``option`` is the module option that sets it, named in the error when nothing is
    found, or when the path given is not an executable file.
    """
    host = as_host(host)
    if not executable and host.finds_on_run:
        # The host's shell finds it when it runs; run_command names a missing one.
        return name
    if executable and "/" in executable:
        if not host.is_executable(executable):
            raise InvalidInputError("%s '%s' does not exist or is not an executable file: expected the path of %s."
                                    % (option, shown(executable, 80), name))
        return executable
    binary = host.which(executable or name)
    if not binary:
        raise CommandError("Failed to find the %s executable '%s' on the target: install %s or set %s."
                           % (name, shown(executable or name, 80), name, option))
    return binary


def retrying(attempt, errors, retries, retry_delay, sleep, accept=None, gave_up=None):
    """The one retry policy: ``attempt(attempts)`` (the runs so far, this one included), tried again after
    ``retry_delay`` seconds (``sleep``), ``retries`` times at most, while it raises one of ``errors`` that
    ``accept(exc)`` takes (default: any); -> its value. After the last try, ``gave_up(exc, attempts)`` is raised in
    its place when given."""
    attempts = 0
    while True:
        attempts += 1
        try:
            return attempt(attempts)
        except errors as exc:
            if accept is not None and not accept(exc):
                raise
            if attempts > retries:
                if gave_up is None:
                    raise
                raise gave_up(exc, attempts) from None
        sleep(retry_delay)


class ToolClient:
    """A tool run on a host (``_host.Host``, or the AnsibleModule of a module on the host) through
    :func:`run_command`. A subclass names the tool (``tool``: its executable and its messages); ``option`` is the
    module option that sets the executable. ``retries`` and ``retry_delay`` are what :meth:`retrying` gives
    :func:`retrying`."""

    tool = None

    def __init__(self, host, executable=None, option="executable", retries=0, retry_delay=5, sleep=None):
        self.host = as_host(host)
        self.binary = find_executable(self.host, executable, self.tool, option)
        self.retries = max(0, int(retries or 0))
        self.retry_delay = max(0, int(retry_delay or 0))
        self._sleep = sleep or time.sleep

    def run(self, args, action=None, ok_rcs=(0,)):
        """Run the tool with ``args``; -> (rc, stdout, stderr). An exit code outside ``ok_rcs`` raises (see
        :meth:`check_result`); ``action`` names what failed (default ``run TOOL SUBCOMMAND``)."""
        argv = [self.binary] + list(args)
        rc, out, err = self.host.run(argv)
        return self.check_result(argv, rc, out, to_text(err), ok_rcs, action or "run %s %s" % (self.tool, args[0]))

    def check_result(self, argv, rc, out, err, ok_rcs, action, describe=None):
        """What :meth:`run` makes of ``argv``'s exit status and output once it has run (here, or detached as a
        job): -> (rc, stdout, stderr), or the CommandError it raises."""
        return checked(self.host, argv, action, rc, out, err, ok_rcs=ok_rcs, describe=describe)

    def retrying(self, attempt, errors, accept=None, gave_up=None):
        """:func:`retrying` with this client's ``retries``, ``retry_delay`` and sleep."""
        return retrying(attempt, errors, self.retries, self.retry_delay, self._sleep, accept=accept, gave_up=gave_up)
