"""The stand-in's `rpm-ostree status --json` against real rpm-ostree samples.

For each kind of deployment (container image, ostree refspec, custom origin, staged),
every key that all real samples of that kind have must be in the stand-in's output
with the same JSON type, and the stand-in must emit no key that real rpm-ostree never
emits. The samples are the shared reference fixtures (not part of this repository).
"""

import json
import os
from pathlib import Path

import pytest

# Keys the stand-in may emit although no sample in the reference set shows them;
# real rpm-ostree emits them (custom origins, initramfs arguments).
EXTRA_ALLOWED = {"custom-origin", "initramfs-args"}


def shared_dir():
    env = os.environ.get("FLEETOS_SHARED")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[3] / "shared"


def load_samples():
    fixtures = shared_dir() / "reference" / "fixtures"
    files = sorted(fixtures.glob("rpm-ostree-status__*.json")) if fixtures.is_dir() else []
    if not files:
        pytest.skip("real rpm-ostree samples not found under %s (set FLEETOS_SHARED)" % fixtures)
    return {f.name: json.loads(f.read_text()) for f in files}


@pytest.fixture(scope="module")
def samples():
    return load_samples()


def jtype(value):
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "dict"
    return "null"


def kind_of(dep):
    if "container-image-reference" in dep:
        return "container"
    if "custom-origin" in dep:
        return "custom"
    return "refspec"


def real_deployments(samples, predicate):
    return [d for doc in samples.values() for d in doc["deployments"] if predicate(d)]


def required_keys(deps):
    keys = set(deps[0])
    for dep in deps[1:]:
        keys &= set(dep)
    return keys


def known_types(samples):
    types = {}
    for doc in samples.values():
        for dep in doc["deployments"]:
            for key, value in dep.items():
                types.setdefault(key, set()).add(jtype(value))
    return types


def check_conforms(ours, reals, samples, label):
    assert reals, "no real sample of kind %s" % label
    types = known_types(samples)
    for key in sorted(required_keys(reals)):
        assert key in ours, "%s: key %r missing (every real %s deployment has it)" % (label, key, label)
        real_types = {jtype(d[key]) for d in reals}
        assert jtype(ours[key]) in real_types, "%s: %r is %s, real: %s" % (
            label, key, jtype(ours[key]), real_types)
    for key, value in ours.items():
        if key in EXTRA_ALLOWED:
            continue
        assert key in types, "%s: key %r never appears in real rpm-ostree output" % (label, key)
        assert jtype(value) in types[key], "%s: %r is %s, real: %s" % (
            label, key, jtype(value), types[key])


# ---------------------------------------------------------------------------
# Pure checks of the reference data the conformance rests on.


def test_samples_agree_on_top_level_keys(samples):
    common = set.intersection(*(set(doc) for doc in samples.values()))
    assert {"deployments", "transaction", "cached-update"} <= common


# ---------------------------------------------------------------------------
# Against the lab.


@pytest.fixture(scope="module")
def node(lab):
    return "node04"  # lab tests share the fleet: the stand-in tests own node04


def ro(lab, node, *args):
    return lab.exec(node, ["rpm-ostree"] + list(args), check=False)


@pytest.fixture
def clean(lab, node):
    ro(lab, node, "cleanup", "-p")
    doc = lab.rpm_ostree_status(node)
    yield [d for d in doc["deployments"] if d["booted"]][0]
    ro(lab, node, "cleanup", "-p")
    lab.exec(node, ["rm", "-f", "/run/ostree/staged-deployment-locked"])


def test_top_level_keys(lab, node, samples):
    doc = lab.rpm_ostree_status(node)
    common = set.intersection(*(set(d) for d in samples.values()))
    every = set.union(*(set(d) for d in samples.values()))
    assert common <= set(doc)
    assert set(doc) <= every
    assert doc["transaction"] is None
    assert isinstance(doc["deployments"], list)


def test_container_deployment_conforms(lab, node, samples, clean):
    ref = "ostree-unverified-registry:%s/fleetos/lab-os@%s" % (lab.registry, lab.base_digest)
    proc = ro(lab, node, "rebase", ref)
    assert proc.returncode in (0, 77), proc
    doc = lab.rpm_ostree_status(node)
    ours = [d for d in doc["deployments"] if d.get("container-image-reference") == ref]
    assert ours, doc
    reals = real_deployments(samples, lambda d: kind_of(d) == "container")
    check_conforms(ours[0], reals, samples, "container")
    assert ours[0]["container-image-reference-digest"] == lab.base_digest


def test_staged_deployment_conforms(lab, node, samples, clean):
    ref = "ostree-unverified-registry:%s/fleetos/lab-os@%s" % (lab.registry, lab.base_digest)
    if clean.get("container-image-reference") == ref:
        # Already booted there: stage the same commit under a custom origin instead.
        args = ["rebase", ":" + clean["checksum"], "--custom-origin-url", "https://x.example",
                "--custom-origin-description", "conformance", "--lock-finalization"]
    else:
        args = ["rebase", "--lock-finalization", ref]
    proc = ro(lab, node, *args)
    assert proc.returncode == 0, proc
    doc = lab.rpm_ostree_status(node)
    assert doc["deployments"][0]["staged"] is True
    ours = doc["deployments"][0]
    reals = real_deployments(samples, lambda d: d.get("staged") is True)
    check_conforms(ours, reals, samples, "staged")
    assert ours["finalization-locked"] is True
    assert all(d["staged"] is False for d in doc["deployments"][1:])


def test_refspec_deployment_conforms(lab, node, samples, clean):
    csum = clean["checksum"]
    branch = "fleetos/standin/conformance"
    lab.exec(node, ["ostree", "--repo=/sysroot/ostree/repo", "refs", "--delete", branch], check=False)
    lab.exec(node, ["ostree", "--repo=/sysroot/ostree/repo", "refs", "--create=" + branch, csum])
    try:
        proc = ro(lab, node, "rebase", branch)
        assert proc.returncode == 0, proc
        doc = lab.rpm_ostree_status(node)
        ours = doc["deployments"][0]
        assert ours["origin"] == branch and ours["staged"] is True
        reals = real_deployments(samples, lambda d: kind_of(d) == "refspec")
        check_conforms(ours, reals, samples, "refspec")
        assert "container-image-reference" not in ours
    finally:
        lab.exec(node, ["ostree", "--repo=/sysroot/ostree/repo", "refs", "--delete", branch], check=False)


def test_custom_origin_deployment_conforms(lab, node, samples, clean):
    csum = clean["checksum"]
    proc = ro(lab, node, "rebase", ":" + csum, "--custom-origin-url", "https://fleet.example/a",
              "--custom-origin-description", "fleetos conformance")
    assert proc.returncode == 0, proc
    ours = lab.rpm_ostree_status(node)["deployments"][0]
    assert ours["custom-origin"] == ["https://fleet.example/a", "fleetos conformance"]
    # A custom origin is a checksum-only ostree refspec: it has a refspec deployment's keys.
    reals = real_deployments(samples, lambda d: kind_of(d) == "refspec")
    check_conforms(ours, reals, samples, "custom")
    assert ours["origin"] == csum


def test_booted_deployment_conforms(lab, node, samples, clean):
    ours = clean
    kind = kind_of(ours)
    reals = real_deployments(samples, lambda d: kind_of(d) == (kind if kind != "custom" else "refspec"))
    check_conforms(ours, reals, samples, "booted " + kind)
    assert ours["staged"] is False
