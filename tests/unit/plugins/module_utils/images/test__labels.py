# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The labels of an OS image: which commit, whether bootable, whether a legacy oscontainer; and derived images:
an image with layers after its ``ostree.final-diffid`` is imported by a host as a merge commit, so its inherited
``ostree.commit`` label is never its commit."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ansible_collections.fleetos.layering.plugins.module_utils.images._labels import (
    derived_layer_count,
    first_label,
    image_commit,
    imported_commit,
    is_bootable,
    is_legacy_oscontainer,
)

SHARED = Path(os.environ.get("FLEETOS_SHARED") or Path(__file__).resolve().parents[6] / "shared")
FIXTURES = SHARED / "reference" / "fixtures"

BASE_COMMIT = "d" * 64
OTHER_COMMIT = "e" * 64


def diff_id(char):
    return "sha256:" + char * 64


BASE_DIFF_IDS = [diff_id("1"), diff_id("2")]


def labels(final=diff_id("2"), commit=BASE_COMMIT):
    found = {"ostree.bootable": "true", "ostree.commit": commit, "version": "1.0"}
    if final is not None:
        found["ostree.final-diffid"] = final
    return found


def test_the_first_label_set_in_the_order_asked():
    found = {"a": "", "b": "2", "c": "3"}
    assert first_label(found, ("a", "b", "c")) == "2"
    assert first_label(found, ("c", "b")) == "3"
    assert first_label(found, ("a", "z")) is None
    assert first_label({}, ()) is None


@pytest.mark.parametrize(("found", "commit"), [
    ({"ostree.commit": BASE_COMMIT, "com.coreos.ostree-commit": OTHER_COMMIT}, BASE_COMMIT),
    ({"com.coreos.ostree-commit": OTHER_COMMIT, "io.openshift.os-commit": BASE_COMMIT}, OTHER_COMMIT),
    ({"io.openshift.os-commit": BASE_COMMIT}, BASE_COMMIT),
    ({"ostree.commit": "", "io.openshift.os-commit": BASE_COMMIT}, BASE_COMMIT),
    ({"version": "1.0"}, None),
], ids=["ostree.commit first", "then the legacy label", "then OpenShift's", "an empty label is not set", "none"])
def test_image_commit_trusts_the_commit_labels_in_their_order(found, commit):
    assert image_commit(found) == commit


@pytest.mark.parametrize(("found", "bootable", "legacy"), [
    ({"ostree.bootable": "true"}, True, False),
    ({"ostree.bootable": "TRUE"}, True, False),
    ({"ostree.bootable": "1"}, True, False),
    ({"containers.bootc": "1"}, True, False),
    ({"containers.bootc": "True"}, True, False),
    ({"ostree.bootable": "false", "containers.bootc": "0"}, False, False),
    ({"ostree.bootable": "yes"}, False, False),
    ({"ostree.commit": BASE_COMMIT}, False, False),
    ({"com.coreos.ostree-commit": BASE_COMMIT}, False, True),
    ({"com.coreos.ostree-commit": BASE_COMMIT, "ostree.bootable": "true"}, True, False),
    ({"com.coreos.ostree-commit": ""}, False, False),
    ({}, False, False),
])
def test_bootable_and_legacy_oscontainer(found, bootable, legacy):
    assert is_bootable(found) is bootable
    assert is_legacy_oscontainer(found) is legacy


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
