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
  - The stage's long command takes seconds to minutes. With O(phase=all) it runs in this task, which holds an
    Ansible fork all that time. With O(phase=start) the task does everything that comes before it (the checks,
    the reads, the early return of a host that has the image already, check mode) and starts it on the host,
    detached, as a job, and returns at once with the job's id in RV(job); a later task with O(phase=finish) and
    that O(job) waits for it and returns what O(phase=all) returns. So every host stages at the same time with a
    few forks.
  - A job is one shell script on the host that does what O(phase=all) does - O(auth_file) put in place and put
    back on every path, the same command, retried as rpm-ostree's client retries it while another transaction is
    in progress - and writes the command's output and exit status to the job's directory, a private directory
    under C(/run/fleetos) (gone with a reboot, as the job is). Where systemd manages the host, the job is a
    transient unit, C(fleetos-stage-*) (C(systemd-run)), in the journal; elsewhere it runs under C(setsid).
  - On bootc, the ostree sysroot lock is checked (and waited for, as many times as O(phase=all) does) before the
    job starts; bootc waits for a lock taken after that on the host, as far as the finishing task's O(timeout)
    (that wait cannot be bounded on the host without bootc's help).
author:
  - fleetos.layering contributors (@fleetos)
extends_documentation_fragment:
  - fleetos.layering.attributes
attributes:
  check_mode:
    support: full
    details:
      - Predicts C(changed) and the diff from the deployments; stages nothing. RV(staged_checksum) is null.
      - O(phase=start) starts no job (RV(job) is null); O(phase=finish) with a O(job) collects the job that a
        task out of check mode started.
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
      - Its content never leaves the host; with O(phase=start) the job copies it in place and puts back what was
        there when the command ends.
    type: path
  phase:
    description:
      - V(all) stages in this task.
      - V(start) does all that comes before the long command and starts it on the host as a job, returning at
        once with the job's id in RV(job), RV(started) true and RV(staged) false until the job is finished. A host
        with nothing to do (the image is there already), and check mode, return what V(all) returns, with
        RV(job) null.
      - V(finish) waits for O(job) and returns what V(all) returns once the job has ended; the job's directory is
        removed. Give it the options the start had. Without a O(job) (null or empty, when the start had nothing
        to do), V(finish) is V(all).
    type: str
    choices: [all, start, finish]
    default: all
  job:
    description:
      - O(phase=finish), the RV(job) a task with O(phase=start) returned on this host.
    type: str
  timeout:
    description:
      - O(phase=finish), seconds to wait for the job to end. Past it the task fails and the job keeps running; a
        later task with O(phase=finish) and the same O(job) collects it. V(0) reads the job once.
    type: int
    default: 3600
  job_timeout:
    description:
      - O(phase=start), seconds the job may run on the host from its start, retries included. Past it coreutils
        C(timeout) on the host ends the long command (TERM, then KILL 10 s later), and the task with O(phase=finish)
        fails with C(The stage did not finish within N s). V(0), no bound - the job runs until the command ends.
    type: int
    default: 0
  poll_interval:
    description:
      - O(phase=finish), seconds between two looks at the job; more than V(0). The looks are taken on the host, where
        one command waits for the job's end for up to 30 s.
    type: float
    default: 2.0
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

- name: Start the stage on every host at once; each task returns as soon as the host runs it
  fleetos.layering.os_image_stage:
    image: registry.example.com/os/fleet-os@sha256:4f2a1c0e9d8b7a6f5e4d3c2b1a0f9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f
    backend: "{{ status.backend }}"
    phase: start
  register: stage_job

- name: Wait for each host's stage and read its result
  fleetos.layering.os_image_stage:
    image: registry.example.com/os/fleet-os@sha256:4f2a1c0e9d8b7a6f5e4d3c2b1a0f9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f
    backend: "{{ status.backend }}"
    phase: finish
    job: "{{ stage_job.job }}"
    timeout: 1800
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
  description:
    - The ostree checksum of that staged deployment; null when none waits, in check mode, and while a job that
      O(phase=start) started runs.
  returned: success
  type: str
reboot_required:
  description: Whether an ordinary reboot changes the deployment, as the backend's module returns it.
  returned: success, but not when O(phase=start) started a job
  type: bool
before:
  description: The next deployment before the task (reference, digest, checksum), as the backend's module returns it.
  returned: success
  type: dict
after:
  description: The next deployment after the task.
  returned: success, but not when O(phase=start) started a job
  type: dict
job:
  description:
    - O(phase=start), the id of the job that stages the image on the host (its directory there), for the task
      with O(phase=finish); null when nothing was started (nothing to do, or check mode).
  returned: when O(phase=start)
  type: str
  sample: /run/fleetos/stage.Xy3kQ9aB2c
started:
  description: O(phase=start), whether a job was started.
  returned: when O(phase=start)
  type: bool
  sample: true
ended_ago:
  description:
    - O(phase=finish) with a job, how many seconds before it was read the job ended, by the host's clock (the
      stage's end is then the controller's time minus this); null when the host cannot tell.
  returned: when O(phase=finish) collected a job
  type: float
  sample: 2.5
"""
