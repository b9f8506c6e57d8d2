"""The lab network: one namespace with a bridge on 198.51.100.0/24, one namespace a node.

Only TEST-NET-2 (198.51.100.0/24) is ever configured, and only inside namespaces the
lab created; nothing touches the machine's own interfaces or routes.
"""

import os

from .common import (
    BRIDGE,
    BRIDGE_IP,
    LAB_NETNS,
    PREFIX_LEN,
    SUBNET_PREFIX,
    LabError,
    node_netns,
    node_veth,
    run,
)


def _check_lab_address(ip):
    if not ip.startswith(SUBNET_PREFIX):
        raise LabError("refusing to configure %s: the lab uses only %s0/24" % (ip, SUBNET_PREFIX))


def netns_exists(name):
    return os.path.exists("/run/netns/" + name)


def ensure_lab_network():
    if not netns_exists(LAB_NETNS):
        run(["ip", "netns", "add", LAB_NETNS])
    run(["ip", "-n", LAB_NETNS, "link", "set", "lo", "up"])
    links = run(["ip", "-n", LAB_NETNS, "-o", "link", "show"]).stdout
    if (" %s:" % BRIDGE) not in links:
        run(["ip", "-n", LAB_NETNS, "link", "add", BRIDGE, "type", "bridge"])
    addrs = run(["ip", "-n", LAB_NETNS, "-o", "-4", "addr", "show", "dev", BRIDGE]).stdout
    if BRIDGE_IP + "/" not in addrs:
        _check_lab_address(BRIDGE_IP)
        run(["ip", "-n", LAB_NETNS, "addr", "add", "%s/%d" % (BRIDGE_IP, PREFIX_LEN), "dev", BRIDGE])
    run(["ip", "-n", LAB_NETNS, "link", "set", BRIDGE, "up"])


def ensure_node_network(name, ip):
    """Create the node's namespace and its veth into the lab bridge (idempotent)."""
    _check_lab_address(ip)
    ns = node_netns(name)
    veth = node_veth(name)
    if not netns_exists(ns):
        run(["ip", "netns", "add", ns])
    run(["ip", "-n", ns, "link", "set", "lo", "up"])
    node_links = run(["ip", "-n", ns, "-o", "link", "show"]).stdout
    if " eth0@" not in node_links and " eth0:" not in node_links:
        # Create the pair inside the lab namespace, then move the node end.
        run(["ip", "-n", LAB_NETNS, "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns])
    run(["ip", "-n", LAB_NETNS, "link", "set", veth, "master", BRIDGE])
    run(["ip", "-n", LAB_NETNS, "link", "set", veth, "up"])
    addrs = run(["ip", "-n", ns, "-o", "-4", "addr", "show", "dev", "eth0"]).stdout
    if ip + "/" not in addrs:
        run(["ip", "-n", ns, "addr", "add", "%s/%d" % (ip, PREFIX_LEN), "dev", "eth0"])
    run(["ip", "-n", ns, "link", "set", "eth0", "up"])


def set_node_link(name, up):
    run(["ip", "-n", node_netns(name), "link", "set", "eth0", "up" if up else "down"])


def shape_node_link(name, rate):
    """Shape the lab side of a node's link (e.g. rate='80mbit'); rate=None removes it."""
    veth = node_veth(name)
    run(["ip", "netns", "exec", LAB_NETNS, "tc", "qdisc", "del", "dev", veth, "root"], check=False)
    if rate:
        run(["ip", "netns", "exec", LAB_NETNS, "tc", "qdisc", "add", "dev", veth, "root",
             "tbf", "rate", rate, "burst", "64kb", "latency", "200ms"])


def delete_netns(name):
    if netns_exists(name):
        run(["ip", "netns", "del", name], check=False)


def lab_netns_names():
    try:
        names = os.listdir("/run/netns")
    except FileNotFoundError:
        return []
    return sorted(n for n in names if n == LAB_NETNS or n.startswith(LAB_NETNS + "-"))
