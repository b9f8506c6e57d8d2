"""Update agents beside the rollout: the lab's Zincati stand-in on two rpm-ostree nodes, bootc's fetch-and-apply
timer on a bootc node (`fleetlab agent`), all three this module's own.

The image rolled out is built FROM the lab's base with the label `com.coreos.stream=testing`, as a custom image
built FROM Fedora CoreOS inherits it; the stream's "official" image is fleetos/lab-official:testing. One rollout
without fleetos_update_agents is refused at plan time with one sentence per host naming the agent and the variable,
and stages nothing; the same rollout with fleetos_update_agents=disable completes, and the nodes are still on the
rolled-out image after longer than the Zincati stand-in's delay. Then Zincati is re-enabled on one node with the
documented command, and the stand-in replaces the rolled-out image with the official one, as the real agent would:
what the plan refused to leave on.
"""

import json
import time
import uuid

import pytest
import yaml

from conftest import REPO, read_hosts
from test_bootc_rollout import booted_digest, play

ROLLOUT = REPO / "playbooks" / "rollout.yml"
STATUS = REPO / "playbooks" / "status.yml"
DELAY = 6
DROP_IN = "/etc/zincati/config.d/90-fleetos-updates-disabled.toml"
OFFICIAL = "fleetos/lab-official:testing"


def _reset(lab, nodes, bootc):
    """Agents off and their settings undone, every node on the base image: how a run finds them."""
    base = "%s@%s" % (lab.base_record["reference"], lab.base_digest)
    for node in nodes:
        lab.exec(node, "rm -f %s; systemctl unmask bootc-fetch-apply-updates.timer; "
                       "systemctl try-restart zincati.service" % DROP_IN)
        if booted_digest(lab, {"bootc": bootc}, node) == lab.base_digest:
            continue
        before = lab.boot_id(node)
        tool = ("bootc switch %s" % base if node in bootc
                else "rpm-ostree rebase ostree-unverified-registry:%s >/dev/null" % base)
        lab.exec(node, "%s && systemctl reboot" % tool)
        lab.wait_up(node, not_boot_id=before)


@pytest.fixture(scope="module")
def agents(lab, tmp_path_factory):
    zincati = json.loads(lab.fleetlab("claim", "test_update_agents", "--count", "2", "--json").stdout)
    bootc = json.loads(lab.fleetlab("claim", "test_update_agents_bootc", "--count", "1", "--backend", "bootc",
                                    "--json").stdout)
    nodes = zincati + bootc
    _reset(lab, nodes, bootc)
    hosts, allvars = read_hosts(lab.inventory)
    inventory = tmp_path_factory.mktemp("agents") / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"vars": allvars, "children": {"agents": {
        "vars": {"fleetos_pool": "agents", "fleetos_pool_max_unavailable": len(nodes)},
        "hosts": {name: hosts[name] for name in nodes}}}}}, sort_keys=False))
    tag = uuid.uuid4().hex[:8]
    digest = lab.build_image("fleetos/fcos-custom:%s" % tag, "--from", "fleetos/lab-os:1.0", "--size-mb", "1",
                             "--label", "com.coreos.stream=testing", "--version", "custom-%s" % tag)
    if OFFICIAL not in lab.images:
        lab.build_image(OFFICIAL, "--from", "fleetos/lab-os:1.0", "--label", "com.coreos.stream=testing",
                        "--version", "official-testing")
    lab.fleetlab("agent", *zincati, "zincati", "on", "--delay", DELAY)
    lab.fleetlab("agent", *bootc, "bootc", "on", "--interval", 3)
    yield {"zincati": zincati, "bootc": bootc, "nodes": nodes, "inventory": inventory, "digest": digest,
           "image": "%s/fleetos/fcos-custom:%s" % (lab.registry, tag)}
    # Agents off, every node back on the base image, for a later run on the same lab.
    lab.fleetlab("agent", *zincati, "zincati", "off")
    lab.fleetlab("agent", *bootc, "bootc", "off")
    _reset(lab, nodes, bootc)


def test_agents_that_would_undo_the_rollout_are_refused_then_disabled(lab, agents, tmp_path):
    nodes, image = agents["nodes"], agents["image"]
    status = play(lab, agents, tmp_path, STATUS, report="status")
    shown = {line.split(": ", 1)[0].split()[-1]: line.split(": ", 1)[1]
             for line in status.stdout.splitlines() if line.strip().strip('",').startswith("UPDATE AGENTS on ")}
    assert sorted(shown) == sorted(nodes), status.stdout[-3000:]
    for node in agents["zincati"]:
        assert shown[node].startswith("zincati: on, updates enabled: updates and reboots the host on its own (strategy "
                                      "immediate)"), shown[node]
    assert "bootc: on: bootc upgrade --apply updates and reboots the host on its own" in shown[agents["bootc"][0]]
    refused = play(lab, agents, tmp_path, ROLLOUT, "-e", "fleetos_rollout_image=%s" % image, report="refused",
                   check=False)
    assert refused.returncode != 0
    for node in agents["zincati"]:
        assert ("the update agent zincati (on, updates enabled: updates and reboots the host on its own (strategy "
                "immediate)) of %s would replace the rolled-out image on its own: set fleetos_update_agents: disable "
                "to turn it off (or keep to leave it on purpose)" % node) in refused.stdout, refused.stdout[-4000:]
    assert ("the update agent bootc (on: bootc upgrade --apply updates and reboots the host on its own) of %s"
            % agents["bootc"][0]) in refused.stdout
    # Refused at plan time: nothing staged, nobody rebooted.
    assert [e for e in refused.events if e["event"] == "reboot"] == []
    for node in agents["zincati"]:
        assert not [d for d in lab.rpm_ostree_status(node)["deployments"] if d.get("staged")], node

    start = len(lab.journal())
    done = play(lab, agents, tmp_path, ROLLOUT, "-e", "fleetos_rollout_image=%s" % image,
                "-e", "fleetos_update_agents=disable", report="disabled")
    assert done.report["result"] == "success", done.stdout[-4000:]
    ended = time.time()
    for node in nodes:
        assert booted_digest(lab, agents, node) == agents["digest"], node
    for node in agents["zincati"]:
        assert lab.exec(node, ["cat", DROP_IN]).stdout.endswith("[updates]\nenabled = false\n")
    assert lab.exec(agents["bootc"][0], "systemctl is-enabled bootc-fetch-apply-updates.timer",
                    check=False).stdout.strip() == "masked"
    # Longer than the Zincati stand-in's delay after its last start (the rollout's reboot): still on the image.
    time.sleep(max(0.0, DELAY + 4 - (time.time() - ended)))
    for node in nodes:
        assert booted_digest(lab, agents, node) == agents["digest"], node
    assert [e for e in lab.journal()[start:] if e["event"] == "zincati_update"] == []

    # The documented re-enable command: the stand-in follows the image's stream to the official image.
    node = agents["zincati"][0]
    before = lab.boot_id(node)
    lab.exec(node, "rm %s && systemctl restart zincati.service" % DROP_IN)
    lab.wait_up(node, timeout=DELAY + 60, not_boot_id=before)
    official = lab.image_record(OFFICIAL)["digest"]
    assert booted_digest(lab, agents, node) == official
