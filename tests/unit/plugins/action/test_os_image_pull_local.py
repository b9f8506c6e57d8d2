# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""os_image_pull on the controller (the local connection): the collection's registry client reads a TLS registry
with Bearer auth served by the test, no command but the plugin's look-ups runs; what it returns and the OCI
layout it writes are what the skopeo path gives (real skopeo, against the same registry, when it is installed)."""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import shutil
import subprocess

import pytest

from ansible_collections.fleetos.layering.tests.unit.plugins.action import test_os_image_pull
from ansible_collections.fleetos.layering.tests.unit.plugins.module_utils.images.test__registry import (
    PASSWORD,
    TOKEN,
    USER,
    FakeRegistry,
)
from ansible_collections.fleetos.layering.plugins.module_utils.images import _auth
from ansible_collections.fleetos.layering.plugins.plugin_utils.host import _pull

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
REPO = "fleetos/lab-os"
COMMIT = "5d3965ddc23da6be463b043cd818e26108286f028f95f1bdf9806372b17368fd"


def sha(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


class Served:
    """An amd64 and an arm64 image behind an OCI index tagged 1.0, their blobs in the fake registry."""

    def __init__(self, registry):
        self.registry = registry
        self.layers = {}
        self.platforms = {}
        entries = []
        for architecture, variant in (("amd64", None), ("arm64", "v8")):
            # Compressed as registries serve layers: skopeo would compress a plain tar layer into its copy.
            tar = ("layer of %s" % architecture).encode() * 100
            layer = gzip.compress(tar, mtime=0)
            config = json.dumps({"architecture": architecture, "os": "linux",
                                 "config": {"Labels": {"ostree.bootable": "true", "ostree.commit": COMMIT,
                                                       "version": "1.0"}},
                                 "rootfs": {"type": "layers", "diff_ids": [sha(tar)]}}).encode()
            manifest = json.dumps({"schemaVersion": 2, "mediaType": OCI_MANIFEST,
                                   "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                                              "digest": sha(config), "size": len(config)},
                                   "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                                               "digest": sha(layer), "size": len(layer)}]}).encode()
            registry.blobs[(REPO, sha(layer))] = layer
            registry.blobs[(REPO, sha(config))] = config
            registry.add_manifest(REPO, architecture, manifest)
            self.layers[architecture] = sha(layer)
            self.platforms[architecture] = sha(manifest)
            platform = {"architecture": architecture, "os": "linux"}
            if variant:
                platform["variant"] = variant
            entries.append({"mediaType": OCI_MANIFEST, "digest": sha(manifest), "size": len(manifest),
                            "platform": platform})
        self.index = json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": entries,
                                 "annotations": {"fleetos.io/inputs": "sha256:" + "1" * 64}}).encode()
        registry.add_manifest(REPO, "1.0", self.index, OCI_INDEX)
        self.image = "%s/%s:1.0" % (registry.address, REPO)


@pytest.fixture
def served(tmp_path):
    registry = FakeRegistry(tls_dir=tmp_path)
    yield Served(registry)
    registry.close()


@pytest.fixture
def host(monkeypatch, tmp_path):
    """The controller's look-ups faked as for the skopeo path (test_os_image_pull.fake_pull_host: ``uname -m``
    answers x86_64, ``test``, ``cat``, ``mkdir`` and the blob listing run here); no auth file of rpm-ostree's nor of
    the containers tools' exists but the test's; every other command in ``state["calls"]``."""
    monkeypatch.setenv("REGISTRY_AUTH_FILE", str(tmp_path / "registry-auth.json"))
    return test_os_image_pull.fake_pull_host(monkeypatch, tmp_path)


def auth_file(tmp_path, registry, name="auth.json"):
    path = tmp_path / name
    login = base64.b64encode(("%s:%s" % (USER, PASSWORD)).encode()).decode()
    path.write_text(json.dumps({"auths": {registry.address: {"auth": login}}}))
    return str(path)


def run(args, check_mode=False, diff=False, failed=False):
    """The action's result on the controller (the local connection)."""
    return test_os_image_pull.run(args, check_mode=check_mode, diff=diff, failed=failed, transport="local")


def manifest_reads(registry):
    """The manifests read with credentials (the first, unauthenticated request only meets the challenge)."""
    return [path for method, path, sent in registry.requests if method == "GET" and "/manifests/" in path and sent]


def blob_reads(registry):
    return [path.rsplit("/", 1)[-1] for method, path, sent in registry.requests
            if method == "GET" and "/blobs/" in path and sent]


def test_resolved_reads_the_index_only_with_a_token_and_runs_no_command(served, host, tmp_path):
    certs = str(tmp_path / "certs.d")
    result = run({"image": served.image, "state": "resolved", "auth_file": auth_file(tmp_path, served.registry),
                  "ca_cert_dir": certs})
    assert result["digest"] == sha(served.index)
    assert result["image"] == "%s/%s@%s" % (served.registry.address, REPO, sha(served.index))
    assert result["index"] is True
    assert result["manifests"] == {"amd64": served.platforms["amd64"], "arm64/v8": served.platforms["arm64"]}
    assert result["platform_digest"] == served.platforms["amd64"]
    assert result["annotations"] == {"fleetos.io/inputs": "sha256:" + "1" * 64}
    assert result["changed"] is False
    # Only the look-ups ran on the controller (uname -m, test, cat of the auth file): no skopeo.
    assert host["calls"] == []
    assert manifest_reads(served.registry) == ["/v2/%s/manifests/1.0" % REPO]
    assert blob_reads(served.registry) == []
    assert served.registry.token_requests, "the token service was not asked"
    assert TOKEN not in json.dumps(result) and PASSWORD not in json.dumps(result)


def test_inspected_reads_the_platform_manifest_and_its_config_once(served, host, tmp_path):
    result = run({"image": served.image, "architecture": "arm64", "auth_file": auth_file(tmp_path, served.registry),
                  "ca_cert_dir": str(tmp_path / "certs.d")})
    assert result["platform_digest"] == served.platforms["arm64"]
    assert result["labels"] == {"ostree.bootable": "true", "ostree.commit": COMMIT, "version": "1.0"}
    assert (result["ostree_commit"], result["version"], result["architecture"]) == (COMMIT, "1.0", "arm64")
    assert result["diff_ids"] is None  # no ostree.final-diffid label: not read
    assert host["calls"] == []
    config = [digest for digest in blob_reads(served.registry) if digest != served.layers["arm64"]]
    assert len(config) == 1 and served.layers["arm64"] not in blob_reads(served.registry)


def test_present_writes_an_oci_layout_once_and_check_mode_predicts_it(served, host, tmp_path):
    cache = tmp_path / "cache"
    args = {"image": served.image, "state": "present", "cache_dir": str(cache),
            "auth_file": auth_file(tmp_path, served.registry), "ca_cert_dir": str(tmp_path / "certs.d")}
    predicted = run(args, check_mode=True, diff=True)
    assert predicted["changed"] is True and not cache.exists()
    assert predicted["diff"]["before"]["cached"] is False
    first = run(args)
    assert first["changed"] is True
    # The prediction names the manifest and the layers; the configuration comes too (as with skopeo).
    assert set(predicted["fetched_blobs"]) < set(first["fetched_blobs"])
    assert served.layers["amd64"] in first["fetched_blobs"] and served.platforms["amd64"] in first["fetched_blobs"]
    index = json.loads((cache / "index.json").read_text())
    tag = _pull.layout_tag("%s/%s" % (served.registry.address, REPO), served.platforms["amd64"])
    assert [(entry["digest"], entry["annotations"]["org.opencontainers.image.ref.name"])
            for entry in index["manifests"]] == [(served.platforms["amd64"], tag)]
    assert json.loads((cache / "oci-layout").read_text()) == {"imageLayoutVersion": "1.0.0"}
    for digest in first["fetched_blobs"]:
        data = (cache / "blobs" / "sha256" / digest.split(":", 1)[1]).read_bytes()
        assert sha(data) == digest
    assert not list(cache.rglob(".tmp-*"))
    # The index and the platform's manifest once each per run (the inspection and the copy share the manifest).
    assert manifest_reads(served.registry) == ["/v2/%s/manifests/1.0" % REPO,
                                               "/v2/%s/manifests/%s" % (REPO, served.platforms["amd64"])] * 2
    again = run(args)
    assert (again["changed"], again["fetched_blobs"]) == (False, [])


def test_a_missing_tag_is_one_sentence_naming_the_image(served, host, tmp_path):
    image = "%s/%s:9.9" % (served.registry.address, REPO)
    result = run({"image": image, "auth_file": auth_file(tmp_path, served.registry),
                  "ca_cert_dir": str(tmp_path / "certs.d")}, failed=True)
    assert result["msg"] == "Failed to resolve image '%s': the registry has no such image (manifest unknown)." % image


def test_an_untrusted_certificate_and_refused_credentials_are_named(served, host, tmp_path):
    result = run({"image": served.image, "state": "resolved", "auth_file": auth_file(tmp_path, served.registry)},
                 failed=True)
    assert result["msg"] == ("Failed to resolve image '%s': the registry's TLS certificate is not trusted (unknown CA "
                             "or wrong certificate)." % served.image)
    result = run({"image": served.image, "state": "resolved", "username": USER, "password": "wrong",
                  "ca_cert_dir": str(tmp_path / "certs.d")}, failed=True)
    assert result["msg"] == ("Failed to resolve image '%s': the registry's token service refused the credentials "
                             "(unauthorized)." % served.image)
    assert "wrong" not in json.dumps(result)


def test_without_credentials_the_containers_auth_file_is_read(served, host, tmp_path, monkeypatch):
    monkeypatch.setenv("REGISTRY_AUTH_FILE", auth_file(tmp_path, served.registry, "registry-auth.json"))
    result = run({"image": served.image, "state": "resolved", "ca_cert_dir": str(tmp_path / "certs.d")})
    assert result["digest"] == sha(served.index)
    monkeypatch.setenv("REGISTRY_AUTH_FILE", str(tmp_path / "none.json"))
    result = run({"image": served.image, "state": "resolved", "ca_cert_dir": str(tmp_path / "certs.d")}, failed=True)
    assert result["msg"] == ("Failed to resolve image '%s': the registry's token service requires credentials and "
                             "none apply to the image (unauthorized)." % served.image)


def test_an_executable_keeps_skopeo_on_the_controller(served, host, tmp_path):
    skopeo = tmp_path / "skopeo"
    skopeo.write_text("#!/bin/sh\nexit 1\n")
    skopeo.chmod(0o755)
    host["results"] = [(0, served.index.decode(), "")]
    run({"image": served.image, "state": "resolved", "executable": str(skopeo)})
    assert [argv[:3] for argv, dummy in host["calls"]] == [[str(skopeo), "inspect", "--raw"]]
    assert served.registry.requests == []


def test_default_auth_files_follow_containers_auth_json():
    assert _auth.default_auth_files({"REGISTRY_AUTH_FILE": "/x/auth.json"}, "/home/u", 1000) == ["/x/auth.json"]
    assert _auth.default_auth_files({"XDG_RUNTIME_DIR": "/run/user/1000"}, "/home/u", 1000) == [
        "/run/user/1000/containers/auth.json", "/home/u/.config/containers/auth.json", "/home/u/.docker/config.json",
        "/home/u/.dockercfg"]
    assert _auth.default_auth_files({"XDG_CONFIG_HOME": "/cfg"}, "/root", 0)[:2] == [
        "/run/containers/0/auth.json", "/cfg/containers/auth.json"]


@pytest.mark.skipif(shutil.which("skopeo") is None, reason="skopeo is not installed: nothing to compare with")
def test_the_reader_gives_what_skopeo_gives(served, host, tmp_path):
    certs = str(tmp_path / "certs.d")
    authfile = auth_file(tmp_path, served.registry)
    pinned = "%s/%s@%s" % (served.registry.address, REPO, served.platforms["amd64"])

    def skopeo(*argv):
        proc = subprocess.run(["skopeo", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False,
                              timeout=120)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    common = ["--authfile", authfile, "--cert-dir", certs]
    real = json.loads(skopeo("inspect", "--no-tags", *common, "docker://" + pinned))
    result = run({"image": served.image, "auth_file": authfile, "ca_cert_dir": certs})
    assert (result["platform_digest"], result["labels"], result["architecture"]) == (
        real["Digest"], real["Labels"], real["Architecture"])
    real_raw = skopeo("inspect", "--raw", *common, "docker://" + served.image)
    assert sha(real_raw) == result["digest"]
    theirs, ours = tmp_path / "skopeo-layout", tmp_path / "reader-layout"
    skopeo("copy", "--quiet", "--remove-signatures", "--src-authfile", authfile, "--src-cert-dir", certs,
           "docker://" + pinned, "oci:%s:x" % theirs)
    run({"image": served.image, "state": "present", "cache_dir": str(ours), "auth_file": authfile,
         "ca_cert_dir": certs})
    assert sorted(p.name for p in (theirs / "blobs" / "sha256").iterdir()) == sorted(
        p.name for p in (ours / "blobs" / "sha256").iterdir())
    assert [entry["digest"] for entry in json.loads((theirs / "index.json").read_text())["manifests"]] == [
        entry["digest"] for entry in json.loads((ours / "index.json").read_text())["manifests"]]
