#!/usr/bin/python
# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: bootc_switch
short_description: Stage a bootc switch to a digest-pinned container image
version_added: 0.1.0
description:
  - Makes a bootc host stage a container image given by digest for its next boot, with
    C(bootc switch), when the deployment it would move to next is not already at that digest.
  - Images are compared by digest, never by reference string - the digest the deployment's
    reference pins or the manifest digest bootc reports (C(imageDigest)); another tag or
    spelling of the same digest is not a change. When O(labels) name the image's ostree
    commit, the staged deployment's commit is checked against it as well.
  - By default the deployment is staged with C(--download-only) - an unplanned reboot boots
    the current deployment again - so that staging is the first phase of a two-phase rollout;
    the second phase applies it with C(bootc upgrade --from-downloaded) and a reboot.
  - Never reboots the host (never passes C(--apply)). RV(staged) tells whether the image waits in a
    staged deployment for the activation; RV(reboot_required) whether an ordinary reboot applies it
    (not a download-only one).
  - Bad input (an unknown transport, an image with a tag and no digest without O(allow_tag),
    an image whose O(labels) say it is not bootable) and a busy bootc fail before anything is staged.
  - Implemented as an action plugin, it runs C(bootc) on the host over the connection and decides on
    the controller, so the host needs no Python interpreter, only bootc, coreutils and a POSIX shell;
    skopeo to resolve a V(registry) tag, C(tar) to read an V(oci-archive). O(auth_file) is copied (0600)
    to C(/run/ostree/auth.json), where bootc reads it, by a shell script on the host for the switch only,
    and what was there is put back.
author:
  - fleetos.layering contributors (@fleetos)
extends_documentation_fragment:
  - fleetos.layering.attributes
  - fleetos.layering.retries
  - fleetos.layering.executables.skopeo
  - fleetos.layering.executables.bootc
attributes:
  check_mode:
    support: full
    details:
      - Predicts C(changed) and the diff from C(bootc status); never calls C(bootc switch) and
        never touches the sysroot lock or C(/run/ostree/auth.json). A tag (with O(allow_tag=true))
        is still resolved on the host, reading only the manifest or the layout's C(index.json).
  diff_mode:
    support: full
  idempotent:
    support: full
options:
  image:
    description:
      - The image as bootc names it for O(transport).
      - For V(registry) and V(containers-storage), C(registry[:port]/repository@sha256:<64 hex digits>);
        a reference with only a tag is refused unless O(allow_tag=true) (V(registry) only). With a tag and a
        digest, the digest decides and bootc gets only the digest.
      - For V(oci) and V(oci-archive), C(/PATH[:REFERENCE]) of an OCI layout directory or archive on the
        host; its digest goes in O(digest).
    type: str
    required: true
  transport:
    description:
      - The transport, as C(bootc switch --transport) names it.
    type: str
    choices: [registry, containers-storage, oci, oci-archive]
    default: registry
  digest:
    description:
      - The manifest digest of an V(oci) or V(oci-archive) image, C(sha256:<64 hex digits>).
      - The layout's C(index.json) must name this digest for the reference, otherwise nothing is staged. It is
        read on the host with C(cat) (V(oci)) or C(tar -x -O) (V(oci-archive)).
      - Required for those transports unless O(allow_tag=true), which takes the digest C(index.json) names.
      - Refused for V(registry) and V(containers-storage), whose digest is part of O(image).
    type: str
  allow_tag:
    description:
      - Accept an image without a digest and resolve it to one on the host before anything else - a
        V(registry) tag with C(skopeo inspect --raw) (the manifest only), an V(oci) or V(oci-archive)
        reference from the layout's C(index.json).
      - A tag resolved on each host can give hosts different digests; prefer resolving once and
        passing the digest.
    type: bool
    default: false
  download_only:
    description:
      - Stage with C(bootc switch --download-only), so that the staged deployment is not applied by an
        ordinary reboot, only after C(bootc upgrade --from-downloaded) (or C(bootc switch --from-downloaded)).
      - bootc added C(--download-only) to C(switch) after C(upgrade); an older bootc fails the task with
        a message that says so and nothing is staged. Set V(false) there to stage a deployment that the
        next reboot applies.
      - Applies when the module stages a deployment; an existing staged deployment at the digest is left
        as it is (its C(download_only) is in RV(after)).
    type: bool
    default: true
  retain:
    description:
      - Pass C(--retain) - keep a reference to the currently booted image, so that it is not garbage-collected.
    type: bool
    default: false
  enforce_container_sigpolicy:
    description:
      - Pass C(--enforce-container-sigpolicy) - require that C(/etc/containers/policy.json) has a default
        policy that requires signatures.
    type: bool
    default: false
  labels:
    description:
      - The labels of the image (for example RV(fleetos.layering.os_image_pull#module:labels)), when the caller
        has them.
      - When given, an image without C(containers.bootc) or C(ostree.bootable) set is refused before anything is
        staged, and the commit the labels name (C(ostree.commit)) must be the staged deployment's commit - unless
        the labels name C(ostree.final-diffid), since such an image may have layers above its ostree base, which the host
        imports as a merge commit of its own, so the label does not name the staged commit.
      - When omitted, the module does not check that the image is bootable; C(bootc switch) refuses an image
        it cannot deploy.
    type: dict
  auth_file:
    description:
      - An auth file on the host (containers C(auth.json) format) with the registry credentials.
      - bootc reads only C(/run/ostree/auth.json), C(/etc/ostree/auth.json) and C(/usr/lib/ostree/auth.json); this
        file is copied to C(/run/ostree/auth.json) (mode 0600) for the duration of the switch, and the previous
        content is restored, or the copy removed, afterwards. It never appears in the command line.
      - The same file is given to C(skopeo) to resolve a tag.
    type: path
requirements:
  - bootc, coreutils and a POSIX shell on the managed host (no Python)
  - skopeo on the managed host, to resolve a V(registry) tag (O(allow_tag=true))
  - tar on the managed host, to read the C(index.json) of an V(oci-archive) image
seealso:
  - module: fleetos.layering.bootc_info
  - module: fleetos.layering.rpm_ostree_rebase
  - name: bootc switch
    description: The command this module runs.
    link: https://bootc-dev.github.io/bootc/man/bootc-switch.8.html
notes:
  - bootc waits without end for the ostree sysroot lock. Before switching, the module checks the lock
    (C(/sysroot/ostree/lock)) without waiting, retries O(retries) times O(retry_delay) seconds apart, and
    fails with "bootc is busy" when it is still held.
  - libostree takes that lock with an open file description lock (C(fcntl)), which C(flock) cannot see. The
    check runs C(stat) of the lock file and reads C(/proc/locks), the kernel's table of held locks, and looks
    for a lock on that file's device and inode.
  - An OCI index (multi-architecture) digest is reported by bootc as the host's per-platform manifest digest;
    the module accepts a deployment whose reference pins the index digest or whose C(imageDigest) is the
    given digest. An OCI layout entry should be a manifest, not an index.
"""

EXAMPLES = r"""
- name: Stage the image, download-only, for a later maintenance window
  fleetos.layering.bootc_switch:
    image: registry.example.com/os/rhel-bootc@sha256:f55ba58f2e79c31ae4735067a47db9c8aee2e6efdf086755fe04c7f25d4575a3
    retain: true
  register: __os_switch

- name: Apply it in the window (the reboot is a separate, planned step)
  ansible.builtin.raw: bootc upgrade --from-downloaded
  when: __os_switch.staged and __os_switch.after.download_only
  changed_when: true

- name: Stage an image from an OCI archive on the host, checking its labels
  fleetos.layering.bootc_switch:
    image: /var/tmp/os.ociarchive:1.4
    transport: oci-archive
    digest: sha256:0b5c2e1b0f0c5fbd35d0c4f8d0f3f1b2f4d5d2d0c1f2e3d4c5b6a79880716253
    labels: "{{ __os_image.labels }}"

- name: Stage a tagged image with a private registry's credentials
  fleetos.layering.bootc_switch:
    image: registry.example.com/os/rhel-bootc:stable
    allow_tag: true
    auth_file: /etc/fleetos/auth.json
"""

RETURN = r"""
image:
  description: The image given to bootc (pinned to the digest for V(registry) and V(containers-storage)).
  returned: success
  type: str
  sample: registry.example.com/os/rhel-bootc@sha256:f55ba58f2e79c31ae4735067a47db9c8aee2e6efdf086755fe04c7f25d4575a3
transport:
  description: The bootc transport.
  returned: success
  type: str
  sample: registry
digest:
  description: The target digest (resolved from the tag or the layout with O(allow_tag=true)).
  returned: success
  type: str
  sample: sha256:f55ba58f2e79c31ae4735067a47db9c8aee2e6efdf086755fe04c7f25d4575a3
before:
  description:
    - The deployment bootc moved to next before the task - the queued rollback, else the staged one, else the booted one.
    - Each value is V(null) when unknown.
  returned: success
  type: dict
  contains:
    reference:
      description: Its image as bootc tracks it.
      type: str
      returned: always
      sample: registry.example.com/os/rhel-bootc@sha256:0b5c2e1b0f0c5fbd35d0c4f8d0f3f1b2f4d5d2d0c1f2e3d4c5b6a79880716253
    transport:
      description: Its bootc transport.
      type: str
      returned: always
      sample: registry
    digest:
      description: The digest its reference pins, else the manifest digest bootc reports.
      type: str
      returned: always
      sample: sha256:0b5c2e1b0f0c5fbd35d0c4f8d0f3f1b2f4d5d2d0c1f2e3d4c5b6a79880716253
    checksum:
      description: Its ostree commit.
      type: str
      returned: always
      sample: 26836632adf6228d64ef07a26fd3efaf177104efd1f341a2cf7909a3e4e2c72c
    download_only:
      description: Whether it is a staged deployment in download-only mode.
      type: bool
      returned: always
      sample: false
  sample:
    reference: registry.example.com/os/rhel-bootc@sha256:0b5c2e1b0f0c5fbd35d0c4f8d0f3f1b2f4d5d2d0c1f2e3d4c5b6a79880716253
    transport: registry
    digest: sha256:0b5c2e1b0f0c5fbd35d0c4f8d0f3f1b2f4d5d2d0c1f2e3d4c5b6a79880716253
    checksum: 26836632adf6228d64ef07a26fd3efaf177104efd1f341a2cf7909a3e4e2c72c
    download_only: false
after:
  description:
    - The deployment bootc moves to next after the task, with the same keys as RV(before).
    - In check mode, the predicted one; C(checksum) is V(null) when the image is not pulled yet.
  returned: success
  type: dict
  sample:
    reference: registry.example.com/os/rhel-bootc@sha256:f55ba58f2e79c31ae4735067a47db9c8aee2e6efdf086755fe04c7f25d4575a3
    transport: registry
    digest: sha256:f55ba58f2e79c31ae4735067a47db9c8aee2e6efdf086755fe04c7f25d4575a3
    checksum: 3c6dad657109522e0b2e49bf44b5420f16f0b438b5b9357e5132211cfbad135d
    download_only: true
staged:
  description:
    - Whether RV(after) is the staged deployment, at the target digest, waiting for the activation - a reboot,
      after C(bootc upgrade --from-downloaded) when it is download-only (C(download_only) in RV(after)).
    - V(false) when the host is booted at the digest with nothing staged (or boots it next through a queued
      rollback).
  returned: success
  type: bool
  sample: true
  version_added: 0.3.0
reboot_required:
  description:
    - Whether the next boot changes the deployment - a staged deployment that is not download-only, or a
      queued rollback; the RV(fleetos.layering.bootc_info#module:reboot_required) of the host after the task.
    - V(false) for a download-only staged deployment (the default O(download_only=true)), which an ordinary
      reboot does not apply; RV(staged) tells that it waits for the activation.
  returned: success
  type: bool
  sample: false
diff:
  description: The next deployment's image, transport and digest before and after, as text.
  returned: success
  type: dict
  sample:
    before: "reference: registry.example.com/os/rhel-bootc@sha256:0b5c...6253\ntransport: registry\ndigest: sha256:0b5c...6253\n"
    after: "reference: registry.example.com/os/rhel-bootc@sha256:f55b...75a3\ntransport: registry\ndigest: sha256:f55b...75a3\n"
"""
