# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# This is a private plugin_util of fleetos.layering: its interface may change at any
# time and it is not meant to be used by other collections.

"""Host-side steps without Python on the host: an action plugin runs the host's own tools over
the connection and parses and decides on the controller, as ``ansible.builtin.reboot`` does.

:class:`ConnectionHost` is the host (module_utils ``_host.Host``) of an action plugin: each
command is one shell line built by ``_host.shell_command`` and run with the connection's
become, data on its stdin. :class:`HostStep` is the whole of such a plugin but the step
itself: the options checked against the module's argument spec, the domain
errors of the shared code turned into a failed result with one sentence and its details,
anything else into one sentence and the traceback.
"""

from __future__ import annotations

import binascii
import os
import re
import traceback

from ansible.errors import AnsibleActionFail, AnsibleConnectionFailure, AnsibleError
from ansible.module_utils.common.text.converters import to_bytes, to_text
from ansible.plugins.action import ActionBase

from ansible_collections.fleetos.layering.plugins.module_utils import _params
from ansible_collections.fleetos.layering.plugins.module_utils._errors import (
    CommandError,
    FleetosError,
    InvalidInputError,
    sentence,
)
from ansible_collections.fleetos.layering.plugins.module_utils.host._host import (
    Host,
    batch_argv,
    shell_command,
    split_output,
    which_argv,
)


class BecomeError(CommandError):
    """The connection's become (sudo) refused to run a command on the host: a missing or wrong become
    password, a user without the right. A CommandError, so that the shared code's handlers report it
    as a failed command; ``str()`` names the host and the cause."""


# What sudo prints when it authenticated the user but its policy refuses the command: the connection
# reports no error then (the command "ran" and failed), so the refusal is known by sudo's own sentence.
_SUDO_REFUSED = re.compile(r"^(?:sudo: )?(\S+ is not in the sudoers file|Sorry, user \S+ (?:is not allowed to execute|may not run sudo)\b.*)")


def become_cause(action, exc):
    """The sentence part saying that ``action``'s become refused a command on its host, or None when the
    task does not use become (the error is then the connection's own)."""
    connection = action._connection
    become = getattr(connection, "become", None)
    if not become or isinstance(exc, AnsibleConnectionFailure):
        return None
    method = getattr(become, "name", None) or "become"
    method = method.rsplit(".", 1)[-1]
    try:
        user = connection.get_option("remote_user")
    except (AttributeError, KeyError):
        user = None
    user = user or action._play_context.remote_user or "the login user"
    host = getattr(action, "_fleetos_host", None) or action._play_context.remote_addr
    cause = to_text(getattr(exc, "message", None) or exc).strip().rstrip(".:").strip()
    return "%s refused to make %s root on %s (%s); give the user the right or set ansible_become_password" % (
        method, user, host, cause)


class ConnectionHost(Host):
    """The host of an action plugin, reached over its connection."""

    finds_on_run = True

    def __init__(self, action):
        self._action = action
        self._machine = None
        # What prefetch() read: {argv tuple: (rc, stdout bytes, stderr text)}, each answered once.
        self._fetched = {}
        # ssh gives a command without stdin a tty by default (use_tty): its output would come back with
        # \r\n line ends and the login's messages. Off for this task's connection only: a tool's output
        # must come back as it wrote it.
        connection = action._connection
        try:
            if connection.has_option("use_tty") and connection.get_option("use_tty"):
                connection.set_option("use_tty", False)
        except (AttributeError, KeyError):
            pass

    def prefetch(self, commands):
        commands = [(list(argv), when) for argv, when in commands]
        marker = "fleetos-%s" % binascii.hexlify(os.urandom(8)).decode("ascii")
        rc, out, err = self.run(batch_argv(marker, commands), binary=True)
        if rc != 0:
            return
        outs = split_output(out, marker)
        errs = split_output(to_bytes(err, errors="surrogateescape"), marker)
        self._fetched = {}
        for index, (argv, _when) in enumerate(commands):
            if index in outs and index in errs:
                self._fetched[tuple(argv)] = (outs[index][0], outs[index][1],
                                              to_text(errs[index][1], errors="replace"))

    def forget(self):
        self._fetched = {}

    def run(self, argv, data=None, binary=False):
        fetched = self._fetched.pop(tuple(argv), None) if data is None else None
        if fetched is not None:
            rc, out, err = fetched
            return rc, (out if binary else to_text(out, errors="replace")), err
        line = shell_command(list(argv))
        # surrogateescape keeps every byte of the output, so that binary output comes back exactly. Under
        # become the connection sends the become password first, on its own line, after sudo's prompt,
        # and the data only once the command runs: the two never mix.
        try:
            result = self._action._low_level_execute_command(
                line, in_data=to_bytes(data, errors="surrogate_or_strict") if data is not None else None,
                encoding_errors="surrogateescape")
        except AnsibleError as exc:
            cause = become_cause(self._action, exc)
            if cause is None:
                raise
            raise BecomeError(cause, cmd=list(argv)[:1]) from None
        out = result.get("stdout", "")
        err = to_text(to_bytes(result.get("stderr", ""), errors="surrogateescape"), errors="replace")
        if result.get("rc") not in (0, None) and getattr(self._action._connection, "become", None):
            refused = _SUDO_REFUSED.match(err.strip())
            if refused:
                raise BecomeError(become_cause(self._action, AnsibleError(refused.group(1).rstrip("."))),
                                  cmd=list(argv)[:1], rc=result.get("rc"), stderr=err)
        if binary:
            return result["rc"], to_bytes(out, errors="surrogateescape"), err
        return result["rc"], to_text(to_bytes(out, errors="surrogateescape"), errors="replace"), err

    def which(self, name):
        # command -v prints a builtin's or a function's bare name: only a path is an executable.
        rc, out, _err = self.run(which_argv(name))
        # One line, the path as it is (a name may end in a space): only its newline goes.
        lines = out[:-1].split("\n") if out.endswith("\n") else out.split("\n")
        path = lines[-1] if lines else ""
        return path if rc == 0 and path.startswith("/") else None

    def is_executable(self, path):
        rc, _out, _err = self.run(["test", "-f", path, "-a", "-x", path])
        return rc == 0

    def machine(self):
        if self._machine is None:
            rc, out, err = self.run(["uname", "-m"])
            if rc != 0 or not out.strip():
                raise CommandError("Failed to read the host's machine name with uname -m: %s."
                                   % (err.strip() or "exit status %d" % rc).rstrip("."),
                                   cmd=["uname", "-m"], rc=rc, stdout=out, stderr=err)
            self._machine = out.strip()
        return self._machine


def host_spec(spec):
    """``spec`` with its ``path`` options as ``str``: a path names a file on the host, and the argument
    spec would expand ``~`` and ``$VARS`` in it with the controller's environment."""
    converted = {}
    for name, option in spec.items():
        option = dict(option)
        if option.get("type") == "path":
            option["type"] = "str"
        if option.get("elements") == "path":
            option["elements"] = "str"
        if isinstance(option.get("options"), dict):
            option["options"] = host_spec(option["options"])
        converted[name] = option
    return converted


class HostStep(ActionBase):
    """An action plugin whose step runs the host's own tools over the connection.

    A subclass sets ARGUMENT_SPEC (the module's, from the module_utils its module file documents),
    WHAT (the step, for the sentence of an unexpected error: "read the rpm-ostree status") and
    writes :meth:`step`; SPEC_KWARGS holds the spec's constraints (mutually_exclusive, ...).
    """

    TRANSFERS_FILES = False
    ARGUMENT_SPEC = {}
    SPEC_KWARGS = {}
    TEXT_OPTIONS = ()
    WHAT = "run the step"
    CHECK_MODE = True

    def step(self, host, args, check_mode):
        """The step's result (a dict) on ``host``; shared code raises FleetosError for a failure."""
        raise NotImplementedError

    def task_args(self, args):
        """The task's options as the argument spec checks them (a subclass may unfold one into others);
        InvalidInputError for one that cannot be."""
        return args

    def run(self, tmp=None, task_vars=None):
        self._supports_check_mode = self.CHECK_MODE
        result = super().run(tmp, task_vars)
        # Checked as given first, as for the Python modules (_module_action): the argument spec would turn a
        # list given for a string into its Python text.
        try:
            self._task.args = self.task_args(self._task.args)
            _params.check_arguments(self.ARGUMENT_SPEC, self._task.args, self.TEXT_OPTIONS)
        except InvalidInputError as exc:
            result.update(failed=True, msg=exc.msg)
            return result
        try:
            args = self.validate_argument_spec(argument_spec=host_spec(self.ARGUMENT_SPEC), **self.SPEC_KWARGS)[1]
        except AnsibleActionFail as exc:
            # The argument spec's own sentence ("transport is remote but all of the following are missing:
            # ostree_remote"), as a module's would be.
            result.update(failed=True, msg=getattr(exc, "message", None) or str(exc))
            return result
        self._fleetos_host = (task_vars or {}).get("inventory_hostname")
        # The host's variables as they are, for a step that reads one without templating it (os_rollout_lease).
        self._fleetos_vars = task_vars
        try:
            result.update(self.step(ConnectionHost(self), args, self._task.check_mode))
        except BecomeError as exc:
            result.update(exc.details)
            result.update(failed=True, msg=sentence("Failed to %s: %s" % (self.WHAT, exc.msg)))
        except FleetosError as exc:
            result.update(exc.details)
            result.update(failed=True, msg=sentence(exc.msg))
        except AnsibleError:
            raise
        except Exception as exc:  # pylint: disable=broad-except
            result.update(failed=True, msg=sentence("Failed to %s: %s" % (self.WHAT, exc)),
                          exception=traceback.format_exc())
        return result
