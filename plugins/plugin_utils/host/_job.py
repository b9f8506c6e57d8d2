# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# This is a private plugin_util of fleetos.layering: its interface may change at any
# time and it is not meant to be used by other collections.

"""A step's long command run on the host as a job, detached: one short task starts it, a later one collects it.

A stage's long command (``rpm-ostree rebase``, ``bootc switch --download-only``) takes seconds to minutes.
Run in its task, it holds an Ansible fork all that time, so a fleet larger than the forks stages a few hosts
at a time. As a job, every host's task only starts it (:func:`start`) and returns; the command runs on the
host, and a later task (:func:`finish`) waits for it with cheap reads that wait on the host and concludes as
the synchronous step does.

A step is a :class:`LongCommand`: what its ``prepare`` read of the host (its target, the deployment before)
and the long command it left to do, which it runs here and now (:meth:`LongCommand.run`) or as a job. The job
is one shell script, :data:`JOB_SCRIPT`, that does what the synchronous step does: the auth file put in place
as ``Host.placed_file`` does (``_host.PLACE_SCRIPT``, and ``RESTORE_SCRIPT`` on every path), the command with
the same argv and environment, retried while the tool says it is busy as the step's client retries, and its
exit status and output written to the job's directory, the exit status last and atomically.

The job's directory, its id, is a private ``mktemp -d`` directory under ``/run/fleetos`` (0700): gone with a
reboot, as the job is. It holds the job's record (the step's target and the deployment before, no secret),
the command's output and, once it has ended, ``rc``. systemd runs the job as a transient unit when it manages
the host (``systemd-run``: the job outlives the ssh session and shows in the journal); elsewhere (the lab's
nodes) ``setsid``, its input and output files, so that the session ends at once.
"""

from __future__ import annotations

import collections
import json
import re
import time

from ansible_collections.fleetos.layering.plugins.module_utils._errors import CommandError, InvalidInputError
from ansible_collections.fleetos.layering.plugins.module_utils.host._host import (
    ENVIRON,
    KEEP_SUFFIX,
    PLACE_SCRIPT,
    RESTORE_SCRIPT,
    HostFileError,
    error_line,
    quote,
)
from ansible_collections.fleetos.layering.plugins.module_utils.images._image_ref import shown
from ansible_collections.fleetos.layering.plugins.plugin_utils.host._poll import PollTimeout, poll_until

# mktemp's template of a job's directory: the X are random letters and digits.
JOB_TEMPLATE = "/run/fleetos/stage.XXXXXXXXXX"
# There when systemd manages the host (sd_booted(3)).
SYSTEMD_DIR = "/run/systemd/system"
# How much of a job's output comes back (its end: the error is last).
OUTPUT_LIMIT = 65536
# Seconds coreutils timeout gives a command past the job's bound between its TERM and a KILL.
KILL_AFTER = 10
# The longest a read of a job waits on the host for its end (seconds): one ssh command for that time, where the
# controller would run one each poll_interval. It keeps the task's worker as the controller's own sleeps do.
HOST_WAIT = 30
# The shortest pause between two of the host's looks at a job (seconds), whatever poll_interval says.
MIN_LOOK = 0.05

# $1 the job's directory; $2 the auth file to put in place ('' for none), $3 where the tool reads it, $4 where
# what was there is kept meanwhile; $5 what the tool prints when another process holds it ('' never to retry),
# $6 how many times to retry then, $7 the seconds between two runs; $8 the seconds the command may run, its
# retries included, from the job's start (0: no bound; the first run has all of it, as date's whole seconds could
# leave it none); the rest is the command. Its output goes to output; then
# the exit status, the step that gave it (place, run, or timeout: coreutils timeout ended the command past the
# bound, TERM then KILL KILL_AFTER seconds later) and the number of runs go to rc, renamed into place: the job is
# the only writer of its private directory, so this is no compare-and-swap for the one writer (_host.REPLACE_SCRIPT).
JOB_SCRIPT = r"""
job=$1 src=$2 dst=$3 keep=$4 busy=$5 retries=$6 delay=$7 bound=$8
shift 8
umask 077
export %(environ)s
place() (%(place)s)
restore() (%(restore)s)
placed= attempt=0
end() {
  if [ -n "$placed" ]; then restore "$dst" "$keep"; placed=; fi
  printf '%%s %%s %%s\n' "$1" "$2" "$attempt" > "$job/rc.tmp" && mv -f -- "$job/rc.tmp" "$job/rc"
  exit 0
}
trap 'end 129 run' HUP
trap 'end 130 run' INT
trap 'end 143 run' TERM
: > "$job/output"
if [ -n "$src" ]; then
  place "$src" "$dst" "$keep" 2> "$job/output"
  st=$?
  case $st in
    0) placed=1 ;;
    6) ;;
    *) end "$st" place ;;
  esac
fi
started=$(date +%%s)
while :; do
  attempt=$((attempt + 1))
  if [ "$bound" -gt 0 ]; then
    left=$bound
    [ "$attempt" -eq 1 ] || left=$((started + bound - $(date +%%s)))
    [ "$left" -gt 0 ] || end 124 timeout
    timeout -k %(kill_after)d "$left" "$@" > "$job/output" 2>&1
    st=$?
    case $st in 124|137) end "$st" timeout ;; esac
  else
    "$@" > "$job/output" 2>&1
    st=$?
  fi
  [ "$st" -ne 0 ] && [ -n "$busy" ] && [ "$attempt" -le "$retries" ] || break
  case $(cat -- "$job/output") in
    *"$busy"*) sleep "$delay" ;;
    *) break ;;
  esac
done
end "$st" run
""" % dict(environ=" ".join("%s=%s" % (key, quote(value)) for key, value in sorted(ENVIRON.items())),
           place=PLACE_SCRIPT, restore=RESTORE_SCRIPT, kill_after=KILL_AFTER)

# $1 mktemp's template of the job's directory, $2 systemd's runtime directory, $3 the job script; the rest its
# arguments after the job's directory. The job's record on stdin. Prints the job's directory once it runs. Under
# setsid the job leads a process group of its own, whose id is in pid; under systemd its unit is
# fleetos-stage-<the directory's random part>.
LAUNCH_SCRIPT = r"""
template=$1 systemd=$2 script=$3
shift 3
umask 077
jobs=${template%/*}
[ -d "$jobs" ] || mkdir -p -m 0700 -- "$jobs" || exit 1
job=$(mktemp -d "$template") || exit 1
cat > "$job/job.json" || { rm -rf -- "$job"; exit 1; }
if [ -d "$systemd" ]; then
  systemd-run --quiet --collect --unit "fleetos-stage-${job##*.}" --property=Type=exec \
    sh -c "$script" sh "$job" "$@" < /dev/null || { rm -rf -- "$job"; exit 1; }
else
  setsid sh -c "$script" sh "$job" "$@" < /dev/null > "$job/log" 2>&1 &
  echo "$!" > "$job/pid"
fi
printf '%s\n' "$job"
"""

# $1 the job's directory, $2 how many more looks the host takes while the job runs, $3 the seconds between two
# looks (a sleep that fails, as one that takes no fraction, ends the looks). Exit 4: there is no such job; 5: it
# is still running; else the host's time and the time its rc was written (seconds since the epoch; empty where
# date cannot tell), its rc line, its record and the end of its output.
POLL_SCRIPT = r"""
[ -d "$1" ] || exit 4
looks=${2:-0}
while [ ! -f "$1/rc" ]; do
  [ "$looks" -gt 0 ] && sleep "$3" 2>/dev/null || exit 5
  looks=$((looks - 1))
  [ -d "$1" ] || exit 4
done
printf '%%s %%s\n' "$(date +%%s.%%N 2>/dev/null)" "$(date -r "$1/rc" +%%s.%%N 2>/dev/null)"
cat -- "$1/rc" "$1/job.json" && exec tail -c %d -- "$1/output"
""" % OUTPUT_LIMIT

# What a job left: its exit status, the step that gave it (place: putting the auth file in place; run: the
# command), how many times the command ran, its output (stdout and stderr as one), its record, and how many
# seconds before the read it ended (by the host's clock; None when the host cannot tell).
Ended = collections.namedtuple("Ended", "rc step attempts output record ago")


class LongCommand:
    """A step's long command, left to do once the step has read the host: run here and now, or as a job.

    A subclass (``_rebase.Rebase``, ``_switch.Switch``) gives the tool's name, the command's argv, what the
    tool prints when it is busy (to retry then), the synchronous call, what a finished job's exit status means
    and the conclusion (the step's result after the command). ``result`` is the step's result so far, ``target``
    the text that names what the command stages (kept in the job's record: a job is finished only by a task
    with the same target), ``before`` the deployment before it.
    """

    TOOL = None
    BUSY = None

    def __init__(self, host, params, result, target, before, auth_target):
        self.host = host
        self.params = params
        self.result = result
        self.target = target
        self.before = before
        self.auth_target = auth_target
        self.retries = params["retries"]
        self.retry_delay = params["retry_delay"]

    @classmethod
    def target_of(cls, host, params):
        """What the step's constructor takes after ``before``: the tool's client and the target, as the task's
        ``params`` name them."""
        raise NotImplementedError

    @classmethod
    def resume(cls, host, params, before):
        """The step that a job runs for a task with ``params``, ``before`` the deployment its prepare read."""
        return cls(host, params, before, *cls.target_of(host, params))

    @property
    def argv(self):
        """The long command's argv, as the synchronous call runs it."""
        raise NotImplementedError

    @property
    def record(self):
        """What a job keeps for the task that finishes it (no secret)."""
        return {"target": self.target, "before": self.before}

    def launching(self):
        """Wait for what the job cannot wait for on the host; nothing by default."""

    def command(self):
        """Run the long command here and now; -> whether it changed something."""
        raise NotImplementedError

    def finished(self, rc, output, attempts):
        """What :meth:`command` returns, or raises, for the same command that ran as a job: its exit status
        ``rc``, its ``output`` (stdout and stderr as one), after ``attempts`` runs."""
        raise NotImplementedError

    def conclude(self, changed):
        """The step's result once the long command has run (``changed``: what it returned)."""
        raise NotImplementedError

    def run(self):
        """The long command here and now, with the auth file in place as long as it runs."""
        auth_file = self.params["auth_file"]
        if not auth_file:
            return self.command()
        try:
            with self.host.placed_file(auth_file, self.auth_target):
                return self.command()
        except HostFileError as exc:
            raise self.auth_error(str(exc)) from None

    def auth_error(self, cause):
        """The error of an auth file that could not be put in place (``cause``)."""
        return CommandError("Failed to put auth_file '%s' where %s reads it: %s." % (
            shown(self.params["auth_file"], 80), self.TOOL, cause.rstrip(".")), before=self.before)

    def collected(self, ended):
        """What :meth:`run` returns, or raises, for the job that ``ended``."""
        if ended.step == "place":
            raise self.auth_error(error_line(ended.output, ended.rc))
        return self.finished(ended.rc, ended.output, ended.attempts)


def run_here(result, step):
    """The task's result with ``step``'s long command run in the task itself; ``result`` without a step (what a
    prepare returns)."""
    return result if step is None else step.conclude(step.run())


def check_timing(timeout, poll_interval):
    """Refuse a negative timeout or a poll interval that is not positive, before anything runs."""
    if timeout < 0:
        raise InvalidInputError("timeout %d is negative: expected 0 or more seconds." % timeout)
    if not poll_interval > 0:
        raise InvalidInputError("poll_interval %s is not positive: expected a number of seconds above 0."
                                % poll_interval)


def start(host, result, step, bound=0):
    """Start ``step``'s long command as a job on ``host``; -> the task's result with the job's id (``job``).

    With no step (``prepare`` found nothing to do, or check mode), ``result`` is the result already, with
    ``job`` null. With a ``bound`` (seconds, 0: none), the job ends its command on the host that long after it
    started (coreutils ``timeout``), whether or not a task waits for it: a stage that stalls (a registry that
    stops answering) neither runs on nor holds the host's tool.
    """
    if step is None:
        return dict(result, job=None, started=False)
    step.launching()
    auth_file = step.params["auth_file"] or ""
    auth_target = step.auth_target if auth_file else ""
    keep = auth_target + KEEP_SUFFIX if auth_file else ""
    busy = step.BUSY or ""
    argv = ["sh", "-c", LAUNCH_SCRIPT, "sh", JOB_TEMPLATE, SYSTEMD_DIR, JOB_SCRIPT, auth_file, auth_target, keep,
            busy, str(step.retries if busy else 0), str(step.retry_delay), str(int(bound or 0))] + list(step.argv)
    record = dict(step.record, timeout=int(bound)) if bound else step.record
    rc, out, err = host.run(argv, data=json.dumps(record, sort_keys=True) + "\n")
    job = out.strip().splitlines()[-1] if rc == 0 and out.strip() else None
    if job is None or not _is_job(job):
        raise CommandError("Failed to start the %s job on the host: %s." % (step.TOOL, error_line(err, rc)),
                           cmd=list(step.argv), rc=rc, stdout=out, stderr=err, before=step.before)
    return dict(step.result, changed=True, job=job, started=True, before=step.before)


def finish(host, job, resume, timeout, poll_interval, sleep=None, clock=None):
    """The result of the job ``job`` on ``host`` once it has ended, as the synchronous step gives it.

    Looks at the job every ``poll_interval`` seconds (:func:`wait`) until it has ended or ``timeout`` seconds
    have passed (CommandError; the job keeps running). A job that ended its command past its own bound
    (:func:`start`'s ``bound``) fails with CommandError, the step not resumed. ``resume(before)`` gives the step back, as the task's
    options name it, with the deployment the job's record says was there before; a job whose record names
    another target is refused and left as it is. The job's directory is removed once read.
    """
    check_job(job)
    ended = wait(host, job, timeout, poll_interval, sleep or time.sleep, clock or time.monotonic)
    if ended.step == "timeout":
        # Nothing to conclude, and nothing more to ask of the registry (resuming the step resolves the image):
        # it may be what stalled.
        remove(host, job)
        raise CommandError("The stage did not finish within %s s: the job ended its command on the host (%s)."
                           % (ended.record.get("timeout"), error_line(ended.output, ended.rc)),
                           rc=ended.rc, stdout=ended.output, before=ended.record.get("before"), timed_out=True, job=job)
    step = resume(ended.record.get("before"))
    if ended.record.get("target") != step.target:
        raise InvalidInputError("The stage job %s stages '%s', not '%s': finish a job with the options it was "
                                "started with." % (job, shown(str(ended.record.get("target")), 300),
                                                   shown(step.target, 300)))
    remove(host, job)
    return dict(step.conclude(step.collected(ended)), ended_ago=ended.ago)


def check_job(job):
    """Refuse anything but the id of a job :func:`start` made (it is removed once finished)."""
    if not isinstance(job, str) or not _is_job(job):
        raise InvalidInputError("job '%s' is not a stage job: expected what a task with phase start returned in "
                                "job, %s." % (shown(str(job), 80), JOB_TEMPLATE))


def _is_job(job):
    base, _sep, random = JOB_TEMPLATE.rpartition(".")
    return re.fullmatch(re.escape(base + ".") + "[A-Za-z0-9]{%d}" % len(random), job) is not None


def poll_argv(job, seconds, poll_interval):
    """The argv of a read of ``job`` that waits on the host for up to ``seconds`` while the job runs, looking at
    it every ``poll_interval`` seconds (MIN_LOOK at the least)."""
    every = max(poll_interval, MIN_LOOK)
    return ["sh", "-c", POLL_SCRIPT, "sh", job, str(int(round(seconds / every, 6))), "%.3f" % every]


def wait(host, job, timeout, poll_interval, sleep, clock):
    """-> :data:`Ended` of ``job`` once it has ended; CommandError after ``timeout`` seconds, or without a job.

    Each read waits on the host, looking at the job every ``poll_interval`` seconds, for up to HOST_WAIT seconds
    of the time left; the controller sleeps ``poll_interval`` between two reads. The job's end is seen as soon
    as before, with fewer commands."""
    deadline = clock() + timeout

    def attempt():
        argv = poll_argv(job, min(HOST_WAIT, max(deadline - clock(), 0.0)), poll_interval)
        rc, out, err = host.run(argv)
        if rc == 0:
            return _ended(job, out)
        if rc == 4:
            raise CommandError("Failed to finish the stage job %s: the host has no such job (a reboot ends a job, "
                               "and a finished job is removed)." % job, job=job)
        if rc != 5:
            raise CommandError("Failed to read the stage job %s: %s." % (job, error_line(err, rc)),
                               cmd=argv[:2] + ["POLL_SCRIPT"] + argv[3:], rc=rc, stdout=out, stderr=err, job=job)
        return None

    try:
        return poll_until(attempt, timeout, poll_interval, sleep, clock)
    except PollTimeout:
        raise CommandError("The stage job %s on the host did not end within the timeout of %d seconds: it keeps "
                           "running, and a later task with phase finish and this job collects it."
                           % (job, timeout), job=job)


def _ago(line):
    """Seconds between the two times of POLL_SCRIPT's first line (the host's now, the end), or None."""
    try:
        now, end = (float(word) for word in line.split())
    except ValueError:
        return None
    return round(max(now - end, 0.0), 3)


def _ended(job, text):
    """:data:`Ended` from what POLL_SCRIPT printed: the times, the rc line, the record, the output."""
    lines = text.split("\n", 3)
    try:
        rc, step, attempts = lines[1].split()
        record = json.loads(lines[2])
        if not isinstance(record, dict):
            raise ValueError(record)
        return Ended(int(rc), step, int(attempts), lines[3] if len(lines) > 3 else "", record, _ago(lines[0]))
    except (IndexError, ValueError):
        raise CommandError("Failed to read the stage job %s: its rc or record is not what the job writes (%s)."
                           % (job, shown(lines[1] if len(lines) > 1 else text, 60)), job=job) from None


def remove(host, job):
    """Remove the job's directory (its id was checked: a directory :func:`start` made)."""
    rc, out, err = host.run(["rm", "-rf", "--", job])
    if rc != 0:
        raise CommandError("Failed to remove the stage job %s: %s." % (job, error_line(err, rc)),
                           cmd=["rm", "-rf", "--", job], rc=rc, stdout=out, stderr=err, job=job)
