# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


class ModuleDocFragment:
    """The paths of the tools the modules run on the host.

    C(fleetos.layering.executables.rpm_ostree) documents O(executable) of the modules
    that run rpm-ostree (argument spec ``RPM_OSTREE_ARGS`` in ``module_utils/host/_rpm_ostree.py``),
    C(fleetos.layering.executables.bootc) that of the modules that run bootc (``BOOTC_ARGS``
    in ``module_utils/host/_bootc.py``);
    C(fleetos.layering.executables.skopeo) documents O(skopeo_executable) of the
    modules whose own tool is another one (``SKOPEO_ARGS`` in ``module_utils/images/_skopeo.py``).
    """

    DOCUMENTATION = r"""
options: {}
"""

    RPM_OSTREE = r"""
options:
  executable:
    description:
      - Path of the C(rpm-ostree) binary.
      - By default the binary is searched for in E(PATH).
    type: path
"""

    BOOTC = r"""
options:
  executable:
    description:
      - Path of the C(bootc) binary.
      - By default the binary is searched for in E(PATH).
    type: path
"""

    SKOPEO = r"""
options:
  skopeo_executable:
    description:
      - Path of the C(skopeo) binary.
      - By default the binary is searched for in E(PATH).
    type: path
"""
