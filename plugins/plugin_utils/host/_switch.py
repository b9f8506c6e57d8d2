# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# This is a private plugin_util of fleetos.layering: its interface may change at any
# time and it is not meant to be used by other collections.

"""The stage step of a bootc host (fleetos.layering.bootc_switch): what the target is, whether the
deployment bootc moves to next has it already (by digest), and the switch.

Everything runs on a ``_host.Host``: bootc, skopeo (a registry tag), ``cat`` or ``tar`` (an OCI
layout's ``index.json``), the sysroot lock probe and the auth file's shell scripts over an action
plugin's connection, so the host needs no Python.
"""

from __future__ import annotations

from ansible_collections.fleetos.layering.plugins.module_utils.host import _bootc, _deployments
from ansible_collections.fleetos.layering.plugins.module_utils.host._commands import RETRY_ARGS, last_cause
from ansible_collections.fleetos.layering.plugins.module_utils._errors import CommandError, ImageError, InvalidInputError
from ansible_collections.fleetos.layering.plugins.module_utils.images._auth import check_auth_file
from ansible_collections.fleetos.layering.plugins.module_utils.images._image_ref import shown
from ansible_collections.fleetos.layering.plugins.plugin_utils.host._job import LongCommand, run_here
from ansible_collections.fleetos.layering.plugins.module_utils.images._labels import imported_commit, is_bootable
from ansible_collections.fleetos.layering.plugins.module_utils.images._skopeo import SKOPEO_ARGS, Resolver

# The options of fleetos.layering.bootc_switch.
ARGUMENT_SPEC = dict(
    image=dict(type="str", required=True),
    transport=dict(type="str", default="registry", choices=list(_bootc.TRANSPORTS)),
    digest=dict(type="str"),
    allow_tag=dict(type="bool", default=False),
    download_only=dict(type="bool", default=True),
    retain=dict(type="bool", default=False),
    enforce_container_sigpolicy=dict(type="bool", default=False),
    labels=dict(type="dict"),
    auth_file=dict(type="path", no_log=False),
)
ARGUMENT_SPEC.update(RETRY_ARGS)
ARGUMENT_SPEC.update(_bootc.BOOTC_ARGS)
ARGUMENT_SPEC.update(SKOPEO_ARGS)


def diff_text(summary):
    return "reference: %s\ntransport: %s\ndigest: %s\n" % (summary["reference"], summary["transport"], summary["digest"])


def check_input(host, params):
    """Refuse bad input that the argument spec cannot express, before anything runs but a ``test`` of auth_file."""
    for name in ("retries", "retry_delay"):
        if params[name] < 0:
            raise InvalidInputError("%s %d is negative: expected 0 or more." % (name, params[name]))
    labels = params["labels"]
    if labels is not None and not is_bootable(labels):
        raise InvalidInputError("image '%s' is not bootable: its labels set neither containers.bootc nor "
                                "ostree.bootable." % shown(params["image"]))
    check_auth_file(host, params["auth_file"])


def _unchanged(result, status, current):
    """``result`` for a host whose next deployment is the target already."""
    summary = _deployments.summary(current, "transport", "download_only")
    result.update(before=summary, after=summary, reboot_required=status["reboot_required"],
                  staged=current is status["staged"],
                  diff={"before": diff_text(summary), "after": diff_text(summary)})
    return result


class Switch(LongCommand):
    """The switch to the target that :func:`prepare` left to do (or a job runs: :meth:`resume`).

    bootc waits for the ostree sysroot lock without end; the client checks it first and gives up after
    ``retries`` tries. A job checks it before it starts (:meth:`launching`); a lock taken after that makes bootc
    wait on the host, as far as the finishing task's timeout."""

    TOOL = "bootc"

    def __init__(self, host, params, before, client, image, digest):
        transport = params["transport"]
        super().__init__(host, params, {"changed": False, "image": image, "transport": transport, "digest": digest},
                         image, before, _bootc.AUTH_FILES[0])
        self.client = client
        self.transport = transport
        self.digest = digest

    @classmethod
    def target_of(cls, host, params):
        """-> (client, the image text bootc gets, its digest)."""
        client = _bootc.BootcClient(host, executable=params["executable"], retries=params["retries"],
                                    retry_delay=params["retry_delay"])
        image, digest = _bootc.target_image(params, Resolver(host, params, _bootc.AUTH_FILES).tag_digest, host)
        return client, image, digest

    def _options(self):
        params = self.params
        return dict(download_only=params["download_only"], retain=params["retain"],
                    enforce_sigpolicy=params["enforce_container_sigpolicy"])

    @property
    def argv(self):
        return self.client.switch_argv(self.target, self.transport, **self._options())

    def launching(self):
        self.client.wait_idle(_bootc.switch_action(self.target, self.transport))

    def command(self):
        self.client.switch(self.target, self.transport, **self._options())
        return True

    def finished(self, rc, output, attempts):
        self.client.switch_finished(self.argv, _bootc.switch_action(self.target, self.transport), rc, "", output,
                                    self.params["download_only"], describe=last_cause)
        return True

    def conclude(self, changed):
        status = self.client.status()
        staged = status["staged"]
        after = _deployments.summary(staged, "transport", "download_only")
        before, transport, image = self.before, self.transport, self.target
        if not _deployments.has_digest(staged, self.digest):
            raise CommandError("Failed to switch to %s image '%s': bootc finished, but the staged deployment is at "
                               "%s." % (transport, shown(image), after["digest"] or "nothing"),
                               before=before, after=after)
        # Only an image that is its ostree base alone names the commit the host imports; a derived
        # image (layers after ostree.final-diffid) becomes a merge commit of the host's own.
        commit = imported_commit(self.params["labels"] or {})
        if commit and after["checksum"] != commit:
            raise ImageError("Failed to switch to %s image '%s': the staged commit %s is not the commit %s its labels "
                             "name." % (transport, shown(image), after["checksum"], commit), before=before, after=after)
        return dict(self.result, changed=changed, before=before, after=after, staged=True,
                    reboot_required=status["reboot_required"],
                    diff={"before": diff_text(before), "after": diff_text(after)})


def prepare(host, params, check_mode):
    """Everything a bootc_switch task does before the switch; -> ``(result, switch)``: the task's result and
    None when nothing is left to do (the next deployment has the target, check mode), else the result so far
    and the :class:`Switch` left to do. FleetosError for a failure."""
    check_input(host, params)
    client, image, digest = Switch.target_of(host, params)
    transport = params["transport"]
    status = client.status()
    if not status["is_bootc"]:
        raise CommandError("Failed to switch to %s image '%s': bootc did not boot this host (its status reports no "
                           "booted deployment)." % (transport, shown(image)))
    result = {"changed": False, "image": image, "transport": transport, "digest": digest}
    current = _bootc.next_boot(status)
    if _deployments.has_digest(current, digest):
        return _unchanged(result, status, current), None
    before = _deployments.summary(current, "transport", "download_only")

    if check_mode:
        after = {"reference": image, "transport": transport, "digest": digest, "checksum": None,
                 "download_only": params["download_only"]}
        # The next reboot applies the new staged deployment unless it is download-only.
        result.update(changed=True, before=before, after=after, staged=True,
                      reboot_required=not params["download_only"],
                      diff={"before": diff_text(before), "after": diff_text(after)})
        return result, None
    step = Switch(host, params, before, client, image, digest)
    return step.result, step


def switch(host, params, check_mode):
    """The result of a bootc_switch task with ``params`` on ``host``; FleetosError for a failure."""
    return run_here(*prepare(host, params, check_mode))
