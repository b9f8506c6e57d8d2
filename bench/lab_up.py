#!/usr/bin/env python3
"""Benchmark: seconds for `fleetlab up --nodes N` from nothing, and for a converging re-run.

Prints figures; it is not a pass/fail test. It needs the lab to be down (it refuses to
take down a running lab unless --replace is given) and leaves it down afterwards.

    bench/lab_up.py --nodes 20
"""

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FLEETLAB = REPO / "lab" / "fleetlab"


def fleetlab(*args):
    subprocess.run([str(FLEETLAB)] + [str(a) for a in args], check=True,
                   stdout=subprocess.DEVNULL)


def timed(*args):
    start = time.monotonic()
    fleetlab(*args)
    return time.monotonic() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=20)
    parser.add_argument("--replace", action="store_true", help="take a running lab down first")
    args = parser.parse_args()
    if (REPO / ".lab" / "lab.json").exists():
        if not args.replace:
            sys.exit("bench/lab_up.py: a lab is up; pass --replace to take it down first")
        fleetlab("down")
    cold = timed("up", "--nodes", args.nodes)
    warm = timed("up", "--nodes", args.nodes)
    rss = 0
    for pid_file in (REPO / ".lab" / "nodes").glob("*/init.pid"):
        pid = pid_file.read_text().strip()
        for line in Path("/proc/%s/status" % pid).read_text().splitlines():
            if line.startswith("VmRSS:"):
                rss += int(line.split()[1])
    down = timed("down")
    print(json.dumps({
        "nodes": args.nodes,
        "up_cold_seconds": round(cold, 2),
        "up_converge_seconds": round(warm, 2),
        "down_seconds": round(down, 2),
        "sshd_pid1_rss_kib_total": rss,
        "cpus": len(__import__("os").sched_getaffinity(0)),
    }, indent=2))


if __name__ == "__main__":
    main()
