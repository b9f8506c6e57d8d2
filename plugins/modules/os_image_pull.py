#!/usr/bin/python
# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: os_image_pull
short_description: Inspect an OS image in a registry, or fetch its layers onto the host
version_added: 0.1.0
description:
  - Inspects a container OS image with C(skopeo) from the managed host and returns its
    manifest digest, labels, ostree commit, version and architecture.
  - With O(state=present), also fetches the image's blobs into an OCI layout cache on the
    host, so that a later rebase to the image needs no registry blob.
  - Credentials come from an existing auth file, a dockerconfigjson pull secret, or a
    username and password. The entry that applies to the image is chosen as
    containers-auth.json(5) specifies (repository, then each namespace, then the
    registry) and handed to skopeo in a 0600 temporary auth file, never on the command
    line; the file is removed whether the task succeeds or fails.
  - With O(expected_digest), the task fails before anything is fetched when the
    registry's digest for the image differs.
author:
  - fleetos.layering contributors (@fleetos)
extends_documentation_fragment:
  - fleetos.layering.attributes
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
      - V(inspected) reads the image's metadata only and never reports a change.
      - V(present) also fetches the image's blobs into the cache (see O(cache_dir)) and
        reports a change when at least one blob was fetched.
    type: str
    choices: [inspected, present]
    default: inspected
  auth_file:
    description:
      - An existing containers-auth.json(5) or docker config file on the managed host,
        for example C(/etc/ostree/auth.json).
      - Only the entry that applies to the image is passed on to skopeo.
    type: path
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
  ca_cert_dir:
    description:
      - A directory on the managed host holding the registry's C(ca.crt) (and client
        C(*.cert)/C(*.key)).
      - By default skopeo uses C(/etc/containers/certs.d/<registry>/).
    type: path
  validate_certs:
    description:
      - Require HTTPS and verify the registry's certificate.
    type: bool
    default: true
  expected_digest:
    description:
      - The manifest digest the image must have, C(sha256:) and 64 hex digits.
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
    type: path
requirements:
  - skopeo on the managed host
notes:
  - At most one of O(auth_file), O(pull_secret) and O(username) may be given. Without
    any, skopeo uses its default auth files.
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
  description: The image pinned to its digest, C(registry/repository@digest).
  returned: success
  type: str
  sample: 198.51.100.1:5000/fleetos/lab-os@sha256:f55ba58f2e79c31ae4735067a47db9c8aee2e6efdf086755fe04c7f25d4575a3
digest:
  description: The manifest digest the registry serves for the image.
  returned: success
  type: str
  sample: sha256:f55ba58f2e79c31ae4735067a47db9c8aee2e6efdf086755fe04c7f25d4575a3
labels:
  description: The image's labels (empty when it has none).
  returned: success
  type: dict
  sample: {"ostree.bootable": "true", "ostree.commit": "5d3965dd...", "version": "1.0"}
ostree_commit:
  description:
    - The ostree commit the image carries, from the label C(ostree.commit), else
      C(com.coreos.ostree-commit), else C(io.openshift.os-commit); null when none is set.
  returned: success
  type: str
  sample: 5d3965ddc23da6be463b043cd818e26108286f028f95f1bdf9806372b17368fd
version:
  description: The label C(version), else C(org.opencontainers.image.version); null when none is set.
  returned: success
  type: str
  sample: "1.0"
architecture:
  description: The image's architecture as skopeo reports it; null when unknown.
  returned: success
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

import json
import os
import re
import traceback

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.fleetos.layering.plugins.module_utils._auth import (
    credentials,
    image_scopes,
    temporary_auth_file,
)
from ansible_collections.fleetos.layering.plugins.module_utils._errors import (
    FleetosError,
    ImageError,
    InvalidInputError,
)
from ansible_collections.fleetos.layering.plugins.module_utils._image_ref import DIGEST_FORM, is_digest, parse
from ansible_collections.fleetos.layering.plugins.module_utils._labels import VERSION_LABELS, first_label, image_commit
from ansible_collections.fleetos.layering.plugins.module_utils._skopeo import Skopeo

OSTREE_CACHE = "/sysroot/ostree/container-cache"
DEFAULT_CACHE = "/var/cache/fleetos/images"
REF_NAME = "org.opencontainers.image.ref.name"


def layout_blobs(cache):
    """``algo:hex`` of every blob in an OCI layout (empty when there is none)."""
    found = set()
    root = os.path.join(cache, "blobs")
    if not os.path.isdir(root):
        return found
    for algo in os.listdir(root):
        algo_dir = os.path.join(root, algo)
        if os.path.isdir(algo_dir):
            found.update("%s:%s" % (algo, name) for name in os.listdir(algo_dir))
    return found


def layout_index(cache):
    """(manifest digests, ref names) listed in an OCI layout's index.json."""
    try:
        with open(os.path.join(cache, "index.json"), "rb") as handle:
            index = json.loads(handle.read().decode("utf-8"))
    except (OSError, ValueError):
        return set(), set()
    digests, names = set(), set()
    for entry in index.get("manifests") or []:
        digests.add(entry.get("digest"))
        name = (entry.get("annotations") or {}).get(REF_NAME)
        if name:
            names.add(name)
    return digests, names


def layout_tag(name, digest):
    """The OCI layout ref name this module gives an image: its name and digest, sanitized."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", name)[:80]
    return "fleetos_%s_%s" % (safe, digest.split(":", 1)[-1][:16])


def pick_cache(cache_dir):
    if cache_dir:
        return cache_dir
    return OSTREE_CACHE if os.path.isdir(OSTREE_CACHE) else DEFAULT_CACHE


def pull(module, skopeo, params):
    """Inspect (and with state=present, fetch) one image; -> the module result."""
    ref = parse(params["image"])
    expected = params["expected_digest"]
    if expected is not None and not is_digest(expected):
        raise InvalidInputError("The option expected_digest '%s' is not a digest: expected %s"
                                % (expected, DIGEST_FORM))
    if expected and ref.digest and ref.digest != expected:
        raise ImageError("Failed to verify image '%s': it is pinned to %s, not to the expected digest %s"
                         % (ref.image, ref.digest, expected), digest=ref.digest, expected_digest=expected)
    image = ref.image
    creds = credentials(image, auth_file=params["auth_file"], pull_secret=params["pull_secret"],
                        username=params["username"], password=params["password"])
    document = None
    if creds is not None:
        module.no_log_values.update(creds.secrets())
        document = creds.for_image(image)
        if document is None:
            raise InvalidInputError(
                "Failed to find credentials for image '%s': the %s has no entry for %s (entries: %s)"
                % (image, creds.source, " or ".join("'%s'" % scope for scope in image_scopes(image)),
                   ", ".join(sorted(creds.keys())) or "none"))
    options = dict(cert_dir=params["ca_cert_dir"], tls_verify=params["validate_certs"])
    with temporary_auth_file(document) as auth_file:
        info = skopeo.inspect(image, auth_file=auth_file, **options)
        digest = info.get("Digest")
        if not is_digest(digest):
            raise ImageError("Failed to inspect image '%s': skopeo reported no sha256 manifest digest" % image)
        if "Labels" in info:
            labels = info.get("Labels") or {}
        else:
            config = skopeo.inspect_config(image, auth_file=auth_file, **options)
            labels = (config.get("config") or {}).get("Labels") or {}
        if expected and digest != expected:
            raise ImageError("Failed to verify image '%s': the registry serves digest %s, not the expected "
                             "digest %s" % (image, digest, expected), digest=digest, expected_digest=expected)
        pinned = ref.with_digest(digest).image
        result = dict(changed=False, image=pinned, digest=digest, labels=labels,
                      ostree_commit=image_commit(labels),
                      version=first_label(labels, VERSION_LABELS),
                      architecture=info.get("Architecture") or None)
        if params["state"] == "present":
            result.update(fetch(module, skopeo, ref.name, pinned, digest, info.get("Layers") or [],
                                pick_cache(params["cache_dir"]), auth_file, options))
    return result


def fetch(module, skopeo, name, pinned, digest, layers, cache, auth_file, options):
    """Copy the image's blobs into the OCI layout ``cache``; changed when a blob was new."""
    tag = layout_tag(name, digest)
    before = layout_blobs(cache)
    digests, names = layout_index(cache)
    missing = sorted(({digest} | set(layers)) - before)
    listed = digest in digests or tag in names
    cached = listed and not set(layers) - before
    fetched = [] if cached else missing
    if not cached and not module.check_mode:
        try:
            os.makedirs(cache, mode=0o755, exist_ok=True)
        except OSError as exc:
            raise ImageError("Failed to pull image '%s': cannot create the cache directory '%s': %s"
                             % (pinned, cache, exc.strerror)) from None
        skopeo.copy(pinned, "oci:%s:%s" % (cache, tag), auth_file=auth_file, **options)
        fetched = sorted(layout_blobs(cache) - before)
    result = dict(changed=bool(fetched), cache_dir=cache, fetched_blobs=fetched)
    if module._diff:
        result["diff"] = dict(before=dict(image=pinned, cached=cached),
                              after=dict(image=pinned, cached=True))
    return result


def main():
    module = AnsibleModule(
        argument_spec=dict(
            image=dict(type="str", required=True),
            state=dict(type="str", choices=["inspected", "present"], default="inspected"),
            auth_file=dict(type="path"),
            pull_secret=dict(type="raw", no_log=True),
            username=dict(type="str"),
            password=dict(type="str", no_log=True),
            ca_cert_dir=dict(type="path"),
            validate_certs=dict(type="bool", default=True),
            expected_digest=dict(type="str"),
            cache_dir=dict(type="path"),
            executable=dict(type="path"),
        ),
        mutually_exclusive=[("auth_file", "pull_secret", "username")],
        required_together=[("username", "password")],
        supports_check_mode=True,
    )
    try:
        skopeo = Skopeo(module, module.params["executable"])
        result = pull(module, skopeo, module.params)
    except FleetosError as exc:
        module.fail_json(msg=exc.msg, **exc.details)
    except Exception as exc:
        module.fail_json(msg="Failed to pull image '%s': unexpected error: %s" % (module.params["image"], exc),
                         exception=traceback.format_exc())
    module.exit_json(**result)


if __name__ == "__main__":
    main()
