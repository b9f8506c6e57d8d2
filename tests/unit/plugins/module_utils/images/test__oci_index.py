# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The one reader of an OCI layout's index.json: entries, the one a reference names, digests, names, a rewrite."""

from __future__ import annotations

import json

import pytest

from ansible_collections.fleetos.layering.plugins.module_utils._errors import ImageError
from ansible_collections.fleetos.layering.plugins.module_utils.images._oci_index import REF_NAME, OciIndex

A = "sha256:" + "a1" * 32
B = "sha256:" + "b2" * 32
MANIFEST = "application/vnd.oci.image.manifest.v1+json"
DOCKER = "application/vnd.docker.distribution.manifest.v2+json"
INDEX_TYPE = "application/vnd.oci.image.index.v1+json"


def entry(digest, name=None, media_type=MANIFEST):
    found = {"mediaType": media_type, "digest": digest, "size": 7}
    if name:
        found["annotations"] = {REF_NAME: name}
    return found


def index(*entries, **extra):
    return json.dumps(dict({"schemaVersion": 2, "manifests": list(entries)}, **extra)).encode()


def test_the_reference_names_its_manifest_and_one_entry_needs_no_name():
    two = OciIndex.parse(index(entry(A, "v1"), entry(B, "v2"), "not an entry"), "'/srv/os'")
    assert two.select("v2", "'/srv/os'") == B
    assert two.digests() == {A, B} and two.names() == {"v1", "v2"}
    assert OciIndex.parse(index(entry(A)), "'/srv/os'").select("", "'/srv/os'") == A


@pytest.mark.parametrize("data, reference, message", [
    (b"{not json", "v1", "Failed to read the OCI layout '/srv/os': its index.json is not JSON."),
    (index(), "v1", "Failed to read the OCI layout '/srv/os': its index.json lists no manifest."),
    (b"[1, 2]", "", "Failed to read the OCI layout '/srv/os': its index.json lists no manifest."),
    (index(entry(A, "v1")), "v9", "Failed to read the OCI layout '/srv/os': its index.json has no manifest named 'v9'."),
    (index(entry(A, "v1"), entry(B, "v2")), "",
     "Failed to read the OCI layout '/srv/os': its index.json lists 2 manifests and the image names none: expected "
     "PATH:REFERENCE."),
    (index(entry("md5:00", "v1")), "v1", "Failed to read the OCI layout '/srv/os': the manifest entry has no sha256 digest."),
])
def test_an_index_that_names_no_manifest_for_the_reference_is_one_sentence(data, reference, message):
    with pytest.raises(ImageError) as caught:
        OciIndex.parse(data, "'/srv/os'").select(reference, "'/srv/os'")
    assert caught.value.msg == message


@pytest.mark.parametrize("data", [None, b"{not json", b"\xff", b"[]"])
def test_without_where_a_missing_or_bad_index_is_an_empty_one(data):
    found = OciIndex.parse(data)
    assert found.manifests == [] and found.digests() == set() and found.names() == set()


def test_the_image_manifests_of_an_index():
    found = OciIndex.parse(index({"digest": A}, entry(B, media_type=DOCKER), entry(A, media_type=INDEX_TYPE)))
    assert [e["digest"] for e in found.images((MANIFEST, DOCKER))] == [A, B]


def test_an_entry_takes_the_place_of_the_one_of_its_name_and_the_rest_stays():
    found = OciIndex.parse(index(entry(A, "v1"), entry(B, "v2"), "kept", annotations={"x": "y"}))
    rewritten = json.loads(found.with_entry(entry(B, "v1")))
    assert rewritten["annotations"] == {"x": "y"} and rewritten["schemaVersion"] == 2
    assert rewritten["manifests"] == [entry(B, "v2"), "kept", entry(B, "v1")]
    assert json.loads(OciIndex.parse(None).with_entry(entry(A, "v1"))) == {"schemaVersion": 2, "manifests": [entry(A, "v1")]}
