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
  - Never reboots the host; RV(reboot_required) tells whether a reboot is needed.
author:
  - fleetos.layering contributors (@fleetos)
extends_documentation_fragment:
  - fleetos.layering.attributes
attributes:
  check_mode:
    support: full
    details:
      - Predicts C(changed) and the diff from C(rpm-ostree status); never calls
        C(rpm-ostree rebase). With O(allow_tag=true) the tag is still resolved on the host.
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
        the host with C(skopeo inspect) before anything else.
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
      - Without it, C(skopeo) uses C(/run/ostree/auth.json) or C(/etc/ostree/auth.json)
        when one exists.
    type: path
  retries:
    description:
      - How many times to retry C(rpm-ostree rebase) while another transaction is in progress.
    type: int
    default: 3
  retry_delay:
    description:
      - Seconds to wait between two retries.
    type: int
    default: 5
  executable:
    description:
      - Path of the C(rpm-ostree) binary.
      - By default the binary is searched for in E(PATH).
    type: path
requirements:
  - rpm-ostree on the managed host
  - skopeo on the managed host, only with O(allow_tag=true)
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
  description: The target manifest digest (resolved from the tag with O(allow_tag=true)).
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

import json
import os
import stat
import tempfile
import traceback

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.fleetos.layering.plugins.module_utils import _image_ref
from ansible_collections.fleetos.layering.plugins.module_utils._auth import (
    OSTREE_AUTH_FILES,
    RUN_AUTH_FILE,
    ostree_auth_file,
)
from ansible_collections.fleetos.layering.plugins.module_utils._errors import (
    CommandError,
    FleetosError,
    ImageError,
    InvalidInputError,
)
from ansible_collections.fleetos.layering.plugins.module_utils._rpm_ostree import (
    RpmOstreeClient,
    first_line,
    has_digest,
    next_boot,
)


def resolve_digest(module, ref, auth_file=None):
    """Resolve the tag of ``ref`` to a manifest digest with ``skopeo inspect`` on the host."""
    skopeo = module.get_bin_path("skopeo", required=True)
    argv = [skopeo, "inspect", "--no-tags"]
    auth_file = auth_file or ostree_auth_file(OSTREE_AUTH_FILES)
    if auth_file:
        argv += ["--authfile", auth_file]
    argv += ["--", ref.docker_reference]
    rc, out, err = module.run_command(argv, environ_update={"LC_ALL": "C"}, expand_user_and_vars=False)
    details = {"cmd": argv, "rc": rc, "stdout": out, "stderr": err}
    if rc != 0:
        cause = first_line(err) or first_line(out) or "exit status %d" % rc
        raise ImageError("Failed to resolve the tag of image '%s' to a digest: %s." % (ref.image, cause.rstrip(".")),
                         **details)
    try:
        digest = json.loads(out).get("Digest")
    except (ValueError, AttributeError):
        digest = None
    if not _image_ref.is_digest(digest):
        raise ImageError("Failed to resolve the tag of image '%s' to a digest: skopeo inspect reported no "
                         "sha256 digest." % ref.image, **details)
    return digest


class TemporaryAuthFile:
    """Put ``source`` at ``target`` (0600) for the duration; restore or remove it afterwards."""

    def __init__(self, source, target=None):
        self.source = source
        self.target = target or RUN_AUTH_FILE
        self.backup = None
        self.backup_mode = None
        self.active = False

    def _write(self, data, mode):
        directory = os.path.dirname(self.target)
        os.makedirs(directory, mode=0o755, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".auth.json.", dir=directory)
        try:
            os.fchmod(fd, mode)
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.rename(tmp, self.target)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise

    def __enter__(self):
        if not self.source:
            return self
        if os.path.exists(self.target) and os.path.samefile(self.source, self.target):
            return self
        try:
            with open(self.source, "rb") as handle:
                data = handle.read()
        except OSError as exc:
            raise InvalidInputError("Failed to read auth_file '%s': %s." % (self.source, exc.strerror or exc))
        if os.path.exists(self.target):
            with open(self.target, "rb") as handle:
                self.backup = handle.read()
            self.backup_mode = stat.S_IMODE(os.stat(self.target).st_mode)
        self.active = True
        self._write(data, 0o600)
        return self

    def __exit__(self, *exc_info):
        if not self.active:
            return False
        self.active = False
        if self.backup is not None:
            self._write(self.backup, self.backup_mode)
        elif os.path.exists(self.target):
            os.unlink(self.target)
        return False


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


def target_reference(params, module, resolve=resolve_digest):
    """The pinned ImageRef to rebase to; a tag is resolved only with allow_tag."""
    ref = _image_ref.from_image(params["image"], params["transport"], params["ostree_remote"])
    if ref.pinned:
        return ref.with_digest(ref.digest)
    if not params["allow_tag"]:
        raise InvalidInputError(
            "image '%s' has no digest: give %s@sha256:<64 hex digits>, or set allow_tag: true to "
            "resolve the tag to a digest on the host" % (params["image"], ref.name)
        )
    return ref.with_digest(resolve(module, ref, params["auth_file"]))


def run_module(module, client, resolve=resolve_digest):
    params = module.params
    if params["auth_file"] and not os.path.isfile(params["auth_file"]):
        raise InvalidInputError("auth_file '%s' does not exist or is not a regular file." % params["auth_file"])
    ref = target_reference(params, module, resolve)
    reference, digest = ref.format(), ref.digest
    status = client.status()
    result = {"changed": False, "reference": reference, "digest": digest}

    if params["state"] == "booted":
        booted = status["booted"]
        before = summarize(booted)
        if not has_digest(booted, digest):
            raise ImageError(
                "The host is not booted at image digest %s: the booted deployment is at %s." % (
                    digest, before["digest"] or before["checksum"] or "no deployment"),
                before=before, reboot_required=status["reboot_required"])
        result.update(before=before, after=before, reboot_required=status["reboot_required"],
                      diff={"before": diff_text(before), "after": diff_text(before)})
        return result

    current = next_boot(status)
    before = summarize(current)
    if has_digest(current, digest):
        result.update(before=before, after=before, reboot_required=status["reboot_required"],
                      diff={"before": diff_text(before), "after": diff_text(before)})
        return result

    if module.check_mode:
        after = {"reference": reference, "digest": digest, "checksum": None}
        # Rebasing back to the booted digest only drops what is pending.
        result.update(changed=True, before=before, after=after,
                      reboot_required=not has_digest(status["booted"], digest),
                      diff={"before": diff_text(before), "after": diff_text(after)})
        return result

    with TemporaryAuthFile(params["auth_file"]):
        rpm_changed = client.rebase(reference, lock_finalization=params["lock_finalization"])
    status = client.status()
    current = next_boot(status)
    after = summarize(current)
    if not has_digest(current, digest):
        raise CommandError(
            "Failed to rebase to '%s': rpm-ostree finished, but the next boot is at %s." % (
                reference, after["digest"] or after["checksum"]),
            before=before, after=after)
    result.update(changed=rpm_changed, before=before, after=after,
                  reboot_required=status["reboot_required"],
                  diff={"before": diff_text(before), "after": diff_text(after)})
    return result


def main():
    module = AnsibleModule(
        argument_spec=dict(
            image=dict(type="str", required=True),
            allow_tag=dict(type="bool", default=False),
            transport=dict(type="str", default="registry", choices=["registry", "remote", "signed"]),
            ostree_remote=dict(type="str"),
            state=dict(type="str", default="staged", choices=["staged", "booted"]),
            lock_finalization=dict(type="bool", default=False),
            auth_file=dict(type="path", no_log=False),
            retries=dict(type="int", default=3),
            retry_delay=dict(type="int", default=5),
            executable=dict(type="path"),
        ),
        required_if=[("transport", "remote", ["ostree_remote"])],
        supports_check_mode=True,
    )
    try:
        client = RpmOstreeClient(module, executable=module.params["executable"],
                                 retries=module.params["retries"], retry_delay=module.params["retry_delay"])
        result = run_module(module, client)
    except FleetosError as exc:
        module.fail_json(msg=exc.msg, **exc.details)
    except Exception as exc:
        module.fail_json(msg="Failed to rebase to image '%s': %s" % (module.params["image"], exc),
                         exception=traceback.format_exc())
    module.exit_json(**result)


if __name__ == "__main__":
    main()
