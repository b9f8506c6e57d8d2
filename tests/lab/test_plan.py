# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""playbooks/plan.yml on the lab fleet and on the documented example inventory.

plan.yml changes nothing, so it may read any lab node. On the lab it reads
`rpm-ostree status --json` from every node; the example inventory has no real hosts,
so it runs with `-e fleetos_plan_read_status=false` and contacts no host.
"""

import json
import os
import shutil
import subprocess

import pytest

from conftest import REPO, VENV_BIN, collections_path

EXAMPLE = REPO / "inventories" / "example"
PLAYBOOK = REPO / "playbooks" / "plan.yml"


def plan(out_dir, *args):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(collections_path()), ANSIBLE_NOCOLOR="1",
               ANSIBLE_FORCE_COLOR="0", ANSIBLE_DEPRECATION_WARNINGS="False", ANSIBLE_STDOUT_CALLBACK="default")
    proc = subprocess.run([str(VENV_BIN / "ansible-playbook"), str(PLAYBOOK), "-e",
                           "fleetos_plan_output_dir=%s" % out_dir] + list(args),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600, env=env,
                          cwd=str(REPO), check=False)
    rows = {}
    if (out_dir / "plan.json").is_file():
        rows = {row["host"]: row for row in json.loads((out_dir / "plan.json").read_text())["hosts"]}
    return proc, rows


def manifest(name, image, node_name=None, selector=None, paused=False):
    spec = {"image": image, "paused": paused}
    if node_name:
        spec["nodeName"] = node_name
    else:
        spec["nodeSelector"] = selector
    return json.dumps({"apiVersion": "fleetos.io/v1alpha1", "kind": "MachineImage",
                       "metadata": {"name": name}, "spec": spec})


def lab_fixture_files(lab, tmp_path, *documents):
    manifests = tmp_path / "machine_images"
    manifests.mkdir()
    (manifests / "lab.yaml").write_text("\n---\n".join(documents) + "\n")
    # A second inventory source gives the workers pool a default image (infra has none).
    pools = tmp_path / "pools.yml"
    pools.write_text("all:\n  children:\n    workers:\n      vars:\n        fleetos_pool_image: %s\n"
                     % json.dumps(lab.info["base_image_ref"]))
    return manifests, pools


def test_plan_on_the_lab(lab, tmp_path):
    image = lab.info["base_image_ref"]
    manifests, pools = lab_fixture_files(
        lab, tmp_path,
        manifest("zone-a-workers", image, selector={
            "matchLabels": {"fleetos.io/pool": "workers"},
            "matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zone-a"]}]}),
        manifest("node02-hold", image, node_name="node02", paused=True))
    # Every node of the lab (what other tests claimed too), read 20 at a time rather than 5.
    proc, rows = plan(tmp_path, "-i", str(lab.inventory), "-i", str(pools), "--forks", "20",
                      "-e", "machine_image_manifests_dir=%s" % manifests)
    assert proc.returncode == 0, proc.stdout[-8000:]
    for node in lab.nodes:
        labels = lab.info["nodes"][node]["labels"]
        if node == "node02":
            expected = ("nodeName", "node02-hold", True, image)
        elif labels.get("fleetos.io/pool") == "workers" and labels.get("topology.kubernetes.io/zone") == "zone-a":
            expected = ("selector", "zone-a-workers", False, image)
        else:  # only workers have a pool default here
            expected = ("pool", None, False, image if labels.get("fleetos.io/pool") == "workers" else None)
        assert (rows[node]["source"], rows[node]["name"], rows[node]["paused"], rows[node]["image"]) == expected
        # What the plan read is what the node reports now.
        booted = [d for d in lab.rpm_ostree_status(node)["deployments"] if d["booted"]][0]
        assert rows[node]["booted_checksum"] == booted["checksum"]
        assert rows[node]["booted_digest"] == booted.get("container-image-reference-digest")
        assert rows[node]["status_read"] is True
    assert rows["node03"]["reason"] == "no MachineImage names or selects node03 and fleetos_pool_image is not set"
    assert rows["node01"]["digest"] == image.split("@")[1]
    assert "HOST         POOL     SOURCE" in proc.stdout
    assert (tmp_path / "plan.md").read_text().startswith("# OS image plan")
    recap = {line.split()[0]: line for line in proc.stdout.splitlines() if " : ok=" in line}
    for node in lab.nodes:
        assert "changed=0" in recap[node] and "failed=0" in recap[node]


def test_plan_on_the_lab_reports_a_conflict(lab, tmp_path):
    image = lab.info["base_image_ref"]
    manifests, pools = lab_fixture_files(
        lab, tmp_path,
        manifest("workers", image, selector={"matchLabels": {"fleetos.io/pool": "workers"}}),
        manifest("zone-a", image, selector={"matchLabels": {"topology.kubernetes.io/zone": "zone-a"}}))
    # The two hosts the test reads (both workers in zone-a: the conflict is theirs), not the whole lab.
    proc, rows = plan(tmp_path, "-i", str(lab.inventory), "-i", str(pools), "-e", "fleetos_plan_hosts=node01,node02",
                      "-e", "machine_image_manifests_dir=%s" % manifests)
    assert proc.returncode != 0
    assert rows["node01"]["source"] == "error"
    assert rows["node01"]["reason"] == (
        "host node01 matches 2 MachineImages at the selector level: 'workers' (machine_images/lab.yaml document 1, "
        "spec.nodeSelector) and 'zone-a' (machine_images/lab.yaml document 2, spec.nodeSelector); make them "
        "disjoint or pin the host with spec.nodeName")
    assert rows["node02"]["source"] == "selector"


@pytest.mark.parametrize("with_inventory_plugin", [False, True], ids=["hosts-only", "with-machine-images-source"])
def test_plan_on_the_example(tmp_path, with_inventory_plugin):
    sources = ["-i", str(EXAMPLE / "hosts.yml")]
    if with_inventory_plugin:
        sources += ["-i", str(EXAMPLE / "machine_images.yml")]
    proc, rows = plan(tmp_path, *sources, "-e", "fleetos_plan_read_status=false")
    assert proc.returncode == 0, proc.stdout[-8000:]
    summary = {host: (row["source"], row["name"], row["paused"], row["status_read"]) for host, row in rows.items()}
    assert summary == {
        "web-01": ("pool", None, False, False),
        "web-02": ("pool", None, False, False),
        "web-03": ("selector", "web-zone-c-hold", True, False),
        "web-04": ("selector", "web-canary", False, False),
        "db-01": ("pool", None, False, False),
        "db-02": ("selector", "db-ssd", False, False),
        "db-03": ("nodeName", "db-03-hotfix", False, False),
        "edge-01": ("pool", None, False, False),
        "edge-02": ("selector", "edge-gpu", False, False),
        "edge-03": ("pool", None, False, False),
    }
    assert "| db-03 | db |" in (tmp_path / "plan.md").read_text()


def test_plan_warns_about_a_node_name_that_is_no_host(tmp_path):
    """A MachineImage whose nodeName is a typo applies to no host: a warning in the plan, not an error."""
    manifests = tmp_path / "machine_images"
    shutil.copytree(EXAMPLE / "machine_images", manifests)
    (manifests / "typo.yaml").write_text(
        "apiVersion: fleetos.io/v1alpha1\nkind: MachineImage\nmetadata: {name: db-3-typo}\n"
        "spec: {image: 'registry.example.com/fleetos/db-os@sha256:%s', nodeName: db-3}\n" % ("a" * 64))
    proc, rows = plan(tmp_path, "-i", str(EXAMPLE / "hosts.yml"), "-e", "fleetos_plan_read_status=false",
                      "-e", "machine_image_manifests_dir=%s" % manifests)
    assert proc.returncode == 0, proc.stdout[-8000:]
    warning = ("machine_images/typo.yaml document 1 (MachineImage 'db-3-typo') names db-3 in spec.nodeName, "
               "which is not a host of the inventory; it applies to no host")
    assert json.loads((tmp_path / "plan.json").read_text())["warnings"] == [warning]
    assert "Warning: %s" % warning in (tmp_path / "plan.md").read_text()
    assert rows["db-03"]["name"] == "db-03-hotfix"
