# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""os_image_stage: each backend stages with its own module's code, given options mapped from one set; one result."""

from __future__ import annotations

import json

import pytest

from ansible_collections.fleetos.layering.tests.unit.plugins.action.utils import fake_host, run_action
from ansible_collections.fleetos.layering.plugins.action import os_image_stage
from ansible_collections.fleetos.layering.plugins.plugin_utils.host import _rebase, _switch

IMAGE = "registry.example.com/os/fleet@sha256:" + "a" * 64
CHECKSUM = "c" * 64


@pytest.fixture
def stages(monkeypatch):
    """The options each backend's stage got, and the result it gives back."""
    seen = {"rpm-ostree": [], "bootc": []}
    answer = {"changed": True, "digest": "sha256:" + "a" * 64, "before": {"checksum": "b" * 64},
              "after": {"checksum": CHECKSUM}}

    def rebase(host, params, check_mode):
        seen["rpm-ostree"].append((params, check_mode))
        return dict(answer, reboot_required=seen.get("reboot_required", True))

    def switch(host, params, check_mode):
        seen["bootc"].append((params, check_mode))
        return dict(answer, reboot_required=False, staged=seen.get("bootc_staged", True))

    monkeypatch.setattr(_rebase, "rebase", rebase)
    monkeypatch.setattr(_switch, "switch", switch)
    fake_host(monkeypatch)
    return seen


def test_rpm_ostree_stages_with_rebase_and_locked_finalization(stages):
    result = run_action(os_image_stage, dict(image=IMAGE, backend="rpm-ostree", transport="remote",
                                             ostree_remote="fleet", auth_file="/etc/ostree/auth.json"))
    (params, check_mode), = stages["rpm-ostree"]
    given = (params["image"], params["transport"], params["ostree_remote"], params["lock_finalization"],
             params["auth_file"], params["state"], check_mode)
    assert given == (IMAGE, "remote", "fleet", True, "/etc/ostree/auth.json", "staged", False)
    # The rebase module's own defaults fill the rest.
    assert params["retries"] == _rebase.ARGUMENT_SPEC["retries"]["default"] and params["allow_tag"] is False
    assert (result["backend"], result["staged"], result["staged_checksum"]) == ("rpm-ostree", True, CHECKSUM)


def test_rpm_ostree_with_nothing_to_reboot_into_has_nothing_staged(stages):
    stages["reboot_required"] = False
    result = run_action(os_image_stage, dict(image=IMAGE, backend="rpm-ostree"))
    assert (result["staged"], result["staged_checksum"]) == (False, None)


@pytest.mark.parametrize("transport,sigpolicy", [("registry", False), ("signed", True)])
def test_bootc_switches_download_only(stages, transport, sigpolicy):
    result = run_action(os_image_stage, dict(image=IMAGE, backend="bootc", transport=transport), check_mode=True)
    (params, check_mode), = stages["bootc"]
    assert (params["transport"], params["enforce_container_sigpolicy"], params["download_only"], check_mode) == (
        "registry", sigpolicy, True, True)
    # Download-only: staged for the activation although an ordinary reboot would not apply it.
    assert (result["staged"], result["staged_checksum"], result["reboot_required"]) == (True, CHECKSUM, False)


def test_bootc_refuses_an_ostree_remote_before_anything_runs(stages):
    result = run_action(os_image_stage, dict(image=IMAGE, backend="bootc", transport="remote", ostree_remote="fleet"),
                        failed=True)
    assert result["msg"] == ("transport remote cannot be used on a bootc host (image '%s'): bootc verifies images "
                             "only with the containers policy (transport signed)." % IMAGE)
    assert stages["bootc"] == [] and stages["rpm-ostree"] == []


@pytest.mark.parametrize("args,message", [
    (dict(image=IMAGE, backend="apt"), "backend"),
    (dict(image=IMAGE), "backend"),
    (dict(image=IMAGE, backend="rpm-ostree", transport="remote"), "ostree_remote"),
])
def test_bad_options_are_refused(stages, args, message):
    result = run_action(os_image_stage, args, failed=True)
    assert message in result["msg"] and stages == {"rpm-ostree": [], "bootc": []}


# ---------------------------------------------------------------- phase start and finish
# The backends' own code runs on a faked connection (utils.fake_host): the exact argv of every command the host
# runs, the status and the job's reads answered by the test.

from ansible_collections.fleetos.layering.tests.unit.plugins.action import test_bootc_switch as bootc  # noqa: E402
from ansible_collections.fleetos.layering.tests.unit.plugins.action import test_rpm_ostree_rebase as rpm  # noqa: E402
from ansible_collections.fleetos.layering.plugins.module_utils.host import _bootc  # noqa: E402
from ansible_collections.fleetos.layering.plugins.plugin_utils.host import _job  # noqa: E402

JOB = "/run/fleetos/stage.Xy3kQ9aB2c"
RM_ARGV = ["rm", "-rf", "--", JOB]
# A read of the job that waits on the host, at the default poll_interval (2 s), for HOST_WAIT seconds at most.
POLL_ARGV = _job.poll_argv(JOB, 30, 2.0)
RUNNING = (5, "", "")
DONE = (0, "", "")


@pytest.fixture
def host(monkeypatch, tmp_path):
    state = fake_host(monkeypatch)
    monkeypatch.setattr(_rebase, "RUN_AUTH_FILE", "/run/ostree/auth.json")
    monkeypatch.setattr(_rebase, "OSTREE_AUTH_FILES", ("/run/ostree/auth.json", "/etc/ostree/auth.json"))
    monkeypatch.setattr("time.sleep", lambda seconds: state.setdefault("sleeps", []).append(seconds))
    state["given"] = tmp_path / "pull-secret.json"
    state["given"].write_text("{}")
    return state


def _argvs(state):
    return [call[0] for call in state["calls"]]


def _launch_argv(command, auth_file="", auth_target="", busy="", retries="0", delay="5", bound="0"):
    keep = auth_target + ".fleetos-kept" if auth_target else ""
    return (["sh", "-c", _job.LAUNCH_SCRIPT, "sh", _job.JOB_TEMPLATE, _job.SYSTEMD_DIR, _job.JOB_SCRIPT, auth_file,
             auth_target, keep, busy, retries, delay, bound] + command)


def _ended(rc, record, output="", attempts=1):
    # The host's time, then the time the job wrote its rc: it ended 2.5 s before the read.
    return (0, "1000.5 998.0\n%d run %d\n%s\n%s" % (rc, attempts, json.dumps(record, sort_keys=True), output), "")


RPM_IMAGE = rpm.IMAGE + "@" + rpm.NEW
RPM_BEFORE = {"reference": rpm.ref(rpm.OLD), "digest": rpm.OLD, "checksum": "c0"}
RPM_RECORD = {"target": rpm.ref(rpm.NEW), "before": RPM_BEFORE}
RPM_STAGED = rpm.status(rpm.STAGED_NEW, rpm.BOOTED_OLD)
BOOTC_IMAGE = bootc.IMAGE + "@" + bootc.NEW
BOOTC_STAGED = bootc.status(bootc.BOOTED_OLD, staged=bootc.STAGED_NEW)
BOOTC_RECORD = {"target": BOOTC_IMAGE, "before": bootc.summary(bootc.OLD, "c0")}


def _all(state, backend, results, **args):
    """What the stage in one task (phase all) returns on a host answering ``results``."""
    state["calls"].clear()
    state["results"] = list(results)
    image = RPM_IMAGE if backend == "rpm-ostree" else BOOTC_IMAGE
    return run_action(os_image_stage, dict(image=image, backend=backend, **args), failed=None)


def test_start_runs_what_comes_before_the_rebase_and_starts_it_as_a_job(host):
    host["results"] = [rpm.status(rpm.BOOTED_OLD), rpm.RESOLVED, (0, JOB + "\n", "")]
    result = run_action(os_image_stage, dict(image=RPM_IMAGE, backend="rpm-ostree", phase="start",
                                             auth_file=str(host["given"])))
    command = ["rpm-ostree", "rebase", "--unchanged-exit-77", "--lock-finalization", "--", rpm.ref(rpm.NEW)]
    launch = _launch_argv(command, str(host["given"]), "/run/ostree/auth.json", "Transaction in progress", "3")
    assert _argvs(host) == [rpm.STATUS_ARGV, rpm.raw_argv(RPM_IMAGE, "--authfile", str(host["given"])), launch]
    # The job's record on stdin: the target and the deployment before, no secret.
    assert json.loads(host["calls"][2][1]["data"]) == RPM_RECORD
    # Nothing is staged yet: rpm-ostree runs on the host.
    assert {key: result[key] for key in ("changed", "job", "started", "staged", "staged_checksum", "before",
                                         "reference", "digest", "backend")} == {
        "changed": True, "job": JOB, "started": True, "staged": False, "staged_checksum": None, "before": RPM_BEFORE,
        "reference": rpm.ref(rpm.NEW), "digest": rpm.NEW, "backend": "rpm-ostree"}
    assert "after" not in result and "reboot_required" not in result


def test_a_start_with_a_job_timeout_gives_the_job_its_bound(host):
    """job_timeout: the job's script gets the bound (it runs the command under coreutils timeout), and the job's
    record keeps it for the finish's sentence."""
    host["results"] = [bootc.status(bootc.BOOTED_OLD), (4, "", ""), (0, JOB + "\n", "")]
    run_action(os_image_stage, dict(image=BOOTC_IMAGE, backend="bootc", phase="start", job_timeout=900))
    command = ["bootc", "switch", "--quiet", "--transport", "registry", "--download-only", "--", BOOTC_IMAGE]
    assert _argvs(host)[2] == _launch_argv(command, bound="900")
    assert json.loads(host["calls"][2][1]["data"]) == dict(BOOTC_RECORD, timeout=900)
    result = run_action(os_image_stage, dict(image=BOOTC_IMAGE, backend="bootc", phase="start", job_timeout=-1),
                        failed=True)
    assert result["msg"] == "job_timeout -1 is negative: expected 0 (no bound) or more seconds."


def test_a_bootc_start_checks_the_sysroot_lock_then_starts_the_switch(host):
    lock_probe = ["sh", "-c", _bootc.LOCK_SCRIPT, "sh", _bootc.SYSROOT_LOCK]
    host["results"] = [bootc.status(bootc.BOOTED_OLD), (4, "", ""), (0, JOB + "\n", "")]
    result = run_action(os_image_stage, dict(image=BOOTC_IMAGE, backend="bootc", phase="start", transport="signed"))
    command = ["bootc", "switch", "--quiet", "--transport", "registry", "--download-only",
               "--enforce-container-sigpolicy", "--", BOOTC_IMAGE]
    assert _argvs(host) == [bootc.STATUS_ARGV, lock_probe, _launch_argv(command)]
    assert json.loads(host["calls"][2][1]["data"]) == BOOTC_RECORD
    assert (result["job"], result["started"], result["staged"], result["staged_checksum"], result["image"]) == (
        JOB, True, False, None, BOOTC_IMAGE)


@pytest.mark.parametrize("backend,results", [
    ("rpm-ostree", [RPM_STAGED]),
    ("bootc", [BOOTC_STAGED]),
])
@pytest.mark.parametrize("phase", ["start", "finish"])
def test_a_host_with_the_image_starts_nothing(host, backend, results, phase):
    expected = _all(host, backend, results)
    calls = _argvs(host)
    started = _all(host, backend, results, phase=phase)
    assert _argvs(host) == calls == [rpm.STATUS_ARGV if backend == "rpm-ostree" else bootc.STATUS_ARGV]
    extra = {"job": None, "started": False} if phase == "start" else {}
    assert started == dict(expected, **extra) and started["changed"] is False and started["staged"] is True


def test_check_mode_starts_nothing(host):
    host["results"] = [rpm.status(rpm.BOOTED_OLD), rpm.RESOLVED]
    result = run_action(os_image_stage, dict(image=RPM_IMAGE, backend="rpm-ostree", phase="start"), check_mode=True)
    assert _argvs(host) == [rpm.STATUS_ARGV, rpm.RAW_ARGV]
    assert (result["changed"], result["job"], result["started"]) == (True, None, False)
    assert result["staged_checksum"] is None


@pytest.mark.parametrize("backend,before,record,ended,after", [
    ("rpm-ostree", [rpm.status(rpm.BOOTED_OLD), rpm.RESOLVED, DONE], RPM_RECORD,
     "Staging deployment...done\n", RPM_STAGED),
    ("bootc", [bootc.status(bootc.BOOTED_OLD), (4, "", ""), DONE], BOOTC_RECORD, "", BOOTC_STAGED),
])
def test_finish_waits_for_the_job_and_returns_what_the_stage_in_one_task_returns(
        host, backend, before, record, ended, after):
    expected = _all(host, backend, before + [after])
    result = _all(host, backend, [RUNNING, RUNNING, _ended(0, record, ended), DONE, after], phase="finish", job=JOB,
                  poll_interval=0.5)
    status_argv = rpm.STATUS_ARGV if backend == "rpm-ostree" else bootc.STATUS_ARGV
    # One read of the job a poll, each waiting on the host for HOST_WAIT seconds at most (60 looks 0.5 s apart),
    # the job removed once read, the status read once.
    assert _argvs(host) == [_job.poll_argv(JOB, 30, 0.5)] * 3 + [RM_ARGV, status_argv]
    assert host["sleeps"] == [0.5, 0.5]
    # What the stage in one task returns, and when the job ended.
    assert result.pop("ended_ago") == 2.5
    assert result == expected and result["changed"] is True and result["staged"] is True
    assert result["staged_checksum"] == "c1"


def test_finish_of_a_rebase_that_found_the_image_staged_is_no_change(host):
    result = _all(host, "rpm-ostree", [_ended(77, RPM_RECORD, "No change.\n"), DONE, RPM_STAGED], phase="finish",
                  job=JOB)
    assert (result["changed"], result["staged"], result["staged_checksum"]) == (False, True, "c1")


@pytest.mark.parametrize("backend,before,record,command,output,message", [
    ("rpm-ostree", [rpm.status(rpm.BOOTED_OLD), rpm.RESOLVED], RPM_RECORD,
     ["rpm-ostree", "rebase", "--unchanged-exit-77", "--lock-finalization", "--", rpm.ref(rpm.NEW)],
     "error: Importing: manifest unknown",
     "Failed to rebase to '%s': Importing: manifest unknown." % rpm.ref(rpm.NEW)),
    ("bootc", [bootc.status(bootc.BOOTED_OLD), (4, "", "")], BOOTC_RECORD,
     ["bootc", "switch", "--quiet", "--transport", "registry", "--download-only", "--", BOOTC_IMAGE],
     "error: Switching: Pulling: manifest unknown",
     "Failed to switch to registry image '%s': Switching: Pulling: manifest unknown." % BOOTC_IMAGE),
])
def test_a_failed_job_fails_the_finish_as_the_failed_command_fails_the_stage(host, backend, before, record, command,
                                                                             output, message):
    expected = _all(host, backend, before + [(1, "", output + "\n")])
    result = _all(host, backend, [_ended(1, record, "Pulling manifest...\n" + output + "\n"), DONE], phase="finish",
                  job=JOB)
    assert _argvs(host) == [POLL_ARGV, RM_ARGV]
    assert result["failed"] is True and result["msg"] == expected["msg"] == message
    assert (result["cmd"], result["rc"]) == (command, 1) and "Pulling manifest" in result["stderr"]


def test_a_job_still_running_at_the_timeout_fails_the_finish_and_is_left(host):
    result = _all(host, "rpm-ostree", [RUNNING, RUNNING], phase="finish", job=JOB, timeout=0)
    # No time left: the host takes no look more than the one read.
    assert _argvs(host) == [_job.poll_argv(JOB, 0, 2.0)]
    assert result["failed"] is True and result["job"] == JOB
    assert result["msg"] == ("The stage job %s on the host did not end within the timeout of 0 seconds: it keeps "
                             "running, and a later task with phase finish and this job collects it." % JOB)


@pytest.mark.parametrize("job", [None, ""])
def test_finish_without_a_job_is_the_stage_in_one_task(host, job):
    results = [rpm.status(rpm.BOOTED_OLD), rpm.RESOLVED, DONE, RPM_STAGED]
    expected = _all(host, "rpm-ostree", results)
    calls = _argvs(host)
    assert _all(host, "rpm-ostree", results, phase="finish", job=job) == expected and _argvs(host) == calls


@pytest.mark.parametrize("args,message", [
    (dict(phase="finish", job="/etc"), "job '/etc' is not a stage job: expected what a task with phase start "
                                       "returned in job, /run/fleetos/stage.XXXXXXXXXX."),
    (dict(phase="finish", job=JOB, timeout=-1), "timeout -1 is negative: expected 0 or more seconds."),
    (dict(phase="start", poll_interval=0), "poll_interval 0.0 is not positive: expected a number of seconds above 0."),
    (dict(phase="later"), "phase"),
])
def test_bad_job_options_are_refused_before_anything_runs(host, args, message):
    result = _all(host, "rpm-ostree", [], **args)
    assert result["failed"] is True and message in result["msg"] and _argvs(host) == []
