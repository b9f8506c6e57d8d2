"""A mixed pool: two bootc-managed and two rpm-ostree lab nodes, rolled out and back as one.

The playbooks pick the tool per host (fleetos_os_backend, auto by default): the plan reads
each host with bootc where bootc booted it, stages with `bootc switch --download-only` or
`rpm-ostree rebase`, activates with `bootc upgrade --from-downloaded --apply` or
`rpm-ostree finalize-deployment`, and rolls back with `bootc rollback` or `rpm-ostree
rollback`. What each node booted is read here with the node's own tool.

The four nodes are this module's own (`fleetlab claim`); the images are new on every run,
so a run never depends on where the last one left them. The last test runs bootc_switch alone
on a bootc node without Python: check mode, its busy check against an open file description lock
held on the node's sysroot lock, and the download-only stage as bootc_info and os_info read it.
"""

import json
import shlex
import time
import uuid

import pytest
import yaml

from conftest import REPO, pool_inventory, read_hosts
from test_integration_targets import run_playbook
from test_no_python import ansible
from test_rollout import _journal_intervals, _max_concurrent

ROLLOUT = REPO / "playbooks" / "rollout.yml"
ROLLBACK = REPO / "playbooks" / "rollback.yml"
BUDGET = 2


@pytest.fixture(scope="module")
def mixed(lab, tmp_path_factory):
    bootc = lab.own_nodes("test_bootc_rollout", 2, backend="bootc")
    rpm_ostree = lab.own_nodes("test_bootc_rollout_rpm", 2)
    for node in bootc + rpm_ostree:
        lab.fleetlab("fault", node, "clear")
    inventory = pool_inventory(lab, tmp_path_factory.mktemp("mixed") / "hosts.yml", "mixed", bootc + rpm_ostree,
                               {"fleetos_pool": "mixed", "fleetos_pool_max_unavailable": BUDGET})
    tag = uuid.uuid4().hex[:8]
    digest = lab.build_image("fleetos/mixed:%s" % tag, "--from", "fleetos/lab-os:1.0", "--version", "mixed-%s" % tag)
    return {"bootc": bootc, "rpm_ostree": rpm_ostree, "nodes": bootc + rpm_ostree, "inventory": inventory,
            "image": "%s/fleetos/mixed:%s" % (lab.registry, tag), "digest": digest}


def play(lab, mixed, tmp_path, playbook, *extra, report="report", check=True):
    class _Inventory:
        inventory = mixed["inventory"]

    start = len(lab.journal())
    proc = run_playbook(_Inventory(), playbook, "--forks", "10", "-e", "fleetos_report_dir=%s" % (tmp_path / report),
                        *extra, check=check)
    proc.events = lab.journal()[start:]
    name = "rollout-report.json" if playbook == ROLLOUT else "rollback-report.json"
    path = tmp_path / report / name
    proc.report = json.loads(path.read_text()) if path.exists() else None
    return proc


def booted_digest(lab, mixed, node):
    """The booted digest as the node's own tool reports it."""
    if node in mixed["bootc"]:
        status = json.loads(lab.exec(node, ["bootc", "status", "--format=json"], check=True).stdout)
        return status["status"]["booted"]["image"]["imageDigest"]
    status = lab.rpm_ostree_status(node)
    return next(d for d in status["deployments"] if d.get("booted"))["container-image-reference-digest"]


def max_down(events, nodes):
    """The most nodes between a reboot and their next boot at any instant, from the journal."""
    return _max_concurrent(_journal_intervals(events, nodes))


def test_mixed_pool_rolls_out_reruns_and_rolls_back_by_each_hosts_tool(lab, mixed, tmp_path):
    nodes = mixed["nodes"]
    before = {node: booted_digest(lab, mixed, node) for node in nodes}
    began = time.time()
    proc = play(lab, mixed, tmp_path, ROLLOUT, "-e", "fleetos_rollout_image=%s" % mixed["image"])
    report = proc.report
    assert report["result"] == "success", proc.stdout[-4000:]
    rows = {row["host"]: row for row in report["hosts"]}
    assert {node: rows[node]["backend"] for node in nodes} == dict(
        [(n, "bootc") for n in mixed["bootc"]] + [(n, "rpm-ostree") for n in mixed["rpm_ostree"]])
    assert {node: rows[node]["status"] for node in nodes} == {node: "activated" for node in nodes}
    for node in nodes:
        assert booted_digest(lab, mixed, node) == mixed["digest"], node
    assert max_down(proc.events, nodes) <= BUDGET
    assert sorted(e["node"] for e in proc.events if e["event"] == "reboot") == sorted(nodes)
    for node in mixed["bootc"]:
        # bootc tracks the target (its spec), so that a later `bootc upgrade` follows it.
        spec = json.loads(lab.exec(node, ["bootc", "status", "--format=json"], check=True).stdout)["spec"]
        assert spec["image"]["image"].endswith("@" + mixed["digest"]), spec
    rollout_seconds = time.time() - began

    again = play(lab, mixed, tmp_path, ROLLOUT, "-e", "fleetos_rollout_image=%s" % mixed["image"], report="rerun")
    assert again.report["counts"]["unchanged"] == len(nodes)
    assert [e for e in again.events if e["event"] in ("reboot", "blob_read") and e.get("node") in nodes] == []
    recap = [line for line in again.stdout.splitlines() if " : ok=" in line]
    assert recap and all("changed=0" in line for line in recap), "\n".join(recap)

    back = play(lab, mixed, tmp_path, ROLLBACK, "-e", "fleetos_rollback_from=%s" % mixed["digest"], report="back")
    for node in nodes:
        assert booted_digest(lab, mixed, node) == before[node], node
    assert max_down(back.events, nodes) <= BUDGET
    print("mixed pool of %d (%d bootc): rollout %.1f s, rerun changed=0, rollback by each host's tool"
          % (len(nodes), len(mixed["bootc"]), rollout_seconds))


def test_a_bootc_node_that_fails_health_is_rolled_back_with_bootc(lab, mixed, tmp_path):
    failing = mixed["bootc"][0]
    others = [node for node in mixed["nodes"] if node != failing]
    before = booted_digest(lab, mixed, failing)
    lab.fleetlab("fault", failing, "fail-health")
    try:
        # The failing node alone (--limit): its pool's budget of 2 is not in question here.
        proc = play(lab, mixed, tmp_path, ROLLOUT, "-v", "--limit", "%s,localhost" % failing,
                    "-e", "fleetos_rollout_image=%s" % mixed["image"], "-e", "fleetos_rollout_health_command=lab-health",
                    "-e", "fleetos_rollout_health_retries=1", check=False)
    finally:
        lab.fleetlab("fault", failing, "clear")
    assert proc.returncode != 0
    row = {r["host"]: r for r in proc.report["hosts"]}[failing]
    assert row["status"] == "failed" and row["rolled_back"], row
    assert row["backend"] == "bootc"
    assert booted_digest(lab, mixed, failing) == before
    # The rollback was bootc's: the activation ran `bootc rollback`, never rpm-ostree's.
    assert '"command": "bootc rollback --apply"' in proc.stdout, proc.stdout[-3000:]
    assert "rpm-ostree rollback" not in proc.stdout
    assert [e["node"] for e in proc.events if e["event"] == "reboot"] == [failing, failing]
    assert not any(e.get("node") in others for e in proc.events if e["event"] == "reboot")


def test_a_bootc_node_on_a_disk_images_commit_is_switched_not_rewritten(lab, mixed, tmp_path):
    """adopt.yml on a bootc host installed from a disk image built from the image's commit (not by
    `bootc install`, so the commit carries no image metadata): rewriting the origin would leave bootc
    without an image, so a download-only switch is staged; nothing reboots and the booted
    deployment stays as it was."""
    name = mixed["image"].split("/", 1)[1]
    node = json.loads(lab.fleetlab("claim", "test_bootc_adopt", "--count", "1", "--disk-image", name,
                                   "--backend", "bootc", "--json").stdout)[0]
    lab.exec(node, "rpm-ostree cleanup -p >/dev/null; rm -f /run/ostree/staged-deployment-locked")
    before = json.loads(lab.exec(node, ["bootc", "status", "--format=json"], check=True).stdout)["status"]["booted"]
    assert before["image"] is None
    boot_id = lab.boot_id(node)

    class _Inventory:
        inventory = tmp_path / "hosts.yml"

    hosts, allvars = read_hosts(lab.inventory)
    _Inventory.inventory.write_text(yaml.safe_dump({"all": {"vars": allvars, "hosts": {node: hosts[node]}}}))
    start = len(lab.journal())
    try:
        proc = run_playbook(_Inventory(), REPO / "playbooks" / "adopt.yml", "-e", "fleetos_adopt_image=%s" % mixed["image"],
                            "-e", "fleetos_report_dir=%s" % (tmp_path / "adopt"))
        events = lab.journal()[start:]
        report = json.loads((tmp_path / "adopt" / "adopt-report.json").read_text())
        row = {r["host"]: r for r in report["hosts"]}[node]
        assert row["status"] == "staged", (row, proc.stdout[-3000:])
        assert "bootc tracks an image only on a commit it imported" in row["reason"]
        status = json.loads(lab.exec(node, ["bootc", "status", "--format=json"], check=True).stdout)["status"]
        assert status["booted"] == before
        assert status["staged"]["image"]["imageDigest"] == mixed["digest"]
        assert status["staged"]["downloadOnly"] is True
        assert lab.boot_id(node) == boot_id
        assert [e for e in events if e["event"] == "reboot" and e.get("node") == node] == []
    finally:
        lab.exec(node, "rpm-ostree cleanup -p >/dev/null; rm -f /run/ostree/staged-deployment-locked")


# An open file description lock on the node's sysroot lock, as libostree (glnx_make_lock_file) takes it,
# held until the process is killed; run by the stand-ins' private interpreter (lab/README.md).
HOLD_SYSROOT_LOCK = (
    "import fcntl, os, struct, time\n"
    "fd = os.open('/sysroot/ostree/lock', os.O_RDWR | os.O_CREAT, 0o600)\n"
    "fcntl.fcntl(fd, fcntl.F_OFD_SETLK, struct.pack('hhqqi4x', fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0))\n"
    "time.sleep(120)\n")


def test_bootc_switch_needs_no_python_and_waits_for_the_sysroot_lock(lab, mixed):
    """bootc_switch on a bootc node without Python: check mode, then a switch refused while the sysroot lock is
    held (an OFD lock, which flock cannot see) and staged once it is free: download-only, staged, and no reboot
    required, as bootc_info and os_info read it after."""
    node = mixed["bootc"][-1]
    target = "%s@%s" % (mixed["image"].rsplit(":", 1)[0], mixed["digest"])
    clean = "rpm-ostree cleanup -p >/dev/null; rm -f /run/ostree/staged-deployment-locked"
    lab.exec(node, clean)
    assert lab.exec(node, "command -v python3", check=False).returncode != 0
    assert booted_digest(lab, mixed, node) != mixed["digest"]
    try:
        predicted = ansible(lab, node, "fleetos.layering.bootc_switch", {"image": target}, check=True)
        assert (predicted["changed"], predicted["staged"], predicted["reboot_required"]) == (True, True, False)
        assert json.loads(lab.exec(node, ["bootc", "status", "--format=json"]).stdout)["status"]["staged"] is None

        holder = lab.exec(node, "setsid /usr/libexec/fleetlab/python3 -c %s </dev/null >/dev/null 2>/run/holder.err & "
                          "echo $!" % shlex.quote(HOLD_SYSROOT_LOCK)).stdout.strip()
        try:
            inode = lab.exec(node, "for i in $(seq 50); do [ -e /sysroot/ostree/lock ] && grep -q OFDLCK /proc/locks "
                                   "&& break; sleep 0.1; done; cat /run/holder.err >&2; stat -c %i /sysroot/ostree/lock"
                             ).stdout.strip()
            assert (":%s " % inode) in lab.exec(node, ["cat", "/proc/locks"]).stdout
            busy = ansible(lab, node, "fleetos.layering.bootc_switch",
                           {"image": target, "retries": 1, "retry_delay": 1}, failed=True)
            assert busy["msg"].startswith("Failed to switch to registry image '%s' because bootc is busy: another "
                                          "process still held the ostree sysroot lock (/sysroot/ostree/lock) after 2 "
                                          "attempts" % target), busy
        finally:
            lab.exec(node, ["kill", holder], check=False)
        assert json.loads(lab.exec(node, ["bootc", "status", "--format=json"]).stdout)["status"]["staged"] is None

        staged = ansible(lab, node, "fleetos.layering.bootc_switch", {"image": target, "retries": 5, "retry_delay": 1})
        assert (staged["changed"], staged["staged"], staged["reboot_required"]) == (True, True, False), staged
        assert staged["after"]["digest"] == mixed["digest"] and staged["after"]["download_only"] is True
        raw = json.loads(lab.exec(node, ["bootc", "status", "--format=json"]).stdout)["status"]["staged"]
        assert raw["downloadOnly"] is True and raw["image"]["imageDigest"] == mixed["digest"]
        for module in ("fleetos.layering.bootc_info", "fleetos.layering.os_info"):
            read = ansible(lab, node, module)
            assert read["staged"]["download_only"] is True and read["reboot_required"] is False, (module, read)
        again = ansible(lab, node, "fleetos.layering.bootc_switch", {"image": target})
        assert (again["changed"], again["staged"], again["reboot_required"]) == (False, True, False)
    finally:
        lab.exec(node, clean)
