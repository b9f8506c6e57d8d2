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

from ansible_collections.fleetos.layering.plugins.module_utils._errors import ImageError
from ansible_collections.fleetos.layering.plugins.module_utils.images import _compose

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
                                        "layer that only adds files."),
    (["usr/share/.wh..wh..opq", "file"], "Layer 'kubelet' (198.51.100.1:5000/fleetos/kubelet) empties /usr/share "
                                         "with the opaque whiteout /usr/share/.wh..wh..opq: expected a layer that "
                                         "only adds files."),
    ([".wh..wh..opq", "file"], "Layer 'kubelet' (198.51.100.1:5000/fleetos/kubelet) empties / with the opaque "
                               "whiteout /.wh..wh..opq: expected a layer that only adds files."),
    (["usr/lib/os-release", "file"], "Layer 'kubelet' (198.51.100.1:5000/fleetos/kubelet) carries an OS tree of its "
                                     "own (it has /usr/lib/os-release), which would replace the base's: expected a "
                                     "layer that only adds files to the base."),
    (["usr/lib/modules/6.1.0/vmlinuz", "file"], "Layer 'kubelet' (198.51.100.1:5000/fleetos/kubelet) carries an OS "
                                                "tree of its own (it has /usr/lib/modules/6.1.0/vmlinuz), which would "
                                                "replace the base's: expected a layer that only adds files to the "
                                                "base."),
    (["sysroot/ostree/repo/config", "file"], "Layer 'kubelet' (198.51.100.1:5000/fleetos/kubelet) carries an OS tree "
                                             "of its own (it has /sysroot/ostree/repo/config), which would replace the "
                                             "base's: expected a layer that only adds files to the base."),
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


# --------------------------------------------------------------------------
# layers built FROM a version of the base


def derived(name="kubelet", base_layers=("1", "2"), base_diffs=("d", "e"), own=(("3", "f"),), labels=None,
            annotations=None, history=None):
    """A layer image built FROM an image with ``base_layers`` (blob, diff_id chars), plus ``own`` layers."""
    layer = make_layer(name, own[0][0], own[0][1])
    layer["manifest"] = manifest([digest(c) for c in base_layers] + [digest(blob) for blob, dummy in own])
    if annotations:
        layer["manifest"]["annotations"] = annotations
    layer["config"] = image([digest(c) for c in base_diffs] + [digest(diff) for dummy, diff in own],
                            "2026-02-01T00:00:00Z", labels if labels is not None else {"version": "1.31.4"},
                            history=history)
    return layer


BOOTABLE = {"ostree.bootable": "true", "ostree.commit": "ab" * 32, "version": "1.0"}


@pytest.mark.parametrize("layer, found", [
    (make_layer("kubelet", "3", "f"), {"kind": "scratch"}),
    # No label says where its base ends, but its first layers are all the composed base's.
    (derived(labels={}), {"kind": "base", "boundary": 2}),
    (derived(labels=dict(BOOTABLE, **{"ostree.final-diffid": digest("e")})), {"kind": "base", "boundary": 2}),
    # Built on another base (its layers 7, 8): the label tells where that base's ostree content ends.
    (derived(base_layers=("7", "8"), base_diffs=("5", "6"), labels=dict(BOOTABLE, **{"ostree.final-diffid": digest("6")})),
     {"kind": "final-diffid", "at_least": 2, "final": digest("6")}),
    # The annotations a build tool writes name the image it was built from; they come first.
    (derived(base_layers=("7", "8"), base_diffs=("5", "6"), labels=dict(BOOTABLE, **{"ostree.final-diffid": digest("5")}),
             annotations={"org.opencontainers.image.base.digest": digest("9"),
                          "org.opencontainers.image.base.name": "quay.io/os/base:0.9"}),
     {"kind": "annotated", "digest": digest("9"), "name": "quay.io/os/base:0.9", "at_least": 1}),
    (derived(annotations={"org.opencontainers.image.base.digest": digest("b")}),
     {"kind": "annotated", "digest": digest("b"), "name": None, "at_least": 0}),
])
def test_layer_base_says_where_the_layers_of_the_base_end(layer, found):
    assert _compose.layer_base(layer, make_base()) == found


NO_BOUNDARY = ("no base boundary (neither the label ostree.final-diffid nor the annotation "
               "org.opencontainers.image.base.digest): expected a layer built FROM scratch, or FROM a version of the "
               "base %s." % BASE)


@pytest.mark.parametrize("layer, message", [
    (derived(base_layers=("7",), base_diffs=("5",), labels=dict(BOOTABLE)),
     "Layer 'kubelet' (198.51.100.1:5000/fleetos/kubelet) carries the labels of a bootable OS image (ostree.bootable, "
     "ostree.commit) and " + NO_BOUNDARY),
    (derived(base_layers=("7",), base_diffs=("5",), labels={"containers.bootc": "1"}),
     "Layer 'kubelet' (198.51.100.1:5000/fleetos/kubelet) carries the labels of a bootable OS image "
     "(containers.bootc) and " + NO_BOUNDARY),
    # Built on the base's first layer only (a base that was rebuilt since, or squashed), no label: no boundary.
    (derived(base_layers=("1",), base_diffs=("d",), labels={}),
     "Layer 'kubelet' (198.51.100.1:5000/fleetos/kubelet) contains the base's layer %s and %s" % (digest("1"), NO_BOUNDARY)),
    (derived(labels=dict(BOOTABLE, **{"ostree.final-diffid": digest("0")})),
     "Layer 'kubelet' (198.51.100.1:5000/fleetos/kubelet) has the label ostree.final-diffid %s, which names none of "
     "its layers: expected the diff_id of the last layer of the base it was built FROM." % digest("0")),
])
def test_a_layer_without_a_base_boundary_is_refused_in_one_sentence(layer, message):
    with pytest.raises(ImageError) as raised:
        _compose.layer_base(layer, make_base())
    assert raised.value.msg == message


def test_a_layer_built_from_the_base_brings_its_own_layers_only():
    history = [{"created_by": "base 1"}, {"created_by": "ENV x", "empty_layer": True}, {"created_by": "base 2"},
               {"created_by": "LABEL version=1.31.4", "empty_layer": True}, {"created_by": "COPY kubelet"}]
    layer = derived(history=history, labels={"version": "1.31.4"})
    layer.update(boundary=2, built_from={"name": BASE, "digest": digest("b"), "version": "1.0", "older": False})
    result, inputs = composed(layers=[layer])
    doc, config = json.loads(result["manifest"]), json.loads(result["config"])
    assert [entry["digest"] for entry in doc["layers"]] == [digest("1"), digest("2"), digest("3")]
    assert config["rootfs"]["diff_ids"] == [digest("d"), digest("e"), digest("f")]
    assert [h["created_by"] for h in config["history"]] == [
        "base 1", "base 2", "LABEL version=1.31.4", "COPY kubelet"]
    assert json.loads(config["config"]["Labels"]["fleetos.io/layers"]) == [
        {"name": "kubelet", "image": "198.51.100.1:5000/fleetos/kubelet", "digest": digest("3"), "version": "1.0",
         "built_from": {"name": BASE, "digest": digest("b"), "version": "1.0", "older": False}}]
    assert _compose.recorded(doc)["layers"][0]["built_from"]["digest"] == digest("b")


def test_a_layer_without_layers_of_its_own_is_refused():
    layer = derived(own=(("2", "e"),))
    layer["manifest"] = manifest([digest("7"), digest("8")])
    layer.update(boundary=2, built_from={"name": BASE, "digest": digest("9")})
    with pytest.raises(ImageError) as raised:
        _compose.check_own_layers(layer, make_base())
    assert raised.value.msg == ("Layer 'kubelet' (198.51.100.1:5000/fleetos/kubelet) adds no layer to the base it was "
                                "built FROM (%s@%s): expected at least one layer of its own." % (BASE, digest("9")))
    # Its own layers are not the composed base's either.
    layer["manifest"] = manifest([digest("7"), digest("8"), digest("2")])
    with pytest.raises(ImageError) as raised:
        _compose.check_own_layers(layer, make_base())
    assert raised.value.msg == ("Layer 'kubelet' (198.51.100.1:5000/fleetos/kubelet) contains the base's layer %s "
                                "above the base it was built FROM (%s@%s): expected layers of its own only."
                                % (digest("2"), BASE, digest("9")))
    # FROM scratch, through compose() itself: the same refusal as layer_base's.
    scratch = make_layer("kubelet", "3", "f")
    scratch["manifest"] = manifest([digest("1"), digest("3")])
    scratch["config"]["rootfs"]["diff_ids"] = [digest("d"), digest("f")]
    with pytest.raises(ImageError) as raised:
        composed(layers=[scratch])
    assert raised.value.msg == ("Layer 'kubelet' (198.51.100.1:5000/fleetos/kubelet) contains the base's layer %s "
                                "and %s" % (digest("1"), NO_BOUNDARY))


@pytest.mark.parametrize("first, at_least, expected", [
    (["1", "2"], 0, True), (["1", "2"], 2, True), (["1", "2"], 3, False), (["1"], 0, True),
    (["1", "2", "3"], 0, True), (["1", "2", "3", "4"], 0, False), (["2"], 0, False), ([], 0, False),
])
def test_begins_with_needs_the_base_s_layers_first(first, at_least, expected):
    assert _compose.begins_with(manifest([digest("1"), digest("2"), digest("3")]), manifest([digest(c) for c in first]),
                                at_least) is expected


def test_a_layer_s_own_labels_and_which_base_is_older():
    base = image([], "2026-01-01T00:00:00Z", {"version": "1.0", "ostree.linux": "6"})
    layer = image([], "2026-02-01T00:00:00.5Z", {"version": "1.0", "ostree.linux": "6", "kubelet": "1.31"})
    assert _compose.own_labels(layer, base) == {"kubelet": "1.31"}
    assert (_compose.older(base, layer), _compose.older(layer, base), _compose.older({}, layer)) == (True, False, False)


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
