#!/usr/bin/env python3
# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Plan cost: MachineImage resolution for 10,000 hosts x 200 MachineImages.

Runs the collection's own resolver (plugin_utils/images/_machine_image.py, the code behind the
resolve_machine_image filter and the machine_images inventory plugin): compile the
objects once, then resolve every host. Prints wall seconds and microseconds per host;
a figure, not a pass/fail test. --linear also times a scan of every selector per host
(no index), for comparison.

--playbook times what users run instead: playbooks/plan.yml end to end, from the inventory
alone (fleetos_plan_read_status=false, connection local), on a generated inventory of the same
hosts (an inventory script printing JSON, as AWX hands an inventory to a job; 10 pools, each
with its fleetos_pool_image) and the same MachineImages as manifest files next to it. It prints
wall seconds, the seconds per host, the CPU seconds of ansible-playbook and its workers (steadier
than the wall time on a loaded machine) and the hosts the plan reports.

  .venv/bin/python bench/plan_scale.py [--hosts 10000] [--objects 200] [--linear]
  .venv/bin/python bench/plan_scale.py --playbook --hosts 1000 [--forks 20] [--core .build/core/2.16.19]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
RUNTIME = REPO / ".build" / "runtime"
LINK = RUNTIME / "ansible_collections" / "fleetos" / "layering"
if not LINK.is_symlink():
    LINK.parent.mkdir(parents=True, exist_ok=True)
    LINK.symlink_to(REPO)
sys.path.insert(0, str(RUNTIME))

POOLS = 10
ZONES = ["zone-%s" % z for z in "abcde"]
RACKS = 400


def digest(n):
    return "sha256:%064x" % n


def make_hosts(count, rng):
    hosts = []
    for i in range(count):
        labels = {
            "fleetos.io/pool": "pool-%d" % (i % POOLS),
            "topology.kubernetes.io/zone": ZONES[i % len(ZONES)],
            "fleetos.io/rack": "rack-%d" % (i % RACKS),
            "kubernetes.io/hostname": "node%05d" % i,
        }
        if i % 7 == 0:
            labels["node-role.kubernetes.io/worker"] = ""
        if i % 50 == 0:
            labels["accelerator"] = "gpu-%d" % (i % 3)
        hosts.append(("node%05d" % i, labels, "reg.example/os/pool-%d@%s" % (i % POOLS, digest(i % POOLS))))
    rng.shuffle(hosts)
    return hosts


def make_objects(count):
    """Disjoint objects (no conflicts), mixing every selector shape.

    20 % nodeName pins; the rest select one rack each (matchLabels, or In), some
    narrowed by NotIn / Exists / DoesNotExist expressions.
    """
    objects = []
    pins = count // 5
    for i in range(pins):
        objects.append({"apiVersion": "fleetos.io/v1alpha1", "kind": "MachineImage",
                        "metadata": {"name": "pin-%d" % i},
                        "spec": {"image": "reg.example/os/pin@%s" % digest(1000 + i), "nodeName": "node%05d" % (i * 37)}})
    for i in range(count - pins):
        rack = "rack-%d" % i
        shape = i % 4
        if shape == 0:
            selector = {"matchLabels": {"fleetos.io/rack": rack}}
        elif shape == 1:
            selector = {"matchExpressions": [{"key": "fleetos.io/rack", "operator": "In", "values": [rack]},
                                             {"key": "topology.kubernetes.io/zone", "operator": "NotIn",
                                              "values": ["zone-e"]}]}
        elif shape == 2:
            selector = {"matchLabels": {"fleetos.io/rack": rack},
                        "matchExpressions": [{"key": "accelerator", "operator": "DoesNotExist"}]}
        else:
            selector = {"matchLabels": {"fleetos.io/rack": rack},
                        "matchExpressions": [{"key": "node-role.kubernetes.io/worker", "operator": "Exists"}]}
        objects.append({"apiVersion": "fleetos.io/v1alpha1", "kind": "MachineImage",
                        "metadata": {"name": "rack-%d" % i, "annotations": {"fleetos.io/defined-in": "bench.yaml document %d" % (i + 1)}},
                        "spec": {"image": "reg.example/os/rack@%s" % digest(5000 + i), "nodeSelector": selector,
                                 "paused": i % 10 == 0}})
    return objects


def machine_image_set(objects):
    """The collection's resolver, imported once sys.path holds the working tree."""
    from ansible_collections.fleetos.layering.plugins.plugin_utils.images._machine_image import MachineImageSet

    return MachineImageSet(objects)


def run(images, hosts, linear=False):
    sources = collections.Counter()
    if linear:
        # Disable the index: every selector is evaluated for every host.
        every = [i for i in images.images if i.selector is not None]
        images.by_value, images.by_key, images.unanchored = {}, {}, every
    start = time.perf_counter()
    for name, labels, pool_image in hosts:
        sources[images.resolve(name, labels, pool_image=pool_image)["source"]] += 1
    return time.perf_counter() - start, sources


def write_inventory(directory, hosts, objects):
    """An inventory script (JSON, as AWX exports an inventory) and the manifests next to it."""
    groups = {}
    hostvars = {}
    for name, labels, pool_image in sorted(hosts):
        pool = labels["fleetos.io/pool"]
        group = groups.setdefault(pool.replace("-", "_"), {"hosts": [], "vars": {"fleetos_pool": pool,
                                                                                "fleetos_pool_image": pool_image}})
        group["hosts"].append(name)
        hostvars[name] = {"fleetos_node_labels": labels}
    data = dict(groups, all={"children": ["fleet"]}, fleet={"children": sorted(groups)}, _meta={"hostvars": hostvars})
    (directory / "inventory.json").write_text(json.dumps(data))
    script = directory / "hosts"
    script.write_text("#!/bin/sh\nexec cat %s\n" % (directory / "inventory.json"))
    script.chmod(0o755)
    manifests = directory / "machine_images"
    manifests.mkdir()
    for start in range(0, len(objects), 20):
        documents = []
        for obj in objects[start:start + 20]:
            obj = json.loads(json.dumps(obj))
            obj["metadata"].pop("annotations", None)
            documents.append(obj)
        (manifests / ("bench-%03d.yaml" % start)).write_text(yaml.safe_dump_all(documents))
    return script


def run_playbook(args, hosts, objects):
    """Seconds for playbooks/plan.yml on a generated inventory, and the plan it wrote."""
    core = Path(args.core) if args.core else Path(sys.executable).parent.parent
    with tempfile.TemporaryDirectory(prefix="plan-scale-") as tmp:
        tmp = Path(tmp)
        script = write_inventory(tmp, hosts, objects)
        env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(RUNTIME), ANSIBLE_NOCOLOR="1",
                   ANSIBLE_DEPRECATION_WARNINGS="False")
        argv = [str(core / "bin" / "ansible-playbook"), str(REPO / "playbooks" / "plan.yml"), "-i", str(script),
                "-c", "local", "--forks", str(args.forks), "-e", "fleetos_plan_read_status=false",
                "-e", "fleetos_plan_output_dir=%s" % (tmp / "out")]
        start, used = time.perf_counter(), _children_cpu()
        proc = subprocess.run(argv, env=env, cwd=str(tmp), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, check=False)
        seconds, cpu = time.perf_counter() - start, _children_cpu() - used
        plan = tmp / "out" / "plan.json"
        report = json.loads(plan.read_text()) if plan.is_file() else None
        if proc.returncode != 0 or report is None:
            sys.exit("plan.yml failed (rc %d):\n%s" % (proc.returncode, proc.stdout[-4000:]))
        return seconds, cpu, report


def _children_cpu():
    """CPU seconds (user and system) of the waited-for children: ansible-playbook and its workers."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=10000)
    parser.add_argument("--objects", type=int, default=200)
    parser.add_argument("--linear", action="store_true", help="also time the unindexed scan")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--playbook", action="store_true", help="time playbooks/plan.yml end to end instead")
    parser.add_argument("--forks", type=int, default=20, help="with --playbook")
    parser.add_argument("--core", help="with --playbook: the venv of the ansible-core to run (default: this one)")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    hosts = make_hosts(args.hosts, rng)
    objects = make_objects(args.objects)
    rng.shuffle(objects)

    if args.playbook:
        seconds, cpu, report = run_playbook(args, hosts, objects)
        sources = collections.Counter(row["source"] for row in report["hosts"])
        print("plan_scale --playbook: playbooks/plan.yml, %d hosts x %d MachineImages, no status read, "
              "--forks %d, %s" % (args.hosts, args.objects, args.forks, args.core or "this venv"))
        print("  plan.yml %.1f s  (%.2f ms/host)" % (seconds, seconds / args.hosts * 1e3))
        # On a loaded machine the wall time grows with the load; the CPU time much less.
        print("  cpu      %.1f s  (%.2f ms/host; user and system, ansible-playbook and its workers)"
              % (cpu, cpu / args.hosts * 1e3))
        print("  hosts    %d planned, %d errors" % (len(report["hosts"]), report["errors"]))
        print("  sources  %s" % dict(sorted(sources.items())))
        return

    start = time.perf_counter()
    images = machine_image_set(objects)
    compile_s = time.perf_counter() - start
    resolve_s, sources = run(images, hosts)
    total = compile_s + resolve_s
    print("plan_scale: %d hosts x %d MachineImages, python %s, pid %d (one core)"
          % (args.hosts, args.objects, sys.version.split()[0], os.getpid()))
    print("  compile  %.4f s" % compile_s)
    print("  resolve  %.4f s  (%.1f us/host)" % (resolve_s, resolve_s / args.hosts * 1e6))
    print("  total    %.4f s  (%.1f us/host)" % (total, total / args.hosts * 1e6))
    print("  sources  %s" % dict(sorted(sources.items())))
    if args.linear:
        linear_s, linear_sources = run(machine_image_set(objects), hosts, linear=True)
        assert linear_sources == sources, "index and linear scan disagree"
        print("  linear   %.4f s  (%.1f us/host, no index)" % (linear_s, linear_s / args.hosts * 1e6))


if __name__ == "__main__":
    main()
