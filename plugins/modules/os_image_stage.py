#!/usr/bin/python
# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: os_image_stage
short_description: Stage a digest-pinned OS image with the host's own tool, rpm-ostree or bootc
version_added: 0.3.0
description:
  - Stages the image for the host's next activation with the tool that manages its deployments,
    O(backend) (as M(fleetos.layering.os_info) returns it in C(backend)) - C(rpm-ostree rebase)
    as M(fleetos.layering.rpm_ostree_rebase) does, or C(bootc switch) as
    M(fleetos.layering.bootc_switch) does - and returns one result for both, so that a playbook
    never checks the backend itself.
  - Images are compared by digest; a host whose next deployment is at the image's digest
    already is not changed.
  - With O(lock_finalization) (the default), an unplanned reboot boots the booted deployment again -
    rpm-ostree's C(--lock-finalization), bootc's C(--download-only). The activation applies the
    staged deployment (the filter C(fleetos.layering.backend_command), V(finalize)).
  - The tools run on the host over the connection; the host needs no Python interpreter.
author:
  - fleetos.layering contributors (@fleetos)
extends_documentation_fragment:
  - fleetos.layering.attributes
attributes:
  check_mode:
    support: full
    details:
      - Predicts C(changed) and the diff from the deployments; stages nothing. RV(staged_checksum) is null.
  diff_mode:
    support: full
  idempotent:
    support: full
options:
  image:
    description:
      - The image, C(registry[:port]/repository@sha256:<64 hex digits>).
    type: str
    required: true
  backend:
    description:
      - The tool that manages the host's deployments.
    type: str
    choices: [rpm-ostree, bootc]
    required: true
  transport:
    description:
      - How the image is verified, as M(fleetos.layering.rpm_ostree_rebase) names it. V(registry) and
        V(signed) (the containers policy; on bootc C(--enforce-container-sigpolicy)) work on both
        backends; V(remote) (an ostree remote's signature configuration, O(ostree_remote)) on rpm-ostree
        only, and on bootc it is refused before anything runs.
    type: str
    choices: [registry, remote, signed]
    default: registry
  ostree_remote:
    description:
      - The ostree remote for O(transport=remote).
    type: str
  lock_finalization:
    description:
      - Whether an ordinary reboot leaves the staged deployment for the activation to apply.
    type: bool
    default: true
  auth_file:
    description:
      - A registry auth file on the host, put where the tool reads it for the stage only.
    type: path
seealso:
  - module: fleetos.layering.rpm_ostree_rebase
  - module: fleetos.layering.bootc_switch
  - module: fleetos.layering.os_info
"""

EXAMPLES = r"""
- name: Read the host's deployments
  fleetos.layering.os_info:
  register: status

- name: Stage the image, whichever tool the host has
  fleetos.layering.os_image_stage:
    image: registry.example.com/os/fleet-os@sha256:4f2a1c0e9d8b7a6f5e4d3c2b1a0f9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f
    backend: "{{ status.backend }}"
  register: staged
"""

RETURN = r"""
backend:
  description: The backend that staged the image.
  returned: success
  type: str
  sample: rpm-ostree
digest:
  description: The image's manifest digest.
  returned: success
  type: str
staged:
  description:
    - Whether the image waits in a staged deployment for the activation (a download-only or
      finalization-locked one included).
  returned: success
  type: bool
staged_checksum:
  description: The ostree checksum of that staged deployment; null when none waits, and in check mode.
  returned: success
  type: str
reboot_required:
  description: Whether an ordinary reboot changes the deployment, as the backend's module returns it.
  returned: success
  type: bool
before:
  description: The next deployment before the task (reference, digest, checksum), as the backend's module returns it.
  returned: success
  type: dict
after:
  description: The next deployment after the task.
  returned: success
  type: dict
"""
