# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""_lease: the rollout lease file, taken, renewed, refused, broken and released: its host-side scripts
run for real on this machine (LocalHost), on the test's own files."""

from __future__ import annotations

import json
import os
import threading

import pytest

from ansible_collections.fleetos.layering.plugins.plugin_utils.rollout import _lease
from ansible_collections.fleetos.layering.tests.unit.plugins.module_utils.utils import LocalHost

HOST = LocalHost()

OWNER_A = {"controller": "ctl-a", "user": "ops", "pid": 11, "start": "100"}
OWNER_B = {"controller": "ctl-b", "user": "dev", "pid": 22, "start": "200"}


class Clock:
    def __init__(self, t=1000.0):
        self.t = t

    def __call__(self):
        return self.t

    def sleep(self, seconds):
        self.t += seconds


@pytest.fixture
def path(tmp_path):
    return str(tmp_path / "lib" / "fleetos" / "rollout-lease.json")


def _take(path, rollout, owner=None, started=900.0, clock=None, **kwargs):
    clock = clock or Clock()
    owner = owner or OWNER_A
    return _lease.acquire(HOST, path, rollout, owner, started, 60, now=clock, sleep=clock.sleep, **kwargs)


def test_first_lease_creates_the_directory_and_a_private_file(path):
    changed, lease, previous = _take(path, "r1", phase="planned")
    assert changed and previous is None
    assert lease["rollout"] == "r1" and lease["owner"] == OWNER_A and not lease["released"]
    assert json.loads(open(path).read()) == lease
    assert oct(os.stat(path).st_mode & 0o777) == "0o600"
    assert oct(os.stat(os.path.dirname(path)).st_mode & 0o777) == "0o700"
    assert sorted(os.listdir(os.path.dirname(path))) == ["rollout-lease.json", "rollout-lease.json.lock"]


def test_renewal_keeps_the_record_and_updates_phase_and_time(path):
    _take(path, "r1", clock=Clock(1000.0))
    changed, lease, previous = _take(path, "r1", clock=Clock(1500.0), phase="rebooting", target_digest="sha256:" + "a" * 64)
    assert changed and previous is None
    assert (lease["acquired_at"], lease["renewed_at"]) == (1000.0, 1500.0)
    assert (lease["phase"], lease["target_digest"]) == ("rebooting", "sha256:" + "a" * 64)


def test_another_rollout_is_refused_with_the_holder_and_the_file_unchanged(path):
    _take(path, "r1", started=900.0)
    before = open(path, "rb").read()
    with pytest.raises(_lease.LeaseHeldError) as caught:
        _take(path, "r2", owner=OWNER_B, started=800.0)
    assert caught.value.holder["rollout"] == "r1"
    assert "rollout r1 (ops@ctl-a pid 11" in caught.value.msg and "\n" not in caught.value.msg
    assert len(caught.value.msg) < 300
    assert open(path, "rb").read() == before


def test_a_younger_holder_is_waited_for_then_refused(path):
    _take(path, "r2", started=950.0)
    clock = Clock()
    with pytest.raises(_lease.LeaseHeldError):
        _take(path, "r1", owner=OWNER_B, started=900.0, clock=clock, wait=5)
    assert clock.t == pytest.approx(1005.0, abs=1.0)   # it waited out its 5 s
    clock = Clock()
    with pytest.raises(_lease.LeaseHeldError):
        _take(path, "r3", owner=OWNER_B, started=990.0, clock=clock, wait=5)
    assert clock.t == 1000.0                           # an older holder: refused at once


def test_a_younger_holder_that_releases_lets_the_older_rollout_in(path):
    _take(path, "young", started=950.0)
    clock = Clock()

    def sleep(seconds):
        clock.t += seconds
        _lease.release(HOST, path, "young")

    changed, lease, previous = _lease.acquire(HOST, path, "old", OWNER_B, 900.0, 60, wait=10, now=clock, sleep=sleep)
    assert changed
    assert lease["rollout"] == "old" and previous["rollout"] == "young" and previous["released"]


def test_release_frees_the_lease_and_the_next_rollout_sees_it_as_previous(path):
    _take(path, "r1", phase="rebooting", target_digest="sha256:" + "b" * 64)
    changed, lease = _lease.release(HOST, path, "r1", phase="done", now=lambda: 950.0)
    assert changed and lease["released"] and lease["phase"] == "done"
    assert _lease.release(HOST, path, "r1") == (False, lease)
    changed, lease2, previous = _take(path, "r2", owner=OWNER_B, started=960.0)
    assert changed
    assert previous == lease and lease2["phase"] == "planned" and lease2["target_digest"] is None


def test_release_leaves_another_rollouts_lease_alone(path):
    _take(path, "r1")
    before = open(path, "rb").read()
    assert _lease.release(HOST, path, "r2")[0] is False
    assert open(path, "rb").read() == before


def test_break_lease_takes_over_only_the_named_rollout(path):
    _take(path, "r1", phase="rebooting")
    with pytest.raises(_lease.LeaseHeldError):
        _take(path, "r2", break_lease="r0")
    changed, lease, previous = _take(path, "r2", break_lease="r1")
    assert changed
    assert lease["rollout"] == "r2" and previous["rollout"] == "r1" and previous["phase"] == "rebooting"


def test_check_mode_writes_nothing(path):
    changed, lease, previous = _take(path, "r1", check_mode=True)
    assert previous is None
    assert changed and lease["rollout"] == "r1"
    assert not os.path.exists(path) and not os.path.exists(os.path.dirname(path))


@pytest.mark.parametrize("content, cause", [
    (b"{not json", "is not JSON"),
    (b"[1, 2]", "names no rollout"),
    (b"\xff\xfe", "is not JSON"),
])
def test_a_lease_file_that_does_not_load_is_refused_and_kept(path, content, cause):
    os.makedirs(os.path.dirname(path))
    with open(path, "wb") as handle:
        handle.write(content)
    with pytest.raises(_lease.LeaseError) as caught:
        _take(path, "r1")
    assert cause in caught.value.msg
    assert open(path, "rb").read() == content


@pytest.mark.parametrize("name, option", [("rollout-lease.json", "path"),
                                          ("rollout-lease.json.lock", "the lock file of path")])
def test_symlinks_are_refused(path, tmp_path, name, option):
    os.makedirs(os.path.dirname(path))
    target = tmp_path / "elsewhere"
    target.write_text("keep")
    os.symlink(str(target), os.path.join(os.path.dirname(path), name))
    with pytest.raises(_lease.LeaseError) as caught:
        _take(path, "r1")
    assert caught.value.msg == "%s %s is not a regular file: nothing was changed." % (
        option, os.path.join(os.path.dirname(path), name))
    assert target.read_text() == "keep"


def test_two_rollouts_at_once_get_one_winner(path):
    outcomes = []

    def take(rollout):
        try:
            outcomes.append(("won", _lease.acquire(HOST, path, rollout, OWNER_A, 900.0, 60)[1]["rollout"]))
        except _lease.LeaseHeldError as exc:
            outcomes.append(("refused", exc.holder["rollout"]))

    threads = [threading.Thread(target=take, args=("r%d" % i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    winners = [name for kind, name in outcomes if kind == "won"]
    assert len(winners) == 1
    assert all(name == winners[0] for kind, name in outcomes if kind == "refused")
    assert _lease.read(HOST, path)[1]["rollout"] == winners[0]


def test_expired():
    assert _lease.expired({"renewed_at": 100, "ttl": 10}, 111)
    assert not _lease.expired({"renewed_at": 100, "ttl": 10}, 109)
    assert _lease.expired({"renewed_at": None, "ttl": 10}, 0)


@pytest.mark.parametrize("value", ["relative/path", "/var/lib/x\n", 7])
def test_check_path(value):
    with pytest.raises(_lease.InvalidInputError):
        _lease.check_path(value)


def test_a_rollout_that_changed_the_host_after_this_one_started_makes_its_plan_stale(path):
    _take(path, "young", started=950.0, clock=Clock(960.0))
    _lease.release(HOST, path, "young", phase="done", now=lambda: 990.0)
    with pytest.raises(_lease.LeaseHeldError) as caught:
        _take(path, "old", owner=OWNER_B, started=900.0)
    assert "was changed by rollout young" in caught.value.msg and caught.value.holder["released"]
    # A rollout that started after that release plans from the new state: free.
    changed, lease, previous = _take(path, "later", owner=OWNER_B, started=995.0)
    assert changed and lease["rollout"] == "later" and previous["phase"] == "done"


def test_a_rollout_that_stood_back_leaves_the_host_free(path):
    _take(path, "young", started=950.0, clock=Clock(960.0))
    _lease.release(HOST, path, "young", now=lambda: 990.0)          # phase stays planned
    changed, lease, previous = _take(path, "old", owner=OWNER_B, started=900.0)
    assert changed and previous["rollout"] == "young"


def test_changed_since():
    done = {"released": True, "phase": "done", "released_at": 100.0}
    assert _lease.changed_since(done, 99.0) and not _lease.changed_since(done, 101.0)
    assert not _lease.changed_since(dict(done, phase="planned"), 99.0)
    assert not _lease.changed_since(dict(done, released=False), 99.0)


def test_a_lease_path_that_is_a_device_creates_nothing(tmp_path):
    device_like = tmp_path / "fifo"
    os.mkfifo(str(device_like))
    with pytest.raises(_lease.LeaseError) as caught:
        _take(str(device_like), "r1")
    assert "is not a regular file" in caught.value.msg
    assert sorted(os.listdir(str(tmp_path))) == ["fifo"]


def test_a_lease_written_between_the_read_and_the_write_is_read_again(path):
    """The write replaces only what was read: a rollout that lost the race reads the winner's lease."""
    lease_path = path

    class Racing(LocalHost):
        raced = False

        def read_file(self, path, siblings=()):
            data = super().read_file(path, siblings)
            if not self.raced:
                self.raced = True
                _lease.acquire(HOST, lease_path, "fast", OWNER_B, 800.0, 60)
            return data

    host = Racing()
    with pytest.raises(_lease.LeaseHeldError) as caught:
        _lease.acquire(host, path, "slow", OWNER_A, 900.0, 60)
    assert caught.value.holder["rollout"] == "fast"
    assert _lease.read(HOST, path)[1]["rollout"] == "fast"
    # Two reads and one refused write: the script said the file had changed.
    assert [argv[4] for argv in host.argvs] == [path, path, path]
    assert sorted(os.listdir(os.path.dirname(path))) == ["rollout-lease.json", "rollout-lease.json.lock"]
