# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
name: rollout_owner
short_description: Name this rollout and the controller process that runs it
version_added: 0.1.0
description:
  - Returns a new rollout id and the owner record of this run of a playbook, for the
    rollout lease (module M(fleetos.layering.os_rollout_lease)).
  - The owner is the controller's host name, the user, and the ansible-playbook process
    (its pid and its start time, so that a reused pid is not taken for the same process).
    A rerun on the same controller takes over the leases of a run whose process is gone.
  - Look it up once per play (C(run_once)); each call makes a new id.
author:
  - fleetos.layering contributors (@fleetos)
options: {}
notes:
  - The process is the parent of the worker process that templates the task, which is
    the ansible-playbook process (or ansible-runner's ansible-playbook process).
"""

EXAMPLES = r"""
- name: Name the rollout
  ansible.builtin.set_fact:
    rollout: "{{ lookup('fleetos.layering.rollout_owner') }}"
  run_once: true

- name: Show who runs it
  ansible.builtin.debug:
    msg: "rollout {{ rollout.rollout }} by {{ rollout.owner.user }}@{{ rollout.owner.controller }}"
"""

RETURN = r"""
_raw:
  description: One record describing this run.
  type: list
  elements: dict
  contains:
    rollout:
      description: A new rollout id, the UTC start time and a random suffix.
      type: str
      sample: 20261201T050000Z-3fa2c1
    started_at:
      description: When the id was made, in seconds since the epoch.
      type: float
      sample: 1795842000.25
    owner:
      description: The controller process that runs the rollout.
      type: dict
      sample: {controller: ctl1.example.com, user: ops, pid: 4242, start: "123456"}
"""

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase
from ansible_collections.fleetos.layering.plugins.plugin_utils.rollout._resume import owner_of_this_run


class LookupModule(LookupBase):

    def run(self, terms, variables=None, **kwargs):
        if terms:
            raise AnsibleLookupError("rollout_owner takes no terms, got %d." % len(terms))
        return [owner_of_this_run()]
