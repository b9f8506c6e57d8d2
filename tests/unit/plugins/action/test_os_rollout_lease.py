# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""os_rollout_lease: the action plugin against a lease file in a temporary directory (the file scripts run
for real; rpm-ostree is faked)."""

from __future__ import annotations

import json

import pytest

from ansible_collections.fleetos.layering.tests.unit.plugins.action.utils import fake_host, run_action
from ansible_collections.fleetos.layering.plugins.action import os_rollout_lease
from ansible_collections.fleetos.layering.plugins.module_utils.host import _host

OWNER = {"controller": "ctl", "user": "ops", "pid": 4242}


@pytest.fixture
def fake(monkeypatch):
    return fake_host(monkeypatch)


@pytest.fixture
def path(tmp_path):
    return str(tmp_path / "fleetos" / "rollout-lease.json")


def _run(args, failed=False, check_mode=False, task_vars=None):
    return run_action(os_rollout_lease, args, failed=failed, check_mode=check_mode, task_vars=task_vars)


def _acquire(path, rollout="r1", **kwargs):
    return dict(dict(path=path, rollout=rollout, owner=OWNER, started_at=1000.5), **kwargs)


def test_acquire_renew_release(fake, path):
    result = _run(_acquire(path))
    assert result["acquired"] and result["changed"] and result["previous"] is None
    result = _run(_acquire(path, phase="rebooting", target_digest="sha256:" + "e" * 64))
    assert result["lease"]["phase"] == "rebooting"
    assert json.load(open(path))["target_digest"] == "sha256:" + "e" * 64
    result = _run(dict(path=path, rollout="r1", state="released"))
    assert result["changed"] and not result["acquired"] and result["lease"]["released"]
    assert _run(dict(path=path, rollout="r1", state="released"))["changed"] is False


def test_the_lease_as_one_mapping_gives_the_options_the_task_does_not(fake, path):
    lease = {"rollout": "r1", "owner": OWNER, "started_at": 1000.5, "ttl": 600, "release_unchanged": False}
    result = _run(dict(path=path, lease=lease))
    assert result["acquired"] and (result["lease"]["rollout"], result["lease"]["ttl"]) == ("r1", 600)
    # An option of the task's own wins: a shorter ttl, the release of the same rollout.
    assert _run(dict(path=path, lease=lease, ttl=60))["lease"]["ttl"] == 60
    assert _run(dict(path=path, lease=lease, state="released"))["lease"]["released"]
    # None in the mapping gives nothing: the task's own check names the option.
    assert _run(dict(path=path, lease=dict(lease, owner=None)), failed=True)["msg"] == (
        "owner is required with state=acquired.")
    assert _run(dict(path=path, lease="r1"), failed=True)["msg"] == (
        "lease must be a mapping of rollout, owner, started_at, ttl, wait, got str.")


def test_refused_names_the_holder(fake, path):
    _run(_acquire(path))
    result = _run(_acquire(path, rollout="r2", started_at=2000.0), failed=True)
    assert result["acquired"] is False and result["holder"]["rollout"] == "r1"
    assert result["msg"].startswith("The host is leased by rollout r1 (ops@ctl pid 4242")
    assert result["msg"].endswith(".") and len(result["msg"]) < 300


def test_break_lease_returns_the_broken_record(fake, path):
    _run(_acquire(path, phase="rebooting"))
    result = _run(_acquire(path, rollout="r2", break_lease="r1"))
    assert result["acquired"] and result["previous"]["rollout"] == "r1" and result["previous"]["phase"] == "rebooting"


def test_check_mode_writes_nothing(fake, path, tmp_path):
    result = _run(_acquire(path), check_mode=True)
    assert result["acquired"] and result["changed"]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args, message", [
    (dict(rollout="r1"), "owner is required with state=acquired."),
    (dict(rollout="r1", owner=OWNER), "started_at is required with state=acquired."),
    (dict(rollout="r1", owner=OWNER, started_at=1.0, ttl=0), "ttl must be a positive number of seconds, got 0."),
    (dict(rollout="r1", owner=OWNER, started_at=1.0, wait=-1), "wait must not be negative, got -1."),
    (dict(owner=OWNER, started_at=1.0), "rollout is required with state=acquired."),
    (dict(state="released"), "rollout is required with state=released."),
])
def test_bad_input_fails_before_anything_is_written(fake, path, tmp_path, args, message):
    result = _run(dict(args, path=path), failed=True)
    assert result["msg"] == message
    assert list(tmp_path.iterdir()) == []


def test_a_relative_path_is_refused(fake):
    result = _run(dict(rollout="r1", state="released", path="relative/lease.json"), failed=True)
    assert result["msg"] == "path must be an absolute path without control characters."


def _status(digest):
    return json.dumps({"deployments": [{"booted": True, "checksum": "d" * 64,
                                        "container-image-reference": "ostree-unverified-registry:reg/os@" + digest,
                                        "container-image-reference-digest": digest, "osname": "default"}],
                       "transaction": None})


def test_deployments_are_read_after_the_lease_is_taken(fake, path):
    fake["results"] = [(0, _status("sha256:" + "a" * 64), "")]
    result = _run(_acquire(path, deployments="rpm-ostree"))
    assert result["acquired"] and json.load(open(path))["rollout"] == "r1"
    assert [call[0] for call in fake["calls"]] == [["rpm-ostree", "status", "--json"]]
    # The lease was read and written on the host, and the deployments read: no Python there. The reads were one
    # host command, before the lease was written (over what was read with them).
    assert [files[0] for files in fake["files"]] == [path, path]
    assert len(fake["sent"]) == 2 and len(fake["batches"]) == 1
    replace = "p=$1 want=$2 lock=$3 mode=$4"
    assert replace in _host.REPLACE_SCRIPT and replace not in fake["sent"][0] and replace in fake["sent"][1]
    assert result["deployments"]["backend"] == "rpm-ostree"
    assert result["deployments"]["booted"]["image"]["digest"] == "sha256:" + "a" * 64
    assert _run(_acquire(path))["deployments"] is None


def test_a_refused_lease_still_returns_the_deployments_and_the_holder(fake, path):
    _run(_acquire(path))
    fake["results"] = [(0, _status("sha256:" + "b" * 64), "")]
    result = _run(_acquire(path, rollout="r2", started_at=2000.0, deployments="rpm-ostree"), failed=True)
    assert result["acquired"] is False and result["holder"]["rollout"] == "r1"
    assert result["msg"].startswith("The host is leased by rollout r1")
    assert result["deployments"]["booted"]["image"]["digest"] == "sha256:" + "b" * 64


def test_a_failed_read_fails_the_task_and_keeps_the_lease_result(fake, path):
    fake["results"] = [(1, "", "error: cannot connect to the system bus")]
    result = _run(_acquire(path, deployments="rpm-ostree"), failed=True)
    assert result["acquired"] is True and result["deployments"] is None
    assert "cannot connect to the system bus" in result["msg"]
    assert json.load(open(path))["rollout"] == "r1"


def test_read_returns_the_lease_and_the_deployments_and_writes_nothing(fake, path, tmp_path):
    """state=read: the plan's one contact when the run takes no lease (playbooks/plan.yml)."""
    fake["results"] = [(0, _status("sha256:" + "c" * 64), "")]
    result = _run(dict(path=path, state="read", deployments="rpm-ostree"))
    assert result["changed"] is False and result["acquired"] is False and result["lease"] is None
    assert result["deployments"]["booted"]["image"]["digest"] == "sha256:" + "c" * 64
    # One host command for both reads, and no write: the directory of the lease is not even made.
    assert len(fake["batches"]) == 1 and len(fake["sent"]) == 1
    assert list(tmp_path.iterdir()) == []
    taken = _run(_acquire(path, phase="rebooting"))["lease"]
    fake["results"] = [(0, _status("sha256:" + "c" * 64), "")]
    result = _run(dict(path=path, state="read", deployments="rpm-ostree"))
    assert result["lease"] == taken and result["acquired"] is False and result["holder"] is None
    assert json.load(open(path)) == taken


def test_read_of_a_lease_file_that_does_not_load_fails_with_the_cause(fake, path, tmp_path):
    (tmp_path / "fleetos").mkdir()
    (tmp_path / "fleetos" / "rollout-lease.json").write_text("{")
    fake["results"] = [(0, _status("sha256:" + "c" * 64), "")]
    result = _run(dict(path=path, state="read", deployments="rpm-ostree"), failed=True)
    assert result["msg"].startswith("The lease file %s is not JSON" % path)
    assert result["deployments"] is None


REG = "198.51.100.1:5000/fleetos/os"
TARGET = "sha256:" + "a" * 64
# The plan of the fleet as the role os_plan holds it (rollout_plan_fleet), and the image it resolved.
FLEET = {"hosts": {"node01": {"error": None, "assignment": None, "plan": {"action": None}, "inputs": {
    "pool": "a", "fallback_image": REG + "@" + TARGET, "fallback_transport": None, "pool_paused": False, "labels": {},
    "update_agents": None}}}}
RESOLVED = {"results": [{"item": REG + "@" + TARGET, "digest": TARGET, "index": False, "image": REG + "@" + TARGET,
                         "manifests": {}}]}
RELEASE = {"plans": "__os_plan_fleet", "resolutions": RESOLVED}


def _booted(digest):
    return json.dumps({"deployments": [{"booted": True, "checksum": "d" * 64,
                                        "container-image-reference": "ostree-unverified-registry:%s@%s" % (REG, digest),
                                        "container-image-reference-digest": digest, "osname": "default"}],
                       "transaction": None})


def _release_unchanged(path, fake, booted, check_mode=False):
    fake["results"] = [(0, _booted(booted), "")]
    return _run(_acquire(path, deployments="rpm-ostree", release_unchanged=RELEASE), check_mode=check_mode,
                task_vars={"inventory_hostname": "node01", "__os_plan_fleet": FLEET})


def test_a_host_the_plan_leaves_unchanged_is_released_in_the_same_contact(fake, path):
    result = _release_unchanged(path, fake, TARGET)
    assert result["acquired"] and result["released"] and result["lease"]["released"]
    assert json.load(open(path))["released"] is True
    # One read of the deployments, no other host command: the lease file was read and replaced twice.
    assert [call[0] for call in fake["calls"]] == [["rpm-ostree", "status", "--json"]]
    assert [files[0] for files in fake["files"]] == [path, path, path]
    # Three host commands: the reads, the lease written, then released (over what was written: no read again).
    assert len(fake["sent"]) == 3


def test_a_host_the_plan_changes_keeps_its_lease(fake, path):
    result = _release_unchanged(path, fake, "sha256:" + "b" * 64)
    assert result["acquired"] and "released" not in result
    assert json.load(open(path))["released"] is False


def test_release_unchanged_in_check_mode_writes_nothing(fake, path, tmp_path):
    result = _release_unchanged(path, fake, TARGET, check_mode=True)
    assert result["released"] and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args, task_vars, message", [
    (dict(release_unchanged=RELEASE), {"__os_plan_fleet": FLEET},
     "release_unchanged needs state=acquired and deployments: the host's plan is made from the deployments read"
     " under the lease."),
    (dict(deployments="rpm-ostree", release_unchanged=RELEASE), {},
     "release_unchanged.plans names no plan of the fleet among the host's variables: __os_plan_fleet is not a"
     " record of fleetos.layering.rollout_plan_fleet."),
])
def test_release_unchanged_without_its_inputs_fails_before_anything_is_written(
        fake, path, tmp_path, args, task_vars, message):
    result = _run(_acquire(path, **args), failed=True, task_vars=dict(task_vars, inventory_hostname="node01"))
    assert result["msg"] == message and result["acquired"] is False
    assert list(tmp_path.iterdir()) == []
