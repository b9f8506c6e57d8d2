# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# This is a private plugin_util of fleetos.layering: its interface may change at any
# time and it is not meant to be used by other collections.

"""The stage step of an rpm-ostree host (fleetos.layering.rpm_ostree_rebase): what the target is, whether
the host's next boot has it already (by digest, through an index's entry for the host), and the rebase.

Everything runs on a ``_host.Host``: rpm-ostree and skopeo over an action plugin's connection, so the
host needs no Python.
"""

from __future__ import annotations

from ansible_collections.fleetos.layering.plugins.module_utils.images import _image_ref
from ansible_collections.fleetos.layering.plugins.module_utils.images._auth import (
    OSTREE_AUTH_FILES,
    RUN_AUTH_FILE,
    check_auth_file,
)
from ansible_collections.fleetos.layering.plugins.module_utils.host._commands import RETRY_ARGS
from ansible_collections.fleetos.layering.plugins.module_utils.host._deployments import (
    has_digest,
    manifest_digest,
    summary,
)
from ansible_collections.fleetos.layering.plugins.module_utils._errors import CommandError, ImageError, InvalidInputError
from ansible_collections.fleetos.layering.plugins.plugin_utils.host._job import LongCommand, run_here
from ansible_collections.fleetos.layering.plugins.module_utils.host._rpm_ostree import (
    BUSY_MARKER,
    RPM_OSTREE_ARGS,
    RpmOstreeClient,
    next_boot,
)
from ansible_collections.fleetos.layering.plugins.module_utils.images._skopeo import (
    SKOPEO_ARGS,
    Resolver,
)

# The options of fleetos.layering.rpm_ostree_rebase.
ARGUMENT_SPEC = dict(
    image=dict(type="str", required=True),
    allow_tag=dict(type="bool", default=False),
    transport=dict(type="str", default="registry", choices=["registry", "remote", "signed"]),
    ostree_remote=dict(type="str"),
    state=dict(type="str", default="staged", choices=["staged", "booted"]),
    lock_finalization=dict(type="bool", default=False),
    auth_file=dict(type="path", no_log=False),
)
ARGUMENT_SPEC.update(RETRY_ARGS)
ARGUMENT_SPEC.update(RPM_OSTREE_ARGS)
ARGUMENT_SPEC.update(SKOPEO_ARGS)
REQUIRED_IF = [("transport", "remote", ["ostree_remote"])]


def diff_text(summary):
    return "reference: %s\ndigest: %s\n" % (summary["reference"], summary["digest"])


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


def check_input(host, params):
    """Refuse bad input that the argument spec cannot express, before anything runs but a ``test`` of auth_file."""
    for name in ("retries", "retry_delay"):
        if params[name] < 0:
            raise InvalidInputError("%s %d is negative: expected 0 or more." % (name, params[name]))
    check_auth_file(host, params["auth_file"])


class Rebase(LongCommand):
    """The rebase to the target that :func:`prepare` left to do (or a job runs: :meth:`resume`)."""

    TOOL = "rpm-ostree"
    BUSY = BUSY_MARKER

    def __init__(self, host, params, before, client, resolver, ref):
        reference = ref.format()
        super().__init__(host, params, {"changed": False, "reference": reference, "digest": ref.digest},
                         reference, before, RUN_AUTH_FILE)
        self.client = client
        self.resolver = resolver
        self.ref = ref

    @classmethod
    def target_of(cls, host, params):
        """-> (client, resolver, the pinned target ImageRef)."""
        client = RpmOstreeClient(host, executable=params["executable"], retries=params["retries"],
                                 retry_delay=params["retry_delay"])
        resolver = Resolver(host, params, OSTREE_AUTH_FILES)
        return client, resolver, target_reference(params, resolver)

    @property
    def argv(self):
        return self.client.rebase_argv(self.target, lock_finalization=self.params["lock_finalization"])

    def command(self):
        return self.client.rebase(self.target, lock_finalization=self.params["lock_finalization"])

    def finished(self, rc, output, attempts):
        return self.client.rebase_finished(self.argv, self.target, rc, output, attempts)

    def conclude(self, changed):
        status = self.client.status()
        current = next_boot(status)
        after = summary(current)
        if not reached(current, self.ref, self.resolver):
            raise CommandError(
                "Failed to rebase to '%s': rpm-ostree finished, but the next boot is at %s." % (
                    self.target, after["digest"] or after["checksum"]),
                before=self.before, after=after)
        return dict(self.result, changed=changed, before=self.before, after=after,
                    reboot_required=status["reboot_required"],
                    diff={"before": diff_text(self.before), "after": diff_text(after)})


def prepare(host, params, check_mode):
    """Everything an rpm_ostree_rebase task does before the rebase; -> ``(result, rebase)``: the task's result
    and None when nothing is left to do (the host has the target, state booted, check mode), else the result
    so far and the :class:`Rebase` left to do. FleetosError for a failure."""
    check_input(host, params)
    client, resolver, ref = Rebase.target_of(host, params)
    reference, digest = ref.format(), ref.digest
    status = client.status()
    result = {"changed": False, "reference": reference, "digest": digest}

    if params["state"] == "booted":
        booted = status["booted"]
        before = summary(booted)
        if not reached(booted, ref, resolver):
            raise ImageError(
                "The host is not booted at image digest %s: the booted deployment is at %s." % (
                    digest, before["digest"] or before["checksum"] or "no deployment"),
                before=before, reboot_required=status["reboot_required"])
        result.update(before=before, after=before, reboot_required=status["reboot_required"],
                      diff={"before": diff_text(before), "after": diff_text(before)})
        return result, None

    current = next_boot(status)
    before = summary(current)
    if reached(current, ref, resolver):
        result.update(before=before, after=before, reboot_required=status["reboot_required"],
                      diff={"before": diff_text(before), "after": diff_text(before)})
        return result, None

    if check_mode:
        after = {"reference": reference, "digest": digest, "checksum": None}
        # Rebasing back to the booted image only drops what is pending.
        result.update(changed=True, before=before, after=after,
                      reboot_required=not reached(status["booted"], ref, resolver),
                      diff={"before": diff_text(before), "after": diff_text(after)})
        return result, None
    step = Rebase(host, params, before, client, resolver, ref)
    return step.result, step


def rebase(host, params, check_mode):
    """The result of an rpm_ostree_rebase task with ``params`` on ``host``; FleetosError for a failure."""
    return run_here(*prepare(host, params, check_mode))
