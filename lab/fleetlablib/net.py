"""The lab network: one namespace with a bridge on the lab's slice of 198.51.100.0/24, one
namespace a node, and one link from the machine's own namespace into the bridge.

Only TEST-NET-2 (198.51.100.0/24) is ever configured. The machine's namespace gets one
interface of the lab's (HOST_LINK, an address of the lab's slice, and so the route to the
slice), so that controller-side steps reach the lab registry, FleetLock and sigstore
servers as a user's controller reaches its registry, and firewall rules of the lab's own
(comment GUARD_COMMENT): a packet to 198.51.100.0/24 that would leave through any other
interface is dropped and counted; nothing from the lab starts a connection to the machine
or is forwarded by it. Nothing else of the machine's interfaces, routes or rules is touched.
"""

import ipaddress
import os
import re

from .common import (
    BRIDGE,
    BRIDGE_IP,
    HOST_IP,
    HOST_LINK,
    HOST_LINK_PREFIX,
    LAB_LINK,
    LAB_NETNS,
    LAB_RANGE,
    PREFIX_LEN,
    SUBNET,
    LabError,
    node_netns,
    node_veth,
    run,
)

GUARD_COMMENT = "fleetlab-guard " + LAB_NETNS
# Checked with -C and inserted with -I, so each is there once and ahead of any ACCEPT of the
# machine's own; iptables -w waits for the other labs' changes.
GUARD_RULES = (
    # A lab address leaves the machine only through a lab's link; the link's own address (a
    # local one) is the machine's and goes through lo.
    ("OUTPUT", ["-d", LAB_RANGE, "!", "-o", HOST_LINK_PREFIX + "+", "-m", "addrtype", "!", "--dst-type", "LOCAL"]),
    # The lab answers the machine; it starts nothing on it.
    ("INPUT", ["-i", HOST_LINK, "-m", "conntrack", "!", "--ctstate", "ESTABLISHED,RELATED"]),
    # And the machine routes nothing into or out of the lab.
    ("FORWARD", ["-i", HOST_LINK]),
    ("FORWARD", ["-o", HOST_LINK]),
)


def _check_lab_address(ip):
    if ipaddress.ip_address(ip) not in ipaddress.ip_network(LAB_RANGE):
        raise LabError("refusing to configure %s: the lab uses only %s" % (ip, LAB_RANGE))


def netns_exists(name):
    return os.path.exists("/run/netns/" + name)


def ensure_lab_network():
    """The lab's namespace, bridge and the machine's link into it (idempotent). `up` has called
    check_route_free before anything changes; ensure_host_link checks again before the link."""
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
    ensure_host_link()


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


def info():
    """The lab's network as lab.json and `fleetlab status --json` give it."""
    return {"subnet": SUBNET, "bridge_address": BRIDGE_IP, "host_link": HOST_LINK, "host_address": HOST_IP}


def _guard_rules():
    """The lab's rules as iptables takes them after -C, -I or -D: chain, match, comment, DROP."""
    return [[chain] + spec + ["-m", "comment", "--comment", GUARD_COMMENT, "-j", "DROP"] for chain, spec in GUARD_RULES]


def _iptables(*args, check=True):
    try:
        return run(["iptables", "-w"] + list(args), check=check)
    except FileNotFoundError:
        raise LabError("iptables is not installed: the lab guards its addresses with it ('make deps' installs it)")


def _route_dev(ip):
    """The interface the machine's own namespace sends a packet to ip through, and its gateway."""
    out = run(["ip", "-o", "route", "get", ip]).stdout
    dev = re.search(r"\bdev (\S+)", out)
    via = re.search(r"\bvia (\S+)", out)
    return (dev.group(1) if dev else None), (via.group(1) if via else None)


def _link_peer_netns(link):
    """The namespace a veth of the machine's namespace leads into (None without such a link)."""
    proc = run(["ip", "-o", "-d", "link", "show", "dev", link], check=False)
    if proc.returncode != 0:
        return None
    match = re.search(r"\blink-netns (\S+)", proc.stdout)
    return match.group(1) if match else "?"


def check_route_free():
    """Refuse, with one sentence, a slice that the machine's namespace already routes elsewhere."""
    peer = _link_peer_netns(HOST_LINK)
    if peer not in (None, LAB_NETNS):
        raise LabError("the lab's addresses %s already lead into lab %s (link %s): run this lab with "
                       "another FLEETLAB_SLICE, or 'fleetlab down' that one" % (SUBNET, peer, HOST_LINK))
    dev, via = _route_dev(BRIDGE_IP)
    if dev != HOST_LINK and via is None:
        # On the machine's own link (a network of the same numbers) or the machine's own address.
        raise LabError("the machine already reaches %s directly through %s, not into the lab: the lab needs %s to "
                       "itself" % (BRIDGE_IP, dev, SUBNET))


def ensure_host_link():
    """The machine's link into the lab bridge, its address and the guard rules (idempotent).

    Afterwards the machine reaches the lab's slice through HOST_LINK, or the lab refuses to run."""
    check_route_free()   # again right before the link is made: another lab may have come up since `up` checked
    for rule in _guard_rules():
        if _iptables("-C", *rule, check=False).returncode != 0:
            _iptables("-I", *rule)
    if _link_peer_netns(HOST_LINK) is None:
        run(["ip", "link", "add", HOST_LINK, "type", "veth", "peer", "name", LAB_LINK, "netns", LAB_NETNS])
    ipv6 = "/proc/sys/net/ipv6/conf/%s/disable_ipv6" % HOST_LINK
    if os.path.exists(ipv6):
        with open(ipv6, "w") as handle:  # no router or neighbour solicitations into the lab
            handle.write("1\n")
    run(["ip", "-n", LAB_NETNS, "link", "set", LAB_LINK, "master", BRIDGE])
    run(["ip", "-n", LAB_NETNS, "link", "set", LAB_LINK, "up"])
    addrs = run(["ip", "-o", "-4", "addr", "show", "dev", HOST_LINK]).stdout
    if HOST_IP + "/" not in addrs:
        _check_lab_address(HOST_IP)
        run(["ip", "addr", "add", "%s/%d" % (HOST_IP, PREFIX_LEN), "dev", HOST_LINK])
    run(["ip", "link", "set", HOST_LINK, "up"])
    dev, via = _route_dev(BRIDGE_IP)
    if dev != HOST_LINK or via is not None:
        raise LabError("%s routes through %s%s after the lab set up its link %s: refusing to run the lab"
                       % (BRIDGE_IP, dev, " via " + via if via else "", HOST_LINK))


def remove_host_link():
    """Remove the machine's link into this lab and this lab's guard rules (what ensure_host_link made)."""
    if _link_peer_netns(HOST_LINK) == LAB_NETNS:
        run(["ip", "link", "del", HOST_LINK], check=False)
    for rule in _guard_rules():
        while _iptables("-C", *rule, check=False).returncode == 0:
            _iptables("-D", *rule)


def leaked_packets():
    """Packets to 198.51.100.0/24 that the machine's firewall dropped on their way out of it so far: the
    sum of the counters of every DROP rule of the OUTPUT chain for lab addresses (every lab's guard, and
    any other such rule, e.g. a session's own leak guard). None without iptables."""
    try:
        out = run(["iptables", "-w", "-L", "OUTPUT", "-n", "-v", "-x"]).stdout
    except (FileNotFoundError, LabError):
        return None
    lab = ipaddress.ip_network(LAB_RANGE)
    total = 0
    for line in out.splitlines()[2:]:
        fields = line.split()
        if len(fields) < 9 or fields[2] != "DROP":
            continue
        try:
            destination = ipaddress.ip_network(fields[8], strict=False)
        except ValueError:
            continue
        if destination.subnet_of(lab):
            total += int(fields[0])
    return total
