#!/usr/bin/env python3
# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Cloud-image adoption against the naive way, on lab nodes booted from a disk image.

N nodes of the bench's own (``fleetlab claim bench-adopt --disk-image ... --with-python``: the naive
playbook's command and reboot modules need Python on the hosts, adopt.yml does not), booted from
a disk image of fleetos/bench-adopt:1 (the lab base plus a --size-mb layer), so their
booted commit is the image's commit and only their origin is plain:

1. playbooks/adopt.yml: wall time, registry bytes per node, reboots;
2. its no-op rerun;
3. the nodes back to their disk-image origin (and empty layer caches), then the naive
   way, bench/naive-rollout.yml (serial: 3, rpm-ostree rebase + reboot) to the same
   image by digest: wall time, registry bytes per node, reboots;
4. the nodes back to their disk-image origin.

Like a fleet, not like two shared cores (DESIGN.md): every bench node's link is shaped
(--rate) and every boot delayed (--boot-delay); both are undone at the end. Prints the
figures and writes bench/results/adopt-<timestamp>.json; not a pass/fail test.

  .venv/bin/python bench/adopt.py [--count 6] [--size-mb 50] [--rate 80mbit] [--boot-delay 10]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _lab import (  # noqa: E402  (what the lab benches share)
    REPO,
    RESULTS,
    VENV_BIN,
    BenchError,
    Journal,
    blob_bytes,
    collections_path,
    fleetlab,
    log,
    read_hosts,
)
from rollout import reboot_spans  # noqa: E402  (the rollout bench's journal helper)

IMAGE = "fleetos/bench-adopt:1"
ADOPT = REPO / "playbooks" / "adopt.yml"
NAIVE = REPO / "bench" / "naive-rollout.yml"
DISK_ORIGIN = "[origin]\nrefspec=fedora:fedora/x86_64/coreos/stable\n"


def node_exec(node, script):
    return fleetlab("exec", node, "--", "bash", "-c", script)


def reset(nodes, commit):
    """As the disk image left them: plain origin, nothing staged, no backups, no layer cache."""
    for node in nodes:
        node_exec(node, "rpm-ostree cleanup -p >/dev/null; "
                        "for f in /sysroot/ostree/deploy/*/deploy/%s.*.origin; do printf '%%s' '%s' > $f; "
                        "rm -f $f.*.bak; done; rm -rf /sysroot/ostree/container-cache" % (commit, DISK_ORIGIN))


def play(inventory, playbook, *extra):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(collections_path()), ANSIBLE_NOCOLOR="1",
               ANSIBLE_DEPRECATION_WARNINGS="False", ANSIBLE_STDOUT_CALLBACK="default")
    began = time.time()
    proc = subprocess.run([str(VENV_BIN / "ansible-playbook"), "-i", str(inventory), str(playbook)] + list(extra),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=str(REPO),
                          check=False)
    if proc.returncode != 0:
        raise BenchError("%s failed:\n%s" % (playbook.name, proc.stdout[-4000:]))
    return time.time() - began


def measure(nodes, inventory, playbook, *extra):
    journal = Journal()
    wall = play(inventory, playbook, *extra)
    events = journal.events(nodes)
    per_node = blob_bytes(events)
    return {"wall_s": round(wall, 1), "reboots": len(reboot_spans(events)),
            "registry_bytes_per_node": {n: per_node.get(n, 0) for n in nodes},
            "registry_bytes_total": sum(per_node.values())}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=6)
    parser.add_argument("--size-mb", type=int, default=50)
    parser.add_argument("--rate", default="80mbit")
    parser.add_argument("--boot-delay", type=float, default=10)
    args = parser.parse_args()

    fleetlab("up", "--nodes", "10")
    built = json.loads((REPO / ".lab" / "images" / "built.json").read_text())
    if IMAGE not in built:
        log("building %s (+%d MB)" % (IMAGE, args.size_mb))
        fleetlab("image", "build", IMAGE, "--from", "fleetos/lab-os:1.0", "--size-mb", args.size_mb)
        built = json.loads((REPO / ".lab" / "images" / "built.json").read_text())
    record = built[IMAGE]
    # With Python: the naive comparison is hand-written with the command and reboot modules, which need it (as on
    # RHEL image mode); adopt.yml runs no Python module on a host, with it or without (as bench/rollout.py claims).
    nodes = json.loads(fleetlab("claim", "bench-adopt", "--count", args.count, "--disk-image", IMAGE,
                                "--with-python", "--json").stdout)
    registry = json.loads((REPO / ".lab" / "lab.json").read_text())["registry"]
    hosts, allvars = read_hosts(REPO / "inventories" / "lab" / "hosts.yml")
    work = RESULTS / ("adopt-%s" % datetime.datetime.now().strftime("%Y%m%d-%H%M%S"))
    work.mkdir(parents=True, exist_ok=True)
    inventory = work / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {
        "vars": dict(allvars, fleetos_adopt_image="%s/%s" % (registry, IMAGE), fleetos_report_dir=str(work)),
        "hosts": {n: hosts[n] for n in nodes}}}, sort_keys=False))
    settings = {"nodes": nodes, "image": "%s@%s" % (record["reference"], record["digest"]),
                "layer_mb": args.size_mb, "rate": args.rate, "boot_delay_s": args.boot_delay}
    log("bench nodes %s" % ", ".join(nodes))
    reset(nodes, record["commit"])
    fleetlab("shape", args.rate, "--nodes", ",".join(nodes))
    for node in nodes:
        fleetlab("fault", node, "slow-boot", args.boot_delay)
    try:
        forks = str(max(len(nodes), 5))
        log("adopt.yml")
        adopt = measure(nodes, inventory, ADOPT, "--forks", forks)
        log("adopt.yml rerun")
        rerun = measure(nodes, inventory, ADOPT, "--forks", forks)
        reset(nodes, record["commit"])
        log("naive: serial 3, rpm-ostree rebase + reboot")
        naive = measure(nodes, inventory, NAIVE, "--forks", forks,
                        "-e", "bench_naive_ref=ostree-unverified-registry:%s" % settings["image"])
    finally:
        fleetlab("shape", "off", "--nodes", ",".join(nodes))
        for node in nodes:
            fleetlab("fault", node, "clear")
        reset(nodes, record["commit"])
    result = {"settings": settings, "adopt": adopt, "adopt_rerun": rerun, "naive": naive,
              "speedup": round(naive["wall_s"] / adopt["wall_s"], 1) if adopt["wall_s"] else None}
    (work / "adopt.json").write_text(json.dumps(result, indent=2) + "\n")
    print("settings: %d nodes booted from a disk image of %s (+%d MB layer), links %s, boot delay %.0f s"
          % (len(nodes), IMAGE, args.size_mb, args.rate, args.boot_delay))
    for name, figures in (("adopt", adopt), ("adopt rerun", rerun), ("naive", naive)):
        print("%-12s %7.1f s  reboots %2d  registry bytes %d (max per node %d)" % (
            name, figures["wall_s"], figures["reboots"], figures["registry_bytes_total"],
            max(figures["registry_bytes_per_node"].values())))
    print("naive / adopt wall time: %s; results: %s" % (result["speedup"], work / "adopt.json"))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as exc:
        print("bench/adopt.py: %s" % exc, file=sys.stderr)
        sys.exit(1)
