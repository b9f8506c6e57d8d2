"""Soft reboots (fleetos_rollout_soft_reboot: auto) on bootc lab nodes, and an rpm-ostree node in the same pool.

A soft reboot restarts userspace into the staged deployment on the running kernel: the boot id stays,
systemd's SoftRebootsCount moves. The bootc stand-in says a staged deployment is soft-reboot capable as
bootc does (the same boot checksum, kernel and initramfs, and kernel arguments as the booted one), and
`bootc upgrade --from-downloaded --apply --soft-reboot auto` prepares /run/nextroot, after which the lab's
reboot is a soft one (`fleetlab image build --kernel` makes an image that is not capable). rpm-ostree has no
soft reboot: its node reboots fully, and the report says why.

The nodes are this module's own (`fleetlab claim`); the images are new on every run.
"""

import json
import os
import subprocess
import uuid

import pytest

from conftest import REPO, VENV_BIN, collections_path, pool_inventory
from test_bootc_rollout import max_down
from test_integration_targets import run_playbook

ROLLOUT = REPO / "playbooks" / "rollout.yml"
PLAN = REPO / "playbooks" / "plan.yml"
BUDGET = 2


@pytest.fixture(scope="module")
def soft(lab, tmp_path_factory):
    bootc = lab.own_nodes("test_soft_reboot", 3, backend="bootc")
    rpm_ostree = lab.own_nodes("test_soft_reboot_rpm", 1)
    for node in bootc + rpm_ostree:
        lab.fleetlab("fault", node, "clear")
    # The choice is the pool's, a group variable, as the maintenance windows are.
    inventory = pool_inventory(lab, tmp_path_factory.mktemp("soft") / "hosts.yml", "soft", bootc + rpm_ostree, {
        "fleetos_pool": "soft", "fleetos_pool_max_unavailable": BUDGET, "fleetos_rollout_soft_reboot": "auto"})
    return {"bootc": bootc, "rpm_ostree": rpm_ostree, "nodes": bootc + rpm_ostree, "inventory": inventory}


def image(lab, *args):
    """A new image from the base (the same kernel unless ``args`` say --kernel): -> (reference, digest)."""
    tag = uuid.uuid4().hex[:8]
    digest = lab.build_image("fleetos/soft:%s" % tag, "--from", "fleetos/lab-os:1.0", "--version", "soft-%s" % tag,
                             *args)
    return "%s/fleetos/soft:%s" % (lab.registry, tag), digest


def running_kernel(lab, nodes):
    """The kernel version the ``nodes`` boot (the same on each: an earlier run of this module may have changed it)."""
    kernels = set(lab.exec(node, "ls /usr/lib/modules").stdout.strip() for node in nodes)
    assert len(kernels) == 1, kernels
    return kernels.pop()


def node_state(lab, soft, node):
    """(boot id, SoftRebootsCount, booted digest) as the node says, the digest by its own tool."""
    boot_id = lab.boot_id(node)
    count = int(lab.exec(node, ["systemctl", "show", "-P", "SoftRebootsCount"]).stdout.strip())
    if node in soft["bootc"]:
        status = json.loads(lab.exec(node, ["bootc", "status", "--format=json"]).stdout)["status"]
        digest = status["booted"]["image"]["imageDigest"] if status["booted"]["image"] else None
    else:
        status = lab.rpm_ostree_status(node)
        digest = next(d for d in status["deployments"] if d.get("booted")).get("container-image-reference-digest")
    return boot_id, count, digest


def rollout(lab, soft, tmp_path, ref, *extra, check=True):
    class _Inventory:
        inventory = soft["inventory"]

    start = len(lab.journal())
    proc = run_playbook(_Inventory(), ROLLOUT, "--forks", "10", "-e", "fleetos_report_dir=%s" % tmp_path,
                        "-e", "fleetos_rollout_image=%s" % ref, *extra, check=check)
    proc.events = lab.journal()[start:]
    proc.report = json.loads((tmp_path / "rollout-report.json").read_text())
    proc.rows = {row["host"]: row for row in proc.report["hosts"]}
    return proc


def test_a_layer_only_change_soft_reboots_bootc_hosts_and_fully_reboots_rpm_ostree(lab, soft, tmp_path):
    # A layer more, on the kernel the nodes run.
    ref, digest = image(lab, "--size-mb", "1", "--kernel", running_kernel(lab, soft["bootc"]))
    before = {node: node_state(lab, soft, node) for node in soft["nodes"]}
    proc = rollout(lab, soft, tmp_path, ref)
    assert proc.report["result"] == "success", proc.stdout[-4000:]
    for node in soft["bootc"]:
        boot_id, count, booted = node_state(lab, soft, node)
        row = proc.rows[node]
        assert (row["status"], row["activation"], row["activation_reason"]) == ("activated", "soft", None), row
        # The kernel kept running: the same boot id, one soft reboot more, and booted on the target.
        assert (boot_id, count, booted) == (before[node][0], before[node][1] + 1, digest), node
        assert row["disruption_s"] is not None and row["disruption_s"] >= 0
    [rpm] = soft["rpm_ostree"]
    boot_id, count, booted = node_state(lab, soft, rpm)
    assert (proc.rows[rpm]["status"], proc.rows[rpm]["activation"]) == ("activated", "full")
    assert "rpm-ostree has no soft reboot" in proc.rows[rpm]["activation_reason"]
    assert boot_id != before[rpm][0] and count == 0 and booted == digest
    kinds = dict((e["node"], e.get("kind")) for e in proc.events if e["event"] == "reboot")
    assert kinds == dict([(n, "soft") for n in soft["bootc"]] + [(rpm, "full")])
    assert proc.report["activations"] == {"full": 1, "soft": 3}
    assert max_down(proc.events, soft["nodes"]) <= BUDGET
    markdown = (tmp_path / "rollout-report.md").read_text()
    assert "| soft |" in markdown and "full reboot: rpm-ostree has no soft reboot" in markdown


def test_required_with_a_kernel_change_activates_no_host_and_says_why(lab, soft, tmp_path):
    ref, digest = image(lab, "--kernel", "6.2.%s-fleetlab" % uuid.uuid4().hex[:4])
    before = {node: node_state(lab, soft, node) for node in soft["bootc"]}
    proc = rollout(lab, soft, tmp_path, ref, "--limit", ",".join(soft["bootc"] + ["localhost"]),
                   "-e", "fleetos_rollout_soft_reboot=required")
    # Left staged on purpose: not a failure (rc 0), the result staged.
    assert proc.report["result"] == "staged", proc.stdout[-4000:]
    for node in soft["bootc"]:
        row = proc.rows[node]
        assert row["status"] == "not_activated" and row["activation"] is None, row
        assert row["reason"].startswith("staged, not activated: soft reboot required, and bootc says the staged "
                                        "deployment is not soft-reboot capable"), row
        # Nothing rebooted; the target waits staged, download-only, for a rerun with another choice.
        assert node_state(lab, soft, node) == before[node]
        status = json.loads(lab.exec(node, ["bootc", "status", "--format=json"]).stdout)["status"]
        assert status["staged"]["image"]["imageDigest"] == digest and status["staged"]["downloadOnly"], status
    assert [e for e in proc.events if e["event"] == "reboot"] == []
    assert proc.report["declined"] == dict((node, proc.rows[node]["reason"][len("staged, not activated: "):])
                                           for node in soft["bootc"])
    soft["staged"] = ref


def plan(lab, soft, tmp_path, *extra):
    """plan.yml on the module's inventory: -> its plan.json rows by host."""
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(collections_path()), ANSIBLE_NOCOLOR="1",
               ANSIBLE_FORCE_COLOR="0", ANSIBLE_DEPRECATION_WARNINGS="False", ANSIBLE_STDOUT_CALLBACK="default")
    proc = subprocess.run([str(VENV_BIN / "ansible-playbook"), "-i", str(soft["inventory"]), str(PLAN),
                           "-e", "fleetos_plan_output_dir=%s" % tmp_path] + list(extra),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600, env=env,
                          cwd=str(REPO), check=False)
    assert proc.returncode == 0, proc.stdout[-3000:]
    return dict((row["host"], row) for row in json.loads((tmp_path / "plan.json").read_text())["hosts"])


def test_the_plan_says_how_each_host_would_reboot(lab, soft, tmp_path):
    if "staged" not in soft:
        pytest.skip("needs the staged image of test_required_with_a_kernel_change_activates_no_host_and_says_why")
    # The bootc hosts have the other kernel's image staged (download-only): the plan reads bootc's answer.
    required = plan(lab, soft, tmp_path / "required", "-e", "fleetos_rollout_image=%s" % soft["staged"],
                    "-e", "fleetos_rollout_soft_reboot=required")
    auto = plan(lab, soft, tmp_path / "auto", "-e", "fleetos_rollout_image=%s" % soft["staged"])
    for node in soft["bootc"]:
        assert (required[node]["action"], required[node]["reboot"]) == ("activate", "none"), required[node]
        assert required[node]["reboot_reason"].startswith("soft reboot required, and bootc says the staged deployment")
        assert (auto[node]["action"], auto[node]["reboot"]) == ("activate", "full"), auto[node]
    [rpm] = soft["rpm_ostree"]
    assert (auto[rpm]["reboot"], auto[rpm]["reboot_reason"]) == (
        "full", "rpm-ostree has no soft reboot (coreos/rpm-ostree#4525)")
    # A new image: the deployment its stage makes decides.
    ref, _digest = image(lab, "--kernel", running_kernel(lab, soft["bootc"]))
    fresh = plan(lab, soft, tmp_path / "fresh", "-e", "fleetos_rollout_image=%s" % ref)
    assert set(fresh[node]["reboot"] for node in soft["bootc"]) == {"after the stage"}
    assert "| after the stage (decided from the staged deployment (bootc's softRebootCapable)) |" in (
        tmp_path / "fresh" / "plan.md").read_text()


def test_a_kernel_change_reboots_bootc_hosts_fully(lab, soft, tmp_path):
    ref, digest = image(lab, "--kernel", "6.1.%s-fleetlab" % uuid.uuid4().hex[:4])
    before = {node: node_state(lab, soft, node) for node in soft["bootc"]}
    proc = rollout(lab, soft, tmp_path, ref, "--limit", ",".join(soft["bootc"] + ["localhost"]))
    assert proc.report["result"] == "success", proc.stdout[-4000:]
    for node in soft["bootc"]:
        boot_id, count, booted = node_state(lab, soft, node)
        row = proc.rows[node]
        assert (row["status"], row["activation"]) == ("activated", "full"), row
        assert "not soft-reboot capable" in row["activation_reason"]
        assert boot_id != before[node][0] and count == 0 and booted == digest, node
    assert max_down(proc.events, soft["bootc"]) <= BUDGET


def test_a_health_failure_after_a_soft_reboot_rolls_the_host_back(lab, soft, tmp_path):
    failing = soft["bootc"][0]
    ref, _digest = image(lab, "--kernel", running_kernel(lab, [failing]))
    before = node_state(lab, soft, failing)
    lab.fleetlab("fault", failing, "fail-health")
    try:
        proc = rollout(lab, soft, tmp_path, ref, "--limit", "%s,localhost" % failing,
                       "-e", "fleetos_rollout_health_command=lab-health", "-e", "fleetos_rollout_health_retries=1",
                       check=False)
    finally:
        lab.fleetlab("fault", failing, "clear")
    assert proc.returncode != 0
    row = proc.rows[failing]
    assert (row["status"], row["rolled_back"], row["activation"]) == ("failed", True, "soft"), row
    boot_id, _count, booted = node_state(lab, soft, failing)
    assert booted == before[2]
    reboots = [e.get("kind") for e in proc.events if e["event"] == "reboot" and e["node"] == failing]
    # Into the target softly, back to the previous deployment with a full reboot (it may have another kernel).
    assert reboots == ["soft", "full"] and boot_id != before[0]
