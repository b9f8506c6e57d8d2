# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""os_image_compose main() against a TLS registry served on 127.0.0.1: single and multi-arch, no-op, check mode, refusals."""

from __future__ import annotations

import gzip
import io
import json
import tarfile

import pytest

from ansible_collections.fleetos.layering.tests.unit.plugins.modules.utils import patch_module_args
from ansible.module_utils import basic

from ansible_collections.fleetos.layering.plugins.modules import os_image_compose
from ansible_collections.fleetos.layering.tests.unit.plugins.module_utils.images.test__registry import (
    PASSWORD,
    USER,
    FakeRegistry,
    sha,
)

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"


class Exit(Exception):
    pass


def layer_blob(files):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in files:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    raw = buffer.getvalue()
    return gzip.compress(raw, mtime=0), sha(raw)


def push_image(fake, repo, tag, files_per_layer, labels, architecture="amd64", created="2026-01-01T00:00:00Z"):
    """Put an image (its layer blobs, config and manifest) into the fake registry; -> (manifest bytes, digest)."""
    layers, diff_ids = [], []
    for files in files_per_layer:
        blob, diff_id = layer_blob(files)
        fake.blobs[(repo, sha(blob))] = blob
        layers.append({"mediaType": OCI_GZIP, "digest": sha(blob), "size": len(blob)})
        diff_ids.append(diff_id)
    config = json.dumps({"architecture": architecture, "os": "linux", "created": created,
                         "config": {"Labels": labels}, "rootfs": {"type": "layers", "diff_ids": diff_ids},
                         "history": [{"created_by": "x"} for dummy in diff_ids]}).encode()
    fake.blobs[(repo, sha(config))] = config
    manifest = json.dumps({"schemaVersion": 2, "mediaType": OCI_MANIFEST, "layers": layers,
                           "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": sha(config),
                                      "size": len(config)}}).encode()
    fake.add_manifest(repo, tag, manifest)
    return manifest, sha(manifest)


def push_index(fake, repo, tag, entries):
    index = json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [
        {"mediaType": OCI_MANIFEST, "digest": digest, "size": len(raw), "platform": platform}
        for platform, (raw, digest) in entries]}).encode()
    fake.add_manifest(repo, tag, index, OCI_INDEX)
    return sha(index)


BASE_LABELS = {"ostree.bootable": "true", "ostree.commit": "ab" * 32, "ostree.linux": "6.0.0", "version": "1.0"}
AMD64 = {"architecture": "amd64", "os": "linux"}
ARM64 = {"architecture": "arm64", "os": "linux", "variant": "v8"}


@pytest.fixture
def registry(tmp_path):
    fake = FakeRegistry(tls_dir=tmp_path)
    auth_file = tmp_path / "auth.json"
    auth_file.write_text(json.dumps({"auths": {fake.address: {"username": USER, "password": PASSWORD}}}))
    fake.auth_file = str(auth_file)
    fake.cert_dir = str(tmp_path / "certs.d")
    fake.cache = str(tmp_path / "cache")
    yield fake
    fake.close()


def run(monkeypatch, fake, layers, check=False, base="os/base:1.0", **extra):
    args = dict(base="%s/%s" % (fake.address, base), output="%s/os/worker" % fake.address,
                layers=[dict(layer, image="%s/%s" % (fake.address, layer["image"])) for layer in layers],
                auth_file=fake.auth_file, ca_cert_dir=fake.cert_dir, layer_cache_dir=fake.cache, retries=0,
                _ansible_check_mode=check)
    args.update(extra)
    outcome = {}

    def leave(kind):
        def exit_json(self, **kwargs):
            outcome.update(kwargs, outcome=kind, no_log_values=set(self.no_log_values))
            raise Exit()
        return exit_json

    monkeypatch.setattr(basic.AnsibleModule, "exit_json", leave("exit"))
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", leave("fail"))
    start = len(fake.requests)
    with patch_module_args(args):
        with pytest.raises(Exit):
            os_image_compose.main()
    outcome["requests"] = fake.requests[start:]
    return outcome


def blob_reads(requests):
    return [r for r in requests if r[0] == "GET" and "/blobs/sha256:" in r[1]]


def writes(requests):
    return [r for r in requests if r[0] in ("PUT", "POST")]


def single_arch(fake):
    push_image(fake, "os/base", "1.0", [[("usr/bin/bash", b"bash")]], BASE_LABELS)
    push_image(fake, "os/kubelet", "1.31.4", [[("usr/bin/kubelet", b"k1")]], {"version": "1.31.4"},
               created="2026-03-01T00:00:00Z")
    push_image(fake, "os/ovs", "3.4", [[("etc/ovs.conf", b"o")]], {"org.opencontainers.image.version": "3.4"})
    return [dict(name="kubelet", image="os/kubelet:1.31.4", requires={"labels": {"ostree.linux": "6.0.0"}}),
            dict(name="ovs", image="os/ovs:3.4")]


def test_compose_push_then_no_op_reading_no_blob(monkeypatch, registry):
    layers = single_arch(registry)
    checked = run(monkeypatch, registry, layers, check=True)
    assert checked["outcome"] == "exit" and checked["changed"] is True
    assert writes(checked["requests"]) == []

    first = run(monkeypatch, registry, layers)
    assert first["outcome"] == "exit", first.get("msg")
    assert (first["changed"], first["digest"]) == (True, checked["digest"])
    # check mode read (and kept) the 3 configurations and 2 layer blobs; the run reads none of them again
    assert checked["blobs"] == {"mounted": 0, "uploaded": 0, "skipped": 0, "read": 5}
    assert first["blobs"] == {"mounted": 3, "uploaded": 1, "skipped": 0, "read": 0}
    assert [(l["name"], l["version"]) for l in first["layers"]] == [("kubelet", "1.31.4"), ("ovs", "3.4")]
    assert first["base"]["version"] == "1.0" and first["manifests"] == {}
    raw, media_type = registry.manifests[("os/worker", first["tag"])]
    assert sha(raw) == first["digest"] and media_type == OCI_MANIFEST
    config = json.loads(registry.blobs[("os/worker", json.loads(raw)["config"]["digest"])])
    assert config["created"] == "2026-03-01T00:00:00Z"
    assert PASSWORD in first["no_log_values"] and PASSWORD not in json.dumps(
        {k: v for k, v in first.items() if k not in ("no_log_values", "requests")})

    again = run(monkeypatch, registry, layers)
    assert (again["changed"], again["digest"]) == (False, first["digest"])
    assert blob_reads(again["requests"]) == [] and writes(again["requests"]) == []
    assert [(l["name"], l["version"]) for l in again["layers"]] == [("kubelet", "1.31.4"), ("ovs", "3.4")]
    assert again["base"]["version"] == "1.0"

    # Pinned by digest instead of tags: the same inputs, so the same image.
    pinned = [dict(layer, image="%s@%s" % (layer["image"].split(":")[0], entry["digest"]))
              for layer, entry in zip(layers, first["layers"])]
    same = run(monkeypatch, registry, pinned, base="os/base@%s" % first["base"]["digest"])
    assert (same["changed"], same["digest"], same["inputs"]) == (False, first["digest"], first["inputs"])


def test_a_bumped_layer_reads_and_pushes_only_its_own_blobs(monkeypatch, registry):
    layers = single_arch(registry)
    first = run(monkeypatch, registry, layers)
    push_image(registry, "os/kubelet", "1.31.4", [[("usr/bin/kubelet", b"k2")]], {"version": "1.31.5"})
    second = run(monkeypatch, registry, layers)
    assert second["digest"] != first["digest"] and second["changed"] is True
    assert second["blobs"] == {"mounted": 1, "uploaded": 1, "skipped": 2, "read": 2}
    assert second["layers"][0]["version"] == "1.31.5"


@pytest.mark.parametrize("files, override, message", [
    ([("var/lib/x", b"x")], False, "Layer 'bad' (%s/os/bad) writes /var/lib/x under /var (the host's own state, which "
                                   "an image update never replaces): expected paths under /usr and /etc only."),
    ([("usr/bin/kubelet", b"x")], False, "Layers 'kubelet' and 'bad' both write /usr/bin/kubelet: expected each file "
                                         "in one layer only, or override: true on 'bad' to let it win."),
    ([("usr/bin/kubelet", b"x")], True, None),
])
def test_bad_layers_fail_before_any_write(monkeypatch, registry, files, override, message):
    layers = single_arch(registry)[:1]
    push_image(registry, "os/bad", "1", [files], {"version": "1"})
    result = run(monkeypatch, registry, layers + [dict(name="bad", image="os/bad:1", override=override)])
    if message is None:
        assert result["outcome"] == "exit" and result["changed"] is True
        return
    assert (result["outcome"], result["msg"]) == ("fail", message % registry.address if "%s" in message else message)
    assert writes(result["requests"]) == []


def test_requires_mismatch_names_label_expected_and_actual(monkeypatch, registry):
    layers = single_arch(registry)
    layers[0]["requires"] = {"labels": {"ostree.linux": "5.14.0"}}
    result = run(monkeypatch, registry, layers)
    assert result["msg"] == ("Layer 'kubelet' requires the base label 'ostree.linux' to be '5.14.0', but the base "
                             "%s/os/base@%s has '6.0.0'." % (registry.address, result["msg"].split("@")[1][:71]))
    assert writes(result["requests"]) == []


def multi_arch(fake, layer_arm64=True):
    base = push_index(fake, "os/base", "1.0", [
        (AMD64, push_image(fake, "os/base", "amd64", [[("usr/bin/bash", b"amd")]], BASE_LABELS)),
        (ARM64, push_image(fake, "os/base", "arm64", [[("usr/bin/bash", b"arm")]], BASE_LABELS, "arm64"))])
    entries = [(AMD64, push_image(fake, "os/kubelet", "amd64", [[("usr/bin/kubelet", b"ka")]], {"version": "1.31.4"}))]
    if layer_arm64:
        entries.append((ARM64, push_image(fake, "os/kubelet", "arm64", [[("usr/bin/kubelet", b"kr")]],
                                          {"version": "1.31.4"}, "arm64")))
    push_index(fake, "os/kubelet", "1.31.4", entries)
    return base


def test_a_multi_arch_base_is_composed_per_platform_into_an_index(monkeypatch, registry):
    multi_arch(registry)
    layers = [dict(name="kubelet", image="os/kubelet:1.31.4")]
    first = run(monkeypatch, registry, layers)
    assert first["outcome"] == "exit", first.get("msg")
    raw, media_type = registry.manifests[("os/worker", first["tag"])]
    index = json.loads(raw)
    assert media_type == OCI_INDEX and sha(raw) == first["digest"]
    assert {e["platform"]["architecture"]: e["digest"] for e in index["manifests"]} == {
        "amd64": first["manifests"]["amd64"], "arm64": first["manifests"]["arm64/v8"]}
    for key in ("amd64", "arm64/v8"):
        assert ("os/worker", first["manifests"][key]) in registry.manifests
    again = run(monkeypatch, registry, layers)
    assert (again["changed"], again["digest"], again["manifests"]) == (False, first["digest"], first["manifests"])
    assert blob_reads(again["requests"]) == []


def test_a_layer_without_the_platform_is_named(monkeypatch, registry):
    multi_arch(registry, layer_arm64=False)
    result = run(monkeypatch, registry, [dict(name="kubelet", image="os/kubelet:1.31.4")])
    assert result["outcome"] == "fail"
    assert result["msg"] == ("Layer 'kubelet' (%s/os/kubelet) offers no image for platform arm64/v8: expected an "
                             "index entry for it (entries: amd64)." % registry.address)
    assert writes(result["requests"]) == []


@pytest.mark.parametrize("change, message", [
    (dict(output="REG/os/worker:1"), "The option output 'REG/os/worker:1' names a tag or digest: expected a "
                                     "repository, registry/repository, and the tag in the option tag."),
    (dict(layers=[]), "The option layers is empty: expected at least one layer image."),
    (dict(layers=[dict(name="k", image="os/a:1"), dict(name="k", image="os/b:1")]),
     "The option layers[1].name 'k' is used by an earlier layer: expected unique names."),
    (dict(layers=[dict(name="Bad Name", image="os/a:1")]),
     "The option layers[0].name 'Bad Name' is invalid: expected lowercase letters, digits, '.', '_' and '-', up to "
     "63 characters."),
    (dict(tag="bad tag"), "The option tag 'bad tag' is not a tag: expected up to 128 letters, digits, '_', '.' or '-'."),
])
def test_bad_options_fail_before_any_request(monkeypatch, registry, change, message):
    if "output" in change:
        change = dict(output=change["output"].replace("REG", registry.address))
        message = message.replace("REG", registry.address)
    layers = change.pop("layers", [dict(name="kubelet", image="os/kubelet:1")])
    result = run(monkeypatch, registry, layers, **change)
    assert (result["outcome"], result["msg"]) == ("fail", message)
    assert result["requests"] == []
