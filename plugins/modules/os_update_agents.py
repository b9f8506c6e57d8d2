#!/usr/bin/python
# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: os_update_agents
short_description: Turn off the update agents that would update and reboot an image-based host on their own
version_added: 0.3.0
description:
  - Each image-based OS ships an agent that updates and reboots the host on its own, outside every
    disruption budget and maintenance window of a rollout - Zincati on Fedora CoreOS, which on a custom image
    built FROM Fedora CoreOS follows the inherited C(com.coreos.stream) label and rebases the host back to the
    official image; C(bootc-fetch-apply-updates.timer) on bootc images; rpm-ostree's automatic update policy.
  - With O(state=disabled) each one found on the host is turned off the way its documentation says. Zincati - the
    drop-in C(/etc/zincati/config.d/90-fleetos-updates-disabled.toml) with C([updates] enabled = false), then
    C(systemctl restart zincati.service) when it runs (Zincati reads its configuration when it starts). bootc -
    C(systemctl mask --now bootc-fetch-apply-updates.timer). rpm-ostree - C(AutomaticUpdatePolicy=none) in the
    C([Daemon]) section of C(/etc/rpm-ostreed.conf), every other byte kept, then C(rpm-ostree reload).
  - An agent already off, or not installed, is left as it is.
  - "Re-enabling is one command per agent: C(rm /etc/zincati/config.d/90-fleetos-updates-disabled.toml &&
    systemctl restart zincati.service); C(systemctl unmask bootc-fetch-apply-updates.timer && systemctl start
    bootc-fetch-apply-updates.timer); for rpm-ostree, set the policy you had back in C(/etc/rpm-ostreed.conf) and
    run C(rpm-ostree reload)."
author:
  - fleetos.layering contributors (@fleetos)
extends_documentation_fragment:
  - fleetos.layering.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
  idempotent:
    support: full
options:
  state:
    description:
      - V(disabled) turns every update agent of the host off.
    type: str
    choices: [disabled]
    default: disabled
requirements:
  - a POSIX shell, coreutils and util-linux (C(flock)) on the managed host, C(systemctl) where an agent is
    installed, C(rpm-ostree) when its policy is changed (no Python)
notes:
  - Implemented as an action plugin, it reads every agent in one command on the host (C(systemctl is-enabled) and
    C(is-active) of the three units, the Zincati fragments and C(/etc/rpm-ostreed.conf)) and decides on the
    controller, so the host needs no Python interpreter.
  - Needs root on the host (C(become)).
seealso:
  - module: fleetos.layering.os_info
  - name: Zincati auto-updates
    description: Zincati's documentation of its configuration fragments and of turning updates off.
    link: https://coreos.github.io/zincati/usage/auto-updates/
"""

EXAMPLES = r"""
- name: Turn off the update agents before the rollout takes over
  fleetos.layering.os_update_agents:
    state: disabled
  register: __agents

- name: Show what was turned off
  ansible.builtin.debug:
    var: __agents.actions
"""

RETURN = r"""
disabled:
  description: The agents this task turned off (V(zincati), V(bootc), V(rpm-ostree)); empty when none was on.
  returned: success
  type: list
  elements: str
  sample: [zincati]
actions:
  description: What was done (or, in check mode, would be done), one line per agent.
  returned: success
  type: list
  elements: str
  sample: ["zincati: /etc/zincati/config.d/90-fleetos-updates-disabled.toml written ([updates] enabled = false), zincati.service restarted"]
update_agents:
  description: Each agent as it was before the task, as M(fleetos.layering.os_info) returns RV(fleetos.layering.os_info#module:update_agents).
  returned: success
  type: dict
  sample:
    bootc: {unit: bootc-fetch-apply-updates.timer, enabled_state: not-found, active_state: inactive, "on": false,
            would_update: false, reboots: false, summary: not installed}
"""
