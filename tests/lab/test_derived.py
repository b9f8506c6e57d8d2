"""Derived images (`fleetlab image derive`: the base's layers plus one layer, as `FROM base`
+ `COPY` gives) on two lab nodes of this module's own, booted from the base image as a
disk image (commit of fleetos/lab-os:1.0, plain refspec origin).

A host imports a derived image as ostree-ext does: the base commit (the node has it), the
derived layer laid over it (/etc to /usr/etc, OCI whiteouts applied), committed as a merge
commit; only the blobs it lacks are read. Its inherited ostree.commit label is the base's,
so adoption must stage it, not adopt it. Each run derives images of its own and puts the
nodes back on the base commit first.
"""

import json
import os
import subprocess
import uuid

import pytest
import yaml

from conftest import REPO, VENV_BIN, collections_path, read_hosts
from test_rollout import _run

OWNER = "test_derived"
CACHE = "/sysroot/ostree/container-cache"
REFSPEC = "fedora:fedora/x86_64/coreos/stable"
REMOVED = "/usr/etc/containers/registries.conf"  # in the base; B's layer has a whiteout for /etc/...


def _booted(status):
    return [d for d in status["deployments"] if d["booted"]][0]


class Derived:
    def __init__(self, lab, tmp):
        self.lab, self.tmp = lab, tmp
        self.base = lab.base_record
        self.run_id = uuid.uuid4().hex[:8]
        self.node, self.adopter = lab.own_nodes(OWNER, 2, disk_image="fleetos/lab-os:1.0")
        self.b = self.derive("b", "/usr/share/fleetlab/derived-b", "/etc/fleetlab-derived.conf",
                             "--remove", "/etc/containers/registries.conf")

    def derive(self, name, *dests):
        files, extra = [], []
        args = list(dests)
        while args:
            dest = args.pop(0)
            if dest == "--remove":
                extra += ["--remove", args.pop(0)]
                continue
            src = self.tmp / ("%s-%s" % (name, len(files)))
            src.write_text("%s %s %s\n" % (name, dest, self.run_id))
            files += ["--add-file", "%s:%s" % (src, dest)]
        tag = "fleetos/test-derived:%s-%s" % (name, self.run_id)
        return json.loads(self.lab.fleetlab("image", "derive", tag, "--from", "fleetos/lab-os:1.0",
                                            *(files + extra + ["--json"])).stdout)

    def reset(self, node):
        """Booted on the base commit with a refspec origin, nothing staged, no layer cache."""
        if _booted(self.lab.rpm_ostree_status(node))["checksum"] != self.base["commit"]:
            self.lab.exec(node, ["rpm-ostree", "rebase", "ostree-unverified-registry:%s@%s"
                                 % (self.base["reference"], self.base["digest"])])
            self.lab.reboot(node)
        commit = self.base["commit"]
        self.lab.exec(node, "for f in /sysroot/ostree/deploy/*/deploy/%s.*.origin; do printf '[origin]\\nrefspec=%s\\n'"
                            " > $f; done; rpm-ostree cleanup -p >/dev/null; rm -rf %s" % (commit, REFSPEC, CACHE))

    def reads(self, node, start):
        return sorted((e["digest"], e["bytes"]) for e in self.lab.journal()[start:]
                      if e.get("event") == "blob_read" and e.get("node") == node)


@pytest.fixture(scope="module")
def derived(lab, tmp_path_factory):
    fleet = Derived(lab, tmp_path_factory.mktemp("derived"))
    for node in (fleet.node, fleet.adopter):
        fleet.reset(node)
    return fleet


def _rebase_with_the_module(lab, node, image):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(collections_path()), ANSIBLE_NOCOLOR="1",
               ANSIBLE_HOST_KEY_CHECKING="True", ANSIBLE_DEPRECATION_WARNINGS="False")
    proc = subprocess.run([str(VENV_BIN / "ansible"), "-i", str(lab.inventory), node, "-o",
                           "-m", "fleetos.layering.rpm_ostree_rebase", "-a", json.dumps({"image": image})],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=str(REPO),
                          timeout=300, check=False)
    assert proc.returncode == 0 and "CHANGED" in proc.stdout, proc.stdout
    return proc


def test_a_derived_image_boots_as_a_merge_commit_of_its_own(lab, derived):
    node, b, base = derived.node, derived.b, derived.base
    assert b["commit"] is None and b["base_digest"] == base["digest"]
    labels = json.loads(lab.exec(node, "skopeo inspect --config --authfile /etc/ostree/auth.json docker://%s@%s"
                                 % (b["reference"], b["digest"])).stdout)
    # Inherited from the base, as a container build does; the layer after final-diffid is B's.
    assert labels["config"]["Labels"]["ostree.commit"] == base["commit"]
    assert labels["rootfs"]["diff_ids"].index(labels["config"]["Labels"]["ostree.final-diffid"]) == \
        len(labels["rootfs"]["diff_ids"]) - 2

    start = len(lab.journal())
    _rebase_with_the_module(lab, node, "%s@%s" % (b["reference"], b["digest"]))
    lab.reboot(node)
    booted = _booted(lab.rpm_ostree_status(node))
    assert booted["checksum"] != base["commit"]
    assert booted["container-image-reference-digest"] == b["digest"]
    meta = booted["base-commit-meta"]
    assert meta["ostree.manifest-digest"] == b["digest"]
    assert json.loads(meta["ostree.container.image-config"])["rootfs"]["diff_ids"][-1] == \
        b["derived_layers"][0]["diff_id"]
    assert booted["version"] == b["version"]
    # /etc in the layer went to /usr/etc (and so into /etc); the whiteout removed a base file.
    assert lab.exec(node, "cat /usr/etc/fleetlab-derived.conf /etc/fleetlab-derived.conf "
                          "/usr/share/fleetlab/derived-b").stdout.count(derived.run_id) == 3
    assert lab.exec(node, ["ostree", "ls", base["commit"], REMOVED], check=False).returncode == 0
    assert lab.exec(node, ["ostree", "ls", booted["checksum"], REMOVED], check=False).returncode != 0
    # A fresh cache: the base layer, B's layer and B's config; never the base's config.
    layers = json.loads(lab.exec(node, "skopeo inspect --raw --authfile /etc/ostree/auth.json docker://%s@%s"
                                 % (b["reference"], b["digest"])).stdout)["layers"]
    assert [d for d, _ in derived.reads(node, start)] == sorted([l["digest"] for l in layers] + [b["config_digest"]])
    derived.merge_b = booted["checksum"]


def test_a_second_derived_image_reads_only_its_new_layer_and_config(lab, derived):
    node = derived.node
    assert _booted(lab.rpm_ostree_status(node))["container-image-reference-digest"] == derived.b["digest"]
    c = derived.derive("c", "/usr/share/fleetlab/derived-c")
    start = len(lab.journal())
    lab.exec(node, ["rpm-ostree", "rebase", "ostree-unverified-registry:%s@%s" % (c["reference"], c["digest"])])
    layer = c["derived_layers"][0]
    config_size = int(json.loads(lab.exec(node, "skopeo inspect --raw --authfile /etc/ostree/auth.json docker://%s@%s"
                                          % (c["reference"], c["digest"])).stdout)["config"]["size"])
    reads = derived.reads(node, start)
    assert reads == sorted([(layer["digest"], layer["size"]), (c["config_digest"], config_size)])
    print("\nderived-image bump on %s: %d blob bytes read (layer %d bytes, config %d bytes)"
          % (node, sum(n for _, n in reads), layer["size"], config_size))
    staged = [d for d in lab.rpm_ostree_status(node)["deployments"] if d["staged"]][0]
    assert staged["container-image-reference-digest"] == c["digest"]
    assert staged["checksum"] not in (derived.merge_b, derived.base["commit"])
    lab.exec(node, ["rpm-ostree", "cleanup", "-p"])


def test_adoption_stages_a_derived_image_on_a_host_booted_on_its_base(lab, derived, tmp_path):
    node, b = derived.adopter, derived.b
    assert _booted(lab.rpm_ostree_status(node))["checksum"] == derived.base["commit"]
    hosts, allvars = read_hosts(lab.inventory)
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {
        "vars": dict(allvars, fleetos_adopt_image="%s@%s" % (b["reference"], b["digest"])),
        "hosts": {node: hosts[node]}}}, sort_keys=False))
    _run(lab, inventory, REPO / "playbooks" / "adopt.yml", "--limit", "%s,localhost" % node,
         "-e", "fleetos_report_dir=%s" % tmp_path)
    report = json.loads((tmp_path / "adopt-report.json").read_text())
    record = [r for r in report["hosts"] if r["host"] == node][0]
    assert (record["status"], record["reboot_required"]) == ("staged", True), record
    status = lab.rpm_ostree_status(node)
    assert _booted(status)["origin"] == REFSPEC
    staged = [d for d in status["deployments"] if d["staged"]][0]
    assert staged["container-image-reference-digest"] == b["digest"]
    # The same image gives the same merge commit on every node.
    assert staged["checksum"] == derived.merge_b
    lab.exec(node, ["rpm-ostree", "cleanup", "-p"])


def test_bootc_stages_the_same_merge_commit(lab, derived):
    node = json.loads(lab.fleetlab("claim", OWNER + "_bootc", "--count", "1", "--backend", "bootc",
                                   "--json").stdout)[0]
    lab.exec(node, "rpm-ostree cleanup -p >/dev/null; rm -f /run/ostree/staged-deployment-locked")
    b = derived.b
    lab.exec(node, ["bootc", "switch", "--quiet", "%s@%s" % (b["reference"], b["digest"])])
    staged = json.loads(lab.exec(node, ["bootc", "status", "--format=json"]).stdout)["status"]["staged"]
    assert staged["image"]["imageDigest"] == b["digest"]
    assert staged["ostree"]["checksum"] == derived.merge_b
    assert staged["image"]["version"] == b["version"]
    lab.exec(node, "rpm-ostree cleanup -p >/dev/null; rm -f /run/ostree/staged-deployment-locked /run/reboot-required")
