# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# This is a private plugin_util of fleetos.layering: its interface may change at any
# time and it is not meant to be used by other collections.

"""The tool that manages a host's deployments, one class each: how it stages an image (rpm_ostree_rebase's
or bootc_switch's code, given the options of fleetos.layering.os_image_stage), and its commands to apply
a staged deployment, roll back and cancel a stage (its reads: _deployments.py). The roles and playbooks
ask these (the filter fleetos.layering.backend_command) instead of checking the backend in YAML."""

from __future__ import annotations

from ansible_collections.fleetos.layering.plugins.plugin_utils.host import _job, _rebase, _switch
from ansible_collections.fleetos.layering.plugins.module_utils._errors import InvalidInputError
from ansible_collections.fleetos.layering.plugins.module_utils.host._host import shell_command
from ansible_collections.fleetos.layering.plugins.module_utils.images._image_ref import shown
from ansible_collections.fleetos.layering.plugins.module_utils._params import defaults

COMMANDS = ("finalize", "rollback", "cancel")
# fleetos_rollout_soft_reboot: never (a full reboot, as systemd and ostree keep soft reboots opt-in), auto (a soft
# reboot where the backend and the staged deployment allow one, else a full reboot) or required (a soft reboot, or
# no activation).
SOFT_REBOOT = ("never", "auto", "required")

# The options of fleetos.layering.os_image_stage.
STAGE_ARGS = dict(
    image=dict(type="str", required=True),
    backend=dict(type="str", required=True, choices=["rpm-ostree", "bootc"]),
    transport=dict(type="str", default="registry", choices=["registry", "remote", "signed"]),
    ostree_remote=dict(type="str"),
    lock_finalization=dict(type="bool", default=True),
    auth_file=dict(type="path", no_log=False),
    phase=dict(type="str", default="all", choices=["all", "start", "finish"]),
    job=dict(type="str"),
    timeout=dict(type="int", default=3600),
    job_timeout=dict(type="int", default=0),
    poll_interval=dict(type="float", default=2.0),
)
STAGE_REQUIRED_IF = [("transport", "remote", ["ostree_remote"])]


def _staged(result, waiting):
    """A stage's result with ``staged`` (the target waits in a staged deployment for the activation)
    and that deployment's ``staged_checksum`` (None when nothing waits, or in check mode)."""
    result["staged"] = bool(waiting)
    result["staged_checksum"] = (result.get("after") or {}).get("checksum") if waiting else None
    return result


class Backend:
    """A backend; subclasses give its name and argvs."""

    name = None
    # The module_utils of the backend's own stage module (its prepare), and its step (the long command).
    steps = None
    step = None
    # Why the backend never soft-reboots into a staged deployment, or None when it can (soft_reboot()).
    no_soft_reboot = None
    # Whether its finalize names the staged deployment it applies, and refuses another staged meanwhile: then that
    # is the guard, and the deployments need no read before the reboot.
    finalize_names_deployment = False
    # Whether its rollback discards a staged deployment itself (else the staged one is cancelled first).
    rollback_discards_staged = False

    def finalize_argv(self, staged_checksum):
        """What applies the staged deployment (``staged_checksum``) and reboots into it, or None without one
        where the backend needs it."""
        raise NotImplementedError

    def rollback_argv(self):
        """What makes the previous deployment the default and reboots into it."""
        raise NotImplementedError

    def cancel_argv(self):
        """What discards a staged deployment without a reboot, or None when rolling back discards it."""
        raise NotImplementedError

    def options(self, params):
        """The options of the backend's own stage module for the options of os_image_stage ``params``."""
        raise NotImplementedError

    def waiting(self, result):
        """Whether the target waits in a staged deployment after the stage that gave ``result``."""
        raise NotImplementedError

    def stage(self, host, params, check_mode):
        """Stage ``params["image"]`` (the options of os_image_stage) on ``host``; -> the task result.

        ``phase`` all stages in this task (the backend module's code); start does all that comes before the
        long command and starts it as a job on the host (``_job``); finish with the start's ``job`` waits for
        it and concludes as all does (without a job, it is all)."""
        _job.check_timing(params["timeout"], params["poll_interval"])
        if params["job_timeout"] < 0:
            raise InvalidInputError("job_timeout %d is negative: expected 0 (no bound) or more seconds."
                                    % params["job_timeout"])
        options = self.options(params)
        if params["phase"] == "finish" and params["job"]:
            result = _job.finish(host, params["job"], lambda before: self.step.resume(host, options, before),
                                 params["timeout"], params["poll_interval"])
        elif params["phase"] == "start":
            result = _job.start(host, *self.steps.prepare(host, options, check_mode), bound=params["job_timeout"])
        else:
            result = self.stage_here(host, options, check_mode)
        return _staged(result, self.waiting(result))

    def command(self, what, staged_checksum=None, soft=False):
        """The shell line of ``what`` (one of COMMANDS), or an empty string when the backend has none (an
        empty string, not None: older ansible-core renders a template's None as the text "None"). ``soft``: the
        finalize command soft-reboots the host when the staged deployment allows it (see soft_reboot())."""
        if what not in COMMANDS:
            raise InvalidInputError("Unknown backend command '%s': expected one of %s." % (what, ", ".join(COMMANDS)))
        argv = self.finalize_argv(staged_checksum) if what == "finalize" else getattr(self, what + "_argv")()
        if argv is not None and soft and what == "finalize":
            argv = self.soft_argv(argv)
        return "" if argv is None else shell_command(argv, environ={})

    def soft_argv(self, argv):
        """``argv`` (the finalize command) made to soft-reboot where it can."""
        raise NotImplementedError

    def soft_reboot(self, setting, staged):
        """How the host is to reboot into its staged deployment (``staged``, from os_info's read before the
        reboot; None when not read) with fleetos_rollout_soft_reboot ``setting``: -> (``soft`` or ``full``, why
        not soft or None). With ``required``, ``full`` means that the host is not to be activated."""
        if setting not in SOFT_REBOOT:
            raise InvalidInputError("soft_reboot must be one of %s, not %r." % (", ".join(SOFT_REBOOT), setting))
        if setting == "never":
            return "full", None
        if self.no_soft_reboot:
            return "full", self.no_soft_reboot
        if not isinstance(staged, dict):
            return "full", "the staged deployment was not read before the reboot"
        if not staged.get("soft_reboot_capable"):
            return "full", ("%s says the staged deployment is not soft-reboot capable (another kernel, initramfs, "
                            "kernel arguments or SELinux policy, or a systemd without soft-reboot.target)" % self.name)
        return "soft", None


class RpmOstree(Backend):
    name = "rpm-ostree"

    steps = _rebase
    step = _rebase.Rebase

    def options(self, params):
        return defaults(_rebase.ARGUMENT_SPEC, image=params["image"], transport=params["transport"],
                        ostree_remote=params["ostree_remote"], lock_finalization=params["lock_finalization"],
                        auth_file=params["auth_file"], state="staged")

    def stage_here(self, host, options, check_mode):
        return _rebase.rebase(host, options, check_mode)

    def waiting(self, result):
        # Read after the rebase, the next boot is the staged deployment when a reboot is required.
        return result.get("reboot_required")

    finalize_names_deployment = True

    def finalize_argv(self, staged_checksum):
        # The checksum names the deployment the stage made: another one staged meanwhile is refused.
        # Without one there is nothing to finalize.
        return ["rpm-ostree", "finalize-deployment", "--allow-unlocked", staged_checksum] if staged_checksum else None

    def rollback_argv(self):
        return ["rpm-ostree", "rollback", "--reboot"]

    # rpm-ostree has no soft reboot (coreos/rpm-ostree#4525 asks for one); ostree's own `admin
    # prepare-soft-reboot` (2025.3) needs composefs, which rpm-ostree hosts do not all boot with.
    no_soft_reboot = "rpm-ostree has no soft reboot (coreos/rpm-ostree#4525)"

    def cancel_argv(self):
        return ["rpm-ostree", "cleanup", "--pending"]


class Bootc(Backend):
    name = "bootc"

    steps = _switch
    step = _switch.Switch

    def options(self, params):
        if params["transport"] not in ("registry", "signed"):
            raise InvalidInputError("transport %s cannot be used on a bootc host (image '%s'): bootc verifies images "
                                    "only with the containers policy (transport signed)."
                                    % (params["transport"], shown(params["image"])))
        # bootc's download-only stage is rpm-ostree's locked finalization: an unplanned reboot boots the
        # booted deployment again, and only the activation applies the staged one.
        return defaults(_switch.ARGUMENT_SPEC, image=params["image"], transport="registry",
                        download_only=params["lock_finalization"], auth_file=params["auth_file"],
                        enforce_container_sigpolicy=params["transport"] == "signed")

    def stage_here(self, host, options, check_mode):
        return _switch.switch(host, options, check_mode)

    def waiting(self, result):
        return result.get("staged")

    def finalize_argv(self, staged_checksum):
        # bootc applies the download-only deployment it staged; it takes no checksum.
        return ["bootc", "upgrade", "--from-downloaded", "--apply"]

    def soft_argv(self, argv):
        # bootc 1.7 and later: auto prepares /run/nextroot when the staged deployment is capable, and its reboot
        # then soft-reboots (systemd 256 and later); otherwise it reboots as without the flag.
        return argv + ["--soft-reboot", "auto"]

    rollback_discards_staged = True

    def rollback_argv(self):
        return ["bootc", "rollback", "--apply"]

    def cancel_argv(self):
        # bootc rollback discards a staged deployment itself.
        return None


BACKENDS = {backend.name: backend for backend in (RpmOstree(), Bootc())}


def backend(name):
    """The Backend called ``name`` (``rpm-ostree`` or ``bootc``); InvalidInputError otherwise."""
    try:
        return BACKENDS[name]
    except (KeyError, TypeError):
        raise InvalidInputError("Unknown backend '%s': expected %s." % (name, " or ".join(sorted(BACKENDS)))) from None
