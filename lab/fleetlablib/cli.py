"""fleetlab: a real image-mode fleet on one machine (the command line)."""

import argparse
import concurrent.futures
import contextlib
import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path

from . import derived, fleetlock, images, inventory, layers, net, nodes, registry, signing
from .common import (
    BASE_IMAGE,
    HOST_IP,
    HOST_LINK,
    MAX_NODES,
    SUBNET,
    LabError,
    StateLock,
    inventory_dir,
    journal,
    node_index,
    node_ip,
    node_name,
    read_journal,
    read_json,
    run,
    state_dir,
)


class Parser(argparse.ArgumentParser):
    def error(self, message):
        raise LabError(message)


def _pool_for(index):
    return "infra" if index % 3 == 0 else "workers"


def _labels_for(index, pool):
    role = "infra" if pool == "infra" else "worker"
    return {
        "fleetos.io/pool": pool,
        "node-role.kubernetes.io/%s" % role: "",
        "topology.kubernetes.io/zone": "zone-%s" % "abc"[(index - 1) % 3],
        "fleetos.io/lab-index": str(index),
    }


def _require_root():
    if os.geteuid() != 0:
        raise LabError("fleetlab must run as root: it creates network namespaces and mounts")


def cmd_up(args):
    _require_root()
    if not 1 <= args.nodes <= MAX_NODES:
        raise LabError("--nodes %d is out of range 1..%d" % (args.nodes, MAX_NODES))
    if args.registry_port is not None and not 1 <= args.registry_port <= 65535:
        raise LabError("--registry-port %d is not a TCP port" % args.registry_port)
    share = getattr(args, "userspace_share", None)
    if share is not None and not 0 <= share <= 1:
        raise LabError("--userspace-share %s is out of range 0..1" % share)
    if args.disk_image:
        images.parse_name(args.disk_image, "--disk-image")
    node_backend = getattr(args, "backend", None)
    if node_backend not in (None,) + nodes.BACKENDS:
        raise LabError("unknown --backend %r: choose one of %s" % (node_backend, ", ".join(nodes.BACKENDS)))
    with_python = bool(getattr(args, "with_python", False))
    # Before anything changes: the lab's addresses must be free to route into this lab.
    net.check_route_free()
    started = time.time()
    with StateLock():
        lab = read_json(state_dir() / "lab.json", {"nodes": {}})
        if args.registry_port is not None and lab.get("registry_port") not in (None, args.registry_port):
            raise LabError("the lab already runs its registry on port %s; run 'fleetlab down' first"
                           % lab["registry_port"])
        state_dir().mkdir(parents=True, exist_ok=True)
        net.ensure_lab_network()
        address = registry.ensure(args.registry_port)
        fleetlock.start()
        signing.ensure_keys()
        signing.start()
        lab["registry"] = address
        lab["network"] = net.info()
        lab["registry_port"] = registry.config()["port"]
        if args.boot_delay is not None:
            lab["boot_delay"] = args.boot_delay
        lab.setdefault("boot_delay", 0)
        if share is not None:
            lab["userspace_share"] = share
        records = images.built()
        if BASE_IMAGE not in records:
            print("fleetlab: building the base image %s" % BASE_IMAGE, flush=True)
            records[BASE_IMAGE] = images.build(BASE_IMAGE, version="1.0")
        base = records[BASE_IMAGE]
        disk = None
        if args.disk_image:
            key = "%s:%s" % images.parse_name(args.disk_image, "--disk-image")
            if key not in records:
                raise LabError("--disk-image %s was not built by 'fleetlab image build'" % args.disk_image)
            disk = records[key]
        lab["base_image_ref"] = images.registry_ref(base)
        nodes.ensure_controller_key()
        nodes.save_lab(lab)
        wanted = [node_name(i) for i in range(1, args.nodes + 1)]
        new = [n for n in wanted if n not in lab["nodes"]]
        for name in new:
            index = node_index(name)
            pool = _pool_for(index)
            lab["nodes"][name] = {"index": index, "address": node_ip(index), "pool": pool,
                                  "labels": _labels_for(index, pool),
                                  "disk_image": bool(disk)}
            if node_backend == "bootc":
                lab["nodes"][name]["backend"] = "bootc"
            if with_python:
                lab["nodes"][name]["python"] = True
        nodes.save_lab(lab)

        def _create(name):
            info = lab["nodes"][name]
            record = disk if (disk and name in new) else base
            nodes.create(name, info["index"], record, disk_image=bool(disk and name in new),
                         node_backend=info.get("backend"), with_python=bool(info.get("python")))
            nodes.start(name)
            return name

        with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
            list(pool.map(_create, sorted(lab["nodes"])))
        host_keys = {}
        for name in lab["nodes"]:
            pub = (nodes.node_dir(name) / "ssh" / "host_key.pub").read_text().split()
            host_keys[name] = "%s %s" % (pub[0], pub[1])
        inventory.write_known_hosts(lab, host_keys)
        target = inventory.write(lab)
        for name in sorted(lab["nodes"]):
            nodes.wait_ready(name, timeout=60 + 2 * len(lab["nodes"]))
        journal("lab_up", nodes=len(lab["nodes"]), seconds=round(time.time() - started, 2))
    print("fleetlab: %d nodes up in %.1fs; registry %s; inventory %s"
          % (len(lab["nodes"]), time.time() - started, address, target))
    return 0


def cmd_claim(args):
    """Nodes that one user (a test module, a molecule scenario) has to itself.

    Made after every node the lab has, and after node --after (the shared tests use
    node01-node10), the first time; remembered per owner and disk image in
    <state>/owned-nodes.json, so that the next claim returns the same nodes.
    """
    _require_root()
    if not 1 <= args.count <= MAX_NODES:
        raise LabError("--count %d is out of range 1..%d" % (args.count, MAX_NODES))
    if args.disk_image:
        images.parse_name(args.disk_image, "--disk-image")
    node_backend = getattr(args, "backend", None)
    if node_backend not in (None,) + nodes.BACKENDS:
        raise LabError("unknown --backend %r: choose one of %s" % (node_backend, ", ".join(nodes.BACKENDS)))
    key = "%s %s" % (args.owner, args.disk_image or "")
    if node_backend == "bootc":
        key += " bootc"
    if args.with_python:
        key += " python"
    with StateLock("claims.lock"):
        path = state_dir() / "owned-nodes.json"
        owned = read_json(path, {})
        lab = read_json(state_dir() / "lab.json", {"nodes": {}})
        names = owned.get(key)
        if not (names and len(names) == args.count and all(n in lab["nodes"] for n in names)):
            have = len(lab["nodes"])
            first = max(have, args.after)
            with contextlib.redirect_stdout(sys.stderr):
                if first > have:
                    cmd_up(argparse.Namespace(nodes=first, boot_delay=None, registry_port=None, disk_image=None))
                cmd_up(argparse.Namespace(nodes=first + args.count, boot_delay=None, registry_port=None,
                                          disk_image=args.disk_image, backend=node_backend,
                                          with_python=args.with_python))
            lab = read_json(state_dir() / "lab.json", {"nodes": {}})
            names = [node_name(i) for i in range(first + 1, first + args.count + 1)]
            for name in names:
                if (bool(lab["nodes"][name].get("disk_image")) != bool(args.disk_image)
                        or lab["nodes"][name].get("backend") != ("bootc" if node_backend == "bootc" else None)
                        or bool(lab["nodes"][name].get("python")) != args.with_python):
                    raise LabError("%s was added by another fleetlab command at the same time; claim again" % name)
            owned[key] = names
            path.write_text(json.dumps(owned, indent=2, sort_keys=True) + "\n")
    print(json.dumps(names) if args.json else " ".join(names))
    return 0


def cmd_down(args):
    _require_root()
    with StateLock():
        lab = read_json(state_dir() / "lab.json", {"nodes": {}})
        names = set(lab.get("nodes", {}))
        if nodes.nodes_dir().exists():
            names.update(p.name for p in nodes.nodes_dir().iterdir() if p.is_dir())
        for name in sorted(names):
            nodes.stop(name)
        registry.stop()
        fleetlock.stop()
        signing.stop()
        net.remove_host_link()
        for ns in net.lab_netns_names():
            net.delete_netns(ns)
        for name in sorted(names):
            nodes.remove_tree(nodes.node_dir(name) / "sysroot")
            nodes.remove_tree(nodes.node_dir(name) / "sysroot.new")
    leftovers = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()
                 if line.split()[4].startswith(str(state_dir()))]
    for mount in sorted(leftovers, reverse=True):
        run(["umount", "-l", mount], check=False)
    nodes.remove_tree(state_dir())
    try:
        (inventory_dir() / "hosts.yml").unlink()
    except FileNotFoundError:
        pass
    print("fleetlab: down; nothing left behind")
    return 0


def cmd_status(args):
    lab = read_json(state_dir() / "lab.json")
    if not lab:
        raise LabError("the lab is not up: run 'fleetlab up'")
    names = sorted(lab["nodes"])
    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        rows = list(pool.map(nodes.node_status, names))
    if args.json:
        print(json.dumps({"registry": lab.get("registry"), "registry_running": registry.running(),
                          "network": dict(net.info(), leaked_packets=net.leaked_packets()),
                          "nodes": rows}, indent=2))
        return 0
    print("registry %s (%s)" % (lab.get("registry"), "running" if registry.running() else "stopped"))
    print("network %s, reached from this machine through %s (%s); packets to lab addresses dropped on their "
          "way out of the machine: %s" % (SUBNET, HOST_LINK, HOST_IP, net.leaked_packets()))
    header = ("NODE", "ADDRESS", "POOL", "STATE", "BOOTED IMAGE", "DIGEST", "VERSION", "STAGED", "BOOTS", "PYTHON")
    table = [header]
    for row in rows:
        booted = row["booted"] or "-"
        if "@" in booted:
            booted = booted.split("@", 1)[0]
        state = row["state"] + (" [%s]" % ",".join(row["faults"]) if row.get("faults") else "")
        table.append((row["node"], row["address"], row["pool"], state, booted,
                      (row["digest"] or "-")[:19], row["version"] or "-",
                      (row["staged"] or "-")[:19], str(row["boots"]), "yes" if row["python"] else "no"))
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    for r in table:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    return 0


def cmd_exec(args):
    _require_root()
    nodes.node_info(args.node)
    argv = list(args.cmd)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        raise LabError("exec needs a command: fleetlab exec NODE -- CMD")
    return subprocess.call(nodes.exec_argv(args.node, argv))


def cmd_image_build(args):
    _require_root()
    sign = (args.sign_key or "lab") if (args.sign or args.sign_key) else None
    if args.sign_key and args.sign_key not in signing.KEYS:
        raise LabError("unknown --sign-key %r: choose one of %s" % (args.sign_key, ", ".join(sorted(signing.KEYS))))
    with StateLock("images.lock"):
        record = images.build(args.name, base=args.base, add_files=args.add_file or [],
                              size_mb=args.size_mb, labels=args.label or [], version=args.version,
                              legacy_oscontainer=args.legacy_oscontainer,
                              sign=sign,
                              multi_arch=args.multi_arch, kernel=args.kernel)
    if args.json:
        print(json.dumps(record, indent=2, sort_keys=True))
    else:
        print(record["digest"])
    return 0


def cmd_image_list(args):
    records = images.built()
    if args.json:
        print(json.dumps(records, indent=2, sort_keys=True))
        return 0
    for key, rec in sorted(records.items()):
        extra = ""
        if rec.get("signed_by"):
            extra += "  signed-by %s" % rec["signed_by"]
        if rec.get("manifests"):
            extra += "  " + " ".join("%s=%s" % kv for kv in sorted(rec["manifests"].items()))
        commit = (rec["commit"] or "(merge)")[:12]  # a derived image's commit is the node's merge commit
        print("%s  %s  %s  commit %s%s" % (key, rec["digest"], rec["version"], commit, extra))
    return 0


def cmd_fault(args):
    _require_root()
    seconds = None
    if args.fault == "slow-boot":
        if args.seconds is None:
            raise LabError("fault slow-boot needs SECONDS: fleetlab fault NODE slow-boot 10")
        try:
            seconds = float(args.seconds)
        except ValueError:
            raise LabError("slow-boot SECONDS %r is not a number" % args.seconds)
    elif args.seconds is not None:
        raise LabError("fault %s takes no SECONDS" % args.fault)
    nodes.set_fault(args.node, args.fault, seconds)
    return 0


def cmd_login(args):
    _require_root()
    password = sys.stdin.readline().rstrip("\n") if args.mode == "password" else None
    for name in args.nodes:
        nodes.node_info(name)
    for name in args.nodes:
        nodes.set_login(name, args.mode, password)
    print("fleetlab: core's sudo on %s: %s" % (", ".join(args.nodes), args.mode))
    return 0


def cmd_agent(args):
    _require_root()
    for name in args.nodes:
        nodes.node_info(name)
    for name in args.nodes:
        nodes.set_agent(name, args.agent, args.state == "on", delay=args.delay, official=args.official,
                        interval=args.interval)
    print("fleetlab: %s %s on %s" % (args.agent, args.state, ", ".join(args.nodes)))
    return 0


def cmd_registry(args):
    _require_root()
    if args.action == "user":
        if not args.user:
            raise LabError("registry user needs NAME (the password is read from stdin)")
        registry.add_user(args.user, sys.stdin.readline().rstrip("\n"))
        print("fleetlab: registry user %s added" % args.user)
        return 0
    if args.user:
        raise LabError("registry %s takes no NAME" % args.action)
    if args.action == "stop":
        registry.stop()
    else:
        registry.start()
    print("fleetlab: registry %s" % ("stopped" if args.action == "stop" else "running at " + registry.address()))
    return 0


def cmd_fleetlock(args):
    _require_root()
    if not (state_dir() / "lab.json").exists():
        raise LabError("the lab is not up: run 'fleetlab up'")
    if args.action == "slots":
        if args.count is None or args.count < 0:
            raise LabError("fleetlock slots needs COUNT, a number >= 0")
        if args.group:
            fleetlock.configure(group=args.group, slots=args.count)
        else:
            fleetlock.configure(default_slots=args.count)
    elif args.action == "reset":
        fleetlock.reset()
    elif args.action == "stop":
        fleetlock.stop()
        journal("fleetlock_stop")
    elif args.action == "start":
        fleetlock.start()
        journal("fleetlock_start")
    status = fleetlock.read_json(fleetlock.fl_dir() / "holders.json", {})
    cfg = fleetlock.read_json(fleetlock.fl_dir() / "config.json", {})
    print(json.dumps({"url": fleetlock.address(), "running": fleetlock.running(), "config": cfg,
                      "holders": status.get("holders", {})}, indent=2, sort_keys=True))
    return 0


def cmd_journal(args):
    for event in read_journal():
        if args.event and event.get("event") != args.event:
            continue
        print(json.dumps(event, sort_keys=True))
    return 0


def cmd_shape(args):
    _require_root()
    lab = read_json(state_dir() / "lab.json")
    if not lab:
        raise LabError("the lab is not up: run 'fleetlab up'")
    names = sorted(lab["nodes"])
    if args.nodes:
        wanted = [n.strip() for n in args.nodes.split(",") if n.strip()]
        for name in wanted:
            nodes.node_info(name)
        names = wanted
    for name in names:
        net.shape_node_link(name, None if args.rate == "off" else args.rate)
    print("fleetlab: %d node links %s" % (len(names), "unshaped" if args.rate == "off" else "shaped to " + args.rate))
    return 0


def build_parser():
    parser = Parser(prog="fleetlab", description="A real image-mode fleet on one machine.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)

    up = sub.add_parser("up", help="start (or converge, or grow) the lab fleet")
    up.add_argument("--nodes", type=int, default=3)
    up.add_argument("--boot-delay", type=float, default=None,
                    help="seconds every reboot takes before the node boots again")
    up.add_argument("--userspace-share", type=float, default=None,
                    help="the share of a boot's delay a soft reboot takes (userspace only; default %s)"
                    % nodes.USERSPACE_SHARE)
    up.add_argument("--registry-port", type=int, default=None)
    up.add_argument("--disk-image", default=None,
                    help="boot new nodes from this lab image's commit with a plain refspec origin")
    up.add_argument("--backend", default=None, choices=list(nodes.BACKENDS),
                    help="the tool that manages the nodes this adds (default rpm-ostree; bootc: installed "
                         "by bootc, with the bootc stand-in)")
    up.add_argument("--with-python", action="store_true",
                    help="give the nodes this adds a Python interpreter (/usr/bin/python3), as RHEL image mode "
                         "has; by default a node has none, as Fedora CoreOS ships")
    up.set_defaults(func=cmd_up)

    claim = sub.add_parser("claim", help="nodes of one owner's own, added after the others once, then reused")
    claim.add_argument("owner", help="who uses the nodes, e.g. a test module")
    claim.add_argument("--count", type=int, default=1)
    claim.add_argument("--disk-image", default=None, help="boot them from this lab image, as --disk-image of up")
    claim.add_argument("--after", type=int, default=10, help="never claim nodes numbered up to this (default 10)")
    claim.add_argument("--backend", default=None, choices=list(nodes.BACKENDS),
                       help="the tool that manages them, as --backend of up")
    claim.add_argument("--with-python", action="store_true", help="with a Python interpreter, as --with-python of up")
    claim.add_argument("--json", action="store_true", help="print the node names as a JSON list")
    claim.set_defaults(func=cmd_claim)

    down = sub.add_parser("down", help="stop everything and remove all lab state")
    down.set_defaults(func=cmd_down)

    status = sub.add_parser("status", help="a table of the nodes")
    status.add_argument("--json", action="store_true")
    status.set_defaults(func=cmd_status)

    ex = sub.add_parser("exec", help="run a command on a node")
    ex.add_argument("node")
    ex.add_argument("cmd", nargs=argparse.REMAINDER)
    ex.set_defaults(func=cmd_exec)

    image = sub.add_parser("image", help="build and list OS images")
    isub = image.add_subparsers(dest="image_command", required=True, parser_class=Parser)
    build = isub.add_parser("build", help="build a bootable OS image and push it to the lab registry")
    build.add_argument("name", help="NAME:TAG, e.g. fleetos/lab-os:1.1")
    build.add_argument("--from", dest="base", default=None, help="base image NAME:TAG (reuses its layers)")
    build.add_argument("--add-file", action="append", metavar="SRC:DEST")
    build.add_argument("--size-mb", type=int, default=0)
    build.add_argument("--label", action="append", metavar="K=V")
    build.add_argument("--version", default=None, help="the version label (default: the tag)")
    build.add_argument("--kernel", default=None, metavar="VERSION",
                       help="replace the image's kernel with one of this version (default: the base's, %s)"
                       % images.KERNEL_VERSION)
    build.add_argument("--legacy-oscontainer", action="store_true",
                       help="build an old-style oscontainer (ostree repo at /srv/repo) instead")
    build.add_argument("--sign", action="store_true",
                       help="sign the image (skopeo --sign-by, lookaside store) and its ostree commit "
                            "with the lab key the nodes trust")
    build.add_argument("--sign-key", default=None, metavar="KEY",
                       help="sign with this lab key instead: lab (trusted) or wrong (untrusted); implies --sign")
    build.add_argument("--multi-arch", action="store_true",
                       help="push an OCI image index: this image (amd64) and an arm64 entry")
    build.add_argument("--json", action="store_true", help="print the whole record")
    build.set_defaults(func=cmd_image_build)
    derived.add_parser(isub)
    layers.add_parser(isub)
    ls = isub.add_parser("list", help="images built by this lab")
    ls.add_argument("--json", action="store_true", help="print every record")
    ls.set_defaults(func=cmd_image_list)

    fault = sub.add_parser("fault", help="inject or clear a node fault")
    fault.add_argument("node")
    fault.add_argument("fault", choices=list(nodes.FAULTS) + ["clear"])
    fault.add_argument("seconds", nargs="?")
    fault.set_defaults(func=cmd_fault)

    login = sub.add_parser("login", help="how the admin user core may use sudo on nodes (a password: on stdin)")
    login.add_argument("nodes", nargs="+", metavar="NODE")
    login.add_argument("mode", choices=list(nodes.LOGIN_MODES))
    login.set_defaults(func=cmd_login)

    agent = sub.add_parser("agent", help="enable (on) or disable (off) an update agent on nodes: the Zincati "
                                         "stand-in or bootc's fetch-and-apply timer")
    agent.add_argument("nodes", nargs="+", metavar="NODE")
    agent.add_argument("agent", choices=sorted(nodes.AGENT_UNITS))
    agent.add_argument("state", choices=["on", "off"])
    agent.add_argument("--delay", type=float, default=None,
                       help="zincati: seconds from its start to its first look at the update graph (default 300)")
    agent.add_argument("--official", default=None,
                       help="zincati: the repository of the stream's official images (default REGISTRY/fleetos/lab-official)")
    agent.add_argument("--interval", type=float, default=None,
                       help="bootc: seconds between two runs of bootc upgrade --apply (default 300)")
    agent.set_defaults(func=cmd_agent)

    reg = sub.add_parser("registry", help="stop or start the lab registry, or add a user (password on stdin)")
    reg.add_argument("action", choices=["stop", "start", "user"])
    reg.add_argument("user", nargs="?", default=None)
    reg.set_defaults(func=cmd_registry)

    fl = sub.add_parser("fleetlock", help="the lab's FleetLock server: status, slots, reset, stop, start")
    fl.add_argument("action", choices=["status", "slots", "reset", "stop", "start"])
    fl.add_argument("count", nargs="?", type=int, default=None)
    fl.add_argument("--group", default=None)
    fl.set_defaults(func=cmd_fleetlock)

    jr = sub.add_parser("journal", help="print the events journal")
    jr.add_argument("--event", default=None)
    jr.set_defaults(func=cmd_journal)

    shape = sub.add_parser("shape", help="shape every node link, e.g. 80mbit, or off")
    shape.add_argument("rate")
    shape.add_argument("--nodes", default=None, help="comma-separated nodes (default: all)")
    shape.set_defaults(func=cmd_shape)

    internal = sub.add_parser("_supervise")
    internal.add_argument("node")
    internal.set_defaults(func=lambda a: nodes.supervise(a.node))
    internal_reg = sub.add_parser("_registry")
    internal_reg.set_defaults(func=lambda a: registry.serve())
    internal_fl = sub.add_parser("_fleetlock")
    internal_fl.set_defaults(func=lambda a: fleetlock.serve())
    internal_sig = sub.add_parser("_sigstore")
    internal_sig.set_defaults(func=lambda a: signing.serve())
    return parser


# What a shell reports for a command ended by SIGPIPE (128 + 13), e.g. under pipefail.
EXIT_BROKEN_PIPE = 141


def _stdout_reader_gone():
    """True when nothing reads our stdout any more (a pipe whose reader has exited, as
    after `fleetlab status | head -1`): poll reports POLLERR on such a pipe's write end."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & (select.POLLERR | select.POLLHUP) for _fd, events in poller.poll(0))
    except (OSError, ValueError, AttributeError):
        return False


def _quiet_broken_pipe():
    """Stop writing to a stdout nobody reads: point fd 1 at /dev/null, so that the final
    flush at exit neither fails nor prints 'Exception ignored ... BrokenPipeError'."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    finally:
        os.close(devnull)
    return EXIT_BROKEN_PIPE


def main(argv=None):
    try:
        args = build_parser().parse_args(argv)
        if args.command == "exec":
            nodes.node_info(args.node)
        rc = args.func(args) or 0
        # Output to a pipe is buffered: write it now, where a closed pipe can be handled.
        sys.stdout.flush()
        return rc
    except BrokenPipeError:
        # The reader of our output went away (`fleetlab journal | head -1`): end quietly,
        # as a command killed by SIGPIPE does. A broken pipe that is not stdout is a bug.
        if not _stdout_reader_gone():
            raise
        return _quiet_broken_pipe()
    except LabError as exc:
        sys.stderr.write("fleetlab: error: %s\n" % exc)
        return 1
    except KeyboardInterrupt:
        sys.stderr.write("fleetlab: interrupted\n")
        return 130


if __name__ == "__main__":
    sys.exit(main())
