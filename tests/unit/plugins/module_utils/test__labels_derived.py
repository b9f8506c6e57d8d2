# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Derived images: an image with layers after its ``ostree.final-diffid`` is imported by a
host as a merge commit, so its inherited ``ostree.commit`` label is never its commit:
the planner stages it and adoption rebases, never pins or adopts on that label."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ansible_collections.fleetos.layering.plugins.filter import adopt
from ansible_collections.fleetos.layering.plugins.module_utils import _rpm_ostree
from ansible_collections.fleetos.layering.plugins.module_utils._labels import (
    derived_layer_count,
    imported_commit,
)
from ansible_collections.fleetos.layering.plugins.plugin_utils._plan import host_plan

SHARED = Path(os.environ.get("FLEETOS_SHARED") or Path(__file__).resolve().parents[5] / "shared")
FIXTURES = SHARED / "reference" / "fixtures"

REG = "198.51.100.1:5000/fleetos/os"
DIGEST = "sha256:" + "a" * 64
BASE_COMMIT = "d" * 64
OTHER_COMMIT = "e" * 64
REFSPEC = "fedora:fedora/x86_64/coreos/stable"


def diff_id(char):
    return "sha256:" + char * 64


BASE_DIFF_IDS = [diff_id("1"), diff_id("2")]


def labels(final=diff_id("2"), commit=BASE_COMMIT):
    found = {"ostree.bootable": "true", "ostree.commit": commit, "version": "1.0"}
    if final is not None:
        found["ostree.final-diffid"] = final
    return found


# labels, diff_ids, derived layers, commit a host gets (None: not known from the image)
TABLE = [
    ("base image: final-diffid is the last layer", labels(), BASE_DIFF_IDS, 0, BASE_COMMIT),
    ("one layer above the base (FROM base + COPY)", labels(), BASE_DIFF_IDS + [diff_id("3")], 1, None),
    ("a composed image: two layer images above the base", labels(),
     BASE_DIFF_IDS + [diff_id("3"), diff_id("4")], 2, None),
    ("final-diffid names no layer of the image", labels(final=diff_id("9")), BASE_DIFF_IDS, None, None),
    ("final-diffid, layers not read", labels(), None, None, None),
    ("no final-diffid: no ostree base, every layer derived", labels(final=None), BASE_DIFF_IDS, 2, None),
    ("no final-diffid, layers not read: the label (older results)", labels(final=None), None, None, BASE_COMMIT),
    ("no commit label", {"ostree.bootable": "true", "ostree.final-diffid": diff_id("2")}, BASE_DIFF_IDS, 0, None),
    ("legacy oscontainer: its repository's commit, whatever its layers", {"com.coreos.ostree-commit": BASE_COMMIT},
     [diff_id("1"), diff_id("2")], 2, BASE_COMMIT),
]


@pytest.mark.parametrize(("found", "diff_ids", "derived", "commit"), [case[1:] for case in TABLE],
                         ids=[case[0] for case in TABLE])
def test_derived_layers_and_the_commit_a_host_imports(found, diff_ids, derived, commit):
    assert derived_layer_count(found, diff_ids) == derived
    assert imported_commit(found, diff_ids) == commit


def test_real_labels_with_final_diffid():
    path = FIXTURES / "skopeo-inspect-labels__mco-test__rhcos-412.86-el8.6.json"
    if not path.is_file():
        pytest.skip("reference fixture %s is absent (../shared not available)" % path)
    real = json.loads(path.read_text(encoding="utf-8"))
    base = [diff_id("0"), real["ostree.final-diffid"]]
    assert imported_commit(real, base) == real["ostree.commit"]
    assert imported_commit(real, base + [diff_id("f")]) is None


@pytest.mark.parametrize(("name", "derived"), [
    # Fedora CoreOS stable 43 (buildah-built): one layer above the ostree base.
    ("oci-image-config__zincati-fixture__fcos-stable-43.20251024.3.0.json", 1),
    # Fedora CoreOS testing 41 (coreos-assembler): final-diffid is the last layer.
    ("oci-image-config__zincati-fixture__fcos-testing-41.20250105.2.0.json", 0),
])
def test_real_image_configurations(name, derived):
    path = FIXTURES / name
    if not path.is_file():
        pytest.skip("reference fixture %s is absent (../shared not available)" % path)
    config = json.loads(path.read_text(encoding="utf-8"))
    found, diff_ids = config["config"]["Labels"], config["rootfs"]["diff_ids"]
    assert derived_layer_count(found, diff_ids) == derived
    assert imported_commit(found, diff_ids) == (found["ostree.commit"] if derived == 0 else None)


def deployment(checksum, origin=REFSPEC):
    return {"checksum": checksum, "image": None, "origin": origin}


def plan_for(booted_checksum, diff_ids, transport=None):
    """host_plan of a host booted from a disk image on booted_checksum, targeting REG@DIGEST."""
    assignment = {"source": "nodeName", "name": "mi", "image": "%s@%s" % (REG, DIGEST), "transport": transport,
                  "paused": False, "reason": "MachineImage 'mi' names node01", "defined_in": "mi.yaml"}
    inspections = {"%s@%s" % (REG, DIGEST): {"labels": labels(), "diff_ids": diff_ids, "digest": DIGEST}}
    resolutions = {"results": [{"item": "%s@%s" % (REG, DIGEST), "digest": DIGEST, "index": False,
                                "image": "%s@%s" % (REG, DIGEST), "manifests": {}}]}
    return host_plan(assignment, "node01", resolutions=resolutions, inspections=inspections,
                     status={"booted": deployment(booted_checksum), "staged": None, "architecture": "amd64"})


@pytest.mark.parametrize(("diff_ids", "action", "commit"), [
    (BASE_DIFF_IDS, "pin", BASE_COMMIT),
    (BASE_DIFF_IDS + [diff_id("3")], "stage", None),
    (None, "stage", None),
], ids=["base image: pinned", "derived image: staged", "layers not read: staged"])
def test_a_host_booted_on_the_base_commit(diff_ids, action, commit):
    plan = plan_for(BASE_COMMIT, diff_ids)
    assert (plan["action"], plan["commit"]) == (action, commit)
    if action == "stage":
        assert plan["origin_set"] == {} and plan["up_to_date"] is False


def test_a_derived_image_is_staged_on_a_host_booted_elsewhere_too():
    plan = plan_for(OTHER_COMMIT, BASE_DIFF_IDS + [diff_id("3")])
    assert (plan["action"], plan["commit"]) == ("stage", None)


def adoption(diff_ids):
    status = _rpm_ostree.parse_status({"deployments": [
        {"id": "fedora-coreos-%s.0" % BASE_COMMIT, "osname": "fedora-coreos", "checksum": BASE_COMMIT,
         "serial": 0, "booted": True, "staged": False, "origin": REFSPEC}]})
    image = {"image": "%s@%s" % (REG, DIGEST), "digest": DIGEST, "labels": labels(), "diff_ids": diff_ids}
    return adopt.cloud_image_adopt_plan(status, image)


def test_adoption_adopts_the_base_image_in_place():
    plan = adoption(BASE_DIFF_IDS)
    assert (plan["action"], plan["commit"], plan["reboot_required"]) == ("adopt", BASE_COMMIT, False)


@pytest.mark.parametrize(("diff_ids", "said"), [
    (BASE_DIFF_IDS + [diff_id("3")], "has 1 layer(s) above its ostree base"),
    (BASE_DIFF_IDS + [diff_id("3"), diff_id("4")], "has 2 layer(s) above its ostree base"),
    (None, "layers that were not read"),
])
def test_adoption_rebases_onto_a_derived_image(diff_ids, said):
    plan = adoption(diff_ids)
    assert (plan["action"], plan["commit"], plan["reboot_required"]) == ("rebase", None, True)
    assert plan["origin_set"] == {}
    assert said in plan["reason"] and BASE_COMMIT[:12] in plan["reason"]
