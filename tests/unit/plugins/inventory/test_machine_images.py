# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The machine_images inventory plugin, run by ansible-inventory on sample inventories."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[4]
EXAMPLE = REPO / "inventories" / "example"
RUNTIME = REPO / ".build" / "runtime"
DIGEST = "sha256:" + "b" * 64


def inventory(*sources):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(RUNTIME), ANSIBLE_INVENTORY_ANY_UNPARSED_IS_FAILED="True",
               ANSIBLE_NOCOLOR="1")
    argv = [str(Path(sys.executable).parent / "ansible-inventory"), "--list"]
    for source in sources:
        argv += ["-i", str(source)]
    return subprocess.run(argv, env=env, text=True, capture_output=True, check=False, timeout=120)


def plain(value):
    """ansible-inventory marks strings that must not be templated as {"__ansible_unsafe": ...}."""
    if isinstance(value, dict):
        if set(value) == {"__ansible_unsafe"}:
            return value["__ansible_unsafe"]
        return {key: plain(item) for key, item in value.items()}
    return value


def test_example_sets_variable_and_groups():
    proc = inventory(EXAMPLE / "hosts.yml", EXAMPLE / "machine_images.yml")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    hostvars = plain(data["_meta"]["hostvars"])
    assert hostvars["db-03"]["fleetos_machine_image"]["name"] == "db-03-hotfix"
    assert hostvars["web-01"]["fleetos_machine_image"]["source"] == "pool"
    groups = {name: sorted(body.get("hosts", [])) for name, body in data.items() if name.startswith("machine_image_")}
    assert groups == {
        "machine_image_web_canary": ["web-04"],
        "machine_image_web_zone_c_hold": ["web-03"],
        "machine_image_db_ssd": ["db-02"],
        "machine_image_db_03_hotfix": ["db-03"],
        "machine_image_edge_gpu": ["edge-02"],
        # constructed options of the example config
        "machine_image_paused": ["web-03"],
        "machine_image_source_nodeName": ["db-03"],
        "machine_image_source_selector": ["db-02", "edge-02", "web-03", "web-04"],
        "machine_image_source_pool": ["db-01", "edge-01", "edge-03", "web-01", "web-02"],
    }


CONFLICT = """
apiVersion: fleetos.io/v1alpha1
kind: MachineImage
metadata: {name: zone-b}
spec:
  image: "r/os@%s"
  nodeSelector: {matchLabels: {topology.kubernetes.io/zone: zone-b}}
""" % DIGEST

MISSING_SECRET = """
apiVersion: fleetos.io/v1alpha1
kind: MachineImage
metadata: {name: edge-01-pin}
spec: {image: "r/os@%s", nodeName: edge-01, pullSecret: no_such_variable}
""" % DIGEST


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (CONFLICT, "host db-02 matches 2 MachineImages at the selector level: 'db-ssd' (machine_images/db-ssd.yaml "
                   "document 1, spec.nodeSelector) and 'zone-b' (machine_images/zz.yaml document 1, spec.nodeSelector)"),
        (MISSING_SECRET, "machine_images/zz.yaml document 1 (MachineImage 'edge-01-pin'): spec.pullSecret names the "
                         "variable 'no_such_variable', which is not defined for host edge-01"),
        ("apiVersion: fleetos.io/v1alpha1\nkind: MachineImage\nmetadata: {name: t}\nspec: {image: r/os:1, nodeName: x}\n",
         "machine_images/zz.yaml document 1 (MachineImage 't'): spec.image 'r/os:1' is not digest-pinned"),
        ("apiVersion: fleetos.io/v1alpha1\nkind: MachineImage\nmetadata: {name: t}\n"
         "spec: {image: \"r/os@%s\", layeredImage: worker, nodeName: x}\n" % DIGEST,
         "machine_images/zz.yaml document 1 (MachineImage 't'): spec.image/spec.layeredImage are both set; give "
         "exactly one of them"),
    ],
)
def test_invalid_manifests_fail_the_source(tmp_path, extra, message):
    (tmp_path / "machine_images").mkdir()
    for manifest in (EXAMPLE / "machine_images").glob("*.yaml"):
        (tmp_path / "machine_images" / manifest.name).write_text(manifest.read_text())
    (tmp_path / "machine_images" / "zz.yaml").write_text(extra)
    (tmp_path / "group_vars").symlink_to(EXAMPLE / "group_vars")
    (tmp_path / "hosts.yml").write_text((EXAMPLE / "hosts.yml").read_text())
    (tmp_path / "machine_images.yml").write_text((EXAMPLE / "machine_images.yml").read_text())
    proc = inventory(tmp_path / "hosts.yml", tmp_path / "machine_images.yml")
    assert proc.returncode != 0
    assert message in " ".join(proc.stderr.split()), proc.stderr


def test_a_machine_image_and_a_pool_may_name_a_layered_image(tmp_path):
    (tmp_path / "machine_images").mkdir()
    (tmp_path / "machine_images" / "worker.yaml").write_text(
        "apiVersion: fleetos.io/v1alpha1\nkind: MachineImage\nmetadata: {name: gpu}\n"
        "spec: {layeredImage: worker-gpu, nodeName: n1}\n")
    (tmp_path / "hosts.yml").write_text(
        "all:\n  children:\n    workers:\n      vars: {fleetos_pool_layered_image: worker}\n"
        "      hosts: {n1: {}, n2: {}}\n")
    (tmp_path / "machine_images.yml").write_text("plugin: fleetos.layering.machine_images\n")
    proc = inventory(tmp_path / "hosts.yml", tmp_path / "machine_images.yml")
    assert proc.returncode == 0, proc.stderr
    hostvars = plain(json.loads(proc.stdout)["_meta"]["hostvars"])
    results = {host: hostvars[host]["fleetos_machine_image"] for host in ("n1", "n2")}
    assert {host: (r["source"], r["name"], r["image"], r["layered_image"]) for host, r in results.items()} == {
        "n1": ("nodeName", "gpu", None, "worker-gpu"), "n2": ("pool", None, None, "worker")}


def test_the_source_alone_fails_with_a_sentence():
    """AWX syncs each inventory source alone (and fails an update whose source does not parse)."""
    proc = inventory(EXAMPLE / "machine_images.yml")
    assert proc.returncode != 0
    assert ("machine_images.yml: no host of group 'all' is in the inventory when this MachineImage source is read;"
            " it assigns images to the hosts the sources before it define, so give it after them (-i hosts.yml -i"
            " machine_images.yml) or, in AWX, in the same inventory source as them (docs/awx.md)"
            in " ".join(proc.stderr.split())), proc.stderr


def test_one_inventory_directory_plans_as_the_two_sources_do(tmp_path):
    """The setup of docs/awx.md: one inventory source, a directory with the hosts, their group_vars and the
    plugin's configuration; the manifests beside the directory, not in it (every file in it is read as an
    inventory source). The same hosts, variables and groups as the CLI's two sources, no other group, no warning."""
    source = tmp_path / "prod"
    source.mkdir()
    (tmp_path / "machine_images").mkdir()
    for manifest in (EXAMPLE / "machine_images").glob("*.yaml"):
        (tmp_path / "machine_images" / manifest.name).write_text(manifest.read_text())
    (source / "group_vars").symlink_to(EXAMPLE / "group_vars")
    (source / "hosts.yml").write_text((EXAMPLE / "hosts.yml").read_text())
    config = (EXAMPLE / "machine_images.yml").read_text().replace("manifests_dir: machine_images",
                                                                  "manifests_dir: ../machine_images")
    assert "manifests_dir: ../machine_images" in config
    (source / "machine_images.yml").write_text(config)
    one = inventory(source)
    two = inventory(EXAMPLE / "hosts.yml", EXAMPLE / "machine_images.yml")
    assert one.returncode == 0 and two.returncode == 0, one.stderr + two.stderr
    assert "WARNING" not in one.stderr, one.stderr
    mine, theirs = json.loads(one.stdout), json.loads(two.stdout)
    assert sorted(mine) == sorted(theirs)
    assert plain(mine["_meta"]["hostvars"]) == plain(theirs["_meta"]["hostvars"])
