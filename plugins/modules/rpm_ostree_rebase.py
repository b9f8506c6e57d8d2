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

import os
import traceback

from ansible_collections.fleetos.layering.plugins.module_utils import _image_ref
from ansible_collections.fleetos.layering.plugins.module_utils._auth import (
    OSTREE_AUTH_FILES,
    RUN_AUTH_FILE,
    ostree_auth_file,
    placed_auth_file,
)
from ansible_collections.fleetos.layering.plugins.module_utils._commands import RETRY_ARGS
from ansible_collections.fleetos.layering.plugins.module_utils._errors import (
    CommandError,
    FleetosError,
    ImageError,
    InvalidInputError,
    sentence,
)
from ansible_collections.fleetos.layering.plugins.module_utils._params import checked_module
from ansible_collections.fleetos.layering.plugins.module_utils._rpm_ostree import (
    RPM_OSTREE_ARGS,
    RpmOstreeClient,
    has_digest,
    next_boot,
)
from ansible_collections.fleetos.layering.plugins.module_utils._skopeo import SKOPEO_ARGS, Skopeo, host_architecture, resolve


class Resolver:
    """Resolves the target image with skopeo on the host, reading only its manifest, at most once."""

    def __init__(self, module, architecture):
        self.module = module
        self.architecture = architecture
        self.resolved = None
        self.error = None

    def __call__(self, ref):
        """:func:`_skopeo.resolve` of ``ref`` for the host's architecture (cached)."""
        if self.error is not None:
            raise self.error
        if self.resolved is None:
            params = self.module.params
            skopeo = Skopeo(self.module, params["skopeo_executable"], option="skopeo_executable",
                            retries=params["retries"], retry_delay=params["retry_delay"])
            auth_file = params["auth_file"] or ostree_auth_file(OSTREE_AUTH_FILES)
            try:
                self.resolved = resolve(skopeo, ref.image, (self.architecture,), auth_file=auth_file)
            except FleetosError as exc:
                # Asked again in the same run, the registry is not asked again.
                self.error = exc
                raise
        return self.resolved

    def platform_digest(self, ref):
        """The manifest digest of ``ref`` for the host's architecture (the digest itself for a plain manifest)."""
        return self(ref)["platform_digests"][self.architecture]


def summarize(deployment):
    """{reference, digest, checksum} of a deployment (values None when unknown)."""
    image = (deployment or {}).get("image") or {}
    return {
        "reference": image.get("reference"),
        "digest": image.get("digest"),
        "checksum": (deployment or {}).get("checksum"),
    }


def diff_text(summary):
    return "reference: %s\ndigest: %s\n" % (summary["reference"], summary["digest"])


def manifest_digest(deployment):
    """The manifest digest a deployment reports (``container-image-reference-digest``), or None."""
    image = (deployment or {}).get("image") or {}
    return image.get("manifest_digest") or image.get("digest")


def target_reference(params, resolver):
    """The pinned ImageRef to rebase to; a tag is resolved (manifest only) only with allow_tag."""
    ref = _image_ref.from_image(params["image"], params["transport"], params["ostree_remote"])
    if ref.pinned:
        return ref.with_digest(ref.digest)
    if not params["allow_tag"]:
        raise InvalidInputError(
            "image '%s' has no digest: give %s@sha256:<64 hex digits>, or set allow_tag: true to "
            "resolve the tag to a digest on the host." % (_image_ref.shown(params["image"]), _image_ref.shown(ref.name))
        )
    return ref.with_digest(resolver(ref)["digest"])


def reached(deployment, ref, resolver):
    """True when ``deployment`` runs the target: at its digest, or reporting its manifest for this host.

    The target is resolved (its manifest only) when the deployment reports another digest,
    to learn whether the target is an index whose entry for the host is that digest.
    """
    if has_digest(deployment, ref.digest):
        return True
    reported = manifest_digest(deployment)
    if reported is None:
        return False
    return reported == resolver.platform_digest(ref)


def run_module(module, client, resolver):
    params = module.params
    if params["auth_file"] and not os.path.isfile(params["auth_file"]):
        raise InvalidInputError("auth_file '%s' does not exist or is not a regular file."
                                % _image_ref.shown(params["auth_file"], 80))
    for name in ("retries", "retry_delay"):
        if params[name] < 0:
            raise InvalidInputError("%s %d is negative: expected 0 or more." % (name, params[name]))
    ref = target_reference(params, resolver)
    reference, digest = ref.format(), ref.digest
    status = client.status()
    result = {"changed": False, "reference": reference, "digest": digest}

    if params["state"] == "booted":
        booted = status["booted"]
        before = summarize(booted)
        if not reached(booted, ref, resolver):
            raise ImageError(
                "The host is not booted at image digest %s: the booted deployment is at %s." % (
                    digest, before["digest"] or before["checksum"] or "no deployment"),
                before=before, reboot_required=status["reboot_required"])
        result.update(before=before, after=before, reboot_required=status["reboot_required"],
                      diff={"before": diff_text(before), "after": diff_text(before)})
        return result

    current = next_boot(status)
    before = summarize(current)
    if reached(current, ref, resolver):
        result.update(before=before, after=before, reboot_required=status["reboot_required"],
                      diff={"before": diff_text(before), "after": diff_text(before)})
        return result

    if module.check_mode:
        after = {"reference": reference, "digest": digest, "checksum": None}
        # Rebasing back to the booted image only drops what is pending.
        result.update(changed=True, before=before, after=after,
                      reboot_required=not reached(status["booted"], ref, resolver),
                      diff={"before": diff_text(before), "after": diff_text(after)})
        return result

    with placed_auth_file(params["auth_file"], RUN_AUTH_FILE):
        rpm_changed = client.rebase(reference, lock_finalization=params["lock_finalization"])
    status = client.status()
    current = next_boot(status)
    after = summarize(current)
    if not reached(current, ref, resolver):
        raise CommandError(
            "Failed to rebase to '%s': rpm-ostree finished, but the next boot is at %s." % (
                reference, after["digest"] or after["checksum"]),
            before=before, after=after)
    result.update(changed=rpm_changed, before=before, after=after,
                  reboot_required=status["reboot_required"],
                  diff={"before": diff_text(before), "after": diff_text(after)})
    return result


def main():
    argument_spec = dict(
        image=dict(type="str", required=True),
        allow_tag=dict(type="bool", default=False),
        transport=dict(type="str", default="registry", choices=["registry", "remote", "signed"]),
        ostree_remote=dict(type="str"),
        state=dict(type="str", default="staged", choices=["staged", "booted"]),
        lock_finalization=dict(type="bool", default=False),
        auth_file=dict(type="path", no_log=False),
    )
    argument_spec.update(RETRY_ARGS)
    argument_spec.update(RPM_OSTREE_ARGS)
    argument_spec.update(SKOPEO_ARGS)
    module = checked_module(
        argument_spec,
        required_if=[("transport", "remote", ["ostree_remote"])],
        supports_check_mode=True,
    )
    try:
        client = RpmOstreeClient(module, executable=module.params["executable"],
                                 retries=module.params["retries"], retry_delay=module.params["retry_delay"])
        result = run_module(module, client, Resolver(module, host_architecture()))
    except FleetosError as exc:
        module.fail_json(msg=sentence(exc.msg), **exc.details)
    except Exception as exc:
        module.fail_json(msg=sentence("Failed to rebase to image '%s': %s" % (_image_ref.shown(module.params["image"]), exc)),
                         exception=traceback.format_exc())
    module.exit_json(**result)


if __name__ == "__main__":
    main()
