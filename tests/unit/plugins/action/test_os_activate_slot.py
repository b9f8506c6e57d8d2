# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for the os_activate_slot action plugin: a book on disk, a fake clock, a fake FleetLock."""

from __future__ import annotations

import json
import shlex
import os
import tempfile

import pytest

from ansible.errors import AnsibleConnectionFailure

from ansible_collections.fleetos.layering.plugins.action import os_activate_slot
from ansible_collections.fleetos.layering.plugins.plugin_utils.host import _bound, _reboot
from ansible_collections.fleetos.layering.plugins.plugin_utils.rollout import _activation, _slots
from ansible_collections.fleetos.layering.plugins.plugin_utils.rollout._book import Book
from ansible_collections.fleetos.layering.tests.unit.plugins.action.utils import new_action

T = "sha256:" + "b" * 64
URL = "http://198.51.100.1:8080/"


@pytest.fixture(autouse=True)
def books_in_tmp_path(tmp_path, monkeypatch):
    """The books this module opens go to the test's own directory, not the machine's /tmp."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))


class World:
    """The clock, the sleeps and FleetLock's answers (a list of statuses for pre-reboot)."""

    def __init__(self, answers=()):
        self.now = 1000.0
        self.sleeps = []
        self.answers = list(answers)
        self.calls = []
        self.reads = []
        # What rpm-ostree status --json and bootc status print on the host (documents), or a result dict with rc.
        self.rpm_ostree = None
        self.bootc = None
        # The health command lines the host ran; the controller's bound when the connection is cut.
        self.health_lines = []
        self.bound = None

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds

    def command(self, cmd, sudoable=True, **kwargs):
        cmd = plain(cmd)
        if cmd.startswith("curl "):
            # FleetLock, asked from the host: the body on curl's stdin, the status after the answer's body.
            self.calls.append(("curl", shlex.split(cmd)[-1], json.loads(kwargs["in_data"])["client_params"]))
            status = self.answers.pop(0) if self.answers else 200
            return {"rc": 0, "stdout": "{}\n%d" % status, "stderr": ""}
        self.reads.append(cmd)
        answer = self.bootc if cmd.startswith("bootc ") else self.rpm_ostree
        if isinstance(answer, dict) and "rc" in answer:
            return answer
        return {"rc": 0, "stdout": json.dumps(answer), "stderr": ""}

    def module(self, module_name, module_args, task_vars):
        """The host's os_rollout_lease, for the tests that set one (world.module = ...); the action runs no
        other module on the host."""
        raise AssertionError("%s ran as a module on the host" % module_name)


def plain(line):
    """A command line of the plugin's host (LC_ALL=C and the argv, each word quoted) as its words joined by
    spaces: what a test compares."""
    words = shlex.split(line)
    if words and words[0] == "LC_ALL=C":
        words = words[1:]
    return " ".join(words)


def run(world, host="n1", controller=None, repeats=False, **args):
    action = new_action(os_activate_slot, args)
    action._clock = lambda: world.now
    action._sleep = world.sleep
    # No Python module on the host: a module run fails the test.
    action._execute_module = World.module.__get__(world)
    action._low_level_execute_command = world.command
    # The lease write's options, as the os_rollout_lease task would get them (tests/unit/plugins/action/
    # test_os_rollout_lease.py runs that task itself).
    action._lease_task = lambda options: world.module("fleetos.layering.os_rollout_lease", options,
                                                      {"inventory_hostname": host})
    if controller:
        action._controller = controller
    task_vars = {"inventory_hostname": host}
    if repeats:
        task_vars[_slots.REPEATS_VAR] = True
    return action.run(task_vars=task_vars)


def open_book(world, budgets=None, **args):
    hosts = [{"host": "n1", "pool": "a"}, {"host": "n2", "pool": "a"}]
    result = run(world, op="open", hosts=hosts, budgets=budgets or {"a": 1}, **args)
    assert not result.get("failed"), result
    return result["book"]


def _bootc_doc(booted=None, staged=None, rollback=None):
    """bootc status --format=json of a host with deployments on these digests."""
    def entry(digest):
        return {"image": {"image": {"image": "reg.example/os@" + digest, "transport": "registry"},
                          "imageDigest": digest, "version": "1"},
                "pinned": False, "incompatible": False, "ostree": {"checksum": digest[7:], "deploySerial": 0}}
    return {"apiVersion": "org.containers.bootc/v1", "kind": "BootcHost", "metadata": {"name": "host"},
            "spec": {"image": None}, "status": {role: entry(digest) if digest else None for role, digest in
                                                (("booted", booted), ("staged", staged), ("rollback", rollback))}}


def _rpm_ostree_doc(booted=None, staged=None, rollback=None):
    """rpm-ostree status --json of a host with deployments on these digests (next boot first)."""
    deployments = []
    for digest, role in ((staged, "staged"), (booted, "booted"), (rollback, None)):
        if digest:
            deployments.append({"id": "fedora-%s" % role, "osname": "fedora", "checksum": digest[7:] * 1,
                                "booted": role == "booted", "staged": role == "staged",
                                "container-image-reference": "ostree-unverified-registry:reg.example/os@" + digest,
                                "container-image-reference-digest": digest})
    return {"deployments": deployments, "transaction": None}


OLD = "sha256:" + "a" * 64
OTHER = "sha256:" + "9" * 64
CHECKSUM = "c" * 64
BOOT = "cat /run/lab-boot-id"
FINALIZE = "rpm-ostree finalize-deployment --allow-unlocked " + CHECKSUM
ROLLBACK = "rpm-ostree rollback --reboot"
HEALTH = "lab-health"
# The health command as the host runs it: under coreutils timeout, with the default bound.
HEALTH_LINE = "timeout -k 5 300 sh -c lab-health"
REBOOT = {"boot_time_command": BOOT, "reboot_timeout": 30, "poll_interval": 0.5}
LEASE = {"rollout": "r1", "owner": "ctl:1", "started_at": 999.0, "ttl": 600}
PRE = {"pre": True}


class Host:
    """A scripted host: its boot id changes after a reboot command (finalize or rollback), once ``down``
    polls found it unreachable; rpm-ostree status and bootc status show what it booted; the health
    command passes after ``sick`` failures; FleetLock answers from the world."""

    def __init__(self, world, booted=T, down=2, comes_back=True, reboot_rc=0, staged=T, rollback_comes_back=True,
                 sick=0, hang=None):
        self.world = world
        # The health command hangs: "host" (coreutils timeout ends it: rc 124), "connection" (the host stops
        # answering in its middle, and after it: the connection is cut on the controller).
        self.hang = hang
        self.on = {"booted": OLD, "staged": staged, "rollback": None}
        self.after_finalize = booted
        self.down = down
        self.comes_back = comes_back
        self.rollback_comes_back = rollback_comes_back
        self.reboot_rc = reboot_rc
        self.sick = sick
        self.boots = 1
        self.rebooted = False
        self.commands = []
        world.command = self.command

    def _reboot(self, booted, comes_back):
        self.rebooted = True
        self.on = {"booted": booted, "staged": None, "rollback": self.on["booted"]}
        self.comes_back = comes_back
        self.pending = self.down

    def command(self, cmd, sudoable=True, **kwargs):
        if cmd.startswith("curl ") or plain(cmd).startswith("curl "):
            return World.command(self.world, cmd, sudoable, **kwargs)
        cmd = plain(cmd) if cmd.startswith("LC_ALL=C ") else cmd
        self.commands.append(cmd)
        if self.hang == "connection" and any(HEALTH in c for c in self.commands):
            raise _bound.CommandTimeout(self.world.bound)
        if cmd.startswith("timeout -k 5 ") and cmd.endswith(" sh -c " + HEALTH):
            self.world.health_lines.append(cmd)
            if self.hang == "host":
                return {"rc": 124, "stdout": "", "stderr": ""}
            cmd = HEALTH
        if cmd.startswith("rpm-ostree finalize-deployment --allow-unlocked ") or cmd == "bootc upgrade --from-downloaded --apply":
            if self.reboot_rc:
                return {"rc": self.reboot_rc, "stdout": "", "stderr": "error: no staged deployment"}
            self._reboot(self.after_finalize, self.comes_back)
            return {"rc": 0, "stdout": "", "stderr": ""}
        if cmd == ROLLBACK or cmd == "bootc rollback --apply":
            self._reboot(self.on["rollback"], self.rollback_comes_back)
            return {"rc": 0, "stdout": "", "stderr": ""}
        if cmd == BOOT:
            if self.rebooted and (self.pending > 0 or not self.comes_back):
                self.pending -= 1
                raise AnsibleConnectionFailure("Failed to connect to the host via ssh: Connection refused")
            if self.rebooted:
                self.rebooted = False
                self.boots += 1
            return {"rc": 0, "stdout": "boot-%d\n" % self.boots, "stderr": ""}
        if cmd == "rpm-ostree status --json":
            return {"rc": 0, "stdout": json.dumps(_rpm_ostree_doc(**self.on)), "stderr": ""}
        if cmd == "bootc status --format=json":
            return {"rc": 0, "stdout": json.dumps(_bootc_doc(**self.on)), "stderr": ""}
        if cmd == HEALTH:
            self.sick -= 1
            return {"rc": 1 if self.sick >= 0 else 0, "stdout": "", "stderr": "degraded" if self.sick >= 0 else ""}
        raise AssertionError("unexpected command %r" % cmd)


def acquire(world, host="n1", book=None, **args):
    """op acquire for ``host`` with the rollout's usual options (known staged checksum, the lab's boot id)."""
    options = dict(op="acquire", book=book, target_digest=T, old_digest=OLD, staged_checksum=CHECKSUM, reboot=REBOOT)
    options.update(args)
    return run(world, host, **options)


def record_of(book, host="n1"):
    with Book.locked(book) as state:
        return state.record(host)


def _lease_writes(world, fail_phase=None):
    """world.module as the host's os_rollout_lease: -> the list of the option sets it was given."""
    writes = []

    def module(module_name, module_args, task_vars):
        assert module_name == "fleetos.layering.os_rollout_lease"
        writes.append(module_args)
        if module_args["phase"] == fail_phase:
            return {"failed": True, "msg": "disk\nfull"}
        return {"changed": True, "acquired": True}

    world.module = module
    return writes


# -- slots -----------------------------------------------------------------------------

def test_a_host_waits_for_the_slot_and_gets_it_when_it_is_freed():
    world = World()
    book = open_book(world)
    host = Host(world)
    first = acquire(world, book=book, hooks=PRE)
    # Granted, and stopped before the pre-activate tasks: nothing ran on the host yet.
    assert first["granted"] and first["ansible_facts"]["os_activate_next"] == "pre" and host.commands == []
    assert first["ansible_facts"]["os_activate_result"]["status"] == "started"
    # n2 waits until its timeout: n1 holds the pool's only slot.
    second = acquire(world, "n2", book=book, timeout=2, poll_interval=0.5)
    assert not second["granted"] and second["reason"] == "no budget slot of pool a was freed within 2 s (held by n1)"
    assert second["ansible_facts"]["os_activate_next"] is None
    assert world.sleeps == [0.5] * 4
    done = run(world, "n1", op="continue", book=book)
    assert done["released"] and done["ansible_facts"]["os_activate_result"]["status"] == "activated"
    assert done["ansible_facts"]["os_activate_next"] is None
    summary = run(world, op="close", book=book)["ansible_facts"]["os_activate_summary"]
    assert summary["started"] == ["n1"] and summary["not_activated"] == ["n2"] and summary["most_held"] == {"a": 1}
    assert not os.path.exists(book)


def test_fleetlock_is_asked_from_the_host_until_it_grants_and_freed_after():
    world = World(answers=[409, 409, 200])
    book = open_book(world)
    Host(world)
    result = acquire(world, book=book, fleetlock={"url": URL, "group": "blue", "retry_delay": 2})
    assert result["granted"] and result["released"] and result["unlocked"] and world.sleeps[:2] == [2, 2]
    assert world.calls[0] == ("curl", "http://198.51.100.1:8080/v1/pre-reboot", {"id": "n1", "group": "blue"})
    assert world.calls[-1][1] == "http://198.51.100.1:8080/v1/steady-state"


def test_a_host_that_waits_for_fleetlock_says_so_every_30_s(monkeypatch):
    said = []
    monkeypatch.setattr(_activation.display, "display", said.append)
    world = World(answers=[409] * 8 + [200])
    book = open_book(world)
    Host(world)
    result = acquire(world, book=book, fleetlock={"url": URL, "group": "blue", "retry_delay": 10})
    assert result["granted"] and result["released"]
    # 8 refusals 10 s apart: said at 30 s and 60 s, with FleetLock's answer.
    assert said == ["n1 waits for a FleetLock slot of group blue: %d s so far, last answer 409; this run's hosts that"
                    " hold one: none" % seconds for seconds in (30, 60)]


def test_a_steady_state_without_an_answer_is_not_a_failure_of_the_verified_host():
    world = World(answers=[200, 503, 503, 503])
    book = open_book(world)
    Host(world)
    result = acquire(world, book=book, fleetlock={"url": URL, "retry_delay": 1})
    record = result["ansible_facts"]["os_activate_result"]
    assert not result.get("failed") and not result["unlocked"]
    assert record["status"] == "activated" and record["fleetlock_held"] and not record["holds_slot"]
    assert record["reason"] == ("verified on the target digest; FleetLock did not answer its steady-state, so its"
                                " FleetLock slot stays taken until FleetLock answers")
    # Tried three times; the book's slot is free, and no failure counts toward max_failures.
    assert [c[1].rsplit("/", 1)[1] for c in world.calls] == ["pre-reboot"] + ["steady-state"] * 3
    assert acquire(world, "n2", book=book, timeout=0, hooks=PRE)["granted"]


def test_a_fleetlock_wait_that_ends_without_a_slot_names_this_runs_holders():
    # n1 verified, its steady-state unanswered (it keeps its FleetLock slot); n2 is refused until the timeout.
    world = World(answers=[200, 503, 503, 503] + [409] * 10)
    book = open_book(world, budgets={"a": 2})
    Host(world)
    first = acquire(world, book=book, fleetlock={"url": URL, "retry_delay": 1})
    assert first["ansible_facts"]["os_activate_result"]["fleetlock_held"]
    second = acquire(world, "n2", book=book, fleetlock={"url": URL, "timeout": 4, "retry_delay": 1})
    assert not second["granted"]
    assert second["reason"] == ("FleetLock gave no slot within 4 s (n2 refused, last answer 409; this run's hosts"
                                " that hold one: n1)")


def test_fleetlock_that_never_grants_gives_the_slot_back_and_stops_the_run():
    world = World(answers=[409] * 10)
    book = open_book(world)
    host = Host(world)
    result = acquire(world, book=book, fleetlock={"url": URL, "timeout": 4, "retry_delay": 1})
    assert not result["granted"] and result["reason"].startswith("FleetLock gave no slot within 4 s (n1 refused")
    assert host.commands == []
    second = acquire(world, "n2", book=book)
    assert not second["granted"] and second["reason"] == result["reason"]


def test_a_host_that_kept_its_slot_is_not_unlocked_from_fleetlock():
    world = World()
    book = open_book(world, budgets={"a": 2})
    Host(world, comes_back=False)
    result = acquire(world, book=book, fleetlock={"url": URL}, reboot=dict(REBOOT, reboot_timeout=2))
    assert result["failed"] and not result["unlocked"]
    assert result["ansible_facts"]["os_activate_result"]["holds_slot"]
    assert [c[1].rsplit("/", 1)[1] for c in world.calls] == ["pre-reboot"]


def test_bad_input_is_one_sentence():
    world = World()
    result = run(world, op="open", hosts=[{"host": "n1", "pool": "a"}], budgets={"b": 1})
    assert result["failed"] and result["msg"] == "The budget slot operation open failed: pool a of host n1 has no budget."


def test_a_worker_whose_controller_is_gone_stops_waiting_and_takes_no_fleetlock_slot():
    world = World()
    book = open_book(world, budgets={"a": 1})
    Host(world)
    assert acquire(world, book=book, hooks=PRE)["granted"]
    parents = iter([4242, 4242, 1])  # ansible-playbook was killed: the worker is reparented
    result = acquire(world, "n2", book=book, controller=lambda: next(parents), fleetlock={"url": URL},
                     poll_interval=0.5)
    assert not result["granted"] and result["reason"] == "the run's controller process 4242 is gone"
    assert world.sleeps == [0.5] and world.calls == []
    summary = run(world, op="close", book=book)["ansible_facts"]["os_activate_summary"]
    assert summary["not_activated"] == ["n2"]


def test_drop_counts_a_failed_stage_and_says_when_the_run_stops():
    world = World()
    book = open_book(world)
    assert run(world, "n2", op="drop", book=book, reason="its stage left nothing to activate")["stop_reason"] is None
    stopped = run(world, "n1", op="drop", book=book, reason="stage failed: registry down", failed=True)
    assert stopped["stop_reason"] == "1 stage(s) failed (n1), max_failures is 1"
    summary = run(world, op="close", book=book)["ansible_facts"]["os_activate_summary"]
    assert summary["stage_failed"] == ["n1"] and summary["started"] == []


# -- one activation, in one task -------------------------------------------------------

def test_acquire_reboots_verifies_and_frees_the_slot_in_one_task():
    world = World()
    book = open_book(world)
    host = Host(world)
    result = acquire(world, book=book)
    record = result["ansible_facts"]["os_activate_result"]
    assert result["granted"] and result["released"] and result["changed"] and not result.get("failed"), result
    # The staged checksum is known: no read before the reboot; then the boot id polled until it changes.
    assert host.commands == [BOOT, FINALIZE, BOOT, BOOT, BOOT, "rpm-ostree status --json"]
    assert world.sleeps == [0.5, 0.5, 0.5]
    assert result["reboot"]["boot_id_before"] == "boot-1" and result["reboot"]["boot_id"] == "boot-2"
    assert record["status"] == "activated" and record["booted_digest"] == T and not record["holds_slot"]
    assert record["reboot_start"] == 1000.0 and record["reboot_end"] == 1001.5 and record["released_at"] == 1001.5
    assert result["ansible_facts"]["os_activate_next"] is None
    # The slot is free again: the pool's next host gets it at once.
    assert acquire(world, "n2", book=book, timeout=0, hooks=PRE)["granted"]


@pytest.mark.parametrize("release, state, phase", [(True, "released", "done"), (False, "acquired", "activated")])
def test_the_lease_says_rebooting_before_the_slot_and_activated_after_it(release, state, phase):
    world = World()
    book = open_book(world)
    writes = _lease_writes(world)
    Host(world)
    result = acquire(world, book=book, lease=LEASE, lease_release=release)
    assert result["released"] and not result.get("failed"), result
    common = {"rollout": "r1", "owner": "ctl:1", "started_at": 999.0, "ttl": 600}
    assert writes == [dict(common, phase="rebooting", target_digest=T), dict(common, state=state, phase=phase)]


def test_a_lease_write_that_fails_before_the_slot_takes_no_slot_and_says_why():
    world = World()
    book = open_book(world, budgets={"a": 2})
    world.module = lambda module_name, module_args, task_vars: {"failed": True, "msg": "disk\nfull"}
    host = Host(world)
    result = acquire(world, book=book, lease={"rollout": "r1", "owner": "o", "started_at": 1.0})
    assert not result["granted"] and host.commands == []
    assert result["reason"] == "recording phase rebooting in the rollout lease of n1 failed: disk full"
    summary = run(world, op="close", book=book)["ansible_facts"]["os_activate_summary"]
    # n2 never asked: not activated either.
    assert summary["not_activated"] == ["n1", "n2"] and summary["started"] == [] and summary["most_held"] == {"a": 0}


def test_a_lease_write_that_fails_after_the_activation_fails_with_the_slot_freed():
    world = World()
    book = open_book(world)
    _lease_writes(world, fail_phase="done")
    Host(world)
    result = acquire(world, book=book, lease=LEASE, lease_release=True)
    assert result["failed"] and result["released"], result
    assert result["msg"] == "n1 was activated, but recording phase done in the rollout lease of n1 failed: disk full."
    assert result["ansible_facts"]["os_activate_result"]["status"] == "activated"
    assert acquire(world, "n2", book=book, timeout=0, hooks=PRE)["granted"]


def test_a_lease_write_before_the_slot_waits_for_a_round_of_the_pool_ahead():
    world = World()
    hosts = [{"host": name, "pool": "a"} for name in ("n1", "n2", "n3")]
    book = run(world, op="open", hosts=hosts, budgets={"a": 1})["book"]
    writes = []

    def module(module_name, module_args, task_vars):
        writes.append((task_vars["inventory_hostname"], world.now))
        return {"changed": True, "acquired": True}

    world.module = module
    Host(world)
    assert acquire(world, book=book, lease=LEASE, hooks=PRE)["granted"]
    # n3 has n2 ahead of it, a whole round of the pool's budget of 1 with no slot yet: it waits to write.
    third = acquire(world, "n3", book=book, timeout=1, poll_interval=0.5, lease=LEASE)
    assert not third["granted"] and writes == [("n1", 1000.0)]
    # n2 has no one ahead without a slot: it writes at once, then waits for n1's slot.
    second = acquire(world, "n2", book=book, timeout=1, poll_interval=0.5, lease=LEASE)
    assert not second["granted"] and writes == [("n1", 1000.0), ("n2", 1001.0)]


def test_mode_verify_reads_and_frees_without_a_reboot():
    world = World()
    book = open_book(world)
    host = Host(world)
    host.on["booted"] = T        # a killed run rebooted it into its target
    result = acquire(world, book=book, mode="verify", hooks=PRE)
    # No pre-activate tasks in mode verify: nothing reboots.
    assert result["released"] and result["ansible_facts"]["os_activate_result"]["status"] == "activated"
    assert host.commands == ["rpm-ostree status --json"] and result["reboot"] == {} and not result["changed"]


@pytest.mark.parametrize("reboot, message", [
    (dict(REBOOT, poll_interval=0), "reboot.poll_interval must be a number of seconds more than 0, got 0.0."),
    (dict(REBOOT, reboot_timeout=0), "reboot.reboot_timeout must be at least 1 second, got 0."),
])
def test_bad_reboot_numbers_are_refused_before_the_lease_and_the_slot(reboot, message):
    world = World()
    book = open_book(world)
    host = Host(world)
    writes = _lease_writes(world)
    result = acquire(world, book=book, reboot=reboot, lease=LEASE)
    assert result["failed"] and result["msg"] == message
    assert host.commands == [] and world.calls == [] and writes == []
    # Nothing was recorded for n1: it can still take the slot.
    assert acquire(world, book=book, timeout=0, hooks=PRE)["granted"]


def test_a_local_connection_is_never_rebooted():
    world = World()
    book = open_book(world)
    host = Host(world)
    action = new_action(os_activate_slot, dict(op="acquire", book=book, target_digest=T, staged_checksum=CHECKSUM,
                                               reboot=REBOOT))
    action._clock = lambda: world.now
    action._sleep = world.sleep
    action._low_level_execute_command = host.command
    action._connection.transport = "local"
    result = action.run(task_vars={"inventory_hostname": "n1"})
    assert result["failed"] and "Refusing to reboot the controller (connection local)." in result["msg"]
    # Only the boot id is read, once after the refusal: the reboot never started, the slot is free.
    assert host.commands == [BOOT] and not result["ansible_facts"]["os_activate_result"]["holds_slot"]


# -- what is read before the reboot ----------------------------------------------------

@pytest.mark.parametrize("backend", ["rpm-ostree", "bootc"])
@pytest.mark.parametrize("mode, digests, problem", [
    ("finalize", {"booted": OLD, "staged": T}, None),
    ("finalize", {"booted": OLD}, "n1 has no staged deployment at %s (staged: nothing)" % T),
    ("finalize", {"booted": OLD, "staged": OTHER}, "n1 has no staged deployment at %s (staged: %s)" % (T, OTHER)),
    ("rollback", {"booted": OLD, "rollback": T}, None),
    ("rollback", {"booted": OLD, "rollback": OTHER}, "n1 has no previous deployment at %s or still has a staged one" % T),
    ("rollback", {"booted": OLD}, "n1 has no previous deployment at %s or still has a staged one" % T),
])
def test_the_deployments_are_read_and_checked_when_the_mode_needs_it(backend, mode, digests, problem):
    world = World()
    book = open_book(world)
    host = Host(world)
    host.on = {"booted": None, "staged": None, "rollback": None}
    host.on.update(digests)
    # The checksum is not known: the deployments are read first, on either backend.
    result = acquire(world, book=book, mode=mode, backend=backend, staged_checksum="", hooks=PRE)
    assert result["ansible_facts"]["os_activate_next"] == "pre"
    result = run(world, "n1", op="continue", book=book)
    status = "rpm-ostree status --json" if backend == "rpm-ostree" else "bootc status --format=json"
    assert host.commands[0] == status
    record = result["ansible_facts"]["os_activate_result"]
    if problem:
        assert result["failed"] and result["msg"] == "Read and check the deployments before the reboot: %s." % problem
        # Nothing was disrupted: the host frees its slot, and is not rolled back.
        assert host.commands == [status] and record["phase"] == "prepare" and not record["holds_slot"]
        assert record["reason"] == "prepare: Read and check the deployments before the reboot: " + problem
    else:
        assert not result.get("failed") and record["status"] == "activated", result
        assert len([c for c in host.commands if "finalize-deployment" in c or c == ROLLBACK or c.endswith("--apply")]) == 1


@pytest.mark.parametrize("backend, problem", [
    ("bootc", None),
    ("rpm-ostree", "n1 has no previous deployment at %s or still has a staged one" % T),
])
def test_a_rollback_lets_only_bootc_keep_a_staged_deployment(backend, problem):
    world = World()
    book = open_book(world)
    host = Host(world)
    host.on = {"booted": OLD, "staged": T, "rollback": T}
    result = acquire(world, book=book, mode="rollback", backend=backend, staged_checksum="", rollback=False)
    assert result.get("failed", False) is bool(problem)
    if problem:
        assert problem in result["msg"]


@pytest.mark.parametrize("answer, message", [
    ({"rc": 1, "stdout": "", "stderr": "error: Could not connect to rpm-ostreed\n"},
     "Failed to run rpm-ostree status: Could not connect to rpm-ostreed."),
    ({"rc": 0, "stdout": "not json", "stderr": ""},
     "Failed to parse the output of rpm-ostree status --json: Expecting value: line 1 column 1 (char 0)."),
])
def test_deployments_that_cannot_be_read_fail_naming_the_host(answer, message):
    world = World()
    book = open_book(world)
    world.rpm_ostree = answer
    result = run(world, "n1", op="acquire", book=book, target_digest=T, reboot=REBOOT)
    assert result["failed"] and result["msg"] == (
        "Read and check the deployments before the reboot: Reading the deployments of n1 before the reboot failed: "
        + message)
    assert not result["ansible_facts"]["os_activate_result"]["holds_slot"]


# -- failures --------------------------------------------------------------------------

def test_a_host_that_does_not_come_back_fails_and_keeps_its_slot():
    world = World()
    book = open_book(world)
    host = Host(world, comes_back=False)
    result = acquire(world, book=book, reboot=dict(REBOOT, reboot_timeout=2))
    record = result["ansible_facts"]["os_activate_result"]
    assert result["failed"] and result["msg"].startswith(
        "Finalize the staged deployment and reboot: The host did not come back with a new boot id within 2 s")
    # Probed once more after the timeout: still down, so it keeps its slot.
    assert host.commands[-1] == BOOT
    assert record["holds_slot"] and record["status"] == "failed" and record["reason"].startswith(
        "did not come back within 2 s; its budget slot stays taken (reboot: Finalize the staged deployment and reboot: ")
    assert not acquire(world, "n2", book=book, timeout=0)["granted"]
    # The rescue's op fail finds the failure handled, and changes nothing.
    again = run(world, "n1", op="fail", book=book, task="Take a budget slot", result=result)
    assert again["ansible_facts"]["os_activate_result"] == record and not again.get("failed")


def test_a_reboot_command_that_fails_never_started_the_reboot_and_frees_the_slot():
    world = World()
    book = open_book(world)
    host = Host(world, reboot_rc=1)
    result = acquire(world, book=book)
    # Read once more: the staged deployment is still there.
    assert result["failed"] and result["msg"] == (
        "Finalize the staged deployment and reboot: The reboot command failed (rc=1): 'error: no staged deployment'."
        " The staged deployment at %s is still there." % T)
    record = result["ansible_facts"]["os_activate_result"]
    assert record["reason"].startswith("the reboot did not start: ") and not record["holds_slot"]
    assert host.commands == [BOOT, FINALIZE, "rpm-ostree status --json", BOOT]


def test_a_finalize_that_fails_because_another_run_cancelled_the_stage_says_so():
    world = World()
    book = open_book(world)
    host = Host(world, reboot_rc=1)
    host.on["staged"] = None
    result = acquire(world, book=book)
    assert result["msg"].endswith(
        "The staged deployment at %s is gone (staged now: nothing): another run cancelled or replaced it." % T)
    assert "another run cancelled or replaced it" in result["ansible_facts"]["os_activate_result"]["reason"]


def test_a_host_booted_on_another_digest_is_rolled_back_through_the_same_reboot_path():
    world = World()
    book = open_book(world, max_failures=2)
    writes = _lease_writes(world)
    host = Host(world, booted=OTHER, down=0)
    result = acquire(world, book=book, lease=LEASE)
    record = result["ansible_facts"]["os_activate_result"]
    assert result["failed"] and result["msg"] == "Read and verify the booted deployment: n1 booted %s, not %s." % (OTHER, T)
    # The rollback command, then the boot id polled and the previous digest verified, as for the activation.
    assert host.commands == [BOOT, FINALIZE, BOOT, "rpm-ostree status --json", "rpm-ostree status --json",
                             BOOT, ROLLBACK, BOOT, "rpm-ostree status --json"]
    assert record["rolled_back"] and record["booted_digest"] == OLD and not record["holds_slot"]
    assert record["reason"] == "verify: Read and verify the booted deployment: n1 booted %s, not %s; rolled back to %s" % (
        OTHER, T, OLD)
    assert result["rollback"] == {"rolled_back": True, "command": ROLLBACK}
    assert [w["phase"] for w in writes] == ["rebooting", "failed"]
    assert acquire(world, "n2", book=book, timeout=0, hooks=PRE)["granted"]


def test_a_rollback_that_does_not_come_back_keeps_the_slot():
    world = World()
    book = open_book(world)
    Host(world, booted=OTHER, down=0, rollback_comes_back=False)
    result = acquire(world, book=book, reboot=dict(REBOOT, reboot_timeout=2))
    record = result["ansible_facts"]["os_activate_result"]
    assert result["failed"] and record["holds_slot"] and not record["rolled_back"]
    assert ("the rollback failed too: rollback: Make the previous deployment the default and reboot into it: did not"
            " come back within 2 s") in record["reason"]
    assert result["rollback"]["rolled_back"] is False


def test_no_rollback_when_it_is_not_asked_for():
    world = World()
    book = open_book(world)
    host = Host(world, booted=OTHER, down=0)
    result = acquire(world, book=book, rollback=False)
    assert result["failed"] and ROLLBACK not in host.commands
    record = result["ansible_facts"]["os_activate_result"]
    assert not record["rolled_back"] and not record["holds_slot"] and record["status"] == "failed"


def test_a_health_command_is_tried_again_then_rolls_the_host_back():
    world = World()
    book = open_book(world)
    host = Host(world, down=0, sick=5)
    result = acquire(world, book=book, health={"command": HEALTH, "retries": 3, "delay": 2})
    assert result["failed"] and result["msg"].startswith(
        "Run the health command: the health command 'lab-health' failed 3 time(s), last: 'degraded'")
    assert host.commands.count(HEALTH_LINE) == 3 and world.sleeps.count(2) == 2
    assert result["ansible_facts"]["os_activate_result"]["rolled_back"]
    # Healthy on the second try: activated.
    world = World()
    book = open_book(world)
    Host(world, down=0, sick=1)
    result = acquire(world, book=book, health={"command": HEALTH, "retries": 3, "delay": 2})
    assert not result.get("failed") and result["ansible_facts"]["os_activate_result"]["status"] == "activated"


def test_a_killed_run_changes_nothing_after_the_reboot():
    world = World()
    book = open_book(world)
    writes = _lease_writes(world)
    host = Host(world)
    # ansible-playbook is killed while the host reboots: the worker's parent is another process when it is back.
    result = acquire(world, book=book, lease=LEASE, lease_release=True,
                     controller=lambda: 1 if host.boots > 1 or host.rebooted else 4242)
    assert result["failed"] and "the run's controller process 4242 is gone, so n1 is left as it booted, unverified" \
        in result["msg"]
    assert "rpm-ostree status --json" not in host.commands
    assert [w["phase"] for w in writes] == ["rebooting"]
    record = record_of(book)
    # Still as the killed run left it: rebooting, not back, not verified, holding its slot.
    assert record["reboot_end"] is None and record["verified_at"] is None and record["holds_slot"]


def test_a_killed_run_neither_writes_its_lease_nor_reboots():
    world = World()
    book = open_book(world)
    writes = _lease_writes(world)
    host = Host(world)
    # Killed before the slot was granted: the slot is free, but the run that would free it again is gone.
    parents = iter([4242] + [1] * 10)
    result = acquire(world, book=book, lease=LEASE, controller=lambda: next(parents))
    assert not result["granted"] and result["reason"] == "the run's controller process 4242 is gone"
    assert writes == [] and host.commands == []
    # Killed between the grant and the reboot: the host is not rebooted.
    parents = iter([4243] + [1] * 10)
    result = acquire(world, "n2", book=book, controller=lambda: next(parents))
    assert result["granted"] and result["failed"], result
    assert "the run's controller process 4243 is gone, so n2 was not rebooted" in result["msg"]
    assert host.commands == []


# -- hooks -----------------------------------------------------------------------------

def test_the_activation_stops_before_each_hook_and_continues_after_it():
    world = World()
    book = open_book(world)
    host = Host(world, down=0)
    hooks = {"pre": True, "health": True, "post": True}
    steps = [acquire(world, book=book, hooks=hooks, health={"command": HEALTH})]
    assert steps[-1]["ansible_facts"]["os_activate_next"] == "pre" and host.commands == []
    steps.append(run(world, "n1", op="continue", book=book))
    # Rebooted, verified on the target, the health command passed; the health tasks come next.
    assert steps[-1]["ansible_facts"]["os_activate_next"] == "health" and host.commands[-1] == HEALTH_LINE
    assert steps[-1]["ansible_facts"]["os_activate_result"]["verified_at"] is None
    steps.append(run(world, "n1", op="continue", book=book))
    record = steps[-1]["ansible_facts"]["os_activate_result"]
    assert steps[-1]["ansible_facts"]["os_activate_next"] == "post" and record["verified_at"] is not None
    assert record["holds_slot"] is False and record["status"] == "activated"
    steps.append(run(world, "n1", op="continue", book=book))
    assert steps[-1]["released"] and steps[-1]["ansible_facts"]["os_activate_next"] is None
    # Only once per hook: there is nothing more to continue.
    late = run(world, "n1", op="continue", book=book)
    assert late["failed"] and late["msg"] == "n1 has no activation waiting for op continue: take a slot first (op acquire)."


@pytest.mark.parametrize("hook, rolled_back, phase", [("pre", False, "prepare"), ("health", True, "rollback"),
                                                      ("post", False, "post")])
def test_a_hook_that_fails_is_handled_by_its_phase(hook, rolled_back, phase):
    world = World()
    book = open_book(world, max_failures=2)
    host = Host(world, down=0)
    result = acquire(world, book=book, hooks={hook: True})
    assert result["ansible_facts"]["os_activate_next"] == hook
    failed = run(world, "n1", op="fail", book=book, task="Drain the node", result={"msg": "drain\nfailed", "rc": 2})
    record = failed["ansible_facts"]["os_activate_result"]
    # The task failed already: op fail handles it and does not fail again.
    assert not failed.get("failed") and failed["released"]
    assert record["status"] == "failed" and record["rolled_back"] is rolled_back and not record["holds_slot"]
    assert record["reason"].startswith("%s: Drain the node: drain failed (rc=2)" % ("health" if hook == "health" else phase))
    assert (ROLLBACK in host.commands) is rolled_back
    assert acquire(world, "n2", book=book, timeout=0, hooks=PRE)["granted"]


def test_op_fail_before_any_slot_takes_the_host_out():
    world = World()
    book = open_book(world)
    failed = run(world, "n1", op="fail", book=book, task="Take a budget slot", result={"msg": "bad\noption"})
    assert not failed.get("failed") and failed["ansible_facts"]["os_activate_result"] is None
    summary = run(world, op="close", book=book)["ansible_facts"]["os_activate_summary"]
    assert summary["not_activated"] == ["n1", "n2"] and summary["started"] == []


def test_a_closed_window_refuses_the_slot_before_fleetlock_is_asked():
    world = World()
    # The clock at 1000 s after the epoch: Thursday 1970-01-01 00:16 UTC; the pool's only window is on Mondays.
    window = [{"days": ["Mon"], "start": "02:00", "length_minutes": 60}]
    hosts = [{"host": "n1", "pool": "a", "windows": window, "windows_timezone": "UTC", "activation_seconds": 60}]
    result = run(world, op="open", hosts=hosts, budgets={"a": 1})
    host = Host(world)
    refused = acquire(world, book=result["book"], fleetlock={"url": URL})
    assert not refused["granted"]
    assert refused["reason"] == ("the maintenance window of pool a: outside every maintenance window; the next opens at"
                                 " 1970-01-05 02:00 UTC")
    assert world.calls == [] and host.commands == []
    closed = run(world, op="close", book=result["book"])["ansible_facts"]["os_activate_summary"]["windows_closed"]
    assert closed["a"]["hosts"] == ["n1"] and closed["a"]["next_open"] == "1970-01-05T02:00:00+00:00"


def test_a_health_command_that_does_not_finish_is_not_retried_and_rolls_the_host_back():
    world = World()
    book = open_book(world)
    host = Host(world, down=0, hang="host")
    result = acquire(world, book=book, health={"command": HEALTH, "retries": 3, "delay": 2, "timeout": 30})
    # Bounded on the host: coreutils timeout ends it (and what it started) after 30 s, KILL 5 s later.
    assert world.health_lines == ["timeout -k 5 30 sh -c lab-health"]
    assert result["failed"]
    assert result["msg"] == "Run the health command: the health command 'lab-health' did not finish within 30 s."
    record = result["ansible_facts"]["os_activate_result"]
    # The same path as a failed check: rolled back through the reboot path, the slot freed, a failure.
    assert record["rolled_back"] and not record["holds_slot"] and record["status"] == "failed"
    assert host.commands.count(ROLLBACK) == 1 and world.sleeps.count(2) == 0
    with Book.locked(book) as state:
        # It counts toward max_failures.
        assert state.summary()["failed"] == ["n1"]


def test_a_host_that_stops_answering_in_its_health_command_keeps_its_slot():
    world = World()
    world.bound = 40
    book = open_book(world)
    host = Host(world, down=0, hang="connection")
    result = acquire(world, book=book, health={"command": HEALTH, "timeout": 30})
    assert result["failed"]
    assert result["msg"] == ("Run the health command: the health command 'lab-health' did not finish within 30 s "
                             "(the host command did not finish within 40 s: the host stopped answering).")
    record = result["ansible_facts"]["os_activate_result"]
    # The rollback's read is cut too: the host's state is unknown, so it keeps its slot, as a host that did not
    # come back does.
    assert not record["rolled_back"] and record["holds_slot"] and record["status"] == "failed"
    assert "the rollback failed too" in record["reason"] and "did not finish within 40 s" in record["reason"]
    assert ROLLBACK not in host.commands


@pytest.mark.parametrize("options, message", [
    ({"command_timeout": 0}, "command_timeout must be at least 1 second, got 0."),
    ({"health": {"command": HEALTH, "timeout": 0}}, "health.timeout must be at least 1 second, got 0."),
    ({"fleetlock": {"url": URL, "request_timeout": 0}}, "fleetlock.request_timeout must be at least 1 second, got 0."),
])
def test_bad_bounds_are_refused_before_the_slot(options, message):
    world = World()
    book = open_book(world)
    result = acquire(world, book=book, **options)
    assert result == dict(result, failed=True, msg=message)
    with Book.locked(book) as state:
        assert state.data["records"] == {} and state.data["grants"] == []


def test_every_command_of_the_activation_is_bounded_by_command_timeout(monkeypatch):
    """The action's own _low_level_execute_command (not the tests' fake) runs each command under the bound that
    op acquire kept in the book, also in the op continue that follows a hook."""
    seen = []

    def bounded(call, seconds, connection, **kwargs):
        seen.append(seconds)
        return call()

    monkeypatch.setattr(_bound, "bounded", bounded)
    world = World()
    book = open_book(world)
    host = Host(world, down=0)
    action = new_action(os_activate_slot, {})
    monkeypatch.setattr(os_activate_slot.ActionBase, "_low_level_execute_command",
                        lambda self, cmd, *a, **k: host.command(cmd, *a, **k))
    for options in (dict(op="acquire", book=book, target_digest=T, old_digest=OLD, staged_checksum=CHECKSUM,
                         reboot=REBOOT, hooks={"health": True}, command_timeout=12),
                    dict(op="continue", book=book)):
        action = new_action(os_activate_slot, options)
        action._clock = lambda: world.now
        action._sleep = world.sleep
        result = action.run(task_vars={"inventory_hostname": "n1"})
        assert not result.get("failed"), result
    assert result["ansible_facts"]["os_activate_result"]["status"] == "activated"
    # The reboot's boot id reads and the status read, then nothing on the host in op continue but the bound kept.
    assert seen and set(seen) == {12}, seen
    assert action._command_timeout == 12


def test_fleetlock_requests_are_bounded_by_request_timeout():
    world = World()
    book = open_book(world)
    Host(world, down=0)
    lines = []
    inner = world.command

    def command(cmd, sudoable=True, **kwargs):
        lines.append(plain(cmd))
        return inner(cmd, sudoable, **kwargs)

    world.command = command
    result = acquire(world, book=book, fleetlock={"url": URL, "request_timeout": 7})
    assert not result.get("failed"), result
    curls = [line for line in lines if line.startswith("curl ")]
    # pre-reboot, then steady-state: each with curl's own bound.
    assert [line.split()[-1] for line in curls] == [URL + "v1/pre-reboot", URL + "v1/steady-state"]
    assert all(" --max-time 7 " in line for line in curls), curls


def test_park_boot_leaves_the_wait_for_the_boot_to_the_next_task_and_learns_the_shortest_boot():
    world = World()
    book = open_book(world, budgets={"a": 2})
    host = Host(world)
    first = acquire(world, book=book, park_boot=True)
    assert first["granted"] and not first.get("released") and not first.get("failed"), first
    assert first["ansible_facts"]["os_activate_next"] == "boot"
    # The reboot command ran, and nothing was waited for.
    assert host.commands == [BOOT, FINALIZE] and world.sleeps == []
    record = first["ansible_facts"]["os_activate_result"]
    assert record["holds_slot"] and record["phase"] == "reboot" and record["reboot_start"] == 1000.0
    with Book.locked(book) as state:
        # No boot seen yet in this book: the wait may start at once.
        assert state.wakes_at("n1") == 1000.0
    world.now += 20
    done = run(world, "n1", op="continue", book=book)
    record = done["ansible_facts"]["os_activate_result"]
    assert done["released"] and done["ansible_facts"]["os_activate_next"] is None and not done.get("failed"), done
    assert record["status"] == "activated" and record["booted_digest"] == T and not record["holds_slot"]
    # The first read at once (the task before let the host go down), then a tenth of the time waited between two.
    assert host.commands[2:] == [BOOT, BOOT, BOOT, "rpm-ostree status --json"] and world.sleeps == [2.0, 2.2]
    assert done["reboot"]["boot_id_before"] == "boot-1" and done["reboot"]["boot_id"] == "boot-2"
    assert record["reboot_end"] == 1024.2
    with Book.locked(book) as state:
        assert state.data["shortest_boot"] == pytest.approx(24.2) and state.wakes_at("n1") is None
    # The next host's wait starts at four fifths of that boot after its reboot command.
    Host(world)
    second = acquire(world, "n2", book=book, park_boot=True)
    assert second["ansible_facts"]["os_activate_next"] == "boot"
    with Book.locked(book) as state:
        assert state.wakes_at("n2") == pytest.approx(world.now + 0.8 * 24.2)


def test_a_parked_boot_that_does_not_come_back_fails_in_the_next_task_and_keeps_its_slot():
    world = World()
    book = open_book(world)
    host = Host(world, comes_back=False)
    first = acquire(world, book=book, park_boot=True, reboot=dict(REBOOT, reboot_timeout=2))
    assert first["ansible_facts"]["os_activate_next"] == "boot"
    done = run(world, "n1", op="continue", book=book)
    record = done["ansible_facts"]["os_activate_result"]
    assert done["failed"] and done["msg"].startswith(
        "Finalize the staged deployment and reboot: The host did not come back with a new boot id within 2 s"), done
    assert record["holds_slot"] and record["status"] == "failed" and host.commands[-1] == BOOT
    assert done["ansible_facts"]["os_activate_next"] is None


def test_with_the_slots_strategy_a_boot_wait_ends_within_a_slice_and_parks_the_host_again():
    world = World()
    book = open_book(world)
    host = Host(world, down=25)
    assert acquire(world, book=book, park_boot=True, reboot=dict(REBOOT, reboot_timeout=120))["ansible_facts"]["os_activate_next"] == "boot"
    steps = []
    while True:
        began = world.now
        steps.append(run(world, "n1", op="continue", book=book, repeats=True))
        assert world.now - began <= _slots.BOOT_SLICE and not steps[-1].get("failed"), steps[-1]
        if steps[-1]["ansible_facts"]["os_activate_next"] != "boot":
            break
        with Book.locked(book) as state:
            wake = state.wakes_at("n1")
        # Parked again for a quarter of the boot so far, 2 to 5 s.
        assert world.now + _slots.REPARK_MIN <= wake <= world.now + _slots.REPARK_MAX
        world.now = wake
    record = steps[-1]["ansible_facts"]["os_activate_result"]
    assert len(steps) > 1 and steps[-1]["released"] and record["status"] == "activated", steps
    assert host.commands.count(FINALIZE) == 1 and steps[-1]["reboot"]["boot_id"] == "boot-2"


# -- soft reboots ------------------------------------------------------------------------

SOFT_FINALIZE = "bootc upgrade --from-downloaded --apply --soft-reboot auto"


class SoftHost(Host):
    """A bootc host whose staged deployment is soft-reboot capable or not (bootc status's softRebootCapable), and
    that soft-reboots, as bootc and systemd do, when its finalize command asks for it and it is capable: the boot id
    stays and SoftRebootsCount moves."""

    def __init__(self, world, capable=True, **kwargs):
        super().__init__(world, **kwargs)
        self.capable = capable
        self.soft_reboots = 0
        self.soft = False

    def command(self, cmd, sudoable=True, **kwargs):
        plain_cmd = plain(cmd) if cmd.startswith("LC_ALL=C ") else cmd
        if plain_cmd == "bootc status --format=json":
            self.commands.append(plain_cmd)
            doc = _bootc_doc(**self.on)
            if doc["status"]["staged"]:
                doc["status"]["staged"]["softRebootCapable"] = self.capable
            return {"rc": 0, "stdout": json.dumps(doc), "stderr": ""}
        if plain_cmd == SOFT_FINALIZE:
            self.commands.append(plain_cmd)
            self.soft = self.capable
            self._reboot(self.after_finalize, self.comes_back)
            return {"rc": 0, "stdout": "", "stderr": ""}
        if cmd == _reboot.soft_boot_time_command(BOOT):
            self.commands.append("marker")
            if self.rebooted and (self.pending > 0 or not self.comes_back):
                self.pending -= 1
                raise AnsibleConnectionFailure("Failed to connect to the host via ssh: Connection refused")
            if self.rebooted:
                self.rebooted = False
                if self.soft:
                    self.soft_reboots += 1
                else:
                    self.boots, self.soft_reboots = self.boots + 1, 0
            return {"rc": 0, "stdout": "boot-%d:%d\n" % (self.boots, self.soft_reboots), "stderr": ""}
        return super().command(cmd, sudoable, **kwargs)


@pytest.mark.parametrize("capable, kind, reason", [
    (True, "soft", None),
    (False, "full", "bootc says the staged deployment is not soft-reboot capable"),
])
def test_auto_soft_reboots_a_capable_bootc_host_and_waits_for_its_soft_reboot_count(capable, kind, reason):
    world = World()
    book = open_book(world)
    host = SoftHost(world, capable=capable)
    first = acquire(world, book=book, backend="bootc", soft_reboot="auto", park_boot=True)
    assert first["ansible_facts"]["os_activate_next"] == "boot", first
    done = run(world, "n1", op="continue", book=book)
    record = done["ansible_facts"]["os_activate_result"]
    assert not done.get("failed") and record["status"] == "activated", done
    assert (record["activation"], done["reboot"]["kind"]) == (kind, kind)
    assert (record["activation_reason"] or "").startswith(reason or "")
    # bootc is asked for a soft reboot only where its status said the staged deployment is capable.
    assert host.commands.count(SOFT_FINALIZE) == (1 if capable else 0)
    assert host.commands.count("bootc upgrade --from-downloaded --apply") == (0 if capable else 1)
    # A soft reboot keeps the boot id: the wait saw the count move; a full one, a new boot id.
    assert done["reboot"]["boot_id"] == ("boot-1:1" if capable else "boot-2")


def test_rpm_ostree_reboots_fully_with_auto_and_says_why():
    world = World()
    book = open_book(world)
    host = Host(world)
    done = acquire(world, book=book, soft_reboot="auto")
    record = done["ansible_facts"]["os_activate_result"]
    assert record["status"] == "activated" and record["activation"] == "full"
    assert record["activation_reason"] == "rpm-ostree has no soft reboot (coreos/rpm-ostree#4525)"
    assert FINALIZE in host.commands and BOOT in host.commands


@pytest.mark.parametrize("backend, capable", [("bootc", False), ("rpm-ostree", True)])
def test_required_declines_a_host_that_cannot_soft_reboot_before_it_takes_a_slot(backend, capable):
    world = World()
    book = open_book(world)
    host = SoftHost(world, capable=capable)
    result = acquire(world, book=book, backend=backend, soft_reboot="required")
    assert (result["granted"], result["declined"]) == (False, True) and not result.get("failed"), result
    assert result["reason"].startswith("soft reboot required, and ")
    # Nothing was done to the host: at most its deployments were read (bootc); no slot was taken.
    assert host.commands == (["bootc status --format=json"] if backend == "bootc" else [])
    with Book.locked(book) as state:
        assert state.data["hosts"]["n1"]["state"] == "not_activated" and state.data["grants"] == []
        summary = state.summary()
    assert summary["declined"] == {"n1": result["reason"]} and summary["failed"] == []
    # The other host of the pool gets the slot as if n1 were not there.
    SoftHost(world)
    assert acquire(world, host="n2", book=book, backend="bootc", soft_reboot="required")["granted"]


def test_required_soft_reboots_a_capable_host():
    world = World()
    book = open_book(world)
    host = SoftHost(world, capable=True)
    done = acquire(world, book=book, backend="bootc", soft_reboot="required")
    record = done["ansible_facts"]["os_activate_result"]
    assert record["status"] == "activated" and record["activation"] == "soft", done
    assert host.commands.count(SOFT_FINALIZE) == 1 and host.soft_reboots == 1 and host.boots == 1
