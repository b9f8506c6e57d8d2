"""The lab is the reference for the simulated fleet (bench/simfleet.py) the scale bench runs on: the same small
rollout, on six lab nodes and on six simulated hosts, gives the same report, row by row.

Two pools of three, a budget of one slot each, the health command failing on the second host of the first pool
(node06 on the lab), max_failures high enough that the run goes on: that host is rolled back and every other host
activated. The rows are compared by position (the n-th host of the n-th pool), with host names and digests
taken out of the reasons.
"""

import json
import re
import sys
import time

import yaml

from conftest import REPO, read_hosts
from test_rollout import NODES, ROLLOUT, Fleet, _run, fleet  # noqa: F401 (fleet is the module fixture)

sys.path.insert(0, str(REPO / "bench"))
import simfleet  # noqa: E402  (bench/simfleet.py, by path)

LAB_POOLS = {"blue": ["node05", "node06", "node07"], "green": ["node08", "node09", "node10"]}
FAILING = 1   # the second host of the first pool
COMPARED = ("action", "status", "rolled_back", "verified", "slot_held", "stage_changed")
DIGEST = re.compile(r"sha256:[0-9a-f]{64}|\b[0-9a-f]{12}\b")


def _inventory(path, hosts, allvars, pools, failing):
    children = {}
    for pool, names in pools.items():
        members = {}
        for name in names:
            members[name] = dict(hosts[name], **({"fleetos_rollout_health_command": "false"} if name == failing
                                                 else {}))
        children[pool] = {"vars": {"fleetos_pool": pool, "fleetos_pool_max_unavailable": 1}, "hosts": members}
    path.write_text(yaml.safe_dump({"all": {"vars": dict(allvars, fleetos_rollout_max_failures=6),
                                            "children": {"compared": {"children": children}}}}, sort_keys=False))
    return path


def _rows(report, pools):
    """The report's rows as (pool position, host position) -> the compared fields and the reason, names and
    digests taken out."""
    by_host = {r["host"]: r for r in report["hosts"]}
    assert sorted(by_host) == sorted(h for names in pools.values() for h in names), sorted(by_host)
    rows = {}
    for p, (_pool, names) in enumerate(sorted(pools.items())):
        for h, name in enumerate(names):
            row = by_host[name]
            reason = DIGEST.sub("DIGEST", row.get("reason") or "")
            for other in (n for names in pools.values() for n in names):
                reason = reason.replace(other, "HOST")
            rows[(p, h)] = dict({key: row.get(key) for key in COMPARED}, reason=reason,
                                rebooted=row.get("reboot_start") is not None)
    return rows


def test_the_same_rollout_on_lab_nodes_and_simulated_hosts_reports_the_same_rows(lab, fleet, tmp_path):  # noqa: F811
    began = time.time()
    # The lab: node05-node10.
    f = Fleet(lab, tmp_path)
    hosts, allvars = read_hosts(lab.inventory)
    failing = LAB_POOLS["blue"][FAILING]
    f.inventory = _inventory(tmp_path / "lab-hosts.yml", hosts, allvars, LAB_POOLS, failing)
    try:
        pinned = "%s@%s" % (fleet["tag_image"].rsplit(":", 1)[0], fleet["digest"])
        proc = f.play(ROLLOUT, "-e", "fleetos_rollout_image=%s" % pinned, check=False)
        (tmp_path / "lab-rollout.log").write_text(proc.stdout)
        assert proc.returncode != 0 and proc.report, proc.stdout[-4000:]
        lab_report = proc.report
    finally:
        f.restore(fleet["digest"])
    lab_s = time.time() - began

    # The simulated fleet: six hosts on loopback, dealt in turn to two pools, quick boots.
    sim = simfleet.Fleet(tmp_path / "simfleet")
    began = time.time()
    try:
        # Addresses of its own (127.78.0.x): a bench's fleet may be up at the same time on 127.77.
        info = simfleet.up(sim, 6, pools=2, rate="800mbit", boot_spread=(2.0, 4.0), seed=15,
                           base_image=lambda registry: simfleet.base_image(registry, 10), timeout=120,
                           subnet="127.78")
        base = simfleet._simregistry.lookup("%s@%s" % (simfleet.IMAGE_NAME, info["base"]), str(sim.registry))
        target = simfleet.image(sim.registry, "2.0", [(layer["digest"], layer["size"]) for layer in base["layers"]]
                                + [simfleet.layer("compare", 5)])
        written = tmp_path / "sim-written.yml"
        sim_pools = simfleet.write_inventory(sim, written)
        data = yaml.safe_load(written.read_text())
        sim_hosts = {name: values for pool in data["all"]["children"]["fleet"]["children"].values()
                     for name, values in pool["hosts"].items()}
        sim_failing = sim_pools[sorted(sim_pools)[0]][FAILING]
        inventory = _inventory(tmp_path / "sim-hosts.yml", sim_hosts, data["all"]["vars"], sim_pools, sim_failing)
        run = _run(lab, inventory, ROLLOUT, "--forks", "20", "-e", "fleetos_report_dir=%s" % (tmp_path / "sim"),
                   "-e", "fleetos_rollout_image=%s@%s" % (simfleet.IMAGE_NAME, target["digest"]), check=False)
        (tmp_path / "sim-rollout.log").write_text(run.stdout)
        assert run.returncode != 0, run.stdout[-4000:]
        sim_report = json.loads((tmp_path / "sim" / "rollout-report.json").read_text())
        # The simulated hosts are where the report says: the failing host back on the base, the others on the target.
        for pool, names in sim_pools.items():
            for name in names:
                expected = info["base"] if name == sim_failing else target["digest"]
                assert simfleet.booted_digest(sim, name) == expected, name
    finally:
        simfleet.down(sim)
    sim_s = time.time() - began

    lab_rows, sim_rows = _rows(lab_report, LAB_POOLS), _rows(sim_report, sim_pools)
    assert lab_rows[(0, FAILING)]["status"] == "failed" and lab_rows[(0, FAILING)]["rolled_back"], lab_rows
    assert sum(1 for row in lab_rows.values() if row["status"] == "activated") == 5, lab_rows
    differ = {key: (lab_rows[key], sim_rows[key]) for key in lab_rows if lab_rows[key] != sim_rows[key]}
    assert differ == {}, differ
    assert (lab_report["result"], lab_report["counts"]) == (sim_report["result"], sim_report["counts"])
    print("the same rollout: lab %.0f s (with the restore), simulated %.0f s; %d rows alike"
          % (lab_s, sim_s, len(lab_rows)))
