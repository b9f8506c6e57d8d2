# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Action plugin of fleetos.layering.oscontainer_rebase: the options checked as given on the controller
(plugin_utils/host/_module_action.py), then the module run on the host. It needs a Python interpreter there,
the only one of the collection's host-side modules that does. On a host without one, the failure says so
in one sentence instead of the shell's "not found"."""

from __future__ import annotations

from ansible_collections.fleetos.layering.plugins.module_utils.host import _oscontainer
from ansible_collections.fleetos.layering.plugins.plugin_utils.host._module_action import ModuleAction

_MISSING = ("not found", "No such file or directory")


def missing_interpreter(result):
    """Whether a module result is the host's shell failing to start the module's interpreter."""
    if not result.get("failed") or result.get("rc") not in (126, 127):
        return False
    said = "%s\n%s" % (result.get("module_stderr") or "", result.get("module_stdout") or "")
    return any(words in said for words in _MISSING)


class ActionModule(ModuleAction):
    ARGUMENT_SPEC = _oscontainer.ARGUMENT_SPEC

    def module_result(self, result, task_vars):
        if not missing_interpreter(result):
            return result
        interpreter = (task_vars.get("ansible_python_interpreter")
                       or (result.get("ansible_facts") or {}).get("discovered_interpreter_python") or "Python")
        host = task_vars.get("inventory_hostname", "the host")
        return dict(failed=True, changed=False, rc=result.get("rc"), module_stderr=result.get("module_stderr"),
                    msg="oscontainer_rebase needs a Python interpreter on the host and %s has none (%s was "
                        "not found): a legacy oscontainer is unpacked by a Python module on the host; "
                        "bootable images need none (fleetos.layering.rpm_ostree_rebase)." % (host, interpreter))
