"""Layered images rolled out through the lock (issue 12, "done when" 2, 3 and 5), on two lab nodes of
this module's own (`fleetlab claim test_layering_rollout`):

- compose.yml composes base 1.0 + kubelet 1.31.4 + ovs 3.4 -> D1, reading the registry with the
  LayeredImage's own spec.pullSecret (no fleetos_compose_auth_file); both nodes are put on D1 the
  quick way (rpm-ostree rebase and a reboot: what is measured is the next rollouts);
- kubelet bumped to 1.31.5 -> D2, rolled out by rollout.yml through the lock: `fleetos_rollout_lock`,
  one node by a MachineImage's `spec.layeredImage`, the other by its pool's
  `fleetos_pool_layered_image`. Each node reads from the registry the new
  kubelet layer and D2's configuration, no other blob (journal `blob_read`); it boots a commit of its
  own (not D1's); status.yml shows kubelet 1.31.5 (compose.yml and status.yml on a controller
  without skopeo: a `skopeo` first in PATH that fails and records a call is never run);
- the base bumped only (1.0 -> 1.1, one layer more) -> D3: each node reads the base's new layer and
  D3's configuration; the kubelet and ovs blobs are never read again;
- rollback.yml (fleetos_rollback_from D3) returns both nodes to D2.

Every playbook runs inside the lab's network namespace, as a controller next to the registry. Each
run builds layers of its own (a run id in their content, so new digests), so whatever image of
base 1.0 an earlier run left the nodes on, D1 is new to them.
"""

import json
import os
import subprocess
import time
import uuid
from pathlib import Path

import pytest
import yaml

from conftest import REPO, VENV_BIN, collections_path, controller_without_skopeo, read_hosts

OWNER = "test_layering_rollout"
PLAYBOOKS = REPO / "playbooks"


def _booted(status):
    return [d for d in status["deployments"] if d["booted"]][0]


class Layering:
    def __init__(self, lab, tmp):
        self.lab, self.tmp = lab, tmp
        self.run = uuid.uuid4().hex[:8]
        self.registry = lab.registry
        self.nodes = lab.own_nodes(OWNER, 2)
        self.by_machine_image, self.by_pool = self.nodes
        self.inventory = tmp / "inventory"
        (self.inventory / "layered_images").mkdir(parents=True)
        (self.inventory / "machine_images").mkdir()
        self.lock = self.inventory / "layered-images.lock.yml"
        registry_dir = lab.state / "registry"
        self.auth_file, self.cert_dir = str(registry_dir / "auth.json"), str(registry_dir / "certs.d")
        self.plays = 0
        hosts, allvars = read_hosts(lab.inventory)
        (self.inventory / "hosts.yml").write_text(yaml.safe_dump({"all": {"vars": allvars, "children": {
            "layering": {"vars": {"fleetos_pool": "layering", "fleetos_pool_max_unavailable": 2,
                                  "fleetos_pool_layered_image": "worker"},
                         "hosts": {node: hosts[node] for node in self.nodes}}}}}, sort_keys=False))
        # The other node is named by a MachineImage, which beats the pool default.
        (self.inventory / "machine_images" / "worker.yaml").write_text(yaml.safe_dump({
            "apiVersion": "fleetos.io/v1alpha1", "kind": "MachineImage", "metadata": {"name": "layered-worker"},
            "spec": {"layeredImage": "worker", "nodeName": self.by_machine_image}}))
        # The LayeredImage's pull secret, a variable of localhost given to compose.yml only.
        self.secret = tmp / "secret.yml"
        self.secret.write_text(yaml.safe_dump({"lab_registry_secret": json.loads(Path(self.auth_file).read_text())}))
        self.secret.chmod(0o600)

    def layer(self, name, version, dest):
        src = self.tmp / ("%s-%s" % (name, version))
        src.write_text("%s %s %s\n" % (name, version, self.run))
        return json.loads(self.lab.fleetlab("image", "build-layer", "fleetos/layering-%s:%s-%s" % (
            name, version, self.run), "--version", version, "--add-file", "%s:%s" % (src, dest), "--json").stdout)

    def layered_image(self, base, kubelet, ovs):
        (self.inventory / "layered_images" / "worker.yaml").write_text(yaml.safe_dump({
            "apiVersion": "fleetos.io/v1alpha1", "kind": "LayeredImage", "metadata": {"name": "worker"},
            "spec": {"base": {"image": base},
                     "layers": [{"name": name, "image": "%s:%s" % (record["reference"], record["tag"])}
                                for name, record in (("kubelet", kubelet), ("ovs", ovs))],
                     "output": "%s/fleetos/layering-worker-%s" % (self.registry, self.run),
                     "pullSecret": {"name": "lab_registry_secret"}}}))

    def play(self, playbook, *extra, rc=0, controller_skopeo=True):
        """ansible-playbook from the machine's own namespace on our inventory; -> (process, blob reads by node).

        ``controller_skopeo=False``: on a controller without skopeo (none may run there)."""
        self.plays += 1
        env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(collections_path()), ANSIBLE_NOCOLOR="1",
                   ANSIBLE_FORCE_COLOR="0", ANSIBLE_STDOUT_CALLBACK="default", ANSIBLE_DEPRECATION_WARNINGS="False",
                   ANSIBLE_LOCALHOST_WARNING="False", ANSIBLE_HOST_KEY_CHECKING="True")
        skopeo_ran = None
        if not controller_skopeo:
            env, skopeo_ran = controller_without_skopeo(env, self.tmp / ("controller%d" % self.plays))
        start = len(self.lab.journal())
        began = time.monotonic()
        proc = subprocess.run([str(VENV_BIN / "ansible-playbook"), "-i",
                               str(self.inventory / "hosts.yml"), "--forks", "5",
                               "-e", "fleetos_report_dir=%s" % (self.tmp / ("report%d" % self.plays)),
                               *extra, str(PLAYBOOKS / playbook)],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                              cwd=str(self.tmp), timeout=600, check=False)
        assert proc.returncode == rc if rc == 0 else proc.returncode != 0, proc.stdout[-12000:]
        print("%s: %.1f s" % (playbook, time.monotonic() - began))
        assert skopeo_ran is None or not skopeo_ran.exists(), (playbook, skopeo_ran.read_text())
        reads = {}
        for event in self.lab.journal()[start:]:
            if event.get("event") == "blob_read":
                reads.setdefault(event.get("node"), []).append((event["digest"], event["bytes"]))
        return proc, reads

    def report(self, name):
        return json.loads((self.tmp / ("report%d" % self.plays) / name).read_text())

    def compose(self):
        """compose.yml with the LayeredImage's pull secret only -> the lock's entry of worker."""
        self.play("compose.yml", "-c", "local", "-e", "ansible_python_interpreter=%s" % (VENV_BIN / "python"),
                  "-e", "@%s" % self.secret, "-e", "fleetos_compose_ca_cert_dir=" + self.cert_dir,
                  "-e", "fleetos_compose_cache_dir=%s" % (self.tmp / "cache"), controller_skopeo=False)
        (entry,) = yaml.safe_load(self.lock.read_text())["images"]
        return entry

    def rollout(self, digest):
        """rollout.yml through the lock -> the blob reads of each node; both nodes verified on ``digest``."""
        _proc, reads = self.play("rollout.yml", "-e", "fleetos_rollout_lock=%s" % self.lock)
        report = self.report("rollout-report.json")
        assert report["result"] == "success", report
        assert {h["host"]: (h["status"], h["target_digest"]) for h in report["hosts"]} == {
            node: ("activated", digest) for node in self.nodes}, report["hosts"]
        for node in self.nodes:
            assert self.booted(node)["container-image-reference-digest"] == digest, node
        return reads

    def booted(self, node):
        return _booted(self.lab.rpm_ostree_status(node))

    def config_digest(self, entry):
        proc = subprocess.run(["skopeo", "inspect", "--raw", "--authfile",
                               self.auth_file, "--cert-dir", self.cert_dir, "docker://%s" % entry["image"]],
                              stdout=subprocess.PIPE, text=True, check=True, timeout=60)
        manifest = json.loads(proc.stdout)
        return manifest["config"]["digest"], int(manifest["config"]["size"])

    def reset(self):
        """No fault, nothing staged. The nodes may be on any image of base 1.0 (an earlier run's): each run's
        layers are new, so D1 is new to them, and its rollout gives them base 1.0's commit."""
        for node in self.nodes:
            self.lab.fleetlab("fault", node, "clear")
            self.lab.exec(node, "rpm-ostree cleanup -p >/dev/null")

    def boot(self, image):
        """D1 on both nodes the quick way (rebase, reboot), as a fleet that runs it already would be."""
        for node in self.nodes:
            self.lab.exec(node, ["rpm-ostree", "rebase", "ostree-unverified-registry:" + image])
        for node in self.nodes:
            self.lab.reboot(node)


@pytest.fixture(scope="module")
def layering(lab, tmp_path_factory):
    fleet = Layering(lab, tmp_path_factory.mktemp("layering"))
    fleet.reset()
    return fleet


def test_d1_then_a_kubelet_bump_rolled_out_through_the_lock_reads_only_the_new_layer(lab, layering):
    kubelet = layering.layer("kubelet", "1.31.4", "/usr/bin/kubelet")
    ovs = layering.layer("ovs", "3.4", "/usr/sbin/ovs-vswitchd")
    layering.layered_image(lab.base_image, kubelet, ovs)
    d1 = layering.compose()
    assert (d1["base"]["digest"], [l["version"] for l in d1["layers"]]) == (lab.base_digest, ["1.31.4", "3.4"])
    layering.boot(d1["image"])
    d1_commit = {node: layering.booted(node)["checksum"] for node in layering.nodes}

    kubelet2 = layering.layer("kubelet", "1.31.5", "/usr/bin/kubelet")
    layering.layered_image(lab.base_image, kubelet2, ovs)
    d2 = layering.compose()
    assert d2["digest"] != d1["digest"] and d2["layers"][0]["version"] == "1.31.5"
    assert (d2["base"], d2["layers"][1]) == (d1["base"], d1["layers"][1])

    # A lock that does not prove itself: worker's digest swapped for another real composition's (D1: kubelet
    # 1.31.4, where the lock says 1.31.5). Every host wanting it is a plan error naming the LayeredImage, before
    # any host is staged.
    locked = layering.lock.read_text()
    layering.lock.write_text(locked.replace(d2["digest"], d1["digest"]))
    layering.play("rollout.yml", "-e", "fleetos_rollout_lock=%s" % layering.lock, rc=1)
    layering.lock.write_text(locked)
    swapped = layering.report("rollout-report.json")
    for row in swapped["hosts"]:
        assert row["status"] == "plan_failed" and row["stage_start"] is None, row
        assert ("pins the LayeredImage 'worker' to %s, but that image was composed from other inputs" % d1["digest"]
                in row["reason"]), row
    for node in layering.nodes:
        assert not [d for d in layering.lab.rpm_ostree_status(node)["deployments"] if d.get("staged")], node

    reads = layering.rollout(d2["digest"])
    config, config_size = layering.config_digest(d2)
    (new_layer,) = kubelet2["layers"]
    for node in layering.nodes:
        # The new kubelet layer (once) and D2's configuration (the plan's inspection and the pull each
        # read it): no base, ovs or old kubelet blob.
        read = reads.get(node, [])
        assert {digest for digest, _ in read} == {new_layer["digest"], config}, (node, read)
        assert read.count((new_layer["digest"], int(new_layer["size"]))) == 1, (node, read)
        assert all(size == config_size for digest, size in read if digest == config), (node, read)
        assert layering.booted(node)["checksum"] not in (d1_commit[node], lab.base_record["commit"])
    print("\nD2 (kubelet bump) per host: %s; the new layer %d bytes, the config %d bytes" % (", ".join(
        "%s %d blob reads %d bytes" % (node, len(reads[node]), sum(n for _, n in reads[node]))
        for node in layering.nodes), int(new_layer["size"]), config_size))

    # status.yml from the machine's own namespace reads each booted image's layers from the lab registry,
    # through the lab's link: no packet tries to leave the machine.
    leaked = lab.leaked_packets()
    status = layering.tmp / "status.json"
    proc, _ = layering.play("status.yml", "-e", "fleetos_status_json=%s" % status,
                            "-e", "fleetos_status_auth_file=" + layering.auth_file,
                            "-e", "fleetos_status_ca_cert_dir=" + layering.cert_dir, controller_skopeo=False)
    rows = json.loads(status.read_text())
    rows = rows["hosts"] if isinstance(rows, dict) else rows
    assert {row["host"]: (row["layers"], row["layers_error"]) for row in rows} == {
        node: ([{"name": "kubelet", "version": "1.31.5"}, {"name": "ovs", "version": "3.4"}], None)
        for node in layering.nodes}
    table = [line for line in proc.stdout.splitlines() if any(line.strip().startswith('"%s ' % n)
                                                              for n in layering.nodes)]
    assert len(table) == len(layering.nodes) and all("kubelet 1.31.5, ovs 3.4" in line for line in table), \
        proc.stdout[-4000:]
    assert "LAYERS not read" not in proc.stdout
    assert lab.leaked_packets() == leaked

    # A registry the controller cannot verify (no CA): the layers stay unknown, and one line says why.
    no_ca = layering.tmp / "no-ca"
    no_ca.mkdir(exist_ok=True)
    proc, _ = layering.play("status.yml", "-e", "fleetos_status_json=%s" % status,
                            "-e", "fleetos_status_auth_file=" + layering.auth_file,
                            "-e", "fleetos_status_ca_cert_dir=%s" % no_ca, controller_skopeo=False)
    said = [line for line in proc.stdout.splitlines() if "LAYERS not read" in line]
    assert len(said) == 1 and "LAYERS not read for 1 booted image(s) on the controller: %s/fleetos/layering-worker-%s@%s: " % (
        layering.registry, layering.run, d2["digest"]) in said[0], proc.stdout[-4000:]
    rows = json.loads(status.read_text())["hosts"]
    assert {row["host"]: row["layers"] for row in rows} == {node: None for node in layering.nodes}
    assert all(row["layers_error"] and "certificate" in row["layers_error"] for row in rows), rows
    assert lab.leaked_packets() == leaked
    layering.d2, layering.kubelet, layering.kubelet2, layering.ovs = d2, kubelet, kubelet2, ovs


def test_a_base_bump_reads_only_the_new_base_layer_and_rollback_returns_to_d2(lab, layering):
    if not hasattr(layering, "d2"):
        pytest.skip("needs D2 on the nodes (the test before)")
    d2 = layering.d2
    extra = layering.tmp / "os-release-extra"
    extra.write_text("base 1.1 %s\n" % layering.run)
    tag = "fleetos/layering-base:1.1-%s" % layering.run
    lab.fleetlab("image", "build", tag, "--from", "fleetos/lab-os:1.0", "--add-file",
                 "%s:/usr/share/fleetlab/base-1.1" % extra, "--version", "1.1", "--json")
    layering.layered_image("%s/%s" % (layering.registry, tag), layering.kubelet2, layering.ovs)
    d3 = layering.compose()
    assert d3["base"]["version"] == "1.1" and d3["layers"] == d2["layers"]
    base_layers = {layer["digest"] for layer in json.loads(subprocess.run(
        ["skopeo", "inspect", "--raw", "--authfile", layering.auth_file,
         "--cert-dir", layering.cert_dir, "docker://%s@%s" % (d3["base"]["name"], d3["base"]["digest"])],
        stdout=subprocess.PIPE, text=True, check=True, timeout=60).stdout)["layers"]}
    old_base_layers = {layer["digest"] for layer in json.loads(subprocess.run(
        ["skopeo", "inspect", "--raw", "--authfile", layering.auth_file,
         "--cert-dir", layering.cert_dir, "docker://%s@%s" % (lab.base_record["reference"], lab.base_digest)],
        stdout=subprocess.PIPE, text=True, check=True, timeout=60).stdout)["layers"]}
    changed = base_layers - old_base_layers
    assert changed, "base 1.1 shares all its layers with 1.0"
    reads = layering.rollout(d3["digest"])
    config, _size = layering.config_digest(d3)
    component_blobs = {layer["digest"] for record in (layering.kubelet, layering.kubelet2, layering.ovs)
                       for layer in record["layers"]}
    for node in layering.nodes:
        read = {digest for digest, _ in reads.get(node, [])}
        assert read == changed | {config}, (node, reads.get(node), changed)
        assert not read & component_blobs
        assert all(reads[node].count(entry) == 1 for entry in reads[node] if entry[0] in changed), reads[node]
    print("\nD3 (base bump) per host: %s; %d new base layer(s)" % (", ".join(
        "%s %d blob reads %d bytes" % (node, len(reads[node]), sum(n for _, n in reads[node]))
        for node in layering.nodes), len(changed)))

    layering.play("rollback.yml", "-e", "fleetos_rollback_from=%s" % d3["digest"])
    for node in layering.nodes:
        booted = layering.booted(node)
        assert booted["container-image-reference-digest"] == d2["digest"], node
