"""os_image_compose and compose.yml against the lab registry: a base plus two layer images, composed, recomposed,
bumped, refused.

- compose.yml on a LayeredImage base 1.0 + kubelet + ovs -> D1 and the lock; the same again -> D1, the play
  changes nothing (changed=0), not one blob read, the lock byte-identical;
- kubelet bumped -> D2 != D1: only the new kubelet blob reaches the output repository
  (mounted), only the new layer's blobs are read, and the lock and its summary show that only kubelet moved;
- check mode returns the digest it would push and pushes nothing;
- compose.yml runs on a controller without skopeo (a `skopeo` first in PATH that fails and records a call): none;
- each bad layer (a file under /var, a whiteout, two layers writing one file, a
  `requires` label the base lacks) fails before any push: the output repository gets no tag.

The module runs on the controller inside the lab's network namespace, as a build host would.
"""

import json
import os
import re
import subprocess
import time
import uuid
from pathlib import Path

import pytest
import yaml

from conftest import REPO, VENV_BIN, collections_path, controller_without_skopeo


class Composer:
    def __init__(self, lab, tmp):
        self.lab = lab
        self.tmp = tmp
        self.tag = uuid.uuid4().hex[:8]
        self.registry = lab.registry
        registry_dir = lab.state / "registry"
        self.auth_file = str(registry_dir / "auth.json")
        self.cert_dir = str(registry_dir / "certs.d")
        self.cache = str(tmp / "layer-cache")
        self.runs = 0
        self.built = {}

    def layer(self, name, version, *files):
        """Build a layer image NAME:VERSION-<tag> with files [(DEST, content)]; -> its record."""
        args = []
        for index, (dest, content) in enumerate(files):
            src = self.tmp / ("%s-%s-%d" % (name, version, index))
            src.write_text(content)
            args += ["--add-file", "%s:%s" % (src, dest)]
        proc = self.lab.fleetlab("image", "build-layer", "fleetos/%s:%s-%s" % (name, version, self.tag),
                                 "--version", version, "--json", *args)
        return json.loads(proc.stdout)

    def spec(self, name, record, **extra):
        return dict(name=name, image="%s:%s" % (record["reference"], record["tag"]), **extra)

    def compose(self, output, layers, check=False, tasks=None):
        """Run os_image_compose (one task, or ``tasks``); -> (results, blob reads of the run, seconds)."""
        self.runs += 1
        args = dict(base="%s/fleetos/lab-os:1.0" % self.registry, output="%s/%s" % (self.registry, output),
                    auth_file=self.auth_file, ca_cert_dir=self.cert_dir, layer_cache_dir=self.cache, retries=0)
        tasks = tasks or [layers]
        out = self.tmp / ("results%d.json" % self.runs)
        steps = [{"name": "compose %d" % index, "fleetos.layering.os_image_compose": dict(args, layers=item),
                  "check_mode": check, "ignore_errors": True, "register": "__compose_%d" % index}
                 for index, item in enumerate(tasks)]
        steps.append({"name": "results", "check_mode": False, "ansible.builtin.copy": {
            "dest": str(out), "mode": "0600", "content": "{{ [%s] | to_json }}" % ", ".join(
                "__compose_%d" % index for index in range(len(tasks)))}})
        play = [{"name": "compose", "hosts": "localhost", "gather_facts": False, "tasks": steps}]
        playbook = self.tmp / ("compose%d.yml" % self.runs)
        playbook.write_text(yaml.safe_dump(play))
        env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(collections_path()), ANSIBLE_NOCOLOR="1", ANSIBLE_DEPRECATION_WARNINGS="False", ANSIBLE_LOCALHOST_WARNING="False",
                   ANSIBLE_INVENTORY_UNPARSED_WARNING="False")
        start = len(self.lab.journal())
        began = time.monotonic()
        proc = subprocess.run([str(VENV_BIN / "ansible-playbook"), "-i",
                               "localhost,", "-c", "local", "-e", "ansible_python_interpreter=%s" % (
                                   VENV_BIN / "python"), str(playbook)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=str(REPO),
                              timeout=300, check=False)
        seconds = time.monotonic() - began
        assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
        results = json.loads(out.read_text())
        reads = [e for e in self.lab.journal()[start:] if e["event"] == "blob_read" and e.get("node") == "controller"]
        return results, reads, seconds

    def playbook(self, inventory, *extra):
        """Run playbooks/compose.yml on ``inventory`` (a directory with layered_images/); -> (report, lock text,
        summary, recap changed count, blob reads, seconds)."""
        self.runs += 1
        report_dir = self.tmp / ("report%d" % self.runs)
        env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(collections_path()), ANSIBLE_NOCOLOR="1",
                   ANSIBLE_DEPRECATION_WARNINGS="False", ANSIBLE_LOCALHOST_WARNING="False")
        # The controller needs no skopeo: compose.yml resolves its inputs with the collection's registry client.
        env, skopeo_ran = controller_without_skopeo(env, self.tmp / ("controller%d" % self.runs))
        start = len(self.lab.journal())
        began = time.monotonic()
        proc = subprocess.run([str(VENV_BIN / "ansible-playbook"), "-i",
                               str(inventory), "-c", "local", "-e", "ansible_python_interpreter=%s" % (
                                   VENV_BIN / "python"), "-e", "fleetos_compose_auth_file=" + self.auth_file,
                               "-e", "fleetos_compose_ca_cert_dir=" + self.cert_dir,
                               "-e", "fleetos_compose_cache_dir=" + self.cache, "-e", "fleetos_report_dir=%s" % report_dir,
                               *extra, str(REPO / "playbooks" / "compose.yml")],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=str(REPO),
                              timeout=300, check=False)
        seconds = time.monotonic() - began
        assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
        assert not skopeo_ran.exists(), skopeo_ran.read_text()
        changed = int(re.search(r"localhost\s+: ok=\d+\s+changed=(\d+)", proc.stdout).group(1))
        report = json.loads((report_dir / "compose-report.json").read_text())
        lock = (Path(inventory) / "layered-images.lock.yml").read_text()
        reads = [e for e in self.lab.journal()[start:] if e["event"] == "blob_read" and e.get("node") == "controller"]
        return report, lock, (report_dir / "compose-summary.md").read_text(), changed, reads, seconds

    def tags(self, repository):
        proc = subprocess.run(["skopeo", "list-tags", "--authfile", self.auth_file,
                               "--cert-dir", self.cert_dir, "docker://%s/%s" % (self.registry, repository)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60, check=False)
        if proc.returncode != 0:
            assert "name unknown" in proc.stderr.lower() or "not found" in proc.stderr.lower(), proc.stderr
            return []
        return json.loads(proc.stdout)["Tags"]


@pytest.fixture(scope="module")
def composer(lab, tmp_path_factory):
    return Composer(lab, tmp_path_factory.mktemp("compose"))


def test_compose_recompose_bump_and_check_mode(lab, composer):
    kubelet = composer.layer("kubelet", "1.31.4", ("/usr/bin/kubelet", "kubelet 1.31.4\n"),
                             ("/etc/kubernetes/kubelet.conf", "conf\n"))
    ovs = composer.layer("openvswitch", "3.4", ("/usr/sbin/ovs-vswitchd", "ovs 3.4\n"))
    output = "fleetos/worker-%s" % composer.tag
    inventory = composer.tmp / "inventory"
    (inventory / "layered_images").mkdir(parents=True)
    (inventory / "hosts.yml").write_text("all: {hosts: {}}\n")

    def layered_image(kubelet_record, requires=None):
        kubelet_layer = composer.spec("kubelet", kubelet_record, **({"requires": requires} if requires else {}))
        (inventory / "layered_images" / "worker.yaml").write_text(yaml.safe_dump({
            "apiVersion": "fleetos.io/v1alpha1", "kind": "LayeredImage", "metadata": {"name": "worker"},
            "spec": {"base": {"image": "%s/fleetos/lab-os:1.0" % composer.registry},
                     "layers": [kubelet_layer, composer.spec("ovs", ovs)],
                     "output": "%s/%s" % (composer.registry, output)}}))

    layered_image(kubelet, requires={"labels": {"ostree.bootable": "true"}})
    report, lock_text, summary, changed, reads, seconds = composer.playbook(inventory)
    (first,) = report["images"]
    (entry,) = yaml.safe_load(lock_text)["images"]
    d1 = first["digest"]
    assert (first["status"], entry["digest"], changed) == ("composed", d1, 2), (first, changed)
    assert entry["tag"].startswith("fleetos-") and entry["image"] == "%s/%s@%s" % (composer.registry, output, d1)
    assert entry["base"]["digest"] == lab.base_digest and entry["base"]["version"] == "1.0"
    assert [(l["name"], l["digest"], l["version"]) for l in entry["layers"]] == [
        ("kubelet", kubelet["digest"], "1.31.4"), ("ovs", ovs["digest"], "3.4")]
    base_layers = len(json.loads(subprocess.run(
        ["skopeo", "inspect", "--raw", "--authfile", composer.auth_file,
         "--cert-dir", composer.cert_dir, "docker://%s@%s" % (entry["base"]["name"], lab.base_digest)],
        stdout=subprocess.PIPE, text=True, check=True).stdout)["layers"])
    assert first["blobs"] == {"mounted": base_layers + 2, "uploaded": 1, "skipped": 0, "read": 5}, first["blobs"]
    # read: the three configurations and the two layer blobs, once each
    assert len(reads) == 5, reads
    assert composer.tags(output) == [entry["tag"]]
    assert "| worker | added: base 1.0, kubelet 1.31.4, ovs 3.4 |" in summary, summary
    print("\ncompose.yml (base + 2 layers): %.1f s, %d blobs read" % (seconds, len(reads)))

    # The same inputs again: the same digest, nothing pushed, not one blob read, the lock byte-identical.
    report, lock_again, summary, changed, reads, seconds = composer.playbook(inventory)
    (again,) = report["images"]
    assert (again["digest"], again["status"], changed) == (d1, "unchanged", 0), (again, changed)
    assert again["blobs"] == {"mounted": 0, "uploaded": 0, "skipped": 0, "read": 0}
    assert reads == [], reads
    assert lock_again == lock_text
    assert "| worker | unchanged |" in summary, summary
    print("no-op compose.yml: %.1f s, %d blobs read" % (seconds, len(reads)))

    # Bump kubelet: a new digest; only the new kubelet blob reaches the output repository, and
    # only kubelet moves in the lock and the summary.
    bumped = composer.layer("kubelet", "1.31.5", ("/usr/bin/kubelet", "kubelet 1.31.5\n"),
                            ("/etc/kubernetes/kubelet.conf", "conf\n"))
    layered_image(bumped, requires={"labels": {"ostree.bootable": "true"}})
    report, lock_bumped, summary, changed, reads, seconds = composer.playbook(inventory)
    (second,) = report["images"]
    (entry2,) = yaml.safe_load(lock_bumped)["images"]
    d2 = second["digest"]
    assert d2 != d1 and second["status"] == "composed" and second["previous_digest"] == d1
    assert second["blobs"]["mounted"] == len(bumped["layers"]) == 1, second["blobs"]
    assert second["blobs"]["uploaded"] == 1 and second["blobs"]["skipped"] == base_layers + 1
    read_digests = {e["digest"] for e in reads}
    assert read_digests <= {bumped["layers"][0]["digest"], bumped["config_digest"]}, reads
    assert sorted(composer.tags(output)) == sorted([entry["tag"], entry2["tag"]])
    assert (entry2["base"], entry2["layers"][1]) == (entry["base"], entry["layers"][1])
    assert (entry2["layers"][0]["digest"], entry2["layers"][0]["version"]) == (bumped["digest"], "1.31.5")
    assert "| worker | kubelet 1.31.4 → 1.31.5, base unchanged | `%s` |" % d2 in summary, summary
    print("layer bump compose.yml: %.1f s, %d blobs read" % (seconds, len(reads)))

    # Check mode: the digest it would push, and nothing pushed (no tag, and the real run uploads the config).
    layers3 = [composer.spec("ovs", ovs), composer.spec("kubelet", bumped)]
    (checked,), reads, seconds = composer.compose(output, layers3, check=True)
    assert checked["changed"] is True and checked["digest"] not in (d1, d2)
    assert checked["tag"] not in composer.tags(output)
    (applied,), reads, seconds = composer.compose(output, layers3)
    assert applied["digest"] == checked["digest"] and applied["blobs"]["uploaded"] == 1
    assert applied["blobs"]["mounted"] == 0 and applied["tag"] in composer.tags(output)
    composer.built = dict(kubelet=kubelet, bumped=bumped)


def test_each_bad_layer_fails_before_any_push(lab, composer):
    if not composer.built:
        pytest.skip("needs the layer images of test_compose_recompose_bump_and_check_mode")
    good, bumped = composer.built["kubelet"], composer.built["bumped"]
    var = composer.layer("bad-var", "1", ("/var/lib/kubelet/state", "x\n"))
    whiteout_src = composer.tmp / "whiteout"
    whiteout_src.write_text("x\n")
    proc = lab.fleetlab("image", "build-layer", "fleetos/bad-whiteout:1-%s" % composer.tag, "--version", "1",
                        "--add-file", "%s:/usr/share/doc/x" % whiteout_src, "--remove", "/usr/bin/bash", "--json")
    whiteout = json.loads(proc.stdout)
    output = "fleetos/bad-%s" % composer.tag
    tasks = [
        [composer.spec("bad-var", var)],
        [composer.spec("bad-whiteout", whiteout)],
        [composer.spec("kubelet", good), composer.spec("clash", bumped)],
        [composer.spec("kubelet", good, requires={"labels": {"ostree.linux": "5.14.0-570.el9.x86_64"}})],
    ]
    results, reads, seconds = composer.compose(output, None, tasks=tasks)
    messages = [result.get("msg") for result in results]
    assert all(result.get("failed") for result in results), results
    assert messages[0] == ("Layer 'bad-var' (%s) writes /var/lib/kubelet/state under /var (the host's own state, "
                           "which an image update never replaces): expected paths under /usr and /etc only."
                           % var["reference"])
    assert messages[1] == ("Layer 'bad-whiteout' (%s) removes /usr/bin/bash with the whiteout /usr/bin/.wh.bash: "
                           "expected a layer that only adds files." % whiteout["reference"])
    assert messages[2] == ("Layers 'kubelet' and 'clash' both write /usr/bin/kubelet: expected each file in one "
                           "layer only, or override: true on 'clash' to let it win.")
    assert messages[3].startswith("Layer 'kubelet' requires the base label 'ostree.linux' to be "
                                  "'5.14.0-570.el9.x86_64', but the base %s/fleetos/lab-os@%s has "
                                  % (composer.registry, lab.base_digest)), messages[3]
    assert composer.tags(output) == []
