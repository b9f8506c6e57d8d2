#!/usr/bin/python
# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: os_stage_phase
short_description: Stage an OS image for the next boot in one task, recording the stage as the role os_stage does
version_added: 0.3.0
description:
  - The role C(fleetos.layering.os_stage) in one task, so that a fleet pays one task per host and phase. Checks that
    the image is digest-pinned, looks on the host for the registry credentials O(auth_file) and a container layer
    cache in one command, fetches the layers first when O(pull) asks for it (as M(fleetos.layering.os_image_pull)
    does, the digest checked before any blob), and stages the image with its finalization locked as
    M(fleetos.layering.os_image_stage) does.
  - O(phase=all) stages in this task. O(phase=start) does everything up to the long command (C(rpm-ostree rebase),
    C(bootc switch)), which then runs on the host as a job, detached; a later task with O(phase=finish), given the
    start's result as O(started), collects it. So every host stages at once, whatever the forks. A host that
    fetches the layers first stages whole in its finish.
  - A failed step is recorded, not raised - the result's RV(status) is V(failed) and RV(error) names the step and
    the cause - so that the play goes on and the host is never activated. Bad options fail the task.
  - Never reboots. Idempotent; an already staged or booted digest is not staged again.
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
    support: full
options:
  image:
    description: The image, C(registry/repository@sha256:<64 hex>), without an rpm-ostree transport.
    type: str
    required: true
  backend:
    description: The tool that manages the host, V(rpm-ostree) (C(rpm-ostree rebase)) or V(bootc) (C(bootc switch)).
    type: str
    choices: [rpm-ostree, bootc]
    default: rpm-ostree
  transport:
    description: How the image is fetched and verified; on V(bootc), V(registry) or V(signed).
    type: str
    choices: [registry, remote, signed]
    default: registry
  ostree_remote:
    description: The ostree remote whose signature configuration verifies the image (O(transport=remote)).
    type: str
  lock_finalization:
    description:
      - Stage with C(--lock-finalization); only C(rpm-ostree finalize-deployment) boots it. On a bootc host,
        C(bootc switch --download-only).
    type: bool
    default: true
  auth_file:
    description:
      - Registry credentials on the host, in containers C(auth.json) format; used when the file exists there,
        else skopeo and rpm-ostree use their default files.
    type: path
  pull:
    description:
      - Fetch the image's layers before the stage. V(auto) does it only when the host keeps a container layer
        cache its rpm-ostree reuses, C(/sysroot/ostree/container-cache), and O(phase=all); elsewhere the stage's
        tool pulls the layers itself and a separate fetch would download them twice. V(true) or V(false) force it.
    type: str
    choices: [auto, "true", "false"]
    default: auto
  phase:
    description: V(all) stages here; V(start) starts the stage detached; V(finish) collects what O(started) began.
    type: str
    choices: [all, start, finish]
    default: all
  timeout:
    description:
      - Seconds the stage's long command may run on the host from its start. The detached job ends the command
        past it (coreutils C(timeout)) and the finish records the stage failed; the finish waits that long and
        15 s more for the job.
    type: int
    default: 3600
  started:
    description: The result of the task with O(phase=start) (registered), for O(phase=finish).
    type: dict
requirements:
  - a POSIX shell on the managed host, and its C(rpm-ostree) or C(bootc) (no Python)
notes:
  - Implemented as an action plugin over the connection, as M(fleetos.layering.os_image_stage); needs root on the
    host (C(become)).
seealso:
  - module: fleetos.layering.os_image_stage
  - module: fleetos.layering.os_image_pull
"""

EXAMPLES = r"""
- name: Start the stage on every host at once
  fleetos.layering.os_stage_phase:
    image: registry.example.com/fleet/os@sha256:0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0
    phase: start
  register: __stage_started

- name: Collect the stage
  fleetos.layering.os_stage_phase:
    image: registry.example.com/fleet/os@sha256:0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0
    phase: finish
    started: "{{ __stage_started }}"
  register: os_stage_result
"""

RETURN = r"""
status:
  description: V(staged), V(failed), or V(started) after a start that left the stage to the finish.
  returned: always
  type: str
  sample: staged
stage_start:
  description: When the stage started, seconds since the epoch on the controller's clock.
  returned: always
  type: float
staged_at:
  description: When the stage ended, as the host saw the job end, on the controller's clock.
  returned: always
  type: float
staged_checksum:
  description: The checksum of the staged deployment at the target, which the activation applies; null when the host
    boots the target already, in check mode, or after a failure.
  returned: always
  type: str
digest:
  description: The image's manifest digest.
  returned: always
  type: str
reboot_required:
  description: Whether an ordinary reboot changes the deployment (V(false) for a bootc download-only deployment).
  returned: always
  type: bool
fetched_blobs:
  description: How many blobs the fetch before the stage downloaded.
  returned: always
  type: int
error:
  description: The step that failed and why, or null.
  returned: always
  type: str
  sample: "stage the image: The stage did not finish within 300 s."
job:
  description: The detached job of a start, for the finish (empty when the layers are fetched first).
  returned: when O(phase=start)
  type: str
pull_first:
  description: Whether the finish fetches the layers first and then stages whole.
  returned: when O(phase=start)
  type: bool
auth_file:
  description: The credentials file found on the host (empty when O(auth_file) is not there), for the finish.
  returned: when O(phase=start)
  type: str
"""
