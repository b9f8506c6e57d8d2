"""The playbooks as an AWX / Automation Controller job runs them: through ansible-runner.

A private data directory as AWX lays it out for a job: `inventory/hosts`, an inventory script
that prints the inventory AWX imported (`ansible-inventory --list --export` of the lab's
inventory plus a MachineImage inventory source, flattened: no manifests next to it), `env/`
with the collections path and the extra variables, and `project/` with a playbook of the
user's project that imports the collection's playbook by its FQCN. No terminal.

The nodes are this module's own (`fleetlab claim`); the image is new on every run.
"""

import json
import os
import subprocess
import uuid

import pytest
import yaml

from conftest import REPO, VENV_BIN, collections_path, read_hosts
from test_bootc_rollout import max_down
from test_integration_targets import run_playbook

ansible_runner = pytest.importorskip("ansible_runner", reason="ansible-runner is installed by `make venv`")

MANIFEST = """apiVersion: fleetos.io/v1alpha1
kind: MachineImage
metadata: {name: runner-pinned}
spec:
  nodeName: %s
  image: %s
"""


@pytest.fixture(scope="module")
def job(lab, tmp_path_factory):
    """The nodes, a MachineImage for one of them, and both inventories: the directory and AWX's copy."""
    nodes = lab.own_nodes("test_runner", 2)
    tag = uuid.uuid4().hex[:8]
    digest = lab.build_image("fleetos/runner:%s" % tag, "--from", "fleetos/lab-os:1.0", "--version", "runner-%s" % tag)
    image = "%s/fleetos/runner@%s" % (lab.registry, digest)
    root = tmp_path_factory.mktemp("runner")
    # The user's inventory directory: the lab's hosts, a pool default for both nodes, and a
    # MachineImage that binds the second node to the new image.
    directory = root / "inventory"
    (directory / "machine_images").mkdir(parents=True)
    known, allvars = read_hosts(lab.inventory)
    (directory / "hosts.yml").write_text(yaml.safe_dump({"all": {"vars": allvars, "children": {"runner": {
        "vars": {"fleetos_pool": "runner", "fleetos_pool_image": allvars["fleetos_lab_base_image"],
                 "fleetos_pool_max_unavailable": 2},
        "hosts": {name: {"ansible_host": known[name]["ansible_host"]} for name in nodes}}}}}))
    (directory / "machine_images" / "pinned.yaml").write_text(MANIFEST % (nodes[1], image))
    (directory / "machine_images.yml").write_text("plugin: fleetos.layering.machine_images\n")
    env = {"ANSIBLE_COLLECTIONS_PATH": str(collections_path()), "ANSIBLE_NOCOLOR": "1",
           "ANSIBLE_DEPRECATION_WARNINGS": "False", "PATH": "%s:%s" % (VENV_BIN, os.environ.get("PATH", ""))}
    exported = _run([str(VENV_BIN / "ansible-inventory"), "-i", str(directory / "hosts.yml"),
                     "-i", str(directory / "machine_images.yml"), "--list", "--export"], env)
    return {"nodes": nodes, "image": image, "digest": digest, "root": root, "directory": directory,
            "exported": exported, "env": env}


def _run(argv, env):
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=False,
                          env=dict(os.environ, **env), timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def private_data_dir(job, name, playbook, extravars, env=None):
    """A private data directory as AWX writes one for a job."""
    pdd = job["root"] / name
    (pdd / "inventory").mkdir(parents=True)
    (pdd / "project").mkdir()
    (pdd / "env").mkdir()
    data = pdd / "inventory.json"
    data.write_text(job["exported"])
    script = pdd / "inventory" / "hosts"
    script.write_text("#!/bin/sh\nexec cat %s\n" % data)
    script.chmod(0o755)
    (pdd / "project" / "job.yml").write_text(
        "---\n- name: The collection's playbook, by its FQCN\n  ansible.builtin.import_playbook: %s\n" % playbook)
    (pdd / "env" / "envvars").write_text(json.dumps(env if env is not None else job["env"]))
    (pdd / "env" / "extravars").write_text(json.dumps(extravars))
    return pdd


def run_job(pdd):
    runner = ansible_runner.run(private_data_dir=str(pdd), playbook="job.yml", quiet=True, ident="job")
    events = list(runner.events)
    stats = [e for e in events if e.get("event") == "playbook_on_stats"]
    return runner, events, (stats[-1]["event_data"].get("artifact_data") if stats else None)


def plan_rows(path):
    report = json.loads(path.read_text())
    return {row["host"]: (row["source"], row["name"], row["digest"], row["action"]) for row in report["hosts"]}


def test_plan_through_ansible_runner_is_the_plan_of_the_cli(lab, job, tmp_path):
    cli = tmp_path / "cli"

    class _Inventory:
        inventory = job["directory"] / "hosts.yml"

    run_playbook(_Inventory(), REPO / "playbooks" / "plan.yml", "-e", "fleetos_plan_output_dir=%s" % cli)
    pdd = private_data_dir(job, "plan", "fleetos.layering.plan", {})
    runner, events, stats = run_job(pdd)
    assert runner.rc == 0, runner.stdout.read()[-4000:]
    artifacts = pdd / "artifacts" / "job"
    # The plan went where the runner keeps it, and it is the CLI's plan: the MachineImage
    # decides the second node, the pool default the first.
    assert plan_rows(artifacts / "plan.json") == plan_rows(cli / "plan.json")
    rows = plan_rows(artifacts / "plan.json")
    assert rows[job["nodes"][1]][:3] == ("nodeName", "runner-pinned", job["digest"])
    assert rows[job["nodes"][0]][0] == "pool"
    assert (artifacts / "job_events").is_dir() and any(e.get("event") == "runner_on_ok" for e in events)
    assert stats["fleetos_last_plan"]["counts"], stats


def test_rollout_through_ansible_runner_reports_in_the_stats_event(lab, job):
    pdd = private_data_dir(job, "rollout", "fleetos.layering.rollout", {})
    runner, events, stats = run_job(pdd)
    assert runner.rc == 0, runner.stdout.read()[-4000:]
    result = stats["fleetos_last_rollout"]
    assert result["result"] == "success"
    hosts = result["hosts"]
    assert hosts[job["nodes"][1]]["booted_digest"] == job["digest"]
    assert hosts[job["nodes"][0]]["status"] == "unchanged"
    report = pdd / "artifacts" / "job" / "rollout-report"
    assert json.loads((report / "rollout-report.json").read_text())["result"] == "success"
    assert result["report_dir"] == str(report)
    status = lab.rpm_ostree_status(job["nodes"][1])
    assert next(d for d in status["deployments"] if d.get("booted"))["container-image-reference-digest"] \
        == job["digest"]


def test_a_job_without_the_collection_fails(lab, job, tmp_path):
    empty = tmp_path / "collections"
    empty.mkdir()
    pdd = private_data_dir(job, "missing", "fleetos.layering.plan", {},
                           env=dict(job["env"], ANSIBLE_COLLECTIONS_PATH=str(empty)))
    runner, _events, _stats = run_job(pdd)
    assert runner.rc != 0
    assert runner.status == "failed"


def test_two_slices_of_one_rollout_share_the_pools_budget_through_fleetlock(lab, job):
    """AWX job slicing: two jobs at once, each with half of the pool's hosts and the pool's whole
    budget in its inventory; FleetLock (group = pool, slots = budget) keeps the pool within it."""
    nodes = lab.own_nodes("test_runner_sliced", 4)
    budget = 2
    known, allvars = read_hosts(lab.inventory)
    url = allvars["fleetos_lab_fleetlock_url"]
    lab.fleetlab("fleetlock", "reset")
    lab.fleetlab("fleetlock", "slots", budget, "--group", "sliced")
    runners = []
    start = len(lab.journal())
    for index, piece in enumerate((nodes[:2], nodes[2:])):
        inventory = {"_meta": {"hostvars": {name: dict(allvars, ansible_host=known[name]["ansible_host"],
                                                       fleetos_pool="sliced", fleetos_pool_max_unavailable=budget)
                                            for name in piece}},
                     "all": {"children": ["sliced"]}, "sliced": {"hosts": piece}}
        pdd = private_data_dir(dict(job, exported=json.dumps(inventory)), "slice%d" % index, "fleetos.layering.rollout",
                               {"fleetos_rollout_image": job["image"], "fleetos_fleetlock_url": url,
                                "os_activate_fleetlock_retry_delay": 1})
        runners.append(ansible_runner.run_async(private_data_dir=str(pdd), playbook="job.yml", quiet=True,
                                                ident="job"))
    for thread, _runner in runners:
        thread.join(timeout=900)
    events = lab.journal()[start:]
    for _thread, runner in runners:
        assert runner.rc == 0, runner.stdout.read()[-4000:]
    # Every node was activated, and at no instant were more of the pool's hosts down than its budget
    # (reboot to boot, from the journal) or holding a FleetLock slot.
    assert sorted(e["node"] for e in events if e["event"] == "reboot" and e.get("node") in nodes) == sorted(nodes)
    assert 1 <= max_down(events, nodes) <= budget
    locks = [e for e in events if e["event"] == "fleetlock_lock" and e.get("group") == "sliced"]
    assert len(locks) >= len(nodes) and max(len(e["holders"]) for e in locks) <= budget
    lab.fleetlab("fleetlock", "reset")
