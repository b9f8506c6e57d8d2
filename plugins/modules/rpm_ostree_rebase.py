#!/usr/bin/python
# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: rpm_ostree_rebase
short_description: Stage an rpm-ostree rebase to a digest-pinned container image
version_added: 0.1.0
description:
  - Makes the next boot of an rpm-ostree host use a container image given by digest,
    staging a rebase with C(rpm-ostree rebase) when needed, or only verifies that the
    host is booted at that digest.
  - Images are compared by manifest digest, never by reference string, so another
    tag or another transport spelling of the same digest is not a change.
  - A multi-architecture image (an OCI index or a Docker manifest list) is already
    there when the deployment is at the index digest, or when the manifest digest the
    deployment reports is the index's manifest for the host's architecture. To learn
    it, the index is resolved on the host with C(skopeo inspect --raw), which reads
    only the manifest, when the next boot (the booted deployment for O(state=booted))
    reports another digest.
  - Never reboots the host; RV(reboot_required) tells whether a reboot is needed.
  - Implemented as an action plugin, it runs C(rpm-ostree) and C(skopeo) on the host over the
    connection and decides on the controller, so the host needs no Python interpreter, only
    rpm-ostree, skopeo (to resolve a tag or an index), coreutils and a POSIX shell. O(auth_file)
    is copied (0600) to C(/run/ostree/auth.json), where rpm-ostree reads it, by a shell script on
    the host for the rebase only, and what was there is put back.
author:
  - fleetos.layering contributors (@fleetos)
extends_documentation_fragment:
  - fleetos.layering.attributes
  - fleetos.layering.retries
  - fleetos.layering.executables.rpm_ostree
  - fleetos.layering.executables.skopeo
attributes:
  check_mode:
    support: full
    details:
      - Predicts C(changed) and the diff from C(rpm-ostree status); never calls
        C(rpm-ostree rebase). The tag (with O(allow_tag=true)) or the index is still
        resolved on the host, reading only the manifest.
  diff_mode:
    support: full
  idempotent:
    support: full
options:
  image:
    description:
      - The image, C(registry[:port]/repository@sha256:<64 hex digits>), without an
        rpm-ostree transport (choose it with O(transport)).
      - A reference with only a tag is refused unless O(allow_tag=true).
      - When the reference has both a tag and a digest, the digest decides and the
        reference given to rpm-ostree carries only the digest.
    type: str
    required: true
  allow_tag:
    description:
      - Accept an O(image) with a tag and no digest, and resolve the tag to a digest on
        the host with C(skopeo inspect --raw) (the manifest only) before anything else.
      - A tag resolved on each host can give hosts different digests; prefer resolving
        once and passing the digest.
    type: bool
    default: false
  transport:
    description:
      - How rpm-ostree fetches and verifies the image.
      - V(registry) writes C(ostree-unverified-registry:IMAGE).
      - V(remote) writes C(ostree-remote-image:REMOTE:docker://IMAGE), verified with the
        signature configuration of the ostree remote O(ostree_remote).
      - V(signed) writes C(ostree-image-signed:docker://IMAGE), verified with the host's
        containers policy.
    type: str
    choices: [registry, remote, signed]
    default: registry
  ostree_remote:
    description:
      - The ostree remote whose signature configuration verifies the image.
      - Required when O(transport=remote).
    type: str
  state:
    description:
      - V(staged) makes sure the next boot uses the image; it is already the case when
        the staged deployment, or the booted deployment with nothing else pending, is
        at the digest. Otherwise a rebase is staged, replacing another staged deployment.
      - V(booted) only verifies that the booted deployment is at the digest and fails
        otherwise; it never changes the host.
    type: str
    choices: [staged, booted]
    default: staged
  lock_finalization:
    description:
      - Stage the deployment with C(--lock-finalization), so that it is only finalized by
        an explicit C(rpm-ostree finalize-deployment) and not by an ordinary reboot.
      - Applies when the module stages a deployment; an existing staged deployment at the
        digest is left as it is.
    type: bool
    default: false
  auth_file:
    description:
      - An auth file on the host (containers C(auth.json) format) with the registry
        credentials.
      - rpm-ostree reads only C(/run/ostree/auth.json) and C(/etc/ostree/auth.json); this
        file is copied to C(/run/ostree/auth.json) (mode 0600) for the duration of the
        rebase, and the previous content is restored, or the copy removed, afterwards.
      - The same file is given to C(skopeo) to resolve a tag or an index; without it,
        C(skopeo) uses C(/run/ostree/auth.json) or C(/etc/ostree/auth.json) when one exists.
    type: path
requirements:
  - rpm-ostree on the managed host
  - skopeo on the managed host, to resolve a tag (O(allow_tag=true)) or to compare an index
    with the manifest digest the next boot reports
seealso:
  - module: fleetos.layering.rpm_ostree_info
  - module: ansible.builtin.reboot
  - name: rpm-ostree container images
    description: The container image transports of rpm-ostree.
    link: https://coreos.github.io/rpm-ostree/container/
notes:
  - A digest the registry does not have makes C(rpm-ostree rebase) fail before anything is staged.
"""

EXAMPLES = r"""
- name: Stage the image for the next boot
  fleetos.layering.rpm_ostree_rebase:
    image: registry.example.com/os/fedora-coreos@sha256:f55ba58f2e79c31ae4735067a47db9c8aee2e6efdf086755fe04c7f25d4575a3
  register: __os_rebase

- name: Reboot into it
  ansible.builtin.reboot:
  when: __os_rebase.reboot_required

- name: Verify that the host booted the image
  fleetos.layering.rpm_ostree_rebase:
    image: registry.example.com/os/fedora-coreos@sha256:f55ba58f2e79c31ae4735067a47db9c8aee2e6efdf086755fe04c7f25d4575a3
    state: booted

- name: Stage a signed image, resolving its tag on the host, with a private registry's credentials
  fleetos.layering.rpm_ostree_rebase:
    image: registry.example.com/os/fedora-coreos:stable
    allow_tag: true
    transport: signed
    auth_file: /etc/fleetos/auth.json
    lock_finalization: true
"""

RETURN = r"""
reference:
  description: The image reference given to rpm-ostree (pinned to the digest).
  returned: success
  type: str
  sample: ostree-unverified-registry:198.51.100.1:5000/fleetos/lab-os@sha256:f55ba58f2e79c31ae4735067a47db9c8aee2e6efdf086755fe04c7f25d4575a3
digest:
  description:
    - The target manifest digest (resolved from the tag with O(allow_tag=true)); for a
      multi-architecture image, the digest of the index.
  returned: success
  type: str
  sample: sha256:f55ba58f2e79c31ae4735067a47db9c8aee2e6efdf086755fe04c7f25d4575a3
before:
  description:
    - The deployment of the next boot before the task (the booted one for O(state=booted)).
    - Each value is V(null) when unknown (no image origin).
  returned: success
  type: dict
  contains:
    reference:
      description: Its image reference as rpm-ostree shows it.
      type: str
      returned: always
      sample: ostree-unverified-registry:198.51.100.1:5000/fleetos/lab-os@sha256:f55ba58f2e79c31ae4735067a47db9c8aee2e6efdf086755fe04c7f25d4575a3
    digest:
      description: Its manifest digest.
      type: str
      returned: always
      sample: sha256:f55ba58f2e79c31ae4735067a47db9c8aee2e6efdf086755fe04c7f25d4575a3
    checksum:
      description: Its ostree commit.
      type: str
      returned: always
      sample: 5d3965ddc23da6be463b043cd818e26108286f028f95f1bdf9806372b17368fd
  sample:
    reference: ostree-unverified-registry:198.51.100.1:5000/fleetos/lab-os@sha256:f55ba58f2e79c31ae4735067a47db9c8aee2e6efdf086755fe04c7f25d4575a3
    digest: sha256:f55ba58f2e79c31ae4735067a47db9c8aee2e6efdf086755fe04c7f25d4575a3
    checksum: 5d3965ddc23da6be463b043cd818e26108286f028f95f1bdf9806372b17368fd
after:
  description:
    - The deployment of the next boot after the task, with the same keys as RV(before).
    - In check mode, the predicted one; C(checksum) is V(null) when the image is not
      pulled yet.
  returned: success
  type: dict
  sample:
    reference: ostree-unverified-registry:198.51.100.1:5000/fleetos/lab-os@sha256:0b5c2e1b0f0c5fbd35d0c4f8d0f3f1b2f4d5d2d0c1f2e3d4c5b6a79880716253
    digest: sha256:0b5c2e1b0f0c5fbd35d0c4f8d0f3f1b2f4d5d2d0c1f2e3d4c5b6a79880716253
    checksum: null
reboot_required:
  description: Whether the next boot is not the booted deployment.
  returned: success
  type: bool
  sample: true
diff:
  description: The next boot's image reference and digest before and after, as text.
  returned: success
  type: dict
  sample:
    before: "reference: ostree-unverified-registry:198.51.100.1:5000/fleetos/lab-os@sha256:f55b...75a3\ndigest: sha256:f55b...75a3\n"
    after: "reference: ostree-unverified-registry:198.51.100.1:5000/fleetos/lab-os@sha256:0b5c...6253\ndigest: sha256:0b5c...6253\n"
"""
