# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""playbooks/plan.yml on a copy of the example inventory with MachineImage manifests that do not load.

The plan is made from the inventory alone (fleetos_plan_read_status=false, connection
local): no host is contacted, so this needs no lab.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "inventories" / "example"
RUNTIME = REPO / ".build" / "runtime"
HOSTS = ["db-01", "db-02", "db-03", "edge-01", "edge-02", "edge-03", "web-01", "web-02", "web-03", "web-04"]
PREFIX = "MachineImage manifests did not load: "
HEADER = "MachineImage manifests that did not load (no host is planned from them):"
BROKEN = "machine_images/broken.yaml is not valid YAML: line 4, column 5: expected ',' or '}', but got ':' " \
         "(while parsing a flow mapping from line 3, column 11)"


ENV = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(RUNTIME), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
           ANSIBLE_STDOUT_CALLBACK="default", ANSIBLE_DEPRECATION_WARNINGS="False")


def plan(tmp_path, files, sources=None, extra=()):
    inventory = tmp_path / "inventory"
    shutil.copytree(EXAMPLE, inventory)
    for name, data in files.items():
        (inventory / "machine_images" / name).write_bytes(data if isinstance(data, bytes) else data.encode())
    out = tmp_path / "out"
    out.mkdir()
    sources = sources or [inventory / "hosts.yml"]
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), str(REPO / "playbooks" / "plan.yml"),
         "-c", "local", "-e", "fleetos_plan_read_status=false", "-e", "fleetos_plan_output_dir=%s" % out]
        + [arg for source in sources for arg in ("-i", str(source))] + list(extra),
        env=ENV, cwd=str(tmp_path), text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False,
        timeout=300)
    report = json.loads((out / "plan.json").read_text()) if (out / "plan.json").is_file() else None
    markdown = (out / "plan.md").read_text() if (out / "plan.md").is_file() else ""
    return proc, report, markdown


def shown_once_at_the_top(stdout, errors):
    """The report play prints the header and each error exactly once, before the plan's table."""
    lines = [line.strip().rstrip(",") for line in stdout.splitlines()]
    table = next(i for i, line in enumerate(lines) if line.startswith('"HOST         POOL'))
    header = lines.index(json.dumps(HEADER))
    assert lines.count(json.dumps(HEADER)) == 1
    assert [lines[i] for i in range(header + 1, header + 1 + len(errors))] == [json.dumps(e) for e in errors]
    for error in errors:
        assert lines.count(json.dumps(error)) == 1
    assert header < table


@pytest.mark.parametrize("files, errors, reason", [
    ({"broken.yaml": "apiVersion: fleetos.io/v1alpha1\nkind: MachineImage\nmetadata: {name: x\nspec: [\n"},
     [BROKEN], PREFIX + BROKEN),
    ({"broken.yaml": "apiVersion: fleetos.io/v1alpha1\nkind: MachineImage\nmetadata: {name: x\nspec: [\n",
      "a-binary.yml": b"\x7fELF\x02\x01\x01\x00", "z-list.yaml": "- one\n- two\n",
      "z-twice.yaml": "kind: MachineImage\nkind: MachineImage\n",
      "z-unknown.yaml": (EXAMPLE / "machine_images" / "db-ssd.yaml").read_text().replace(
          "metadata:\n  name: db-ssd\n", "metadata:\n  name: db-ssd-2\n  nmae: db\n")},
     ["machine_images/a-binary.yml is binary, not a YAML text (a NUL byte at offset 7)",
      BROKEN,
      "machine_images/z-list.yaml document 1 is a list, not a MachineImage mapping",
      "machine_images/z-twice.yaml is not valid YAML: line 2: the key 'kind' appears twice in one mapping (first on "
      "line 1); give each key once",
      "machine_images/z-unknown.yaml document 1 (MachineImage 'db-ssd-2'): metadata.nmae is not a MachineImage "
      "metadata field; allowed: name, labels, annotations"],
     PREFIX + "machine_images/a-binary.yml is binary, not a YAML text (a NUL byte at offset 7) (and 4 more files that "
              "did not load)"),
], ids=["one-file", "five-files"])
def test_a_manifest_that_does_not_load_is_named_once_and_fails_every_host(tmp_path, files, errors, reason):
    proc, report, markdown = plan(tmp_path, files)
    assert proc.returncode != 0, proc.stdout[-4000:]
    shown_once_at_the_top(proc.stdout, errors)
    assert report["manifest_errors"] == errors
    assert {row["host"]: (row["action"], row["source"], row["reason"]) for row in report["hosts"]} == {
        host: ("error", "error", reason) for host in HOSTS}
    assert report["errors"] == len(HOSTS)
    assert markdown.split("| host |")[0] == "# OS image plan\n\n" + "".join("Error: %s\n\n" % e for e in errors)
    assert "planning failed" not in proc.stdout and "is undefined" not in proc.stdout
    assert len(reason) < 300
    final = re.search(r'fatal: \[[^\]]+\]: FAILED! => (\{.*\})', proc.stdout)
    assert json.loads(final.group(1))["msg"] == "%d of %d hosts could not be planned (plan.json gives each reason): %s" \
        % (len(HOSTS), len(HOSTS), reason)


def test_the_example_plans_without_manifest_errors(tmp_path):
    proc, report, markdown = plan(tmp_path, {})
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert report["manifest_errors"] == [] and report["errors"] == 0
    assert HEADER not in proc.stdout and "Error:" not in markdown
    assert {row["host"]: row["source"] for row in report["hosts"]}["db-03"] == "nodeName"
    # The summary of set_stats, printed line by line: what outlives an AWX job's files.
    counts = {}
    for row in report["hosts"]:
        status = row["action"] or "planned"
        counts[status] = counts.get(status, 0) + 1
    summary = ['"**fleetos.layering plan: success**"', '"Hosts: %s"' % ", ".join(
        "%d %s" % (counts[status], status) for status in sorted(counts))]
    lines = [line.strip().rstrip(",") for line in proc.stdout.splitlines()]
    assert all(line in lines for line in summary), proc.stdout[-2000:]
    # Planning changes nothing: writing plan.json and plan.md on the controller (on behalf of the run's first
    # host) is not reported as a change.
    recap = re.findall(r"^\S+\s+: ok=\d+\s+changed=(\d+)", proc.stdout, re.M)
    assert recap and set(recap) == {"0"}, proc.stdout[-2000:]


@pytest.mark.parametrize("limit, shown", [(10, True), (9, False)])
def test_each_hosts_plan_is_printed_up_to_fleetos_plan_show_hosts(tmp_path, limit, shown):
    proc, report, markdown = plan(tmp_path, {}, extra=["-e", "fleetos_plan_show_hosts=%d" % limit])
    assert proc.returncode == 0, proc.stdout[-4000:]
    note = "Each host's plan is in plan.md and plan.json: 10 hosts, more than fleetos_plan_show_hosts (9) to print"
    blocks = [line for line in proc.stdout.splitlines() if line.strip().startswith('"db-03 pool=')]
    assert (len(blocks), note in proc.stdout) == ((1, False) if shown else (0, True)), proc.stdout[-4000:]
    # The table, plan.md and plan.json have every host either way.
    assert sorted(row["host"] for row in report["hosts"]) == HOSTS
    assert all("| %s |" % host in markdown for host in HOSTS)
    assert sum(1 for line in proc.stdout.splitlines() if line.strip().startswith('"db-03       ')) == 1


def exported_inventory(tmp_path):
    """The example inventory (hosts + the machine_images inventory plugin) as AWX imports it: flattened by
    ``ansible-inventory --list --export`` and handed to the job as an inventory script, with no manifests
    next to it."""
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-inventory"), "-i", str(EXAMPLE / "hosts.yml"),
         "-i", str(EXAMPLE / "machine_images.yml"), "--list", "--export"],
        env=ENV, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=True, timeout=120)
    awx = tmp_path / "awx"
    awx.mkdir()
    (awx / "inventory.json").write_text(proc.stdout)
    script = awx / "hosts"
    script.write_text("#!/bin/sh\nexec cat %s\n" % (awx / "inventory.json"))
    script.chmod(0o755)
    return script


def rows(report):
    return {row["host"]: (row["source"], row["name"], row["image"]) for row in report["hosts"]}


def test_an_awx_exported_inventory_plans_as_the_inventory_directory(tmp_path):
    proc, directory, _markdown = plan(tmp_path / "cli", {})
    assert proc.returncode == 0, proc.stdout[-4000:]
    script = exported_inventory(tmp_path)
    proc, exported, _markdown = plan(tmp_path / "awx-job", {}, sources=[script])
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert rows(exported) == rows(directory)
    # MachineImages decide hosts in the example: a flattened inventory that fell back to the pool
    # defaults would not give the same rows.
    assert {row[0] for row in rows(directory).values()} >= {"nodeName", "selector", "pool"}


def test_manifests_expected_where_there_are_none_fail_every_host(tmp_path):
    script = exported_inventory(tmp_path)
    # Without the plugin's results (a job that names the manifests directory itself).
    data = json.loads((tmp_path / "awx" / "inventory.json").read_text())
    for hostvars in data["_meta"]["hostvars"].values():
        hostvars.pop("fleetos_machine_image", None)
    (tmp_path / "awx" / "inventory.json").write_text(json.dumps(data))
    missing = tmp_path / "project" / "machine_images"
    # Named with the playbooks' variable, or with the role's own: either is named on purpose.
    for variable in ("fleetos_machine_images_dir", "machine_image_manifests_dir"):
        proc, report, _markdown = plan(tmp_path / variable, {}, sources=[script],
                                       extra=["-e", "%s=%s" % (variable, missing)])
        assert proc.returncode != 0
        reason = ("MachineImage manifests were expected in %s (fleetos_machine_images_dir or "
                  "machine_image_manifests_dir), but that directory does not exist" % missing)
        assert report["manifest_errors"] == [reason], variable
        assert {row["host"]: (row["action"], row["reason"]) for row in report["hosts"]} == {
            host: ("error", reason) for host in HOSTS}


LOCKED = "sha256:" + "4" * 64
LOCK = """apiVersion: fleetos.io/v1alpha1
kind: LayeredImageLock
images:
- name: worker
  image: registry.example.com/os/worker@%s
  digest: %s
  base: {image: registry.example.com/os/base:9.6, name: registry.example.com/os/base, digest: sha256:%s, version: '9.6'}
  layers:
  - {name: kubelet, repository: registry.example.com/os/kubelet, digest: sha256:%s, version: 1.31.5}
  - {name: ovs, repository: registry.example.com/os/ovs, digest: sha256:%s, version: '3.4'}
""" % (LOCKED, LOCKED, "5" * 64, "6" * 64, "7" * 64)
LAYERED = """apiVersion: fleetos.io/v1alpha1
kind: MachineImage
metadata: {name: web-01-worker}
spec: {layeredImage: worker, nodeName: web-01}
---
apiVersion: fleetos.io/v1alpha1
kind: MachineImage
metadata: {name: edge-01-infra}
spec: {layeredImage: infra, nodeName: edge-01}
"""


def test_a_layered_image_is_planned_from_the_lock_or_named_as_the_error(tmp_path):
    lock = tmp_path / "layered-images.lock.yml"
    lock.write_text(LOCK)
    proc, report, markdown = plan(tmp_path / "with", {"layered.yaml": LAYERED},
                                  extra=["-e", "fleetos_rollout_lock=%s" % lock])
    assert proc.returncode != 0  # edge-01 names a LayeredImage the lock lacks
    by_host = {row["host"]: row for row in report["hosts"]}
    web = by_host["web-01"]
    assert (web["source"], web["name"], web["wanted"], web["digest"]) == (
        "nodeName", "web-01-worker", "registry.example.com/os/worker@" + LOCKED, LOCKED)
    assert web["layered"]["summary"] == "base 9.6, kubelet 1.31.5, ovs 3.4"
    assert "| web-01 |" in markdown and "| worker: base 9.6, kubelet 1.31.5, ovs 3.4 | %s |" % LOCKED in markdown
    assert "layered: worker (base 9.6, kubelet 1.31.5, ovs 3.4) %s" % LOCKED in proc.stdout
    assert (by_host["edge-01"]["action"], by_host["edge-01"]["reason"]) == (
        "error", "spec.layeredImage of MachineImage 'edge-01-infra' (machine_images/layered.yaml document 2) names "
                 "the LayeredImage 'infra', which the lock %s does not have (it has: worker); compose it with "
                 "compose.yml first" % lock)
    # Every other host is planned as before.
    assert [row["host"] for row in report["hosts"] if row["action"] == "error"] == ["edge-01"]

    proc, report, _markdown = plan(tmp_path / "without", {"layered.yaml": LAYERED})
    assert proc.returncode != 0
    reasons = {row["host"]: row["reason"] for row in report["hosts"] if row["action"] == "error"}
    assert sorted(reasons) == ["edge-01", "web-01"]
    assert reasons["web-01"] == (
        "spec.layeredImage of MachineImage 'web-01-worker' (machine_images/layered.yaml document 1) names the "
        "LayeredImage 'worker', but no lock is given: set fleetos_rollout_lock to the layered-images.lock.yml "
        "compose.yml wrote")


def test_the_role_gives_every_host_its_own_plan_without_a_status_read(tmp_path):
    """os_plan_result templates lazily, as the host it is read for, to that host's record of the fleet plan (each
    host's plan and error only without a status read)."""
    playbook = tmp_path / "role.yml"
    playbook.write_text("""- hosts: all
  gather_facts: false
  tasks:
    - ansible.builtin.include_role:
        name: fleetos.layering.os_plan
      vars:
        os_plan_read_status: false
    - ansible.builtin.debug:
        msg: "PLAN {{ inventory_hostname }} {{ os_plan_result.host }} {{ os_plan_result.source }} {{ os_plan_result.pool }}"
""")
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), str(playbook), "-c", "local",
         "-i", str(EXAMPLE / "hosts.yml")],
        env=ENV, cwd=str(tmp_path), text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False,
        timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:]
    found = {m.group(1): m.group(2, 3, 4) for m in re.finditer(r'"msg": "PLAN (\S+) (\S+) (\S+) (\S+)"', proc.stdout)}
    assert sorted(found) == HOSTS
    assert all(host == own for host, (own, _source, _pool) in found.items())
    assert found["db-03"][1] == "nodeName"
    assert {host: pool for host, (_own, _source, pool) in found.items()} == {
        host: host.split("-", maxsplit=1)[0] for host in HOSTS}


def test_a_plan_that_read_no_machine_image_source_says_so_first_and_fails_when_they_are_required(tmp_path):
    """The hosts alone (as AWX gives them when the MachineImage source was synced on its own): one line at the
    top of the output, plan.md and plan.json (set_stats: test__stats); with fleetos_machine_images_required, a
    failure first."""
    inventory = tmp_path / "alone"
    inventory.mkdir()
    (inventory / "hosts.yml").write_text((EXAMPLE / "hosts.yml").read_text())
    (inventory / "group_vars").symlink_to(EXAMPLE / "group_vars")
    line = ("No MachineImage source was read: no host has fleetos_machine_image (the inventory plugin"
            " fleetos.layering.machine_images sets it), fleetos_machine_images_dir is not set and there is no"
            " machine_images directory beside the inventory, so every host gets its pool default or fleetos_rollout_image.")
    proc, report, markdown = plan(tmp_path, {}, sources=[inventory / "hosts.yml"],
                                  extra=["-e", "fleetos_rollout_image=r.example/os@sha256:" + "c" * 64])
    assert proc.returncode == 0, proc.stdout[-4000:]
    lines = [text.strip() for text in proc.stdout.splitlines()]
    said = lines.index('"msg": %s' % json.dumps(line))
    assert said < next(i for i, text in enumerate(lines) if text.startswith('"HOST         POOL'))
    assert report["warnings"][0] == line and markdown.startswith("# OS image plan\n\nWarning: %s\n\n" % line)
    # Every host on its pool default, none on a MachineImage.
    assert {row["source"] for row in report["hosts"]} == {"pool"}
    required, report, _markdown = plan(tmp_path / "required", {}, sources=[inventory / "hosts.yml"],
                                       extra=["-e", "fleetos_machine_images_required=true"])
    assert required.returncode != 0
    assert json.loads(re.search(r'fatal: \[[^\]]+\]: FAILED! => (\{.*\})', required.stdout).group(1))["msg"] == (
        line[:-1] + ", and fleetos_machine_images_required is true.")
    assert report is None
    # With the MachineImage source, nothing of it.
    proc, report, markdown = plan(tmp_path / "with", {})
    assert line not in proc.stdout and line not in report["warnings"] and "Warning: No MachineImage" not in markdown
