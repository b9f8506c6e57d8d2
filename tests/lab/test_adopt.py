"""Cloud-image adoption (playbooks/adopt.yml, role cloud_image_adopt) on lab nodes of its own.

Three nodes booted as a cloud image would be (``fleetlab up --disk-image``: a plain
refspec origin): two from the image the fleet adopts (same commit), one from the
lab's base image (an older commit). Every test puts them back the way a disk image
leaves them, so the module can be run again.
"""

import json
import re

import pytest
import yaml

from conftest import REPO, read_hosts
from test_rollout import _run

ADOPT = REPO / "playbooks" / "adopt.yml"
IMAGE = "fleetos/test-adopt:1"
LEGACY = "fleetos/test-adopt-legacy:1"
REFSPEC = "fedora:fedora/x86_64/coreos/stable"
DISK_ORIGIN = "[origin]\nrefspec=%s\n" % REFSPEC
RECAP = re.compile(r"^(\S+)\s+:\s+ok=\d+\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)


def _booted(status):
    return [d for d in status["deployments"] if d["booted"]][0]


def _origin_path(status):
    booted = _booted(status)
    return "/sysroot/ostree/deploy/%s/deploy/%s.%d.origin" % (booted["osname"], booted["checksum"], booted["serial"])


class Adoption:
    def __init__(self, lab, tmp_path_factory):
        self.lab = lab
        if IMAGE not in lab.images:
            marker = tmp_path_factory.mktemp("adopt") / "adopt"
            marker.write_text("built for the adoption tests\n")
            lab.build_image(IMAGE, "--from", "fleetos/lab-os:1.0", "--add-file", "%s:/usr/share/fleetlab/adopt" % marker)
        if LEGACY not in lab.images:
            lab.fleetlab("image", "build", LEGACY, "--from", "fleetos/lab-os:1.0", "--legacy-oscontainer")
        self.record = lab.image_record(IMAGE)
        self.legacy_record = lab.image_record(LEGACY)
        self.same = lab.own_nodes("test_adopt", 2, disk_image=IMAGE)
        # With Python: the legacy test stages an oscontainer on it (oscontainer_rebase, the one module that
        # needs an interpreter on the host); the other nodes have none.
        self.older = lab.own_nodes("test_adopt", 1, disk_image="fleetos/lab-os:1.0", with_python=True)[0]
        self.legacy = lab.own_nodes("test_adopt", 1, disk_image=LEGACY)[0]
        self.nodes = self.same + [self.older, self.legacy]
        self.commits = dict({node: self.record["commit"] for node in self.same},
                            **{self.older: lab.base_record["commit"], self.legacy: self.legacy_record["commit"]})
        self.image = "%s/%s" % (lab.registry, IMAGE)
        self.pinned = "%s@%s" % (self.record["reference"], self.record["digest"])
        self.tmp = tmp_path_factory.mktemp("adopt-run")
        hosts, allvars = read_hosts(lab.inventory)
        inventory = {"all": {"vars": dict(allvars, fleetos_adopt_image=self.image),
                             "hosts": {name: hosts[name] for name in self.nodes}}}
        self.inventory = self.tmp / "hosts.yml"
        self.inventory.write_text(yaml.safe_dump(inventory, sort_keys=False))

    def reset(self):
        """As a disk image leaves a node: a refspec origin, nothing staged, no backups, no layer cache.

        The origin is found by the booted commit, not through rpm-ostree, which cannot
        load a sysroot whose origin a test broke.
        """
        for node in self.nodes:
            commit = self.commits[node]
            self.lab.exec(node, "for f in /sysroot/ostree/deploy/*/deploy/%s.*.origin; do printf '%%s' '%s' > $f; "
                                "rm -f $f.*.bak; done" % (commit, DISK_ORIGIN))
            self.lab.exec(node, "rpm-ostree cleanup -p >/dev/null; rm -rf /sysroot/ostree/container-cache")

    def play(self, *extra, check=True, name="report", limit=None):
        limit = limit or self.same + [self.older]
        extra = ("--limit", ",".join(limit + ["localhost"])) + extra
        start = len(self.lab.journal())
        proc = _run(self.lab, self.inventory, ADOPT, "--forks", "10",
                    "-e", "fleetos_report_dir=%s" % (self.tmp / name), *extra, check=check)
        proc.events = self.lab.journal()[start:]
        path = self.tmp / name / "adopt-report.json"
        proc.report = json.loads(path.read_text()) if path.exists() else None
        proc.recap = {m.group(1): (int(m.group(2)), int(m.group(3)), int(m.group(4)))
                      for m in RECAP.finditer(proc.stdout)}
        proc.hosts = {r["host"]: r for r in (proc.report or {}).get("hosts", [])}
        return proc

    def origin(self, node):
        return self.lab.exec(node, ["cat", _origin_path(self.lab.rpm_ostree_status(node))]).stdout

    def layer_digests(self):
        raw = self.lab.exec(self.same[0], "skopeo inspect --raw --authfile /etc/ostree/auth.json docker://%s"
                            % self.pinned).stdout
        return {layer["digest"]: layer["size"] for layer in json.loads(raw)["layers"]}


@pytest.fixture(scope="module")
def adoption(lab, tmp_path_factory):
    fleet = Adoption(lab, tmp_path_factory)
    fleet.reset()
    yield fleet
    fleet.reset()


def test_disk_image_nodes_start_with_a_plain_origin(lab, adoption):
    for node in adoption.same:
        booted = _booted(lab.rpm_ostree_status(node))
        assert booted["checksum"] == adoption.record["commit"]
        assert booted["origin"] == REFSPEC
    assert _booted(lab.rpm_ostree_status(adoption.older))["checksum"] == lab.base_record["commit"]
    assert lab.base_record["commit"] != adoption.record["commit"]


def test_check_mode_predicts_and_diffs_without_changing(lab, adoption):
    proc = adoption.play("--check", "--diff", name="check")
    for node in adoption.same:
        assert proc.hosts[node]["status"] == "adopted"
        assert adoption.origin(node) == DISK_ORIGIN
    assert "-refspec=%s" % REFSPEC in proc.stdout
    assert "+container-image-reference=ostree-unverified-registry:%s" % adoption.pinned in proc.stdout
    assert proc.hosts[adoption.older]["status"] == "staged"
    assert not [d for d in lab.rpm_ostree_status(adoption.older)["deployments"] if d["staged"]]


def test_adopt_in_place_then_rerun_is_unchanged(lab, adoption):
    boot_ids = {node: lab.boot_id(node) for node in adoption.nodes}
    layers = adoption.layer_digests()
    proc = adoption.play()

    # Same commit: adopted in place, changed, no reboot, no layer pulled.
    for node in adoption.same:
        result = proc.hosts[node]
        assert (result["status"], result["changed"], result["reboot_required"]) == ("adopted", True, False)
        assert result["origin_before"] == REFSPEC
        assert proc.recap[node][0] >= 1
        booted = _booted(lab.rpm_ostree_status(node))
        assert booted["checksum"] == adoption.record["commit"]
        assert booted["container-image-reference"] == "ostree-unverified-registry:%s" % adoption.pinned
        # The role checked that rpm_ostree_info reads this digest on the booted commit.
        assert "origin" not in booted
        backups = lab.exec(node, "cat %s.*.bak" % _origin_path(lab.rpm_ostree_status(node))).stdout
        assert backups == DISK_ORIGIN
        reads = [e for e in proc.events if e.get("event") == "blob_read" and e.get("node") == node]
        assert not [e for e in reads if e.get("digest") in layers], reads
    assert not [e for e in proc.events if e.get("event") in ("reboot", "boot") and e.get("node") in adoption.nodes]
    assert {node: lab.boot_id(node) for node in adoption.nodes} == boot_ids

    # Older commit: nothing adopted, a rebase is staged (locked), reboot required.
    older = proc.hosts[adoption.older]
    assert (older["status"], older["reboot_required"]) == ("staged", True)
    status = lab.rpm_ostree_status(adoption.older)
    assert _booted(status)["origin"] == REFSPEC
    staged = [d for d in status["deployments"] if d["staged"]]
    assert [d["checksum"] for d in staged] == [adoption.record["commit"]]
    assert staged[0]["container-image-reference-digest"] == adoption.record["digest"]
    assert proc.report["reboot_required"] == [adoption.older]
    # Each layer read once: the disk-image node keeps no layer cache, so rpm-ostree pulls
    # and the stage does not fetch the layers a second time beforehand.
    older_reads = [e for e in proc.events if e.get("event") == "blob_read" and e.get("node") == adoption.older
                   and e.get("digest") in layers]
    assert sorted(e["digest"] for e in older_reads) == sorted(layers)
    assert sum(int(e["bytes"]) for e in older_reads) == sum(layers.values())

    # The rerun: nothing changes anywhere, nothing is pulled.
    again = adoption.play(name="rerun")
    played = adoption.same + [adoption.older]
    assert {node: again.recap[node][0] for node in played} == {node: 0 for node in played}
    for node in adoption.same:
        assert again.hosts[node]["status"] == "unchanged"
    assert again.hosts[adoption.older]["status"] == "staged"
    assert again.hosts[adoption.older]["changed"] is False
    assert not [e for e in again.events if e.get("event") == "blob_read" and e.get("digest") in layers]


def test_adopted_node_upgrades_and_rebases_from_its_image(lab, adoption):
    node = adoption.same[0]
    if "container-image-reference" not in _booted(lab.rpm_ostree_status(node)):
        adoption.play(limit=[node], name="adopt-one")
    upgrade = lab.exec(node, "rpm-ostree upgrade --unchanged-exit-77", check=False)
    assert upgrade.returncode == 77, upgrade.stdout + upgrade.stderr
    lab.exec(node, "rpm-ostree rebase ostree-unverified-registry:%s@%s" % (lab.base_record["reference"], lab.base_digest))
    staged = [d for d in lab.rpm_ostree_status(node)["deployments"] if d["staged"]]
    assert [d["checksum"] for d in staged] == [lab.base_record["commit"]]
    adoption.reset()


def test_adopt_with_sysroot_read_only_as_on_coreos(lab, adoption):
    node = adoption.same[0]
    adoption.reset()
    lab.exec(node, "mount -o remount,bind,ro /sysroot")
    try:
        assert lab.exec(node, "touch /sysroot/ostree/probe", check=False).returncode != 0
        proc = adoption.play(limit=[node], name="read-only")
        assert proc.hosts[node]["status"] == "adopted"
        booted = _booted(lab.rpm_ostree_status(node))
        assert booted["container-image-reference"] == "ostree-unverified-registry:%s" % adoption.pinned
        # Written from a private mount namespace: the node still sees /sysroot read-only.
        assert lab.exec(node, "findmnt -no OPTIONS /sysroot").stdout.split(",")[0] == "ro"
    finally:
        lab.exec(node, "mount -o remount,bind,rw /sysroot")
        adoption.reset()


@pytest.mark.parametrize(("origin", "message"), [
    # Not a key file: libostree cannot load the deployment.
    ("[origin\nrefspec=%s\n" % REFSPEC, "origin"),
    # With baserefspec kept, the adopted origin would name both kinds of base.
    ("[origin]\nbaserefspec=%s\n" % REFSPEC, "both"),
])
def test_bad_origin_fails_clearly_and_is_left_as_it_was(lab, adoption, origin, message):
    node = adoption.same[1]
    adoption.reset()
    path = _origin_path(lab.rpm_ostree_status(node))
    lab.exec(node, "printf '%%s' '%s' > %s" % (origin, path))
    try:
        proc = adoption.play(limit=[node], check=False, name="bad")
        assert proc.returncode != 0
        result = proc.hosts[node]
        assert result["status"] == "failed"
        assert message in result["error"], result["error"]
        assert lab.exec(node, ["cat", path]).stdout == origin
    finally:
        adoption.reset()


def test_legacy_oscontainer_adopts_with_a_pivot_origin_or_rebases(lab, adoption):
    adoption.reset()
    legacy = adoption.legacy_record
    pinned = "%s@%s" % (legacy["reference"], legacy["digest"])
    pivot = "pivot://" + pinned
    nodes = [adoption.legacy, adoption.older]
    boot_id = lab.boot_id(adoption.legacy)
    proc = adoption.play("-e", "fleetos_adopt_image=%s/%s" % (lab.registry, LEGACY), limit=nodes, name="legacy")

    # Booted from the oscontainer's commit: the origin the pivot tool wrote, no reboot.
    result = proc.hosts[adoption.legacy]
    assert (result["status"], result["legacy"], result["reference"]) == ("adopted", True, pivot)
    booted = _booted(lab.rpm_ostree_status(adoption.legacy))
    assert booted["checksum"] == legacy["commit"]
    assert booted["custom-origin"] == [pivot, "Managed by fleetos.layering"]
    assert "container-image-reference" not in booted
    assert lab.boot_id(adoption.legacy) == boot_id

    # At another commit: the commit is pulled from the image's /srv/repo and staged.
    older = proc.hosts[adoption.older]
    assert (older["status"], older["reboot_required"]) == ("staged", True)
    staged = [d for d in lab.rpm_ostree_status(adoption.older)["deployments"] if d["staged"]]
    assert [(d["checksum"], d["custom-origin"][0]) for d in staged] == [(legacy["commit"], pivot)]

    again = adoption.play("-e", "fleetos_adopt_image=%s/%s" % (lab.registry, LEGACY), limit=nodes, name="legacy-rerun")
    assert {node: again.recap[node][0] for node in nodes} == {node: 0 for node in nodes}
    assert again.hosts[adoption.legacy]["status"] == "unchanged"
    adoption.reset()


def test_an_image_that_cannot_be_inspected_fails_every_host_and_changes_nothing(lab, adoption):
    adoption.reset()
    # Without the auth file the lab registry refuses the image.
    proc = adoption.play("-e", "fleetos_adopt_auth_file=/etc/ostree/no-such-auth.json", check=False, name="refused")
    assert proc.returncode != 0
    played = adoption.same + [adoption.older]
    for node in played:
        result = proc.hosts[node]
        assert result["status"] == "failed"
        assert result["error"].startswith("inspecting %s failed: " % adoption.image), result["error"]
    assert proc.report["counts"]["failed"] == len(played)
    for node in adoption.same:
        assert adoption.origin(node) == DISK_ORIGIN
    assert not [d for d in lab.rpm_ostree_status(adoption.older)["deployments"] if d["staged"]]


def test_role_on_its_own_inspects_the_image_on_the_host(lab, adoption):
    node = adoption.same[0]
    adoption.reset()
    playbook = adoption.tmp / "role.yml"
    playbook.write_text(
        "- name: The role in a playbook of one's own\n"
        "  hosts: %s\n"
        "  gather_facts: false\n"
        "  tasks:\n"
        "    - name: Adopt\n"
        "      ansible.builtin.include_role:\n"
        "        name: fleetos.layering.cloud_image_adopt\n"
        "      vars:\n"
        "        cloud_image_adopt_image: %s\n"
        "    - name: Show the result\n"
        "      ansible.builtin.debug:\n"
        "        msg: \"RESULT {{ cloud_image_adopt_result | to_json }}\"\n" % (node, adoption.image))
    proc = _run(lab, adoption.inventory, playbook)
    result = json.loads(re.search(r'"RESULT (.*)"', proc.stdout).group(1).replace('\\"', '"'))
    assert (result["status"], result["digest"], result["image"]) == ("adopted", adoption.record["digest"], adoption.pinned)
    assert _booted(lab.rpm_ostree_status(node))["container-image-reference"] == (
        "ostree-unverified-registry:%s" % adoption.pinned)
    adoption.reset()
