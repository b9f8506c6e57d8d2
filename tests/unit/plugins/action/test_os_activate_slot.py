# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for the os_activate_slot action plugin: a book on disk, a fake clock, a fake FleetLock."""

from __future__ import annotations

import json
import shlex
import shlex
import os
import tempfile

import pytest

from ansible.errors import AnsibleConnectionFailure

from ansible_collections.fleetos.layering.plugins.action import os_activate_slot
from ansible_collections.fleetos.layering.plugins.plugin_utils import _slots
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


def run(world, host="n1", controller=None, **args):
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
    return action.run(task_vars={"inventory_hostname": host})


def open_book(world, budgets=None, **args):
    hosts = [{"host": "n1", "pool": "a"}, {"host": "n2", "pool": "a"}]
    result = run(world, op="open", hosts=hosts, budgets=budgets or {"a": 1}, **args)
    assert not result.get("failed"), result
    return result["book"]


def test_a_host_waits_for_the_slot_and_gets_it_when_it_is_freed():
    world = World()
    book = open_book(world)
    first = run(world, "n1", op="acquire", book=book, target_digest=T)
    assert first["granted"] and first["ansible_facts"]["os_activate_result"]["status"] == "started"
    # n2 waits until its timeout: n1 holds the pool's only slot.
    second = run(world, "n2", op="acquire", book=book, target_digest=T, timeout=2, poll_interval=0.5)
    assert not second["granted"] and second["reason"] == "no budget slot of pool a was freed within 2 s (held by n1)"
    assert world.sleeps == [0.5] * 4
    run(world, "n1", op="event", book=book, event="verified")
    released = run(world, "n1", op="release", book=book)
    assert released["ansible_facts"]["os_activate_result"]["status"] == "activated"
    summary = run(world, op="close", book=book)["ansible_facts"]["os_activate_summary"]
    assert summary["started"] == ["n1"] and summary["not_activated"] == ["n2"] and summary["most_held"] == {"a": 1}
    assert not os.path.exists(book)


def test_fleetlock_is_asked_from_the_host_until_it_grants_and_freed_after():
    world = World(answers=[409, 409, 200])
    book = open_book(world)
    result = run(world, "n1", op="acquire", book=book, target_digest=T, fleetlock_url=URL, fleetlock_group="blue",
                 fleetlock_retry_delay=2)
    assert result["granted"] and result["changed"] and world.sleeps == [2, 2]
    assert world.calls[0] == ("curl", "http://198.51.100.1:8080/v1/pre-reboot", {"id": "n1", "group": "blue"})
    run(world, "n1", op="event", book=book, event="verified")
    released = run(world, "n1", op="release", book=book, fleetlock_url=URL, fleetlock_group="blue")
    assert released["unlocked"] and world.calls[-1][1] == "http://198.51.100.1:8080/v1/steady-state"


def test_fleetlock_that_never_grants_gives_the_slot_back_and_stops_the_run():
    world = World(answers=[409] * 10)
    book = open_book(world)
    result = run(world, "n1", op="acquire", book=book, target_digest=T, fleetlock_url=URL, fleetlock_timeout=4,
                 fleetlock_retry_delay=1)
    assert not result["granted"] and result["reason"].startswith("FleetLock gave no slot within 4 s (n1 refused")
    second = run(world, "n2", op="acquire", book=book, target_digest=T)
    assert not second["granted"] and second["reason"] == result["reason"]


def test_a_host_that_kept_its_slot_is_not_unlocked_from_fleetlock():
    world = World()
    book = open_book(world, budgets={"a": 2})
    run(world, "n1", op="acquire", book=book, target_digest=T, fleetlock_url=URL)
    run(world, "n1", op="event", book=book, event="reboot_start")
    failed = run(world, "n1", op="fail", book=book, task="Finalize", result={"msg": "timeout"},
                 reboot={"boot_id_before": "x"}, probe={"unreachable": True})
    assert failed["roll_back"] is False
    released = run(world, "n1", op="release", book=book, fleetlock_url=URL)
    assert not released["unlocked"] and released["ansible_facts"]["os_activate_result"]["holds_slot"]
    assert [c[1].rsplit("/", 1)[1] for c in world.calls] == ["pre-reboot"]


def test_bad_input_is_one_sentence():
    world = World()
    result = run(world, op="open", hosts=[{"host": "n1", "pool": "a"}], budgets={"b": 1})
    assert result["failed"] and result["msg"] == "The budget slot operation open failed: pool a of host n1 has no budget."


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


def _granted(world, digest):
    """n1 holds the slot, is past its reboot, and os_info on it answers ``digest`` booted."""
    book = open_book(world)
    assert run(world, "n1", op="acquire", book=book, target_digest=T, old_digest="sha256:" + "a" * 64)["granted"]
    run(world, "n1", op="event", book=book, event="reboot_start")
    world.reads = []
    world.rpm_ostree = _rpm_ostree_doc(booted=digest)
    world.bootc = _bootc_doc(booted=digest)
    return book


def test_booted_reads_the_host_and_moves_to_health_on_the_target():
    world = World()
    book = _granted(world, T)
    world.now += 12
    result = run(world, "n1", op="booted", book=book, backend="bootc", reboot={"changed": True})
    record = result["ansible_facts"]["os_activate_result"]
    assert not result.get("failed") and world.reads == ["bootc status --format=json"]
    assert record["phase"] == "health" and record["booted_digest"] == T and record["reboot_end"] == 1012.0
    assert result["booted"]["image"]["digest"] == T


def test_booted_on_another_digest_fails_in_the_verify_phase():
    world = World()
    other = "sha256:" + "9" * 64
    book = _granted(world, other)
    result = run(world, "n1", op="booted", book=book, reboot={"changed": True})
    assert world.reads == ["rpm-ostree status --json"]
    assert result["failed"] and result["msg"] == "n1 booted %s, not %s" % (other, T)
    failed = run(world, "n1", op="fail", book=book, task="Read and verify the booted deployment", result=result)
    record = failed["ansible_facts"]["os_activate_result"]
    assert failed["roll_back"] and record["reason"].startswith("verify: Read and verify the booted deployment: n1 booted")


def test_booted_after_an_unreachable_reboot_fails_in_the_reboot_phase_without_reading():
    world = World()
    book = _granted(world, T)
    result = run(world, "n1", op="booted", book=book, reboot={"unreachable": True, "msg": "timed\n out"})
    assert result["failed"] and result["msg"] == "n1 was unreachable after its reboot: timed out"
    assert world.reads == []
    failed = run(world, "n1", op="fail", book=book, task="Read and verify the booted deployment", result=result,
                 reboot={"boot_id_before": "b1"}, probe={"unreachable": True}, reboot_timeout=30)
    record = failed["ansible_facts"]["os_activate_result"]
    assert not failed["roll_back"] and record["holds_slot"] and "did not come back within 30 s" in record["reason"]


def test_a_worker_whose_controller_is_gone_stops_waiting_and_takes_no_fleetlock_slot():
    world = World()
    book = open_book(world, budgets={"a": 1})
    assert run(world, "n1", op="acquire", book=book, target_digest=T)["granted"]
    parents = iter([4242, 4242, 1])  # ansible-playbook was killed: the worker is reparented

    result = run(world, "n2", controller=lambda: next(parents), op="acquire", book=book, target_digest=T,
                 fleetlock_url=URL, poll_interval=0.5)
    assert not result["granted"] and result["reason"] == "the run's controller process 4242 is gone"
    assert world.sleeps == [0.5] and world.calls == []
    summary = run(world, op="close", book=book)["ansible_facts"]["os_activate_summary"]
    assert summary["not_activated"] == ["n2"]


def _holding(world, mode="finalize", lease_answer=None, **digests):
    """n1 holds the slot in ``mode``; the host's deployments are on ``digests`` (booted, staged,
    rollback), as bootc status and rpm-ostree status --json tell them; os_rollout_lease answers
    ``lease_answer``."""
    book = open_book(world)
    assert run(world, "n1", op="acquire", book=book, target_digest=T, old_digest="sha256:" + "a" * 64, mode=mode)["granted"]
    world.reads = []
    world.rpm_ostree = _rpm_ostree_doc(**digests)
    world.bootc = _bootc_doc(**digests)

    def module(module_name, module_args, task_vars):
        world.reads.append((module_name, module_args))
        return lease_answer or {"acquired": True}
    world.module = module
    return book


OTHER = "sha256:" + "9" * 64
OLD = "sha256:" + "a" * 64


@pytest.mark.parametrize("backend", ["rpm-ostree", "bootc"])
@pytest.mark.parametrize("mode, digests, problem", [
    ("finalize", {"booted": OLD, "staged": T}, None),
    ("finalize", {"booted": OLD}, "n1 has no staged deployment at %s (staged: nothing)" % T),
    ("finalize", {"booted": OLD, "staged": OTHER}, "n1 has no staged deployment at %s (staged: %s)" % (T, OTHER)),
    ("rollback", {"booted": OLD, "rollback": T}, None),
    ("rollback", {"booted": OLD, "rollback": OTHER}, "n1 has no previous deployment at %s or still has a staged one" % T),
    ("rollback", {"booted": OLD}, "n1 has no previous deployment at %s or still has a staged one" % T),
])
def test_prepare_reads_the_host_and_checks_what_the_mode_needs(backend, mode, digests, problem):
    world = World()
    book = _holding(world, mode, **digests)
    result = run(world, "n1", op="prepare", book=book, backend=backend)
    # The backend's status command on the host, parsed here: one command, no Python on the host.
    assert world.reads == (["rpm-ostree status --json"] if backend == "rpm-ostree" else ["bootc status --format=json"])
    assert result["status"]["backend"] == backend
    assert result["status"]["booted"]["image"]["digest"] == digests["booted"]
    assert result.get("failed", False) is bool(problem) and result.get("msg") == problem
    if problem:
        failed = run(world, "n1", op="fail", book=book, task="Read and check the deployments before the reboot", result=result)
        record = failed["ansible_facts"]["os_activate_result"]
        # Nothing was disrupted: the host frees its slot, and is not rolled back.
        assert not failed["roll_back"] and record["phase"] == "prepare" and not record["holds_slot"]


@pytest.mark.parametrize("backend, staged, problem", [
    ("bootc", T, None),
    ("rpm-ostree", T, "n1 has no previous deployment at %s or still has a staged one" % T),
])
def test_prepare_for_a_rollback_lets_only_bootc_keep_a_staged_deployment(backend, staged, problem):
    world = World()
    book = _holding(world, "rollback", booted=OLD, staged=staged, rollback=T)
    result = run(world, "n1", op="prepare", book=book, backend=backend)
    assert result.get("msg") == problem


@pytest.mark.parametrize("answer, backend, message", [
    ({"rc": 1, "stdout": "", "stderr": "error: Could not connect to rpm-ostreed\n"}, "rpm-ostree",
     "Failed to run rpm-ostree status: Could not connect to rpm-ostreed."),
    ({"rc": 0, "stdout": "not json", "stderr": ""}, "rpm-ostree",
     "Failed to parse the output of rpm-ostree status --json: Expecting value: line 1 column 1 (char 0)."),
    ({"rc": 1, "stdout": "", "stderr": "error: Status: opening sysroot: Permission denied\n"}, "bootc",
     "Failed to read the bootc status: Status: opening sysroot: Permission denied."),
    ({"rc": 127, "stdout": "", "stderr": "sh: 1: bootc: not found\n"}, "bootc",
     "Failed to read the bootc status: the host has no 'bootc' command in its PATH (exit status 127): install it or "
     "give the path of the executable."),
])
def test_prepare_that_cannot_read_the_host_fails_naming_it(answer, backend, message):
    world = World()
    book = _holding(world, booted=OLD, staged=T)
    world.rpm_ostree = world.bootc = answer
    result = run(world, "n1", op="prepare", book=book, backend=backend)
    assert result["failed"] and result["msg"] == "Reading the deployments of n1 before the reboot failed: " + message


def test_rebooting_writes_the_lease_on_the_host_then_records_the_reboot_start():
    world = World()
    book = _holding(world)
    world.now += 3
    lease = {"rollout": "r1", "owner": "ctl:1", "started_at": 999.0, "ttl": 600}
    before = {"booted": {"checksum": "d" * 64, "image": {"digest": "sha256:" + "e" * 64}}, "staged": None}
    result = run(world, "n1", op="rebooting", book=book, lease=lease, status=before)
    assert world.reads == [("fleetos.layering.os_rollout_lease", {
        "rollout": "r1", "owner": "ctl:1", "started_at": 999.0, "ttl": 600, "phase": "rebooting", "target_digest": T})]
    record = result["ansible_facts"]["os_activate_result"]
    assert record["phase"] == "reboot" and record["reboot_start"] == 1003.0
    assert record["old_digest"] == "sha256:" + "e" * 64


def test_rebooting_without_a_lease_only_records_and_in_mode_verify_records_nothing():
    world = World()
    book = _holding(world)
    record = run(world, "n1", op="rebooting", book=book, lease={})["ansible_facts"]["os_activate_result"]
    assert world.reads == [] and record["phase"] == "reboot"
    world = World()
    book = _holding(world, mode="verify")
    record = run(world, "n1", op="rebooting", book=book, lease={"rollout": "r1", "owner": "o", "started_at": 1.0})[
        "ansible_facts"]["os_activate_result"]
    assert [read[0] for read in world.reads] == ["fleetos.layering.os_rollout_lease"]
    assert "ttl" not in world.reads[0][1]
    assert record["phase"] == "prepare" and record["reboot_start"] is None


def test_rebooting_whose_lease_write_fails_fails_before_the_reboot_start():
    world = World()
    book = _holding(world, lease_answer={"failed": True, "msg": "lease held by\nctl:2"})
    result = run(world, "n1", op="rebooting", book=book, lease={"rollout": "r1", "owner": "o", "started_at": 1.0})
    assert result["failed"] and result["msg"] == "Recording the reboot in the rollout lease of n1 failed: lease held by ctl:2"
    failed = run(world, "n1", op="fail", book=book, task="Record that the host reboots into its target", result=result)
    assert failed["ansible_facts"]["os_activate_result"]["phase"] == "prepare" and not failed["roll_back"]


def test_acquire_with_a_lease_writes_phase_rebooting_before_it_waits_for_the_slot():
    world = World()
    book = open_book(world)
    assert run(world, "n1", op="acquire", book=book, target_digest=T)["granted"]
    writes = []

    def module(module_name, module_args, task_vars):
        # The lease is written before n2 waits: n1 still holds the pool's only slot.
        writes.append((module_name, module_args, list(world.sleeps)))
        return {"changed": True, "acquired": True}

    lease = {"rollout": "r1", "owner": "ctl:1", "started_at": 999.0}
    world.module = module
    second = run(world, "n2", op="acquire", book=book, target_digest=T, timeout=1, poll_interval=0.5, lease=lease)
    assert writes == [("fleetos.layering.os_rollout_lease", {
        "rollout": "r1", "owner": "ctl:1", "started_at": 999.0, "phase": "rebooting", "target_digest": T}, [])]
    assert not second["granted"] and world.sleeps == [0.5, 0.5]


def test_acquire_whose_lease_write_fails_takes_no_slot_and_says_why():
    world = World()
    book = open_book(world, budgets={"a": 2})
    world.module = lambda module_name, module_args, task_vars: {"failed": True, "msg": "disk\nfull"}
    result = run(world, "n1", op="acquire", book=book, target_digest=T, lease={"rollout": "r1", "owner": "o", "started_at": 1.0})
    assert result == {"granted": False, "reason": "recording the reboot in the rollout lease of n1 failed: disk full",
                      "changed": False}
    summary = run(world, op="close", book=book)["ansible_facts"]["os_activate_summary"]
    # n2 never asked: not activated either.
    assert summary["not_activated"] == ["n1", "n2"] and summary["started"] == [] and summary["most_held"] == {"a": 0}


def test_acquire_with_rebooting_records_the_reboot_start_with_the_grant_but_not_in_mode_verify():
    world = World()
    book = open_book(world, budgets={"a": 2})
    record = run(world, "n1", op="acquire", book=book, target_digest=T, rebooting=True)["ansible_facts"]["os_activate_result"]
    assert record["phase"] == "reboot" and record["reboot_start"] == 1000.0
    record = run(world, "n2", op="acquire", book=book, target_digest=T, mode="verify", rebooting=True)[
        "ansible_facts"]["os_activate_result"]
    assert record["phase"] == "prepare" and record["reboot_start"] is None


@pytest.mark.parametrize("health, phase, status", [(True, "health", "started"), (False, "post", "activated")])
def test_booted_without_a_health_check_records_the_host_verified(health, phase, status):
    world = World()
    book = _granted(world, T)
    world.now += 12
    record = run(world, "n1", op="booted", book=book, backend="bootc", reboot={"changed": True}, health=health)[
        "ansible_facts"]["os_activate_result"]
    assert record["phase"] == phase and record["status"] == status
    assert record["verified_at"] == (None if health else 1012.0) and record["holds_slot"] is health


def test_booted_on_another_digest_without_a_health_check_is_not_verified():
    world = World()
    book = _granted(world, "sha256:" + "9" * 64)
    result = run(world, "n1", op="booted", book=book, reboot={"changed": True}, health=False)
    record = result["ansible_facts"]["os_activate_result"]
    assert result["failed"] and record["phase"] == "verify" and record["verified_at"] is None and record["holds_slot"]


BOOT = "cat /run/lab-boot-id"
FINALIZE = "rpm-ostree finalize-deployment --allow-unlocked " + "c" * 64
ACTIVATE = {"reboot_command": FINALIZE, "boot_time_command": BOOT, "reboot_timeout": 30, "poll_interval": 0.5}


class RebootingHost:
    """A host for op acquire with activate: its boot id changes after the reboot command, once
    ``down`` polls found it unreachable; then rpm-ostree status shows ``booted``."""

    def __init__(self, world, booted=T, down=2, comes_back=True, reboot_rc=0):
        self.world = world
        self.booted = booted
        self.down = down
        self.comes_back = comes_back
        self.reboot_rc = reboot_rc
        self.rebooted = False
        self.commands = []

    def command(self, cmd, sudoable=True, **kwargs):
        cmd = plain(cmd) if cmd.startswith("LC_ALL=C ") else cmd
        self.commands.append(cmd)
        if cmd == FINALIZE:
            self.rebooted = self.reboot_rc == 0
            return {"rc": self.reboot_rc, "stdout": "", "stderr": "error: no staged deployment" if self.reboot_rc else ""}
        if cmd == BOOT:
            if not self.rebooted:
                return {"rc": 0, "stdout": "boot-1\n", "stderr": ""}
            if self.down > 0 or not self.comes_back:
                self.down -= 1
                raise AnsibleConnectionFailure("Failed to connect to the host via ssh: Connection refused")
            return {"rc": 0, "stdout": "boot-2\n", "stderr": ""}
        if cmd == "rpm-ostree status --json":
            return {"rc": 0, "stdout": json.dumps(_rpm_ostree_doc(booted=self.booted if self.rebooted else OLD)), "stderr": ""}
        raise AssertionError("unexpected command %r" % cmd)


OLD = "sha256:" + "a" * 64


def run_on(host, name="n1", **args):
    """run() with ``host`` answering the commands."""
    host.world.command = host.command
    return run(host.world, name, **args)


def test_acquire_with_activate_reboots_verifies_and_frees_the_slot_in_one_task():
    world = World()
    book = open_book(world)
    host = RebootingHost(world)
    result = run_on(host, op="acquire", book=book, target_digest=T, old_digest=OLD, activate=ACTIVATE)
    record = result["ansible_facts"]["os_activate_result"]
    assert result["granted"] and result["released"] and result["failure"] is None and result["changed"], result
    assert host.commands == [BOOT, FINALIZE, BOOT, BOOT, BOOT, "rpm-ostree status --json"]
    assert world.sleeps == [0.5, 0.5, 0.5]
    assert result["reboot"]["boot_id_before"] == "boot-1" and result["reboot"]["boot_id"] == "boot-2"
    # Recorded as the steps would have: the reboot from the grant, back after the polls, verified, freed.
    assert record["status"] == "activated" and record["booted_digest"] == T and not record["holds_slot"]
    assert record["reboot_start"] == 1000.0 and record["reboot_end"] == 1001.5 and record["released_at"] == 1001.5
    # The slot is free again: the pool's next host gets it at once.
    assert run(world, "n2", op="acquire", book=book, target_digest=T, timeout=0)["granted"]


LEASE = {"rollout": "r1", "owner": "ctl:1", "started_at": 999.0, "ttl": 600}


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


@pytest.mark.parametrize("release, state, phase", [(True, "released", "done"), (False, "acquired", "activated")])
def test_acquire_with_activate_and_a_lease_records_the_activated_host_after_freeing_the_slot(release, state, phase):
    world = World()
    book = open_book(world)
    writes = _lease_writes(world)
    result = run_on(RebootingHost(world), op="acquire", book=book, target_digest=T, old_digest=OLD, activate=ACTIVATE,
                    lease=LEASE, lease_release=release)
    assert result["released"] and result["lease_written"] and not result.get("failed"), result
    common = {"rollout": "r1", "owner": "ctl:1", "started_at": 999.0, "ttl": 600}
    assert writes == [dict(common, phase="rebooting", target_digest=T), dict(common, state=state, phase=phase)]


def test_acquire_with_activate_whose_last_lease_write_fails_fails_with_the_slot_freed():
    world = World()
    book = open_book(world)
    _lease_writes(world, fail_phase="done")
    result = run_on(RebootingHost(world), op="acquire", book=book, target_digest=T, old_digest=OLD, activate=ACTIVATE,
                    lease=LEASE, lease_release=True)
    assert result["failed"] and not result["lease_written"], result
    assert result["msg"] == "n1 was activated, but recording it in its rollout lease failed: disk full"
    assert result["ansible_facts"]["os_activate_result"]["status"] == "activated"
    assert run(world, "n2", op="acquire", book=book, target_digest=T, timeout=0)["granted"]


def test_acquire_with_activate_and_a_lease_whose_host_fails_writes_only_the_reboot():
    world = World()
    book = open_book(world)
    writes = _lease_writes(world)
    result = run_on(RebootingHost(world, booted=OLD), op="acquire", book=book, target_digest=T, old_digest=OLD,
                    activate=ACTIVATE, lease=LEASE, lease_release=True)
    assert result["failure"]["step"] == "Read and verify the booted deployment" and not result["lease_written"]
    assert [w["phase"] for w in writes] == ["rebooting"]


def test_acquire_with_activate_of_a_killed_run_changes_nothing_after_the_reboot():
    world = World()
    book = open_book(world)
    writes = _lease_writes(world)
    host = RebootingHost(world)
    # ansible-playbook is killed while the host reboots: the worker's parent is another process when it is back.
    result = run_on(host, op="acquire", book=book, target_digest=T, old_digest=OLD, activate=ACTIVATE, lease=LEASE,
                    lease_release=True, controller=lambda: 1 if host.rebooted else 4242)
    assert result["failed"] and result["msg"] == "the run's controller process 4242 is gone, so n1 is left as it booted, unverified."
    assert result["reboot"]["rebooted"] and "rpm-ostree status --json" not in host.commands
    assert [w["phase"] for w in writes] == ["rebooting"]
    with _slots.locked_book(book) as state:
        record = _slots.record_of(state, "n1")
    # Still as the killed run left it: rebooting, not back, not verified, holding its slot.
    assert record["reboot_end"] is None and record["verified_at"] is None and record["holds_slot"]


def test_acquire_with_activate_of_a_killed_run_neither_writes_its_lease_nor_reboots():
    world = World()
    book = open_book(world)
    writes = _lease_writes(world)
    host = RebootingHost(world)
    # Killed before the slot was granted: the slot is free, but the run that would free it again is gone.
    parents = iter([4242] + [1] * 10)
    result = run_on(host, op="acquire", book=book, target_digest=T, old_digest=OLD, activate=ACTIVATE, lease=LEASE,
                    controller=lambda: next(parents))
    assert result == {"granted": False, "reason": "the run's controller process 4242 is gone", "changed": False}
    assert writes == [] and host.commands == []
    # Killed between the grant and the reboot: the host is not rebooted.
    parents = iter([4243] + [1] * 10)
    result = run_on(host, "n2", op="acquire", book=book, target_digest=T, old_digest=OLD, activate=ACTIVATE,
                    controller=lambda: next(parents))
    assert result["granted"] and result["failed"], result
    assert result["msg"] == "the run's controller process 4243 is gone, so n2 was not rebooted."
    assert host.commands == []


def test_acquire_with_activate_whose_host_does_not_come_back_keeps_the_failure_for_the_rescue():
    world = World()
    book = open_book(world)
    host = RebootingHost(world, comes_back=False)
    result = run_on(host, op="acquire", book=book, target_digest=T, old_digest=OLD,
                    activate=dict(ACTIVATE, reboot_timeout=2))
    assert result["granted"] and not result["released"] and not result.get("failed"), result
    failure = result["failure"]
    assert failure["step"] == "Finalize the staged deployment and reboot" and failure["rc"] is None
    assert failure["msg"].startswith("The host did not come back with a new boot id within 2 s of the reboot command")
    record = result["ansible_facts"]["os_activate_result"]
    assert record["phase"] == "reboot" and record["status"] == "started" and record["holds_slot"]
    # What the rescue (failed.yml) does with it: the host went down, so it keeps its slot.
    failed = run(world, "n1", op="fail", book=book, task=failure["step"], result=failure, reboot=result["reboot"],
                 probe={"unreachable": True}, reboot_timeout=2)
    assert failed["ansible_facts"]["os_activate_result"]["reason"].startswith(
        "did not come back within 2 s; its budget slot stays taken (reboot: Finalize the staged deployment and reboot: ")


def test_acquire_with_activate_booted_on_another_digest_fails_in_the_verify_phase_unfreed():
    world = World()
    book = open_book(world)
    other = "sha256:" + "9" * 64
    host = RebootingHost(world, booted=other, down=0)
    result = run_on(host, op="acquire", book=book, target_digest=T, old_digest=OLD, activate=ACTIVATE)
    record = result["ansible_facts"]["os_activate_result"]
    assert result["failure"] == {"step": "Read and verify the booted deployment", "rc": None,
                                 "msg": "n1 booted %s, not %s" % (other, T)}
    assert not result["released"] and record["phase"] == "verify" and record["booted_digest"] == other
    assert not run(world, "n2", op="acquire", book=book, target_digest=T, timeout=0)["granted"]


def test_acquire_with_activate_whose_reboot_command_fails_says_so_with_its_rc():
    world = World()
    book = open_book(world)
    host = RebootingHost(world, reboot_rc=1)
    failure = run_on(host, op="acquire", book=book, target_digest=T, old_digest=OLD, activate=ACTIVATE)["failure"]
    assert failure["rc"] == 1 and failure["msg"] == "The reboot command failed (rc=1): 'error: no staged deployment'."
    assert host.commands == [BOOT, FINALIZE]


def test_acquire_with_activate_in_mode_verify_reads_and_frees_without_a_reboot():
    world = World()
    book = open_book(world)
    host = RebootingHost(world)
    host.rebooted = True        # a killed run rebooted it into its target
    result = run_on(host, op="acquire", book=book, target_digest=T, old_digest=OLD, mode="verify", activate=ACTIVATE)
    assert result["released"] and result["ansible_facts"]["os_activate_result"]["status"] == "activated"
    assert host.commands == ["rpm-ostree status --json"] and result["reboot"] == {} and not result["changed"]


@pytest.mark.parametrize("activate, message", [
    (dict(ACTIVATE, poll_interval=0), "activate.poll_interval must be a number of seconds more than 0, got 0.0."),
    (dict(ACTIVATE, reboot_timeout=0), "activate.reboot_timeout must be at least 1 second, got 0."),
])
def test_acquire_with_bad_activate_numbers_is_refused_before_the_lease_and_the_slot(activate, message):
    world = World()
    book = open_book(world)
    host = RebootingHost(world)
    result = run_on(host, op="acquire", book=book, target_digest=T, activate=activate,
                    lease={"rollout": "r1", "owner": "o", "started_at": 1.0})
    assert result["failed"] and result["msg"] == message
    assert host.commands == [] and world.calls == []
    # Nothing was recorded for n1: it can still take the slot.
    assert run(world, "n1", op="acquire", book=book, target_digest=T, timeout=0)["granted"]


def test_acquire_with_activate_over_a_local_connection_refuses_to_reboot_the_controller():
    world = World()
    book = open_book(world)
    host = RebootingHost(world)
    host.world.command = host.command
    action = new_action(os_activate_slot, dict(op="acquire", book=book, target_digest=T, activate=ACTIVATE))
    action._clock = lambda: world.now
    action._sleep = world.sleep
    action._low_level_execute_command = host.command
    action._connection.transport = "local"
    result = action.run(task_vars={"inventory_hostname": "n1"})
    assert result["failure"]["msg"] == "Refusing to reboot the controller (connection local)." and host.commands == []


def test_a_host_with_a_whole_round_ahead_writes_its_lease_once_that_round_got_its_slots():
    world = World()
    hosts = [{"host": name, "pool": "a"} for name in ("n1", "n2", "n3")]
    book = run(world, op="open", hosts=hosts, budgets={"a": 1})["book"]
    writes = []

    def module(module_name, module_args, task_vars):
        writes.append((task_vars["inventory_hostname"], world.now))
        return {"changed": True, "acquired": True}

    world.module = module
    lease = {"rollout": "r1", "owner": "ctl:1", "started_at": 999.0}
    assert run(world, "n1", op="acquire", book=book, target_digest=T, lease=lease)["granted"]
    # n3 has n2 ahead of it, a whole round of the pool's budget of 1 with no slot yet: it waits to write.
    third = run(world, "n3", op="acquire", book=book, target_digest=T, timeout=1, poll_interval=0.5, lease=lease)
    assert not third["granted"] and writes == [("n1", 1000.0)]
    # n2 has no one ahead without a slot: it writes at once, then waits for n1's slot.
    second = run(world, "n2", op="acquire", book=book, target_digest=T, timeout=1, poll_interval=0.5, lease=lease)
    assert not second["granted"] and writes == [("n1", 1000.0), ("n2", 1001.0)]
