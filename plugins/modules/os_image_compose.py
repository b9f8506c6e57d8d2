#!/usr/bin/python
# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: os_image_compose
short_description: Compose an OS image from a base image and separately versioned layer images, in a registry
version_added: 0.2.0
description:
  - Composes a layered OS image from a base image (a bootable rpm-ostree/bootc image) and
    an ordered list of layer images (each built C(FROM scratch) or C(FROM) a version of the
    base, each with its own version), and pushes it to O(output). It talks to the registry's
    API directly; it builds nothing and needs no container engine.
  - The composed manifest is the base's layers followed by each layer image's own
    layers, in order. Its configuration concatenates C(rootfs.diff_ids) and C(history),
    keeps the base's labels and adds provenance labels
    C(org.opencontainers.image.base.name), C(org.opencontainers.image.base.digest),
    C(fleetos.io/layers) (JSON; name, image, digest and version of each layer) and
    C(fleetos.io/inputs) (the sha256 of the canonical inputs). It also sets
    C(ostree.final-diffid) to the base's last diff_id when the base does not carry that
    label, so that rpm-ostree and bootc import the layers as derived layers on top of
    the base's ostree commit.
  - B(Layers built FROM the base.) A layer image built C(FROM) a version of the base
    (C(FROM base) and C(COPY), or any build that adds layers on top of it) is taken as its
    layers above that base, which is found from manifests and configurations before any layer
    blob is read, in the base's repository. The image's manifest annotation
    C(org.opencontainers.image.base.digest) names it (it must be an image of the base's
    repository); else it is the composed base when the image's first layers are all the
    composed base's; else the C(ostree.final-diffid) label the image inherits names the last
    layer of its ostree base, and the base it was built from is the tag of the base's
    repository whose layers begin the image's, up to that layer at least. Those layers follow
    the rules below; the base's are left out, so a layer built on an older base never rolls
    the base back. RV(layers[].built_from) names that base.
  - B(Refused before any layer blob is read:) a layer that carries the labels of a bootable
    image (C(ostree.bootable), C(containers.bootc), C(ostree.commit)) or one of the base's
    layers and no base boundary; a C(ostree.final-diffid) that names none of its layers; a
    layer built on an image that is not a version of the base's repository; a layer that adds
    no layer of its own. Each refusal is one sentence naming the layer and the reason.
  - B(Deterministic.) The same inputs give byte-identical configuration and manifest,
    hence the same digest, on any machine (canonical JSON; C(created) is the newest
    input's). Tags are resolved to digests once; the provenance records repositories and
    digests only, so composing from tags or from the digests they resolve to gives the
    same image.
  - B(Layer rules,) checked before anything is pushed. A layer may only add files under
    C(/usr) and C(/etc); a path under C(/var), C(/boot) or C(/sysroot) (or anywhere else),
    a device node or FIFO, a whiteout (an opaque whiteout is named by the directory it would
    empty), an OS tree of its own (C(/usr/lib/os-release), a kernel, an ostree repository), and
    a file that two layers both write (unless the later layer sets C(override)) each fail the
    task with one sentence naming the layer and the path. C(requires.labels) are compared
    with the base's labels; a mismatch names the layer, the label, the expected and the
    actual value.
  - B(No-op.) The output manifest carries C(fleetos.io/inputs) as an annotation. When
    the output tag's manifest already records these inputs, the task reports no change
    and returns the digest, having read manifests only, no blob.
  - Blobs are copied once. A blob the output repository has is never uploaded again
    (HEAD first); one on the same registry is mounted across repositories; otherwise
    (another registry, or a registry that answers the mount with an upload session) it
    is read once and uploaded.
  - Multi-architecture. When the base is an OCI index or a Docker manifest list, each
    linux platform is composed on its own and the result is pushed as an OCI index;
    every layer image must offer that platform.
  - The entries of each layer blob read are kept by blob digest in O(layer_cache_dir)
    (with the small configuration blobs), so a blob is listed once; a blob's content
    never changes for its digest.
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
      - Resolves the inputs, checks the layer rules and returns the digest the task would
        push (RV(digest)), pushing nothing.
  diff_mode:
    support: none
  idempotent:
    support: full
options:
  base:
    description:
      - The base OS image, C(registry[:port]/repository) with C(:tag) or C(@sha256:digest).
    type: str
    required: true
  layers:
    description:
      - The layer images, in order; a later layer's files go above an earlier one's.
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description:
          - The layer's name (C(kubelet)), unique in the list; lowercase letters, digits, C(.), C(_) and C(-).
        type: str
        required: true
      image:
        description:
          - The layer image, C(registry[:port]/repository) with C(:tag) or C(@sha256:digest),
            built C(FROM scratch) or C(FROM) a version of O(base) (its layers above that base are
            composed).
        type: str
        required: true
      requires:
        description:
          - What the layer needs of the base.
        type: dict
        suboptions:
          labels:
            description:
              - Labels the base must carry with exactly these values (C(ostree.linux)).
            type: dict
      override:
        description:
          - Let this layer replace files that an earlier layer writes too.
        type: bool
        default: false
  output:
    description:
      - The repository the composed image is pushed to, C(registry[:port]/repository),
        without a tag or digest.
    type: str
    required: true
  tag:
    description:
      - The tag the composed image is pushed under.
      - By default C(fleetos-) and the first 32 hex digits of the inputs digest
        (RV(inputs)), so that the tag names these inputs and nothing else.
    type: str
  layer_cache_dir:
    description:
      - The directory where the entries of each layer blob read, and the configuration
        blobs, are kept by digest.
      - By default C(~/.cache/fleetos.layering/compose) of the user the module runs as.
    type: path
requirements:
  - Python's C(ssl) and the registry's C(/v2/) API (no command is run).
notes:
  - Credentials come from O(auth_file), else from the auth file rpm-ostree reads
    (C(/run/ostree/auth.json), else C(/etc/ostree/auth.json)) when one exists. The entry
    for each repository is chosen as containers-auth.json(5) specifies and sent to the
    registry (Basic) or to the token service its C(Bearer) challenge names; credentials
    and tokens never reach a command line, a log or a file.
  - O(ca_cert_dir) is read as containers-certs.d(5) describes (C(*.crt) CA certificates,
    C(*.cert)/C(*.key) client certificates), on top of the system's CAs.
  - Layers compressed with zstd cannot be listed; the task fails naming the blob.
seealso:
  - module: fleetos.layering.os_image_pull
  - name: Layered OS images
    description: The model, the rules and determinism of composed images.
    link: https://github.com/fleetos/layering/blob/main/docs/layering.md
  - name: OCI distribution specification
    description: The registry API this module talks to.
    link: https://github.com/opencontainers/distribution-spec/blob/main/spec.md
"""

EXAMPLES = r"""
- name: Compose the worker image from the base and two layers
  fleetos.layering.os_image_compose:
    base: registry.example.com/os/base:9.6
    layers:
      - name: kubelet
        image: registry.example.com/os/machine-os-kubelet:1.31.4
        requires:
          labels:
            ostree.linux: 5.14.0-570.el9.x86_64
      - name: ovs
        image: registry.example.com/os/openvswitch:3.4.1
    output: registry.example.com/os/worker
    auth_file: /etc/ostree/auth.json
  register: __worker_image

- name: Predict the digest without pushing anything
  fleetos.layering.os_image_compose:
    base: "registry.example.com/os/base@{{ base_digest }}"
    layers: "{{ worker_layers }}"
    output: registry.example.com/os/worker
    tag: candidate
  check_mode: true
  register: __worker_candidate

- name: Let a hotfix layer replace a file of the kubelet layer
  fleetos.layering.os_image_compose:
    base: registry.example.com/os/base:9.6
    layers:
      - name: kubelet
        image: registry.example.com/os/machine-os-kubelet:1.31.4
      - name: kubelet-hotfix
        image: registry.example.com/os/kubelet-hotfix:1
        override: true
    output: registry.example.com/os/worker
    ca_cert_dir: /etc/containers/certs.d/registry.example.com
"""

RETURN = r"""
image:
  description: The composed image pinned to RV(digest), C(output@digest).
  returned: success
  type: str
  sample: 198.51.100.1:5000/fleetos/worker@sha256:4b1a9f7f6e0a0e7e4d2c1b5e9f3a8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f10
digest:
  description:
    - The digest of the composed manifest (for a multi-architecture base, of the composed
      OCI index); in check mode, the digest the task would push.
  returned: success
  type: str
  sample: sha256:4b1a9f7f6e0a0e7e4d2c1b5e9f3a8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f10
output:
  description: The output repository, C(registry/repository).
  returned: success
  type: str
  sample: 198.51.100.1:5000/fleetos/worker
tag:
  description: The tag the composed image is (or, in check mode, would be) pushed under.
  returned: success
  type: str
  sample: fleetos-9c1e0d2f4b6a8c0e2d4f6a8b0c2e4d6f
manifests:
  description:
    - For a multi-architecture base, the composed manifest digest of each platform, keyed
      by OCI architecture (with C(/VARIANT) when the index names one); empty otherwise.
  returned: success
  type: dict
  sample: {"amd64": "sha256:0b5c2e1b0f0c5fbd35d0c4f8d0f3f1b2f4d5d2d0c1f2e3d4c5b6a79880716253"}
inputs:
  description: The sha256 of the canonical inputs (base and layers by repository and digest, with their options).
  returned: success
  type: str
  sample: sha256:9c1e0d2f4b6a8c0e2d4f6a8b0c2e4d6f8a0b2c4d6e8f0a2b4c6d8e0f2a4b6c8d
base:
  description: The base image as composed.
  returned: success
  type: dict
  contains:
    name:
      description: The base's repository, C(registry/repository).
      type: str
    image:
      description: The base pinned by digest.
      type: str
    digest:
      description: The digest the base reference resolved to (an index's own digest for an index).
      type: str
    version:
      description: The base's C(version) label, else C(org.opencontainers.image.version); null when none.
      type: str
  sample: {"name": "198.51.100.1:5000/fleetos/lab-os", "image": "198.51.100.1:5000/fleetos/lab-os@sha256:f55b...",
           "digest": "sha256:f55b...", "version": "1.0"}
layers:
  description: Each layer as composed, in order.
  returned: success
  type: list
  elements: dict
  contains:
    name:
      description: The layer's name.
      type: str
    image:
      description: The layer's repository, C(registry/repository).
      type: str
    reference:
      description: The layer image pinned by digest.
      type: str
    digest:
      description: The digest the layer reference resolved to.
      type: str
    version:
      description: The layer image's C(version) label, else C(org.opencontainers.image.version); null when none.
      type: str
    override:
      description: Whether the layer may replace files of earlier layers.
      type: bool
    built_from:
      description:
        - For a layer image built C(FROM) a version of the base, that image; null for a layer built C(FROM scratch).
        - C(name) is the base's repository, C(digest) the image's (as its tag resolved, or as the annotation
          names it; the base's own digest when it is the composed base), C(version) its version label, and
          C(older) whether it was created before the composed base.
      type: dict
  sample: [{"name": "kubelet", "image": "198.51.100.1:5000/fleetos/kubelet", "digest": "sha256:76ec...",
            "reference": "198.51.100.1:5000/fleetos/kubelet@sha256:76ec...", "version": "1.31.4", "override": false,
            "built_from": {"name": "198.51.100.1:5000/fleetos/lab-os", "digest": "sha256:44d0...", "version": "1.0",
                           "older": true}}]
blobs:
  description:
    - What reached the output repository, and how many blobs were read from the registry.
    - C(mounted), C(uploaded) and C(skipped) (the repository had it) count blobs,
      configurations included; in check mode and for a no-op they are 0.
    - C(read) counts the blobs read from a registry (configurations, the layer blobs listed, and
      the blobs read from their source to be uploaded to another registry or to one that does
      not mount); 0 for a no-op.
    - A failed task returns it too, with what was read before the failure.
  returned: success, and on failure after the options were accepted
  type: dict
  sample: {"mounted": 1, "uploaded": 1, "skipped": 3, "read": 2}
"""

import traceback

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.fleetos.layering.plugins.module_utils._errors import FleetosError, sentence
from ansible_collections.fleetos.layering.plugins.module_utils.images import _compose
from ansible_collections.fleetos.layering.plugins.module_utils.images._composer import Composer, check_params
from ansible_collections.fleetos.layering.plugins.module_utils.images._image_ref import shown


def main():
    # The action plugin has checked the options as given (plugins/action/os_image_compose.py).
    module = AnsibleModule(argument_spec=_compose.ARGUMENT_SPEC, supports_check_mode=True)
    params = module.params
    composer = None
    try:
        composer = Composer(module, params, *check_params(params))
        result = composer.run()
    except FleetosError as exc:
        if composer is not None:
            module.no_log_values.update(composer.secrets())
            exc.details.setdefault("blobs", dict(composer.counts))
        module.fail_json(msg=sentence(exc.msg), **exc.details)
    except Exception as exc:
        details = {}
        if composer is not None:
            module.no_log_values.update(composer.secrets())
            details["blobs"] = dict(composer.counts)
        module.fail_json(msg=sentence("Failed to compose image '%s': unexpected error: %s" % (
            shown(params["output"]), exc)), exception=traceback.format_exc(), **details)
    module.no_log_values.update(composer.secrets())
    module.exit_json(**result)


if __name__ == "__main__":
    main()
