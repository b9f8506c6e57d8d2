#!/usr/bin/python
# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: os_rollout_lease
short_description: Hold a host for one rollout at a time, and record how far the rollout got
version_added: 0.1.0
description:
  - Takes, renews, releases or only reads the rollout lease of a host, a small JSON record on the host
    that names the rollout holding it (id, controller process, start time, time to live)
    and how far that rollout got with the host (O(phase), O(target_digest)).
  - The record is read and replaced under an exclusive lock and written atomically, so two
    rollouts that take the lease at the same time see one winner, and a controller killed
    at any point leaves a whole record behind.
  - A lease held by another rollout is refused with the holder in RV(holder), unless
    O(break_lease) names that rollout. A holder that started after this rollout is waited
    for up to O(wait) seconds, so that of two rollouts started at once the older one runs.
  - The record a new lease replaces is returned as RV(previous); the rollout playbook reads
    it to verify hosts that a killed rollout rebooted and never verified.
  - The role of the lease in a rollout is described in C(docs/rollout.md).
author:
  - fleetos.layering contributors (@fleetos)
extends_documentation_fragment:
  - fleetos.layering.attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  idempotent:
    support: none
    details:
      - Taking a lease renews it, which rewrites its renewal time; the rollout playbook
        reports these tasks as not changed, as the lease is bookkeeping, not a change to the host.
options:
  state:
    description:
      - V(acquired) takes the lease, or renews it when this rollout holds it already.
      - V(released) marks this rollout's lease released; another rollout's lease is left alone.
      - V(read) changes nothing and returns the lease as the host holds it in RV(lease) (with O(deployments), the
        host's deployments too). The role fleetos.layering.os_plan reads a host this way, in one contact, when the
        run takes no lease (C(playbooks/plan.yml)).
    type: str
    choices: [acquired, released, read]
    default: acquired
  lease:
    description:
      - The rollout's lease as one mapping, as the rollout playbooks hold it - the keys V(rollout), V(owner) and
        V(started_at) (as the lookup C(fleetos.layering.rollout_owner) gives them), V(ttl) and V(wait). Other
        keys are ignored.
      - Each gives its option where the task does not give that option itself.
    type: dict
  rollout:
    description:
      - The id of the rollout, unique per run of the rollout playbook.
      - Required with O(state=acquired) and O(state=released).
    type: str
  owner:
    description:
      - Who runs the rollout, recorded for a person reading a refusal; for example the
        controller's host name, user and process id (lookup C(fleetos.layering.rollout_owner)).
      - Required with O(state=acquired).
    type: dict
  started_at:
    description:
      - When the rollout started (seconds since the epoch). Of two rollouts that want the
        same host, the one that started first keeps it.
      - Required with O(state=acquired).
    type: float
  ttl:
    description:
      - How long the lease lasts after it was last taken or renewed, in seconds. An expired
        lease is still refused; it only tells a person that its rollout is probably gone.
    type: int
    default: 21600
  phase:
    description:
      - How far the rollout got with the host, recorded with the lease.
      - V(rebooting) is written once the rollout may reboot the host into O(target_digest) (the
        rollout playbook writes it when the host starts waiting for its budget slot); a rerun finds it when
        the rollout was killed before it verified the host.
    type: str
    choices: [planned, rebooting, activated, failed, done]
  target_digest:
    description:
      - The digest the rollout brings the host to, recorded with the lease.
    type: str
  break_lease:
    description:
      - The id of another rollout whose lease may be taken over (its controller is gone).
        A lease of any other rollout is still refused.
    type: str
  wait:
    description:
      - Seconds to wait for a lease held by a rollout that started after this one to be
        released before refusing.
    type: int
    default: 0
  deployments:
    description:
      - Also read the host's deployments with this tool, as M(fleetos.layering.os_info) does with its
        O(fleetos.layering.os_info#module:backend); they are returned as RV(deployments). A rollout plans the host
        from what it read under its own lease, and contacts the host once for both.
      - The lease file and the deployments are read in one host command, the lease written then only if the file
        still holds what was read (so nothing took the lease in between); when it changed, both are read again.
      - Not set, nothing is read.
    type: str
    choices: [auto, bootc, rpm-ostree]
  update_agents:
    description:
      - With O(deployments), also read the host's update agents as M(fleetos.layering.os_info) does with its
        O(fleetos.layering.os_info#module:update_agents), into the key C(update_agents) of RV(deployments).
    type: bool
    default: false
  release_unchanged:
    description:
      - With O(deployments), plan the host from what was read under the lease, and release the lease in the same
        contact when the plan leaves the host as it is (its booted image is its target, no update agent to turn
        off, no lease a killed rollout left to finish); RV(released) then says so. A rollout rerun on a converged
        fleet then contacts each host once.
      - For the role fleetos.layering.os_plan, which gathers the plan's inputs for the play; the lease is kept when
        the plan changes the host, or could not be made.
      - Requires O(state=acquired) and O(deployments).
    type: dict
    suboptions:
      plans:
        description:
          - The name of the host's variable that holds the plan of the fleet (the record of the filter
            fleetos.layering.rollout_plan_fleet). It is read as it is, not templated, so that each host reads its
            own entry only.
        type: str
        required: true
      resolutions:
        description:
          - The images resolved for the plan (the registered loop of M(fleetos.layering.os_image_pull) with
            O(fleetos.layering.os_image_pull#module:state=resolved)).
        type: raw
      lock:
        description:
          - The lock of the layered images, read (filter fleetos.layering.layered_image_lock_read), or V(null).
        type: raw
      pins:
        description:
          - The tags a verified canary batch pinned to digests, or V(null) (see the filter
            fleetos.layering.rollout_plan).
        type: raw
  path:
    description:
      - The lease file on the host; a lock file C(<path>.lock) sits next to it.
    type: path
    default: /var/lib/fleetos/rollout-lease.json
notes:
  - The lease file and the lock file must be regular files; a symlink is refused.
  - Implemented as an action plugin, it reads the lease file with C(cat), decides on the
    controller, and replaces the file with a small POSIX shell script under C(flock) (util-linux)
    only if it still holds what was read, so the host needs no Python interpreter, only a POSIX
    shell, coreutils and C(flock); with O(deployments), as M(fleetos.layering.os_info) reads them.
seealso:
  - module: fleetos.layering.rpm_ostree_rebase
"""

EXAMPLES = r"""
- name: Take the rollout lease
  fleetos.layering.os_rollout_lease:
    rollout: "{{ rollout_id }}"
    owner: {controller: ctl1.example.com, user: ops, pid: 4242}
    started_at: "{{ rollout_started }}"
  register: lease

- name: Record that the host is rebooting into its target
  fleetos.layering.os_rollout_lease:
    rollout: "{{ rollout_id }}"
    owner: {controller: ctl1.example.com, user: ops, pid: 4242}
    started_at: "{{ rollout_started }}"
    phase: rebooting
    target_digest: sha256:4f5e0f8d3a0c1b2d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b7c6d

- name: Release the lease at the end of the rollout
  fleetos.layering.os_rollout_lease:
    rollout: "{{ rollout_id }}"
    state: released

# rollout: set once for the run from the lookup fleetos.layering.rollout_owner (see its example).
- name: Take the lease as one mapping, with the rollout's id, owner and start
  fleetos.layering.os_rollout_lease:
    lease: "{{ rollout | combine({'ttl': 7200}) }}"

- name: Read the lease and the deployments of the host, changing nothing
  fleetos.layering.os_rollout_lease:
    state: read
    deployments: auto
  register: host_read
"""

RETURN = r"""
acquired:
  description: Whether this rollout holds the lease now.
  returned: always
  type: bool
  sample: true
lease:
  description: The lease record on the host after the task, or V(null) when there is none.
  returned: always
  type: dict
  sample:
    rollout: 20261201T050000Z-4242
    owner: {controller: ctl1.example.com, user: ops, pid: 4242}
    started_at: 1795842000.0
    renewed_at: 1795842003.5
    ttl: 21600
    phase: planned
    target_digest: null
    released: false
previous:
  description:
    - The record of another rollout that this lease replaced (released, or broken with
      O(break_lease)), or V(null).
  returned: always
  type: dict
  sample:
    rollout: 20261201T040000Z-1717
    phase: rebooting
    target_digest: sha256:4f5e0f8d3a0c1b2d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b7c6d
    released: false
deployments:
  description:
    - With O(deployments), the host's deployments as M(fleetos.layering.os_info) returns them (C(backend),
      C(booted), C(staged), C(rollback), C(deployments), C(reboot_required), C(architecture)); also when the
      lease was refused. V(null) without O(deployments), or when they could not be read (the task then fails
      with the cause in C(msg)).
  returned: always
  type: dict
  sample:
    backend: rpm-ostree
    booted: {checksum: 8b1a9953c4611296a827abf8c47804d7e6c49c6b6e2ab6a1e1e1e0e0e0e0e0e0}
    staged: null
released:
  description:
    - With O(release_unchanged), V(true) when the plan left the host unchanged and the lease was released in the
      same contact (RV(acquired) stays V(true), as this rollout held it). A release that failed leaves the lease
      taken and says why in C(release_failed).
  returned: when the lease was released with O(release_unchanged)
  type: bool
  sample: true
holder:
  description: The record of the rollout that holds the lease, when it was refused.
  returned: failure
  type: dict
  sample:
    rollout: 20261201T040000Z-1717
    owner: {controller: ctl2.example.com, user: ops, pid: 1717}
    phase: planned
"""
