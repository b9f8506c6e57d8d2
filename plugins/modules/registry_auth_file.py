#!/usr/bin/python
# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: registry_auth_file
short_description: Install or remove a registry auth file on a host, without Python on the host
version_added: 0.3.0
description:
  - Writes a container registry auth file (a dockerconfigjson document, the format of
    containers-auth.json(5)) to O(path) on the host, mode C(0600), or removes it.
  - The document reaches the host on the standard input of a POSIX shell script, never on a
    command line; it is written to a temporary file in the same directory, synced and renamed
    over O(path) under an exclusive C(flock), and only when the file still holds what the task
    read (a concurrent change is never overwritten). Nothing is left beside it.
  - The document is never shown, in the result or in the diff.
  - A symlink, directory or device at O(path) is refused and left as it is.
  - Runs C(cat), C(stat), C(flock), C(sha256sum), C(mv) and C(rm) on the host over the
    connection; the host needs no Python interpreter.
  - The role C(fleetos.layering.pull_secret) installs the auth files the host's tools read with it.
author:
  - fleetos.layering contributors (@fleetos)
extends_documentation_fragment:
  - fleetos.layering.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
    details:
      - The diff shows whether the file is there before and after, never its content.
  idempotent:
    support: full
options:
  path:
    description:
      - The auth file on the host, an absolute path, for example C(/etc/ostree/auth.json) (read by
        rpm-ostree and bootc) or C(/etc/containers/auth.json).
      - Its directory is created (mode C(0700)) when missing.
    type: path
    required: true
  auth:
    description:
      - >-
        The dockerconfigjson document, C({"auths": {"registry": {"auth": "..."}}}), as a mapping or as
        JSON text, with a non-empty C(auths) mapping.
      - Required with O(state=present).
    type: raw
  state:
    description:
      - V(present) writes the document (keys sorted, two-space indent) when the file differs or its mode
        is not C(0600); V(absent) removes the file.
    type: str
    choices: [present, absent]
    default: present
seealso:
  - module: fleetos.layering.os_image_pull
  - name: containers-auth.json(5)
    description: The auth file format.
    link: https://github.com/containers/image/blob/main/docs/containers-auth.json.5.md
"""

EXAMPLES = r"""
- name: Install the pull secret rpm-ostree and bootc read
  fleetos.layering.registry_auth_file:
    path: /etc/ostree/auth.json
    auth: "{{ vault_pull_secret }}"

- name: Remove it again
  fleetos.layering.registry_auth_file:
    path: /etc/ostree/auth.json
    state: absent
"""

RETURN = r"""
path:
  description: The auth file.
  returned: success
  type: str
  sample: /etc/ostree/auth.json
state:
  description: Whether the file is there after the task.
  returned: success
  type: str
  sample: present
"""
