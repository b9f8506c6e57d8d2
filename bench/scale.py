#!/usr/bin/env python3
# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The rollout at fleet size: the playbooks on a simulated fleet of N hosts, the controller's cost per host.

For each size of --hosts (default 250,1000), a simulated fleet of its own (bench/simfleet.py: each host its
own sshd on loopback and its own root, reached over ssh with ControlPersist; 10 pools, a budget of 10% of
each pool, boots drawn from --boot-spread, stages at --rate), all hosts on v1, then in order:

1. playbooks/rollout.yml v1 -> v2 (v1 plus one --size-mb layer);
2. its no-op rerun;
3. playbooks/plan.yml (v2), 4. playbooks/status.yml;
5. playbooks/rollback.yml (fleetos_rollback_from v2): every host back on v1;
6. bench/one-task.yml, the yardstick: one ansible.builtin.command per host (rpm-ostree status) and nothing else,
   what ansible-core itself costs per task execution at this size;
7. with --naive, bench/naive-rollout.yml (serial: 3, rpm-ostree rebase + reboot) v1 -> v2' (its own layer).

For each run: wall seconds; for the rollout, against the pooled floor (bench/_floor.py: the slowest stage in
the report plus, per pool, the best schedule of its hosts' journal reboot -> boot spans on the pool's slots);
the controller's CPU (ansible-playbook, its forks and ssh clients, and the ssh ControlPersist masters, as
bench/rollout.py counts it, bench/_lab.py) in all and per host; the peak summed RSS of that process tree with
the ssh masters, and its PSS (the forks' pages shared with ansible-playbook counted once); the simulated hosts' own CPU apart (their processes, from the fleet's supervisor and /proc:
on one machine they share its cores with the controller). Checks, each a line and a problem when it fails: the
journal never shows more hosts of a pool down at once than its budget; every host is verified (booted on the
target, the report's row `activated`; after the rollback, on v1); the report has one row per host.

Ends with one line a script can read, for the largest size run, with the CPU per host of the smallest and the
largest (`cpu_per_host_250`, `cpu_per_host_1000` by default):

    scale: hosts N rollout/pooled R cpu_per_host_<small> A cpu_per_host_<N> B peak_mib M rerun_s S

With --timeline, each run also writes where its time and controller CPU went, play by play, with its longest
tasks and its task executions (bench/_timeline.py), to <step>.timeline.jsonl, prints it, and adds its summary to
the run's figures.

Needs root (the fleet's namespaces). Writes bench/results/scale-<timestamp>.json and the logs and reports in
bench/results/scale-<timestamp>/; not a pass/fail test (exit 1 when a playbook failed or a check did not hold).

  .venv/bin/python bench/scale.py [--hosts 250,1000] [--forks 50] [--boot-spread 40-90] [--seed 15]
      [--rate 80mbit] [--size-mb 50] [--pools 10] [--budget 10%] [--control-persist SECONDS] [--naive]
      [--only rollout,rerun,...] [--timeline]
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import simfleet  # noqa: E402
from _floor import parse_spread, pooled_floor  # noqa: E402
from _lab import (  # noqa: E402
    REPO, RESULTS, ROLLBACK, ROLLOUT, RSS_INTERVAL, VENV_BIN, BenchError, _reap_adopted, log, parents, run_playbook)
from rollout import max_concurrent as max_down, reboot_spans  # noqa: E402  (the journal's spans, as rollout.py reads them)
import _timeline  # noqa: E402

PLAN = REPO / "playbooks" / "plan.yml"
STATUS = REPO / "playbooks" / "status.yml"
NAIVE = REPO / "bench" / "naive-rollout.yml"
ONE_TASK = REPO / "bench" / "one-task.yml"
STEPS = ("rollout", "rerun", "plan", "status", "rollback", "onetask", "naive")


def budget_of(value, size):
    """The slots a pool of size hosts gets from fleetos_pool_max_unavailable value: a percentage rounded down,
    at least 1 (the collection's filter rollout_budget)."""
    text = str(value)
    if text.endswith("%"):
        return max(1, int(math.floor(round(float(text[:-1]) * size / 100.0, 9))))
    return max(1, int(text))


def over_budget(spans, pools, budgets):
    """{pool: most hosts down at once} for the pools whose most exceeds their budget (empty: none did)."""
    out = {}
    for pool, names in pools.items():
        most = max_down([s for s in spans if s[0] in set(names)])
        if most > budgets[pool]:
            out[pool] = most
    return out


def summary_line(sizes):
    """The last line: the largest size's rollout/pooled, peak MiB and rerun seconds, the CPU per host of the
    smallest and the largest size. sizes: {n: figures of that size}."""
    small, large = min(sizes), max(sizes)
    big = sizes[large]
    return "scale: hosts %d rollout/pooled %.3f cpu_per_host_%d %.3f cpu_per_host_%d %.3f peak_mib %.0f rerun_s %.1f" % (
        large, big["rollout"]["over_pooled_floor"] or 0, small, sizes[small]["rollout"]["cpu_s_per_host"],
        large, big["rollout"]["cpu_s_per_host"], big["rollout"]["peak_rss_with_ssh_masters_mib"],
        big["rerun"]["wall_s"])


class Size:
    """One size: its fleet, its runs, its figures."""

    def __init__(self, args, n, run_dir):
        self.args, self.n = args, n
        self.dir = run_dir / ("hosts-%d" % n)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.fleet = simfleet.Fleet(Path(args.state) / ("n%d" % n))
        self.problems = []

    def playbook(self, name, book, *extra):
        """Run a playbook on the fleet -> its figures (wall, controller CPU, peak RSS, the hosts' CPU)."""
        argv = [str(VENV_BIN / "ansible-playbook"), "-i", str(self.inventory), str(book),
                "--forks", str(self.args.forks)] + list(extra)
        hosts0 = simfleet.hosts_cpu(self.fleet)
        offset = self.fleet.journal.stat().st_size
        timeline = self.dir / ("%s.timeline.jsonl" % name) if self.args.timeline else None
        proc = run_playbook(argv, self.dir / ("%s.log" % name), "%s (%d hosts)" % (book.name, self.n),
                            timeline=timeline)
        hosts_cpu = simfleet.hosts_cpu(self.fleet) - hosts0
        fig = {"wall_s": round(proc.wall, 2), "cpu_s": round(proc.cpu, 2), "cpu_ansible_s": round(proc.cpu_ansible, 2),
               "cpu_ssh_masters_s": round(proc.cpu_ssh, 2), "ssh_masters_counted": proc.subreaper,
               "cpu_s_per_host": round(proc.cpu / self.n, 3),
               "peak_rss_mib": round(proc.peak_rss_kib / 1024, 1),
               "peak_rss_with_ssh_masters_mib": round(proc.peak_rss_with_masters_kib / 1024, 1),
               "peak_pss_mib": round(proc.peak_pss_kib / 1024, 1),
               "peak_pss_with_ssh_masters_mib": round(proc.peak_pss_with_masters_kib / 1024, 1),
               "rss_samples": proc.rss_samples, "hosts_cpu_s": round(hosts_cpu, 2),
               "hosts_cpu_s_per_host": round(hosts_cpu / self.n, 3),
               "changed": sum(r["changed"] for r in proc.recap.values()),
               "recap_hosts": len(proc.recap)}
        log("%d hosts, %s: %.1f s, controller CPU %.1f s (%.3f s per host), peak %.0f MiB with ssh masters, "
            "hosts' CPU %.1f s" % (self.n, name, proc.wall, proc.cpu, proc.cpu / self.n,
                                   fig["peak_rss_with_ssh_masters_mib"], hosts_cpu))
        if proc.timeline is not None:
            fig["timeline"] = proc.timeline
            for line in _timeline.table(proc.timeline, self.n):
                log("  " + line)
        return fig, simfleet.events(self.fleet, offset)

    def check(self, ok, what):
        if not ok:
            self.problems.append("%d hosts: %s" % (self.n, what))
            log("CHECK FAILED: %s" % what)
        return ok

    def verify_booted(self, digest, label):
        wrong = [h for h in self.names if simfleet.booted_digest(self.fleet, h) != digest]
        self.check(not wrong, "%s: %d hosts not booted on %s (%s)" % (label, len(wrong), digest[:19],
                                                                         ", ".join(wrong[:5])))
        return not wrong

    def report(self, path, label):
        data = json.loads(Path(path).read_text())
        rows = data.get("hosts") or []
        hosts = [r["host"] for r in rows]
        self.check(sorted(hosts) == sorted(self.names) and len(hosts) == len(set(hosts)),
                   "%s: the report's rows (%d) are not the fleet's hosts (%d)" % (label, len(hosts), self.n))
        return data

    def run(self):
        a = self.args
        log("%d hosts: fleet up in %s" % (self.n, self.fleet.state))
        info = simfleet.up(self.fleet, self.n, a.pools, a.rate, a.boot_spread, a.seed,
                           base_image=lambda reg: simfleet.base_image(reg, a.base_mb), timeout=max(120, self.n))
        self.names = [h["name"] for h in info["hosts"]]
        self.inventory = self.dir / "hosts.yml"
        # --control-persist: ssh's own arguments as Ansible's default, with a longer ControlPersist (a -o later on
        # the command line, in ansible_ssh_common_args, would not override the first).
        ssh = {"ansible_ssh_args": "-C -o ControlMaster=auto -o ControlPersist=%ds" % a.control_persist} \
            if a.control_persist else None
        self.pools = simfleet.write_inventory(self.fleet, self.inventory, a.budget, extra_vars=ssh)
        self.budgets = {pool: budget_of(a.budget, len(names)) for pool, names in self.pools.items()}
        v1 = simfleet._simregistry.lookup("%s@%s" % (simfleet.IMAGE_NAME, info["base"]), str(self.fleet.registry))
        base_layers = [(l["digest"], l["size"]) for l in v1["layers"]]
        v2 = simfleet.image(self.fleet.registry, "2.0", base_layers + [simfleet.layer("v2-%s" % a.stamp, a.size_mb)])
        v2n = simfleet.image(self.fleet.registry, "2.1", base_layers + [simfleet.layer("v2n-%s" % a.stamp, a.size_mb)])
        target = "%s@%s" % (simfleet.IMAGE_NAME, v2["digest"])
        out = {"n": self.n, "up_s": info["up_s"], "pools": {p: len(h) for p, h in self.pools.items()},
               "budgets": self.budgets, "v1": v1["digest"], "v2": v2["digest"], "v2_naive": v2n["digest"],
               "host_processes_idle": simfleet.host_processes(self.fleet)}
        steps = a.only
        if "rollout" in steps:
            fig, ev = self.playbook("rollout", ROLLOUT, "-e", "fleetos_rollout_image=%s" % target,
                                    "-e", "fleetos_report_dir=%s" % (self.dir / "rollout"))
            report = self.report(self.dir / "rollout" / "rollout-report.json", "rollout")
            rows = report["hosts"]
            self.check(all(r["status"] == "activated" for r in rows),
                       "rollout: hosts not activated: %s" % ", ".join(
                           "%s=%s" % (r["host"], r["status"]) for r in rows if r["status"] != "activated")[:300])
            self.verify_booted(v2["digest"], "after the rollout")
            spans = reboot_spans(ev)
            over = over_budget(spans, self.pools, self.budgets)
            self.check(not over, "rollout: pools over budget in the journal: %s" % over)
            stages = [r["staged_at"] - r["stage_start"] for r in rows
                      if r.get("stage_start") is not None and r.get("staged_at") is not None]
            slowest = max(stages) if stages else 0.0
            per_host = {}
            for node, start, end in spans:
                per_host[node] = per_host.get(node, 0.0) + end - start
            pooled = pooled_floor(slowest, {p: {h: per_host[h] for h in names if h in per_host}
                                            for p, names in self.pools.items()}, self.budgets)
            fig.update({
                "result": report.get("result"), "counts": report.get("counts"),
                "reboots": len(spans), "max_down_per_pool": {p: max_down([s for s in spans if s[0] in set(h)])
                                                             for p, h in self.pools.items()},
                "max_down_fleet": max_down(spans), "stage_s": {"min": round(min(stages), 2),
                                                               "median": round(statistics.median(stages), 2),
                                                               "max": round(slowest, 2)} if stages else None,
                "reboot_s": {"min": round(min(per_host.values()), 2),
                             "median": round(statistics.median(per_host.values()), 2),
                             "max": round(max(per_host.values()), 2)} if per_host else None,
                "pooled_floor_s": round(pooled["wall_s"], 2), "pooled_exact": pooled["exact"],
                "pooled_bottleneck": pooled["bottleneck"],
                "over_pooled_floor": round(fig["wall_s"] / pooled["wall_s"], 3) if pooled["wall_s"] else None,
                "overhead_s_per_host": round((fig["wall_s"] - pooled["wall_s"]) / self.n, 3),
                "ssh_masters_after": count_ssh_children(),
            })
            out["rollout"] = fig
        if "rerun" in steps:
            fig, ev = self.playbook("rerun", ROLLOUT, "-e", "fleetos_rollout_image=%s" % target,
                                    "-e", "fleetos_report_dir=%s" % (self.dir / "rerun"))
            report = self.report(self.dir / "rerun" / "rollout-report.json", "rerun")
            fig["reboots"] = sum(1 for e in ev if e["event"] == "reboot")
            fig["counts"] = report.get("counts")
            self.check(fig["reboots"] == 0, "rerun: %d reboots" % fig["reboots"])
            out["rerun"] = fig
        if "plan" in steps:
            fig, _ = self.playbook("plan", PLAN, "-e", "fleetos_rollout_image=%s" % target,
                                   "-e", "fleetos_report_dir=%s" % (self.dir / "plan"))
            out["plan"] = fig
        if "status" in steps:
            fig, _ = self.playbook("status", STATUS, "-e", "fleetos_report_dir=%s" % (self.dir / "status"))
            out["status"] = fig
        if "rollback" in steps:
            fig, ev = self.playbook("rollback", ROLLBACK, "-e", "fleetos_rollback_from=%s" % v2["digest"],
                                    "-e", "fleetos_report_dir=%s" % (self.dir / "rollback"))
            spans = reboot_spans(ev)
            over = over_budget(spans, self.pools, self.budgets)
            self.check(not over, "rollback: pools over budget in the journal: %s" % over)
            fig["reboots"] = len(spans)
            self.verify_booted(v1["digest"], "after the rollback")
            out["rollback"] = fig
        if "onetask" in steps:
            fig, _ = self.playbook("onetask", ONE_TASK)
            out["onetask"] = fig
        if "naive" in steps:
            fig, ev = self.playbook("naive", NAIVE, "-e",
                                    "bench_naive_ref=ostree-unverified-registry:%s@%s" % (simfleet.IMAGE_NAME,
                                                                                        v2n["digest"]))
            fig["reboots"] = len(reboot_spans(ev))
            fig["max_down_fleet"] = max_down(reboot_spans(ev))
            self.verify_booted(v2n["digest"], "after the naive rollout")
            out["naive"] = fig
        return out

    def down(self):
        try:
            simfleet.down(self.fleet)
        except simfleet.SimError as exc:
            self.problems.append("%d hosts: down: %s" % (self.n, exc))
        _reap_adopted()


def count_ssh_children():
    """How many ssh processes are our children now (the ControlPersist masters we adopted)."""
    me = os.getpid()
    return sum(1 for ppid, comm in parents().values() if ppid == me and comm == "ssh")


def show(result):
    s = result["settings"]
    print("bench/scale.py  %s" % result["timestamp"])
    print("settings: sizes %s, %d pools, budget %s of each pool, forks %d, boots %g-%g s (seed %d), links %s, "
          "+%d MB layer, %d CPUs, ssh ControlPersist %d s" % (
              ",".join(map(str, s["sizes"])), s["pools"], s["budget"], s["forks"], s["boot_spread_s"][0],
              s["boot_spread_s"][1], s["seed"], s["rate"], s["size_mb"], s["cpus"], s.get("control_persist_s", 60)))
    for n, size in sorted(result["sizes"].items(), key=lambda kv: int(kv[0])):
        print("%s hosts (up in %.1f s; budgets %s)" % (n, size["up_s"], sorted(set(size["budgets"].values()))))
        for step in STEPS:
            fig = size.get(step)
            if not fig:
                continue
            extra = ""
            if step == "rollout":
                extra = "  pooled floor %.1f s, ratio %.3f, stage max %.1f s, %d reboots, max down per pool %d" % (
                    fig["pooled_floor_s"], fig["over_pooled_floor"] or 0, (fig["stage_s"] or {}).get("max", 0),
                    fig["reboots"], max(fig["max_down_per_pool"].values() or [0]))
            print("  %-8s %7.1f s  controller CPU %6.1f s (%.3f s/host; ssh masters %.1f s)  peak RSS %5.0f MiB "
                  "(%5.0f with ssh masters), PSS %5.0f MiB (%5.0f)  hosts' CPU %6.1f s (%.3f s/host)%s"
                  % (step, fig["wall_s"], fig["cpu_s"], fig["cpu_s_per_host"], fig["cpu_ssh_masters_s"],
                     fig["peak_rss_mib"], fig["peak_rss_with_ssh_masters_mib"], fig.get("peak_pss_mib", 0),
                     fig.get("peak_pss_with_ssh_masters_mib", 0), fig["hosts_cpu_s"],
                     fig["hosts_cpu_s_per_host"], extra))
    for problem in result["problems"]:
        print("problem : %s" % problem)
    if result.get("summary"):
        print(result["summary"])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", default="250,1000", help="comma-separated fleet sizes (250,1000)")
    parser.add_argument("--forks", type=int, default=50)
    parser.add_argument("--pools", type=int, default=10)
    parser.add_argument("--budget", default="10%", help="fleetos_pool_max_unavailable of every pool (10%%)")
    parser.add_argument("--boot-spread", type=parse_spread, default=(40.0, 90.0), metavar="A-B",
                        help="each reboot's down time, drawn from [A, B] seconds (40-90)")
    parser.add_argument("--seed", type=int, default=15)
    parser.add_argument("--rate", default="80mbit", help="each host's link rate for its stage (80mbit)")
    parser.add_argument("--size-mb", type=int, default=50, help="the layer v2 adds (50)")
    parser.add_argument("--base-mb", type=int, default=800, help="v1's one layer, on every host already (800)")
    parser.add_argument("--control-persist", type=int, default=0, metavar="SECONDS",
                        help="the ssh masters' ControlPersist (default: Ansible's, 60 s)")
    parser.add_argument("--naive", action="store_true", help="also bench/naive-rollout.yml after the rollback")
    parser.add_argument("--timeline", action="store_true",
                        help="each run's timeline: where its time and CPU went, play by play (bench/_timeline.py)")
    parser.add_argument("--only", default=",".join(s for s in STEPS if s != "naive"),
                        help="the steps, in their order: %s (default all but naive)" % ",".join(STEPS))
    parser.add_argument("--state", default="/tmp/simfleet-scale", help="the fleets' state (one directory per size)")
    args = parser.parse_args()
    try:
        sizes = sorted({int(x) for x in args.hosts.split(",") if x.strip()})
    except ValueError:
        sys.exit("bench/scale.py: --hosts takes sizes such as 250,1000")
    args.only = [s.strip() for s in args.only.split(",") if s.strip()]
    if args.naive and "naive" not in args.only:
        args.only.append("naive")
    unknown = [s for s in args.only if s not in STEPS]
    if unknown or not sizes or min(sizes) < 1 or args.forks < 1:
        sys.exit("bench/scale.py: steps are %s; sizes and forks at least 1" % ",".join(STEPS))
    if os.geteuid() != 0:
        sys.exit("bench/scale.py: the simulated fleet needs root")
    args.stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    run_dir = RESULTS / ("scale-%s" % args.stamp)
    run_dir.mkdir(parents=True, exist_ok=True)
    result = {"timestamp": args.stamp, "settings": {
        "sizes": sizes, "pools": args.pools, "budget": args.budget, "forks": args.forks,
        "boot_spread_s": list(args.boot_spread), "seed": args.seed, "rate": args.rate, "size_mb": args.size_mb,
        "base_mb": args.base_mb, "steps": args.only, "rss_interval_s": RSS_INTERVAL,
        "cpus": len(os.sched_getaffinity(0)), "nice": os.nice(0), "control_persist_s": args.control_persist or 60},
        "sizes": {}, "problems": []}
    error = None
    for n in sizes:
        size = Size(args, n, run_dir)
        try:
            result["sizes"][str(n)] = size.run()
        except (BenchError, simfleet.SimError) as exc:
            error = str(exc)
        except Exception:  # noqa: BLE001 - a bug in the bench: take the fleet down, then show it
            import traceback
            error = traceback.format_exc()
        finally:
            size.down()
        result["problems"] += size.problems
        if error:
            result["problems"].append("%d hosts: %s" % (n, error.strip().splitlines()[-1] if error else ""))
            print("bench/scale.py: error: %s" % error, file=sys.stderr)
            break
    done = {int(n): s for n, s in result["sizes"].items() if "rollout" in s and "rerun" in s}
    result["summary"] = summary_line(done) if done else None
    path = RESULTS / ("scale-%s.json" % args.stamp)
    path.write_text(json.dumps(result, indent=2) + "\n")
    show(result)
    print("json    : %s (logs and reports: %s)" % (path.relative_to(REPO), run_dir.relative_to(REPO)))
    return 1 if error or result["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
