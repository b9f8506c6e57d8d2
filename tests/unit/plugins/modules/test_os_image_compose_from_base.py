# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""os_image_compose main() with layer images built FROM a version of the base, against TLS registries on 127.0.0.1:
the base each was built from, its own layers only, every refusal decided before a layer blob is read, and the
blobs read counted on every path."""

from __future__ import annotations

import json

import pytest

from ansible_collections.fleetos.layering.tests.unit.plugins.module_utils.images.test__registry import (
    PASSWORD,
    USER,
    FakeRegistry,
    sha,
)
from ansible_collections.fleetos.layering.tests.unit.plugins.modules.test_os_image_compose import (
    BASE_LABELS,
    OCI_GZIP,
    OCI_MANIFEST,
    blob_reads,
    layer_blob,
    run,
    writes,
)

FINAL = "ostree.final-diffid"
BASE_DIGEST = "org.opencontainers.image.base.digest"
BASE_NAME = "org.opencontainers.image.base.name"


def push(fake, repo, tag, files_per_layer, labels, created, base=None, keep=None, annotations=None, inherit=True):
    """An image in ``fake``; with ``base`` ((repo, tag) there), built FROM it: the first ``keep`` (default all) of its
    layers and (``inherit``) its labels, then ``files_per_layer``. An image without a base is a bootable base: its last diff_id is
    its ostree.final-diffid. -> {digest, layers (descriptors), config digest}."""
    descriptors, diff_ids, history, inherited = [], [], [], {}
    if base is not None:
        doc = json.loads(fake.manifests[base][0])
        config = json.loads(fake.blobs[(base[0], doc["config"]["digest"])])
        keep = len(doc["layers"]) if keep is None else keep
        for descriptor in doc["layers"][:keep]:
            fake.blobs[(repo, descriptor["digest"])] = fake.blobs[(base[0], descriptor["digest"])]
        descriptors, diff_ids = doc["layers"][:keep], config["rootfs"]["diff_ids"][:keep]
        history, inherited = config["history"][:keep], dict(config["config"]["Labels"]) if inherit else {}
    for files in files_per_layer:
        blob, diff_id = layer_blob(files)
        fake.blobs[(repo, sha(blob))] = blob
        descriptors.append({"mediaType": OCI_GZIP, "digest": sha(blob), "size": len(blob)})
        diff_ids.append(diff_id)
        history.append({"created_by": "COPY %s" % files[0][0]})
    labels = dict(inherited, **labels) if base is not None else dict(labels, **{FINAL: diff_ids[-1]})
    labels = {key: value for key, value in labels.items() if value is not None}
    config = json.dumps({"architecture": "amd64", "os": "linux", "created": created, "config": {"Labels": labels},
                         "rootfs": {"type": "layers", "diff_ids": diff_ids}, "history": history}).encode()
    fake.blobs[(repo, sha(config))] = config
    manifest = {"schemaVersion": 2, "mediaType": OCI_MANIFEST, "layers": descriptors,
                "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": sha(config),
                           "size": len(config)}}
    if annotations:
        manifest["annotations"] = annotations
    raw = json.dumps(manifest).encode()
    fake.add_manifest(repo, tag, raw)
    return {"digest": sha(raw), "layers": [d["digest"] for d in descriptors], "config": sha(config)}


def bases(fake):
    """os/base 0.9 and 1.0 (two layers each, os-release among them), os/other 1 (another OS)."""
    return {
        "0.9": push(fake, "os/base", "0.9", [[("usr/bin/bash", b"bash 0.9")], [("usr/lib/os-release", b"ID=9\n")]],
                    dict(BASE_LABELS, version="0.9"), "2026-01-01T00:00:00Z"),
        "1.0": push(fake, "os/base", "1.0", [[("usr/bin/bash", b"bash 1.0")], [("usr/lib/os-release", b"ID=10\n")]],
                    BASE_LABELS, "2026-02-01T00:00:00Z"),
        "other": push(fake, "os/other", "1", [[("usr/bin/sh", b"other")]], dict(BASE_LABELS, version="1"),
                      "2026-01-15T00:00:00Z"),
    }


@pytest.fixture
def fake(tmp_path):
    (tmp_path / "a").mkdir()
    source = FakeRegistry(tls_dir=tmp_path / "a")
    auth_file = tmp_path / "auth.json"
    source.auth_entries = {source.address: {"username": USER, "password": PASSWORD}}
    auth_file.write_text(json.dumps({"auths": source.auth_entries}))
    source.auth_file, source.cert_dir, source.cache = str(auth_file), str(tmp_path / "a" / "certs.d"), str(tmp_path / "cache")
    source.images = bases(source)
    yield source
    source.close()


def kubelet(fake, base, tag="1.31.4", labels=None, **extra):
    return push(fake, "os/kubelet", tag, [[("usr/bin/kubelet", b"kubelet " + tag.encode())]],
                {"version": "1.31.4"} if labels is None else labels, "2026-03-01T00:00:00Z", base=base, **extra)


def read_digests(requests):
    return [r[1].rsplit("/", 1)[1] for r in blob_reads(requests)]


def tag_listings(requests):
    return [r for r in requests if r[1].endswith("/tags/list") and r[2]]


def compose_on_base_1_0(monkeypatch, fake, layer):
    """Compose base 1.0 + os/kubelet:1.31.4 -> the result; the composed image must be base 1.0's layers, then the
    kubelet's own layer only (never a layer of the base it was built on)."""
    result = run(monkeypatch, fake, [dict(name="kubelet", image="os/kubelet:1.31.4")])
    assert result["outcome"] == "exit", result.get("msg")
    composed = [d["digest"] for d in json.loads(fake.manifests[("os/worker", result["tag"])][0])["layers"]]
    assert composed == fake.images["1.0"]["layers"] + layer["layers"][-1:]
    return result


def test_a_layer_built_from_an_older_base_is_composed_on_the_base_with_its_own_layers_only(monkeypatch, fake):
    images = fake.images
    layer = kubelet(fake, ("os/base", "0.9"))
    # base 1.0's layers, then the kubelet's own: none of base 0.9's, so base 1.0 is not rolled back.
    first = compose_on_base_1_0(monkeypatch, fake, layer)
    (record,) = first["layers"]
    assert record["built_from"] == {"name": "%s/os/base" % fake.address, "digest": images["0.9"]["digest"],
                                    "version": "0.9", "older": True}
    assert record["version"] == "1.31.4"
    # Decided from manifests and configurations: the three configs and the kubelet's own layer, nothing of 0.9.
    assert sorted(read_digests(first["requests"])) == sorted(
        [images["1.0"]["config"], layer["config"], images["0.9"]["config"], layer["layers"][-1]])
    assert first["blobs"] == {"mounted": 3, "uploaded": 1, "skipped": 0, "read": 4}
    assert len(tag_listings(first["requests"])) == 1
    config = json.loads(fake.blobs[("os/worker", json.loads(fake.manifests[("os/worker", first["tag"])][0])[
        "config"]["digest"])])
    assert config["config"]["Labels"]["version"] == "1.0" and len(config["rootfs"]["diff_ids"]) == 3

    again = run(monkeypatch, fake, [dict(name="kubelet", image="os/kubelet:1.31.4")])
    assert (again["changed"], again["digest"], again["blobs"]["read"]) == (False, first["digest"], 0)
    assert blob_reads(again["requests"]) == [] and tag_listings(again["requests"]) == []
    assert again["layers"] == first["layers"]


def test_a_layer_built_from_the_composed_base_needs_no_lookup_and_has_no_version_it_inherits(monkeypatch, fake):
    images = fake.images
    layer = kubelet(fake, ("os/base", "1.0"), labels={})
    result = compose_on_base_1_0(monkeypatch, fake, layer)
    (record,) = result["layers"]
    assert record["built_from"] == {"name": "%s/os/base" % fake.address, "digest": images["1.0"]["digest"],
                                    "version": "1.0", "older": False}
    # Its version label is the base's, inherited: not a version of its own.
    assert record["version"] is None
    assert tag_listings(result["requests"]) == []
    assert sorted(read_digests(result["requests"])) == sorted([images["1.0"]["config"], layer["config"],
                                                               layer["layers"][-1]])


def test_a_layer_whose_annotations_name_its_base_is_found_by_digest_in_the_base_repository(monkeypatch, fake):
    images = fake.images
    # Built FROM a mirror of os/base:0.9: the name differs, the digest is one of the base's repository.
    layer = kubelet(fake, ("os/base", "0.9"), annotations={BASE_DIGEST: images["0.9"]["digest"],
                                                           BASE_NAME: "mirror.example.com/os/base:0.9"},
                    labels={"version": "1.31.4", FINAL: None})
    result = compose_on_base_1_0(monkeypatch, fake, layer)
    assert result["layers"][0]["built_from"]["digest"] == images["0.9"]["digest"]
    assert tag_listings(result["requests"]) == []


def refusals(fake):
    """(layer image tag, expected message) for each layer a host must never get; the images are pushed here."""
    images, address = fake.images, fake.address
    where = "Layer 'kubelet' (%s/os/kubelet)" % address
    expected = ": expected a layer built FROM scratch, or FROM a version of the base %s/os/base." % address
    no_boundary = (" and no base boundary (neither the label ostree.final-diffid nor the annotation "
                   "org.opencontainers.image.base.digest)" + expected)
    kubelet(fake, ("os/base", "0.9"), tag="bootable", labels={FINAL: None})
    push(fake, "os/kubelet", "shared", [[("usr/bin/kubelet", b"k")]], {}, "2026-03-01T00:00:00Z",
         base=("os/base", "1.0"), keep=1, inherit=False)
    kubelet(fake, ("os/base", "0.9"), tag="final", labels={FINAL: sha(b"no such layer")})
    kubelet(fake, ("os/other", "1"), tag="other-annotated", annotations={BASE_DIGEST: images["other"]["digest"]})
    kubelet(fake, ("os/other", "1"), tag="other")
    kubelet(fake, ("os/other", "1"), tag="lying", annotations={BASE_DIGEST: images["0.9"]["digest"]})
    # The base itself, tagged as a layer: nothing of its own.
    fake.add_manifest("os/kubelet", "nothing", fake.manifests[("os/base", "0.9")][0])
    for (repo, digest), blob in list(fake.blobs.items()):
        if repo == "os/base":
            fake.blobs[("os/kubelet", digest)] = blob
    return [
        ("bootable", where + " carries the labels of a bootable OS image (ostree.bootable, ostree.commit)" + no_boundary),
        ("shared", where + " contains the base's layer %s%s" % (images["1.0"]["layers"][0], no_boundary)),
        ("final", where + " has the label ostree.final-diffid %s, which names none of its layers: expected the "
                          "diff_id of the last layer of the base it was built FROM." % sha(b"no such layer")),
        ("other-annotated", where + " is built FROM %s (its annotation %s), which is not an image of the base's "
                                    "repository %s/os/base%s" % (images["other"]["digest"], BASE_DIGEST, address,
                                                                 expected)),
        ("other", where + " is built on a base that is not a version of the base's repository %s/os/base: no image "
                          "tagged there has its first layers, up to its ostree.final-diffid %s%s" % (
                              address, json.loads(fake.blobs[("os/other", images["other"]["config"])])["rootfs"][
                                  "diff_ids"][-1], expected)),
        ("lying", where + " names the base %s in its annotation %s, but its layers do not begin with that image's "
                          "layers for amd64: expected the layers of the base it was built FROM, then its own."
                          % (images["0.9"]["digest"], BASE_DIGEST)),
        ("nothing", where + " adds no layer to the base it was built FROM (%s/os/base@%s): expected at least one "
                            "layer of its own." % (address, images["0.9"]["digest"])),
    ]


@pytest.mark.parametrize("case", ["bootable", "shared", "final", "other-annotated", "other", "lying", "nothing"])
def test_every_refusal_is_one_sentence_before_any_layer_blob_is_read_and_nothing_is_pushed(monkeypatch, fake, case):
    message = dict(refusals(fake))[case]
    configs = {digest for (dummy, digest), blob in fake.blobs.items() if blob.startswith(b"{")}
    result = run(monkeypatch, fake, [dict(name="kubelet", image="os/kubelet:%s" % case)])
    assert (result["outcome"], result["msg"]) == ("fail", message)
    assert writes(result["requests"]) == []
    # Manifests and configurations only: every blob read is a configuration, and blobs.read says how many.
    reads = read_digests(result["requests"])
    assert reads and set(reads) <= configs, reads
    assert result["blobs"]["read"] == len(reads)


@pytest.mark.parametrize("files, message", [
    ([("usr/share/.wh..wh..opq", b""), ("usr/bin/kubelet", b"k")],
     "empties /usr/share with the opaque whiteout /usr/share/.wh..wh..opq: expected a layer that only adds files."),
    ([("usr/lib/os-release", b"VERSION_ID=9.5\n"), ("usr/bin/kubelet", b"k")],
     "carries an OS tree of its own (it has /usr/lib/os-release), which would replace the base's: expected a layer "
     "that only adds files to the base."),
])
def test_a_layer_s_own_files_follow_the_rules_and_nothing_is_pushed(monkeypatch, fake, files, message):
    layer = push(fake, "os/kubelet", "bad", [files], {"version": "1"}, "2026-03-01T00:00:00Z",
                 base=("os/base", "0.9"))
    result = run(monkeypatch, fake, [dict(name="kubelet", image="os/kubelet:bad")])
    assert (result["outcome"], result["msg"]) == ("fail", "Layer 'kubelet' (%s/os/kubelet) %s" % (
        fake.address, message))
    assert writes(result["requests"]) == []
    # Its own layer is read to be listed; none of the base 0.9 layers it was built on.
    assert layer["layers"][-1] in read_digests(result["requests"])
    assert not set(read_digests(result["requests"])) & set(fake.images["0.9"]["layers"])
    assert result["blobs"]["read"] == len(blob_reads(result["requests"]))


def test_blobs_read_counts_what_is_read_to_compose_into_another_registry(monkeypatch, fake, tmp_path):
    (tmp_path / "b").mkdir()
    target = FakeRegistry(tls_dir=tmp_path / "b")
    try:
        entries = dict(fake.auth_entries, **{target.address: {"username": USER, "password": PASSWORD}})
        (tmp_path / "auth.json").write_text(json.dumps({"auths": entries}))
        layer = kubelet(fake, ("os/base", "0.9"))
        result = run(monkeypatch, fake, [dict(name="kubelet", image="os/kubelet:1.31.4")],
                     output="%s/os/worker" % target.address)
        assert result["outcome"] == "exit", result.get("msg")
        reads = read_digests(result["requests"])
        # 3 configurations and the kubelet's own layer to decide and list it, then base 1.0's 2 layers and the
        # kubelet's layer again, read from the source to be uploaded to the other registry.
        assert len(reads) == 7 and result["blobs"] == {"mounted": 0, "uploaded": 4, "skipped": 0, "read": 7}
        assert reads.count(layer["layers"][-1]) == 2
        assert blob_reads(target.requests) == []
        assert ("os/worker", result["tag"]) in target.manifests
    finally:
        target.close()
