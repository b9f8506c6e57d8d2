#!/usr/bin/python
# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: os_info
short_description: Report the deployments of an image-based host, through bootc or rpm-ostree
version_added: 0.2.0
description:
  - Reads the host's booted, staged and rollback deployments with the tool that manages the
    host - C(bootc status) or C(rpm-ostree status) - and returns them in one shape, so that
    the roles and playbooks of this collection handle bootc and rpm-ostree hosts alike.
  - With O(backend=auto), a host where C(bootc status) reports a booted bootc host is read with
    bootc; any other host with rpm-ostree. RV(backend) says which.
  - Each deployment has the keys of M(fleetos.layering.rpm_ostree_info)'s deployments. The
    C(image.reference) of a bootc deployment is the ostree-container reference bootc writes in
    the deployment's origin (for example C(ostree-unverified-registry:NAME@sha256:...)), so that
    images are compared the same way on both; C(image.bootc_transport) and C(image.signature)
    keep what bootc reported.
author:
  - fleetos.layering contributors (@fleetos)
extends_documentation_fragment:
  - fleetos.layering.attributes
  - fleetos.layering.attributes.info_module
options:
  backend:
    description:
      - The tool that manages the host.
      - V(auto) asks bootc first (when it is installed) and uses rpm-ostree when bootc did not boot the host.
    type: str
    choices: [auto, bootc, rpm-ostree]
    default: auto
  rpm_ostree_executable:
    description:
      - Path of the C(rpm-ostree) binary. By default it is searched for in E(PATH).
    type: path
  bootc_executable:
    description:
      - Path of the C(bootc) binary. By default it is searched for in E(PATH).
    type: path
  update_agents:
    description:
      - Also read the host's update agents (Zincati, C(bootc-fetch-apply-updates.timer), rpm-ostree's automatic
        updates), in the same run on the host, and return what each would do as RV(update_agents).
    type: bool
    default: false
requirements:
  - bootc or rpm-ostree, and a POSIX shell, on the managed host (no Python)
seealso:
  - module: fleetos.layering.bootc_info
  - module: fleetos.layering.rpm_ostree_info
notes:
  - Never changes the host.
  - Implemented as an action plugin, it runs C(bootc status) or C(rpm-ostree status --json) and
    C(uname -m) on the host over the connection and parses the output on the controller, so the
    host needs no Python interpreter, only bootc or rpm-ostree and a POSIX shell.
"""

EXAMPLES = r"""
- name: Read the deployments with the tool that manages the host
  fleetos.layering.os_info:
  register: __os_info

- name: Show the booted digest and the tool
  ansible.builtin.debug:
    msg: "{{ __os_info.backend }}: {{ __os_info.booted.image.digest | default('no image') }}"

- name: Read a host known to be managed by bootc
  fleetos.layering.os_info:
    backend: bootc
"""

RETURN = r"""
update_agents:
  description:
    - With O(update_agents), each agent by name (V(zincati), V(bootc), V(rpm-ostree)) - its C(unit), the unit's
      C(enabled_state) and C(active_state) as C(systemctl is-enabled) and C(is-active) print them, C(on),
      C(would_update) (it would replace the deployment on its own), C(reboots) (it would reboot the host on its
      own) and a one-line C(summary); Zincati's C(updates_enabled), C(strategy), C(fleet_lock_url) and
      C(fragments) (the config fragments in merge order); rpm-ostree's C(policy) (C(AutomaticUpdatePolicy)).
  returned: success and O(update_agents)
  type: dict
  sample:
    zincati: {unit: zincati.service, enabled_state: enabled, active_state: active, "on": true, would_update: true,
              reboots: true, updates_enabled: true, strategy: immediate, fleet_lock_url: null,
              fragments: [/usr/lib/zincati/config.d/10-auto-updates.toml],
              summary: "on, updates enabled: updates and reboots the host on its own (strategy immediate)"}
backend:
  description: The tool that manages the host and was read, V(bootc) or V(rpm-ostree).
  returned: success
  type: str
  sample: bootc
booted:
  description:
    - The booted deployment, with the keys of RV(fleetos.layering.rpm_ostree_info#module:booted) (a bootc host's
      deployment has the keys of RV(fleetos.layering.bootc_info#module:booted) as well).
  returned: success
  type: dict
  sample:
    booted: true
    staged: false
    checksum: 26836632adf6228d64ef07a26fd3efaf177104efd1f341a2cf7909a3e4e2c72c
    version: "9.6"
    image:
      reference: ostree-unverified-registry:quay.io/example/os@sha256:736b359467c9437c1ac915acaae952aad854e07eb4a16a94999a48af08c83c34
      transport: ostree-unverified-registry
      transport_kind: registry
      name: quay.io/example/os
      tag: null
      digest: sha256:736b359467c9437c1ac915acaae952aad854e07eb4a16a94999a48af08c83c34
      manifest_digest: sha256:736b359467c9437c1ac915acaae952aad854e07eb4a16a94999a48af08c83c34
      bootc_transport: registry
      signature: insecure
staged:
  description: The staged deployment (same keys as RV(booted)), or V(null).
  returned: success
  type: dict
  sample: null
rollback:
  description: The rollback deployment (same keys as RV(booted)), or V(null).
  returned: success
  type: dict
  sample: null
deployments:
  description: Every deployment, the next boot first (same keys as RV(booted)).
  returned: success
  type: list
  elements: dict
  sample: []
reboot_required:
  description:
    - Whether the next boot changes the deployment (a staged deployment, a queued rollback).
    - On a bootc host, V(false) for a download-only staged deployment (RV(staged) with C(download_only=true)),
      which an ordinary reboot does not apply.
  returned: success
  type: bool
  sample: false
architecture:
  description: The host's architecture as OCI image indexes name it.
  returned: success
  type: str
  sample: amd64
"""
