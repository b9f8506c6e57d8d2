# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""LayeredImage objects (load, validate), their compositions by digest, the lock (text, diff, summary)."""

from __future__ import annotations

import copy
import json

import pytest
import yaml

from ansible_collections.fleetos.layering.plugins.module_utils._errors import FleetosError, InvalidInputError
from ansible_collections.fleetos.layering.plugins.plugin_utils._stats import job_stats
from ansible_collections.fleetos.layering.plugins.plugin_utils.images import _layered

REG = "reg.example.com"
D = {key: "sha256:" + key * 64 for key in "abcdef0123"}
GOOD = {
    "apiVersion": "fleetos.io/v1alpha1", "kind": "LayeredImage",
    "metadata": {"name": "worker", "annotations": {"fleetos.io/defined-in": "layered_images/w.yaml document 1"}},
    "spec": {
        "base": {"image": REG + "/os/base:9.6"},
        "layers": [{"name": "kubelet", "image": REG + "/os/kubelet:1.31.4",
                    "requires": {"labels": {"ostree.linux": "5.14"}}},
                   {"name": "ovs", "image": REG + "/os/ovs@" + D["a"], "override": True}],
        "output": REG + "/os/worker",
        "pullSecret": {"name": "registry_creds"},
    },
}
PREFIX = "layered_images/w.yaml document 1 (LayeredImage 'worker'): "


def with_spec(path, value):
    obj = copy.deepcopy(GOOD)
    node = obj
    keys = path.split(".")
    for key in keys[:-1]:
        node = node[int(key)] if key.isdigit() else node[key]
    if value is KeyError:
        del node[keys[-1]]
    else:
        node[int(keys[-1]) if keys[-1].isdigit() else keys[-1]] = value
    return obj


def test_validate_normalizes_a_good_object():
    record = _layered.validate(GOOD)
    assert record == {
        "name": "worker", "defined_in": "layered_images/w.yaml document 1", "base": REG + "/os/base:9.6",
        "layers": [{"name": "kubelet", "image": REG + "/os/kubelet:1.31.4",
                    "requires": {"labels": {"ostree.linux": "5.14"}}, "override": False},
                   {"name": "ovs", "image": REG + "/os/ovs@" + D["a"], "requires": {"labels": {}}, "override": True}],
        "output": REG + "/os/worker", "pull_secret": "registry_creds"}


@pytest.mark.parametrize("path, value, message", [
    ("kind", "MachineImage", "kind 'MachineImage' is not LayeredImage"),
    ("apiVersion", "v1", "apiVersion 'v1' is not fleetos.io/v1alpha1"),
    ("spec.extra", 1, "spec.extra is not a LayeredImage spec field; allowed: base, layers, output, pullSecret"),
    ("spec.base", KeyError, "spec.base must be a mapping with an image"),
    ("spec.base.image", "base 9.6", "spec.base.image 'base 9.6' contains whitespace"),
    ("spec.base.image", "base:9.6", "spec.base.image 'base:9.6' names no registry: expected registry[:port]/repository"),
    ("spec.layers", [], "spec.layers must be a non-empty list of layers with a name and an image"),
    ("spec.layers.1.name", "kubelet", "spec.layers[1].name 'kubelet' names two layers; give each layer its own name"),
    ("spec.layers.0.name", "Kubelet", "spec.layers[0].name 'Kubelet' is not a layer name"),
    ("spec.layers.0.image", None, "spec.layers[0].image must be a non-empty image reference"),
    ("spec.layers.0.requires", {"labels": {"a": 1}}, "spec.layers[0].requires.labels must map label names to string"),
    ("spec.layers.0.requires", {"annotations": {}}, "spec.layers[0].requires must be a mapping with labels only"),
    ("spec.layers.1.override", "yes", "spec.layers[1].override is 'yes', not true or false"),
    ("spec.layers.1.from", "x", "spec.layers[1].from is not a layer field; allowed: name, image, requires, override"),
    ("spec.output", REG + "/os/worker:1", "spec.output 'reg.example.com/os/worker:1' names a tag or digest"),
    ("spec.output", KeyError, "spec.output must be a non-empty repository"),
    ("spec.pullSecret", "creds", "spec.pullSecret must be {name: VARIABLE}"),
    ("metadata.name", "Worker", "metadata.name 'Worker' is not a DNS-1123 subdomain"),
])
def test_validate_names_file_object_and_field(path, value, message):
    with pytest.raises(InvalidInputError) as info:
        _layered.validate(with_spec(path, value))
    shown = PREFIX.replace("'worker'", "'Worker'") if path == "metadata.name" else PREFIX
    assert info.value.msg.startswith(shown + message), info.value.msg


def test_two_objects_with_one_name_are_refused():
    other = copy.deepcopy(GOOD)
    other["metadata"]["annotations"]["fleetos.io/defined-in"] = "layered_images/x.yaml document 2"
    with pytest.raises(InvalidInputError) as info:
        _layered.validate_set([GOOD, other])
    assert info.value.msg == ("layered_images/w.yaml document 1 and layered_images/x.yaml document 2 both define "
                              "the LayeredImage 'worker'; give each LayeredImage its own name")


def test_load_dir_reads_validates_and_names_bad_files(tmp_path):
    directory = tmp_path / "layered_images"
    directory.mkdir()
    good = copy.deepcopy(GOOD)
    del good["metadata"]["annotations"]
    (directory / "worker.yaml").write_text(yaml.safe_dump(good))
    record = _layered.load_dir(str(directory), relative_to=str(tmp_path))
    assert record["error"] is None and record["files"] == ["layered_images/worker.yaml"]
    assert [image["name"] for image in record["images"]] == ["worker"]
    assert record["images"][0]["defined_in"] == "layered_images/worker.yaml document 1"

    (directory / "bad.yml").write_text("kind: LayeredImage\nkind: again\n")
    (directory / "list.yaml").write_text("- 1\n")
    record = _layered.load_dir(str(directory), relative_to=str(tmp_path))
    assert record["images"] == []
    assert record["errors"] == [
        "layered_images/bad.yml is not valid YAML: line 2: the key 'kind' appears twice in one mapping (first on "
        "line 1); give each key once",
        "layered_images/list.yaml document 1 is a list, not a LayeredImage mapping"]
    assert record["error"] == ("LayeredImage manifests did not load: " + record["errors"][0]
                               + " (and 1 more file that did not load)")


def test_load_dir_missing_directory(tmp_path):
    assert _layered.load_dir(str(tmp_path / "none"))["images"] == []
    record = _layered.load_dir(str(tmp_path / "none"), required=True)
    assert record["error"] == "LayeredImage manifests did not load: the LayeredImage manifests directory %s does not exist" % (
        tmp_path / "none")


def resolutions(*pairs, failed=()):
    results = [{"item": ref, "digest": digest, "changed": False} for ref, digest in pairs]
    results += [{"item": ref, "failed": True, "msg": "Failed to resolve image '%s': unauthorized." % ref}
                for ref in failed]
    return {"results": results}


def test_references_once_and_compositions_by_digest():
    image = _layered.validate(GOOD)
    second = dict(image, name="infra", layers=image["layers"][:1])
    assert _layered.references([image, second]) == [
        REG + "/os/base:9.6", REG + "/os/kubelet:1.31.4", REG + "/os/ovs@" + D["a"]]
    plans = _layered.compositions([image], resolutions((REG + "/os/base:9.6", D["b"]),
                                                       (REG + "/os/kubelet:1.31.4", D["c"]),
                                                       (REG + "/os/ovs@" + D["a"], D["a"])), auth_dir="/t/a")
    assert plans == [{"name": "worker", "base": REG + "/os/base@" + D["b"], "output": REG + "/os/worker",
                      "pull_secret": "registry_creds", "auth_file": "/t/a/registry_creds.json", "layers": [
                          {"name": "kubelet", "image": REG + "/os/kubelet@" + D["c"],
                           "requires": {"labels": {"ostree.linux": "5.14"}}, "override": False},
                          {"name": "ovs", "image": REG + "/os/ovs@" + D["a"], "requires": {"labels": {}},
                           "override": True}]}]


def test_an_input_that_did_not_resolve_is_named():
    image = _layered.validate(GOOD)
    with pytest.raises(InvalidInputError) as info:
        _layered.compositions([image], resolutions((REG + "/os/base:9.6", D["b"]),
                                                   failed=[REG + "/os/kubelet:1.31.4"]))
    assert info.value.msg == (PREFIX + "spec.layers[0].image 'reg.example.com/os/kubelet:1.31.4' did not resolve: "
                              "Failed to resolve image 'reg.example.com/os/kubelet:1.31.4': unauthorized")


def compose_result(digest, base=("1.0", D["b"]), kubelet=("1.31.4", D["c"]), changed=True):
    return {"item": {"name": "worker"}, "changed": changed, "digest": digest, "output": REG + "/os/worker",
            "tag": "fleetos-" + digest[7:39], "manifests": {}, "inputs": "sha256:" + "9" * 64,
            "base": {"name": REG + "/os/base", "digest": base[1], "version": base[0]},
            "layers": [{"name": "kubelet", "image": REG + "/os/kubelet", "digest": kubelet[1], "version": kubelet[0],
                        "override": False},
                       {"name": "ovs", "image": REG + "/os/ovs", "digest": D["a"], "version": "3.4",
                        "override": True}]}


def lock_of(*results):
    return _layered.lock_document([_layered.validate(GOOD)], {"results": list(results)})


def test_lock_text_is_canonical_and_reads_back():
    document = lock_of(compose_result(D["d"]))
    text = _layered.lock_text(document)
    assert text == _layered.lock_text(lock_of(compose_result(D["d"], changed=False)))
    again = _layered.read_lock(text)
    assert again == document
    assert _layered.pinned_image(again, "worker") == REG + "/os/worker@" + D["d"]
    entry = again["images"][0]
    assert entry["base"] == {"image": REG + "/os/base:9.6", "name": REG + "/os/base", "digest": D["b"],
                             "version": "1.0"}
    assert [(l["name"], l["image"], l["digest"], l["version"]) for l in entry["layers"]] == [
        ("kubelet", REG + "/os/kubelet:1.31.4", D["c"], "1.31.4"), ("ovs", REG + "/os/ovs@" + D["a"], D["a"], "3.4")]
    with pytest.raises(FleetosError) as info:
        _layered.pinned_image(again, "infra", where="The lock x.yml")
    assert info.value.msg == "The lock x.yml has no LayeredImage 'infra'; it has: worker"


def test_lock_refuses_a_failed_composition():
    with pytest.raises(FleetosError) as info:
        lock_of({"item": {"name": "worker"}, "failed": True, "msg": "Layer 'ovs' writes /var/x."})
    assert info.value.msg == "The LayeredImage 'worker' has no composed digest for the lock: Layer 'ovs' writes /var/x"


@pytest.mark.parametrize("text, message", [
    ("a: [", "the lock is not valid YAML"),
    ("kind: Other\nimages: []\n", "the lock is not a LayeredImageLock"),
    ("kind: LayeredImageLock\nimages: [{name: w, image: x}]\n", "the lock: images[0] needs a name, an image and"),
])
def test_read_lock_refuses_what_is_not_a_lock(text, message):
    with pytest.raises(FleetosError) as info:
        _layered.read_lock(text)
    assert info.value.msg.startswith(message)


@pytest.mark.parametrize("before, after, status, summary", [
    (None, {}, "added", "added: base 1.0, kubelet 1.31.4, ovs 3.4"),
    ({}, {}, "unchanged", "unchanged"),
    ({}, {"kubelet": ("1.31.5", D["e"])}, "changed", "kubelet 1.31.4 → 1.31.5, base unchanged"),
    ({}, {"base": ("1.1", D["f"])}, "changed", "base 1.0 → 1.1"),
    ({}, {"kubelet": ("1.31.4", D["e"])}, "changed", "kubelet 1.31.4 rebuilt (cccccccccccc → eeeeeeeeeeee), "
                                                     "base unchanged"),
    ({}, {"base": ("1.1", D["f"]), "kubelet": ("1.31.5", D["e"])}, "changed", "base 1.0 → 1.1, kubelet 1.31.4 → 1.31.5"),
])
def test_diff_says_what_moved(before, after, status, summary):
    previous = None if before is None else lock_of(compose_result(D["d"]))
    current = lock_of(compose_result(D["d"] if not after else D["0"], **after))
    (change,) = _layered.diff_locks(previous, current)
    assert (change["name"], change["status"], change["summary"]) == ("worker", status, summary)
    assert change["digest"] == {"before": previous and D["d"], "after": current["images"][0]["digest"]}


def test_diff_names_added_and_removed_layers_and_images():
    previous = lock_of(compose_result(D["d"]))
    current = copy.deepcopy(previous)
    entry = current["images"][0]
    entry["digest"] = D["0"]
    entry["layers"] = entry["layers"][:1] + [dict(entry["layers"][1], name="gpu", version="550")]
    (change,) = _layered.diff_locks(previous, current)
    assert change["moved"] == ["layer gpu 550 added", "layer ovs removed"]
    assert [c["status"] for c in _layered.diff_locks(previous, {"images": []})] == ["removed"]


def test_summary_and_report():
    previous = lock_of(compose_result(D["d"]))
    current = lock_of(compose_result(D["0"], kubelet=("1.31.5", D["e"])))
    changes = _layered.diff_locks(previous, current)
    text = _layered.summary_markdown(changes, current, lock_path="inv/layered-images.lock.yml")
    assert "| worker | kubelet 1.31.4 → 1.31.5, base unchanged | `%s` |" % D["0"] in text
    assert "Since the previous lock: 1 changed." in text
    assert "| kubelet `%s/os/kubelet` | 1.31.5 | `%s` |" % (REG, D["e"]) in text
    report = _layered.compose_report([_layered.validate(GOOD)], {"results": [compose_result(D["0"])]}, changes,
                                     lock_path="inv/layered-images.lock.yml")
    assert report["counts"] == {"composed": 1} and report["result"] == "success"
    assert report["images"] == [{"name": "worker", "status": "composed", "digest": D["0"], "previous_digest": D["d"],
                                 "summary": "kubelet 1.31.4 → 1.31.5, base unchanged", "blobs": None, "error": None}]
    failed = _layered.compose_report([_layered.validate(GOOD)],
                                     {"results": [{"item": {"name": "worker"}, "failed": True, "msg": "push refused"}]}, [])
    assert (failed["result"], failed["counts"], failed["images"][0]["status"], failed["images"][0]["error"]) == (
        "failed", {"failed": 1}, "failed", "push refused")
    stats = job_stats(report, "compose", report_dir="/r")["fleetos_last_compose"]
    assert stats["images"] == {"worker": {"status": "composed", "digest": D["0"], "previous_digest": D["d"]}}
    assert (stats["result"], stats["counts"], stats["hosts"], stats["lock"]) == (
        "success", {"composed": 1}, {}, "inv/layered-images.lock.yml")


def test_a_layer_built_on_an_older_base_is_in_the_lock_the_diff_and_the_summary():
    """The lock records the base a layer was built FROM; the summary names it beside the composed base."""
    built_from = {"name": REG + "/os/base", "digest": D["e"], "version": "9.5", "older": True}
    result = compose_result(D["0"], base=("9.6", D["b"]))
    result["layers"][0]["built_from"] = built_from
    current = lock_of(result)
    text = _layered.lock_text(current)
    kubelet, ovs = yaml.safe_load(text)["images"][0]["layers"]
    assert kubelet["built_from"] == built_from and "built_from" not in ovs
    (added,) = _layered.diff_locks(None, current)
    assert added["summary"] == "added: base 9.6, kubelet 1.31.4 built on base 9.5, ovs 3.4"
    (change,) = _layered.diff_locks(lock_of(compose_result(D["d"], base=("9.5", D["e"]))), current)
    assert change["summary"] == "base 9.5 → 9.6, kubelet built on base 9.5"
    summary = _layered.summary_markdown([change], current)
    assert "| base `%s/os/base` | 9.6 | `%s` |" % (REG, D["b"]) in summary
    assert ("- kubelet is built on base `%s/os/base` 9.5 (`%s`), older than the composed base 9.6: only its own "
            "layers are composed, on 9.6." % (REG, D["e"])) in summary
    # Built FROM the composed base itself: nothing to say.
    result["layers"][0]["built_from"] = dict(built_from, digest=D["b"], version="9.6", older=False)
    (same,) = _layered.diff_locks(None, lock_of(result))
    assert same["summary"] == "added: base 9.6, kubelet 1.31.4, ovs 3.4"
    assert "is built on base" not in _layered.summary_markdown([same], lock_of(result))


LAYERS = '[{"digest":"%s","image":"r/k","name":"kubelet","version":"1.31.5"},{"digest":"%s","image":"r/o","name":"ovs"}]'


@pytest.mark.parametrize("labels, layers", [
    ({"fleetos.io/layers": LAYERS % (D["a"], D["b"])},
     [{"name": "kubelet", "version": "1.31.5"}, {"name": "ovs", "version": None}]),
    ({"version": "1.0"}, None),
    ({"fleetos.io/layers": "not json"}, None),
    ({"fleetos.io/layers": '{"name": "x"}'}, None),
    (None, None),
])
def test_layers_of_labels(labels, layers):
    assert _layered.layers_of_labels(labels) == layers


def test_status_reads_each_booted_digest_once():
    rows = [{"host": "a", "booted_image_name": REG + "/os/worker", "booted_digest": D["a"]},
            {"host": "b", "booted_image_name": REG + "/os/worker", "booted_digest": D["a"]},
            {"host": "c", "booted_image_name": REG + "/os/base", "booted_digest": D["b"]},
            {"host": "d", "booted_image_name": None, "booted_digest": None}]
    assert _layered.status_inspections(rows) == [REG + "/os/base@" + D["b"], REG + "/os/worker@" + D["a"]]
    inspected = {"results": [
        {"item": REG + "/os/worker@" + D["a"], "labels": {"fleetos.io/layers": LAYERS % (D["c"], D["d"])}},
        {"item": REG + "/os/base@" + D["b"], "failed": False, "failed_when_result": False,
         "msg": "Failed to read the manifest of %s: x509: certificate signed by unknown authority\nmore" % REG}]}
    status = _layered.status_layers(rows, inspected)
    assert [row["layers"] for row in status] == [
        [{"name": "kubelet", "version": "1.31.5"}, {"name": "ovs", "version": None}]] * 2 + [None, None]
    assert [row["layers_error"] for row in status] == [None, None, "%s/os/base@%s: Failed to read the manifest of %s: "
                                                       "x509: certificate signed by unknown authority" % (REG, D["b"], REG),
                                                       None]
    # A read the module itself reports failed (no failed_when) says the same.
    failed = dict(inspected["results"][1], failed=True, labels={})
    assert _layered.status_layers(rows[2:3], [inspected["results"][0], failed])[0]["layers_error"] == status[2]["layers_error"]


def test_lock_record_reads_the_lock_once_and_never_raises(tmp_path):
    path = tmp_path / "layered-images.lock.yml"
    path.write_text(_layered.lock_text(lock_of(compose_result(D["d"]))))
    record = _layered.lock_record(str(path))
    assert (record["path"], record["error"]) == (str(path), None)
    assert record["document"]["images"][0]["digest"] == D["d"]
    assert _layered.lock_record(None) is None and _layered.lock_record("") is None
    missing = _layered.lock_record(str(tmp_path / "none.yml"))
    assert (missing["document"], missing["error"]) == (
        None, "the lock %s does not exist; run compose.yml to write it" % (tmp_path / "none.yml"))
    (tmp_path / "bad.yml").write_text("kind: Other\nimages: []\n")
    assert _layered.lock_record(str(tmp_path / "bad.yml"))["error"].startswith(
        "%s is not a LayeredImageLock" % (tmp_path / "bad.yml"))


FIELD = "spec.layeredImage of MachineImage 'web' (machine_images/web.yaml document 1)"


def test_locked_image_gives_the_composed_digest_and_every_input_version():
    lock = {"path": "inv/layered-images.lock.yml", "document": lock_of(compose_result(D["d"])), "error": None}
    locked = _layered.locked_image(lock, "worker", FIELD)
    # What the composition's own fleetos.io/inputs must say (the plan checks it).
    assert locked.pop("inputs") == compose_result(D["d"])["inputs"]
    assert locked == {
        "name": "worker", "lock": "inv/layered-images.lock.yml", "image": REG + "/os/worker@" + D["d"],
        "digest": D["d"], "base": {"name": REG + "/os/base", "version": "1.0", "digest": D["b"]},
        "layers": [{"name": "kubelet", "version": "1.31.4", "digest": D["c"]},
                   {"name": "ovs", "version": "3.4", "digest": D["a"]}],
        "summary": "base 1.0, kubelet 1.31.4, ovs 3.4"}


@pytest.mark.parametrize("lock, name, message", [
    (None, "worker", FIELD + " names the LayeredImage 'worker', but no lock is given: set fleetos_rollout_lock to "
                             "the layered-images.lock.yml compose.yml wrote"),
    ({"path": "x.yml", "document": None, "error": "the lock x.yml does not exist; run compose.yml to write it"},
     "worker", FIELD + " names the LayeredImage 'worker', but fleetos_rollout_lock cannot be used: the lock x.yml "
                       "does not exist; run compose.yml to write it"),
    ("lock", "infra", FIELD + " names the LayeredImage 'infra', which the lock x.yml does not have (it has: worker); "
                              "compose it with compose.yml first"),
])
def test_locked_image_refuses_with_one_sentence_naming_the_field(lock, name, message):
    if lock == "lock":
        lock = {"path": "x.yml", "document": lock_of(compose_result(D["d"])), "error": None}
    with pytest.raises(InvalidInputError) as info:
        _layered.locked_image(lock, name, FIELD)
    assert (info.value.msg, info.value.details["field"]) == (message, FIELD)


@pytest.mark.parametrize("secrets, auth_dir, expected", [
    # Each reference once, read with the pull secret of the first LayeredImage (by name) that has one.
    (("registry_creds", None), "/t/a", [
        (REG + "/os/base:9.6", "/t/a/registry_creds.json"), (REG + "/os/kubelet:1.31.4", "/t/a/registry_creds.json"),
        (REG + "/os/ovs@" + D["a"], "/t/a/registry_creds.json")]),
    ((None, "infra_creds"), "/t/a", [
        (REG + "/os/base:9.6", "/t/a/infra_creds.json"), (REG + "/os/kubelet:1.31.4", "/t/a/infra_creds.json"),
        (REG + "/os/ovs@" + D["a"], None)]),
    (("registry_creds", "infra_creds"), "/t/a", [
        (REG + "/os/base:9.6", "/t/a/infra_creds.json"), (REG + "/os/kubelet:1.31.4", "/t/a/infra_creds.json"),
        (REG + "/os/ovs@" + D["a"], "/t/a/registry_creds.json")]),
    # Without a pull secret, or without the directory, compose.yml's own credentials.
    ((None, None), "/t/a", [(REG + "/os/base:9.6", None), (REG + "/os/kubelet:1.31.4", None),
                            (REG + "/os/ovs@" + D["a"], None)]),
    (("registry_creds", None), None, [(REG + "/os/base:9.6", None), (REG + "/os/kubelet:1.31.4", None),
                                      (REG + "/os/ovs@" + D["a"], None)]),
])
def test_each_reference_is_resolved_once_with_a_pull_secret_of_its_own(secrets, auth_dir, expected):
    image = dict(_layered.validate(GOOD), pull_secret=secrets[0])
    infra = dict(image, name="infra", layers=image["layers"][:1], pull_secret=secrets[1])
    items = _layered.resolutions_to_make([image, infra], auth_dir=auth_dir)
    assert [(item["image"], item["auth_file"]) for item in items] == expected
    # The registered loop over these items resolves as a loop over plain references does.
    results = {"results": [{"item": item, "digest": D["b"]} for item in items]}
    assert _layered.compositions([infra], results)[0]["base"] == REG + "/os/base@" + D["b"]


def test_a_pull_secret_becomes_an_auth_file_or_one_sentence_naming_the_variable():
    secret = {"auths": {"198.51.100.1:5000": {"auth": "dXNlcjpwYXNz"}}}
    text = _layered.pull_secret_auth(secret, "registry_creds")
    assert yaml.safe_load(text) == secret
    assert _layered.pull_secret_auth(json.dumps(secret), "registry_creds") == text
    with pytest.raises(InvalidInputError) as info:
        _layered.pull_secret_auth("not json", "registry_creds")
    assert info.value.msg.startswith("The pull secret variable 'registry_creds' of a LayeredImage's spec.pullSecret "
                                     "is not usable: the pull secret is neither JSON nor base64"), info.value.msg
    assert "dXNlcjpwYXNz" not in info.value.msg
