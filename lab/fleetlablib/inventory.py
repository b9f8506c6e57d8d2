"""The Ansible inventory the lab writes for its fleet (inventories/lab/hosts.yml)."""

import json
from pathlib import Path

from . import fleetlock, registry, signing
from .common import LAB_NETNS, OSTREE_REMOTE, inventory_dir, state_dir, write_file

HEADER = """\
# Written by lab/fleetlab up: the lab fleet. Do not edit; it is rewritten on each 'up'.
# ssh reaches the nodes inside the lab network namespace through a ProxyCommand, so
# 'ansible -i inventories/lab all -m ping' works from the machine itself. The machine reaches
# the lab registry, FleetLock and sigstore servers through its link into the lab
# ('fleetlab status'), as a controller reaches its registry: controller-side steps (compose.yml,
# status.yml's layer read) run from the machine with the registry's credentials and CA below.
"""


def _yaml(value, indent):
    """A small YAML emitter for the inventory (str, int, bool, dict, list)."""
    pad = "  " * indent
    lines = []
    for key, item in value.items():
        if isinstance(item, dict):
            if item:
                lines.append("%s%s:" % (pad, json.dumps(key) if ":" in key or "/" in key else key))
                lines.extend(_yaml(item, indent + 1))
            else:
                lines.append("%s%s: {}" % (pad, key))
        else:
            lines.append("%s%s: %s" % (pad, json.dumps(key) if ":" in key or "/" in key else key,
                                       json.dumps(item)))
    return lines


def write(lab):
    key = state_dir() / "ssh" / "id_ed25519"
    known = state_dir() / "ssh" / "known_hosts"
    pools = {}
    hosts = {}
    for name, info in sorted(lab["nodes"].items()):
        pools.setdefault(info["pool"], {})[name] = {}
        hosts[name] = {
            "ansible_host": info["address"],
            "fleetos_node_labels": info["labels"],
        }
    proxy = "ip netns exec %s socat - TCP:%%h:%%p,connect-timeout=5" % LAB_NETNS
    all_vars = {
        # As Fedora CoreOS is reached: the admin user `core`, root through sudo (root may not log in
        # over ssh). A node whose sudo asks for a password (`fleetlab login NODE password`) needs
        # ansible_become_password as well, given by the run (an extra-vars file, a vault).
        "ansible_user": "core",
        "ansible_become": True,
        "ansible_ssh_private_key_file": str(key),
        "ansible_ssh_common_args": "-o ProxyCommand='%s' -o UserKnownHostsFile=%s -o StrictHostKeyChecking=yes"
        " -o ServerAliveInterval=3 -o ServerAliveCountMax=3" % (proxy, known),
        # One ssh round trip per task instead of four (temporary directory, transfer, run,
        # clean up), as a fleet's ansible.cfg would set it: the nodes have no requiretty.
        "ansible_pipelining": True,
        # ssh multiplexing sockets per lab, in its own state.
        "ansible_control_path_dir": str(state_dir() / "ssh" / "cp"),
        "fleetos_lab_registry": registry.address(),
        # The registry's credentials and CA directory on the controller (this machine), for the
        # playbooks' controller-side steps, as a user's group_vars/all would give them.
        "fleetos_lab_auth_file": str(registry.auth_file()),
        "fleetos_lab_ca_cert_dir": str(registry.cert_dir()),
        "fleetos_status_auth_file": str(registry.auth_file()),
        "fleetos_status_ca_cert_dir": str(registry.cert_dir()),
        "fleetos_compose_auth_file": str(registry.auth_file()),
        "fleetos_compose_ca_cert_dir": str(registry.cert_dir()),
        "fleetos_lab_base_image": lab.get("base_image_ref", ""),
        "fleetos_lab_boot_time_command": "cat /run/lab-boot-id",
        # The kernel boot id never changes in a node namespace: the rollout role's reboot
        # check reads the lab's own boot id.
        "fleetos_rollout_boot_time_command": "cat /run/lab-boot-id",
        "fleetos_lab_fleetlock_url": fleetlock.address(),
        # Signed images: build them under this repository namespace (fleetlab image build
        # REPO/NAME:TAG --sign); the nodes require the lab key's signature there
        # (ostree-image-signed:docker://...), and verify ostree commits with this remote
        # (ostree-remote-image:REMOTE:docker://...). Signatures are read from the sigstore URL.
        "fleetos_lab_signed_repository": signing.signed_repository(),
        "fleetos_lab_ostree_remote": OSTREE_REMOTE,
        "fleetos_lab_sigstore_url": signing.sigstore_url(),
    }
    tree = {"all": {"vars": all_vars, "children": {"fleet": {"children": {}}}}}
    fleet = tree["all"]["children"]["fleet"]["children"]
    for pool, members in sorted(pools.items()):
        fleet[pool] = {"vars": {"fleetos_pool": pool}, "hosts": {n: hosts[n] for n in sorted(members)}}
    text = HEADER + "\n".join(_yaml(tree, 0)) + "\n"
    target = inventory_dir() / "hosts.yml"
    write_file(target, text)
    return target


def write_known_hosts(lab, host_keys):
    lines = []
    for name, info in sorted(lab["nodes"].items()):
        if name in host_keys:
            lines.append("%s %s" % (info["address"], host_keys[name]))
    write_file(state_dir() / "ssh" / "known_hosts", "\n".join(lines) + "\n")


def read_hosts(path=None):
    """(hosts, all_vars) of a lab inventory: each host's vars, and the connection vars for all.

    Tests and benchmarks use it to write inventories of their own over some lab nodes;
    the inventory's all.vars carry `fleetos_rollout_boot_time_command` (the lab's boot id
    command) themselves.
    """
    import yaml  # the venv's PyYAML; fleetlab itself never needs it

    source = yaml.safe_load((Path(path) if path else inventory_dir() / "hosts.yml").read_text())
    hosts = {}

    def walk(group):
        for name, hostvars in (group.get("hosts") or {}).items():
            hosts[name] = hostvars
        for child in (group.get("children") or {}).values():
            walk(child or {})

    walk(source["all"])
    all_vars = dict(source["all"]["vars"])
    return hosts, all_vars
