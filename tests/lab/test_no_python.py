"""Host-side steps that need no Python on the host (docs/hosts-without-python.md), on lab nodes, which have no
interpreter (lab/README.md, "Python on nodes"); the single-step tests also name one that does not exist, so
that they would fail on a node with Python as well if a module ran.

The reads (os_info, rpm_ostree_info), the rollout lease (taken, renewed, refused, released; its file on the
node as the controller decided it), the stage (rpm_ostree_rebase: check mode, and a real rebase to the
image the node runs, by digest: nothing to do), and one rollout of a pool whose hosts have Python or not.
"""

import json
import os
import subprocess

import pytest
import yaml

from conftest import REPO, VENV_BIN, collections_path, read_hosts
from test_integration_targets import run_playbook

NOWHERE = "ansible_python_interpreter=/nonexistent/python3"
LEASE = "/var/lib/fleetos-test-no-python/lease.json"


def ansible(lab, node, module, args=None, check=False, failed=False):
    """``ansible NODE -m MODULE -a ARGS`` with no Python on the node; -> the task's result."""
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(collections_path()), ANSIBLE_HOST_KEY_CHECKING="True",
               ANSIBLE_NOCOLOR="1", ANSIBLE_DEPRECATION_WARNINGS="False")
    # -o: one line a host, "NODE | SUCCESS => {the result}".
    argv = [str(VENV_BIN / "ansible"), "-o", "-i", str(lab.inventory), node, "-m", module, "-e", NOWHERE]
    if args is not None:
        argv += ["-a", json.dumps(args)]
    if check:
        argv.append("--check")
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                          cwd=str(lab.root), timeout=300, check=False)
    line = [text for text in proc.stdout.splitlines() if text.startswith(node + " | ")]
    assert len(line) == 1, proc.stdout + proc.stderr
    verdict, text = line[0][len(node + " | "):].split(" => ", 1)
    result = json.loads(text)
    assert (verdict == "FAILED!") is failed and verdict in ("FAILED!", "SUCCESS", "CHANGED"), (
        line[0], proc.stderr[-2000:])
    assert "interpreter" not in json.dumps(result).lower(), result
    return result


@pytest.fixture(scope="module")
def node(lab):
    return lab.nodes[0]


def test_the_reads_need_no_python(lab, node):
    status = lab.rpm_ostree_status(node)
    booted = [d for d in status["deployments"] if d["booted"]][0]
    for module in ("fleetos.layering.os_info", "fleetos.layering.rpm_ostree_info"):
        result = ansible(lab, node, module)
        assert result["changed"] is False and result["booted"]["checksum"] == booted["checksum"], module
        assert result["booted"]["image"]["digest"] == booted["container-image-reference-digest"], module
        assert result["architecture"] == "amd64" and result["reboot_required"] is False, module
    assert ansible(lab, node, "fleetos.layering.os_info")["backend"] == "rpm-ostree"


def test_the_lease_needs_no_python(lab, node):
    lab.exec(node, ["rm", "-rf", os.path.dirname(LEASE)])
    owner = {"controller": "ctl", "user": "ops", "pid": 1}
    try:
        taken = ansible(lab, node, "fleetos.layering.os_rollout_lease",
                        {"rollout": "r1", "owner": owner, "started_at": 1000.0, "path": LEASE, "deployments": "auto"})
        assert taken["acquired"] and taken["changed"] and taken["deployments"]["backend"] == "rpm-ostree"
        on_node = json.loads(lab.exec(node, ["cat", LEASE]).stdout)
        assert on_node == taken["lease"]
        mode = lab.exec(node, ["stat", "-c", "%a", LEASE, os.path.dirname(LEASE)]).stdout.split()
        assert mode == ["600", "700"]
        refused = ansible(lab, node, "fleetos.layering.os_rollout_lease",
                          {"rollout": "r2", "owner": owner, "started_at": 2000.0, "path": LEASE}, failed=True)
        assert refused["holder"]["rollout"] == "r1" and refused["msg"].startswith("The host is leased by rollout r1")
        released = ansible(lab, node, "fleetos.layering.os_rollout_lease",
                           {"rollout": "r1", "state": "released", "phase": "done", "path": LEASE})
        assert released["changed"] and json.loads(lab.exec(node, ["cat", LEASE]).stdout)["released"] is True
        # Only the file and its lock: no temporary file left behind.
        assert sorted(lab.exec(node, ["ls", "-A", os.path.dirname(LEASE)]).stdout.split()) == [
            "lease.json", "lease.json.lock"]
    finally:
        lab.exec(node, ["rm", "-rf", os.path.dirname(LEASE)])


def test_the_rpm_ostree_stage_needs_no_python(lab, node, rollout_image):
    image = "%s@%s" % (lab.base_image.rsplit(":", 1)[0], lab.base_digest)
    booted = [d for d in lab.rpm_ostree_status(node)["deployments"] if d["booted"]][0]
    if booted.get("container-image-reference-digest") != lab.base_digest:
        pytest.skip("%s does not run the lab base image" % node)
    for check in (True, False):
        result = ansible(lab, node, "fleetos.layering.rpm_ostree_rebase",
                         {"image": image, "auth_file": "/etc/ostree/auth.json"}, check=check)
        assert result["changed"] is False and result["digest"] == lab.base_digest, result
        assert result["before"]["checksum"] == booted["checksum"]
    # A real stage: the credentials are put where rpm-ostree reads them for the rebase only.
    target = "%s@%s" % (rollout_image["tag_image"].rsplit(":", 1)[0], rollout_image["digest"])
    had_run_auth = lab.exec(node, ["test", "-e", "/run/ostree/auth.json"], check=False).returncode == 0
    try:
        staged = ansible(lab, node, "fleetos.layering.rpm_ostree_rebase",
                         {"image": target, "auth_file": "/etc/ostree/auth.json", "lock_finalization": True})
        assert staged["changed"] and staged["reboot_required"] and staged["after"]["digest"] == rollout_image["digest"]
        deployments = lab.rpm_ostree_status(node)["deployments"]
        assert [d.get("container-image-reference-digest") for d in deployments if d.get("staged")] == [
            rollout_image["digest"]]
        listing = lab.exec(node, ["ls", "-A", "/run/ostree"], check=False).stdout.split()
        assert ("auth.json" in listing) is had_run_auth and not [f for f in listing if "fleetos" in f or ".tmp" in f]
    finally:
        lab.exec(node, "rpm-ostree cleanup -p >/dev/null")


def _booted_digest(lab, node):
    booted = [d for d in lab.rpm_ostree_status(node)["deployments"] if d["booted"]][0]
    return booted.get("container-image-reference-digest")


def test_one_rollout_on_hosts_with_and_without_python(lab, rollout_image, tmp_path):
    """The same rollout on one pool of two nodes without Python and two with (RHEL image mode has one):
    every host staged, rebooted within the budget, verified; then rolled back the same way."""
    without = lab.own_nodes("test_no_python-mixed", 2)
    with_python = lab.own_nodes("test_no_python-mixed", 2, with_python=True)
    nodes = without + with_python
    assert [lab.exec(n, "command -v python3", check=False).returncode == 0 for n in nodes] == [False] * 2 + [True] * 2
    hosts, allvars = read_hosts(lab.inventory)
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"vars": allvars, "children": {"mixed": {
        "vars": {"fleetos_pool": "mixed", "fleetos_pool_max_unavailable": 2},
        "hosts": {n: hosts[n] for n in nodes}}}}}, sort_keys=False))

    class _Inventory:
        pass

    shim = _Inventory()
    shim.inventory = inventory
    for node in nodes:
        assert _booted_digest(lab, node) == lab.base_digest, node
    try:
        run_playbook(shim, REPO / "playbooks" / "rollout.yml", "--forks", "8",
                     "-e", "fleetos_rollout_image=%s" % rollout_image["tag_image"],
                     "-e", "fleetos_report_dir=%s" % (tmp_path / "report"))
        report = json.loads((tmp_path / "report" / "rollout-report.json").read_text())
        assert report["result"] == "success" and report["counts"]["activated"] == 4, report["counts"]
        assert report["most_held"] == {"mixed": 2}
        assert {n: _booted_digest(lab, n) for n in nodes} == {n: rollout_image["digest"] for n in nodes}
    finally:
        run_playbook(shim, REPO / "playbooks" / "rollback.yml", "--forks", "8",
                     "-e", "fleetos_rollback_from=%s" % rollout_image["digest"],
                     "-e", "fleetos_report_dir=%s" % (tmp_path / "rollback"))
    assert {n: _booted_digest(lab, n) for n in nodes} == {n: lab.base_digest for n in nodes}
