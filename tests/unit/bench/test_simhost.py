# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The simulated host's rpm-ostree and skopeo (bench/simhost, bench/simfleet.py), without a host.

The same conformance checks the lab's stand-in passes (tests/lab/test_standin_conformance.py, loaded by path:
its check functions, not a copy) on the simulated host's `rpm-ostree status --json`, against the real samples
of the shared reference fixtures (skipped when absent); and the CLI behaviour the collection relies on (exit 77
unchanged, staging, finalization, rollback, cleanup, the reboot request, the next boot). The tools run as
subprocesses with SIMFLEET_ROOT and SIMFLEET_REGISTRY pointing into a temporary directory: no root, no ssh, no
namespace, no sleep (no link rate is set, so a stage takes no time).
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
SIMHOST = REPO / "bench" / "simhost"
CONFORMANCE_PY = REPO / "tests" / "lab" / "test_standin_conformance.py"
if not (SIMHOST / "bin" / "rpm-ostree").is_file() or not (REPO / "bench" / "simfleet.py").is_file():
    pytest.skip("bench/simhost is not in this tree", allow_module_level=True)


def _load(name, path):
    loader = importlib.machinery.SourceFileLoader(name, str(path))
    spec = importlib.util.spec_from_loader(name, loader)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


sys.path.insert(0, str(REPO / "bench"))
simfleet = _load("bench_simfleet", REPO / "bench" / "simfleet.py")
conformance = _load("lab_standin_conformance", CONFORMANCE_PY)


def shared_fixtures():
    env = os.environ.get("FLEETOS_SHARED")
    base = Path(env) if env else REPO.parent / "shared"
    return base / "reference" / "fixtures"


@pytest.fixture(scope="module")
def samples():
    fixtures = shared_fixtures()
    files = sorted(fixtures.glob("rpm-ostree-status__*.json")) if fixtures.is_dir() else []
    if not files:
        pytest.skip("real rpm-ostree samples not found under %s (set FLEETOS_SHARED)" % fixtures)
    return {f.name: json.loads(f.read_text()) for f in files}


class Host:
    """A simulated host's root in a temporary directory, booted on v1, with v2 in the registry."""

    def __init__(self, tmp):
        self.root = tmp / "root"
        self.registry = tmp / "registry"
        base = [("sha256:" + "b" * 64, 1000)]
        self.v1 = simfleet.image(self.registry, "1.0", base)
        self.v2 = simfleet.image(self.registry, "2.0", base + [simfleet.layer("v2", 1)])
        simfleet.initial_state(self.root / "sysroot" / "simfleet", self.v1)
        (self.root / "run" / "simfleet").mkdir(parents=True)
        (self.root / "run" / "simfleet" / "name").write_text("sim0001\n")
        self.env = dict(os.environ, SIMFLEET_ROOT=str(self.root), SIMFLEET_REGISTRY=str(self.registry), LC_ALL="C")

    def ref(self, record):
        return "ostree-unverified-registry:%s@%s" % (simfleet.IMAGE_NAME, record["digest"])

    def run(self, tool, *args):
        path = SIMHOST / "bin" / tool if tool == "rpm-ostree" else SIMHOST / tool
        return subprocess.run([sys.executable, str(path)] + list(args), env=self.env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, check=False)

    def status(self):
        proc = self.run("rpm-ostree", "status", "--json")
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)

    def reboots(self):
        path = self.root / "run" / "simfleet" / "ctl" / "reboot-requested"
        return path.read_text().splitlines() if path.exists() else []

    def boot(self):
        return simfleet.finalize_at_boot(self.root / "sysroot" / "simfleet" / "state.json")


@pytest.fixture
def host(tmp_path):
    return Host(tmp_path)


# --------------------------------------------------------------------------
# the lab's conformance checks, on the simulated host


def test_top_level_keys(host, samples):
    doc = host.status()
    common = set.intersection(*(set(d) for d in samples.values()))
    every = set.union(*(set(d) for d in samples.values()))
    assert common <= set(doc)
    assert set(doc) <= every
    assert doc["transaction"] is None
    assert isinstance(doc["deployments"], list)


def test_booted_deployment_conforms(host, samples):
    (ours,) = host.status()["deployments"]
    assert ours["booted"] is True and ours["staged"] is False
    reals = conformance.real_deployments(samples, lambda d: conformance.kind_of(d) == "container")
    conformance.check_conforms(ours, reals, samples, "booted container")
    assert ours["container-image-reference-digest"] == host.v1["digest"]
    assert ours["checksum"] == host.v1["commit"]


def test_staged_deployment_conforms(host, samples):
    proc = host.run("rpm-ostree", "rebase", "--lock-finalization", host.ref(host.v2))
    assert proc.returncode == 0, proc.stderr
    doc = host.status()
    staged = doc["deployments"][0]
    reals = conformance.real_deployments(samples, lambda d: d.get("staged") is True)
    conformance.check_conforms(staged, reals, samples, "staged")
    assert staged["finalization-locked"] is True
    assert staged["container-image-reference-digest"] == host.v2["digest"]
    assert [d["staged"] for d in doc["deployments"]] == [True, False]
    reals = conformance.real_deployments(samples, lambda d: conformance.kind_of(d) == "container")
    conformance.check_conforms(doc["deployments"][1], reals, samples, "container")


def test_custom_origin_deployment_conforms(host, samples):
    csum = host.v1["commit"]
    proc = host.run("rpm-ostree", "rebase", ":" + csum, "--custom-origin-url", "https://fleet.example/a",
                    "--custom-origin-description", "fleetos conformance")
    assert proc.returncode == 0, proc.stderr
    ours = host.status()["deployments"][0]
    assert ours["custom-origin"] == ["https://fleet.example/a", "fleetos conformance"]
    reals = conformance.real_deployments(samples, lambda d: conformance.kind_of(d) == "refspec")
    conformance.check_conforms(ours, reals, samples, "custom")
    assert ours["origin"] == csum and "container-image-reference" not in ours


# --------------------------------------------------------------------------
# the behaviour the collection relies on


def test_rebase_stages_once_then_exit_77(host):
    first = host.run("rpm-ostree", "rebase", "--unchanged-exit-77", "--", host.ref(host.v2))
    assert first.returncode == 0, first.stderr
    assert b"Staging deployment...done" in first.stdout
    again = host.run("rpm-ostree", "rebase", "--unchanged-exit-77", "--", host.ref(host.v2))
    assert again.returncode == 77 and b"No change." in again.stdout
    assert host.reboots() == []


def test_rebase_to_the_booted_image_is_unchanged(host):
    proc = host.run("rpm-ostree", "rebase", "--unchanged-exit-77", host.ref(host.v1))
    assert proc.returncode == 77


def test_rebase_to_an_unknown_image_fails(host):
    proc = host.run("rpm-ostree", "rebase", "ostree-unverified-registry:%s@sha256:%s" % (simfleet.IMAGE_NAME, "0" * 64))
    assert proc.returncode == 1
    assert proc.stderr.startswith(b"error: ") and b"manifest unknown" in proc.stderr


def test_finalize_reboots_and_the_next_boot_runs_the_staged_image(host):
    assert host.run("rpm-ostree", "rebase", "--lock-finalization", host.ref(host.v2)).returncode == 0
    wrong = host.run("rpm-ostree", "finalize-deployment", "0" * 64)
    assert wrong.returncode == 1 and b"Expected staged base checksum" in wrong.stderr
    proc = host.run("rpm-ostree", "finalize-deployment", "--allow-unlocked", host.v2["commit"])
    assert proc.returncode == 0, proc.stderr
    assert host.reboots() == ["sim0001 finalize-deployment"]
    host.boot()
    booted, rollback = host.status()["deployments"]
    assert (booted["booted"], booted["container-image-reference-digest"]) == (True, host.v2["digest"])
    assert (rollback["booted"], rollback["container-image-reference-digest"]) == (False, host.v1["digest"])


def test_a_locked_staged_deployment_is_dropped_at_boot(host):
    assert host.run("rpm-ostree", "rebase", "--lock-finalization", host.ref(host.v2)).returncode == 0
    host.boot()
    (only,) = host.status()["deployments"]
    assert only["booted"] and only["container-image-reference-digest"] == host.v1["digest"]


def test_rollback_reboots_into_the_previous_deployment(host):
    assert host.run("rpm-ostree", "rebase", host.ref(host.v2)).returncode == 0
    host.boot()
    proc = host.run("rpm-ostree", "rollback", "--reboot")
    assert proc.returncode == 0, proc.stderr
    assert host.reboots() == ["sim0001 rollback"]
    host.boot()
    first = host.status()["deployments"][0]
    assert first["booted"] and first["container-image-reference-digest"] == host.v1["digest"]


def test_rollback_without_a_previous_deployment_fails(host):
    proc = host.run("rpm-ostree", "rollback")
    assert proc.returncode == 1 and b"No rollback deployment found" in proc.stderr


def test_cleanup_pending_drops_the_staged_deployment(host):
    assert host.run("rpm-ostree", "rebase", host.ref(host.v2)).returncode == 0
    assert host.run("rpm-ostree", "cleanup", "-p").returncode == 0
    assert [d["staged"] for d in host.status()["deployments"]] == [False]
    assert host.run("rpm-ostree", "cleanup").returncode == 1


def test_version_says_it_is_simulated(host):
    proc = host.run("rpm-ostree", "--version")
    assert b"simulated host" in proc.stdout


def test_skopeo_raw_manifest_has_the_digest(host):
    proc = host.run("skopeo", "inspect", "--raw", "docker://%s@%s" % (simfleet.IMAGE_NAME, host.v2["digest"]))
    assert proc.returncode == 0, proc.stderr
    assert "sha256:" + hashlib.sha256(proc.stdout).hexdigest() == host.v2["digest"]
    config = json.loads(host.run("skopeo", "inspect", "--config", "docker://%s:2.0" % simfleet.IMAGE_NAME).stdout)
    assert config["config"]["Labels"]["ostree.commit"] == host.v2["commit"]


def test_stage_time_is_the_new_layers_at_the_link_rate(host, tmp_path):
    tool = _load("sim_rpm_ostree", SIMHOST / "bin" / "rpm-ostree")
    tool.HOST = str(tmp_path / "host.json")
    (tmp_path / "host.json").write_text(json.dumps({"rate_bytes_per_s": 10e6}))
    state = {"layers": ["sha256:" + "b" * 64]}
    record = {"layers": [{"digest": "sha256:" + "b" * 64, "size": 800e6}, {"digest": "sha256:new", "size": 50e6}]}
    assert tool.pull_seconds(state, record) == pytest.approx(5.0)
    assert tool.pull_seconds(state, record) == 0.0          # the layer is cached now


@pytest.mark.parametrize("rate, expected", [("80mbit", 10e6), ("1gbit", 125e6), ("off", 0.0), ("8000", 1000.0)])
def test_rate_bytes(rate, expected):
    assert simfleet.rate_bytes(rate) == expected


def test_addresses_stay_on_loopback():
    addresses = {simfleet.host_address(i) for i in range(1, 1001)}
    assert len(addresses) == 1000
    assert all(a.startswith("127.77.") for a in addresses)
    assert simfleet.host_address(251) == "127.77.1.1"
