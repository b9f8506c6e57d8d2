#!/usr/bin/python
# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: os_activate_slot
short_description: Take, record and free the disruption budget slots of an activation
version_added: 0.3.0
description:
  - The bookkeeping of the role C(fleetos.layering.os_activate), on the controller. One activation
    run keeps a I(book) in a private file on the controller; every fork of the run reads and writes
    it under an exclusive file lock, so the forks share one counting semaphore per pool. The book's
    directory names the run's process; O(op=open) removes the books of this user's runs whose
    process is gone (killed before they closed their book). A fork that outlives its run's
    process (ansible-playbook killed) stops waiting for a slot, and takes none from FleetLock.
  - A host is activated as soon as its pool has a free slot (a sliding window, not waves). Free
    slots go to the waiting hosts of a pool in rollout order. A slot is recursive, owned by its host,
    and freed when the host is verified healthy, rolled back, or never disrupted. A host that went
    down and did not come back, or whose rollback failed, keeps its slot. Once O(max_failures)
    hosts failed (activations, and the stages of hosts of the book, O(op=drop) with O(failed=true)), no
    new slot is granted.
  - "With O(fleetlock_url), a host that got a slot of the book also takes one from FleetLock
    (C(POST /v1/pre-reboot) with the header C(fleet-lock-protocol: true), group O(fleetlock_group), id
    O(fleetlock_id)), from the host itself, asked again every O(fleetlock_retry_delay) seconds for
    up to O(fleetlock_timeout) seconds, and frees it with C(POST /v1/steady-state). FleetLock then
    shares the budget with other controllers, sliced jobs and other reboot managers."
  - O(op=open) makes the book, O(op=acquire) waits for a slot (with O(lease), after writing phase
    V(rebooting) in the host's rollout lease; with O(activate), then reboots, verifies and frees it), O(op=prepare) reads the host's
    deployments before the reboot and fails unless the target is staged (mode V(finalize)) or is
    the previous deployment with nothing staged (mode V(rollback)), O(op=rebooting) records the
    reboot start (O(op=acquire) does it with O(rebooting=true); and first, with O(lease), phase
    V(rebooting) in the host's rollout lease, M(fleetos.layering.os_rollout_lease) on the host),
    O(op=event) and O(op=fail) record the activation, O(op=booted) reads the booted deployment on
    the host once it is back and fails unless it is the target (with O(health=false) it records
    the host verified), O(op=drop) takes a host that will not ask for its slot out of the book (its
    stage failed or left nothing to activate; O(reason)), O(op=release) frees the slot, O(op=canary) closes the canary batch,
    O(op=close) returns the summary and removes the book. O(op=unlock) only frees a FleetLock slot
    that a killed run left.
  - O(op=prepare) and O(op=booted) read the deployments on rpm-ostree with C(rpm-ostree status --json),
    run as a plain command without become and parsed on the controller, and on bootc with
    M(fleetos.layering.os_info).
  - Each record operation returns the host's activation record as the fact C(os_activate_result);
    the record is built in one place, by this action.
  - This module is implemented as an action plugin on the controller; only the FleetLock calls
    (C(curl), the request body on its stdin), the reads of O(op=prepare) and O(op=booted), the lease write of
    O(op=rebooting) and, with O(activate), the boot id reads and the reboot command run on the host.
author:
  - fleetos.layering contributors (@fleetos)
extends_documentation_fragment:
  - fleetos.layering.attributes
attributes:
  check_mode:
    support: none
  diff_mode:
    support: none
  idempotent:
    support: none
    details:
      - Every operation is a step of one activation run.
options:
  op:
    description:
      - What to do; see the description.
    type: str
    required: true
    choices: [open, acquire, drop, prepare, rebooting, event, booted, fail, release, unlock, canary, close]
  book:
    description:
      - The path of the book that O(op=open) returned (RV(book)); required for every other operation
        but O(op=unlock).
    type: path
  host:
    description:
      - The host the operation is for.
      - Defaults to the task's C(inventory_hostname).
    type: str
  hosts:
    description:
      - O(op=open), the hosts to activate in rollout order, each a mapping with C(host) and C(pool).
    type: list
    elements: dict
  budgets:
    description:
      - O(op=open), each pool's number of slots, a mapping of pool name to count.
    type: dict
  max_failures:
    description:
      - O(op=open), once this many activations failed no new slot is granted; at least V(1).
    type: int
    default: 1
  canary:
    description:
      - O(op=open), the first O(canary) hosts of O(hosts) are the canary batch.
    type: int
    default: 0
  stop_after_canary:
    description:
      - O(op=canary), stop the run after a verified canary batch.
    type: bool
    default: false
  mode:
    description:
      - O(op=acquire), how the host is activated - V(finalize) (boot the staged deployment),
        V(rollback) (boot the previous one) or V(verify) (booted already, nothing rebooted).
    type: str
    default: finalize
    choices: [finalize, rollback, verify]
  target_digest:
    description:
      - O(op=acquire), the manifest digest the host must boot.
    type: str
  old_digest:
    description:
      - O(op=acquire), the digest the host runs before, when the caller knows it.
    type: str
  timeout:
    description:
      - O(op=acquire), seconds to wait for a slot of the book. A host that Ansible drops from the
        play while it holds a slot (unreachable in a task of yours) never frees it; the hosts that
        wait for it give up after this long.
    type: int
    default: 3600
  poll_interval:
    description:
      - O(op=acquire), seconds between two looks at the book while waiting.
    type: float
    default: 0.1
  event:
    description:
      - O(op=event), what happened - V(reboot_start), V(reboot_end), V(booted) (with O(status) read
        after the reboot), V(verified), V(rollback_start) or V(rolled_back) (with O(status)).
    type: str
    choices: [reboot_start, reboot_end, booted, verified, rollback_start, rolled_back]
  status:
    description:
      - O(op=event) and O(op=rebooting), the result of M(fleetos.layering.os_info) that the event reads
        (for O(op=rebooting), the RV(status) of O(op=prepare), whose booted digest is the one before the reboot).
    type: dict
  lease:
    description:
      - O(op=acquire) and O(op=rebooting), the run's rollout lease (keys C(rollout), C(owner), C(started_at) and
        an optional C(ttl)); when given, the host's lease records phase V(rebooting) to the target first; with
        O(op=acquire) before the host waits for its slot, so that the write is not part of the slot hold (from
        then on the run may reboot the host). A failed write takes no slot with O(op=acquire) (RV(granted) false, the
        cause in RV(reason)) and fails the task with O(op=rebooting). Empty or omitted, no lease is written.
    type: dict
  rebooting:
    description:
      - O(op=acquire), nothing runs between the grant and the reboot (no O(op=prepare), no pre-activate
        tasks), so the grant also records the reboot start, as O(op=rebooting) would (not in mode V(verify)).
    type: bool
    default: false
  lease_release:
    description:
      - O(op=acquire) with O(activate) and O(lease), what the activated host's rollout lease records once its
        slot is freed - V(false), phase V(activated) (the lease still held); V(true), phase V(done) with the
        lease released. A failed write fails the task (the host stays activated, its slot freed).
    type: bool
    default: false
  activate:
    description:
      - O(op=acquire), the whole slot hold in this one task, for when nothing runs between the grant and
        the reboot or after the verified boot (no pre-activate tasks, no health check, no post-activate
        tasks). Once the slot is granted it records the reboot start, reboots the host as
        M(fleetos.layering.os_reboot) does (not in mode V(verify)), reads and verifies the booted
        deployment as O(op=booted) with O(health=false) does, frees the slot as O(op=release)
        does and, with O(lease), records the activated host in its rollout lease (O(lease_release)).
        No task boundary lies between these steps, so the slot is held for the reboot and little
        else.
      - A failed reboot or verification does not fail the task; it is returned as RV(failure), with the
        host's record as the fact C(os_activate_result) and the slot still held, for the caller's rescue
        to record with O(op=fail) and to free with O(op=release).
      - The numbers are checked before anything else, and a bad one fails the task before the lease is
        written or a slot is taken.
      - When ansible-playbook was killed, the task does not reboot the host, and when it was killed
        while the host rebooted, the task changes nothing after the reboot (no record, no FleetLock
        steady-state, no lease write), so that a rerun finds the host as the killed run left it.
    type: dict
    suboptions:
      reboot_command:
        description: The command that reboots the host into its target, as M(fleetos.layering.os_reboot) runs it.
        type: str
        required: true
      boot_time_command:
        description: Prints a value that changes on every boot, as for M(fleetos.layering.os_reboot).
        type: str
        default: cat /proc/sys/kernel/random/boot_id
      reboot_timeout:
        description: Seconds, from the reboot command, to wait for the new boot id; at least V(1).
        type: int
        default: 600
      poll_interval:
        description: Seconds between two reads of the boot id; more than V(0).
        type: float
        default: 1.0
      connect_timeout:
        description: The connection's timeout, in seconds, while the host is polled; at least V(1).
        type: int
        default: 5
  health:
    description:
      - O(op=booted), whether a health check follows. V(false), a host booted on the target is recorded
        verified at once, as O(op=event) with O(event=verified) would.
    type: bool
    default: true
  backend:
    description:
      - O(op=prepare) and O(op=booted), the tool that manages the host's deployments.
    type: str
    default: rpm-ostree
    choices: [rpm-ostree, bootc]
  task:
    description:
      - O(op=fail), the name of the task that failed.
    type: str
  result:
    description:
      - O(op=fail), the failed task's result (C(ansible_failed_result)).
    type: dict
  rollback:
    description:
      - O(op=fail), whether a host that fails verification or health is to be rolled back
        (RV(roll_back)).
    type: bool
    default: true
  reboot:
    description:
      - O(op=booted), and O(op=fail) in the reboot phase, the result of M(fleetos.layering.os_reboot);
        O(op=booted) fails, before recording the host back, when that result is unreachable.
    type: dict
  reason:
    description:
      - O(op=drop), why the host will not be activated (shown in the report).
    type: str
  failed:
    description:
      - O(op=drop), whether the host failed (its stage did) - counted toward O(max_failures).
    type: bool
    default: false
  probe:
    description:
      - O(op=fail) in the reboot phase, the result of the boot id read after the failure; an
        unreachable or failed probe, or another boot id, means the host went down.
    type: dict
  reboot_timeout:
    description:
      - O(op=fail), the reboot timeout, for the reason of a host that did not come back.
    type: int
    default: 600
  fleetlock_url:
    description:
      - The FleetLock server's base URL; without it the book alone holds the slots.
    type: str
  fleetlock_group:
    description:
      - The FleetLock group (the pool).
      - Defaults to V(default).
    type: str
  fleetlock_id:
    description:
      - The FleetLock client id of the host.
      - Defaults to O(host).
    type: str
  fleetlock_timeout:
    description:
      - Seconds to keep asking FleetLock for a slot; then the run stops.
    type: int
    default: 600
  fleetlock_retry_delay:
    description:
      - Seconds between two FleetLock requests.
    type: float
    default: 5
requirements:
  - a controller whose forks of one run share a file system, as every ansible-playbook run has
seealso:
  - module: fleetos.layering.os_reboot
  - name: The FleetLock protocol
    description: The protocol that Zincati and airlock speak.
    link: https://coreos.github.io/zincati/development/fleetlock/protocol/
notes:
  - The role C(fleetos.layering.os_activate) runs these operations; use this module directly only to
    build another activation flow.
"""

EXAMPLES = r"""
- name: Open the book of the activation
  fleetos.layering.os_activate_slot:
    op: open
    hosts:
      - {host: node01, pool: blue}
      - {host: node02, pool: blue}
    budgets:
      blue: 1
    max_failures: 1
  run_once: true
  register: book

- name: Wait for a slot of the host's pool
  fleetos.layering.os_activate_slot:
    op: acquire
    book: "{{ book.book }}"
    target_digest: sha256:3f5a9c0e1d2b4a6f8e7c9b0a1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e
  register: slot

- name: Free the slot
  fleetos.layering.os_activate_slot:
    op: release
    book: "{{ book.book }}"
  when: slot.granted
"""

RETURN = r"""
book:
  description: O(op=open), the path of the new book.
  returned: op is open
  type: str
  sample: /tmp/fleetos-slots-k2j3/book.json
canary:
  description: O(op=open), the hosts of the canary batch.
  returned: op is open
  type: list
  elements: str
  sample: [node01]
budgets:
  description: O(op=open), each pool's number of slots.
  returned: op is open
  type: dict
  sample: {blue: 2, green: 1}
granted:
  description: O(op=acquire), whether the host holds a slot now.
  returned: op is acquire
  type: bool
  sample: true
released:
  description: O(op=acquire), whether this task freed the slot again (with O(activate), the host activated).
  returned: op is acquire and the slot was granted
  type: bool
  sample: true
failure:
  description:
    - O(op=acquire) with O(activate), the step that failed (named as the tasks of the role's C(tasks/hold.yml)
      are), its message and the reboot command's rc; null when the host was activated.
  returned: op is acquire and the slot was granted
  type: dict
  sample: {step: Finalize the staged deployment and reboot, msg: "The host did not come back ...", rc: null}
lease_written:
  description: O(op=acquire), whether this task recorded the activated host in its rollout lease (O(activate) with O(lease)).
  returned: op is acquire and the slot was granted
  type: bool
  sample: true
reboot:
  description: O(op=acquire) with O(activate), the reboot's result as M(fleetos.layering.os_reboot) returns it.
  returned: op is acquire with activate and the slot was granted
  type: dict
  sample: {rebooted: true, boot_id_before: "8c6d...", boot_id: "1f0e...", elapsed: 11.2}
reason:
  description: O(op=acquire), why no slot was granted (the run stopped, FleetLock gave none, every slot of the pool is held by hosts that did not come back).
  returned: op is acquire
  type: str
  sample: "2 activation(s) failed (node02, node05); 1 stage(s) failed (node07), max_failures is 3"
status:
  description: O(op=prepare), the host's deployments as M(fleetos.layering.os_info) returns them.
  returned: op is prepare and the host was read
  type: dict
  sample: {booted: {checksum: "5d2f..."}, staged: {checksum: "9c1e...", image: {digest: "sha256:3f5a..."}}}
booted:
  description: O(op=booted), the booted deployment as M(fleetos.layering.os_info) returns it.
  returned: op is booted and the host was read
  type: dict
  sample: {checksum: "5d2f...", image: {digest: "sha256:3f5a..."}}
roll_back:
  description: O(op=fail), whether the host is to be rolled back now.
  returned: op is fail
  type: bool
  sample: true
unlocked:
  description: O(op=release) and O(op=unlock), whether a FleetLock slot was freed.
  returned: op is release or unlock
  type: bool
  sample: true
stop_reason:
  description: O(op=canary), why the run stops after the canary batch, or null; O(op=drop), why the run stops
    (max_failures reached), or null.
  returned: op is canary or drop
  type: str
  sample: the canary batch failed (node01)
canary_verified:
  description: O(op=canary), whether the run stops after a verified canary batch.
  returned: op is canary
  type: bool
  sample: false
os_activate_result:
  description:
    - The host's activation record, also set as a fact - host, pool, mode, status (started, activated, failed),
      phase, holds_slot, target_digest, old_digest, booted_digest, granted_at, activate_start, reboot_start,
      reboot_end, verified_at, released_at, rolled_back, rollback_start, rollback_end, fleetlock, reason.
  returned: op is acquire (granted), rebooting, event, booted (when the target is booted), fail or release
  type: dict
  sample: {host: node01, pool: blue, status: activated, holds_slot: false, target_digest: "sha256:3f5a..."}
os_activate_summary:
  description:
    - O(op=close), the run - budgets, max_failures, started (in the order the slots were granted), failed, stage_failed,
      not_activated, stop_reason, canary, canary_verified, slots (each grant with granted_at, released_at,
      holds_slot, status), most_held (each pool's most slots held at once) and records (each host's record).
  returned: op is close
  type: dict
  sample: {budgets: {blue: 2}, started: [node01, node02], failed: [], stop_reason: null}
"""
