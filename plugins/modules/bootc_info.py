#!/usr/bin/python
# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: bootc_info
short_description: Report the deployments of a bootc host
version_added: 0.1.0
description:
  - Reads C(bootc status --format=json) (C(bootc status --json) on a bootc that predates
    C(--format)) and returns the host's booted, staged and rollback deployments as
    structured facts, in the same shape as M(fleetos.layering.rpm_ostree_info).
  - Accepts the C(org.containers.bootc/v1alpha1) and C(org.containers.bootc/v1) schemas;
    another C(apiVersion) fails the task rather than being misread.
  - A host that bootc did not boot (C(status.booted) is null, for example a package-mode
    system with bootc installed) is a result, not an error - RV(is_bootc) is V(false) and
    the deployments are V(null).
  - The image reference of each deployment is split into its name, tag and digest with the
    collection's image grammar for the V(registry) and V(containers-storage) transports; an
    V(oci) or V(oci-archive) image is C(PATH[:REFERENCE]) and is split at the first C(:).
author:
  - fleetos.layering contributors (@fleetos)
extends_documentation_fragment:
  - fleetos.layering.attributes
  - fleetos.layering.attributes.info_module
  - fleetos.layering.executables.bootc
options: {}
requirements:
  - bootc and a POSIX shell on the managed host (no Python)
seealso:
  - module: fleetos.layering.bootc_switch
  - module: fleetos.layering.rpm_ostree_info
  - name: bootc status
    description: The command whose JSON output this module reads.
    link: https://bootc-dev.github.io/bootc/man/bootc-status.8.html
notes:
  - Never changes the host.
  - Implemented as an action plugin, it runs C(bootc status --format=json) (and C(uname -m) when
    bootc reports no architecture) on the host over the connection and parses the output on the
    controller, so the host needs no Python interpreter, only bootc and a POSIX shell.
"""

EXAMPLES = r"""
- name: Read the deployments of the bootc host
  fleetos.layering.bootc_info:
  register: __os_bootc

- name: Show the digest the host booted from
  ansible.builtin.debug:
    msg: "{{ __os_bootc.booted.image.digest if __os_bootc.is_bootc else 'not a bootc host' }}"

- name: Fail when a reboot is pending
  ansible.builtin.assert:
    that: not __os_bootc.reboot_required
    fail_msg: "{{ inventory_hostname }} has a staged deployment that the next boot applies, or a queued rollback"
"""

RETURN = r"""
is_bootc:
  description:
    - Whether bootc booted the host (C(status.booted) is set).
    - When V(false), RV(booted), RV(staged), RV(rollback) and RV(cached_update) are V(null)
      and RV(deployments) is empty.
  returned: success
  type: bool
  sample: true
api_version:
  description: The C(apiVersion) of the status document.
  returned: success
  type: str
  sample: org.containers.bootc/v1
type:
  description: The host type bootc detected (C(bootcHost)), or V(null).
  returned: success
  type: str
  sample: bootcHost
booted:
  description: The booted deployment, or V(null) when bootc did not boot the host.
  returned: success
  type: dict
  contains:
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
    image:
      description: The container image of the deployment, or V(null) when bootc reports none.
      type: dict
      returned: always
      contains:
        reference:
          description: The image as bootc tracks it, without the transport.
          type: str
          returned: always
          sample: quay.io/example/os@sha256:16dc2b6256b4ff0d2ec18d2dbfb06d117904010c8cf9732cdb022818cf7a7566
        transport:
          description: The bootc transport, V(registry), V(containers-storage), V(oci), V(oci-archive) or another one bootc reports.
          type: str
          returned: always
          sample: registry
        name:
          description:
            - The image name, C(registry/repository), or the path of an OCI layout or archive.
            - V(null) for a transport this collection does not handle.
          type: str
          returned: always
          sample: quay.io/example/os
        tag:
          description: The tag (the reference of an OCI layout), or V(null).
          type: str
          returned: always
          sample: null
        digest:
          description:
            - The digest the reference pins (which may be an OCI index digest); for a reference without
              a digest, the manifest digest bootc reports (C(imageDigest)).
          type: str
          returned: always
          sample: sha256:16dc2b6256b4ff0d2ec18d2dbfb06d117904010c8cf9732cdb022818cf7a7566
        manifest_digest:
          description: The per-platform manifest digest bootc reports (C(imageDigest)), or V(null).
          type: str
          returned: always
          sample: sha256:16dc2b6256b4ff0d2ec18d2dbfb06d117904010c8cf9732cdb022818cf7a7566
        signature:
          description:
            - How bootc verifies the image, V(insecure), V(containerPolicy) or C(ostreeRemote:NAME);
              V(null) when bootc does not say.
          type: str
          returned: always
          sample: insecure
    version:
      description: The image version, or V(null).
      type: str
      returned: always
      sample: "42.20250101.0"
    timestamp:
      description: The image build time (RFC 3339), or V(null).
      type: str
      returned: always
      sample: "2023-10-14T19:22:15.42Z"
    architecture:
      description: The architecture of the image as bootc reports it, or V(null) (older bootc).
      type: str
      returned: always
      sample: arm64
    checksum:
      description: The ostree commit of the deployment, or V(null) (a composefs-backed deployment).
      type: str
      returned: always
      sample: 3c6dad657109522e0b2e49bf44b5420f16f0b438b5b9357e5132211cfbad135d
    stateroot:
      description: The ostree stateroot, or V(null) when bootc does not report it.
      type: str
      returned: always
      sample: default
    deploy_serial:
      description: The ostree deployment serial, or V(null).
      type: int
      returned: always
      sample: 0
    composefs_verity:
      description: The composefs verity digest of a composefs-backed deployment, or V(null).
      type: str
      returned: always
      sample: null
    pinned:
      description: Whether the deployment is pinned (kept by garbage collection).
      type: bool
      returned: always
      sample: false
    incompatible:
      description: Whether the deployment has origin changes bootc does not understand (for example layered packages).
      type: bool
      returned: always
      sample: false
    download_only:
      description: Whether the deployment was staged with C(--download-only), so that an ordinary reboot does not apply it.
      type: bool
      returned: always
      sample: false
    soft_reboot_capable:
      description: Whether bootc can soft-reboot into this deployment.
      type: bool
      returned: always
      sample: false
    cached_update:
      description:
        - The update C(bootc upgrade --check) found for this deployment's image (C(digest), C(version)),
          or V(null) when there is none or it is the deployment's own image.
      type: dict
      returned: always
      sample: null
  sample:
    booted: true
    staged: false
    image:
      reference: quay.io/example/os:latest
      transport: registry
      name: quay.io/example/os
      tag: latest
      digest: sha256:736b359467c9437c1ac915acaae952aad854e07eb4a16a94999a48af08c83c34
      manifest_digest: sha256:736b359467c9437c1ac915acaae952aad854e07eb4a16a94999a48af08c83c34
      signature: insecure
    version: nightly
    timestamp: "2023-09-30T19:22:16Z"
    architecture: arm64
    checksum: 26836632adf6228d64ef07a26fd3efaf177104efd1f341a2cf7909a3e4e2c72c
    stateroot: default
    deploy_serial: 0
    composefs_verity: null
    pinned: false
    incompatible: false
    download_only: false
    soft_reboot_capable: false
    cached_update: null
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
  description:
    - The staged, booted and rollback deployments that exist, in that order, then the other
      (pinned) deployments; each with the same keys as RV(booted).
  returned: success
  type: list
  elements: dict
  sample: []
cached_update:
  description:
    - What C(bootc upgrade --check) last found for the image of the next boot (the staged
      deployment, else the booted one) - C(digest) and C(version); V(null) when nothing newer
      was found or bootc did not boot the host.
  returned: success
  type: dict
  sample: {"digest": "sha256:3c1cea8218e4331641020c59e0877ae20ec058e34a346fa424bbe726daab294e", "version": "9.20240325.0"}
rollback_queued:
  description: Whether the rollback deployment is queued for the next boot (C(bootc rollback) without a reboot yet).
  returned: success
  type: bool
  sample: false
reboot_required:
  description:
    - Whether the next boot changes the deployment - a staged deployment that is not download-only exists,
      or a rollback is queued.
    - V(false) for a staged deployment with C(download_only=true) (see RV(booted.download_only)), which is
      applied only after C(bootc upgrade --from-downloaded); an ordinary reboot boots the booted deployment
      again. RV(staged) still reports it.
  returned: success
  type: bool
  sample: false
read_only:
  description: Whether the physical root is read-only (a live ISO), so that bootc cannot change the host.
  returned: success
  type: bool
  sample: false
usr_overlay:
  description: The overlay on C(/usr) (C(access_mode), C(persistence)), or V(null) when there is none.
  returned: success
  type: dict
  sample: null
spec_image:
  description:
    - The image bootc tracks (the host spec), with the same keys as RV(booted.image), or V(null).
  returned: success
  type: dict
  sample: {"reference": "quay.io/example/os:latest", "transport": "registry", "name": "quay.io/example/os",
           "tag": "latest", "digest": null, "manifest_digest": null, "signature": "insecure"}
architecture:
  description:
    - The architecture of the booted image as bootc reports it; when bootc does not report it,
      the host's architecture as OCI image indexes name it, from the kernel's machine name.
  returned: success
  type: str
  sample: amd64
"""
