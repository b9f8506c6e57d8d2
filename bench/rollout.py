#!/usr/bin/env python3
# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Rollout wall time against a naive playbook and against the floor, on lab nodes.

One run, on N lab nodes (default: 12 of the bench's own, `fleetlab claim bench-rollout --with-python`: the naive
playbook needs Python on the hosts, rollout.yml does not) in two pools, each pool with
fleetos_pool_max_unavailable = --budget (3), every node booted on the lab base image v1:

1. playbooks/rollout.yml to v2 (built here: --from fleetos/lab-os:1.0 --size-mb 50);
2. a no-op rerun of it on the converged fleet: wall time, registry blob reads, reboots;
3. back to v1 (playbooks/rollback.yml), then bench/naive-rollout.yml (serial: 3,
   rpm-ostree rebase + reboot) to v2', a second image built the same way with its own
   random 50 MB layer, so the naive run pulls as many bytes as the rollout did (the
   nodes' layer cache keeps v2's layer, not v2''s);
4. back to v1 again.

The floor is the slowest single stage of the rollout (stage_start -> staged_at in its
report) plus ceil(N / budget) reboots, a reboot being the median reboot -> boot span
in the lab journal during the rollout. The pooled floor is that stage plus, for each
pool, the best schedule of its hosts' own reboot times (journal reboot -> boot) on
--budget slots, the maximum over pools (bench/_floor.py). Byte figures are the journal's
blob_read events of the bench nodes. Controller CPU is user+sys of ansible-playbook and
everything it started (RUSAGE_CHILDREN around the run, plus the ssh ControlPersist
masters it leaves behind); overhead per host is (rollout - pooled floor) / N and CPU / N.
Controller memory is the peak of the summed RSS of ansible-playbook and all its descendants
(forks, ssh clients), sampled from /proc every 0.2 s during each run, and that tree plus the
ssh masters; and the same as PSS, which counts once the pages the forks share with
ansible-playbook (the summed RSS counts them once per fork at work). Every playbook runs with --forks (default: N; below N fewer hosts run at once).

The lab is made to behave like a fleet (DESIGN.md, "Figures the project is measured
by"): each bench node's link is shaped (--rate, 80mbit) and every boot of a bench node is
delayed (--boot-delay, 10 s, or with --boot-spread A-B each node its own delay drawn from
[A, B] with --seed: fleetlab fault NODE slow-boot). Both are undone at the end
and the nodes are left on v1. Prints figures and writes
bench/results/rollout-<timestamp>.json; not a pass/fail test (exit 1 only when
something broke). The bench nodes' host vars come from the lab's inventory,
FLEETLAB_INVENTORY/hosts.yml (default inventories/lab, as for lab/fleetlab).

  .venv/bin/python bench/rollout.py [--count 12 | --nodes node12,...,node23] [--budget 3]
      [--pools 2] [--boot-delay 10 | --boot-spread 5-30 [--seed 15]] [--rate 80mbit] [--size-mb 50] [--forks N]
      [--strategy fleetos.layering.slots | free] [--timeline]
  .venv/bin/python bench/rollout.py --soft-reboot auto [--count 12] [--budget 3] [--boot-delay 23] [--size-mb 50]
      (soft reboots against full ones on bootc nodes: bench/soft_reboot.py)
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import re
import statistics
import sys
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _timeline  # noqa: E402
import soft_reboot  # noqa: E402
from _floor import parse_spread, pooled_floor, slot_records_from_hosts, slot_reuse, spread_delays  # noqa: E402
from _lab import (  # noqa: E402  (what the lab benches share)
    BASE, REPO, RESULTS, ROLLBACK, ROLLOUT, RSS_INTERVAL, STATE, VENV_BIN, BenchError, Journal, best_effort,
    bench_nodes, bench_parser, blob_bytes, check_on, fleetlab, lab_boot_delay, lab_info, log, run_bench, run_playbook, slow_boot,
    status, write_inventory as write_lab_inventory)

NAIVE = REPO / "bench" / "naive-rollout.yml"
REPOSITORY = "fleetos/bench-rollout"
CLAIM = "bench-rollout"
DEFAULT_COUNT = 12
DEFAULT_SEED = 15
# A physical machine's boot, as published (systemd issue #25750: 11.0 s firmware, 1.5 s loader, 2.1 s kernel, 8.8 s
# userspace): the boot a soft reboot shortens (docs/rollout.md, "Soft reboots"); 10 s is a small VM's.
SOFT_BOOT_DELAY = 23.0


def claim_owner(count):
    """The fleetlab claim owner of --count nodes: one per count, so that 12, 24 and 48 nodes are each the
    same nodes on every run (a claim of another count under the same owner would add new nodes)."""
    return CLAIM if count == DEFAULT_COUNT else "%s-%d" % (CLAIM, count)


# --------------------------------------------------------------------------
# the lab


def ensure_nodes(nodes):
    """fleetlab up with enough nodes; it only adds nodes, existing ones are kept."""
    info = lab_info()
    have = len(info["nodes"]) if info else 0
    want = max([have] + [int(re.sub(r"\D", "", n)) for n in nodes])
    fleetlab("up", "--nodes", want)
    missing = [n for n in nodes if n not in lab_info()["nodes"]]
    if missing:
        raise BenchError("the lab has no nodes %s" % ", ".join(missing))


def built_images():
    return json.loads((STATE / "images" / "built.json").read_text())


def manifest_layers(digest):
    """(digest, size) of the layers of an image built by fleetlab, from its local OCI layout."""
    algo, hexd = digest.split(":", 1)
    manifest = json.loads((STATE / "images" / "oci" / "blobs" / algo / hexd).read_text())
    return [(layer["digest"], int(layer["size"])) for layer in manifest["layers"]], \
        (manifest["config"]["digest"], int(manifest["config"]["size"]))


def build_image(name_tag, size_mb):
    proc = fleetlab("image", "build", name_tag, "--from", BASE, "--size-mb", size_mb, "--json")
    return json.loads(proc.stdout)


def reboot_times(spans, hosts, delays):
    """Each host's reboot seconds -> ({host: seconds}, source, base): the journal's reboot -> boot spans
    (summed when a host rebooted more than once); a host of `hosts` without one gets its configured
    boot delay plus the measured base reboot (median span less the host's delay; None without spans)."""
    measured = {}
    for node, start, end in spans:
        measured[node] = measured.get(node, 0.0) + (end - start)
    base = statistics.median(measured[h] - delays.get(h, 0.0) for h in measured) if measured else None
    times = dict(measured)
    guessed = [h for h in hosts if h not in measured]
    for host in guessed:
        times[host] = delays.get(host, 0.0) + (base or 0.0)
    if not guessed:
        source = "journal reboot -> boot spans (%d hosts)" % len(measured)
    elif measured:
        source = "journal reboot -> boot spans (%d hosts), configured delay + measured base reboot %.1f s (%s)" % (
            len(measured), base, ", ".join(guessed))
    else:
        source = "configured delay only (no reboot in the journal; base reboot unknown)"
    return times, source, base


def reboot_spans(events):
    """(node, reboot ts, next boot ts) for each reboot in the events."""
    pending, out = {}, []
    for event in events:
        if event["event"] == "reboot":
            pending[event["node"]] = float(event["ts"])
        elif event["event"] == "boot" and event["node"] in pending:
            out.append((event["node"], pending.pop(event["node"]), float(event["ts"])))
    return out


def max_concurrent(spans):
    points = sorted([(s, 1) for _, s, _ in spans] + [(e, -1) for _, _, e in spans], key=lambda p: (p[0], p[1]))
    now = best = 0
    for _, step in points:
        now += step
        best = max(best, now)
    return best


# --------------------------------------------------------------------------
# ansible


def write_inventory(path, nodes, pools, budget):
    """An inventory of the bench nodes only: the lab's host vars, pools of our own -> {pool: nodes}."""
    members = {"bench_%s" % chr(ord("a") + i): nodes[i::pools] for i in range(pools)}
    write_lab_inventory(path, {group: ({"fleetos_pool": group.replace("_", "-"),
                                        "fleetos_pool_max_unavailable": budget}, names)
                               for group, names in members.items() if names}, parent="bench_rollout")
    return {group.replace("_", "-"): names for group, names in members.items() if names}


# --------------------------------------------------------------------------
# the bench


class Bench:
    def __init__(self, args):
        self.args = args
        if not args.nodes:
            fleetlab("up", "--nodes", "10")
        self.owner = None if args.nodes else claim_owner(args.count)
        # With Python: the naive playbook is hand-written with the command and reboot modules, which need it
        # (as on RHEL image mode); rollout.yml runs no Python module on a host, with it or without.
        self.nodes = bench_nodes(args.nodes, self.owner, "--count", args.count, "--with-python")
        # Each node's boot delay: the slow-boot fault plus the lab's own delay (`fleetlab up --boot-delay`,
        # added by the lab to every reboot); the fault is set so that their sum is the delay asked for.
        if args.boot_spread:
            targets = spread_delays(self.nodes, args.boot_spread[0], args.boot_spread[1], args.seed)
        else:
            targets = {node: float(args.boot_delay) for node in self.nodes}
        self.lab_delay = lab_boot_delay()
        self.faults = {node: round(max(0.0, t - self.lab_delay), 3) for node, t in targets.items()}
        self.delays = {node: round(self.faults[node] + self.lab_delay, 3) for node in self.nodes}
        stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
        self.stamp = stamp
        self.run_dir = RESULTS / ("rollout-%s" % stamp)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.inventory = self.run_dir / "hosts.yml"
        self.forks = args.forks or len(self.nodes)
        self.shaped = False
        self.faulted = False

    def playbook(self, book, log_name, *extra):
        """ansible-playbook BOOK on the bench inventory, with the bench's forks (the same for every run) -> the
        run_playbook process; logs its wall time and peak RSS."""
        argv = [str(VENV_BIN / "ansible-playbook"), "-i", str(self.inventory), str(book),
                "--forks", str(self.forks)] + list(extra)
        if book in (ROLLOUT, ROLLBACK) and self.args.strategy != "fleetos.layering.slots":
            argv += ["-e", "fleetos_rollout_strategy=%s" % self.args.strategy]
        timeline = self.run_dir / (log_name + ".timeline.jsonl") if self.args.timeline else None
        proc = run_playbook(argv, self.run_dir / log_name, book.name, timeline=timeline)
        log("%s: %.1f s, %s" % (log_name, proc.wall, fmt_rss(rss(proc))))
        if proc.timeline is not None:
            for line in _timeline.table(proc.timeline, len(self.nodes)):
                log("  " + line)
        return proc

    # -- lab settings
    def shape(self, on):
        fleetlab("shape", self.args.rate if on else "off", "--nodes", ",".join(self.nodes))
        self.shaped = on

    def slow_boot(self, on):
        slow_boot(self.nodes, self.faults, on)
        self.faulted = on

    def check_base(self, what):
        check_on(self.nodes, self.base_digest, what)

    def restore(self, digests, label):
        """Back to v1: cancel staged deployments, roll back hosts booted on each digest."""
        for digest in digests:
            self.playbook(ROLLBACK, "%s-%s.log" % (label, digest[7:19]), "-e", "fleetos_rollback_from=%s" % digest,
                          "-e", "fleetos_report_dir=%s" % (self.run_dir / label))

    # -- the run
    def run(self):
        a = self.args
        ensure_nodes(self.nodes)
        self.base_digest = built_images()[BASE]["digest"]
        registry = lab_info()["registry"]
        self.pools = write_inventory(self.inventory, self.nodes, a.pools, a.budget)
        for node in self.nodes:            # leftovers of an interrupted run
            fleetlab("fault", node, "clear")
        self.check_base("before the bench")

        tag = "%s-%s" % (self.stamp, uuid.uuid4().hex[:6])
        log("building v2 and v2' (%d MB layer each)" % a.size_mb)
        v2 = build_image("%s:%s-v2" % (REPOSITORY, tag), a.size_mb)
        v2n = build_image("%s:%s-v2n" % (REPOSITORY, tag), a.size_mb)
        base_layers = {d for d, _ in manifest_layers(self.base_digest)[0]}
        layer_bytes = {}
        for name, rec in (("v2", v2), ("v2n", v2n)):
            layers, config = manifest_layers(rec["digest"])
            layer_bytes[name] = {"changed_layers": sum(s for d, s in layers if d not in base_layers),
                                 "config": config[1], "image_total": sum(s for _, s in layers) + config[1]}
        v2_tag = "%s/%s:%s-v2" % (registry, REPOSITORY, tag)
        v2n_tag = "%s/%s:%s-v2n" % (registry, REPOSITORY, tag)

        self.shape(True)
        self.slow_boot(True)

        log("rollout v1 -> v2 on %d nodes" % len(self.nodes))
        j = Journal()
        ro = self.playbook(ROLLOUT, "rollout.log", "-e", "fleetos_rollout_image=%s" % v2_tag,
                           "-e", "fleetos_report_dir=%s" % (self.run_dir / "rollout"))
        ro_events = j.events(set(self.nodes))
        report = json.loads((self.run_dir / "rollout" / "rollout-report.json").read_text())

        log("no-op rerun")
        j = Journal()
        rr = self.playbook(ROLLOUT, "rerun.log", "-e", "fleetos_rollout_image=%s" % v2_tag,
                           "-e", "fleetos_report_dir=%s" % (self.run_dir / "rerun"))
        rr_events = j.events(set(self.nodes))
        rr_report = json.loads((self.run_dir / "rerun" / "rollout-report.json").read_text())

        log("back to v1 (rollback.yml, boot delay off)")
        self.slow_boot(False)
        self.restore([v2["digest"]], "restore-1")
        self.check_base("after the first restore")
        self.slow_boot(True)

        log("naive rollout v1 -> v2' (serial: 3)")
        j = Journal()
        nv = self.playbook(NAIVE, "naive.log", "-e", "bench_naive_ref=ostree-unverified-registry:%s" % v2n_tag)
        nv_events = j.events(set(self.nodes))
        naive_booted = status(self.nodes)

        log("back to v1")
        self.slow_boot(False)
        self.restore([v2n["digest"]], "restore-2")
        self.shape(False)
        self.check_base("after the bench")

        return self.figures(v2, v2n, layer_bytes, report, rr_report, ro, rr, nv,
                            ro_events, rr_events, nv_events, naive_booted)

    def figures(self, v2, v2n, layer_bytes, report, rr_report, ro, rr, nv, ro_events, rr_events, nv_events,
                naive_booted):
        a, n = self.args, len(self.nodes)
        rows = report["hosts"]
        changed = [r["host"] for r in rows if r["status"] == "activated"]
        stages = {r["host"]: r["staged_at"] - r["stage_start"] for r in rows
                  if r["stage_start"] is not None and r["staged_at"] is not None}
        ro_spans = reboot_spans(ro_events)
        nv_spans = reboot_spans(nv_events)
        reboot_s = [end - start for _, start, end in ro_spans]
        reboot_median = statistics.median(reboot_s) if reboot_s else 0.0
        slowest = max(stages.values()) if stages else 0.0
        rounds = math.ceil(n / a.budget)
        floor = slowest + rounds * reboot_median
        pooled_rounds = max(math.ceil(len(names) / a.budget) for names in self.pools.values())
        # The pooled floor for the delays this run really had: each host's own reboot time, the best
        # schedule of each pool's under its budget.
        rebooting = [r["host"] for r in rows
                     if r.get("reboot_start") is not None or r["status"] in ("activated", "failed")]
        host_reboot, reboot_source, base_reboot = reboot_times(ro_spans, rebooting, self.delays)
        pooled = pooled_floor(slowest, {pool: {h: host_reboot[h] for h in names if h in host_reboot}
                                        for pool, names in self.pools.items()}, a.budget)
        # Budget slots: the report's own records (the sliding-window os_activate), else derived from
        # the host rows (a host holds a slot from granted_at or reboot_start to released_at or verified_at).
        if report.get("slots") is not None:
            slot_recs, slot_source = report["slots"], "the report's slots"
        else:
            slot_recs = slot_records_from_hosts(rows)
            slot_source = "host rows (granted_at or reboot_start -> released_at or verified_at)"
        started = report.get("started_at") or 0.0
        reuse = slot_reuse(slot_recs, a.budget)
        for pool_reuse in reuse.values():
            pool_reuse["gaps"] = [round(g, 2) for g in pool_reuse["gaps"]]
            pool_reuse["gap_s"] = {k: round(v, 2) for k, v in pool_reuse["gap_s"].items()} \
                if pool_reuse["gap_s"] else None
            pool_reuse["timeline"] = [[h, None if g is None else round(g - started, 2),
                                       None if r is None else round(r - started, 2)]
                                      for h, g, r in pool_reuse["timeline"]]
        ro_bytes = blob_bytes(ro_events)
        nv_bytes = blob_bytes(nv_events)
        rr_bytes = blob_bytes(rr_events)
        ro_reboots = [e["node"] for e in ro_events if e["event"] == "reboot"]
        nv_reboots = [e["node"] for e in nv_events if e["event"] == "reboot"]
        rr_reboots = [e["node"] for e in rr_events if e["event"] == "reboot"]
        naive_ok = all(r["digest"] == v2n["digest"] for r in naive_booted.values())
        pool_max = {pool: max_concurrent([s for s in ro_spans if s[0] in names]) for pool, names in self.pools.items()}

        def per_host(per_node):
            values = [per_node.get(node, 0) for node in self.nodes]
            return {"min": min(values), "median": statistics.median(values), "max": max(values),
                    "per_node": {node: per_node.get(node, 0) for node in self.nodes}}

        def cpu(proc):
            return {"cpu_s": round(proc.cpu, 2), "cpu_ansible_s": round(proc.cpu_ansible, 2),
                    "cpu_ssh_masters_s": round(proc.cpu_ssh, 2), "ssh_masters_counted": proc.subreaper,
                    "cpu_s_per_host": round(proc.cpu / n, 3)}

        delays = sorted(self.delays.values())
        return {
            "timestamp": self.stamp,
            "settings": {
                "nodes": self.nodes, "n": n, "claim": self.owner, "pools": self.pools, "budget_per_pool": a.budget,
                "naive_serial": 3, "link_rate": a.rate, "tbf": "burst 64kb latency 200ms",
                "boot_delay_s": None if a.boot_spread else a.boot_delay,
                "boot_spread_s": list(a.boot_spread) if a.boot_spread else None,
                "seed": a.seed if a.boot_spread else None,
                "boot_delays_s": {"min": delays[0], "median": statistics.median(delays), "max": delays[-1],
                                  "per_node": self.delays},
                "lab_boot_delay_s": self.lab_delay, "slow_boot_fault_s": self.faults,
                "layer_mb": a.size_mb, "forks": self.forks, "strategy": a.strategy, "rss_interval_s": RSS_INTERVAL,
                "cpus": len(os.sched_getaffinity(0)),
                "v2": {"image": "%s:%s" % (v2["reference"], v2["tag"]), "digest": v2["digest"]},
                "v2_naive": {"image": "%s:%s" % (v2n["reference"], v2n["tag"]), "digest": v2n["digest"]},
                "naive_image_note": "the naive run pulls v2', built like v2 with its own random layer of the same "
                                    "size, so both runs pull one new layer (the layer cache keeps v2's)",
            },
            "rollout": {
                "wall_s": round(ro.wall, 2), "result": report["result"], "counts": report["counts"],
                "waves": report.get("waves"), "slots": report.get("slots"),
                "slot_reuse": {"source": slot_source, "pools": reuse},
                **cpu(ro), **rss(ro),
                "overhead_s_per_host": round((ro.wall - pooled["wall_s"]) / n, 3),
                "reboots": len(ro_reboots), "changed_hosts": len(changed),
                "reboots_per_changed_host": round(len(ro_reboots) / len(changed), 2) if changed else None,
                "max_concurrent_down_per_pool": pool_max,
                "max_concurrent_down_fleet": max_concurrent(ro_spans),
                "stage_s": {"min": round(min(stages.values()), 2), "max": round(slowest, 2),
                            "median": round(statistics.median(stages.values()), 2)} if stages else None,
                "bytes_pulled_per_host": per_host(ro_bytes),
            },
            "naive": {
                "wall_s": round(nv.wall, 2), "reboots": len(nv_reboots), **cpu(nv), **rss(nv),
                "all_booted_on_v2_naive": naive_ok,
                "max_concurrent_down_fleet": max_concurrent(nv_spans),
                "bytes_pulled_per_host": per_host(nv_bytes),
                "reboot_s_median": round(statistics.median([e - s for _, s, e in nv_spans]), 2) if nv_spans else None,
            },
            "floor": {
                "wall_s": round(floor, 2), "slowest_stage_s": round(slowest, 2),
                "reboot_s_median": round(reboot_median, 2),
                "reboot_s_min": round(min(reboot_s), 2) if reboot_s else None,
                "reboot_s_max": round(max(reboot_s), 2) if reboot_s else None,
                "reboot_rounds": rounds, "formula": "slowest stage + ceil(N / budget) x median reboot (journal)",
                "pooled_wall_s": round(pooled["wall_s"], 2),
                "pooled_reboot_s": round(pooled["reboot_s"], 2),
                "pooled_bottleneck": pooled["bottleneck"],
                "pooled_exact": pooled["exact"],
                "pooled_pools": {pool: {"makespan_s": round(p["makespan"], 2),
                                        "lower_bound_s": round(p["lower_bound"], 2), "method": p["method"],
                                        "slots": p["slots"], "hosts": p["hosts"], "schedule": p["schedule"]}
                                 for pool, p in pooled["pools"].items()},
                "reboot_s_per_host": {h: round(t, 2) for h, t in sorted(host_reboot.items())},
                "reboot_source": reboot_source,
                "base_reboot_s": round(base_reboot, 2) if base_reboot is not None else None,
                "pooled_note": "each pool has its own budget, so the rollout may reboot budget x pools at once; "
                               "pooled floor = slowest stage + max over pools of the best schedule of the pool's "
                               "per-host reboot times on budget slots (parallel machines, least makespan)",
                "pooled_reboot_rounds": pooled_rounds,
                "pooled_rounds_wall_s": round(slowest + pooled_rounds * reboot_median, 2),
                "pooled_rounds_note": "the earlier formula: slowest stage + max over pools ceil(pool size / budget) "
                                      "x median reboot",
            },
            "rerun": {
                "wall_s": round(rr.wall, 2), "blob_reads": sum(1 for e in rr_events if e["event"] == "blob_read"),
                "blob_bytes": sum(rr_bytes.values()), "reboots": len(rr_reboots),
                "counts": rr_report["counts"], "changed": sum(r["changed"] for r in rr.recap.values()),
                **cpu(rr), **rss(rr),
            },
            "layer_bytes": layer_bytes,
            "ratios": {
                "rollout_over_naive": round(ro.wall / nv.wall, 3),
                "rollout_over_floor": round(ro.wall / floor, 3) if floor else None,
                "rollout_over_pooled_floor": round(ro.wall / pooled["wall_s"], 3) if pooled["wall_s"] else None,
                "bytes_per_host_over_layer": round(statistics.median(ro_bytes.get(x, 0) for x in self.nodes)
                                                   / layer_bytes["v2"]["changed_layers"], 3),
            },
        }

    def cleanup(self):
        """Best effort: no faults, no shaping, nodes back on v1."""
        problems = best_effort(lambda: self.slow_boot(False), lambda: self.shape(False))
        try:
            rows = status(self.nodes)
            off = sorted({r["digest"] for r in rows.values() if r["digest"] != self.base_digest})
            if off or any(r["staged"] for r in rows.values()):
                log("restoring nodes to v1 after a failure")
                # A digest no node boots: the rollback then only cancels staged deployments.
                self.restore(off or ["sha256:" + "0" * 64], "restore-cleanup")
            self.check_base("cleanup")
        except Exception as exc:  # noqa: BLE001
            problems.append(str(exc))
        return problems


def rss(proc):
    """The memory figures of a run_playbook process, MiB: the peak summed RSS of ansible-playbook and its
    descendants, and of that tree plus the ssh masters (None when they could not be adopted); the same as PSS
    (the forks' pages shared with ansible-playbook counted once)."""
    return {"peak_rss_mib": round(proc.peak_rss_kib / 1024, 1),
            "peak_rss_with_ssh_masters_mib": round(proc.peak_rss_with_masters_kib / 1024, 1)
            if proc.subreaper else None,
            "peak_pss_mib": round(proc.peak_pss_kib / 1024, 1),
            "peak_pss_with_ssh_masters_mib": round(proc.peak_pss_with_masters_kib / 1024, 1)
            if proc.subreaper else None,
            "rss_samples": proc.rss_samples}


def fmt_rss(run):
    """'peak RSS NNN MiB (process tree)' of a run's figures (rss()), with the ssh masters when counted."""
    text = "peak RSS %.0f MiB (process tree)" % run["peak_rss_mib"]
    if run["peak_rss_with_ssh_masters_mib"] is None:
        return text + ", ssh masters NOT counted (no subreaper); PSS %.0f MiB" % run["peak_pss_mib"]
    return text + ", %.0f MiB with the ssh masters; PSS %.0f MiB, %.0f MiB with the ssh masters" % (
        run["peak_rss_with_ssh_masters_mib"], run["peak_pss_mib"], run["peak_pss_with_ssh_masters_mib"])


def mb(value):
    return "%.1f MB" % (value / 1e6)


def fmt_delays(s):
    d = s["boot_delays_s"]
    if s.get("boot_spread_s"):
        text = "boot delays spread %g-%g s (seed %s): min %.1f, median %.1f, max %.1f s" % (
            s["boot_spread_s"][0], s["boot_spread_s"][1], s["seed"], d["min"], d["median"], d["max"])
    else:
        text = "boot delay %g s" % d["median"]
    if s.get("lab_boot_delay_s"):
        return text + " (fleetlab fault slow-boot on top of the lab's own --boot-delay %g s)" % s["lab_boot_delay_s"]
    return text + " (fleetlab fault slow-boot)"


def show(res):
    s, ro, nv, fl, rr, r, lb = (res[k] for k in ("settings", "rollout", "naive", "floor", "rerun", "ratios",
                                                    "layer_bytes"))
    n = s["n"]
    pools = ", ".join("%s=%d" % (p, len(ns)) for p, ns in s["pools"].items())
    print("bench/rollout.py  %s" % res["timestamp"])
    print("settings: %d nodes (%s..%s%s), pools %s, fleetos_pool_max_unavailable=%d, naive serial=%d, forks=%d,"
          " strategy %s"
          % (n, s["nodes"][0], s["nodes"][-1], ", claim %s" % s["claim"] if s.get("claim") else "", pools,
             s["budget_per_pool"], s["naive_serial"], s["forks"], s.get("strategy", "fleetos.layering.slots")))
    print("          links %s (tbf %s), %s, v1 -> v2 +%d MB layer, %d CPUs"
          % (s["link_rate"], s["tbf"], fmt_delays(s), s["layer_mb"], s["cpus"]))
    print("          naive run pulls v2' (same size, its own layer)")
    waves = ("%d waves" % len(ro["waves"])) if ro.get("waves") is not None else \
        ("%d slot grants" % len(ro["slots"])) if ro.get("slots") is not None else "no waves or slots in the report"
    print("rollout : %7.1f s  %s, %s, %d reboots / %d changed hosts, max down per pool %s, fleet %d"
          % (ro["wall_s"], ro["result"], waves, ro["reboots"], ro["changed_hosts"],
             ro["max_concurrent_down_per_pool"], ro["max_concurrent_down_fleet"]))
    reuse = ro["slot_reuse"]
    print("slots   : slot reuse gap (a freed slot until it is granted again), from %s:" % reuse["source"])
    for pool, p in reuse["pools"].items():
        gaps = p["gap_s"]
        stats = ", gap min %.1f / median %.1f / max %.1f s" % (gaps["min"], gaps["median"], gaps["max"]) if gaps else ""
        print("          %s: %d grants (%d first), %d reuses%s, max held %d; gaps %s"
              % (pool, p["grants"], p["first_grants"], p["reuses"], stats, p["max_held"],
                 " ".join("%.1f" % g for g in p["gaps"]) or "-"))
    print("naive   : %7.1f s  %d reboots, max down %d, all on v2': %s"
          % (nv["wall_s"], nv["reboots"], nv["max_concurrent_down_fleet"], nv["all_booted_on_v2_naive"]))
    print("floor   : %7.1f s  slowest stage %.1f s + %d x reboot %.1f s (journal median; min %.1f, max %.1f)"
          % (fl["wall_s"], fl["slowest_stage_s"], fl["reboot_rounds"], fl["reboot_s_median"],
             fl["reboot_s_min"] or 0, fl["reboot_s_max"] or 0))
    per_pool = ", ".join("%s %.1f s (%s%s, %d hosts on %d slots)" % (
        pool, p["makespan_s"], p["method"],
        "" if p["method"] == "exact" else ", lower bound %.1f s" % p["lower_bound_s"], p["hosts"], p["slots"])
        for pool, p in fl["pooled_pools"].items())
    print("pooled  : %7.1f s  slowest stage %.1f s + the best schedule of each pool's reboot times: %s"
          % (fl["pooled_wall_s"], fl["slowest_stage_s"], per_pool))
    print("          reboot times: %s; (rounds formula: %d x median = %.1f s)"
          % (fl["reboot_source"], fl["pooled_reboot_rounds"], fl["pooled_rounds_wall_s"]))
    print("rerun   : %7.1f s  %d blob reads (%d bytes), %d reboots, changed=%d, counts %s"
          % (rr["wall_s"], rr["blob_reads"], rr["blob_bytes"], rr["reboots"], rr["changed"],
             {k: v for k, v in rr["counts"].items() if v}))
    masters = "" if ro["ssh_masters_counted"] else "; ssh masters NOT counted (no subreaper)"
    print("cost    : rollout %.1f s, controller CPU %.1f s (ansible-playbook %.1f + ssh masters %.1f)%s"
          % (ro["wall_s"], ro["cpu_s"], ro["cpu_ansible_s"], ro["cpu_ssh_masters_s"], masters))
    print("          per host (N=%d): overhead (rollout - pooled floor) / N %.2f s, CPU / N %.2f s"
          % (n, ro["overhead_s_per_host"], ro["cpu_s_per_host"]))
    print("          rerun CPU %.1f s (%.2f s per host), naive CPU %.1f s (%.2f s per host)"
          % (rr["cpu_s"], rr["cpu_s_per_host"], nv["cpu_s"], nv["cpu_s_per_host"]))
    print("memory  : rollout %s (forks=%d, sampled every %g s)"
          % (fmt_rss(ro), s["forks"], s["rss_interval_s"]))
    print("          rerun   %s" % fmt_rss(rr))
    print("          naive   %s" % fmt_rss(nv))
    print("bytes   : rollout pulled %s per host (median; min %s, max %s), naive %s; changed layer %s (v2), %s (v2')"
          % (mb(ro["bytes_pulled_per_host"]["median"]), mb(ro["bytes_pulled_per_host"]["min"]),
             mb(ro["bytes_pulled_per_host"]["max"]), mb(nv["bytes_pulled_per_host"]["median"]),
             mb(lb["v2"]["changed_layers"]), mb(lb["v2n"]["changed_layers"])))
    print("ratios  : rollout/naive %.3f   rollout/floor %.3f   rollout/pooled floor %.3f   bytes per host/layer %.3f"
          % (r["rollout_over_naive"], r["rollout_over_floor"] or 0, r["rollout_over_pooled_floor"] or 0,
             r["bytes_per_host_over_layer"]))


def spread_arg(text):
    try:
        return parse_spread(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def main():
    parser = bench_parser(__doc__, DEFAULT_COUNT)
    parser.add_argument("--pools", type=int, default=2, help="pools the nodes are dealt into (default 2)")
    parser.add_argument("--budget", type=int, default=3, help="fleetos_pool_max_unavailable of each pool (3)")
    parser.add_argument("--boot-delay", type=float, default=None,
                        help="seconds each boot is delayed (10, with --soft-reboot %s; 0: none)" % SOFT_BOOT_DELAY)
    parser.add_argument("--boot-spread", type=spread_arg, default=None, metavar="A-B",
                        help="each node its own boot delay, drawn from [A, B] seconds with --seed (instead of "
                             "--boot-delay)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED,
                        help="seed of the --boot-spread draw (%d: the same delays on every run)" % DEFAULT_SEED)
    parser.add_argument("--rate", default="80mbit", help="each bench node's link rate (80mbit)")
    parser.add_argument("--size-mb", type=int, default=50, help="size of the layer v2 adds (50)")
    parser.add_argument("--forks", type=int, default=0,
                        help="ansible forks of every playbook run, below the number of nodes too (default: the "
                             "number of nodes)")
    parser.add_argument("--strategy", choices=("fleetos.layering.slots", "free"), default="fleetos.layering.slots",
                        help="the rollout's and rollback's activation strategy, fleetos_rollout_strategy "
                             "(fleetos.layering.slots; free: ansible-core's, which needs a fork for each node)")
    parser.add_argument("--timeline", action="store_true",
                        help="print where each run's time and controller CPU went, play by play; the timeline "
                             "itself in <log>.timeline.jsonl (bench/_timeline.py)")
    parser.add_argument("--soft-reboot", choices=("auto",), default=None,
                        help="instead: soft reboots against full ones on bootc nodes of the bench's own "
                             "(bench/soft_reboot.py)")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench/rollout.py: the lab needs root")
    if args.pools < 1 or args.budget < 1:
        sys.exit("bench/rollout.py: --pools and --budget must be at least 1")
    if args.forks < 0:
        sys.exit("bench/rollout.py: --forks must be at least 1 (or 0: the number of nodes)")
    if args.boot_delay is None:
        args.boot_delay = SOFT_BOOT_DELAY if args.soft_reboot else 10.0
    if args.soft_reboot:
        if args.nodes is None and args.count < 2:
            sys.exit("bench/rollout.py: --soft-reboot needs at least 2 nodes (two pools)")
        return soft_reboot.main(args)
    bench = Bench(args)
    return run_bench(bench, "rollout", show, lambda: bench.cleanup() if hasattr(bench, "base_digest") else [],
                     logs="logs and reports")


if __name__ == "__main__":
    sys.exit(main())
