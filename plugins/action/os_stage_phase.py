# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Action plugin of fleetos.layering.os_stage_phase (documented in plugins/modules/os_stage_phase.py): the role
fleetos.layering.os_stage in one task. The host's own tools do each step over the connection (the backend's
stage, plugin_utils/host/_backends.py; the layers' fetch, plugin_utils/host/_pull.py); a failed step is the stage's
record (status failed), not the task's failure, so that the play goes on and the host is never activated."""

from __future__ import annotations

import re
import time

from ansible_collections.fleetos.layering.plugins.module_utils import _params

from ansible_collections.fleetos.layering.plugins.plugin_utils.host import _backends, _pull
from ansible_collections.fleetos.layering.plugins.module_utils._errors import FleetosError, one_line, sentence
from ansible_collections.fleetos.layering.plugins.module_utils.host._deployments import read_commands
from ansible_collections.fleetos.layering.plugins.module_utils.host._host import chain
from ansible_collections.fleetos.layering.plugins.module_utils.images._auth import auth_file_test
from ansible_collections.fleetos.layering.plugins.plugin_utils.host._remote import HostStep

ARGUMENT_SPEC = dict(
    image=dict(type="str", required=True),
    backend=dict(type="str", default="rpm-ostree", choices=["rpm-ostree", "bootc"]),
    transport=dict(type="str", default="registry", choices=["registry", "remote", "signed"]),
    ostree_remote=dict(type="str"),
    lock_finalization=dict(type="bool", default=True),
    auth_file=dict(type="path", no_log=False),
    pull=dict(type="str", default="auto", choices=["auto", "true", "false"]),
    phase=dict(type="str", default="all", choices=["all", "start", "finish"]),
    timeout=dict(type="int", default=3600),
    started=dict(type="dict"),
)
DIGEST_PINNED = re.compile(r"^[^@]+@sha256:[0-9a-f]{64}$")
ERROR_MAX = 400
# $1 the credentials file to look for ('' for none): what the host has of it and of a layer cache, a line each.
PROBE_SCRIPT = ('if [ -n "$1" ] && [ -f "$1" ]; then echo auth-file; fi; '
                'if [ -d /sysroot/ostree/container-cache ]; then echo layer-cache; fi')


def probe_argv(auth_file):
    """The argv of the probe for the credentials file ``auth_file`` and a layer cache."""
    return ["sh", "-c", PROBE_SCRIPT, "sh", auth_file or ""]


def start_reads(args):
    """What a start reads of the host before its job starts, for ``Host.prefetch``: the probe, the test of the
    credentials file (the stage tests the file the probe found), the backend's status and the machine name."""
    auth_file = args["auth_file"] or ""
    probe = [(probe_argv(auth_file), None)] + ([(auth_file_test(auth_file), None)] if auth_file else [])
    return chain(probe, read_commands(args["backend"]))


class StageFailed(Exception):
    """A step of the stage failed: ``step`` names it, ``msg`` says why."""

    def __init__(self, step, msg):
        super().__init__(msg)
        self.step, self.msg = step, msg


def record(status, stage_start, digest, changed=False, staged_at=None, staged_checksum=None, reboot_required=False,
           fetched_blobs=0, error=None):
    """The stage's record, os_stage_result's keys."""
    return {"status": status, "changed": bool(changed), "stage_start": float(stage_start),
            "staged_at": float(staged_at if staged_at is not None else time.time()), "staged_checksum": staged_checksum,
            "digest": digest, "reboot_required": bool(reboot_required), "fetched_blobs": int(fetched_blobs),
            "error": error}


def failed_record(stage_start, digest, step, msg):
    text = one_line(msg, "failed")
    if len(text) > ERROR_MAX:
        text = text[:ERROR_MAX - 3] + "..."
    return record("failed", stage_start, digest, error="%s: %s" % (step, text))


def pull_first(pull, phase, layer_cache):
    """Whether the layers are fetched before the stage: ``true``; ``auto`` only when the host keeps a layer cache
    its rpm-ostree reuses and the stage runs whole (a detached stage leaves the fetch to the tool)."""
    return pull == "true" or (pull == "auto" and phase == "all" and layer_cache)


class ActionModule(HostStep):
    ARGUMENT_SPEC = ARGUMENT_SPEC
    SPEC_KWARGS = {"required_if": [("transport", "remote", ["ostree_remote"]), ("phase", "finish", ["started"])]}
    WHAT = "stage the image"

    _clock = staticmethod(time.time)

    def step(self, host, args, check_mode):
        started = args["started"] or {}
        if args["phase"] == "finish" and started.get("status") == "failed":
            # Its start failed: recorded already.
            return dict(started, changed=False)
        stage_start = float(started.get("stage_start") or self._clock()) if args["phase"] == "finish" else self._clock()
        digest = args["image"].split("@")[-1]
        try:
            if args["phase"] == "finish":
                return self._conclude(host, args, started, stage_start, digest, check_mode)
            return self._begin(host, args, stage_start, digest, check_mode)
        except StageFailed as exc:
            return failed_record(stage_start, digest, exc.step, exc.msg)

    @staticmethod
    def _run(step, what, *arguments):
        try:
            return what(*arguments)
        except FleetosError as exc:
            raise StageFailed(step, sentence(exc.msg))

    def _begin(self, host, args, stage_start, digest, check_mode):
        """phase start or all: check, look for the credentials and a layer cache, then start the stage or stage."""
        if not DIGEST_PINNED.match(args["image"]):
            raise StageFailed("check the image", "image %s is not digest-pinned (registry/repository@sha256:<64 hex>)."
                              % args["image"])
        if args["phase"] != "start":
            auth_file, layer_cache = self._run("look for the registry credentials", self._probe, host, args["auth_file"])
            return self._conclude(host, args, dict(job="", pull_first=pull_first(args["pull"], "all", layer_cache),
                                                   auth_file=auth_file), stage_start, digest, check_mode)
        # The reads before the job in one host command: on a fleet staging at once, each is an ssh command of the
        # controller's and a session on the host. What the start did not ask for is dropped before it returns. A
        # start that leaves the fetch and the stage to the finish (pull true) reads nothing but the probe.
        if not pull_first(args["pull"], "start", False):
            host.prefetch(start_reads(args))
        try:
            auth_file, layer_cache = self._run("look for the registry credentials", self._probe, host,
                                               args["auth_file"])
            if pull_first(args["pull"], "start", layer_cache):
                # Fetched first, then staged whole: both in the finish.
                return dict(record("started", stage_start, digest), job="", pull_first=True, auth_file=auth_file)
            started = self._run("start the stage on the host", self._stage, host, args, auth_file, "start", None,
                                check_mode)
        finally:
            host.forget()
        return dict(record("started", stage_start, digest, changed=started.get("changed")),
                    job=started.get("job") or "", pull_first=False, auth_file=auth_file)

    def _conclude(self, host, args, started, stage_start, digest, check_mode):
        auth_file = started.get("auth_file") or ""
        fetched = 0
        if started.get("pull_first"):
            pulled = self._run("fetch the image's layers", self._pull, host, args["image"], digest, auth_file,
                               check_mode)
            fetched = len(pulled.get("fetched_blobs") or [])
        job = started.get("job") or None
        staged = self._run("stage the image", self._stage, host, args, auth_file, "finish" if job else "all", job,
                           check_mode)
        return record("staged", stage_start, staged.get("digest", digest),
                      changed=started.get("changed") or fetched > 0 or staged.get("changed"),
                      staged_at=self._clock() - float(staged.get("ended_ago") or 0), staged_checksum=staged.get("staged_checksum"),
                      reboot_required=staged.get("reboot_required"), fetched_blobs=fetched)

    @staticmethod
    def _probe(host, auth_file):
        """(the credentials file when it exists on the host, else "", whether the host keeps a layer cache), in one
        command."""
        rc, out, err = host.run(probe_argv(auth_file))
        if rc != 0:
            raise FleetosError("the test for %s and a layer cache failed (rc %d): %s"
                               % (auth_file or "no auth file", rc, (err or out or "").strip()[:200]))
        lines = out.split()
        return (auth_file if "auth-file" in lines else ""), "layer-cache" in lines

    @staticmethod
    def _pull(host, image, digest, auth_file, check_mode):
        params = _params.defaults(_pull.ARGUMENT_SPEC, image=image, state="present", expected_digest=digest,
                                  auth_file=auth_file or None)
        return _pull.pull(host, params, check_mode)

    @staticmethod
    def _stage(host, args, auth_file, phase, job, check_mode):
        # The job ends its command at the stage's timeout (KILL 10 s after TERM): the finish waits for that end.
        params = _params.defaults(
            _backends.STAGE_ARGS, image=args["image"], backend=args["backend"], transport=args["transport"],
            ostree_remote=args["ostree_remote"], lock_finalization=args["lock_finalization"],
            auth_file=auth_file or None, phase=phase, job=job,
            timeout=args["timeout"] + 15, job_timeout=args["timeout"] if phase == "start" else 0)
        return _backends.backend(args["backend"]).stage(host, params, check_mode)
