#!/usr/bin/python
# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: os_image_pull
short_description: Resolve or inspect an OS image in a registry, or fetch its layers onto the host
version_added: 0.1.0
description:
  - Resolves a container OS image with C(skopeo) from the managed host to its manifest
    digest, reading only the manifest; for a multi-architecture image (an OCI index or
    a Docker manifest list) also to the manifest digest of each platform.
  - With O(state=inspected) (the default), also reads the image's configuration for the
    platform O(architecture) and returns its labels, ostree commit, version and architecture.
  - With O(state=present), also fetches the image's blobs into an OCI layout cache on the
    host, so that a later rebase to the image needs no registry blob.
  - Credentials come from an existing auth file on the host, a dockerconfigjson pull secret,
    or a username and password. The entry that applies to the image is chosen as
    containers-auth.json(5) specifies (repository, then each namespace, then the
    registry) and handed to skopeo in a 0600 temporary auth file, never on the command
    line; the file is removed whether the task succeeds or fails.
  - Implemented as an action plugin, it runs C(skopeo) on the host over the connection and
    decides on the controller, so the host needs no Python interpreter, only skopeo, coreutils
    and a POSIX shell. The chosen auth entry goes to the host on stdin into a private 0600
    file under C(/run) (else under C($XDG_RUNTIME_DIR), else C($TMPDIR) or C(/tmp), for a user
    who cannot write to C(/run)), which skopeo reads with C(--authfile); the auth file
    O(auth_file) is read with C(cat); the cache is listed with the shell and its C(index.json)
    read with C(cat).
  - On the controller itself (the local connection, as for a task delegated to C(localhost)) it needs
    no skopeo. The collection's own registry client (the one M(fleetos.layering.os_image_compose)
    uses) reads the registry from the controller's process, with the same credentials, TLS
    settings, retries, results and messages; with O(state=present) it writes the OCI layout itself.
    Without credentials given, it reads the auth files containers tools read there
    (C($REGISTRY_AUTH_FILE), else C($XDG_RUNTIME_DIR/containers/auth.json),
    C(~/.config/containers/auth.json), C(~/.docker/config.json), C(~/.dockercfg)). Credential
    helpers and the containers signature policy are not used there; set O(executable) to run a
    skopeo on the controller instead.
  - With O(expected_digest), the task fails before anything is fetched when the
    registry's digest for the image differs.
  - Transient registry failures (connection refused or reset, timeouts, HTTP 5xx) are
    retried (see O(retries)).
author:
  - fleetos.layering contributors (@fleetos)
extends_documentation_fragment:
  - fleetos.layering.attributes
  - fleetos.layering.registry
  - fleetos.layering.retries
attributes:
  check_mode:
    support: full
    details:
      - With O(state=present), predicts C(changed) from the blobs already in the cache
        and fetches nothing.
  diff_mode:
    support: full
    details:
      - With O(state=present), the diff shows whether the image was cached before and after.
  idempotent:
    support: full
options:
  image:
    description:
      - The image, C(registry[:port]/repository[:tag][@sha256:digest]).
      - A C(docker://) prefix or an rpm-ostree transport (C(ostree-unverified-registry:))
        is accepted; only the image name is used.
    type: str
    required: true
  state:
    description:
      - V(resolved) reads only the manifest (C(skopeo inspect --raw), no blob) and
        returns the digests; it never reports a change.
      - V(inspected) also reads the configuration of the image for O(architecture)
        (labels, ostree commit, version) and never reports a change.
      - V(present) also fetches the blobs of the image for O(architecture) into the cache
        (see O(cache_dir)) and reports a change when at least one blob was fetched.
    type: str
    choices: [resolved, inspected, present]
    default: inspected
  architecture:
    description:
      - The platform whose manifest of a multi-architecture image RV(platform_digest)
        names and O(state=inspected) and O(state=present) read, as an OCI architecture
        (C(amd64), C(arm64), C(ppc64le), C(s390x)), with C(/VARIANT) when the index
        distinguishes variants (C(arm/v7)).
      - By default the managed host's own, from its machine name as C(uname -m) prints it
        (C(x86_64) is C(amd64), C(aarch64) is C(arm64), C(armv7l) is C(arm)).
      - C(arm64) also matches an index entry C(arm64/v8); an architecture without a
        variant matches the only entry of that architecture.
      - An index without an entry for it fails the task. A single-platform image serves
        every architecture.
    type: str
  pull_secret:
    description:
      - >-
        A dockerconfigjson pull secret, C({"auths": {"registry": {"auth": "..."}}}), as a
        dictionary, as JSON text, or as base64 of that text.
      - Entries may use C(auth) or C(username) and C(password); keys may be hosts,
        C(host:port), namespaces (C(registry/namespace)) or URLs (C(https://index.docker.io/v1/)).
    type: raw
  username:
    description:
      - The user name for the image's registry; requires O(password).
    type: str
  password:
    description:
      - The password for O(username).
    type: str
  expected_digest:
    description:
      - The manifest digest the image must have, C(sha256:) and 64 hex digits.
      - For a multi-architecture image, either the digest of the index or the digest of
        the manifest for O(architecture) matches.
      - A mismatch fails the task before any blob is fetched.
    type: str
  cache_dir:
    description:
      - The OCI layout directory that O(state=present) fetches into.
      - By default C(/sysroot/ostree/container-cache) when that directory exists (the
        layout the host's rpm-ostree reuses blobs from), else C(/var/cache/fleetos/images).
    type: path
  executable:
    description:
      - Path of the C(skopeo) binary.
      - By default the binary is searched for in E(PATH).
      - On the controller (the local connection), setting it runs that skopeo instead of the
        collection's registry client.
    type: path
requirements:
  - skopeo, coreutils and a POSIX shell on the host it runs on (no Python); nothing more than
    ansible-core on the controller itself
notes:
  - At most one of O(auth_file), O(pull_secret) and O(username) may be given. Without
    any, the module uses the auth file rpm-ostree reads (C(/run/ostree/auth.json), else
    C(/etc/ostree/auth.json)) when one exists and has an entry for the image; else skopeo's
    default auth files.
  - When credentials are given but none of their entries applies to the image's
    registry, the task fails.
  - The role C(fleetos.layering.pull_secret) installs the auth file rpm-ostree reads,
    C(/etc/ostree/auth.json), which O(auth_file) can then name.
seealso:
  - module: fleetos.layering.rpm_ostree_rebase
  - name: containers-auth.json(5)
    description: The auth file format and how an entry is chosen for an image.
    link: https://github.com/containers/image/blob/main/docs/containers-auth.json.5.md
  - name: skopeo-inspect(1)
    description: The command this module runs to read an image's metadata.
    link: https://github.com/containers/skopeo/blob/main/docs/skopeo-inspect.1.md
"""

EXAMPLES = r"""
- name: Resolve a tag to its digest, reading only the manifest
  fleetos.layering.os_image_pull:
    image: registry.example.com/os/fleet-os:42
    auth_file: /etc/ostree/auth.json
    state: resolved
  register: __os_image_digest

- name: Read the digest and ostree commit of an OS image with the host's auth file
  fleetos.layering.os_image_pull:
    image: registry.example.com/os/fleet-os:42
    auth_file: /etc/ostree/auth.json
  register: __os_image

- name: Fetch the layers of a pinned image ahead of the rebase, with a vaulted pull secret
  fleetos.layering.os_image_pull:
    image: "registry.example.com/os/fleet-os@{{ fleet_os_digest }}"
    pull_secret: "{{ vault_pull_secret }}"
    expected_digest: "{{ fleet_os_digest }}"
    state: present

- name: Inspect with a username and password and a private CA
  fleetos.layering.os_image_pull:
    image: registry.example.com:5000/os/fleet-os:42
    username: robot
    password: "{{ vault_registry_password }}"
    ca_cert_dir: /etc/pki/fleet-registry
"""

RETURN = r"""
image:
  description: The image pinned to RV(digest), C(registry/repository@digest), without its tag.
  returned: success
  type: str
  sample: 198.51.100.1:5000/fleetos/lab-os@sha256:f55ba58f2e79c31ae4735067a47db9c8aee2e6efdf086755fe04c7f25d4575a3
digest:
  description:
    - The digest of the manifest the registry serves for the image (the sha256 of its
      exact bytes); for a multi-architecture image, the digest of the index.
  returned: success
  type: str
  sample: sha256:f55ba58f2e79c31ae4735067a47db9c8aee2e6efdf086755fe04c7f25d4575a3
index:
  description: Whether the image is a multi-architecture image (an OCI index or a Docker manifest list).
  returned: success
  type: bool
  sample: false
manifests:
  description:
    - For a multi-architecture image, the manifest digest of each linux platform, keyed by
      OCI architecture (with C(/VARIANT) when the index names a variant).
    - Empty for a single-platform image.
  returned: success
  type: dict
  sample: {"amd64": "sha256:0b5c2e1b0f0c5fbd35d0c4f8d0f3f1b2f4d5d2d0c1f2e3d4c5b6a79880716253",
           "arm64": "sha256:76ecbef4dc4358a12dbb5c29e66d839636ce69d49f84d54c8378a86753063548"}
platform_digest:
  description:
    - The manifest digest for O(architecture), which a host of that platform reports
      once it runs the image; RV(digest) for a single-platform image.
  returned: success
  type: str
  sample: sha256:0b5c2e1b0f0c5fbd35d0c4f8d0f3f1b2f4d5d2d0c1f2e3d4c5b6a79880716253
annotations:
  description:
    - The annotations of the manifest (or index) the reference names, as served; empty when it has none. A
      composition of M(fleetos.layering.os_image_compose) carries C(fleetos.io/inputs) there.
  returned: success
  type: dict
  sample: {"fleetos.io/inputs": "sha256:6b1f0c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b"}
labels:
  description: The image's labels (empty when it has none).
  returned: when O(state) is V(inspected) or V(present)
  type: dict
  sample: {"ostree.bootable": "true", "ostree.commit": "5d3965dd...", "version": "1.0"}
ostree_commit:
  description:
    - The ostree commit the image carries, from the label C(ostree.commit), else
      C(com.coreos.ostree-commit), else C(io.openshift.os-commit); null when none is set.
  returned: when O(state) is V(inspected) or V(present)
  type: str
  sample: 5d3965ddc23da6be463b043cd818e26108286f028f95f1bdf9806372b17368fd
version:
  description: The label C(version), else C(org.opencontainers.image.version); null when none is set.
  returned: when O(state) is V(inspected) or V(present)
  type: str
  sample: "1.0"
diff_ids:
  description:
    - The C(rootfs.diff_ids) of the image's configuration, read when its labels name an
      C(ostree.final-diffid) (where its ostree base ends; the layers after it are derived
      layers, which a host imports as a merge commit of its own); else null.
  returned: when O(state) is V(inspected) or V(present)
  type: list
  elements: str
  sample: ["sha256:adb7d2b4ee8e4668cdd2a13f1b3535161238f8579e58888aa90798e1e9c8d168"]
architecture:
  description: The architecture of the image read for O(architecture), as skopeo reports it; null when unknown.
  returned: when O(state) is V(inspected) or V(present)
  type: str
  sample: amd64
cache_dir:
  description: The OCI layout directory the blobs were fetched into.
  returned: when O(state=present)
  type: str
  sample: /sysroot/ostree/container-cache
fetched_blobs:
  description:
    - The digests of the blobs fetched into the cache; in check mode, those that would be.
  returned: when O(state=present)
  type: list
  elements: str
  sample: ["sha256:76ecbef4dc4358a12dbb5c29e66d839636ce69d49f84d54c8378a86753063548"]
"""
