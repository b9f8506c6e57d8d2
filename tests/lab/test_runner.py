"""The playbooks as an AWX / Automation Controller job runs them: through ansible-runner.

A private data directory as AWX lays it out for a job: `inventory/hosts`, an inventory script
that prints the inventory AWX imported (the inventory directory of docs/awx.md, hosts and the
MachineImage plugin's configuration, synced as one source the way an AWX inventory update runs
`ansible-inventory`: flattened, no manifests next to it), `env/` with the collections path, the
extra variables and what a credential injects, and `project/` with a playbook of the user's
project that imports the collection's playbook by its FQCN. No terminal. Beside the jobs:
ansible-navigator, as a user runs it outside an execution environment.

The nodes are this module's own (`fleetlab claim`); the image is new on every run.
"""

import collections
import json
import os
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest
import yaml
from jinja2.sandbox import ImmutableSandboxedEnvironment

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


# What AWX sets for an inventory update (awx/main/constants.py, STANDARD_INVENTORY_UPDATE_ENV).
AWX_INVENTORY_UPDATE_ENV = {"ANSIBLE_INVENTORY_UNPARSED_FAILED": "True", "ANSIBLE_INVENTORY_EXPORT": "True",
                            "ANSIBLE_VERBOSE_TO_STDERR": "True"}


def sync_inventory_source(source, env):
    """An AWX inventory update of ``source`` alone: ``ansible-inventory -i SOURCE --list`` through ansible-runner,
    with AWX's environment; -> (rc, stdout, stderr)."""
    out, err, rc = ansible_runner.run_command(
        executable_cmd=str(VENV_BIN / "ansible-inventory"), cmdline_args=["-i", str(source), "--list"],
        envvars=dict(env, **AWX_INVENTORY_UPDATE_ENV), runner_mode="subprocess", quiet=True)
    return rc, out, err


@pytest.fixture(scope="module")
def job(lab, tmp_path_factory):
    """The nodes, a MachineImage for one of them, and both inventories: the project's inventory directory as
    docs/awx.md lays it out, and what AWX imports of it (one inventory source, synced through ansible-runner)."""
    nodes = lab.own_nodes("test_runner", 2)
    tag = uuid.uuid4().hex[:8]
    digest = lab.build_image("fleetos/runner:%s" % tag, "--from", "fleetos/lab-os:1.0", "--version", "runner-%s" % tag)
    image = "%s/fleetos/runner@%s" % (lab.registry, digest)
    root = tmp_path_factory.mktemp("runner")
    # docs/awx.md: inventories/prod/ holds the hosts and the plugin's configuration, the manifests are
    # beside it. The lab's hosts, a pool default for both nodes, and a MachineImage that binds the second
    # node to the new image.
    directory = root / "inventories" / "prod"
    directory.mkdir(parents=True)
    (root / "inventories" / "machine_images").mkdir()
    known, allvars = read_hosts(lab.inventory)
    (directory / "hosts.yml").write_text(yaml.safe_dump({"all": {"vars": allvars, "children": {"runner": {
        "vars": {"fleetos_pool": "runner", "fleetos_pool_image": allvars["fleetos_lab_base_image"],
                 "fleetos_pool_max_unavailable": 2},
        "hosts": {name: {"ansible_host": known[name]["ansible_host"]} for name in nodes}}}}}))
    (root / "inventories" / "machine_images" / "pinned.yaml").write_text(MANIFEST % (nodes[1], image))
    (directory / "machine_images.yml").write_text("plugin: fleetos.layering.machine_images\n"
                                                  "manifests_dir: ../machine_images\n")
    env = {"ANSIBLE_COLLECTIONS_PATH": str(collections_path()), "ANSIBLE_NOCOLOR": "1",
           "ANSIBLE_DEPRECATION_WARNINGS": "False", "PATH": "%s:%s" % (VENV_BIN, os.environ.get("PATH", ""))}
    rc, exported, err = sync_inventory_source(directory, env)
    assert rc == 0, err
    assert "WARNING" not in err, err  # no manifest read as an inventory file (junk groups metadata, spec)
    return {"nodes": nodes, "image": image, "digest": digest, "root": root, "directory": directory,
            "exported": exported, "env": env}


def summary_lines(summary, stdout):
    """The lines of a playbook's set_stats summary that are not in its output (its "Show the summary" task prints
    them as a list of JSON strings)."""
    return [line for line in summary.splitlines() if json.dumps(line) not in stdout]


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


def run_job(pdd, limit=None):
    """Run the job of ``pdd``; ``limit`` as AWX passes a job template's Limit field (ansible-playbook --limit)."""
    runner = ansible_runner.run(private_data_dir=str(pdd), playbook="job.yml", quiet=True, ident="job", limit=limit)
    events = list(runner.events)
    stats = [e for e in events if e.get("event") == "playbook_on_stats"]
    return runner, events, (stats[-1]["event_data"].get("artifact_data") if stats else None)


def plan_rows(path):
    report = json.loads(path.read_text())
    return {row["host"]: (row["source"], row["name"], row["digest"], row["action"]) for row in report["hosts"]}


def test_a_machine_image_source_synced_alone_fails_in_one_sentence(lab, job):
    """AWX syncs each inventory source on its own: the plugin's configuration as a source of its own sees no host,
    and the sync fails with the sentence, instead of every host getting its pool default in silence."""
    rc, out, err = sync_inventory_source(job["directory"] / "machine_images.yml", job["env"])
    assert rc != 0 and out.strip() == ""
    # Older cores wrap their warnings at the terminal's width.
    assert ("machine_images.yml: no host of group 'all' is in the inventory when this MachineImage source is read; "
            "it assigns images to the hosts the sources before it define") in " ".join(err.split()), err


def test_plan_through_ansible_runner_is_the_plan_of_the_cli(lab, job, tmp_path):
    cli = tmp_path / "cli"

    class _Inventory:
        inventory = job["directory"]

    run_playbook(_Inventory(), REPO / "playbooks" / "plan.yml", "-e", "fleetos_plan_output_dir=%s" % cli)
    pdd = private_data_dir(job, "plan", "fleetos.layering.plan", {"fleetos_machine_images_required": True})
    runner, events, stats = run_job(pdd)
    stdout = runner.stdout.read()
    assert runner.rc == 0, stdout[-4000:]
    # The summary is in the job's output and in its set_stats, the same text.
    summary = stats["fleetos_last_plan"]["summary"]
    assert len(summary.splitlines()) >= 3 and summary_lines(summary, stdout) == [], (summary, stdout[-4000:])
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
    stdout = runner.stdout.read()
    assert runner.rc == 0, stdout[-4000:]
    result = stats["fleetos_last_rollout"]
    assert result["result"] == "success"
    assert "success" in result["summary"] and summary_lines(result["summary"], stdout) == [], stdout[-4000:]
    hosts = result["hosts"]
    assert hosts[job["nodes"][1]]["booted_digest"] == job["digest"]
    assert hosts[job["nodes"][0]]["status"] == "unchanged"
    report = pdd / "artifacts" / "job" / "rollout-report"
    assert json.loads((report / "rollout-report.json").read_text())["result"] == "success"
    assert result["report_dir"] == str(report)
    status = lab.rpm_ostree_status(job["nodes"][1])
    assert next(d for d in status["deployments"] if d.get("booted"))["container-image-reference-digest"] \
        == job["digest"]


def test_the_canary_workflow_hands_the_verified_digest_to_the_rest_of_the_fleet(lab, job):
    """An AWX workflow: the canary job of a tag stops after its verified canary; the tag then moves; the
    rest-of-fleet job, given the canary job's set_stats artifact as AWX hands it on, rolls out the canary's digest.
    Both jobs run with AWX's Limit (the pool's group), which leaves localhost out: the canary gate and set_stats
    run all the same. Both nodes are rolled back after (rollback.yml), to the state the other tests of this module
    expect."""
    name = "fleetos/runner:canary-%s" % job["digest"][7:15]
    verified = lab.build_image(name, "--from", "fleetos/lab-os:1.0", "--size-mb", "1", "--version", "canary-1")
    tag = "%s/%s" % (lab.registry, name)
    # Both nodes in one pool without an image of its own (no MachineImage either): the run's image, a tag, is theirs.
    known, allvars = read_hosts(lab.inventory)
    nodes = job["nodes"]
    inventory = {"_meta": {"hostvars": {node: dict(allvars, ansible_host=known[node]["ansible_host"],
                                                   fleetos_pool="canary", fleetos_pool_max_unavailable=2)
                                        for node in nodes}},
                 "all": {"children": ["canary"]}, "canary": {"hosts": nodes}}
    job = dict(job, exported=json.dumps(inventory))
    extra = {"fleetos_rollout_image": tag, "fleetos_rollout_canary": 1}
    runner, _events, stats = run_job(private_data_dir(job, "canary", "fleetos.layering.rollout",
                                                      dict(extra, fleetos_rollout_stop_after_canary=True)), limit="canary")
    assert runner.rc == 0, runner.stdout.read()[-4000:]
    handed_on = stats["fleetos_last_rollout"]
    assert (handed_on["result"], handed_on["images"]) == ("canary_verified", {tag: verified}), handed_on
    moved = lab.build_image(name, "--from", "fleetos/lab-os:1.0", "--size-mb", "1", "--version", "canary-2")
    assert moved != verified
    try:
        runner, _events, stats = run_job(private_data_dir(job, "rest", "fleetos.layering.rollout",
                                                          dict(extra, fleetos_last_rollout=handed_on)), limit="canary")
        assert runner.rc == 0, runner.stdout.read()[-4000:]
        hosts = stats["fleetos_last_rollout"]["hosts"]
        assert sorted(row["status"] for row in hosts.values()) == ["activated", "unchanged"], hosts
        assert {row["target_digest"] for row in hosts.values()} == {verified}, hosts
        for node in nodes:
            status = lab.rpm_ostree_status(node)
            assert next(d for d in status["deployments"] if d.get("booted"))["container-image-reference-digest"] \
                == verified, node
    finally:
        runner, _events, _stats = run_job(private_data_dir(job, "back", "fleetos.layering.rollback",
                                                           {"fleetos_rollback_from": verified}))
        assert runner.rc == 0, runner.stdout.read()[-4000:]


def test_ansible_navigator_prints_the_plan_summary(lab, job, tmp_path):
    """`ansible-navigator run ... --ee false -m stdout` from the checkout, as a user runs a playbook with it outside
    an execution environment: the plan's summary is in its output, and its playbook artifact and log go under
    .build/navigator (the checkout's ansible-navigator.yml), not beside the playbook or into the working directory."""
    navigator = VENV_BIN / "ansible-navigator"
    if not navigator.exists():
        pytest.skip("ansible-navigator is installed by `make venv`")

    def strays():
        return set(REPO.glob("playbooks/*-artifact-*.json")) | set(REPO.glob("ansible-navigator.log"))

    def kept():
        return set((REPO / ".build" / "navigator").glob("plan-artifact-*.json"))

    strays_before, kept_before = strays(), kept()
    proc = subprocess.run([str(navigator), "run", str(REPO / "playbooks" / "plan.yml"), "-i", str(job["directory"]),
                           "--ee", "false", "-m", "stdout",
                           "-e", "fleetos_machine_images_required=true", "-e", "fleetos_report_dir=%s" % tmp_path],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False, timeout=600,
                          cwd=str(REPO), env=dict(os.environ, **job["env"]))
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert strays() == strays_before
    assert len(kept() - kept_before) == 1
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert proc.stdout.count("TASK [Show the summary]") == 1, proc.stdout[-4000:]
    printed = proc.stdout.split("TASK [Show the summary]", 1)[1]
    actions = collections.Counter(row["action"] for row in plan["hosts"])
    assert sum(actions.values()) == 2 and plan["errors"] == 0, plan["hosts"]
    counts = ", ".join("%d %s" % (actions[action], action) for action in sorted(actions))
    for line in ("**fleetos.layering plan: success**", "Hosts: %s" % counts, "Report: %s" % tmp_path):
        assert json.dumps(line) in printed, (line, printed[:2000])


def inject_credential(credential_type, inputs, pdd):
    """What AWX does with a custom credential type for a job (awx/main/models/credential.py,
    CredentialType.inject_credential): each file template rendered with a sandboxed Jinja into a 0600 file under
    the private data directory's env/ (its path as ``tower.filename`` or ``tower.filename.LABEL``), then the env
    and extra_vars templates; -> (env, extra vars)."""
    sandbox = ImmutableSandboxedEnvironment()
    namespace = dict(inputs, tower={"filename": {}})
    for label, template in (credential_type["injectors"].get("file") or {}).items():
        fd, path = tempfile.mkstemp(dir=str(pdd / "env"))
        with os.fdopen(fd, "w") as handle:
            handle.write(sandbox.from_string(template).render(**namespace))
        os.chmod(path, 0o600)
        if "." in label:
            namespace["tower"]["filename"][label.split(".", 1)[1]] = path
        else:
            namespace["tower"]["filename"] = path
    render = {key: {name: sandbox.from_string(template).render(**namespace) for name, template in
                    (credential_type["injectors"].get(key) or {}).items()} for key in ("env", "extra_vars")}
    return render["env"], render["extra_vars"]


def test_the_registry_credential_type_gives_the_controller_its_credentials(lab, job):
    """docs/awx/registry.credential_type.yml injected as AWX injects it: status.yml reads each booted image's
    labels on the controller with the injected auth file; without the credential the registry refuses."""
    credential_type = yaml.safe_load((REPO / "docs" / "awx" / "registry.credential_type.yml").read_text())
    registry_dir = lab.state / "registry"
    secret = (registry_dir / "auth.json").read_text()
    common = {"fleetos_status_ca_cert_dir": str(registry_dir / "certs.d")}
    # The lab inventory gives the controller the registry's auth file: the job's copy does not.
    exported = json.loads(job["exported"])
    for name in ("fleetos_status_auth_file", "fleetos_compose_auth_file"):
        exported["all"]["vars"].pop(name)
    job = dict(job, exported=json.dumps(exported))
    results = {}
    for name, inputs in (("with", {"pull_secret": secret}), ("without", None)):
        pdd = private_data_dir(job, "status-%s" % name, "fleetos.layering.status", {})
        env, extra = inject_credential(credential_type, inputs, pdd) if inputs else ({}, {})
        assert inputs is None or (Path(env["REGISTRY_AUTH_FILE"]).read_text() == secret
                                  and extra["registry_pull_secret"] == secret)
        (pdd / "env" / "envvars").write_text(json.dumps(dict(job["env"], **env)))
        (pdd / "env" / "extravars").write_text(json.dumps(dict(common, fleetos_status_json=str(pdd / "status.json"),
                                                               **extra)))
        runner, _events, _stats = run_job(pdd)
        assert runner.rc == 0, runner.stdout.read()[-4000:]
        results[name] = {row["host"]: row["layers_error"] for row in json.loads((pdd / "status.json").read_text())["hosts"]}
    assert results["with"] == {node: None for node in job["nodes"]}, results
    assert all("unauthorized" in (error or "") for error in results["without"].values()), results


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
