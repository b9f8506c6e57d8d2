# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""_job: a stage's long command started as a job and collected later, for real on this machine. The host is
ConnectionHost over a connection that runs its lines with /bin/sh here; rpm-ostree is a fake on PATH that answers
``status --json`` from a file and, for a rebase, records its argv, environment and the auth file it sees, then
waits for the test's go. The job scripts (launch, job, poll) run exactly as on a host without systemd (setsid)."""

from __future__ import annotations

import json
import os
import signal
import stat
import threading
import time

import pytest

from ansible_collections.fleetos.layering.tests.unit.plugins.module_utils.host.test__host import _LocalAction
from ansible_collections.fleetos.layering.plugins.plugin_utils.host import _job, _rebase
from ansible_collections.fleetos.layering.plugins.module_utils._errors import (
    CommandError,
    InvalidInputError,
    TransactionBusyError,
)
from ansible_collections.fleetos.layering.plugins.module_utils.images._image_ref import shown
from ansible_collections.fleetos.layering.plugins.module_utils._params import defaults
from ansible_collections.fleetos.layering.plugins.plugin_utils.host._remote import ConnectionHost

IMAGE = "198.51.100.1:5000/fleetos/lab-os"
NEW = "sha256:" + "1b" * 32
REFERENCE = "ostree-unverified-registry:%s@%s" % (IMAGE, NEW)
JOB_ID = "/run/fleetos/stage.abcdefghij"
SECRET = '{"auths": {"198.51.100.1:5000": {"auth": "c2VjcmV0OnMzY3IzdA=="}}}\n'

# The fake rpm-ostree: status from status.json; a rebase counts its runs, records what it got, waits for go,
# answers busy for the first runs (busy), else stages (then-status.json) and prints say, exiting with exit. It
# waits 30 seconds at the most: a failed test leaves nothing running.
FAKE = r"""#!/bin/sh
d=%(dir)s
if [ "$1" = status ]; then cat "$d/status.json"; exit 0; fi
n=$(cat "$d/runs" 2>/dev/null || echo 0); n=$((n + 1)); echo "$n" > "$d/runs"
printf '%%s\n' "$@" > "$d/argv.tmp" && mv "$d/argv.tmp" "$d/argv"
echo "$LC_ALL" > "$d/lc_all.tmp" && mv "$d/lc_all.tmp" "$d/lc_all"
{ cat "%(auth)s" 2>/dev/null || echo none; } > "$d/auth-seen.tmp" && mv "$d/auth-seen.tmp" "$d/auth-seen"
i=0
while [ ! -e "$d/go" ] && [ "$i" -lt 1500 ]; do sleep 0.02; i=$((i + 1)); done
if [ "$n" -le "$(cat "$d/busy" 2>/dev/null || echo 0)" ]; then
  echo "error: Transaction in progress: deploy" >&2
  echo " You can cancel the current transaction with \`rpm-ostree cancel\`" >&2
  exit 1
fi
[ -e "$d/then-status.json" ] && cp "$d/then-status.json" "$d/status.json"
cat "$d/say" 2>/dev/null
cat "$d/err" >&2 2>/dev/null
exit "$(cat "$d/exit" 2>/dev/null || echo 0)"
"""


def _deployment(checksum, digest=None, booted=False, staged=False):
    raw = {"id": "os-%s.0" % checksum, "osname": "os", "checksum": checksum, "serial": 0, "booted": booted,
           "staged": staged}
    if digest:
        raw.update({"container-image-reference": "ostree-unverified-registry:%s@%s" % (IMAGE, digest),
                    "container-image-reference-digest": digest})
    return raw


# Booted from an ostree origin (no image digest: nothing to resolve); then staged at NEW.
BEFORE = {"deployments": [_deployment("c0", booted=True)], "transaction": None}
AFTER = {"deployments": [_deployment("c1", NEW, staged=True), _deployment("c0", booted=True)], "transaction": None}


class Fleet:
    """This machine as a host: the fake rpm-ostree, the auth files, the jobs' directory."""

    def __init__(self, tmp_path, monkeypatch):
        self.dir = tmp_path / "fake"
        self.dir.mkdir()
        self.run_auth = tmp_path / "run" / "ostree" / "auth.json"
        self.source = tmp_path / "etc" / "pull-secret.json"
        self.source.parent.mkdir()
        self.source.write_text(SECRET)
        self.source.chmod(0o600)
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        tool = bin_dir / "rpm-ostree"
        tool.write_text(FAKE % {"dir": self.dir, "auth": self.run_auth})
        tool.chmod(0o755)
        monkeypatch.setenv("PATH", "%s:%s" % (bin_dir, os.environ["PATH"]))
        self.jobs = tmp_path / "run" / "fleetos"
        monkeypatch.setattr(_job, "JOB_TEMPLATE", str(self.jobs / "stage.XXXXXXXXXX"))
        monkeypatch.setattr(_job, "SYSTEMD_DIR", str(tmp_path / "no-systemd"))
        monkeypatch.setattr(_rebase, "RUN_AUTH_FILE", str(self.run_auth))
        monkeypatch.setattr(_rebase, "OSTREE_AUTH_FILES", (str(self.run_auth),))
        self.action = _LocalAction()
        self.host = ConnectionHost(self.action)
        self.set_status(BEFORE)
        (self.dir / "then-status.json").write_text(json.dumps(AFTER))

    def set_status(self, doc):
        (self.dir / "status.json").write_text(json.dumps(doc))

    def params(self, **options):
        options.setdefault("auth_file", str(self.source))
        options.setdefault("retry_delay", 0)
        return defaults(_rebase.ARGUMENT_SPEC, image="%s@%s" % (IMAGE, NEW), lock_finalization=True, **options)

    def start(self, params, bound=0):
        result, step = _rebase.prepare(self.host, params, False)
        assert step is not None, result
        return _job.start(self.host, result, step, bound=bound)

    def finish(self, job, params, timeout=30):
        def resume(before):
            return _rebase.Rebase.resume(self.host, params, before)
        return _job.finish(self.host, job, resume, timeout, 0.02)

    def go(self, say="Staging deployment...done\n", err="", code=0):
        for name, value in (("say", say), ("err", err), ("exit", str(code))):
            (self.dir / name).write_text(value)
        (self.dir / "go").write_text("")

    def wait_for(self, name):
        deadline = time.time() + 10
        while not (self.dir / name).exists():
            assert time.time() < deadline, "the job never ran rpm-ostree"
            time.sleep(0.02)
        return (self.dir / name).read_text()

    def rebase_here(self, params):
        """What the synchronous stage (phase all) returns, or its error, on a fresh host."""
        self.set_status(BEFORE)
        for name in ("runs",):
            if (self.dir / name).exists():
                (self.dir / name).unlink()
        try:
            return _rebase.rebase(self.host, params, False)
        except CommandError as exc:
            return exc


@pytest.fixture
def fleet(tmp_path, monkeypatch):
    fleet_ = Fleet(tmp_path, monkeypatch)
    yield fleet_
    # A job a test left waiting for its go (a failed test) is stopped with its process group: no test leaves
    # a process behind.
    for pid_file in fleet_.jobs.glob("*/pid") if fleet_.jobs.is_dir() else ():
        try:
            os.killpg(int(pid_file.read_text()), signal.SIGKILL)
        except (OSError, ValueError):
            pass


def _listing(path):
    return sorted(os.listdir(path))


@pytest.mark.parametrize("previous", [None, "OLD\n"])
def test_start_returns_at_once_and_finish_concludes_as_the_synchronous_stage(fleet, previous):
    if previous is not None:
        fleet.run_auth.parent.mkdir(parents=True)
        fleet.run_auth.write_text(previous)
        fleet.run_auth.chmod(0o644)
    params = fleet.params()
    begun = time.monotonic()
    started = fleet.start(params)
    took = time.monotonic() - begun
    job = started["job"]
    # Started, not staged: rpm-ostree waits for the test's go, and the job has no rc yet.
    assert took < 2, took
    assert started == {"changed": True, "reference": REFERENCE, "digest": NEW, "job": job, "started": True,
                       "before": {"reference": None, "digest": None, "checksum": "c0"}}
    assert os.path.dirname(job) == str(fleet.jobs) and _listing(fleet.jobs) == [os.path.basename(job)]
    assert stat.S_IMODE(os.stat(fleet.jobs).st_mode) == 0o700 and stat.S_IMODE(os.stat(job).st_mode) == 0o700
    # The command the synchronous stage runs, in the C locale, with the pull secret where rpm-ostree reads it.
    assert fleet.wait_for("argv").splitlines() == ["rebase", "--unchanged-exit-77", "--lock-finalization", "--",
                                                   REFERENCE]
    assert fleet.wait_for("auth-seen") == SECRET and fleet.wait_for("lc_all") == "C\n"
    assert "rc" not in _listing(job)
    # The secret is in no command line, and not in the job's directory.
    assert not [line for line in fleet.action.lines if "c2VjcmV0" in line]
    for name in _listing(job):
        assert "c2VjcmV0" not in (fleet.jobs / job / name).read_text(), name

    fleet.go()
    finished = fleet.finish(job, params)
    assert finished["changed"] is True and finished["after"]["checksum"] == "c1" and finished["reboot_required"]
    # Read once, then removed; what was at the auth file's place is back (content and mode), or nothing is.
    assert _listing(fleet.jobs) == []
    if previous is None:
        assert not fleet.run_auth.exists()
    else:
        assert fleet.run_auth.read_text() == previous and stat.S_IMODE(os.stat(fleet.run_auth).st_mode) == 0o644
    assert _listing(fleet.run_auth.parent) == ([] if previous is None else ["auth.json"])
    assert "c2VjcmV0" not in json.dumps(finished)
    # Exactly what the stage in one task returns, and how long ago the job ended, by the host's clock.
    assert 0 <= finished.pop("ended_ago") < 30
    assert finished == fleet.rebase_here(params)


def test_a_failed_command_fails_the_finish_with_its_last_error_line_and_the_job_is_removed(fleet):
    params = fleet.params()
    job = fleet.start(params)["job"]
    fleet.go(say="Pulling manifest: ostree-unverified-registry:...\n", err="error: Importing: bad layer sha256:ab\n",
             code=1)
    with pytest.raises(CommandError) as caught:
        fleet.finish(job, params)
    assert caught.value.msg == "Failed to rebase to '%s': Importing: bad layer sha256:ab." % REFERENCE
    assert caught.value.details["rc"] == 1 and "bad layer" in caught.value.details["stderr"]
    assert _listing(fleet.jobs) == [] and not fleet.run_auth.exists()
    # The stage in one task says the same.
    assert fleet.rebase_here(params).msg == caught.value.msg


@pytest.mark.parametrize("busy,retries,runs", [(2, 2, 3), (5, 1, 2)])
def test_the_job_retries_while_another_transaction_is_in_progress(fleet, busy, retries, runs):
    (fleet.dir / "busy").write_text(str(busy))
    params = fleet.params(retries=retries)
    job = fleet.start(params)["job"]
    fleet.go()
    if busy < runs:
        assert fleet.finish(job, params)["changed"] is True
        assert (fleet.dir / "runs").read_text() == "%d\n" % runs
    else:
        with pytest.raises(TransactionBusyError) as caught:
            fleet.finish(job, params)
        assert (fleet.dir / "runs").read_text() == "%d\n" % runs
        assert caught.value.msg == ("Failed to rebase to '%s': another transaction was still in progress after %d "
                                    "attempts (Transaction in progress: deploy)." % (REFERENCE, runs))
        assert fleet.rebase_here(params).msg == caught.value.msg


def test_an_auth_file_that_cannot_be_put_in_place_fails_as_in_one_task(fleet):
    fleet.run_auth.mkdir(parents=True)
    params = fleet.params()
    job = fleet.start(params)["job"]
    with pytest.raises(CommandError) as caught:
        fleet.finish(job, params)
    assert caught.value.msg == "Failed to put auth_file '%s' where rpm-ostree reads it: %s is not a regular file." % (
        shown(str(fleet.source), 80), fleet.run_auth)
    assert not (fleet.dir / "runs").exists() and fleet.run_auth.is_dir() and _listing(fleet.jobs) == []
    assert fleet.rebase_here(params).msg == caught.value.msg


def test_past_the_timeout_the_job_keeps_running_and_a_later_finish_collects_it(fleet):
    params = fleet.params()
    job = fleet.start(params)["job"]
    fleet.wait_for("auth-seen")
    with pytest.raises(CommandError) as caught:
        fleet.finish(job, params, timeout=0)
    assert caught.value.msg == ("The stage job %s on the host did not end within the timeout of 0 seconds: it keeps "
                                "running, and a later task with phase finish and this job collects it." % job)
    assert caught.value.details == {"job": job} and os.path.isdir(job) and fleet.run_auth.read_text() == SECRET
    fleet.go()
    assert fleet.finish(job, params)["after"]["checksum"] == "c1"
    assert not fleet.run_auth.exists()


def test_a_read_waits_on_the_host_for_the_job_s_end_one_command_for_the_whole_wait(fleet):
    params = fleet.params()
    job = fleet.start(params)["job"]
    fleet.wait_for("auth-seen")
    # The stage ends half a second into the finish's first read: that read sees it, with no other.
    go = threading.Timer(0.5, fleet.go)
    before = len(fleet.action.lines)
    go.start()
    try:
        assert fleet.finish(job, params)["after"]["checksum"] == "c1"
    finally:
        go.cancel()
    reads = [line for line in fleet.action.lines[before:] if "looks=" in line]
    assert len(reads) == 1 and not os.path.exists(job)


def test_a_host_whose_sleep_takes_no_fraction_answers_at_once_and_the_controller_waits(fleet, tmp_path):
    params = fleet.params()
    job = fleet.start(params)["job"]
    fleet.wait_for("auth-seen")
    (tmp_path / "bin" / "sleep").write_text("#!/bin/sh\necho 'sleep: invalid time interval' >&2\nexit 1\n")
    (tmp_path / "bin" / "sleep").chmod(0o755)
    started = time.monotonic()
    rc, _out, _err = fleet.host.run(_job.poll_argv(job, 500, 0.5))
    assert rc == 5 and time.monotonic() - started < 5
    (tmp_path / "bin" / "sleep").unlink()
    fleet.go()
    assert fleet.finish(job, params)["after"]["checksum"] == "c1"


@pytest.mark.parametrize("seconds,interval,looks", [(30, 0.5, ["60", "0.500"]), (30, 0.001, ["600", "0.050"]),
                                                    (0.4, 2.0, ["0", "2.000"])])
def test_the_host_looks_poll_interval_apart_for_the_seconds_given_never_closer_than_min_look(
        seconds, interval, looks):
    assert _job.poll_argv(JOB_ID, seconds, interval) == ["sh", "-c", _job.POLL_SCRIPT, "sh", JOB_ID] + looks


def test_a_job_past_its_bound_ends_its_command_on_the_host_and_the_finish_says_so(fleet):
    """A stage that stalls (the fake rpm-ostree waits for a go that never comes): the job itself ends the command
    after its bound, with no task waiting; the finish reads that, and the auth file is back."""
    params = fleet.params()
    began = time.time()
    job = fleet.start(params, bound=2)["job"]
    fleet.wait_for("auth-seen")
    with pytest.raises(CommandError) as caught:
        fleet.finish(job, params, timeout=30)
    assert caught.value.msg.startswith("The stage did not finish within 2 s: the job ended its command on the host (")
    assert caught.value.details["rc"] == 124 and caught.value.details["timed_out"] is True
    assert caught.value.details["job"] == job
    assert time.time() - began < 25
    assert not fleet.run_auth.exists() and _listing(fleet.jobs) == []


def test_the_first_run_of_a_bounded_job_has_its_whole_bound_when_the_clock_turns_a_second_before_it(fleet):
    """date +%s counts whole seconds: a job started at the end of a second read its bound of 1 s as used up, and
    ended with no run of its command. Here every date +%s is a second later than the one before."""
    clock = fleet.dir.parent / "bin" / "date"
    clock.write_text('#!/bin/sh\n'
                     'if [ "$*" = +%%s ]; then\n'
                     '  n=$(cat %(count)s 2>/dev/null || echo 0); echo $((n + 1)) > %(count)s; echo $((1000 + n))\n'
                     'else exec /bin/date "$@"; fi\n' % {"count": fleet.dir / "seconds"})
    clock.chmod(0o755)
    params = fleet.params()
    job = fleet.start(params, bound=1)["job"]
    fleet.go()
    assert fleet.wait_for("auth-seen") == SECRET
    finished = fleet.finish(job, params)
    assert finished["changed"] is True and finished["after"]["checksum"] == "c1"
    assert (fleet.dir / "runs").read_text() == "1\n"


def test_a_stopped_job_puts_the_auth_file_back_and_says_so(fleet):
    fleet.run_auth.parent.mkdir(parents=True)
    fleet.run_auth.write_text("OLD\n")
    params = fleet.params()
    job = fleet.start(params)["job"]
    fleet.wait_for("argv")
    # The job leads its own process group (setsid): stopping it stops rpm-ostree too.
    os.killpg(int((fleet.jobs / job / "pid").read_text()), signal.SIGTERM)
    with pytest.raises(CommandError) as caught:
        fleet.finish(job, params)
    assert caught.value.details["rc"] == 143 and caught.value.msg.startswith("Failed to rebase to '%s': " % REFERENCE)
    assert fleet.run_auth.read_text() == "OLD\n" and _listing(fleet.run_auth.parent) == ["auth.json"]


def test_a_job_of_another_image_is_refused_and_left(fleet):
    params = fleet.params()
    job = fleet.start(params)["job"]
    fleet.go()
    other = defaults(_rebase.ARGUMENT_SPEC, image="%s@sha256:%s" % (IMAGE, "2c" * 32), auth_file=None)
    with pytest.raises(InvalidInputError) as caught:
        fleet.finish(job, other)
    assert caught.value.msg == ("The stage job %s stages '%s', not 'ostree-unverified-registry:%s@sha256:%s': finish a "
                                "job with the options it was started with." % (job, REFERENCE, IMAGE, "2c" * 32))
    assert os.path.isdir(job)
    fleet.finish(job, params)


@pytest.mark.parametrize("job", ["/", "/run/fleetos", "/run/fleetos/stage.abc", "/tmp/stage.abcdefghij", None, 3])
def test_only_a_job_that_start_makes_is_read_or_removed(fleet, job):
    with pytest.raises(InvalidInputError) as caught:
        fleet.finish(job, fleet.params())
    assert caught.value.msg.startswith("job '%s' is not a stage job: expected what a task with phase start returned "
                                       "in job, " % job)
    assert fleet.action.lines == []


def test_a_job_that_is_gone_is_named(fleet):
    job = str(fleet.jobs / "stage.abcdefghij")
    with pytest.raises(CommandError) as caught:
        fleet.finish(job, fleet.params())
    assert caught.value.msg == ("Failed to finish the stage job %s: the host has no such job (a reboot ends a job, and "
                                "a finished job is removed)." % job)


@pytest.mark.parametrize("timeout,interval,message", [
    (-1, 2.0, "timeout -1 is negative: expected 0 or more seconds."),
    (10, 0.0, "poll_interval 0.0 is not positive: expected a number of seconds above 0."),
])
def test_bad_timing_is_refused(timeout, interval, message):
    with pytest.raises(InvalidInputError) as caught:
        _job.check_timing(timeout, interval)
    assert caught.value.msg == message


def test_the_poll_waits_the_interval_between_reads_and_no_longer_than_the_timeout():
    class Host:
        calls = 0

        def run(self, argv):
            self.calls += 1
            return 5, "", ""

    now = [100.0]
    sleeps = []

    def sleep(seconds):
        sleeps.append(seconds)
        now[0] += seconds

    host = Host()
    with pytest.raises(CommandError):
        _job.wait(host, "/run/fleetos/stage.abcdefghij", 5, 2.0, sleep, lambda: now[0])
    assert sleeps == [2.0, 2.0, 1.0] and host.calls == 4


# A fake systemd-run: records its argv, then runs the command detached (exit: what it exits with instead).
FAKE_SYSTEMD_RUN = r"""#!/bin/sh
printf '%%s\0' "$@" > %(dir)s/systemd-run.argv
if [ -e %(dir)s/systemd-run.fails ]; then cat %(dir)s/systemd-run.fails >&2; exit 1; fi
shift 5
setsid "$@" < /dev/null > /dev/null 2>&1 &
"""


@pytest.fixture
def systemd(fleet, tmp_path, monkeypatch):
    """The host is managed by systemd: its runtime directory is there, and systemd-run (the fake)."""
    (tmp_path / "systemd").mkdir()
    monkeypatch.setattr(_job, "SYSTEMD_DIR", str(tmp_path / "systemd"))
    tool = tmp_path / "bin" / "systemd-run"
    tool.write_text(FAKE_SYSTEMD_RUN % {"dir": fleet.dir})
    tool.chmod(0o755)
    return fleet


def test_under_systemd_the_job_is_a_transient_unit(systemd):
    params = systemd.params()
    job = systemd.start(params)["job"]
    argv = (systemd.dir / "systemd-run.argv").read_text().split("\0")
    assert argv[:8] == ["--quiet", "--collect", "--unit", "fleetos-stage-" + job.rsplit(".", 1)[1],
                        "--property=Type=exec", "sh", "-c", _job.JOB_SCRIPT]
    kept = str(systemd.run_auth) + ".fleetos-kept"
    assert argv[8:14] == ["sh", job, str(systemd.source), str(systemd.run_auth), kept,
                          "Transaction in progress"]
    assert "pid" not in _listing(job)
    systemd.go()
    finished = systemd.finish(job, params)
    assert finished["after"]["checksum"] == "c1" and _listing(systemd.jobs) == [] and not systemd.run_auth.exists()


def test_a_unit_that_systemd_refuses_fails_the_start_and_leaves_nothing(systemd):
    (systemd.dir / "systemd-run.fails").write_text("Failed to start transient service unit: Unit exists.\n")
    with pytest.raises(CommandError) as caught:
        systemd.start(systemd.params())
    assert caught.value.msg == "Failed to start the rpm-ostree job on the host: Failed to start transient service " \
                               "unit: Unit exists."
    assert _listing(systemd.jobs) == [] and not (systemd.dir / "runs").exists()
