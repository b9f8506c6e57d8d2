# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The host planner: one table of host states and targets, one expected action each."""

from __future__ import annotations

import pytest

from ansible_collections.fleetos.layering.plugins.module_utils._errors import InvalidInputError
from ansible_collections.fleetos.layering.plugins.plugin_utils.rollout import _plan
from ansible_collections.fleetos.layering.plugins.plugin_utils.rollout._plan import (
    activation,
    host_plan,
    images_to_inspect,
    rollback_host_plan,
)

REG = "198.51.100.1:5000/fleetos/os"
INDEX = "sha256:" + "1" * 64
AMD64 = "sha256:" + "a" * 64
ARM64 = "sha256:" + "b" * 64
OTHER = "sha256:" + "c" * 64
COMMIT = "d" * 64
OLD_COMMIT = "e" * 64

RESOLVED_INDEX = {"results": [{"item": REG + ":stable", "digest": INDEX, "index": True, "image": REG + "@" + INDEX,
                               "manifests": {"amd64": AMD64, "arm64": ARM64}}]}
RESOLVED_PLAIN = {"results": [{"item": REG + "@" + AMD64, "digest": AMD64, "index": False,
                               "image": REG + "@" + AMD64, "manifests": {}}]}


def deployment(reference=None, digest=None, manifest_digest=None, checksum=OLD_COMMIT, origin=None):
    image = None
    if reference is not None:
        image = {"reference": reference, "digest": digest, "manifest_digest": manifest_digest}
    return {"checksum": checksum, "image": image, "origin": origin}


def status(booted, staged=None, architecture="amd64"):
    return {"booted": booted, "staged": staged, "architecture": architecture}


def assigned(image, transport=None, paused=False):
    return {"source": "nodeName", "name": "mi", "image": image, "transport": transport, "paused": paused,
            "reason": "MachineImage 'mi' names node01", "defined_in": "machine_images/mi.yaml document 1"}


FOLLOWING_TAG = deployment("ostree-unverified-registry:%s:stable" % REG, AMD64, AMD64)
PINNED_INDEX = deployment("ostree-unverified-registry:%s@%s" % (REG, INDEX), INDEX, AMD64)
ON_OTHER = deployment("ostree-unverified-registry:%s@%s" % (REG, OTHER), OTHER, OTHER)

CASES = [
    # id, assignment, resolutions, status, expected action, expected reason fragment
    ("tag-following host on the multi-arch target", assigned(REG + ":stable"), RESOLVED_INDEX,
     status(FOLLOWING_TAG), "unchanged", "booted on aaaaaaaaaaaa"),
    ("host pinned to the index digest", assigned(REG + ":stable"), RESOLVED_INDEX,
     status(PINNED_INDEX), "unchanged", "booted on"),
    ("arm64 host following the tag on amd64 content", assigned(REG + ":stable"), RESOLVED_INDEX,
     status(FOLLOWING_TAG, architecture="arm64"), "stage", "the target is 111111111111"),
    ("host on other content", assigned(REG + ":stable"), RESOLVED_INDEX, status(ON_OTHER), "stage",
     "booted on cccccccccccc, the target is 111111111111"),
    ("staged target", assigned(REG + ":stable"), RESOLVED_INDEX,
     status(ON_OTHER, deployment("ostree-unverified-registry:%s@%s" % (REG, INDEX), INDEX, AMD64)),
     "activate", "staged on 111111111111"),
    ("other deployment staged over the target", assigned(REG + "@" + AMD64), RESOLVED_PLAIN,
     status(deployment("ostree-unverified-registry:%s@%s" % (REG, AMD64), AMD64, AMD64), ON_OTHER),
     "stage", "a staged deployment (cccccccccccc) is not aaaaaaaaaaaa"),
    ("same content, weaker transport booted", assigned(REG + "@" + AMD64, "ostree-remote-image:fleet"),
     RESOLVED_PLAIN, status(deployment("ostree-unverified-registry:%s@%s" % (REG, AMD64), AMD64, AMD64)),
     "stage", "booted under ostree-unverified-registry, the target asks ostree-remote-image:fleet"),
    ("same content, same remote transport", assigned(REG + "@" + AMD64, "ostree-remote-image:fleet"),
     RESOLVED_PLAIN, status(deployment("ostree-remote-image:fleet:docker://%s@%s" % (REG, AMD64), AMD64, AMD64)),
     "unchanged", "booted on aaaaaaaaaaaa"),
    ("paused MachineImage", assigned(REG + "@" + AMD64, paused=True), RESOLVED_PLAIN, status(ON_OTHER),
     "skipped", "MachineImage is paused"),
    ("resolution failed", assigned(REG + ":stable"),
     {"results": [{"item": REG + ":stable", "failed": True, "msg": "Failed to resolve image: unauthorized"}]},
     status(ON_OTHER), "error", "resolving %s:stable failed: Failed to resolve image: unauthorized" % REG),
    ("tag never resolved", assigned(REG + ":stable"), {"results": []}, status(ON_OTHER), "error",
     "was not resolved to a digest"),
    ("index without the host's architecture", assigned(REG + ":stable"), RESOLVED_INDEX,
     status(ON_OTHER, architecture="s390x"), "error", "without an entry for the host's architecture s390x"),
    ("invalid MachineImage reference", assigned("198.51.100.1:5000//os@" + AMD64), RESOLVED_PLAIN,
     status(ON_OTHER), "error", "spec.image of MachineImage 'mi' is invalid"),
]


@pytest.mark.parametrize("assignment, resolutions, host_status, action, reason",
                         [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_host_plan_action(assignment, resolutions, host_status, action, reason):
    plan = host_plan(assignment, "node01", pool="workers", resolutions=resolutions, status=host_status)
    assert (plan["action"], plan["host"], plan["pool"]) == (action, "node01", "workers")
    assert reason in plan["reason"]


def test_a_remote_transport_stays_exactly_as_asked():
    plan = host_plan(assigned(REG + "@" + AMD64, "ostree-remote-image:fleet"), "node01",
                     resolutions=RESOLVED_PLAIN, status=status(ON_OTHER))
    assert (plan["transport"], plan["transport_kind"], plan["ostree_remote"]) == (
        "ostree-remote-image:fleet", "remote", "fleet")
    assert plan["reference"] == "ostree-remote-image:fleet:docker://%s@%s" % (REG, AMD64)


def test_a_signed_transport_stays_exactly_as_asked():
    plan = host_plan(assigned(REG + "@" + AMD64, "ostree-image-signed"), "node01",
                     resolutions=RESOLVED_PLAIN, status=status(ON_OTHER))
    assert (plan["transport"], plan["transport_kind"], plan["ostree_remote"]) == ("ostree-image-signed", "signed", None)
    assert plan["reference"] == "ostree-image-signed:docker://%s@%s" % (REG, AMD64)


def test_a_tag_is_pinned_to_the_index_digest_and_the_platform_entry_is_kept():
    plan = host_plan(assigned(REG + ":stable"), "node01", resolutions=RESOLVED_INDEX, status=status(ON_OTHER))
    assert (plan["image"], plan["digest"], plan["platform_digest"], plan["index"]) == (
        REG + "@" + INDEX, INDEX, AMD64, True)
    assert plan["old_digest"] == OTHER


def test_the_fallback_image_applies_without_an_assignment_and_is_named_in_errors():
    plan = host_plan({"source": "pool", "image": None, "reason": "no MachineImage"}, "node02",
                     fallback_image=REG + "@" + AMD64, resolutions=RESOLVED_PLAIN, status=status(ON_OTHER))
    assert (plan["source"], plan["action"], plan["transport"]) == (
        "fleetos_rollout_image", "stage", "ostree-unverified-registry")
    bad = host_plan(None, "node02", fallback_image="docker.io/UPPER/x:1", resolutions={}, status=status(ON_OTHER))
    assert bad["action"] == "error"
    assert bad["reason"].startswith("fleetos_rollout_image is invalid: image reference 'docker.io/UPPER/x:1'")


def test_no_image_and_a_paused_pool_are_skipped():
    assert host_plan({"source": "pool", "image": None, "reason": "nothing selects node03"}, "node03",
                     resolutions={}, status=None)["reason"] == "nothing selects node03"
    plan = host_plan(assigned(REG + "@" + AMD64), "node03", pool="db", pool_paused=True, resolutions={})
    assert (plan["action"], plan["reason"]) == ("skipped", "pool db is paused (fleetos_pool_paused)")
    # A paused host still shows the image it would get.
    assert (plan["image"], plan["digest"], plan["paused"]) == (REG + "@" + AMD64, AMD64, True)


def test_a_pinned_image_the_registry_cannot_serve_now_is_still_planned():
    down = {"results": [{"item": REG + "@" + AMD64, "failed": True, "msg": "the registry is unreachable"}]}
    plan = host_plan(assigned(REG + "@" + AMD64), "node01", resolutions=down, status=status(ON_OTHER))
    assert (plan["action"], plan["digest"], plan["platform_digest"]) == ("stage", AMD64, AMD64)


def test_without_resolutions_nothing_is_decided():
    plan = host_plan(assigned(REG + ":stable", "ostree-image-signed"), "node01")
    assert (plan["action"], plan["wanted"], plan["digest"], plan["status_read"]) == (
        None, REG + ":stable", None, False)


def test_a_commit_match_pins_the_origin_without_a_reboot():
    disk = deployment(None, checksum=COMMIT, origin="fedora:fedora/x86_64/coreos/stable")
    inspected = {REG + "@" + AMD64: {"labels": {"ostree.commit": COMMIT, "ostree.bootable": "true"}}}
    plan = host_plan(assigned(REG + ":stable"), "node01", resolutions=RESOLVED_INDEX, status=status(disk),
                     inspections=inspected)
    assert (plan["action"], plan["commit"]) == ("pin", COMMIT)
    assert plan["origin_set"] == {"origin.container-image-reference": "ostree-unverified-registry:%s@%s" % (REG, INDEX)}
    assert "origin.refspec" in plan["origin_remove"]
    other = host_plan(assigned(REG + ":stable"), "node01", resolutions=RESOLVED_INDEX,
                      status=status(deployment(None, checksum=OLD_COMMIT, origin="x")), inspections=inspected)
    assert other["action"] == "stage"


BASE_DIFF_IDS = ["sha256:" + "1" * 64, "sha256:" + "2" * 64]
DERIVED_DIFF_IDS = BASE_DIFF_IDS + ["sha256:" + "3" * 64]


@pytest.mark.parametrize(("booted", "diff_ids", "action", "commit"), [
    (COMMIT, BASE_DIFF_IDS, "pin", COMMIT),
    (COMMIT, DERIVED_DIFF_IDS, "stage", None),
    (COMMIT, None, "stage", None),
    (OLD_COMMIT, DERIVED_DIFF_IDS, "stage", None),
], ids=["base image: pinned", "derived image: staged", "layers not read: staged", "derived image, booted elsewhere"])
def test_a_derived_image_is_staged_never_pinned_on_its_inherited_commit_label(booted, diff_ids, action, commit):
    """Layers after ostree.final-diffid make the host import a merge commit of its own: the label is not its commit."""
    found = {"ostree.bootable": "true", "ostree.commit": COMMIT, "version": "1.0",
             "ostree.final-diffid": BASE_DIFF_IDS[-1]}
    inspected = {REG + "@" + AMD64: {"labels": found, "diff_ids": diff_ids, "digest": AMD64}}
    disk = deployment(None, checksum=booted, origin="fedora:fedora/x86_64/coreos/stable")
    plan = host_plan(assigned(REG + "@" + AMD64), "node01", resolutions=RESOLVED_PLAIN, status=status(disk),
                     inspections=inspected)
    assert (plan["action"], plan["commit"]) == (action, commit)
    if action == "stage":
        assert plan["origin_set"] == {} and plan["up_to_date"] is False


def test_only_hosts_to_stage_with_a_booted_deployment_are_inspected():
    stage = host_plan(assigned(REG + ":stable"), "node01", resolutions=RESOLVED_INDEX, status=status(ON_OTHER))
    same = host_plan(assigned(REG + ":stable"), "node02", resolutions=RESOLVED_INDEX, status=status(FOLLOWING_TAG))
    assert images_to_inspect([stage, same, None]) == [REG + "@" + AMD64]


def test_an_earlier_failure_is_recorded_as_an_error():
    plan = host_plan(None, "node04", pool="db", error="host node04 matches 2 MachineImages\n at the selector level")
    assert (plan["source"], plan["action"], plan["reason"]) == (
        "error", "error", "host node04 matches 2 MachineImages at the selector level")


FINALIZE = {"mode": "finalize", "order": 1}


@pytest.mark.parametrize("action, stage_result, expected", [
    ("activate", None, dict(FINALIZE, activate=True, staged_checksum="planned")),
    ("stage", {"status": "staged", "reboot_required": True, "staged_checksum": "fresh"},
     dict(FINALIZE, activate=True, staged_checksum="fresh")),
    ("stage", {"status": "staged", "reboot_required": "False", "staged_checksum": None},
     dict(FINALIZE, activate=False, staged_checksum=None)),
    # bootc's download-only deployment: no ordinary reboot applies it, the activation does.
    ("stage", {"status": "staged", "reboot_required": False, "staged_checksum": "download-only"},
     dict(FINALIZE, activate=True, staged_checksum="download-only")),
    ("stage", {"status": "failed", "reboot_required": False}, dict(FINALIZE, activate=False, staged_checksum=None)),
    ("unchanged", None, dict(FINALIZE, activate=False, staged_checksum=None)),
    ("pin", None, dict(FINALIZE, activate=False, staged_checksum=None)),
    ("verify", None, {"activate": True, "mode": "verify", "order": 0, "staged_checksum": None}),
])
def test_activation_after_the_stage(action, stage_result, expected):
    assert activation({"action": action, "staged_checksum": "planned"}, stage_result) == expected


def test_rollback_plan():
    booted = deployment("ostree-unverified-registry:%s@%s" % (REG, AMD64), AMD64, AMD64)
    previous = deployment("ostree-unverified-registry:%s@%s" % (REG, OTHER), OTHER, OTHER)
    host = {"booted": booted, "rollback": previous}
    plan = rollback_host_plan(host, "node01", pool="blue", rollback_from=AMD64)
    assert (plan["action"], plan["digest"], plan["old_digest"], plan["pool"]) == ("activate", OTHER, AMD64, "blue")
    assert plan["image"] == "ostree-unverified-registry:%s@%s" % (REG, OTHER)
    assert rollback_host_plan(host, "node01", rollback_from=OTHER)["reason"] == "not booted on %s" % OTHER
    assert rollback_host_plan({"booted": booted, "rollback": None}, "node01")["action"] == "unchanged"
    with pytest.raises(InvalidInputError, match="fleetos_rollback_from 'latest' is not a digest"):
        rollback_host_plan(host, "node01", rollback_from="latest")


def test_a_commit_match_under_a_verified_transport_is_staged_not_pinned():
    disk = deployment(None, checksum=COMMIT, origin="fedora:fedora/x86_64/coreos/stable")
    inspected = {REG + "@" + AMD64: {"labels": {"ostree.commit": COMMIT}}}
    for transport in ("ostree-image-signed", "ostree-remote-image:fleet"):
        plan = host_plan(assigned(REG + ":stable", transport), "node01", resolutions=RESOLVED_INDEX,
                         status=status(disk), inspections=inspected)
        assert (plan["action"], plan["origin_set"]) == ("stage", {}), transport
        assert images_to_inspect([plan]) == []


def test_the_platform_entry_is_chosen_as_the_modules_choose_it():
    arm = "sha256:" + "7" * 64
    resolved = {"results": [{"item": REG + ":stable", "digest": INDEX, "index": True,
                             "manifests": {"amd64": AMD64, "arm/v7": arm}}]}
    plan = host_plan(assigned(REG + ":stable"), "node01", resolutions=resolved,
                     status=status(ON_OTHER, architecture="arm"))
    assert (plan["action"], plan["platform_digest"]) == ("stage", arm)


LOCKED = "sha256:" + "f" * 64
INPUTS = "sha256:" + "1" * 64
LOCK = {"path": "inv/layered-images.lock.yml", "error": None, "document": {"images": [{
    "name": "worker", "image": REG + "-worker@" + LOCKED, "digest": LOCKED, "inputs": INPUTS,
    "base": {"name": REG, "version": "1.0", "digest": OTHER},
    "layers": [{"name": "kubelet", "version": "1.31.5", "digest": INDEX},
               {"name": "ovs", "version": "3.4", "digest": ARM64}]}]}}
RESOLVED_LOCKED = {"results": [{"item": REG + "-worker@" + LOCKED, "digest": LOCKED, "index": False,
                                "image": REG + "-worker@" + LOCKED, "manifests": {},
                                "annotations": {"fleetos.io/inputs": INPUTS}}]}


def layered(name="worker", source="nodeName"):
    record = dict(assigned(None), layered_image=name, source=source)
    if source == "pool":
        record.update(name=None, defined_in=None, reason="the pool default fleetos_pool_layered_image applies")
    return record


@pytest.mark.parametrize("assignment, lock, host_status, action, digest, reason", [
    # The composed digest the lock pins, staged on a host booted on something else.
    (layered(), LOCK, status(ON_OTHER), "stage", LOCKED, "the target is ffffffffffff (MachineImage 'mi' names "
     "node01; LayeredImage 'worker' (base 1.0, kubelet 1.31.5, ovs 3.4) from the lock inv/layered-images.lock.yml)"),
    # A host already booted on it is unchanged; the pool default names the LayeredImage the same way.
    (layered(source="pool"), LOCK, status(deployment("ostree-unverified-registry:%s-worker@%s" % (REG, LOCKED),
                                                     LOCKED, LOCKED)), "unchanged", LOCKED, "booted on ffffffffffff"),
    # Not read: the digest is planned from the lock alone.
    (layered(), LOCK, None, None, LOCKED, "from the lock inv/layered-images.lock.yml"),
    (layered(), None, status(ON_OTHER), "error", None,
     "spec.layeredImage of MachineImage 'mi' (machine_images/mi.yaml document 1) names the LayeredImage 'worker', "
     "but no lock is given: set fleetos_rollout_lock"),
    (layered("infra", source="pool"), LOCK, status(ON_OTHER), "error", None,
     "fleetos_pool_layered_image names the LayeredImage 'infra', which the lock inv/layered-images.lock.yml does "
     "not have (it has: worker)"),
    (layered(), {"path": "x.yml", "document": None, "error": "the lock x.yml does not exist; run compose.yml to "
                                                             "write it"}, status(ON_OTHER), "error", None,
     "names the LayeredImage 'worker', but fleetos_rollout_lock cannot be used: the lock x.yml does not exist"),
])
def test_a_layered_image_is_planned_from_the_lock(assignment, lock, host_status, action, digest, reason):
    plan = host_plan(assignment, "node01", resolutions=RESOLVED_LOCKED if host_status else None,
                     status=host_status, lock=lock, fallback_image=REG + "@" + AMD64)
    assert (plan["action"], plan["digest"]) == (action, digest), plan
    assert reason in plan["reason"], plan["reason"]
    if action != "error":
        assert plan["image"] == REG + "-worker@" + LOCKED and plan["source"] == assignment["source"]
        assert plan["layered"]["summary"] == "base 1.0, kubelet 1.31.5, ovs 3.4"
        assert [(l["name"], l["version"]) for l in plan["layered"]["layers"]] == [("kubelet", "1.31.5"),
                                                                                  ("ovs", "3.4")]
        assert (plan["layered"]["base"]["version"], plan["layered"]["digest"]) == ("1.0", LOCKED)
    else:
        # Never the fallback image instead: the host asked for a LayeredImage.
        assert plan["wanted"] is None and plan["layered"] is None


@pytest.mark.parametrize("annotations, reason", [
    # Another real composition's digest in the lock (kubelet 1.31.5 where the lock says 1.31.4).
    ({"fleetos.io/inputs": "sha256:" + "2" * 64},
     "the lock inv/layered-images.lock.yml pins the LayeredImage 'worker' to %s, but that image was composed from "
     "other inputs (its fleetos.io/inputs is sha256:%s, the lock's %s): the lock does not match its image; compose it "
     "again" % (LOCKED, "2" * 64, INPUTS)),
    # An image compose.yml never made.
    ({}, "the lock inv/layered-images.lock.yml pins the LayeredImage 'worker' to %s, which carries no "
         "fleetos.io/inputs annotation: it is not what compose.yml composed; compose it again" % LOCKED),
])
def test_a_lock_whose_image_has_other_inputs_is_a_plan_error(annotations, reason):
    resolved = {"results": [dict(RESOLVED_LOCKED["results"][0], annotations=annotations)]}
    plan = host_plan(layered(), "node01", resolutions=resolved, status=status(ON_OTHER), lock=LOCK)
    assert (plan["action"], plan["reason"]) == ("error", reason)
    # A resolution that failed leaves the stage to meet the registry: no proof is asked of it.
    failed = {"results": [{"item": REG + "-worker@" + LOCKED, "failed": True, "msg": "registry down"}]}
    assert host_plan(layered(), "node01", resolutions=failed, status=status(ON_OTHER), lock=LOCK)["action"] == "stage"


def test_after_a_verified_canary_a_tag_is_planned_on_the_canarys_digest_and_another_tag_is_refused():
    pins = {REG + ":stable": INDEX}
    resolved = {"results": [dict(RESOLVED_INDEX["results"][0], item=REG + "@" + INDEX)]}
    plan = host_plan(assigned(REG + ":stable"), "node01", resolutions=resolved, status=status(ON_OTHER), pins=pins)
    assert (plan["wanted"], plan["digest"], plan["action"]) == (REG + "@" + INDEX, INDEX, "stage")
    assert plan["reason"].endswith("(MachineImage 'mi' names node01; %s:stable pinned to the digest the canary run"
                                   " verified)" % REG), plan["reason"]
    other = host_plan(assigned(REG + ":next"), "node01", resolutions=resolved, status=status(ON_OTHER), pins=pins)
    assert (other["action"], other["reason"]) == ("error", "image %s:next is a tag the canary run did not verify"
                                                  " (fleetos_last_rollout pins %s:stable): give the image by digest"
                                                  % (REG, REG))
    # A digest is planned as it is; without pins a tag is resolved as before.
    pinned = host_plan(assigned(REG + "@" + AMD64), "node01", resolutions=RESOLVED_PLAIN, status=status(ON_OTHER),
                       pins=pins)
    assert (pinned["wanted"], pinned["digest"]) == (REG + "@" + AMD64, AMD64)
    assert host_plan(assigned(REG + ":stable"), "node01", resolutions=RESOLVED_INDEX,
                     status=status(ON_OTHER))["digest"] == INDEX


ZINCATI_SUMMARY = "on, updates enabled: updates and reboots the host on its own (strategy immediate)"
ZINCATI_ON = {"zincati": {"would_update": True, "summary": ZINCATI_SUMMARY},
              "bootc": {"would_update": False, "summary": "not installed"},
              "rpm-ostree": {"would_update": False, "summary": "not installed"}}
NONE_ON = {"zincati": {"would_update": False, "summary": "on, updates disabled ([updates] enabled = false)"},
           "bootc": {"would_update": False, "summary": "not installed"},
           "rpm-ostree": {"would_update": False, "summary": "not installed"}}


@pytest.mark.parametrize("booted, agents, policy, action, disable", [
    # Fedora CoreOS as shipped: the host to stage is refused unless fleetos_update_agents says what to do.
    (ON_OTHER, ZINCATI_ON, None, "error", False),
    (ON_OTHER, ZINCATI_ON, "disable", "stage", True),
    (ON_OTHER, ZINCATI_ON, "keep", "stage", False),
    (ON_OTHER, NONE_ON, None, "stage", False),
    # An unchanged host is not refused; with disable its agent is turned off all the same.
    (PINNED_INDEX, ZINCATI_ON, None, "unchanged", False),
    (PINNED_INDEX, ZINCATI_ON, "disable", "unchanged", True),
])
def test_an_update_agent_that_would_undo_the_rollout(booted, agents, policy, action, disable):
    read = dict(status(booted), update_agents=agents)
    plan = host_plan(assigned(REG + ":stable"), "fcos-01", resolutions=RESOLVED_INDEX, status=read,
                     update_agents=policy)
    assert (plan["action"], plan["update_agents"]["disable"], plan["update_agents_policy"]) == (action, disable, policy)
    if action == "error":
        assert plan["reason"] == (
            "the update agent zincati (on, updates enabled: updates and reboots the host on its own (strategy "
            "immediate)) of fcos-01 would replace the rolled-out image on its own: set fleetos_update_agents: disable "
            "to turn it off (or keep to leave it on purpose)")
    assert plan["update_agents"]["active"] == (["zincati"] if agents is ZINCATI_ON else [])


def test_a_host_whose_agents_were_not_read_records_none():
    plan = host_plan(assigned(REG + ":stable"), "fcos-01", resolutions=RESOLVED_INDEX, status=status(ON_OTHER))
    assert (plan["action"], plan["update_agents"], plan["update_agents_policy"]) == ("stage", None, None)


@pytest.mark.parametrize("action, backend, setting, capable, expected", [
    ("skipped", "bootc", "auto", True, (None, None)),
    ("stage", "bootc", None, True, ("full", None)),
    ("stage", "bootc", "never", True, ("full", None)),
    ("stage", None, "auto", None, (_plan.AFTER_THE_STAGE, "the host was not read")),
    ("stage", "bootc", "auto", None, (_plan.AFTER_THE_STAGE, "decided from the staged deployment (bootc's")),
    ("activate", "bootc", "auto", True, ("soft", None)),
    ("activate", "bootc", "auto", False, ("full", "bootc says the staged deployment is not soft-reboot capable")),
    ("activate", "bootc", "required", False, ("none", "soft reboot required, and bootc says")),
    ("stage", "rpm-ostree", "auto", None, ("full", "rpm-ostree has no soft reboot")),
    ("activate", "rpm-ostree", "required", None, ("none", "soft reboot required, and rpm-ostree has no soft reboot")),
])
def test_the_plan_says_how_an_activation_would_reboot_the_host(action, backend, setting, capable, expected):
    plan = {"action": action, "backend": backend, "reboot": None, "reboot_reason": None}
    staged = {"staged": True, "soft_reboot_capable": capable} if capable is not None else None
    _plan._plan_reboot(plan, staged, setting)
    assert plan["reboot"] == expected[0] and plan["action"] == action
    assert (plan["reboot_reason"] or "").startswith(expected[1] or "") and (expected[1] is None) == (plan["reboot_reason"] is None)


def test_an_unknown_soft_reboot_choice_is_an_error_for_the_host():
    plan = {"action": "stage", "backend": "bootc", "reboot": None, "reboot_reason": None}
    _plan._plan_reboot(plan, None, "always")
    assert plan["action"] == "error"
    assert plan["reason"] == "fleetos_rollout_soft_reboot is 'always': it must be one of never, auto, required."
