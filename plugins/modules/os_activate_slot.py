#!/usr/bin/python
# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: os_activate_slot
short_description: Activate a host within its pool's disruption budget, from its staged image to verified
version_added: 0.3.0
description:
  - One host's activation, in one place, on the controller - the engine of the role C(fleetos.layering.os_activate).
    O(op=acquire) takes a slot of the host's pool, then finalizes and reboots the host into its target, waits for
    its new boot id, verifies the booted digest, runs the health command, frees the slot and records the host in
    its rollout lease; on a failure it rolls the host back through the same reboot path, or records why it
    failed, and frees the slot unless the host keeps it. Everything that runs on the host is a plain command over
    the connection (no Python there).
  - "The user's task files are the only steps that are tasks of their own: with O(hooks), the activation stops
    before each one and sets the fact C(os_activate_next) to V(pre), V(health) or V(post); after the task file ran,
    O(op=continue) takes the activation on from there. A task file that fails is handed to O(op=fail), which rolls
    the host back (health) or records the failure (pre, post) and frees the slot."
  - "With O(park_boot), the task that reboots the host does not wait for the new boot: it sets C(os_activate_next) to
    V(boot), and the next O(op=continue) waits for it, verifies the host and goes on. The strategy
    C(fleetos.layering.slots) runs that task no earlier than four fifths of the shortest boot the run has seen (at
    once before the first boot), so that a host that reboots holds its budget slot but no fork."
  - The slots of one run live in a I(book), a private file on the controller that every fork of the run reads and
    writes under an exclusive file lock, so that the forks share one counting semaphore per pool. O(op=open)
    makes the book (and removes the books of this user's runs whose process is gone), O(op=close) returns the
    summary and removes it. O(op=drop) takes a host that will not ask for its slot out of the book (its stage
    failed, counted toward O(max_failures), or left nothing to activate); O(op=canary) closes the canary batch;
    O(op=unlock) only frees a FleetLock slot that a killed run left.
  - A host is activated as soon as its pool has a free slot (a sliding window, not waves). Free slots go to the
    waiting hosts of a pool in rollout order. A slot is owned by its host and freed when the host is verified
    healthy, rolled back, or never disrupted. A host that went down and did not come back, or whose rollback
    failed, keeps its slot. Once O(max_failures) hosts failed (activations, and the stages of hosts of the book),
    no new slot is granted.
  - "With O(fleetlock), a host that got a slot of the book also takes one from FleetLock (C(POST /v1/pre-reboot)
    with the header C(fleet-lock-protocol: true)), from the host itself, asked again every C(retry_delay) seconds
    for up to C(timeout) seconds, and frees it with C(POST /v1/steady-state). FleetLock then shares the budget
    with other controllers, sliced jobs and other reboot managers."
  - A worker that outlives its run's process (ansible-playbook killed) stops waiting for a slot, takes none from
    FleetLock, does not reboot the host, and after a reboot changes nothing more, so that a rerun finds the host
    as the killed run left it.
author:
  - fleetos.layering contributors (@fleetos)
extends_documentation_fragment:
  - fleetos.layering.attributes
attributes:
  check_mode:
    support: partial
    details:
      - Takes and frees slots as in a real run, but reboots nothing.
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
    choices: [open, acquire, continue, fail, drop, canary, close, unlock]
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
      - O(op=open), the hosts to activate in rollout order, each a mapping with C(host), C(pool) and, optionally,
        C(first) - the hosts after it in its pool's order wait up to 10 seconds for it to ask.
      - Optionally, the maintenance windows of the host's pool, the same on every host of the pool -
        C(windows) (a list of C(days), C(start) and C(length_minutes), empty for none), C(windows_timezone)
        (an IANA zone name, V(localtime) or V(UTC)) and C(activation_seconds), the time one activation is
        expected to take. O(op=acquire) grants a slot only inside a window with that long left in it; without
        C(activation_seconds), the longest activation of the pool this run measured, or the reboot timeout
        before the first one ended. A host refused for its window is named in the summary's
        C(windows_closed) with its pool's next window. A host that goes C(first) only verifies, so no window holds it.
    type: list
    elements: dict
  budgets:
    description:
      - O(op=open), each pool's number of slots, a mapping of pool name to count.
    type: dict
  max_failures:
    description:
      - O(op=open), once this many hosts failed no new slot is granted; at least V(1).
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
  reason:
    description:
      - O(op=drop), why the host will not be activated (shown in the report).
    type: str
  failed:
    description:
      - O(op=drop), whether the host failed (its stage did) - counted toward O(max_failures).
    type: bool
    default: false
  mode:
    description:
      - O(op=acquire), how the host is activated - V(finalize) (boot the staged deployment),
        V(rollback) (boot the previous one) or V(verify) (booted already by a killed run, nothing rebooted).
    type: str
    default: finalize
    choices: [finalize, rollback, verify]
  target_digest:
    description:
      - O(op=acquire), the manifest digest the host must boot.
    type: str
  old_digest:
    description:
      - O(op=acquire), the digest the host runs before, when the caller knows it (the deployments are read
        otherwise).
    type: str
  staged_checksum:
    description:
      - O(op=acquire) in mode V(finalize) on rpm-ostree, the checksum of the staged deployment to finalize, when
        the caller knows it (from the stage). Without it, or on bootc, the deployments are read before the reboot
        and must show the target staged.
    type: str
  backend:
    description:
      - O(op=acquire), the tool that manages the host's deployments - its finalize and rollback commands and its
        status (C(rpm-ostree status --json), C(bootc status --json)).
    type: str
    default: rpm-ostree
    choices: [rpm-ostree, bootc]
  timeout:
    description:
      - O(op=acquire), seconds to wait for a slot of the book. A host that Ansible drops from the
        play while it holds a slot (unreachable in a task of yours) never frees it; the hosts that
        wait for it give up after this long.
    type: int
    default: 3600
  command_timeout:
    description:
      - Seconds each command of the activation on the host (a read, a lease write, the reboot command, a FleetLock
        request) may take over the connection before the connection is cut, on the controller's side; the host
        then counts as not answering. A host that hangs without going down (its link or its sshd stops in the
        middle of a command) fails its step instead of holding its pool's slot and the run. Needs a connection
        that runs a process on the controller (ssh, local). The health command has its own bound,
        O(health.timeout).
      - Kept in the book by O(op=acquire) for the O(op=continue) and O(op=fail) that follow.
    type: int
    default: 300
  poll_interval:
    description:
      - O(op=acquire), seconds between two looks at the book while waiting.
    type: float
    default: 0.1
  lease:
    description:
      - O(op=acquire), the run's rollout lease (keys C(rollout), C(owner), C(started_at) and optionally C(ttl)),
        written on the host with M(fleetos.layering.os_rollout_lease)'s code - phase V(rebooting) to the target
        before the host waits for its slot (a write that fails takes no slot and says why), then V(activated) (or,
        with O(lease_release), released with phase V(done)) once the slot is freed, or V(failed) for a failed host
        that is up again. Empty or omitted, no lease is written.
    type: dict
  lease_release:
    description:
      - O(op=acquire), release the activated host's lease (phase V(done)) instead of recording phase V(activated).
    type: bool
    default: false
  park_boot:
    description:
      - O(op=acquire), leave the wait for the new boot to the next O(op=continue) (C(os_activate_next) is V(boot)),
        so that a host that reboots holds no fork with the strategy C(fleetos.layering.slots). Not in check mode,
        where nothing is rebooted; a rollback's reboot is waited for in its task.
    type: bool
    default: false
  soft_reboot:
    description:
      - O(op=acquire), how the host reboots into its staged deployment. V(never), a full reboot. V(auto), a soft
        reboot (C(systemctl soft-reboot), userspace only, on the running kernel) where the backend and the staged
        deployment allow one, else a full reboot; the result's C(activation) says which, and
        C(activation_reason) why not soft. On O(backend=bootc) the staged deployment is soft-reboot capable when
        C(bootc status) says so (C(softRebootCapable)), and its finalize command gets C(--soft-reboot auto)
        (bootc 1.7 and later); O(backend=rpm-ostree) has no soft reboot. A soft reboot keeps the boot id, so the wait
        for it reads the boot id and C(systemctl show -P SoftRebootsCount) (systemd 256 and later). A rollback
        reboots fully.
      - V(required), a soft reboot or none. Before the slot is taken the host's deployments are read (bootc); a host
        that cannot soft-reboot into its staged deployment is not activated (the result's C(granted) is false and
        C(declined) true, with the reason); it keeps its staged deployment, takes no slot and is no failure.
    type: str
    choices: [never, auto, required]
    default: never
  rollback:
    description:
      - O(op=acquire), whether a host that fails verification or its health check is rolled back - the backend's
        rollback command, through the activation's reboot path, then the previous digest verified.
    type: bool
    default: true
  reboot:
    description:
      - O(op=acquire), how the host is rebooted and waited for, as M(fleetos.layering.os_reboot) does it; the
        command is the backend's (C(rpm-ostree finalize-deployment --allow-unlocked CHECKSUM), C(bootc upgrade
        --from-downloaded --apply), or the rollback command).
    type: dict
    suboptions:
      boot_time_command:
        description: Prints a value that changes on every boot.
        type: str
        default: cat /proc/sys/kernel/random/boot_id
      reboot_timeout:
        description: Seconds the host may take to come back; after that it is reported failed and keeps its slot.
        type: int
        default: 600
      poll_interval:
        description: Seconds between two reads of the boot id while the host answers, or a tenth of the time
          waited when that is more (once it is down, ssh tries to connect once a second, up to 30 times a read;
          through a jump host it does not, and the reads go on at that interval, at most 2 s apart).
        type: float
        default: 1.0
      connect_timeout:
        description: Seconds each read may take to connect.
        type: int
        default: 5
  health:
    description:
      - O(op=acquire), the health command - a shell line on the host that must exit 0, tried C(retries) times
        C(delay) seconds apart after the verified boot. A host that never passes is rolled back (O(rollback)).
    type: dict
    suboptions:
      command:
        description: The command; empty or omitted, none runs.
        type: str
      retries:
        description: How many times it is tried.
        type: int
        default: 3
      delay:
        description: Seconds between two tries.
        type: float
        default: 5
      timeout:
        description:
          - Seconds one try may take. The command runs under coreutils C(timeout) on the host (TERM, then KILL 5 s
            later), so that a hung check ends there too; the controller cuts the connection 10 s after the bound.
          - A try that did not finish is not tried again - the host fails with
            C(the health command '...' did not finish within N s) and is rolled back (O(rollback)), as a failed
            check is.
        type: int
        default: 300
  hooks:
    description:
      - O(op=acquire), which task files of the user run between the steps - V(pre) before the reboot, V(health)
        after the verified boot (the host is verified after them), V(post) after the health check. The activation
        stops before each (the fact C(os_activate_next)); O(op=continue) takes it on after it.
    type: dict
    suboptions:
      pre:
        description: Pre-activate tasks run (not in mode V(verify)).
        type: bool
        default: false
      health:
        description: Health tasks run.
        type: bool
        default: false
      post:
        description: Post-activate tasks run.
        type: bool
        default: false
  fleetlock:
    description:
      - O(op=acquire) and O(op=unlock), the FleetLock server that shares the budget; without C(url), none.
    type: dict
    suboptions:
      url:
        description: The server's base URL.
        type: str
      group:
        description: The FleetLock group, the host's pool.
        type: str
      id:
        description: The host's FleetLock id; defaults to O(host).
        type: str
      timeout:
        description: Seconds to wait for a FleetLock slot; after that the host gives its book slot back and the run stops.
        type: int
        default: 600
      retry_delay:
        description: Seconds between two FleetLock requests.
        type: float
        default: 5
      request_timeout:
        description:
          - Seconds one FleetLock request may take (C(curl --max-time) on the host); a server that does not answer
            in time refused, and the request is made again after C(retry_delay) until C(timeout).
        type: int
        default: 30
  task:
    description:
      - O(op=fail), the name of the task that failed.
    type: str
  result:
    description:
      - O(op=fail), the result of the task that failed (its C(msg) and C(rc) go into the reason).
    type: dict
requirements:
  - a controller whose forks of one run share a file system, as every ansible-playbook run has
seealso:
  - module: fleetos.layering.os_reboot
  - module: fleetos.layering.os_rollout_lease
  - name: The FleetLock protocol
    description: The protocol that Zincati and airlock speak.
    link: https://coreos.github.io/zincati/development/fleetlock/protocol/
notes:
  - The role C(fleetos.layering.os_activate) runs these operations, in a play with the strategy
    C(fleetos.layering.slots); use this module directly only to build another activation flow.
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

- name: Activate the host within its pool's budget, with a drain before the reboot
  block:
    - name: Take a slot, then stop before the pre-activate tasks
      fleetos.layering.os_activate_slot:
        op: acquire
        book: "{{ book.book }}"
        target_digest: sha256:3f5a9c0e1d2b4a6f8e7c9b0a1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e
        hooks:
          pre: true
        health:
          command: systemctl is-system-running

    - name: Drain the node
      ansible.builtin.raw: /usr/local/bin/drain
      when: os_activate_next == 'pre'

    - name: Reboot into the target, verify it, free the slot
      fleetos.layering.os_activate_slot:
        op: continue
        book: "{{ book.book }}"
      when: os_activate_next == 'pre'
  rescue:
    - name: Roll back or record the failure
      fleetos.layering.os_activate_slot:
        op: fail
        book: "{{ book.book }}"
        task: "{{ ansible_failed_task.name }}"
        result: "{{ ansible_failed_result }}"
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
  description: O(op=acquire), whether the host got a slot.
  returned: op is acquire
  type: bool
  sample: true
reason:
  description: O(op=acquire), why no slot was granted (the run stopped, FleetLock gave none, every slot of the pool is held by hosts that did not come back).
  returned: op is acquire
  type: str
  sample: "2 activation(s) failed (node02, node05); 1 stage(s) failed (node07), max_failures is 3"
released:
  description: O(op=acquire), O(op=continue) and O(op=fail), whether this task ended the activation and freed the slot
    (unless the host keeps it).
  returned: when the activation ended in this task
  type: bool
  sample: true
reboot:
  description: O(op=acquire) and O(op=continue), the reboot's result as M(fleetos.layering.os_reboot) returns it, with
    the C(command) that rebooted the host.
  returned: when this task rebooted the host
  type: dict
  sample: {command: "rpm-ostree finalize-deployment --allow-unlocked 5d2f...", rebooted: true, boot_id: "1f0e...", elapsed: 11.2}
booted:
  description: O(op=acquire) and O(op=continue), the booted deployment as M(fleetos.layering.os_info) returns it.
  returned: when this task verified the host
  type: dict
  sample: {checksum: "5d2f...", image: {digest: "sha256:3f5a..."}}
rollback:
  description: Whether the failed host was rolled back (C(rolled_back)), the C(command) that rolled it back, and why it
    was not (C(msg)).
  returned: when this task rolled the host back
  type: dict
  sample: {rolled_back: true, command: rpm-ostree rollback --reboot}
unlocked:
  description: Whether a FleetLock slot was freed.
  returned: when the activation ended in this task, and op is unlock
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
  returned: op is acquire (granted), continue or fail
  type: dict
  sample: {host: node01, pool: blue, status: activated, holds_slot: false, target_digest: "sha256:3f5a..."}
os_activate_next:
  description:
    - The hook to run before O(op=continue) - V(pre), V(health) or V(post) - or V(boot) (the host reboots, and
      O(op=continue) waits for its new boot), or null when the activation ended; also set as a fact.
  returned: op is acquire, continue or fail
  type: str
  sample: pre
os_activate_summary:
  description:
    - O(op=close), the run - budgets, max_failures, started (in the order the slots were granted), failed, stage_failed,
      not_activated, stop_reason, canary, canary_verified, slots (each grant with granted_at, released_at,
      holds_slot, status), most_held (each pool's most slots held at once), records (each host's record) and
      windows_closed (each pool whose maintenance window refused a slot - reason, hosts, next_open in UTC,
      next_open_local, zone).
  returned: op is close
  type: dict
  sample: {budgets: {blue: 2}, started: [node01, node02], failed: [], stop_reason: null}
"""
