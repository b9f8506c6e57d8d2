# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


class ModuleDocFragment:
    """The retry options of the modules that talk to a registry or to rpm-ostree.

    The argument spec is ``RETRY_ARGS`` in ``module_utils/host/_commands.py``.
    """

    DOCUMENTATION = r"""
options:
  retries:
    description:
      - How many times to retry a step that failed for a transient reason.
      - Transient are a registry that refused or reset the connection, did not answer in
        time or answered with a server error (HTTP 5xx), and another rpm-ostree
        transaction in progress.
      - Refused credentials, an untrusted certificate and a missing image are never retried.
    type: int
    default: 3
  retry_delay:
    description:
      - Seconds to wait between two attempts.
    type: int
    default: 5
"""
