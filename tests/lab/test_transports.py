"""What real registries hand the rollout: signed transports and multi-arch tags, on nodes of its own.

- A MachineImage's transport is staged exactly as asked (``ostree-remote-image:REMOTE``,
  ``ostree-image-signed``), and an unsigned or wrongly signed image under it fails to stage.
- A rollout to a multi-arch tag (an OCI index) succeeds and its rerun changes nothing; a
  host that follows the tag and already runs its content is unchanged: no reboot, no blob.
- A host booted from a disk image whose commit is the image's is pinned in place.
- The documented command (the lab inventory as it is, no extra variable) runs as written.

Every test puts its nodes back on the lab's base image with nothing staged.
"""

import json
import re
import time
import uuid

import pytest
import yaml

from conftest import REPO, read_hosts
from test_rollout import _run

ROLLOUT = REPO / "playbooks" / "rollout.yml"
PLAN = REPO / "playbooks" / "plan.yml"
RECAP = re.compile(r"^(\S+)\s+:\s+ok=\d+\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)
OWNER = "test_transports"


def _deployment(status, key):
    found = [d for d in status["deployments"] if d.get(key)]
    return found[0] if found else None


class Fleet:
    """Three nodes of this module's own, in an inventory (and MachineImage directory) of its own."""

    def __init__(self, lab, tmp_path_factory):
        self.lab = lab
        self.nodes = [n["name"] if isinstance(n, dict) else n for n in lab.own_nodes(OWNER, 3)]
        self.tag = uuid.uuid4().hex[:8]
        self.tmp = tmp_path_factory.mktemp("transports")
        hosts, self.vars = read_hosts(lab.inventory)
        self.hosts = {name: hosts[name] for name in self.nodes}
        self.signed_repository = self.vars["fleetos_lab_signed_repository"]
        self.remote = self.vars["fleetos_lab_ostree_remote"]
        self.runs = 0

    def build(self, name, *args):
        """Build NAME:<tag> from the base image; -> the full record."""
        proc = self.lab.fleetlab("image", "build", "%s:%s" % (name, self.tag), "--from", "fleetos/lab-os:1.0",
                                 "--size-mb", "1", "--json", *args)
        return json.loads(proc.stdout)

    def play(self, playbook, machine_images=(), *extra, check=False):
        """Run a playbook on the nodes with these MachineImage objects; -> the process, its report and events."""
        self.runs += 1
        run_dir = self.tmp / ("run%d" % self.runs)
        (run_dir / "machine_images").mkdir(parents=True)
        for index, obj in enumerate(machine_images):
            (run_dir / "machine_images" / ("%d.yaml" % index)).write_text(yaml.safe_dump(obj))
        inventory = run_dir / "hosts.yml"
        inventory.write_text(yaml.safe_dump({"all": {"vars": self.vars, "children": {"transports": {
            "vars": {"fleetos_pool": "transports", "fleetos_pool_max_unavailable": 3}, "hosts": self.hosts}}}}))
        start = len(self.lab.journal())
        proc = _run(self.lab, inventory, playbook, "--forks", "10", "-e", "fleetos_report_dir=%s" % run_dir,
                    "-e", "fleetos_plan_output_dir=%s" % run_dir, *extra, check=check)
        proc.events = self.lab.journal()[start:]
        report = run_dir / ("rollout-report.json" if playbook == ROLLOUT else "plan.json")
        proc.report = json.loads(report.read_text()) if report.exists() else None
        proc.hosts = {r["host"]: r for r in (proc.report or {}).get("hosts", [])}
        proc.recap = {m.group(1): (int(m.group(2)), int(m.group(3)), int(m.group(4)))
                      for m in RECAP.finditer(proc.stdout)}
        return proc

    def status(self, node):
        return self.lab.rpm_ostree_status(node)

    def reboots(self, events):
        return [e["node"] for e in events if e["event"] == "reboot" and e.get("node") in self.nodes]

    def blob_reads(self, events):
        return [e for e in events if e["event"] == "blob_read" and e.get("node") in self.nodes]

    def reset(self):
        """Back on the base image, following its pinned reference, nothing staged."""
        base = "ostree-unverified-registry:%s@%s" % (self.lab.base_record["reference"], self.lab.base_digest)
        for node in self.nodes:
            self.lab.exec(node, "rpm-ostree cleanup -p >/dev/null")
            booted = _deployment(self.status(node), "booted")
            if booted.get("container-image-reference") != base:
                _switch(self.lab, node, base)
            assert _deployment(self.status(node), "booted")["container-image-reference"] == base, node


def _switch(lab, node, reference):
    """Rebase a node to ``reference`` and reboot it into it, as an operator would by hand."""
    lab.exec(node, ["rpm-ostree", "rebase", "--reboot", reference], check=False)
    _wait(lab, node, reference)


def _wait(lab, node, reference, timeout=90):
    deadline = time.time() + timeout
    while time.time() < deadline:
        proc = lab.exec(node, ["rpm-ostree", "status", "--json"], check=False)
        if proc.returncode == 0:
            booted = _deployment(json.loads(proc.stdout), "booted")
            if booted and booted.get("container-image-reference") == reference:
                return
        time.sleep(0.2)
    raise AssertionError("%s did not come back on %s" % (node, reference))


def machine_image(name, node, image, transport=None, allow_tag=False):
    spec = {"image": image, "nodeName": node}
    if transport:
        spec["transport"] = transport
    if allow_tag:
        spec["allowTag"] = True
    return {"apiVersion": "fleetos.io/v1alpha1", "kind": "MachineImage", "metadata": {"name": name}, "spec": spec}


@pytest.fixture(scope="module")
def fleet(lab, tmp_path_factory):
    instance = Fleet(lab, tmp_path_factory)
    instance.reset()
    yield instance
    instance.reset()


def test_signed_transports_are_staged_exactly_as_asked(lab, fleet):
    remote_node, signed_node, unsigned_node = fleet.nodes
    name = fleet.signed_repository.split("/", 1)[1]
    signed = fleet.build("%s/signed" % name, "--sign")
    unsigned = fleet.build("%s/unsigned" % name)
    signed_image = "%s@%s" % (signed["reference"], signed["digest"])
    unsigned_image = "%s@%s" % (unsigned["reference"], unsigned["digest"])
    objects = [machine_image("remote", remote_node, signed_image, "ostree-remote-image:%s" % fleet.remote),
               machine_image("signed", signed_node, signed_image, "ostree-image-signed"),
               machine_image("unsigned", unsigned_node, unsigned_image, "ostree-image-signed")]
    proc = fleet.play(ROLLOUT, objects, "-e", "fleetos_rollout_activate=false")

    staged = _deployment(fleet.status(remote_node), "staged")
    assert staged is not None, (proc.hosts, proc.stdout[-4000:])
    assert staged["container-image-reference"] == "ostree-remote-image:%s:docker://%s" % (fleet.remote, signed_image)
    staged = _deployment(fleet.status(signed_node), "staged")
    assert staged["container-image-reference"] == "ostree-image-signed:docker://%s" % signed_image
    # Unsigned under a signed transport: the stage fails, nothing is staged, nothing rebooted.
    assert _deployment(fleet.status(unsigned_node), "staged") is None
    assert proc.hosts[unsigned_node]["status"] == "stage_failed", proc.stdout[-3000:]
    assert proc.hosts[remote_node]["status"] == proc.hosts[signed_node]["status"] == "staged"
    assert fleet.reboots(proc.events) == []

    # An unsigned image under the remote transport fails too; so does a wrong key under either.
    wrong = fleet.build("%s/wrong" % name, "--sign-key", "wrong")
    wrong_image = "%s@%s" % (wrong["reference"], wrong["digest"])
    fleet.reset()
    proc = fleet.play(ROLLOUT, [
        machine_image("remote", remote_node, unsigned_image, "ostree-remote-image:%s" % fleet.remote),
        machine_image("signed", signed_node, wrong_image, "ostree-image-signed"),
        machine_image("wrong-remote", unsigned_node, wrong_image, "ostree-remote-image:%s" % fleet.remote)],
        "-e", "fleetos_rollout_activate=false")
    for node in fleet.nodes:
        assert _deployment(fleet.status(node), "staged") is None, node
        assert proc.hosts[node]["status"] == "stage_failed", (node, proc.hosts[node])
    assert fleet.reboots(proc.events) == []

    # Stage only, everything as asked: the run succeeds with the result "staged".
    proc = fleet.play(ROLLOUT, [machine_image("signed", signed_node, signed_image, "ostree-image-signed")],
                      "--limit", "%s,localhost" % signed_node, "-e", "fleetos_rollout_activate=false")
    assert (proc.returncode, proc.report["result"], proc.hosts[signed_node]["status"]) == (0, "staged", "staged")
    fleet.reset()


def test_a_multi_arch_tag_is_rolled_out_once_and_a_following_host_is_left_alone(lab, fleet):
    record = fleet.build("fleetos/multi", "--multi-arch")
    tag = "%s:%s" % (record["reference"], fleet.tag)
    index, amd64 = record["digest"], record["manifests"]["amd64"]
    assert index != amd64 and len(record["manifests"]) >= 2
    follower, *others = fleet.nodes

    # One host follows the tag already: rebased to it by hand, and booted.
    following = "ostree-unverified-registry:%s" % tag
    _switch(lab, follower, following)
    assert _deployment(fleet.status(follower), "booted")["container-image-reference-digest"] == amd64

    # On its own, the follower is unchanged: no reboot, not one blob read.
    alone = fleet.play(ROLLOUT, (), "--limit", "%s,localhost" % follower, "-e", "fleetos_rollout_image=%s" % tag,
                       check=True)
    assert alone.hosts[follower]["status"] == "unchanged", alone.hosts[follower]
    assert fleet.reboots(alone.events) == [] and fleet.blob_reads(alone.events) == []
    assert alone.recap[follower][0] == 0

    proc = fleet.play(ROLLOUT, (), "-e", "fleetos_rollout_image=%s" % tag, check=True)
    assert proc.report["result"] == "success"
    assert proc.hosts[follower]["status"] == "unchanged", proc.hosts[follower]
    assert sorted(fleet.reboots(proc.events)) == sorted(others)
    for node in others:
        booted = _deployment(fleet.status(node), "booted")
        assert booted["container-image-reference"] == "ostree-unverified-registry:%s@%s" % (record["reference"], index)
        assert booted["container-image-reference-digest"] == amd64
        assert proc.hosts[node]["status"] == "activated"
    assert {proc.hosts[n]["target_digest"] for n in fleet.nodes} == {index}

    again = fleet.play(ROLLOUT, (), "-e", "fleetos_rollout_image=%s" % tag, check=True)
    assert {again.hosts[n]["status"] for n in fleet.nodes} == {"unchanged"}
    assert fleet.reboots(again.events) == [] and fleet.blob_reads(again.events) == []
    assert all(changed == 0 for changed, _, _ in again.recap.values()), again.recap

    plan = fleet.play(PLAN, (), "-e", "fleetos_rollout_image=%s" % tag, check=True)
    assert {plan.hosts[n]["action"] for n in fleet.nodes} == {"unchanged"}
    assert {plan.hosts[n]["platform_digest"] for n in fleet.nodes} == {amd64}
    fleet.reset()


def test_a_disk_image_host_on_the_image_commit_is_pinned_without_a_reboot(lab, fleet, tmp_path):
    record = fleet.build("fleetos/pin")
    node = fleet.nodes[0]
    # As a disk image leaves it: the image's commit booted under a plain refspec origin.
    _switch(lab, node, "ostree-unverified-registry:%s@%s" % (record["reference"], record["digest"]))
    booted = _deployment(fleet.status(node), "booted")
    lab.exec(node, "printf '[origin]\\nrefspec=fedora:fedora/x86_64/coreos/stable\\n' > "
                   "/sysroot/ostree/deploy/%s/deploy/%s.%d.origin" % (booted["osname"], booted["checksum"], booted["serial"]))
    assert _deployment(fleet.status(node), "booted").get("container-image-reference") is None

    tag = "%s:%s" % (record["reference"], fleet.tag)
    proc = fleet.play(ROLLOUT, (), "--limit", "%s,localhost" % node, "-e", "fleetos_rollout_image=%s" % tag, check=True)
    assert proc.hosts[node]["status"] == "unchanged"
    assert proc.hosts[node]["action"] == "pin"
    assert fleet.reboots(proc.events) == []
    booted = _deployment(fleet.status(node), "booted")
    assert booted["checksum"] == record["commit"]
    assert booted["container-image-reference"] == "ostree-unverified-registry:%s@%s" % (record["reference"], record["digest"])
    again = fleet.play(ROLLOUT, (), "--limit", "%s,localhost" % node, "-e", "fleetos_rollout_image=%s" % tag, check=True)
    assert again.hosts[node]["action"] == "unchanged"
    assert again.recap[node][0] == 0
    fleet.reset()


def test_the_documented_rollout_command_runs_as_written(lab, fleet):
    """rollout.yml's header: -i inventories/lab, only fleetos_rollout_image; here limited to our nodes."""
    inventory = yaml.safe_load(lab.inventory.read_text())
    assert inventory["all"]["vars"]["fleetos_rollout_boot_time_command"] == "cat /run/lab-boot-id"
    node = fleet.nodes[1]
    record = fleet.build("fleetos/documented")
    start = len(lab.journal())
    proc = _run(lab, lab.inventory, ROLLOUT, "--limit", "%s,localhost" % node,
                "-e", "fleetos_rollout_image=%s:%s" % (record["reference"], fleet.tag),
                "-e", "fleetos_report_dir=%s" % (fleet.tmp / "documented"), check=True)
    report = json.loads((fleet.tmp / "documented" / "rollout-report.json").read_text())
    assert report["result"] == "success", proc.stdout[-3000:]
    assert [h["status"] for h in report["hosts"]] == ["activated"]
    assert fleet.reboots(lab.journal()[start:]) == [node]
    assert _deployment(fleet.status(node), "booted")["container-image-reference-digest"] == record["digest"]
    fleet.reset()
