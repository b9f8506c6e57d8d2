# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations


class ModuleDocFragment:
    """The registry options of the modules that read an image with skopeo on the host.

    The argument spec is ``REGISTRY_ARGS`` in ``module_utils/images/_skopeo.py``.
    """

    DOCUMENTATION = r"""
options:
  auth_file:
    description:
      - An existing containers-auth.json(5) or docker config file on the managed host
        with the registry credentials, for example C(/etc/ostree/auth.json).
      - Only the entry that applies to the image is passed on to skopeo, in a 0600
        temporary auth file that is removed afterwards.
    type: path
  ca_cert_dir:
    description:
      - A directory on the managed host holding the registry's C(ca.crt) (and client
        C(*.cert)/C(*.key)).
      - By default skopeo uses C(/etc/containers/certs.d/<registry>/).
    type: path
  validate_certs:
    description:
      - Require HTTPS and verify the registry's certificate.
    type: bool
    default: true
"""
