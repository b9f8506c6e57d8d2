# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
name: layered_image
short_description: The composed image of a LayeredImage, pinned by digest, from the lock compose.yml wrote
version_added: 0.2.0
description:
  - Reads the lock (C(layered-images.lock.yml)) that C(fleetos.layering.compose) wrote and returns, for each
    LayeredImage named, its composed image C(registry/repository@sha256:...), exactly what was composed and
    tested. No tag is resolved.
  - Give it to a rollout as C(fleetos_rollout_image) or as a pool's C(fleetos_pool_image); a LayeredImage the
    lock does not have, or a lock that does not exist, fails with one sentence naming the lock.
  - The planner can read the lock itself. With C(fleetos_rollout_lock) set, a MachineImage's C(spec.layeredImage)
    or a pool's C(fleetos_pool_layered_image) names the LayeredImage, and the plan shows the base version and each
    layer's version. This lookup stays for a fallback image, for other playbooks, and for inventories that name
    an image.
author:
  - fleetos.layering contributors (@fleetos)
options:
  _terms:
    description: The names of LayeredImages (C(metadata.name)).
    type: list
    elements: str
    required: true
  lock:
    description: The path of the lock on the controller.
    type: path
    required: true
seealso:
  - plugin: fleetos.layering.layered_image_lock
    plugin_type: filter
"""

EXAMPLES = r"""
# The image compose.yml composed for the workers, as rollout.yml would roll it out
# (-e fleetos_rollout_image=... to the playbook fleetos.layering.rollout).
- name: Show the composed image of the workers
  ansible.builtin.debug:
    msg: "{{ lookup('fleetos.layering.layered_image', 'worker', lock=inventory_dir ~ '/layered-images.lock.yml') }}"
"""

RETURN = r"""
_raw:
  description: The composed image of each LayeredImage named, C(registry/repository@sha256:...).
  type: list
  elements: str
  sample: 198.51.100.1:5000/fleetos/worker@sha256:4b1a9f7f6e0a0e7e4d2c1b5e9f3a8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f10
"""

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase
from ansible_collections.fleetos.layering.plugins.module_utils._errors import FleetosError
from ansible_collections.fleetos.layering.plugins.plugin_utils.images._layered import pinned_image, read_lock_file


def layered_images(names, lock):
    """The composed image of each LayeredImage of ``names`` in the lock file ``lock``; raises AnsibleLookupError."""
    if not names or not all(isinstance(name, str) and name for name in names):
        raise AnsibleLookupError("layered_image takes one or more LayeredImage names, got %r." % (names,))
    try:
        document = read_lock_file(lock)
        return [pinned_image(document, name, where="The lock %s" % lock) for name in names]
    except FleetosError as exc:
        raise AnsibleLookupError(exc.msg if exc.msg.endswith(".") else exc.msg + ".") from None


class LookupModule(LookupBase):

    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        return layered_images(terms, self.get_option("lock"))
