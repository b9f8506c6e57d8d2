# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


class ModuleDocFragment:
    """Attributes shared by every module of fleetos.layering.

    Modules extend C(fleetos.layering.attributes) and set C(support) and, where
    useful, C(details) for each attribute in their own DOCUMENTATION.
    Read-only (C(_info)) modules extend C(fleetos.layering.attributes.info_module)
    as well.
    """

    # Standard documentation fragment: describes the attributes.
    DOCUMENTATION = r"""
options: {}
attributes:
  check_mode:
    description:
      - Can run in check mode and return a prediction of the changed status,
        and of the diff, without modifying the target.
  diff_mode:
    description:
      - Returns details of what has changed (or would change in check mode)
        as C(before) and C(after) when run in diff mode.
  idempotent:
    description:
      - When run twice in a row outside check mode with the same arguments, the
        second run reports no change.
      - This assumes the state of the target has not changed in a relevant way
        in between.
"""

    # Read-only modules: use together with the standard fragment.
    INFO_MODULE = r"""
options: {}
attributes:
  check_mode:
    support: full
    details:
      - This action does not modify state.
  diff_mode:
    support: N/A
    details:
      - This action does not modify state.
  idempotent:
    support: full
    details:
      - This action does not modify state.
"""
