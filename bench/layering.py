#!/usr/bin/env python3
# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Layered images: bytes per host for a layer-only bump against the layer and a flattened rebuild.

On N lab nodes (default: 3 of the bench's own, `fleetlab claim bench-layering`), all on the
lab base image (fleetos/lab-os:1.0), in one run:

1. three layer images FROM scratch (`fleetlab image build-layer`), each one file of random
   (incompressible) data: kubelet 1.31.4 (--kubelet-mb, 20), ovs 3.4 (--ovs-mb, 5), driver
   (--driver-mb, 5);
2. fleetos.layering.os_image_compose base + kubelet + ovs + driver -> D1 (wall seconds of the
   ansible-playbook run, a cold layer cache), then the same inputs again: the no-op compose
   (wall seconds, and the registry blob reads during it: journal blob_read of the
   controller, expected 0); an empty playbook is timed too, as Ansible's own start-up cost;
3. playbooks/rollout.yml D1 on the nodes; then kubelet bumped to 1.31.5 (new random
   content of the same size), composed -> D2, rolled out: bytes each node read from the
   registry (journal blob_read by node) against the new kubelet layer's size;
4. the flattened rebuild: one layer image holding the files of all three components as
   D2 has them, composed on the base -> F (D2 with its three layers re-made as one, as a
   Containerfile rebuild would); the nodes go back to D1 (playbooks/rollback.yml) and F is
   rolled out: bytes each node read.

Each bench node's link is shaped (--rate, 80mbit, as bench/rollout.py; `off`: none) and
boots may be delayed (--boot-delay, default 0: this bench measures bytes, not time). Both
are undone at the end; the nodes are left booted on F. The lab is the one FLEETLAB_NETNS,
FLEETLAB_STATE and FLEETLAB_INVENTORY name (as for lab/fleetlab; default the shared lab).
Prints the settings and figures and writes bench/results/layering-<timestamp>.json; not a
pass/fail test (exit 1 only when something broke).

  .venv/bin/python bench/layering.py [--count 3 | --nodes node01,node02,node03] [--rate 80mbit]
      [--boot-delay 0] [--kubelet-mb 20] [--ovs-mb 5] [--driver-mb 5]
"""

from __future__ import annotations

import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _lab import (  # noqa: E402  (what the lab benches share)
    BASE, LAB_INVENTORY, LAB_NETNS, RESULTS, ROLLBACK, ROLLOUT, STATE, VENV_BIN, BenchError, Journal,
    best_effort, bench_nodes, bench_parser, blob_reads, fleetlab, lab_info, log, run_bench,
    run_playbook as run_lab_playbook, slow_boot, status, write_inventory as write_lab_inventory)


def run_playbook(argv, log_path, what):
    return run_lab_playbook(argv, log_path, what, quiet_localhost=True)


def write_inventory(path, nodes):
    """The bench nodes, from the lab's inventory, in one pool that may take them all down at once."""
    write_lab_inventory(path, {"bench_layering": (
        {"fleetos_pool": "bench-layering", "fleetos_pool_max_unavailable": len(nodes)}, nodes)})


# --------------------------------------------------------------------------
# the bench


class Bench:
    def __init__(self, args):
        self.args = args
        self.nodes = bench_nodes(args.nodes, "bench-layering", "--count", args.count, "--after", args.after)
        self.stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
        self.run_dir = RESULTS / ("layering-%s" % self.stamp)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.data_dir = Path(tempfile.mkdtemp(prefix="bench-layering-"))
        self.inventory = self.run_dir / "hosts.yml"
        self.forks = max(args.forks or 0, len(self.nodes))
        self.tag = "%s-%s" % (self.stamp, uuid.uuid4().hex[:6])
        self.composes = 0
        self.started = False

    # -- lab settings
    def shape(self, on):
        if self.args.rate != "off":
            fleetlab("shape", self.args.rate if on else "off", "--nodes", ",".join(self.nodes))

    def slow_boot(self, on):
        slow_boot(self.nodes, self.args.boot_delay, on)

    # -- images
    def data_file(self, name, size_mb):
        path = self.data_dir / name
        with open(path, "wb") as handle:
            for _ in range(size_mb):
                handle.write(os.urandom(1 << 20))
        return path

    def small_file(self, name, text):
        path = self.data_dir / name
        path.write_text(text)
        return path

    def layer(self, repository, version, files):
        """fleetlab image build-layer REPOSITORY:VERSION-<tag> with files [(src, dest)] -> its record."""
        args = []
        for src, dest in files:
            args += ["--add-file", "%s:%s" % (src, dest)]
        proc = fleetlab("image", "build-layer", "%s:%s-%s" % (repository, version, self.tag),
                        "--version", version, "--json", *args)
        return json.loads(proc.stdout)

    @staticmethod
    def spec(name, record):
        return {"name": name, "image": "%s:%s" % (record["reference"], record["tag"])}

    def compose(self, output, layers, label):
        """os_image_compose on the controller -> (result, controller blob reads, seconds)."""
        registry_dir = STATE / "registry"
        args = {"base": "%s/%s" % (self.registry, BASE), "output": "%s/%s" % (self.registry, output),
                "layers": layers, "auth_file": str(registry_dir / "auth.json"),
                "ca_cert_dir": str(registry_dir / "certs.d"),
                "layer_cache_dir": str(self.data_dir / "compose-cache"), "retries": 0}
        out = self.run_dir / ("compose-%s.json" % label)
        play = [{"name": "compose %s" % label, "hosts": "localhost", "gather_facts": False, "tasks": [
            {"name": "compose", "fleetos.layering.os_image_compose": args, "register": "__compose"},
            {"name": "result", "ansible.builtin.copy": {
                "dest": str(out), "mode": "0600", "content": "{{ __compose | to_json }}"}}]}]
        book = self.run_dir / ("compose-%s.yml" % label)
        book.write_text(yaml.safe_dump(play, sort_keys=False))
        journal = Journal()
        proc = run_playbook(self.local_argv(book), self.run_dir / ("compose-%s.log" % label),
                            "compose %s" % label)
        reads = blob_reads(journal.events({"controller"})).get("controller", {"bytes": 0, "reads": 0})
        return json.loads(out.read_text()), reads, proc.wall

    def config_digest(self, result):
        """The configuration digest of a composed image (skopeo on the controller)."""
        registry_dir = STATE / "registry"
        proc = subprocess.run(["skopeo", "inspect", "--raw",
                               "--authfile", str(registry_dir / "auth.json"),
                               "--cert-dir", str(registry_dir / "certs.d"),
                               "docker://%s@%s" % (result["output"], result["digest"])],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120, check=False)
        if proc.returncode != 0:
            raise BenchError("skopeo inspect %s failed: %s" % (result["digest"], proc.stderr[-1000:]))
        return json.loads(proc.stdout)["config"]["digest"]

    def local_argv(self, book):
        return [str(VENV_BIN / "ansible-playbook"), "-i", "localhost,", "-c", "local",
                "-e", "ansible_python_interpreter=%s" % (VENV_BIN / "python"), str(book)]

    def ansible_baseline(self):
        """Seconds of a one-task local playbook: Ansible's start-up, in every compose figure."""
        book = self.run_dir / "baseline.yml"
        book.write_text(yaml.safe_dump([{"name": "baseline", "hosts": "localhost", "gather_facts": False,
                                         "tasks": [{"name": "nothing", "ansible.builtin.debug": {"msg": "x"}}]}]))
        return run_playbook(self.local_argv(book), self.run_dir / "baseline.log", "baseline").wall

    # -- rollouts
    def rollout(self, result, label):
        """playbooks/rollout.yml to a composed image -> (wall, {node: blob reads}, status after)."""
        image = "%s:%s" % (result["output"], result["tag"])
        journal = Journal()
        proc = run_playbook([str(VENV_BIN / "ansible-playbook"), "-i", str(self.inventory), str(ROLLOUT),
                             "--forks", str(self.forks), "-e", "fleetos_rollout_image=%s" % image,
                             "-e", "fleetos_report_dir=%s" % (self.run_dir / label)],
                            self.run_dir / ("%s.log" % label), "rollout.yml (%s)" % label)
        events = journal.events(set(self.nodes))
        reads = blob_reads(events)
        log("  %s: %.1f s; registry bytes per node %s" % (label, proc.wall, ", ".join(
            "%s %d" % (n, reads.get(n, {"bytes": 0})["bytes"]) for n in self.nodes)))
        rows = status(self.nodes)
        bad = ["%s: %s booted %s, staged %s" % (n, r["state"], r["digest"], r["staged"]) for n, r in rows.items()
               if r["state"] != "up" or r["digest"] != result["digest"] or r["staged"]]
        if bad:
            raise BenchError("%s: nodes not on %s:\n  %s" % (label, result["digest"], "\n  ".join(bad)))
        return proc.wall, {n: reads.get(n, {"bytes": 0, "reads": 0, "digests": []}) for n in self.nodes}, rows

    def rollback(self, from_digest, to_digest, label):
        run_playbook([str(VENV_BIN / "ansible-playbook"), "-i", str(self.inventory), str(ROLLBACK),
                      "--forks", str(self.forks), "-e", "fleetos_rollback_from=%s" % from_digest,
                      "-e", "fleetos_report_dir=%s" % (self.run_dir / label)],
                     self.run_dir / ("%s.log" % label), "rollback.yml (%s)" % label)
        rows = status(self.nodes)
        bad = [n for n, r in rows.items() if r["state"] != "up" or r["digest"] != to_digest or r["staged"]]
        if bad:
            raise BenchError("%s: %s not back on %s" % (label, ", ".join(bad), to_digest))

    # -- the run
    def run(self):
        a = self.args
        status(self.nodes)
        self.registry = lab_info()["registry"]
        write_inventory(self.inventory, self.nodes)
        for node in self.nodes:            # leftovers of an interrupted run
            fleetlab("fault", node, "clear")
        self.started = True

        log("building the layer images (kubelet %d MB, ovs %d MB, driver %d MB of random data)"
            % (a.kubelet_mb, a.ovs_mb, a.driver_mb))
        kubelet_bin = self.data_file("kubelet-1.31.4", a.kubelet_mb)
        kubelet_bin2 = self.data_file("kubelet-1.31.5", a.kubelet_mb)
        kubelet_conf = self.small_file("kubelet.conf", "# kubelet configuration\n")
        ovs_bin = self.data_file("ovs-vswitchd", a.ovs_mb)
        driver_bin = self.data_file("driver.ko", a.driver_mb)
        kubelet_files = [(kubelet_bin, "/usr/bin/kubelet"), (kubelet_conf, "/etc/kubernetes/kubelet.conf")]
        kubelet2_files = [(kubelet_bin2, "/usr/bin/kubelet"), (kubelet_conf, "/etc/kubernetes/kubelet.conf")]
        ovs_files = [(ovs_bin, "/usr/sbin/ovs-vswitchd")]
        driver_files = [(driver_bin, "/usr/lib/modules-extra/bench/driver.ko")]
        kubelet = self.layer("fleetos/bench-kubelet", "1.31.4", kubelet_files)
        ovs = self.layer("fleetos/bench-ovs", "3.4", ovs_files)
        driver = self.layer("fleetos/bench-driver", "1.0", driver_files)
        output = "fleetos/bench-worker-%s" % self.tag
        layers1 = [self.spec("kubelet", kubelet), self.spec("ovs", ovs), self.spec("driver", driver)]

        log("Ansible start-up baseline")
        baseline_s = self.ansible_baseline()
        log("compose D1 = base + kubelet 1.31.4 + ovs 3.4 + driver")
        d1, d1_reads, d1_s = self.compose(output, layers1, "d1")
        log("no-op compose (the same inputs)")
        noop, noop_reads, noop_s = self.compose(output, layers1, "noop")
        log("  D1 %s: %.1f s, %d blobs read; no-op: %.1f s, changed=%s, %d blobs read"
            % (d1["digest"][7:19], d1_s, d1_reads["reads"], noop_s, noop["changed"], noop_reads["reads"]))
        if noop["digest"] != d1["digest"]:
            raise BenchError("the no-op compose gave %s, not D1 %s" % (noop["digest"], d1["digest"]))

        self.shape(True)
        self.slow_boot(True)
        log("rollout D1 on %d nodes" % len(self.nodes))
        d1_wall, d1_bytes, d1_rows = self.rollout(d1, "rollout-d1")

        log("bump kubelet to 1.31.5, compose D2")
        kubelet2 = self.layer("fleetos/bench-kubelet", "1.31.5", kubelet2_files)
        layers2 = [self.spec("kubelet", kubelet2), self.spec("ovs", ovs), self.spec("driver", driver)]
        d2, d2_reads, d2_s = self.compose(output, layers2, "d2")
        d2_config = self.config_digest(d2)
        log("rollout D2")
        d2_wall, d2_bytes, d2_rows = self.rollout(d2, "rollout-d2")

        log("flattened rebuild: one layer with all three components' files, composed on the base -> F")
        flat = self.layer("fleetos/bench-flat", "1.31.5", kubelet2_files + ovs_files + driver_files)
        f, _f_reads, f_s = self.compose("fleetos/bench-flat-worker-%s" % self.tag, [self.spec("flat", flat)], "flat")
        log("back to D1 (rollback.yml), then rollout F")
        self.rollback(d2["digest"], d1["digest"], "rollback-d2")
        f_wall, f_bytes, _f_rows = self.rollout(f, "rollout-flat")
        self.slow_boot(False)
        self.shape(False)

        return self.figures(dict(
            kubelet=kubelet, kubelet2=kubelet2, ovs=ovs, driver=driver, flat=flat, d1=d1, d2=d2, f=f, noop=noop,
            baseline_s=baseline_s, d1_s=d1_s, d1_reads=d1_reads, noop_s=noop_s, noop_reads=noop_reads,
            d2_s=d2_s, d2_reads=d2_reads, f_s=f_s, d1_wall=d1_wall, d1_bytes=d1_bytes, d1_rows=d1_rows,
            d2_wall=d2_wall, d2_bytes=d2_bytes, d2_rows=d2_rows, d2_config=d2_config, f_wall=f_wall, f_bytes=f_bytes))

    def figures(self, v):
        a = self.args

        def size(record):
            return sum(int(layer["size"]) for layer in record["layers"])

        def per_host(per_node):
            values = [per_node[n]["bytes"] for n in self.nodes]
            return {"min": min(values), "median": statistics.median(values), "max": max(values),
                    "per_node": {n: per_node[n]["bytes"] for n in self.nodes},
                    "reads_per_node": {n: per_node[n]["reads"] for n in self.nodes}}

        kubelet2_size = size(v["kubelet2"])
        d2_host = per_host(v["d2_bytes"])
        f_host = per_host(v["f_bytes"])
        new_layers = {layer["digest"] for layer in v["kubelet2"]["layers"]}
        other = {n: [d for d in v["d2_bytes"][n]["digests"] if d not in new_layers] for n in self.nodes}
        d1_commit = {n: r["checksum"] for n, r in v["d1_rows"].items()}
        d2_commit = {n: r["checksum"] for n, r in v["d2_rows"].items()}
        return {
            "timestamp": self.stamp,
            "settings": {
                "lab": {"netns": LAB_NETNS, "state": str(STATE), "inventory": str(LAB_INVENTORY)},
                "nodes": self.nodes, "n": len(self.nodes), "link_rate": a.rate,
                "tbf": "burst 64kb latency 200ms" if a.rate != "off" else None,
                "boot_delay_s": a.boot_delay, "forks": self.forks, "cpus": len(os.sched_getaffinity(0)),
                "layer_mb": {"kubelet": a.kubelet_mb, "ovs": a.ovs_mb, "driver": a.driver_mb},
                "layer_bytes": {"kubelet 1.31.4": size(v["kubelet"]), "kubelet 1.31.5": kubelet2_size,
                                "ovs 3.4": size(v["ovs"]), "driver 1.0": size(v["driver"]),
                                "flat": size(v["flat"])},
                "images": {k: {"image": "%s:%s" % (v[k]["output"], v[k]["tag"]), "digest": v[k]["digest"]}
                           for k in ("d1", "d2", "f")},
            },
            "compose": {
                "ansible_baseline_s": round(v["baseline_s"], 2),
                "d1_s": round(v["d1_s"], 2), "d1_blob_reads": v["d1_reads"]["reads"],
                "d1_blob_bytes": v["d1_reads"]["bytes"], "d1_blobs": v["d1"]["blobs"],
                "noop_s": round(v["noop_s"], 2), "noop_blob_reads": v["noop_reads"]["reads"],
                "noop_blob_bytes": v["noop_reads"]["bytes"], "noop_changed": v["noop"]["changed"],
                "noop_same_digest": v["noop"]["digest"] == v["d1"]["digest"],
                "d2_s": round(v["d2_s"], 2), "d2_blob_reads": v["d2_reads"]["reads"],
                "d2_blob_bytes": v["d2_reads"]["bytes"], "d2_blobs": v["d2"]["blobs"],
                "flat_s": round(v["f_s"], 2),
            },
            "rollout_d1": {"wall_s": round(v["d1_wall"], 2), "bytes_per_host": per_host(v["d1_bytes"])},
            "layer_bump": {
                "wall_s": round(v["d2_wall"], 2), "bytes_per_host": d2_host, "layer_bytes": kubelet2_size,
                "ratio_median": round(d2_host["median"] / kubelet2_size, 4),
                "ratio_max": round(d2_host["max"] / kubelet2_size, 4),
                "d2_config": v["d2_config"],
                # every blob read is the new kubelet layer or D2's configuration (and each new layer read once)
                "only_new_layer_and_config": all(set(other[n]) <= {v["d2_config"]} for n in self.nodes),
                "new_layer_reads_per_node": {n: len(v["d2_bytes"][n]["digests"]) - len(other[n])
                                             for n in self.nodes},
                "config_reads_per_node": {n: len(other[n]) for n in self.nodes},
                "booted_commit_d1": d1_commit, "booted_commit_d2": d2_commit,
                "commit_differs_from_d1": {n: d2_commit[n] != d1_commit[n] for n in self.nodes},
            },
            "flattened": {
                "wall_s": round(v["f_wall"], 2), "bytes_per_host": f_host, "layer_bytes": size(v["flat"]),
                "ratio_to_bumped_layer_median": round(f_host["median"] / kubelet2_size, 4),
                "over_layer_bump_median": round(f_host["median"] / d2_host["median"], 3) if d2_host["median"] else None,
            },
        }

    def cleanup(self):
        """Best effort: no faults, no shaping; the big data files removed."""
        problems = best_effort(lambda: self.slow_boot(False), lambda: self.shape(False)) if self.started else []
        shutil.rmtree(self.data_dir, ignore_errors=True)
        return problems


def mb(value):
    return "%.2f MB" % (value / 1e6)


def show(res):
    s, c, r1, lb, fl = (res[k] for k in ("settings", "compose", "rollout_d1", "layer_bump", "flattened"))
    lbytes = s["layer_bytes"]
    print("bench/layering.py  %s" % res["timestamp"])
    print("settings: %d nodes (%s), lab netns %s, links %s%s, boot delay %s s, forks %d, %d CPUs"
          % (s["n"], ",".join(s["nodes"]), s["lab"]["netns"], s["link_rate"],
             " (tbf %s)" % s["tbf"] if s["tbf"] else "", s["boot_delay_s"], s["forks"], s["cpus"]))
    print("          layers (random data, gzip blob bytes): kubelet 1.31.4 %s, 1.31.5 %s; ovs 3.4 %s; driver %s;"
          " flat %s" % (mb(lbytes["kubelet 1.31.4"]), mb(lbytes["kubelet 1.31.5"]), mb(lbytes["ovs 3.4"]),
                        mb(lbytes["driver 1.0"]), mb(lbytes["flat"])))
    print()
    rows = [
        ("bytes per host, layer-only bump (D1 -> D2)", "%s (min %s, max %s)" % (
            mb(lb["bytes_per_host"]["median"]), mb(lb["bytes_per_host"]["min"]), mb(lb["bytes_per_host"]["max"]))),
        ("bumped layer size (kubelet 1.31.5)", mb(lb["layer_bytes"])),
        ("ratio bump bytes / layer (aim <= 1.05)", "%.4f (max %.4f)" % (lb["ratio_median"], lb["ratio_max"])),
        ("bytes per host, flattened rebuild (D1 -> F)", "%s (min %s, max %s)" % (
            mb(fl["bytes_per_host"]["median"]), mb(fl["bytes_per_host"]["min"]), mb(fl["bytes_per_host"]["max"]))),
        ("flattened / layer-only bump", "%.2fx" % fl["over_layer_bump_median"] if fl["over_layer_bump_median"]
         else "-"),
        ("compose base + 3 layers (D1, cold cache)", "%.2f s (%d blobs read, %s)" % (
            c["d1_s"], c["d1_blob_reads"], mb(c["d1_blob_bytes"]))),
        ("no-op compose", "%.2f s (changed=%s, same digest %s)" % (
            c["noop_s"], c["noop_changed"], c["noop_same_digest"])),
        ("no-op compose blob reads (aim 0)", "%d (%d bytes)" % (c["noop_blob_reads"], c["noop_blob_bytes"])),
        ("compose D2 (kubelet bumped)", "%.2f s (%d blobs read, %s)" % (
            c["d2_s"], c["d2_blob_reads"], mb(c["d2_blob_bytes"]))),
        ("Ansible start-up (in every compose time)", "%.2f s" % c["ansible_baseline_s"]),
        ("rollout.yml wall: D1 / D2 / F", "%.1f s / %.1f s / %.1f s" % (r1["wall_s"], lb["wall_s"], fl["wall_s"])),
        ("bytes per host, first rollout base -> D1", mb(r1["bytes_per_host"]["median"])),
    ]
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print("  %-*s  %s" % (width, key, value))
    print()
    print("per host (D1 -> D2): registry bytes, blob reads, booted commit D1 -> D2, differs from D1's")
    for node in s["nodes"]:
        print("  %s  %12d bytes  %d reads  %s -> %s  differs: %s" % (
            node, lb["bytes_per_host"]["per_node"][node], lb["bytes_per_host"]["reads_per_node"][node],
            lb["booted_commit_d1"][node][:12], lb["booted_commit_d2"][node][:12], lb["commit_differs_from_d1"][node]))
    print("  only the new kubelet layer and D2's config read: %s (new layer reads per node %s, config reads %s)"
          % (lb["only_new_layer_and_config"], lb["new_layer_reads_per_node"], lb["config_reads_per_node"]))


def main():
    parser = bench_parser(__doc__, 3)
    parser.add_argument("--after", type=int, default=10, help="claim only nodes numbered above this (10)")
    parser.add_argument("--rate", default="80mbit", help="each bench node's link rate (80mbit; off: not shaped)")
    parser.add_argument("--boot-delay", type=float, default=0, help="seconds each boot is delayed (0: none)")
    parser.add_argument("--kubelet-mb", type=int, default=20, help="kubelet layer size (20)")
    parser.add_argument("--ovs-mb", type=int, default=5, help="ovs layer size (5)")
    parser.add_argument("--driver-mb", type=int, default=5, help="driver layer size (5)")
    parser.add_argument("--forks", type=int, default=0, help="ansible forks (default: the number of nodes)")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench/layering.py: the lab needs root")
    bench = Bench(args)
    return run_bench(bench, "layering", show, bench.cleanup)


if __name__ == "__main__":
    sys.exit(main())
