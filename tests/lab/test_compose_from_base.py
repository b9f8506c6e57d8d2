"""A layer image built FROM the base, as people build them (`fleetlab image derive`: FROM base + COPY), composed onto
a newer base and rolled out (issue 35), on one lab node of this module's own (`fleetlab claim
test_compose_from_base`):

- base 1.1 (`fleetos/lab-os:1.1-<run>`, base 1.0 plus a layer, os-release VERSION_ID 1.1) and a kubelet layer
  built FROM base 1.0 (its layers, then one of its own, `ostree.final-diffid` inherited);
- compose.yml on a LayeredImage of base 1.1 + that kubelet: the composed image is base 1.1's layers plus the
  kubelet's own layer only; the controller read configurations and that one layer blob, nothing of base 1.0, and
  the report's blobs.read says so; the lock records kubelet built from base 1.0 (older), the summary names both
  bases; a rerun composes nothing, reads no blob and leaves the lock byte-identical;
- rollout.yml through the lock: the node boots the composed digest, with base 1.1's os-release and file and the
  kubelet's file;
- a layer built FROM an image of another repository (another OS) is refused in one sentence naming it, having read
  no layer blob, and nothing is pushed.
"""

import json
import os
import subprocess
import time

import pytest
import yaml

from conftest import REPO, VENV_BIN, collections_path, read_hosts
from test_compose import Composer

OWNER = "test_compose_from_base"
PLAYBOOKS = REPO / "playbooks"


def _booted(status):
    return [d for d in status["deployments"] if d["booted"]][0]


def _raw_manifest(composer, image):
    proc = subprocess.run(["skopeo", "inspect", "--raw", "--authfile", composer.auth_file, "--cert-dir",
                           composer.cert_dir, "docker://%s" % image], stdout=subprocess.PIPE, text=True, check=True,
                          timeout=60)
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def fleet(lab, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("from-base")
    composer = Composer(lab, tmp)
    (node,) = lab.own_nodes(OWNER, 1)
    lab.fleetlab("fault", node, "clear")
    lab.exec(node, "rpm-ostree cleanup -p >/dev/null")
    inventory = tmp / "inventory"
    (inventory / "layered_images").mkdir(parents=True)
    hosts, allvars = read_hosts(lab.inventory)
    (inventory / "hosts.yml").write_text(yaml.safe_dump({"all": {"vars": allvars, "children": {
        "from_base": {"vars": {"fleetos_pool": "from_base", "fleetos_pool_layered_image": "worker"},
                      "hosts": {node: hosts[node]}}}}}, sort_keys=False))
    return dict(composer=composer, node=node, inventory=inventory, tmp=tmp)


def _rollout(lab, fleet, lock):
    report_dir = fleet["tmp"] / "rollout-report"
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(collections_path()), ANSIBLE_NOCOLOR="1",
               ANSIBLE_FORCE_COLOR="0", ANSIBLE_STDOUT_CALLBACK="default", ANSIBLE_DEPRECATION_WARNINGS="False",
               ANSIBLE_LOCALHOST_WARNING="False", ANSIBLE_HOST_KEY_CHECKING="True")
    began = time.monotonic()
    proc = subprocess.run([str(VENV_BIN / "ansible-playbook"), "-i", str(fleet["inventory"] / "hosts.yml"),
                           "-e", "fleetos_report_dir=%s" % report_dir, "-e", "fleetos_rollout_lock=%s" % lock,
                           str(PLAYBOOKS / "rollout.yml")], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, env=env, cwd=str(fleet["tmp"]), timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-12000:]
    print("rollout.yml: %.1f s" % (time.monotonic() - began))
    return json.loads((report_dir / "rollout-report.json").read_text())


def test_a_layer_built_on_base_1_0_is_composed_onto_base_1_1_and_rolled_out(lab, fleet):
    composer, node, inventory = fleet["composer"], fleet["node"], fleet["inventory"]
    run = composer.tag
    extra = composer.tmp / "base-1.1"
    extra.write_text("base 1.1 %s\n" % run)
    base11 = json.loads(lab.fleetlab("image", "build", "fleetos/lab-os:1.1-%s" % run, "--from", "fleetos/lab-os:1.0",
                                     "--add-file", "%s:/usr/share/fleetlab/base-1.1" % extra, "--version", "1.1",
                                     "--json").stdout)
    kubelet_src = composer.tmp / "kubelet"
    kubelet_src.write_text("kubelet 1.31.4 %s\n" % run)
    kubelet = json.loads(lab.fleetlab("image", "derive", "fleetos/kubelet-from-base:1.31.4-%s" % run, "--from",
                                      "fleetos/lab-os:1.0", "--add-file", "%s:/usr/bin/kubelet" % kubelet_src,
                                      "--version", "1.31.4", "--json").stdout)
    (own,) = kubelet["derived_layers"]
    base10 = _raw_manifest(composer, "%s@%s" % (lab.base_record["reference"], lab.base_digest))
    base11_manifest = _raw_manifest(composer, "%s@%s" % (base11["reference"], base11["digest"]))
    kubelet_manifest = _raw_manifest(composer, "%s@%s" % (kubelet["reference"], kubelet["digest"]))
    assert [l["digest"] for l in kubelet_manifest["layers"]] == [l["digest"] for l in base10["layers"]] + [
        own["digest"]]

    (inventory / "layered_images" / "worker.yaml").write_text(yaml.safe_dump({
        "apiVersion": "fleetos.io/v1alpha1", "kind": "LayeredImage", "metadata": {"name": "worker"},
        "spec": {"base": {"image": "%s:%s" % (base11["reference"], base11["tag"])},
                 "layers": [{"name": "kubelet", "image": "%s:%s" % (kubelet["reference"], kubelet["tag"])}],
                 "output": "%s/fleetos/worker-from-base-%s" % (composer.registry, run)}}))
    report, lock_text, summary, changed, reads, seconds = composer.playbook(inventory)
    (row,) = report["images"]
    (entry,) = yaml.safe_load(lock_text)["images"]
    assert (row["status"], changed, entry["digest"]) == ("composed", 2, row["digest"]), (row, changed)
    assert (entry["base"]["digest"], entry["base"]["version"]) == (base11["digest"], "1.1")
    (layer,) = entry["layers"]
    assert (layer["digest"], layer["version"]) == (kubelet["digest"], "1.31.4")
    assert layer["built_from"] == {"name": lab.base_record["reference"], "digest": lab.base_digest,
                                   "version": "1.0", "older": True}
    # Base 1.1's layers, then the kubelet's own layer: base 1.0 is not composed again.
    composed = _raw_manifest(composer, entry["image"])
    assert [l["digest"] for l in composed["layers"]] == [l["digest"] for l in base11_manifest["layers"]] + [
        own["digest"]]
    # What the controller read: configurations and the kubelet's own layer (listed), no base layer; blobs.read
    # counts exactly that.
    configs = {base11_manifest["config"]["digest"], kubelet_manifest["config"]["digest"], base10["config"]["digest"]}
    read = [e["digest"] for e in reads]
    assert set(read) <= configs | {own["digest"]} and read.count(own["digest"]) == 1, reads
    assert row["blobs"]["read"] == len(reads), (row["blobs"], reads)
    assert "| worker | added: base 1.1, kubelet 1.31.4 built on base 1.0 |" in summary, summary
    assert "| base `%s` | 1.1 | `%s` |" % (base11["reference"], base11["digest"]) in summary, summary
    assert ("- kubelet is built on base `%s` 1.0 (`%s`), older than the composed base 1.1: only its own layers are "
            "composed, on 1.1." % (lab.base_record["reference"], lab.base_digest)) in summary, summary
    print("\ncompose.yml (base 1.1 + a layer built on 1.0): %.1f s, %d blobs read" % (seconds, len(reads)))

    # The same inputs again: nothing composed, not one blob read, the lock byte-identical (built_from included).
    report, lock_again, summary, changed, reads, seconds = composer.playbook(inventory)
    assert (report["images"][0]["status"], changed, reads, lock_again) == ("unchanged", 0, [], lock_text)
    assert report["images"][0]["blobs"]["read"] == 0

    lock = inventory / "layered-images.lock.yml"
    rollout = _rollout(lab, fleet, lock)
    assert rollout["result"] == "success", rollout
    assert [(h["host"], h["status"], h["target_digest"]) for h in rollout["hosts"]] == [
        (node, "activated", entry["digest"])]
    booted = _booted(lab.rpm_ostree_status(node))
    assert booted["container-image-reference-digest"] == entry["digest"]
    # Base 1.1 (its os-release and its file), with the kubelet's file.
    files = lab.exec(node, "grep '^VERSION_ID=' /usr/lib/os-release; cat /usr/share/fleetlab/base-1.1 /usr/bin/kubelet")
    assert files.stdout.splitlines() == ['VERSION_ID="1.1"', "base 1.1 %s" % run, "kubelet 1.31.4 %s" % run]


def test_a_layer_built_on_another_os_is_refused_before_a_layer_blob_is_read(lab, fleet):
    composer = fleet["composer"]
    run = composer.tag
    other = composer.tmp / "other-os"
    other.write_text("another OS %s\n" % run)
    lab.fleetlab("image", "build", "fleetos/other-os:1-%s" % run, "--from", "fleetos/lab-os:1.0",
                 "--add-file", "%s:/usr/share/fleetlab/other-os" % other, "--version", "9", "--json")
    src = composer.tmp / "tool"
    src.write_text("tool %s\n" % run)
    layer = json.loads(lab.fleetlab("image", "derive", "fleetos/tool-on-other:1-%s" % run, "--from",
                                    "fleetos/other-os:1-%s" % run, "--add-file", "%s:/usr/bin/tool" % src,
                                    "--version", "1", "--json").stdout)
    config = _raw_manifest(composer, "%s@%s" % (layer["reference"], layer["digest"]))["config"]["digest"]
    output = "fleetos/refused-%s" % run
    (result,), reads, seconds = composer.compose(output, [{"name": "tool", "image": "%s:%s" % (
        layer["reference"], layer["tag"])}])
    final = json.loads(subprocess.run(
        ["skopeo", "inspect", "--config", "--authfile", composer.auth_file, "--cert-dir", composer.cert_dir,
         "docker://%s@%s" % (layer["reference"], layer["digest"])], stdout=subprocess.PIPE, text=True, check=True,
        timeout=60).stdout)["config"]["Labels"]["ostree.final-diffid"]
    assert result.get("failed") and result["msg"] == (
        "Layer 'tool' (%s) is built on a base that is not a version of the base's repository %s: no image tagged "
        "there has its first layers, up to its ostree.final-diffid %s: expected a layer built FROM scratch, or FROM "
        "a version of the base %s." % (layer["reference"], lab.base_record["reference"], final,
                                       lab.base_record["reference"])), result
    # Manifests and configurations only (the base's and the layer's, or none when the cache has them).
    assert {e["digest"] for e in reads} <= {config, _raw_manifest(composer, "%s@%s" % (
        lab.base_record["reference"], lab.base_digest))["config"]["digest"]}, reads
    assert result["blobs"]["read"] == len(reads)
    assert composer.tags(output) == []
