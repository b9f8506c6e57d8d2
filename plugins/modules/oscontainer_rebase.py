#!/usr/bin/python
# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: oscontainer_rebase
short_description: Stage an rpm-ostree rebase to the commit of a legacy OpenShift oscontainer
version_added: 0.1.0
description:
  - Makes the next boot of an rpm-ostree host use the OS commit that a legacy OpenShift
    oscontainer carries, the way OpenShift's old pivot tool did.
  - A legacy oscontainer is not bootable itself; it holds an ostree archive repository at
    C(/srv/repo) and names the commit in the label C(com.coreos.ostree-commit). Bootable
    container images are for M(fleetos.layering.rpm_ostree_rebase).
  - The image is inspected with C(skopeo) first; the task fails when it is not a legacy
    oscontainer or when the registry serves another digest.
  - When the next boot is already at the image's commit with a C(pivot://) custom
    origin naming the image's digest, nothing is fetched and nothing changes.
  - Otherwise, unless the commit is already in O(sysroot_repo), the image is copied into
    a private temporary directory under O(tmpdir), only the C(srv/repo/) entries of its
    layers are unpacked, and the commit is pulled into O(sysroot_repo) with
    C(ostree pull-local --untrusted), which verifies every object. Then
    C(rpm-ostree rebase :COMMIT) stages it with the custom origin
    C(pivot://NAME@sha256:DIGEST) and O(custom_description).
  - The temporary directory is removed whether the task succeeds or fails; a failure
    before the rebase leaves no staged deployment.
  - Never reboots the host; RV(reboot_required) tells whether a reboot is needed.
author:
  - fleetos.layering contributors (@fleetos)
extends_documentation_fragment:
  - fleetos.layering.attributes
  - fleetos.layering.registry
  - fleetos.layering.retries
  - fleetos.layering.executables.rpm_ostree
  - fleetos.layering.executables.skopeo
attributes:
  check_mode:
    support: full
    details:
      - Inspects the image and reads C(rpm-ostree status) and O(sysroot_repo); predicts
        C(changed), RV(fetched) and the diff without fetching the image or calling
        C(rpm-ostree rebase).
  diff_mode:
    support: full
  idempotent:
    support: full
options:
  image:
    description:
      - The legacy oscontainer, C(registry[:port]/repository@sha256:<64 hex digits>).
      - A reference with only a tag is refused; when it has both a tag and a digest, the
        digest decides.
    type: str
    required: true
  custom_description:
    description:
      - The custom origin description that C(rpm-ostree status) shows for the deployment.
      - A single line of text.
    type: str
    default: Managed by fleetos.layering
  lock_finalization:
    description:
      - Stage the deployment with C(--lock-finalization), so that it is only finalized by
        an explicit C(rpm-ostree finalize-deployment) and not by an ordinary reboot.
    type: bool
    default: false
  sysroot_repo:
    description:
      - The host's ostree repository, which the commit is pulled into.
    type: path
    default: /sysroot/ostree/repo
  tmpdir:
    description:
      - The directory on the host under which the image is fetched and unpacked, in a
        private temporary directory; it needs room for the image twice.
    type: path
    default: /var/tmp
  ostree_executable:
    description:
      - Path of the C(ostree) binary.
      - By default the binary is searched for in E(PATH).
    type: path
requirements:
  - rpm-ostree, ostree and skopeo on the managed host
  - A Python interpreter on the managed host. Unlike the other host-side modules of this collection,
    this one runs as a Python module on the host (it unpacks layers with Python's tarfile). On a host
    without one (Fedora CoreOS as shipped) it fails with one sentence that names the missing interpreter.
notes:
  - Without O(auth_file), the first of C(/run/ostree/auth.json) and C(/etc/ostree/auth.json)
    that exists is used the same way (when it has an entry for the image), as rpm-ostree would.
  - A commit pulled into O(sysroot_repo) stays there when the rebase fails afterwards; it
    is not deployed, a later run reuses it, and C(rpm-ostree cleanup) prunes it.
  - Layers compressed with zstd are not supported.
  - On hosts that mount C(/sysroot) read-only (Fedora CoreOS, RHCOS), the commit is pulled from
    a private mount namespace in which only that mount is writable; this needs root.
seealso:
  - module: fleetos.layering.rpm_ostree_rebase
  - module: fleetos.layering.rpm_ostree_info
  - module: ansible.builtin.reboot
  - name: rpm-ostree custom origins
    description: The C(--custom-origin-url) and C(--custom-origin-description) options of C(rpm-ostree rebase).
    link: https://coreos.github.io/rpm-ostree/administrator-handbook/
"""

EXAMPLES = r"""
- name: Stage the OS commit of a legacy oscontainer for the next boot
  fleetos.layering.oscontainer_rebase:
    image: quay.io/openshift-release-dev/ocp-v4.0-art-dev@sha256:a1d3c7bd0d0fcf3bc5a0c5ed4f1c6d5b2b7a2b1b2f0f4bd9b0e1bd3fe6a8c1d2
    auth_file: /var/lib/kubelet/config.json
  register: __oscontainer

- name: Reboot into it
  ansible.builtin.reboot:
  when: __oscontainer.reboot_required

- name: Stage it with a private CA, a description and locked finalization
  fleetos.layering.oscontainer_rebase:
    image: registry.example.com:5000/os/machine-os-content@sha256:a1d3c7bd0d0fcf3bc5a0c5ed4f1c6d5b2b7a2b1b2f0f4bd9b0e1bd3fe6a8c1d2
    ca_cert_dir: /etc/pki/fleet-registry
    custom_description: Machine OS content 4.6
    lock_finalization: true
"""

RETURN = r"""
reference:
  description: The custom origin URL that names the image, C(pivot://NAME@DIGEST).
  returned: success
  type: str
  sample: pivot://198.51.100.1:5000/fleetos/lab-legacy@sha256:f55ba58f2e79c31ae4735067a47db9c8aee2e6efdf086755fe04c7f25d4575a3
digest:
  description: The image's manifest digest.
  returned: success
  type: str
  sample: sha256:f55ba58f2e79c31ae4735067a47db9c8aee2e6efdf086755fe04c7f25d4575a3
commit:
  description: The ostree commit the image carries (its label C(com.coreos.ostree-commit)).
  returned: success
  type: str
  sample: 5d3965ddc23da6be463b043cd818e26108286f028f95f1bdf9806372b17368fd
fetched:
  description:
    - Whether the commit was pulled from the image into O(sysroot_repo); in check mode,
      whether it would be.
  returned: success
  type: bool
  sample: true
before:
  description:
    - The deployment of the next boot before the task.
    - Each value is V(null) when unknown (no image or pivot origin).
  returned: success
  type: dict
  contains:
    reference:
      description: Its image reference or custom origin URL.
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
    origin:
      description: Its origin refspec as rpm-ostree shows it.
      type: str
      returned: always
      sample: 5d3965ddc23da6be463b043cd818e26108286f028f95f1bdf9806372b17368fd
  sample:
    reference: ostree-unverified-registry:198.51.100.1:5000/fleetos/lab-os@sha256:f55ba58f2e79c31ae4735067a47db9c8aee2e6efdf086755fe04c7f25d4575a3
    digest: sha256:f55ba58f2e79c31ae4735067a47db9c8aee2e6efdf086755fe04c7f25d4575a3
    checksum: 0b5c2e1b0f0c5fbd35d0c4f8d0f3f1b2f4d5d2d0c1f2e3d4c5b6a79880716253
    origin: null
after:
  description:
    - The deployment of the next boot after the task, with the same keys as RV(before).
    - In check mode, the predicted one.
  returned: success
  type: dict
  sample:
    reference: pivot://198.51.100.1:5000/fleetos/lab-legacy@sha256:f55ba58f2e79c31ae4735067a47db9c8aee2e6efdf086755fe04c7f25d4575a3
    digest: sha256:f55ba58f2e79c31ae4735067a47db9c8aee2e6efdf086755fe04c7f25d4575a3
    checksum: 5d3965ddc23da6be463b043cd818e26108286f028f95f1bdf9806372b17368fd
    origin: 5d3965ddc23da6be463b043cd818e26108286f028f95f1bdf9806372b17368fd
reboot_required:
  description: Whether the next boot is not the booted deployment.
  returned: success
  type: bool
  sample: true
diff:
  description: The next boot's checksum, reference and digest before and after, as text.
  returned: success
  type: dict
  sample:
    before: "checksum: 0b5c...6253\nreference: ostree-unverified-registry:198.51.100.1:5000/fleetos/lab-os@sha256:f55b...75a3\ndigest: sha256:f55b...75a3\n"
    after: "checksum: 5d39...68fd\nreference: pivot://198.51.100.1:5000/fleetos/lab-legacy@sha256:f55b...75a3\ndigest: sha256:f55b...75a3\n"
"""

import os
import shutil
import tempfile
import traceback

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.fleetos.layering.plugins.module_utils._errors import (
    CommandError,
    FleetosError,
    ImageError,
    InvalidInputError,
    sentence,
)
from ansible_collections.fleetos.layering.plugins.module_utils.host._deployments import summary
from ansible_collections.fleetos.layering.plugins.module_utils.host._mounts import call_writable
from ansible_collections.fleetos.layering.plugins.module_utils.host._oscontainer import (
    ARGUMENT_SPEC,
    Ostree,
    diff_text,
    extract_repo,
    is_current,
    oci_layers,
    oscontainer_commit,
)
from ansible_collections.fleetos.layering.plugins.module_utils.host._rpm_ostree import (
    EXIT_UNCHANGED,
    RpmOstreeClient,
    next_boot,
)
from ansible_collections.fleetos.layering.plugins.module_utils.images import _image_ref
from ansible_collections.fleetos.layering.plugins.module_utils.images._auth import (
    OSTREE_AUTH_FILES,
    credentials,
    image_scopes,
    ostree_auth_file,
    temporary_auth_file,
)
from ansible_collections.fleetos.layering.plugins.module_utils.images._skopeo import Skopeo

WORK_PREFIX = "fleetos-oscontainer-"
LAYOUT_TAG = "oscontainer"


def target(params):
    """(ImageRef pinned to its digest, pivot URL) of the image option; a tag alone is refused."""
    ref = _image_ref.parse(params["image"])
    if ref.transport is not None:
        raise InvalidInputError(
            "image '%s' names an rpm-ostree transport: give a plain registry/repository@sha256:<64 hex "
            "digits>." % _image_ref.shown(params["image"]))
    if not ref.pinned:
        raise InvalidInputError(
            "image '%s' has no digest: give %s@sha256:<64 hex digits>, as a legacy oscontainer is only "
            "rebased to by digest." % (_image_ref.shown(params["image"]), _image_ref.shown(ref.name)))
    ref = ref.with_digest(ref.digest)
    return ref, _image_ref.pivot_url(ref.image)


def check_params(params):
    """Refuse bad input before anything runs."""
    description = params["custom_description"]
    if not description or not description.strip() or any(ord(char) < 32 for char in description):
        raise InvalidInputError("custom_description '%s' is invalid: expected one non-empty line of text "
                                "without control characters." % _image_ref.shown(description, 60))
    for name in ("retries", "retry_delay"):
        if params[name] < 0:
            raise InvalidInputError("%s %d is negative: expected 0 or more." % (name, params[name]))
    if not os.path.isdir(params["tmpdir"]):
        raise InvalidInputError("tmpdir '%s' does not exist or is not a directory." % _image_ref.shown(params["tmpdir"], 80))
    if not os.path.isdir(params["sysroot_repo"]):
        raise InvalidInputError("sysroot_repo '%s' does not exist or is not a directory: expected the host's "
                                "ostree repository." % _image_ref.shown(params["sysroot_repo"], 80))


def auth_document(module, image, auth_file):
    """The containers-auth.json document with the one entry for ``image``, or None."""
    explicit = bool(auth_file)
    if not explicit:
        auth_file = ostree_auth_file(OSTREE_AUTH_FILES)
        if auth_file is None:
            return None
    creds = credentials(image, auth_file=auth_file)
    module.no_log_values.update(creds.secrets())
    document = creds.for_image(image)
    if document is None and explicit:
        raise InvalidInputError(
            "Failed to find credentials for image '%s': the %s has no entry for %s (entries: %s)." % (
                image, creds.source, " or ".join("'%s'" % scope for scope in image_scopes(image)),
                ", ".join(sorted(creds.keys())) or "none"))
    return document


def inspect(skopeo, image, digest, auth_file, options):
    """-> the commit the legacy oscontainer ``image`` names; fail when it is not one or not at ``digest``."""
    info = skopeo.inspect(image, auth_file=auth_file, **options)
    served = info.get("Digest")
    if served != digest:
        raise ImageError("Failed to verify image '%s': the registry serves digest %s, not the pinned digest %s."
                         % (image, served, digest), digest=served, expected_digest=digest)
    if "Labels" in info:
        labels = info.get("Labels") or {}
    else:
        labels = (skopeo.inspect_config(image, auth_file=auth_file, **options).get("config") or {}).get("Labels") or {}
    return oscontainer_commit(image, labels)


def fetch(skopeo, ostree, image, commit, params, auth_file, options):
    """Pull ``commit`` from the image's /srv/repo into the sysroot repository, in a private temporary directory."""
    work = tempfile.mkdtemp(prefix=WORK_PREFIX, dir=params["tmpdir"])
    try:
        layout = os.path.join(work, "oci")
        skopeo.copy(image, "oci:%s:%s" % (layout, LAYOUT_TAG), auth_file=auth_file, **options)
        repo = os.path.join(work, "repo")
        if not extract_repo(oci_layers(layout), repo):
            raise ImageError("Image '%s' is not a legacy oscontainer: its layers hold no ostree repository at "
                             "/srv/repo." % image)
        if not ostree.has_commit(repo, commit):
            raise ImageError("Image '%s' does not carry the commit %s that its label com.coreos.ostree-commit "
                             "names: the repository at /srv/repo has no such commit." % (image, commit))
        # /sysroot is read-only on Fedora CoreOS and RHCOS: pull from a mount namespace of our own.
        call_writable(params["sysroot_repo"], lambda: ostree.pull_local(params["sysroot_repo"], repo, commit))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if not ostree.has_commit(params["sysroot_repo"], commit):
        raise CommandError("Failed to pull commit %s from image '%s': ostree pull-local finished, but the "
                           "repository '%s' does not hold it." % (commit, image, params["sysroot_repo"]))


def rebase(client, commit, url, params):
    """``rpm-ostree rebase :COMMIT`` with the pivot custom origin; -> True when rpm-ostree changed something."""
    args = ["rebase", "--unchanged-exit-77"]
    if params["lock_finalization"]:
        args.append("--lock-finalization")
    args += ["--custom-origin-url=" + url, "--custom-origin-description=" + params["custom_description"],
             "--", ":" + commit]
    rc, _out, _err = client.run_mutating(args, ok_rcs=(0, EXIT_UNCHANGED), action="rebase to commit %s of '%s'"
                                         % (commit, url))
    return rc != EXIT_UNCHANGED


def run_module(module, client, skopeo, ostree):
    params = module.params
    ref, url = target(params)
    check_params(params)
    image, digest = ref.image, ref.digest
    document = auth_document(module, image, params["auth_file"])
    options = dict(cert_dir=params["ca_cert_dir"], tls_verify=params["validate_certs"])
    result = {"changed": False, "reference": url, "digest": digest, "fetched": False}
    with temporary_auth_file(document) as auth_file:
        commit = inspect(skopeo, image, digest, auth_file, options)
        result["commit"] = commit
        status = client.status()
        current = next_boot(status)
        before = summary(current, "origin")
        if is_current(current, commit, digest):
            result.update(before=before, after=before, reboot_required=status["reboot_required"],
                          diff={"before": diff_text(before), "after": diff_text(before)})
            return result
        present = ostree.has_commit(params["sysroot_repo"], commit)
        if module.check_mode:
            after = {"reference": url, "digest": digest, "checksum": commit, "origin": commit}
            booted = status["booted"]
            result.update(changed=True, fetched=not present, before=before, after=after,
                          reboot_required=not is_current(booted, commit, digest),
                          diff={"before": diff_text(before), "after": diff_text(after)})
            return result
        if not present:
            fetch(skopeo, ostree, image, commit, params, auth_file, options)
            result["fetched"] = True
    rpm_changed = rebase(client, commit, url, params)
    status = client.status()
    current = next_boot(status)
    after = summary(current, "origin")
    if not is_current(current, commit, digest):
        raise CommandError(
            "Failed to rebase to commit %s of '%s': rpm-ostree finished, but the next boot is at %s." % (
                commit, url, after["checksum"]), before=before, after=after)
    result.update(changed=rpm_changed or result["fetched"], before=before, after=after,
                  reboot_required=status["reboot_required"],
                  diff={"before": diff_text(before), "after": diff_text(after)})
    return result


def main():
    # The action plugin has checked the options as given (plugins/action/oscontainer_rebase.py).
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    params = module.params
    try:
        client = RpmOstreeClient(module, executable=params["executable"], retries=params["retries"],
                                 retry_delay=params["retry_delay"])
        skopeo = Skopeo(module, params["skopeo_executable"], option="skopeo_executable", retries=params["retries"],
                        retry_delay=params["retry_delay"])
        ostree = Ostree(module, params["ostree_executable"])
        result = run_module(module, client, skopeo, ostree)
    except FleetosError as exc:
        module.fail_json(msg=sentence(exc.msg), **exc.details)
    except Exception as exc:
        module.fail_json(msg=sentence("Failed to rebase to legacy oscontainer '%s': unexpected error: %s" % (
            _image_ref.shown(params["image"]), exc)), exception=traceback.format_exc())
    module.exit_json(**result)


if __name__ == "__main__":
    main()
