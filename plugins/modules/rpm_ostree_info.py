#!/usr/bin/python
# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: rpm_ostree_info
short_description: Report the deployments of an rpm-ostree host
version_added: 0.1.0
description:
  - Reads C(rpm-ostree status --json) and returns the host's deployments as structured
    facts, the booted, staged and rollback deployments, the running transaction, and
    whether the next boot is a different deployment than the booted one.
  - For a deployment booted from a container image, the image reference is split into
    its transport, name, tag and digest; the digest comes from the reference or, when
    the reference has only a tag, from what rpm-ostree recorded when it pulled the image.
  - rpm-ostree records the per-platform manifest digest, also when the reference pins an
    OCI index (multi-arch) digest; it is returned as RV(deployments[].image.manifest_digest),
    and the host's OCI architecture as RV(architecture), so that an index digest can be
    related to the manifest digest the host runs.
  - Missing optional keys in rpm-ostree's output (C(staged), C(version), the image
    digest) are normal and are returned as V(false) or V(null).
author:
  - fleetos.layering contributors (@fleetos)
extends_documentation_fragment:
  - fleetos.layering.attributes
  - fleetos.layering.attributes.info_module
  - fleetos.layering.executables.rpm_ostree
options: {}
requirements:
  - rpm-ostree and a POSIX shell on the managed host (no Python)
seealso:
  - module: fleetos.layering.rpm_ostree_rebase
  - name: rpm-ostree status
    description: The command whose JSON output this module reads.
    link: https://coreos.github.io/rpm-ostree/
notes:
  - Never changes the host.
  - Implemented as an action plugin, it runs C(rpm-ostree status --json) and C(uname -m) on the
    host over the connection and parses the output on the controller, so the host needs no
    Python interpreter, only rpm-ostree and a POSIX shell.
"""

EXAMPLES = r"""
- name: Read the deployments of the host
  fleetos.layering.rpm_ostree_info:
  register: __os_status

- name: Show the digest the host booted from
  ansible.builtin.debug:
    msg: "{{ __os_status.booted.image.digest | default('not booted from an image') }}"

- name: Fail when a reboot is pending
  ansible.builtin.assert:
    that: not __os_status.reboot_required
    fail_msg: "{{ inventory_hostname }} has a pending deployment"
"""

RETURN = r"""
deployments:
  description:
    - The deployments in rpm-ostree's order, the next boot first.
  returned: success
  type: list
  elements: dict
  contains:
    id:
      description: The deployment id (C(osname-checksum.serial)).
      type: str
      returned: always
      sample: fedora-coreos-5d3965ddc23da6be463b043cd818e26108286f028f95f1bdf9806372b17368fd.0
    osname:
      description: The stateroot.
      type: str
      returned: always
      sample: fedora-coreos
    checksum:
      description: The ostree commit of the deployment.
      type: str
      returned: always
      sample: 5d3965ddc23da6be463b043cd818e26108286f028f95f1bdf9806372b17368fd
    serial:
      description: The deployment serial.
      type: int
      returned: always
      sample: 0
    booted:
      description: Whether the host runs this deployment.
      type: bool
      returned: always
      sample: true
    staged:
      description: Whether this deployment is staged for the next boot.
      type: bool
      returned: always
      sample: false
    pinned:
      description: Whether the deployment is pinned.
      type: bool
      returned: always
      sample: false
    version:
      description: The version of the commit, or V(null) when it has none.
      type: str
      returned: always
      sample: "1.0"
    timestamp:
      description: The commit timestamp (seconds since the epoch).
      type: int
      returned: always
      sample: 1795991197
    origin:
      description: The ostree refspec, or V(null) for a container image origin.
      type: str
      returned: always
      sample: fedora:fedora/x86_64/coreos/stable
    image:
      description:
        - The container image of the deployment, or V(null) for an ostree origin.
        - A checksum origin whose custom origin URL is C(pivot://NAME@sha256:...) (written by
          OpenShift's old pivot tool for legacy oscontainers) is reported as that image, with
          transport V(pivot).
      type: dict
      returned: always
      contains:
        reference:
          description: The image reference as rpm-ostree shows it.
          type: str
          returned: always
          sample: ostree-unverified-registry:198.51.100.1:5000/fleetos/lab-os@sha256:f55ba58f2e79c31ae4735067a47db9c8aee2e6efdf086755fe04c7f25d4575a3
        transport:
          description:
            - The rpm-ostree transport of the reference, or V(pivot) for a legacy pivot origin.
            - The ostree remote of C(ostree-remote-image:REMOTE:...) is part of RV(deployments[].image.reference).
          type: str
          returned: always
          sample: ostree-unverified-registry
        transport_kind:
          description:
            - The value of the O(fleetos.layering.rpm_ostree_rebase#module:transport) option of the same
              kind as the transport, V(registry) (unverified), V(remote) or V(signed).
            - V(null) for a legacy pivot origin or a transport this collection does not handle.
          type: str
          returned: always
          sample: registry
        name:
          description: The image name, C(registry/repository).
          type: str
          returned: always
          sample: 198.51.100.1:5000/fleetos/lab-os
        tag:
          description: The tag of the reference, or V(null).
          type: str
          returned: always
          sample: null
        digest:
          description:
            - The digest the reference pins (which may be an OCI index digest); for a reference with
              only a tag, the manifest digest rpm-ostree recorded when it pulled the image.
            - V(null) when the reference has no digest and rpm-ostree reports none.
          type: str
          returned: always
          sample: sha256:f55ba58f2e79c31ae4735067a47db9c8aee2e6efdf086755fe04c7f25d4575a3
        manifest_digest:
          description:
            - The per-platform manifest digest rpm-ostree reports (C(container-image-reference-digest)),
              also when the reference pins an OCI index digest or follows a tag.
            - V(null) when rpm-ostree reports none, and for a legacy pivot origin.
          type: str
          returned: always
          sample: sha256:f55ba58f2e79c31ae4735067a47db9c8aee2e6efdf086755fe04c7f25d4575a3
    custom_origin:
      description: The custom origin (C(url), C(description)), or V(null).
      type: dict
      returned: always
      sample: {"url": "https://example.com/os", "description": "Managed by example"}
    layered_packages:
      description: The packages layered on the base.
      type: list
      elements: str
      returned: always
      sample: []
    base_checksum:
      description: The base commit (equal to C(checksum) when nothing is layered).
      type: str
      returned: always
      sample: 5d3965ddc23da6be463b043cd818e26108286f028f95f1bdf9806372b17368fd
  sample:
    - id: fedora-coreos-5d3965ddc23da6be463b043cd818e26108286f028f95f1bdf9806372b17368fd.0
      osname: fedora-coreos
      checksum: 5d3965ddc23da6be463b043cd818e26108286f028f95f1bdf9806372b17368fd
      serial: 0
      booted: true
      staged: false
      pinned: false
      version: "1.0"
      timestamp: 1795991197
      origin: null
      image:
        reference: ostree-unverified-registry:198.51.100.1:5000/fleetos/lab-os@sha256:f55ba58f2e79c31ae4735067a47db9c8aee2e6efdf086755fe04c7f25d4575a3
        transport: ostree-unverified-registry
        transport_kind: registry
        name: 198.51.100.1:5000/fleetos/lab-os
        tag: null
        digest: sha256:f55ba58f2e79c31ae4735067a47db9c8aee2e6efdf086755fe04c7f25d4575a3
        manifest_digest: sha256:f55ba58f2e79c31ae4735067a47db9c8aee2e6efdf086755fe04c7f25d4575a3
      custom_origin: null
      layered_packages: []
      base_checksum: 5d3965ddc23da6be463b043cd818e26108286f028f95f1bdf9806372b17368fd
booted:
  description: The booted deployment (same keys as an element of RV(deployments)), or V(null).
  returned: success
  type: dict
  sample: {"id": "fedora-coreos-5d39...68fd.0", "booted": true, "staged": false}
staged:
  description: The staged deployment (same keys as an element of RV(deployments)), or V(null).
  returned: success
  type: dict
  sample: null
rollback:
  description:
    - The rollback deployment, the first deployment after the booted one that is
      neither booted nor staged (same keys as an element of RV(deployments)), or V(null).
  returned: success
  type: dict
  sample: null
transaction:
  description: The running rpm-ostree transaction as rpm-ostree lists it, or V(null) when idle.
  returned: success
  type: list
  elements: str
  sample: ["UpdateDeployment", ":1.42", "/org/projectatomic/rpmostree1/transaction"]
reboot_required:
  description:
    - Whether the next boot is not the booted deployment (a staged deployment exists,
      or the first deployment is not the booted one).
  returned: success
  type: bool
  sample: false
architecture:
  description:
    - The host's architecture as OCI image indexes name it (C(amd64), C(arm64), C(ppc64le),
      C(s390x), C(arm), C(386)), from the kernel's machine name (C(uname -m)); a machine name
      without a known OCI name is returned as it is.
    - The platform whose manifest RV(deployments[].image.manifest_digest) is, when the
      reference pins an OCI index digest.
  returned: success
  type: str
  sample: amd64
"""
