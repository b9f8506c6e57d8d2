# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Soft reboots against full ones on the same fleet: `bench/rollout.py --soft-reboot auto`.

On N bootc lab nodes of the bench's own (`fleetlab claim bench-soft --backend bootc`), in two pools of
--budget slots, every node on the lab base image v1, links shaped (--rate) and boots delayed (--boot-delay,
the lab's soft reboot taking `fleetlab up --userspace-share` of it, 0.35 by default: docs/rollout.md,
"Soft reboots"):

1. rollout.yml to v2 (v1 and a layer, the same kernel) with fleetos_rollout_soft_reboot auto: every host
   soft-reboots; back to v1 (rollback.yml, a full reboot);
2. rollout.yml to v3 (built the same way) with never: every host reboots fully; back to v1;
3. rollout.yml with auto where the image of pool bench-b changes the kernel (v4k, `fleetlab image build
   --kernel`) and that of bench-a does not (v4): bench-a soft-reboots, bench-b reboots fully; back to v1.

For each: the rollout's wall time, and each host's disruption (the report's disruption_s: from its reboot
command to the host back) and reboot kind. Ends with
`soft-reboot: rollout soft S s full F s ratio R` (R = S / F).
"""

from __future__ import annotations

import datetime
import json
import statistics
import uuid

from _lab import (  # noqa: E402  (what the lab benches share)
    BASE, RESULTS, ROLLBACK, ROLLOUT, STATE, VENV_BIN, BenchError, Journal, bench_nodes, best_effort, check_on,
    fleetlab, lab_boot_delay, lab_info, log, run_bench, run_playbook, slow_boot, write_inventory)

CLAIM = "bench-soft"
REPOSITORY = "fleetos/bench-soft"
OTHER_KERNEL = "6.9.0-benchsoft"


class SoftBench:
    def __init__(self, args):
        self.args = args
        if not args.nodes:
            fleetlab("up", "--nodes", "10")
        owner = CLAIM if args.count == 12 else "%s-%d" % (CLAIM, args.count)
        self.nodes = bench_nodes(args.nodes, owner, "--count", args.count, "--backend", "bootc")
        self.lab_delay = lab_boot_delay()
        self.fault = round(max(0.0, float(args.boot_delay) - self.lab_delay), 3)
        self.stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
        self.run_dir = RESULTS / ("soft-reboot-%s" % self.stamp)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.inventory = self.run_dir / "hosts.yml"
        self.forks = args.forks or len(self.nodes)
        self.pools = {"bench-a": self.nodes[0::2], "bench-b": self.nodes[1::2]}
        self.rolled_out = []

    def _inventory(self, soft_reboot, images=None):
        """The bench inventory: two pools, their soft-reboot choice, and each pool's image (fleetos_rollout_image)."""
        groups = {}
        for pool, names in self.pools.items():
            group_vars = {"fleetos_pool": pool, "fleetos_pool_max_unavailable": self.args.budget,
                          "fleetos_rollout_soft_reboot": soft_reboot}
            if images:
                group_vars["fleetos_rollout_image"] = images[pool][0]
            groups[pool.replace("-", "_")] = (group_vars, names)
        write_inventory(self.inventory, groups, parent="bench_soft")

    def _image(self, name, *extra):
        proc = fleetlab("image", "build", "%s:%s-%s" % (REPOSITORY, self.tag, name), "--from", BASE,
                        "--size-mb", self.args.size_mb, "--json", *extra)
        record = json.loads(proc.stdout)
        return "%s/%s:%s-%s" % (lab_info()["registry"], REPOSITORY, self.tag, name), record["digest"]

    def _playbook(self, book, name, *extra):
        argv = [str(VENV_BIN / "ansible-playbook"), "-i", str(self.inventory), str(book), "--forks", str(self.forks),
                "-e", "fleetos_report_dir=%s" % (self.run_dir / name)] + list(extra)
        proc = run_playbook(argv, self.run_dir / ("%s.log" % name), book.name)
        log("%s: %.1f s" % (name, proc.wall))
        return proc

    def _rollout(self, name, soft_reboot, images):
        self._inventory(soft_reboot, images)
        journal = Journal()
        proc = self._playbook(ROLLOUT, name)
        events = journal.events(set(self.nodes))
        report = json.loads((self.run_dir / name / "rollout-report.json").read_text())
        self.rolled_out.extend(sorted(set(digest for _ref, digest in images.values())))
        bad = [row["host"] for row in report["hosts"] if row["status"] != "activated"]
        if bad:
            raise BenchError("%s: hosts not activated: %s" % (name, ", ".join(bad)))
        rows = report["hosts"]
        downs = [row["disruption_s"] for row in rows if row.get("disruption_s") is not None]
        kinds = dict((row["host"], row["activation"]) for row in rows)
        return {"wall_s": round(proc.wall, 1), "cpu_s": round(proc.cpu, 2),
                "kinds": kinds, "counts": report.get("activations"),
                "disruption_s": {"min": min(downs), "median": statistics.median(downs), "max": max(downs),
                                 "per_host": dict((row["host"], row.get("disruption_s")) for row in rows)},
                "reboot_events": dict((e["node"], e.get("kind")) for e in events if e["event"] == "reboot")}

    def _roll_back(self):
        """Roll back the hosts booted on each digest rolled out (full reboots)."""
        for digest in self.rolled_out:
            self._playbook(ROLLBACK, "restore-%s" % digest[7:19], "-e", "fleetos_rollback_from=%s" % digest)
        self.rolled_out = []

    def _restore(self):
        """Back to v1, without the boot delay, and the delay on again."""
        slow_boot(self.nodes, self.fault, False)
        self._roll_back()
        check_on(self.nodes, self.base_digest, "after a rollout")
        slow_boot(self.nodes, self.fault, True)

    def run(self):
        a = self.args
        self.base_digest = json.loads((STATE / "images" / "built.json").read_text())[BASE]["digest"]
        for node in self.nodes:
            fleetlab("fault", node, "clear")
        check_on(self.nodes, self.base_digest, "before the bench")
        self.tag = "%s-%s" % (self.stamp, uuid.uuid4().hex[:6])
        log("building v2, v3, v4 (%d MB layer each) and v4k (another kernel)" % a.size_mb)
        v2, v3, v4 = self._image("v2"), self._image("v3"), self._image("v4")
        v4k = self._image("v4k", "--kernel", OTHER_KERNEL)
        fleetlab("shape", a.rate, "--nodes", ",".join(self.nodes))
        slow_boot(self.nodes, self.fault, True)
        log("rollout v1 -> v2, soft reboots (auto)")
        soft = self._rollout("soft", "auto", {"bench-a": v2, "bench-b": v2})
        self._restore()
        log("rollout v1 -> v3, full reboots (never)")
        full = self._rollout("full", "never", {"bench-a": v3, "bench-b": v3})
        self._restore()
        log("rollout v1 -> v4 (bench-a) and v4k (bench-b, another kernel), auto")
        mixed = self._rollout("kernel-half", "auto", {"bench-a": v4, "bench-b": v4k})
        return {
            "timestamp": self.stamp,
            "settings": {"nodes": self.nodes, "pools": self.pools, "budget_per_pool": a.budget,
                         "boot_delay_s": a.boot_delay, "lab_boot_delay_s": self.lab_delay,
                         "slow_boot_fault_s": self.fault,
                         "userspace_share": (lab_info() or {}).get("userspace_share", 0.35), "rate": a.rate,
                         "size_mb": a.size_mb, "forks": self.forks},
            "soft": soft, "full": full, "kernel_half": mixed,
            "ratio": round(soft["wall_s"] / full["wall_s"], 3) if full["wall_s"] else None,
        }

    def cleanup(self):
        """Undo the bench's lab settings and put the nodes back on v1 -> [problems]."""
        return best_effort(lambda: slow_boot(self.nodes, self.fault, False),
                           lambda: fleetlab("shape", "off", "--nodes", ",".join(self.nodes)), self._roll_back)


def show(result):
    s = result["settings"]
    print("bench/rollout.py --soft-reboot auto  %s" % result["timestamp"])
    pools = ", ".join("%s=%d" % (pool, len(names)) for pool, names in s["pools"].items())
    print("settings: %d bootc nodes (%s..%s), pools %s, budget %d, boot delay %s s (a soft reboot: %s of it), "
          "links %s, +%d MB layer" % (len(s["nodes"]), s["nodes"][0], s["nodes"][-1], pools, s["budget_per_pool"],
                                      s["boot_delay_s"], s["userspace_share"], s["rate"], s["size_mb"]))
    for name in ("soft", "full", "kernel_half"):
        run = result[name]
        d = run["disruption_s"]
        print("%-11s: rollout %6.1f s, disruption per host min %.1f / median %.1f / max %.1f s, reboots %s"
              % (name, run["wall_s"], d["min"], d["median"], d["max"], run["counts"]))


def summary_line(result):
    """The bench's last line, for a script: ``soft-reboot: rollout soft S s full F s ratio R``."""
    return "soft-reboot: rollout soft %.1f s full %.1f s ratio %.3f" % (
        result["soft"]["wall_s"], result["full"]["wall_s"], result["ratio"])


def main(args):
    """Run the bench (bench/rollout.py --soft-reboot auto) -> exit status; its summary line comes last."""
    bench = SoftBench(args)
    shown = {}

    def remember(result):
        show(result)
        shown["line"] = summary_line(result)

    status_code = run_bench(bench, "soft-reboot", remember, bench.cleanup, logs="logs and reports")
    if "line" in shown:
        print(shown["line"])
    return status_code
