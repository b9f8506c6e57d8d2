# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# This is a private plugin_util of fleetos.layering: its interface may change at any
# time and it is not meant to be used by other collections.

"""One host's activation, from "staged" to "verified" or "rolled back": the engine behind the action plugin
``fleetos.layering.os_activate_slot``, in two parts.

- steps_after() decides: what comes after a step, in what order, and where the activation stops for a hook task
  of the user's (``os_activate_next``).
- Activation performs those steps on the host: take a budget slot of the book (plugin_utils/rollout/_book.py, one
  file on the controller shared by the run's forks under a lock) and of FleetLock, finalize and reboot through the
  backend (plugin_utils/host/_backends.py, plugin_utils/host/_reboot.py), verify the booted digest, run the health
  command, free the slot, and write the host's rollout lease at each turn; on a failure, roll back through the same
  reboot path. What it runs on the host goes through the action (its connection, its clock), as plain commands (no
  Python there).
"""

from __future__ import annotations

from ansible.errors import AnsibleConnectionFailure
from ansible.module_utils.common.text.converters import to_text
from ansible.utils.display import Display

from ansible_collections.fleetos.layering.plugins.module_utils._errors import FleetosError, one_line
from ansible_collections.fleetos.layering.plugins.module_utils.host import _deployments
from ansible_collections.fleetos.layering.plugins.module_utils.host._host import quote
from ansible_collections.fleetos.layering.plugins.plugin_utils.host import _backends, _bound, _reboot
from ansible_collections.fleetos.layering.plugins.plugin_utils.host._poll import PollTimeout, poll_until
from ansible_collections.fleetos.layering.plugins.plugin_utils.rollout import _lease, _slots
from ansible_collections.fleetos.layering.plugins.plugin_utils.rollout._book import Book

display = Display()

# The steps of an activation, as its failures name them.
STEP_PREPARE = "Read and check the deployments before the reboot"
STEP_REBOOT = "Finalize the staged deployment and reboot"
STEP_VERIFY = "Read and verify the booted deployment"
STEP_HEALTH = "Run the health command"
STEP_ROLLBACK = "Make the previous deployment the default and reboot into it"
STEP_ROLLBACK_VERIFY = "Verify the previous digest is booted"
# Seconds between two lines of a host that waits for its FleetLock slot.
SAY_EVERY = 30
# Seconds a health command may run, unless its task says otherwise.
HEALTH_TIMEOUT = 300
# Seconds coreutils timeout gives a timed-out health command between its TERM and a KILL; the controller
# waits that long and HEALTH_MARGIN more for the host's answer before it cuts the connection.
HEALTH_KILL_AFTER = 5
HEALTH_MARGIN = 5
# The exit statuses of coreutils timeout for a command it ended: TERM (124), KILL after --kill-after (137).
TIMED_OUT = (124, 137)

# The hooks the activation stops before: the user's task files (pre, health, post), and the wait for the new
# boot that the reboot left to the next task (boot).
HOOKS = ("pre", "boot", "health", "post")
# Where an activation can be taken on from: its slot was just granted, or a hook ran.
AFTER = ("granted",) + HOOKS


def steps_after(after, hooks, mode):
    """The steps of the activation after ``after`` (AFTER), in order: -> a list of (step, argument).

    ``("stop", hook)``: the activation stops before that hook (the last step); ``("reboot", booting)``: check the
    deployments, reboot into the target, verify the boot and run the health command, or with ``booting`` wait for
    the boot the task before began and go on from there (either may stop before ``boot`` instead, when the wait
    is left to the next task); ``("verified", None)``: the host is verified healthy; ``("release", None)``: free
    its slot (the last step). ``hooks``: pre, health and post, each true when the user gave task files;
    ``mode``: finalize, rollback or verify (nothing to reboot: no pre hook).
    """
    if after not in AFTER:
        raise ValueError("an activation is taken on after one of %s, not %r" % (", ".join(AFTER), after))
    if after == "granted" and hooks["pre"] and mode != "verify":
        return [("stop", "pre")]
    steps = []
    if after in ("granted", "pre", "boot"):
        steps.append(("reboot", after == "boot"))
        if hooks["health"]:
            return steps + [("stop", "health")]
    if after != "post":
        steps.append(("verified", None))
        if hooks["post"]:
            return steps + [("stop", "post")]
    return steps + [("release", None)]


class Stop(Exception):
    """A step of the activation failed: ``step`` names it, ``result`` is its result (msg, rc)."""

    def __init__(self, step, result, reboot=None):
        super().__init__(step)
        self.step = step
        self.result = result
        self.reboot = reboot


class Activation:
    """The steps of one host's activation, performed on the host through its backend (rpm-ostree or bootc,
    plugin_utils/host/_backends.py): ``action`` is the task's action plugin (its connection, its clock and sleep, the
    host's commands), ``path`` the book of slots, ``config`` what op acquire was given for the host (kept in the
    book for the steps that follow)."""

    def __init__(self, action, path, host, config):
        self.action = action
        self.path = path
        self.host = host
        self.config = config
        self.backend = _backends.backend(config["backend"])

    def _book(self):
        return Book.locked(self.path)

    def _gone(self):
        """Why this worker of a killed run stops (its controller process is gone), or None."""
        return self.action._controller_gone(self.config["controller"])

    def _record(self, event=None, status=None):
        """The host's record, after ``event`` (with the deployments ``status`` read for it) is recorded."""
        with self._book() as book:
            if event:
                return book.record_event(self.host, event, self.action._clock(), status)
            return book.record(self.host)

    def _write_lease(self, **fields):
        """The one place the activation writes the host's rollout lease: -> a problem, or None (or no lease)."""
        lease = self.config.get("lease") or {}
        if not lease:
            return None
        options = _lease.unfold(dict(fields, lease=lease))
        written = self.action._lease_task(options)
        if written.get("failed"):
            return "recording phase %s in the rollout lease of %s failed: %s" % (
                fields.get("phase"), self.host, one_line(written.get("msg"), "no message"))
        return None

    def _health_command(self):
        """The health command on the host, tried ``retries`` times ``delay`` s apart; Stop when it never passes.

        Each try is bounded by ``timeout`` twice: on the host, by coreutils timeout (the command's processes end
        there, whatever the connection), and on the controller, a few seconds later (a connection that stops
        answering is cut). A try that timed out is not tried again: a hung check that is retried holds its
        pool's slot for as many bounds, and a service that is still starting fails fast, not by hanging.
        """
        health = self.config["health"]
        attempts = max(health["retries"], 1)
        seconds = health.get("timeout") or HEALTH_TIMEOUT
        line = health_line(health["command"], seconds)
        for attempt in range(attempts):
            bound, self.action._command_timeout = self.action._command_timeout, seconds + HEALTH_KILL_AFTER + HEALTH_MARGIN
            try:
                res = self.action._low_level_execute_command(line, sudoable=True)
            except _bound.CommandTimeout as exc:
                # The host did not answer in time: the connection was cut.
                res = {"rc": TIMED_OUT[0], "cut": to_text(exc)}
            except AnsibleConnectionFailure as exc:
                res = {"rc": None, "stderr": to_text(exc)}
            finally:
                self.action._command_timeout = bound
            if res.get("rc") == 0:
                return
            if res.get("rc") in TIMED_OUT:
                raise Stop(STEP_HEALTH, {"msg": "the health command %s did not finish within %s s%s" % (
                    _reboot.quote_output(health["command"]), _bound.seconds_text(seconds),
                    " (%s: the host stopped answering)" % res["cut"] if res.get("cut") else ""),
                    "rc": res.get("rc"), "timed_out": True})
            if attempt + 1 < attempts:
                self.action._sleep(health["delay"])
        raise Stop(STEP_HEALTH, {"msg": "the health command %s failed %d time(s), last: %s" % (
            _reboot.quote_output(health["command"]), attempts,
            _reboot.quote_output(to_text(res.get("stderr") or res.get("stdout")).strip())), "rc": res.get("rc")})

    def declined(self):
        """With soft_reboot required, why the host cannot soft-reboot into its staged deployment (read now, before
        it takes a slot), or None. A host whose deployments cannot be read is declined too: nothing was done."""
        if self.config["soft_reboot"] != "required" or self.config["mode"] != "finalize":
            return None
        staged = None
        if self.backend.no_soft_reboot is None:
            try:
                staged = self.action._read_deployments(self.config).get("staged")
            except (FleetosError, AnsibleConnectionFailure) as exc:
                return "soft reboot required, and its deployments could not be read: %s" % one_line(
                    getattr(exc, "msg", None) or to_text(exc), "no answer")
        kind, why = self.backend.soft_reboot("required", staged)
        return None if kind == "soft" else "soft reboot required, and %s" % why

    def take_slot(self, args):
        """Wait for a slot of the host's pool (and of FleetLock): -> (granted, reason)."""
        # From here on the run may reboot the host at any moment: its lease says so before the host
        # waits for a slot, so that the write is not in the slot hold. A host with a whole round of its
        # pool ahead of it writes it once that round got its slots (_slots.lease_can_wait), so that the
        # first hosts of each pool, granted at once, do not wait for every host's write. A killed
        # run's rerun verifies a host booted on the target, and activates (or frees the FleetLock
        # slot of) one that is not.
        written = not self.config["lease"]
        deadline = self.action._clock() + args["timeout"]

        def attempt():
            # -> None to wait, else (answer, reason). The book judges the deadline in the same hold as the try: a
            # slot freed for the host meanwhile is not given back unseen.
            nonlocal written
            with self._book() as book:
                answer, reason = book.try_acquire(self.host, self.action._clock(), take=written,
                                                  activation_seconds=self.config["reboot"]["reboot_timeout"])
                if not written and (answer in ("free", "granted") or (
                        answer == "wait" and not book.lease_can_wait(self.host))):
                    reason = self._gone()
                    answer = "refused" if reason else "write"
                elif answer == "wait" and self.action._clock() >= deadline:
                    pool = book.pool(self.host)
                    reason = "no budget slot of pool %s was freed within %s s (held by %s)" % (
                        pool, args["timeout"], ", ".join(book.holders(pool)) or "nobody")
                    answer = "refused"
                elif answer == "wait":
                    reason = self._gone()
                    answer = "refused" if reason else answer
                if answer == "refused":
                    book.give_back(self.host, reason, self.action._clock())
            if answer == "write":
                problem = self._write_lease(phase="rebooting", target_digest=args["target_digest"])
                if problem:
                    with self._book() as book:
                        book.give_back(self.host, problem, self.action._clock())
                    return "refused", problem
                written = True
                # Asked again at once, not after an interval.
                return attempt()
            return None if answer == "wait" else (answer, reason)

        answer, reason = poll_until(attempt, float("inf"), args["poll_interval"], self.action._sleep, self.action._clock)
        if answer != "granted":
            return False, reason
        locked = False
        if self.config["fleetlock"].get("url"):
            locked, reason = self._fleetlock_slot()
            if not locked:
                with self._book() as book:
                    book.give_back(self.host, reason, self.action._clock(), stop=reason)
                return False, reason
        with self._book() as book:
            book.lock_fleetlock(self.host, locked)
            book.new_record(self.host, args["mode"], args["target_digest"], args["old_digest"],
                            fleetlock=bool(self.config["fleetlock"].get("url")))
        return True, None

    def _fleetlock_slot(self):
        """FleetLock pre-reboot, asked again every retry delay until the timeout: -> (locked, reason)."""
        fleetlock = self.config["fleetlock"]
        last = {"said": 0.0}

        def attempt():
            gone = self._gone()
            if gone:
                return False, gone
            ok, last["status"] = self.action._fleetlock("pre-reboot", self.config, self.host)
            return (True, None) if ok else None

        def waiting(elapsed):
            if elapsed - last["said"] >= SAY_EVERY:
                # A wait is never silent: FleetLock does not name its holders, the book names this run's.
                last["said"] = elapsed
                display.display("%s waits for a FleetLock slot of group %s: %d s so far, last answer %s; this run's"
                                " hosts that hold one: %s" % (self.host, fleetlock["group"] or "default", elapsed,
                                                              last["status"], self._locked_hosts() or "none"))

        try:
            return poll_until(attempt, fleetlock["timeout"], fleetlock["retry_delay"], self.action._sleep, self.action._clock,
                              whole=True, waiting=waiting)
        except PollTimeout:
            # FleetLock does not name its holders: the book names this run's.
            return False, "FleetLock gave no slot within %s s (%s refused, last answer %s; this run's hosts that" \
                " hold one: %s)" % (fleetlock["timeout"], self.host, last["status"], self._locked_hosts() or "none")

    def _locked_hosts(self):
        """The hosts of this run's book that hold a FleetLock slot now, as text."""
        with self._book() as book:
            return ", ".join(book.fleetlock_holders())

    def advance(self, after):
        """Run the activation from ``after`` (granted, or the hook that just ran) to the next hook or the end.

        -> the result: ``ansible_facts`` with the record (``os_activate_result``) and the hook to run next
        (``os_activate_next``, None at the end); on a failure, failed with its message, after the failure was
        handled (rolled back or recorded, the slot freed or kept).
        """
        result = {"changed": False}
        steps = steps_after(after, self.config["hooks"], self.config["mode"])
        try:
            for step, argument in steps:
                if step == "stop":
                    return self._stop_before(argument, result)
                if step == "reboot":
                    verified = self._reboot_and_verify(booting=argument)
                    if verified is None:
                        return self._stop_before("boot", result)
                    result.update(verified)
                elif step == "verified":
                    self._record("verified")
        except Stop as stop:
            return self.failed(stop.step, stop.result, reboot=stop.reboot, partial=result)
        released = self._release()
        released["changed"] = released["changed"] or result["changed"]
        result.update(released)
        result["ansible_facts"]["os_activate_next"] = None
        return result

    def _stop_before(self, hook, result):
        with self._book() as book:
            record = book.stop_before(self.host, hook)
        result["ansible_facts"] = {"os_activate_result": record, "os_activate_next": hook}
        return result

    def _reboot_and_verify(self, booting=False):
        """Check the deployments where needed, reboot into the target (not in mode verify), verify the booted
        digest and run the health command. Stop on a failure. -> the result's reboot, booted and changed; None
        when the wait for the new boot is left to the next task (park_boot: the reboot command ran, and the book
        has what the wait needs). ``booting``: that wait, in the task after the one that rebooted the host."""
        if booting:
            reboot = self._wait_boot()
            return None if reboot is None else self._verify(reboot)
        gone = self._gone()
        if gone:
            raise Stop(STEP_REBOOT, {"msg": "%s, so %s was not rebooted" % (gone, self.host)})
        mode = self.config["mode"]
        checksum = self.config["staged_checksum"]
        status = None
        # Finalize: the target is staged; rollback: the previous deployment is the target. Not read when the
        # staged checksum is known and the backend's finalize names it (rpm-ostree's finalize-deployment refuses
        # any other staged deployment, so it stays the guard). bootc's --from-downloaded takes no checksum: the
        # read is the guard there.
        if mode == "rollback" or (mode == "finalize" and not (checksum and self.backend.finalize_names_deployment)):
            status = self._read(STEP_PREPARE, "before the reboot")
            problem = _slots.prepare_problem(self._record(), status, self.backend)
            if problem:
                raise Stop(STEP_PREPARE, {"msg": problem})
            checksum = checksum or (status.get("staged") or {}).get("checksum")
        reboot = {}
        if mode != "verify":
            # A rollback reboots fully: the deployment it goes back to may have another kernel.
            kind, why = self.backend.soft_reboot(
                self.config.get("soft_reboot", "never") if mode == "finalize" else "never", (status or {}).get("staged"))
            if kind != "soft" and mode == "finalize" and self.config.get("soft_reboot") == "required":
                # Capable when its slot was asked for (declined()), no longer now: nothing is rebooted.
                raise Stop(STEP_PREPARE, {"msg": "soft reboot required, and %s" % why})
            self._record("reboot_start", status)
            with self._book() as book:
                book.record_activation(self.host, kind, why)
            command = self.backend.command("finalize" if mode == "finalize" else "rollback",
                                           staged_checksum=checksum if mode == "finalize" else None, soft=kind == "soft")
            if self._parks_boot():
                reboot, sent = _reboot.send(self.action, self.action._reboot_args(self.config, command, kind))
                if sent is not None:
                    with self._book() as book:
                        book.park_boot(self.host, dict(sent, command=command, kind=kind))
                    return None
            else:
                reboot = self._reboot_kind(self.action._reboot(self.config, command, kind), kind)
            reboot["command"] = command
            self._reboot_failed(reboot)
        return self._verify(reboot)

    def _reboot_kind(self, reboot, kind):
        """Record how the host came back after a reboot meant as ``kind``: a soft reboot that changed the boot id
        was a full one (the backend chose it). -> ``reboot``, with its ``kind``."""
        if kind == "soft" and reboot.get("rebooted") and reboot.get("boot_id_before") and reboot.get("boot_id"):
            seen = _reboot.reboot_kind(reboot["boot_id_before"], reboot["boot_id"])
            if seen != kind:
                with self._book() as book:
                    book.record_activation(self.host, seen, "the host rebooted fully (a new boot id)")
                kind = seen
        reboot["kind"] = kind
        return reboot

    def _parks_boot(self):
        """Whether the wait for the new boot is left to the next task (park_boot; not in check mode, where
        nothing is rebooted, nor on the controller, which is never rebooted)."""
        return self.config.get("park_boot") and not self.action._task.check_mode and self.action._connection.transport != "local"

    def _wait_boot(self):
        """The wait for the new boot of a host the task before rebooted: -> os_reboot's result; None when the
        strategy runs this task again (``_repeats``) and the host was not back within BOOT_SLICE seconds (it is
        parked again)."""
        with self._book() as book:
            sent = book.unpark_boot(self.host)
        if sent is None:
            raise Stop(STEP_REBOOT, {"msg": "%s has no reboot to wait for in the book of slots" % self.host})
        until = self.action._clock() + _slots.BOOT_SLICE if self.action._repeats else None
        kind = sent.get("kind", "full")
        reboot = _reboot.wait(self.action, self.action._reboot_args(self.config, sent["command"], kind), sent, first_sleep=False, until=until)
        if reboot.get("waiting"):
            with self._book() as book:
                book.park_boot(self.host, sent, now=self.action._clock())
            return None
        reboot = self._reboot_kind(reboot, kind)
        reboot["command"] = sent["command"]
        self._reboot_failed(reboot)
        return reboot

    def _reboot_failed(self, reboot):
        """Stop when ``reboot`` (os_reboot's result, with its command) failed."""
        if not reboot.get("failed"):
            return
        msg = reboot["msg"]
        if reboot.get("rc") is not None and self.config["mode"] == "finalize":
            msg = "%s %s" % (msg, self._why_not_finalized(self._record()["target_digest"]))
        raise Stop(STEP_REBOOT, {"msg": msg, "rc": reboot.get("rc")}, reboot=reboot)

    def _verify(self, reboot):
        """After the reboot (``reboot``, os_reboot's result; empty in mode verify): verify the booted digest and run
        the health command; Stop on a failure. -> the result's reboot, booted and changed."""
        gone = self._gone()
        if gone:
            # The reboot alone would have changed nothing more: a rerun finds the host as it booted.
            raise Stop(STEP_VERIFY, {"msg": "%s, so %s is left as it booted, unverified" % (gone, self.host)}, reboot=reboot)
        self._record("reboot_end")
        status = self._read(STEP_VERIFY, "after its reboot", reboot)
        record = self._record("booted", status)
        if record["booted_digest"] != record["target_digest"]:
            wrong = "%s booted %s, not %s" % (self.host, record["booted_digest"], record["target_digest"])
            raise Stop(STEP_VERIFY, {"msg": wrong}, reboot=reboot)
        if self.config["health"].get("command"):
            self._health_command()
        return {"reboot": reboot, "booted": status.get("booted"), "changed": bool(reboot.get("changed"))}

    def _why_not_finalized(self, target):
        """After a finalize command that failed: what the host's deployments say now, as a sentence."""
        try:
            status = self.action._read_deployments(self.config)
        except FleetosError as exc:
            return "Reading the deployments of %s again failed too: %s" % (self.host, one_line(exc.msg, "no message"))
        staged = _deployments.status_digest(status, "staged")
        if staged != target:
            return ("The staged deployment at %s is gone (staged now: %s): another run cancelled or replaced it."
                    % (target, staged or "nothing"))
        return "The staged deployment at %s is still there." % target

    def _read(self, step, when, reboot=None):
        """The host's deployments; Stop (as ``step``) when they cannot be read."""
        try:
            return self.action._read_deployments(self.config)
        except FleetosError as exc:
            raise Stop(step, {"msg": "Reading the deployments of %s %s failed: %s" % (self.host, when, one_line(exc.msg, "no message"))},
                       reboot=reboot)
        except AnsibleConnectionFailure as exc:
            # A connection cut after the command bound, or one that failed: the host did not answer.
            raise Stop(step, {"msg": "Reading the deployments of %s %s failed: %s" % (
                self.host, when, one_line(to_text(exc), "no answer"))}, reboot=reboot)

    def _release(self):
        """The host is done: free its slot (unless its record keeps it) and its FleetLock slot, and record it
        in its rollout lease. -> the result's ansible_facts, unlocked and changed; failed when the lease write
        of an activated host failed."""
        with self._book() as book:
            record = book.stop_before(self.host, None)
            unlock = book.holds_fleetlock(self.host) and not record["holds_slot"]
        unlocked = False
        if unlock:
            # steady-state frees the host's FleetLock slot; tried three times, as a reboot manager does.
            for attempt in range(3):
                unlocked = self.action._fleetlock("steady-state", self.config, self.host)[0]
                if unlocked or attempt == 2:
                    break
                self.action._sleep(self.config["fleetlock"]["retry_delay"])
        with self._book() as book:
            if unlock and not unlocked:
                # Not a failure of the host: it is on its target, or rolled back, as recorded. Its FleetLock slot
                # is freed when FleetLock answers again: by this run at its end, or by the next run.
                book.keep_fleetlock(self.host)
            record = book.release(self.host, self.action._clock())
            book.lock_fleetlock(self.host, unlock and not unlocked)
        result = {"unlocked": unlocked, "changed": unlocked, "released": True,
                  "ansible_facts": {"os_activate_result": record}}
        if self._gone():
            return result
        # After the slot is freed: bookkeeping on the host, which the next host of the pool need not wait for.
        if record["status"] == "activated":
            release = self.config["lease_release"]
            problem = self._write_lease(state="released" if release else "acquired",
                                        phase="done" if release else "activated")
            if problem:
                result.update(failed=True, msg="%s was activated, but %s." % (self.host, problem))
        elif not record["holds_slot"]:
            # A host that is up again is done with this rollout's reboot; one that keeps its slot may still
            # boot the target, and keeps phase rebooting for a rerun to verify.
            self._write_lease(phase="failed")
        return result

    def failed(self, step, result, reboot=None, partial=None, recorded_failure=True):
        """Handle the failure of ``step``: record it; probe a host that failed while rebooting (did it go
        down?); roll it back through the activation's reboot path when it failed verification or health;
        free its slot unless it keeps it. -> the result, failed with the failure's message when it was this
        action's own step (``recorded_failure``)."""
        if self._gone():
            # A killed run's worker changes nothing more: a rerun finds the host as this run left it.
            out = dict(partial or {})
            out.update(failed=True, msg=sentence_of(step, result),
                       ansible_facts={"os_activate_result": self._record(), "os_activate_next": None})
            return out
        record = self._record()
        probe = self.action._probe(self.config) if record["phase"] == "reboot" else None
        with self._book() as book:
            record, roll_back = book.record_failure(
                self.host, step, result, self.action._clock(), rollback=self.config["rollback"], reboot=reboot, probe=probe,
                reboot_timeout=self.config["reboot"]["reboot_timeout"])
        out = dict(partial or {})
        if roll_back:
            out["rollback"] = self._roll_back()
        released = self._release()
        released["changed"] = released["changed"] or out.get("changed", False)
        out.update(released)
        out["ansible_facts"]["os_activate_next"] = None
        if recorded_failure:
            out.update(failed=True, msg=sentence_of(step, result))
        return out

    def _roll_back(self):
        """Boot the previous deployment again (the backend's rollback command, through the one reboot path)
        and verify its digest; a failure is recorded (phase rollback: the host keeps its slot)."""
        record = self._record("rollback_start")
        old = record["old_digest"]
        command = self.backend.command("rollback")
        try:
            status = self._read(STEP_ROLLBACK, "before the rollback")
            if _deployments.status_digest(status, "booted") != old:
                reboot = self.action._reboot(self.config, command)
                if reboot.get("failed"):
                    raise Stop(STEP_ROLLBACK, {"msg": "did not come back within %s s of the rollback reboot: %s" % (
                        self.config["reboot"]["reboot_timeout"], one_line(reboot.get("msg"), "no answer"))})
                status = self._read(STEP_ROLLBACK_VERIFY, "after the rollback")
            if _deployments.status_digest(status, "booted") != old:
                raise Stop(STEP_ROLLBACK_VERIFY, {"msg": "%s is not back on %s after the rollback" % (self.host, old)})
        except Stop as stop:
            with self._book() as book:
                book.record_failure(self.host, stop.step, stop.result, self.action._clock())
            return {"rolled_back": False, "command": command, "msg": stop.result["msg"]}
        self._record("rolled_back", status)
        return {"rolled_back": True, "command": command}


def health_line(command, seconds):
    """The health command's line on the host: the user's shell line under coreutils timeout, which ends it (and
    what it started) after ``seconds``, and KILLs it HEALTH_KILL_AFTER seconds later if it is still there."""
    return "timeout -k %d %d sh -c %s" % (HEALTH_KILL_AFTER, seconds, quote(command))


def sentence_of(step, result):
    """A failed step's message, as the task's msg: ``step: message``."""
    msg = one_line((result or {}).get("msg"), "failed")
    return "%s: %s%s" % (step, msg, "" if msg.endswith(".") else ".")
