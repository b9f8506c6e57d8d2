# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The pull step's OCI layout cache, read on this machine's files: the blobs it holds, the manifests and names its
index lists, and the ref name an image gets there. The pull itself runs through the task:
tests/unit/plugins/action/test_os_image_pull.py."""

from __future__ import annotations

import json

import pytest

from ansible_collections.fleetos.layering.tests.unit.plugins.module_utils.utils import LocalHost
from ansible_collections.fleetos.layering.plugins.plugin_utils.host._pull import layout_blobs, layout_index, layout_tag

DIGEST = "sha256:" + "0123456789abcdef" * 4
MANIFEST = "application/vnd.oci.image.manifest.v1+json"


@pytest.mark.parametrize(("name", "tag"), [
    ("198.51.100.1:5000/fleetos/lab-os", "fleetos_198.51.100.1_5000_fleetos_lab-os_0123456789abcdef"),
    ("quay.io/fedora/fedora-coreos", "fleetos_quay.io_fedora_fedora-coreos_0123456789abcdef"),
    ("r/" + "n" * 100, "fleetos_r_" + "n" * 78 + "_0123456789abcdef"),  # the name cut at 80 characters
])
def test_layout_tag(name, tag):
    assert layout_tag(name, DIGEST) == tag
    assert layout_tag(name, "0123456789abcdef0123") == tag  # a digest without its algorithm


def test_layout_blobs_lists_the_blobs_of_each_algorithm(tmp_path):
    cache = tmp_path / "cache"
    for algorithm, hexes in (("sha256", ("aa", "bb")), ("sha512", ("cc",))):
        (cache / "blobs" / algorithm).mkdir(parents=True)
        for hex_ in hexes:
            (cache / "blobs" / algorithm / hex_).write_bytes(b"blob")
    (cache / "index.json").write_text("{}")
    (cache / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
    assert layout_blobs(LocalHost(), str(cache)) == {"sha256:aa", "sha256:bb", "sha512:cc"}


def test_a_cache_not_made_yet_has_no_blobs_and_no_entries(tmp_path):
    host = LocalHost()
    assert layout_blobs(host, str(tmp_path / "none")) == set()
    assert layout_index(host, str(tmp_path / "none")) == (set(), set())
    (tmp_path / "empty").mkdir()
    assert layout_blobs(host, str(tmp_path / "empty")) == set()


def test_layout_index_gives_the_manifest_digests_and_ref_names(tmp_path):
    other = "sha256:" + "f" * 64
    index = {"schemaVersion": 2, "manifests": [
        {"mediaType": MANIFEST, "digest": DIGEST, "size": 1,
         "annotations": {"org.opencontainers.image.ref.name": "fleetos_lab-os_0123456789abcdef"}},
        {"mediaType": MANIFEST, "digest": other, "size": 1}]}
    (tmp_path / "index.json").write_text(json.dumps(index))
    assert layout_index(LocalHost(), str(tmp_path)) == ({DIGEST, other}, {"fleetos_lab-os_0123456789abcdef"})


@pytest.mark.parametrize("make", [
    lambda path: path.write_text("not json"),
    lambda path: path.write_text("[]"),
    lambda path: path.mkdir(),  # not a regular file: read as no index
], ids=["not JSON", "not an object", "a directory"])
def test_an_index_that_cannot_be_read_lists_nothing(tmp_path, make):
    make(tmp_path / "index.json")
    assert layout_index(LocalHost(), str(tmp_path)) == (set(), set())
