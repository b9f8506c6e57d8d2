# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""_compose: the layer rules, determinism of the composed config and manifest, multi-arch, and every refusal."""

from __future__ import annotations

import copy
import gzip
import io
import json
import tarfile

import pytest

from ansible_collections.fleetos.layering.plugins.module_utils import _compose
from ansible_collections.fleetos.layering.plugins.module_utils._errors import ImageError

BASE = "198.51.100.1:5000/fleetos/lab-os"


def digest(char):
    return "sha256:" + char * 64


def image(diff_ids, created, labels=None, architecture="amd64", history=None):
    config = {"architecture": architecture, "os": "linux", "created": created,
              "config": {"Labels": labels or {}}, "rootfs": {"type": "layers", "diff_ids": diff_ids}}
    if history is not None:
        config["history"] = history
    return config


def manifest(layers, config_digest=None):
    return {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": _compose.OCI_CONFIG, "digest": config_digest or digest("c"), "size": 10},
            "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": d, "size": 100}
                       for d in layers]}


def make_base(labels=None):
    labels = {"ostree.bootable": "true", "ostree.commit": "ab" * 32, "ostree.linux": "6.0.0-fleetlab",
              "version": "1.0"} if labels is None else labels
    return dict(name=BASE, digest=digest("b"), manifest=manifest([digest("1"), digest("2")]),
                config=image([digest("d"), digest("e")], "2026-01-01T00:00:00Z", labels,
                             history=[{"created_by": "base 1"}, {"created_by": "base 2"}]))


def make_layer(name, blob, diff, created="2026-02-01T00:00:00Z", version="1.0", **extra):
    layer = dict(name=name, image="198.51.100.1:5000/fleetos/%s" % name, digest=digest(blob),
                 manifest=manifest([digest(blob)]), config=image([digest(diff)], created, {"version": version}),
                 version=version, override=False, requires={})
    layer.update(extra)
    return layer


def composed(base=None, layers=None):
    base = base or make_base()
    layers = layers if layers is not None else [make_layer("kubelet", "3", "f"), make_layer("ovs", "4", "a")]
    inputs = _compose.inputs_digest(base, layers)
    return _compose.compose(base, layers, inputs), inputs


# --------------------------------------------------------------------------
# determinism and the output


def test_the_same_inputs_give_the_same_bytes():
    first, inputs = composed()
    second, again = composed(copy.deepcopy(make_base()), [make_layer("kubelet", "3", "f"), make_layer("ovs", "4", "a")])
    assert inputs == again
    assert (first["config"], first["manifest"], first["digest"]) == (
        second["config"], second["manifest"], second["digest"])
    assert first["digest"] == _compose.sha256_digest(first["manifest"])
    assert first["config_digest"] == _compose.sha256_digest(first["config"])


def test_the_output_is_canonical_json():
    result, dummy = composed()
    for raw in (result["config"], result["manifest"]):
        assert raw == json.dumps(json.loads(raw), sort_keys=True, separators=(",", ":")).encode()


@pytest.mark.parametrize("change", ["layer digest", "base digest", "override", "requires", "order"])
def test_changed_inputs_give_another_digest(change):
    base = make_base()
    layers = [make_layer("kubelet", "3", "f"), make_layer("ovs", "4", "a")]
    before, inputs = composed(copy.deepcopy(base), copy.deepcopy(layers))
    if change == "layer digest":
        layers[0] = make_layer("kubelet", "5", "9", version="1.1")
    elif change == "base digest":
        base["digest"] = digest("7")
    elif change == "override":
        layers[1]["override"] = True
    elif change == "requires":
        layers[0]["requires"] = {"labels": {"ostree.linux": "6.0.0-fleetlab"}}
    else:
        layers.reverse()
    after, changed_inputs = composed(base, layers)
    assert changed_inputs != inputs
    assert after["digest"] != before["digest"]


def test_the_config_concatenates_and_keeps_the_base_labels():
    result, inputs = composed()
    config = json.loads(result["config"])
    assert config["rootfs"]["diff_ids"] == [digest("d"), digest("e"), digest("f"), digest("a")]
    assert [h["created_by"] for h in config["history"]] == [
        "base 1", "base 2", "fleetos.layering: layer kubelet 1.0", "fleetos.layering: layer ovs 1.0"]
    labels = config["config"]["Labels"]
    assert labels["ostree.commit"] == "ab" * 32 and labels["version"] == "1.0" and labels["ostree.bootable"] == "true"
    assert labels["org.opencontainers.image.base.name"] == BASE
    assert labels["org.opencontainers.image.base.digest"] == digest("b")
    assert labels["fleetos.io/inputs"] == inputs
    assert json.loads(labels["fleetos.io/layers"]) == [
        {"name": "kubelet", "image": "198.51.100.1:5000/fleetos/kubelet", "digest": digest("3"), "version": "1.0"},
        {"name": "ovs", "image": "198.51.100.1:5000/fleetos/ovs", "digest": digest("4"), "version": "1.0"}]
    # The newest input's created, never the wall clock.
    assert config["created"] == "2026-02-01T00:00:00Z"


def test_the_manifest_lists_base_then_layer_blobs_and_records_the_inputs():
    result, inputs = composed()
    doc = json.loads(result["manifest"])
    assert [layer["digest"] for layer in doc["layers"]] == [digest("1"), digest("2"), digest("3"), digest("4")]
    assert doc["config"] == {"mediaType": _compose.OCI_CONFIG, "digest": result["config_digest"],
                             "size": len(result["config"])}
    assert doc["annotations"]["fleetos.io/inputs"] == inputs
    assert _compose.recorded(doc) == {"inputs": inputs, "layers": [
        {"name": "kubelet", "image": "198.51.100.1:5000/fleetos/kubelet", "digest": digest("3"), "version": "1.0"},
        {"name": "ovs", "image": "198.51.100.1:5000/fleetos/ovs", "digest": digest("4"), "version": "1.0"}],
        "base": {"name": BASE, "digest": digest("b"), "version": "1.0"}}
    assert [blob["source"] for blob in result["layers"]] == [BASE, BASE, "198.51.100.1:5000/fleetos/kubelet",
                                                             "198.51.100.1:5000/fleetos/ovs"]


def test_final_diffid_is_the_base_s_last_diff_id_unless_the_base_has_one():
    config = json.loads(composed()[0]["config"])
    assert config["config"]["Labels"]["ostree.final-diffid"] == digest("e")
    base = make_base()
    base["config"]["config"]["Labels"]["ostree.final-diffid"] = digest("d")
    config = json.loads(composed(base)[0]["config"])
    assert config["config"]["Labels"]["ostree.final-diffid"] == digest("d")


def test_docker_layer_media_types_become_oci():
    base = make_base()
    base["manifest"]["layers"][0]["mediaType"] = "application/vnd.docker.image.rootfs.diff.tar.gzip"
    doc = json.loads(composed(base)[0]["manifest"])
    assert doc["layers"][0]["mediaType"] == "application/vnd.oci.image.layer.v1.tar+gzip"


def test_history_is_padded_to_one_entry_per_layer():
    layer = make_layer("kubelet", "3", "f")
    layer["config"]["history"] = [{"created_by": "own", "empty_layer": True}]
    config = json.loads(composed(layers=[layer])[0]["config"])
    assert [h["created_by"] for h in config["history"]][2:] == ["own", "fleetos.layering: layer kubelet 1.0"]


def test_newest_created_compares_times_not_text():
    assert _compose.newest_created([{"created": "2026-01-01T10:00:00+02:00"},
                                    {"created": "2026-01-01T09:00:00.123456789Z"}]) == "2026-01-01T09:00:00.123456789Z"
    assert _compose.newest_created([{}, {"created": "garbage"}]) is None


def test_default_tag_names_the_inputs():
    assert _compose.default_tag("sha256:" + "0123456789abcdef" * 4) == "fleetos-" + "0123456789abcdef" * 2


def test_multi_arch_index_is_deterministic_and_lists_each_platform():
    base = make_base()
    inputs = _compose.inputs_digest(base, [make_layer("kubelet", "3", "f")])
    amd = _compose.compose(base, [make_layer("kubelet", "3", "f")], inputs, {"architecture": "amd64", "os": "linux"})
    arm_base = make_base()
    arm_base["config"]["architecture"] = "arm64"
    arm = _compose.compose(arm_base, [make_layer("kubelet", "5", "9")], inputs,
                           {"architecture": "arm64", "os": "linux", "variant": "v8"})
    raw, index_digest = _compose.index([amd, arm], {"fleetos.io/inputs": inputs})
    again = _compose.index([amd, arm], {"fleetos.io/inputs": inputs})
    assert (raw, index_digest) == again
    doc = json.loads(raw)
    assert [(e["platform"]["architecture"], e["digest"]) for e in doc["manifests"]] == [
        ("amd64", amd["digest"]), ("arm64", arm["digest"])]
    assert amd["digest"] != arm["digest"]
    assert _compose.recorded(doc)["inputs"] == inputs


# --------------------------------------------------------------------------
# the rules


def tar_bytes(members, compress=False):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, kind in members:
            info = tarfile.TarInfo(name)
            info.type = {"file": tarfile.REGTYPE, "dir": tarfile.DIRTYPE, "symlink": tarfile.SYMTYPE,
                         "chardev": tarfile.CHRTYPE, "fifo": tarfile.FIFOTYPE}[kind]
            data = b"x" if kind == "file" else b""
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    raw = buffer.getvalue()
    return gzip.compress(raw, mtime=0) if compress else raw


@pytest.mark.parametrize("compress", [False, True])
def test_tar_entries_lists_paths_and_kinds(compress):
    raw = tar_bytes([("./usr", "dir"), ("usr/bin/kubelet", "file"), ("/etc/x", "symlink")], compress)
    assert _compose.tar_entries(io.BytesIO(raw)) == [["usr", "dir"], ["usr/bin/kubelet", "file"], ["etc/x", "symlink"]]


def test_tar_entries_refuses_what_is_not_a_tar():
    with pytest.raises(ImageError, match="not a readable tar archive"):
        _compose.tar_entries(io.BytesIO(b"\x00garbage" * 100))


LAYER = {"name": "kubelet", "image": "198.51.100.1:5000/fleetos/kubelet"}


def test_a_layer_under_usr_and_etc_passes():
    _compose.check_entries(LAYER, [["", "dir"], ["usr", "dir"], ["usr/bin/kubelet", "file"], ["etc/kubelet.conf", "file"],
                                   ["usr/lib/x", "symlink"]])


@pytest.mark.parametrize("entry, message", [
    (["var/lib/kubelet/x", "file"], "Layer 'kubelet' (198.51.100.1:5000/fleetos/kubelet) writes /var/lib/kubelet/x "
                                    "under /var (the host's own state, which an image update never replaces): "
                                    "expected paths under /usr and /etc only."),
    (["boot/vmlinuz", "file"], "Layer 'kubelet' (198.51.100.1:5000/fleetos/kubelet) writes /boot/vmlinuz under /boot "
                               "(the bootloader's, which ostree manages): expected paths under /usr and /etc only."),
    (["sysroot/ostree/x", "file"], "Layer 'kubelet' (198.51.100.1:5000/fleetos/kubelet) writes /sysroot/ostree/x "
                                   "under /sysroot (the physical root, which ostree manages): expected paths under "
                                   "/usr and /etc only."),
    (["opt/tool", "file"], "Layer 'kubelet' (198.51.100.1:5000/fleetos/kubelet) writes /opt/tool, outside /usr and "
                           "/etc: expected paths under /usr and /etc only."),
    (["usr/lib/.wh.libfoo.so", "file"], "Layer 'kubelet' (198.51.100.1:5000/fleetos/kubelet) removes "
                                        "/usr/lib/libfoo.so with the whiteout /usr/lib/.wh.libfoo.so: expected a "
                                        "layer built FROM scratch that only adds files."),
    (["usr/lib/.wh..wh..opq", "file"], "Layer 'kubelet' (198.51.100.1:5000/fleetos/kubelet) removes "
                                       "/usr/lib/.wh..opq with the whiteout /usr/lib/.wh..wh..opq: expected a layer "
                                       "built FROM scratch that only adds files."),
    (["usr/dev/null", "chardev"], "Layer 'kubelet' (198.51.100.1:5000/fleetos/kubelet) has a character device node "
                                  "at /usr/dev/null: expected regular files, directories and links only."),
    (["usr/run/pipe", "fifo"], "Layer 'kubelet' (198.51.100.1:5000/fleetos/kubelet) has a FIFO at /usr/run/pipe: "
                               "expected regular files, directories and links only."),
    (["usr/../var/x", "file"], "Layer 'kubelet' (198.51.100.1:5000/fleetos/kubelet) has the path /usr/../var/x, "
                               "which leaves the root: expected paths under /usr and /etc."),
])
def test_each_bad_entry_is_one_sentence_naming_layer_and_path(entry, message):
    with pytest.raises(ImageError) as raised:
        _compose.check_entries(LAYER, [["usr", "dir"], entry])
    assert raised.value.msg == message


def _entries(table):
    return lambda layer: table[layer["name"]]


def test_two_layers_writing_one_file_conflict_unless_the_later_overrides():
    one, two = {"name": "kubelet"}, {"name": "ovs"}
    table = {"kubelet": [["usr", "dir"], ["usr/bin/tool", "file"]], "ovs": [["usr", "dir"], ["usr/bin/tool", "file"]]}
    with pytest.raises(ImageError) as raised:
        _compose.check_conflicts([one, two], _entries(table))
    assert raised.value.msg == ("Layers 'kubelet' and 'ovs' both write /usr/bin/tool: expected each file in one layer "
                                "only, or override: true on 'ovs' to let it win.")
    _compose.check_conflicts([one, dict(two, override=True)], _entries(table))
    # An override on the earlier layer does not let the later one win.
    with pytest.raises(ImageError):
        _compose.check_conflicts([dict(one, override=True), two], _entries(table))


def test_etc_and_usr_etc_are_the_same_file_and_shared_directories_are_fine():
    table = {"a": [["etc", "dir"], ["etc/x.conf", "file"]], "b": [["usr/etc", "dir"], ["usr/etc/x.conf", "file"]]}
    with pytest.raises(ImageError, match="Layers 'a' and 'b' both write /usr/etc/x.conf"):
        _compose.check_conflicts([{"name": "a"}, {"name": "b"}], _entries(table))
    table = {"a": [["usr/lib", "dir"], ["usr/lib/a", "file"]], "b": [["usr/lib", "dir"], ["usr/lib/b", "file"]]}
    _compose.check_conflicts([{"name": "a"}, {"name": "b"}], _entries(table))


def test_requires_compares_base_labels():
    layer = {"name": "kubelet", "requires": {"labels": {"ostree.linux": "5.14.0-570.el9.x86_64"}}}
    with pytest.raises(ImageError) as raised:
        _compose.check_requires(layer, {"ostree.linux": "6.0.0-fleetlab"}, "reg/os@sha256:x")
    assert raised.value.msg == ("Layer 'kubelet' requires the base label 'ostree.linux' to be '5.14.0-570.el9.x86_64', "
                                "but the base reg/os@sha256:x has '6.0.0-fleetlab'.")
    with pytest.raises(ImageError) as raised:
        _compose.check_requires(layer, {}, "reg/os@sha256:x")
    assert raised.value.msg == ("Layer 'kubelet' requires the base label 'ostree.linux' to be '5.14.0-570.el9.x86_64', "
                                "but the base reg/os@sha256:x has no label 'ostree.linux'.")
    _compose.check_requires(layer, {"ostree.linux": "5.14.0-570.el9.x86_64"}, "reg/os@sha256:x")


def test_a_layer_built_from_the_base_is_refused():
    layer = make_layer("kubelet", "3", "f")
    layer["manifest"] = manifest([digest("1"), digest("3")])
    layer["config"]["rootfs"]["diff_ids"] = [digest("d"), digest("f")]
    with pytest.raises(ImageError) as raised:
        composed(layers=[layer])
    assert raised.value.msg == ("Layer 'kubelet' (198.51.100.1:5000/fleetos/kubelet) contains the base's layer %s: "
                                "expected an image built FROM scratch." % digest("1"))


def test_diff_ids_must_match_the_layers():
    layer = make_layer("kubelet", "3", "f")
    layer["config"]["rootfs"]["diff_ids"] = []
    with pytest.raises(ImageError) as raised:
        composed(layers=[layer])
    assert raised.value.msg == ("The configuration of layer 'kubelet' (198.51.100.1:5000/fleetos/kubelet) lists 0 "
                                "diff_ids for 1 layers: expected one per layer.")


def test_an_index_is_not_a_layer_manifest():
    layer = make_layer("kubelet", "3", "f")
    layer["manifest"] = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": []}
    with pytest.raises(ImageError, match="is not a single-platform image manifest"):
        composed(layers=[layer])


def test_a_file_is_named_before_its_directory():
    with pytest.raises(ImageError, match="writes /var/lib/x under /var"):
        _compose.check_entries(LAYER, [["var", "dir"], ["var/lib", "dir"], ["var/lib/x", "file"]])
    with pytest.raises(ImageError, match="writes /var under /var"):
        _compose.check_entries(LAYER, [["var", "dir"]])


def test_a_short_base_history_is_padded_too():
    base = make_base()
    base["config"]["history"] = [{"created_by": "base 1"}]
    config = json.loads(composed(base)[0]["config"])
    assert [h["created_by"] for h in config["history"]] == [
        "base 1", "fleetos.layering: base %s" % BASE, "fleetos.layering: layer kubelet 1.0",
        "fleetos.layering: layer ovs 1.0"]
