# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""os_stage_phase: the role os_stage in one task; a failed step is the stage's record, not the task's failure."""

from __future__ import annotations

import pytest

from ansible_collections.fleetos.layering.tests.unit.plugins.action.utils import fake_host, run_action
from ansible_collections.fleetos.layering.plugins.action import os_stage_phase
from ansible_collections.fleetos.layering.plugins.module_utils._errors import CommandError

DIGEST = "sha256:" + "a" * 64
IMAGE = "registry.example.com/os/fleet@" + DIGEST
CHECKSUM = "c" * 64
NOW = 1000.0
STATUS = '{"deployments": []}'


@pytest.fixture
def steps(monkeypatch):
    """What the backend's stage and the layers' fetch were asked, and their answers."""
    seen = {"stage": [], "pull": [], "stage_answer": None, "stage_error": None, "read": None}

    def stage(host, args, auth_file, phase, job, check_mode):
        seen["stage"].append((phase, job, auth_file, args["timeout"], check_mode))
        if phase == "start":
            # What the backend's start reads before its job (_rebase.prepare), and the host commands so far.
            seen["read"] = (host.run(["rpm-ostree", "status", "--json"]), host.machine(),
                            len(seen["host"]["sent"]))
        if seen["stage_error"]:
            raise CommandError(seen["stage_error"])
        if phase == "start":
            return {"changed": True, "job": "job-1", "started": True}
        return seen["stage_answer"] or {"changed": True, "digest": DIGEST, "staged_checksum": CHECKSUM,
                                        "reboot_required": True, "ended_ago": 4.0}

    def pull(host, image, digest, auth_file, check_mode):
        seen["pull"].append((image, digest, auth_file))
        return {"changed": True, "fetched_blobs": ["sha256:1", "sha256:2"]}

    monkeypatch.setattr(os_stage_phase.ActionModule, "_stage", staticmethod(stage))
    monkeypatch.setattr(os_stage_phase.ActionModule, "_pull", staticmethod(pull))
    monkeypatch.setattr(os_stage_phase.ActionModule, "_clock", staticmethod(lambda: NOW))
    seen["host"] = fake_host(monkeypatch)
    return seen


def probe(steps, *found, start=False):
    """The probe's answer; a start reads the backend's status with it, in one host command: its answer next."""
    steps["host"]["results"].append((0, "".join(line + "\n" for line in found), ""))
    if start:
        steps["host"]["results"].append((0, STATUS, ""))


def test_start_starts_the_stage_detached_with_the_credentials_found_and_finish_collects_it(steps):
    probe(steps, "auth-file", start=True)
    started = run_action(os_stage_phase, dict(image=IMAGE, phase="start", auth_file="/etc/ostree/auth.json",
                                              timeout=300))
    assert (started["status"], started["job"], started["auth_file"], started["pull_first"]) == (
        "started", "job-1", "/etc/ostree/auth.json", False)
    # The job is bound by the timeout. The reads before it were one host command: the probe (given the file as an
    # argument), the test of that file, the status and the machine name; the stage's reads were answered from it.
    assert steps["stage"] == [("start", None, "/etc/ostree/auth.json", 300, False)]
    assert len(steps["host"]["sent"]) == len(steps["host"]["batches"]) == 1
    (argv, given), (status, _given) = steps["host"]["calls"]
    assert argv[:2] == ["sh", "-c"] and argv[-1] == "/etc/ostree/auth.json" and given["data"] is None
    assert status == ["rpm-ostree", "status", "--json"]
    assert ["test", "-f", "/etc/ostree/auth.json"] in steps["host"]["lookups"]
    assert steps["read"] == ((0, STATUS, ""), "x86_64", 1)
    done = run_action(os_stage_phase, dict(image=IMAGE, phase="finish", started=started, timeout=300))
    assert steps["stage"][1] == ("finish", "job-1", "/etc/ostree/auth.json", 300, False)
    assert {k: done[k] for k in ("status", "changed", "stage_start", "staged_at", "staged_checksum", "digest",
                                 "reboot_required", "fetched_blobs", "error")} == {
        "status": "staged", "changed": True, "stage_start": NOW, "staged_at": NOW - 4.0, "staged_checksum": CHECKSUM,
        "digest": DIGEST, "reboot_required": True, "fetched_blobs": 0, "error": None}


def test_a_missing_credentials_file_is_not_given_to_the_stage(steps):
    probe(steps)
    run_action(os_stage_phase, dict(image=IMAGE, phase="all", auth_file="/etc/ostree/auth.json"))
    assert steps["stage"] == [("all", None, "", 3600, False)]


def test_a_failed_step_is_the_stage_s_record_and_not_the_task_s_failure(steps):
    probe(steps, start=True)
    steps["stage_error"] = "rpm-ostree rebase failed (rc 1): error: Writing objects: No space left on device"
    result = run_action(os_stage_phase, dict(image=IMAGE, phase="start"))
    assert (result["status"], result["changed"], result["staged_checksum"]) == ("failed", False, None)
    assert result["error"] == ("start the stage on the host: rpm-ostree rebase failed (rc 1): error: Writing "
                               "objects: No space left on device.")
    # The finish gives the start's failure back, and runs nothing.
    again = run_action(os_stage_phase, dict(image=IMAGE, phase="finish", started=result))
    assert (again["status"], again["error"], len(steps["stage"])) == ("failed", result["error"], 1)


def test_an_image_that_is_not_digest_pinned_fails_the_stage_before_anything_runs(steps):
    result = run_action(os_stage_phase, dict(image="registry.example.com/os/fleet:1.1", phase="start"))
    assert result["error"] == ("check the image: image registry.example.com/os/fleet:1.1 is not digest-pinned "
                               "(registry/repository@sha256:<64 hex>).")
    assert steps["host"]["calls"] == [] and steps["stage"] == []


@pytest.mark.parametrize("pull,cache,phase,fetched", [
    ("true", False, "start", True), ("auto", True, "all", True), ("auto", True, "start", False),
    ("auto", False, "all", False), ("false", True, "all", False)])
def test_the_layers_are_fetched_first_when_asked_or_a_whole_stage_has_a_cache(steps, pull, cache, phase, fetched):
    # A start that fetches first (pull true) reads nothing but the probe.
    probe(steps, *(["layer-cache"] if cache else []), start=phase == "start" and pull != "true")
    result = run_action(os_stage_phase, dict(image=IMAGE, phase=phase, pull=pull))
    if phase == "start":
        # A fetch first: the start leaves the stage, whole, to the finish.
        assert result["pull_first"] is fetched
        result = run_action(os_stage_phase, dict(image=IMAGE, phase="finish", pull=pull, started=result))
    assert (steps["pull"] == [(IMAGE, DIGEST, "")]) is fetched
    assert result["fetched_blobs"] == (2 if fetched else 0)
    assert steps["stage"][-1][:2] == (("all", None) if fetched or phase == "all" else ("finish", "job-1"))


def test_finish_needs_the_start(steps):
    result = run_action(os_stage_phase, dict(image=IMAGE, phase="finish"), failed=True)
    assert "started" in result["msg"]
