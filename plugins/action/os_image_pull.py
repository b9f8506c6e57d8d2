# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Action plugin of fleetos.layering.os_image_pull (documented in plugins/modules/os_image_pull.py):
skopeo runs on the host over the connection and plugin_utils/host/_pull.py decides here; on the controller
itself (the local connection) the collection's registry client (module_utils/images/_registry.py) reads the
registry in this process, as os_image_compose does, so the controller needs no skopeo."""

from __future__ import annotations

from ansible.module_utils.common.parameters import remove_values

from ansible_collections.fleetos.layering.plugins.module_utils import _params

from ansible_collections.fleetos.layering.plugins.plugin_utils.host import _pull
from ansible_collections.fleetos.layering.plugins.plugin_utils.host._remote import HostStep


class ActionModule(HostStep):
    ARGUMENT_SPEC = _pull.ARGUMENT_SPEC
    SPEC_KWARGS = {"mutually_exclusive": _pull.MUTUALLY_EXCLUSIVE, "required_together": _pull.REQUIRED_TOGETHER}
    WHAT = "pull the image"

    _secrets = frozenset()

    def step(self, host, args, check_mode):
        return _pull.pull(host, args, check_mode, diff=bool(self._task.diff), secrets=self._secrets,
                          local=getattr(self._connection, "transport", None) == "local")

    def run(self, tmp=None, task_vars=None):
        # As a module's no_log_values: the password, the pull secret and every secret of the credentials
        # used are masked wherever they would show in the result (the message, a tool's output).
        self._secrets = _params.no_log_values(self.ARGUMENT_SPEC, self._task.args)
        result = super().run(tmp, task_vars)
        return remove_values(result, self._secrets)
