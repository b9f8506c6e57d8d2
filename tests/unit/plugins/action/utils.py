# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Shared harness for the action plugin unit tests: an action plugin of the collection, built as
Ansible's task executor builds it, around a fake task and connection."""

from __future__ import annotations

from unittest.mock import MagicMock

from ansible.playbook.task import Task


def new_action(plugin_module, args, check_mode=False, connection=None):
    """``plugin_module.ActionModule`` for a task with ``args``; -> the action."""
    task = MagicMock(Task)
    task.args = args
    task.async_val = 0
    task.check_mode = check_mode
    if connection is None:
        connection = MagicMock()
    connection._shell.tmpdir = None
    action = plugin_module.ActionModule(task, connection, MagicMock(), MagicMock(), MagicMock(), MagicMock())
    # What ansible-core's plugin loader sets: 2.16 names the plugin with it when a task gives an unknown option.
    action._load_name = "fleetos.layering." + getattr(plugin_module, "__name__", "action").rsplit(".", 1)[-1]
    return action


def fake_host(monkeypatch):
    """Fake the connection of the collection's host-side action plugins (plugin_utils/host/_remote.py).

    Each shell line an action sends is split back into its words as a POSIX shell would
    (shlex), so a test sees the exact argv the host runs. ``state["calls"]`` records
    ``(argv, {"env": {...}, "data": stdin})`` of every command but the plugin's own look-ups
    (``command -v``, ``uname -m``, ``test``: their argv in ``state["lookups"]``), which are
    answered from ``state["which"]``
    (name -> path; a name not there is found at /usr/bin/NAME unless its path is None),
    ``state["machine"]``, and ``test`` and ``stat`` run here. The file scripts of ``_host`` (read, replace,
    place, restore, remove) run for real here too, on the test's own files (their arguments in ``state["files"]``);
    but a replace that locks the file's directory (the origin editor's) is a command like the others, answered
    from ``state["results"]`` or a test's hook.
    A batch of commands (``Host.prefetch``) is one host command: ``state["batches"]`` records its lines, and each
    of its commands is answered as above; ``state["sent"]`` holds the lines sent to the host (a batch is one). ``state["results"]`` holds the
    ``(rc, stdout, stderr)`` of the other commands, in order; ``state["hooks"]`` maps argv[1]
    to a callable run first, as for the modules' fake.
    """
    import shlex

    from ansible.plugins.action import ActionBase

    from ansible_collections.fleetos.layering.plugins.module_utils.host import _host

    state = {"calls": [], "results": [], "hooks": {}, "which": {}, "machine": "x86_64", "lines": [], "lookups": [],
             "files": [], "batches": [], "sent": []}

    def batch(_action, marker, lines):
        """_host.BATCH_SCRIPT, here: each command as execute() answers it, its output framed as the script frames it."""
        rcs, out, err = {}, "", ""
        for index, line in enumerate(lines, 1):
            when, line = line.split(":", 1)
            if when != "-":
                got = rcs.get(int(when[:-1]))
                if got is None or (got == 0) != (when[-1] == "+"):
                    continue
            done = answer(line)
            rcs[index] = done["rc"]
            out += "\n%s %d BEGIN\n%s\n%s %d END %d\n" % (marker, index, done["stdout"], marker, index, done["rc"])
            err += "\n%s %d BEGIN\n%s\n%s %d END %d\n" % (marker, index, done["stderr"], marker, index, done["rc"])
        return {"rc": 0, "stdout": out, "stderr": err}

    def execute(self, cmd, sudoable=True, in_data=None, executable=None, encoding_errors=None, chdir=None):
        state["sent"].append(cmd)
        words = shlex.split(cmd)
        if words[1:4] == ["sh", "-c", _host.BATCH_SCRIPT]:
            # One host command that runs several (Host.prefetch): each is recorded as if it ran alone.
            state["batches"].append(words[6:])
            return batch(self, words[5], words[6:])
        return answer(cmd, in_data)

    def answer(cmd, in_data=None):
        state["lines"].append(cmd)
        words = shlex.split(cmd)
        env = {}
        while words and "=" in words[0] and words[0].split("=", 1)[0].isidentifier():
            key, value = words.pop(0).split("=", 1)
            env[key] = value
        if words[:3] == ["sh", "-c", 'command -v -- "$1"'] or words == ["uname", "-m"] or words[:1] == ["test"]:
            state["lookups"].append(words)
        if words[:3] == ["sh", "-c", 'command -v -- "$1"']:
            path = state["which"].get(words[4], "/usr/bin/" + words[4])
            return {"rc": 0 if path else 1, "stdout": (path + "\n") if path else "", "stderr": ""}
        if words == ["uname", "-m"]:
            return {"rc": 0, "stdout": state["machine"] + "\n", "stderr": ""}
        if words[:1] in (["test"], ["stat"]) or (words[:2] == ["sh", "-c"] and words[2] in (
                _host.READ_SCRIPT, _host.PLACE_SCRIPT, _host.RESTORE_SCRIPT, _host.REMOVE_SCRIPT)) or (
                words[:3] == ["sh", "-c", _host.REPLACE_SCRIPT] and words[6]):
            # test(1), stat(1) and the file scripts run for real, on the test's own files.
            import subprocess
            if words[0] not in ("test", "stat"):
                state["files"].append(words[4:])
            proc = subprocess.run(words, input=in_data, stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
            return {"rc": proc.returncode, "stdout": proc.stdout.decode("utf-8", "surrogateescape"),
                    "stderr": proc.stderr.decode("utf-8", "replace")}
        state["calls"].append((words, {"env": env, "data": in_data}))
        hook = state["hooks"].get(words[1]) if len(words) > 1 else None
        if hook:
            hook(words)
        rc, out, err = state["results"].pop(0)
        return {"rc": rc, "stdout": out, "stderr": err}

    monkeypatch.setattr(ActionBase, "_low_level_execute_command", execute)
    return state


def run_action(plugin_module, args, failed=False, check_mode=False, task_vars=None):
    """Run ``plugin_module``'s action with ``args`` on a faked host (see fake_host), with ``task_vars`` as the
    host's variables; -> its result.

    The result must be failed (``failed=True``) or not, as the caller expects (``failed=None``: either)."""
    connection = MagicMock()
    connection.transport = "ssh"
    action = new_action(plugin_module, dict(args), check_mode=check_mode, connection=connection)
    result = action.run(task_vars=dict(task_vars or {}))
    assert failed is None or bool(result.get("failed")) is failed, result
    return result


def run_module_action(plugin_module, args, module_result=None, task_vars=None):
    """Run the action of a Python module (plugin_utils/host/_module_action.py) for a task with ``args``, the module's
    run faked to give ``module_result``; -> (the action's result, the keyword arguments of each module run)."""
    action = new_action(plugin_module, dict(args))
    calls = []

    def execute_module(**kwargs):
        calls.append(kwargs)
        return dict(module_result or {"changed": True})

    action._execute_module = execute_module
    return action.run(task_vars={"inventory_hostname": "node01"} if task_vars is None else task_vars), calls


def module_action_refusal(plugin_module, args):
    """The message with which the action of a Python module refuses a task with ``args``: the task failed and
    changed nothing, and the module was never sent."""
    result, calls = run_module_action(plugin_module, args)
    assert (result["failed"], result["changed"], calls) == (True, False, []), (result, calls)
    return result["msg"]
