"""Hosts as Fedora CoreOS ships them: reached as `core`, root through sudo, here with a become password.

Two nodes of their own, booted as a cloud disk image leaves a host, whose sudo asks for core's password
(`fleetlab login NODE password`): adopt.yml, then rollout.yml, then rollback.yml run on them with the
become password in an extra-vars file and -vvvv. Each playbook does its work; the password shows in no
output, in no process's argv (sampled on the machine, which sees the nodes' processes) and in no file
left on the nodes. A node whose sudo refuses fails the step with one sentence naming the host.
"""

import base64
import json
import os
from pathlib import Path

import pytest
import yaml

from conftest import REPO, read_hosts
from test_rollout import _run
from test_secrets import ArgvWatcher, _node_files_containing

ADOPT = REPO / "playbooks" / "adopt.yml"
ROLLOUT = REPO / "playbooks" / "rollout.yml"
ROLLBACK = REPO / "playbooks" / "rollback.yml"
BASE = "fleetos/lab-os:1.0"
REFSPEC = "fedora:fedora/x86_64/coreos/stable"
BECOME_PASSWORD = "sudo pa$$ 'wörd' $HOME"


def _booted(lab, node):
    return [d for d in lab.rpm_ostree_status(node)["deployments"] if d["booted"]][0]


def _reset(lab, node):
    """As the disk image left the node: its base commit booted with a plain refspec origin, nothing staged."""
    commit = lab.base_record["commit"]
    lab.exec(node, "for f in /sysroot/ostree/deploy/*/deploy/%s.*.origin; do printf '[origin]\\nrefspec=%s\\n' > $f; "
                   "rm -f $f.*.bak; done; rpm-ostree cleanup -p >/dev/null; rm -rf /sysroot/ostree/container-cache"
             % (commit, REFSPEC))


@pytest.fixture(scope="module")
def become_fleet(lab, tmp_path_factory):
    nodes = lab.own_nodes("test_become", 2, disk_image=BASE)
    tmp = tmp_path_factory.mktemp("become")
    hosts, allvars = read_hosts(lab.inventory)
    assert (allvars["ansible_user"], allvars["ansible_become"]) == ("core", True)
    inventory = tmp / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {
        "vars": dict(allvars, fleetos_adopt_image="%s/%s" % (lab.registry, BASE)),
        "children": {"become_lab": {"vars": {"fleetos_pool": "become", "fleetos_pool_max_unavailable": 2},
                                    "hosts": {name: hosts[name] for name in nodes}}}}}, sort_keys=False))
    secrets = tmp / "become.yml"
    fd = os.open(str(secrets), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        yaml.safe_dump({"ansible_become_password": BECOME_PASSWORD}, handle, allow_unicode=True)
    for node in nodes:
        _reset(lab, node)
    lab.fleetlab("login", *nodes, "password", input_text=BECOME_PASSWORD + "\n")
    yield {"nodes": nodes, "inventory": inventory, "secrets": secrets, "tmp": tmp}
    lab.fleetlab("login", *nodes, "nopasswd")
    for node in nodes:
        _reset(lab, node)


def _registry_credentials(lab):
    """The lab registry's user and password, from the auth file the inventory gives the controller."""
    _hosts, allvars = read_hosts(lab.inventory)
    auths = json.loads(Path(allvars["fleetos_lab_auth_file"]).read_text())["auths"]
    return base64.b64decode(next(iter(auths.values()))["auth"]).decode().split(":", 1)


def test_adopt_rollout_rollback_with_a_become_password(lab, become_fleet, rollout_image):
    nodes, inventory, tmp = become_fleet["nodes"], become_fleet["inventory"], become_fleet["tmp"]
    user, registry_password = _registry_credentials(lab)
    secrets = tmp / "registry.yml"
    fd = os.open(str(secrets), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        yaml.safe_dump({"registry_user": user, "registry_password": registry_password}, handle)
    pull = tmp / "pull.yml"
    pull.write_text(yaml.safe_dump([{"name": "Pull", "hosts": "all", "gather_facts": False, "tasks": [
        {"name": "Pull with credentials sent on stdin", "fleetos.layering.os_image_pull": {
            "image": "%s/%s" % (lab.registry, BASE), "username": "{{ registry_user }}",
            "password": "{{ registry_password }}", "state": "present", "cache_dir": "/var/tmp/fleetos-become-test"}},
        {"name": "Remove the pulled copy", "ansible.builtin.raw": "rm -rf /var/tmp/fleetos-become-test",
         "changed_when": False}]}]))
    watcher = ArgvWatcher(BECOME_PASSWORD)
    watcher.start()
    registry_watcher = ArgvWatcher(registry_password)
    registry_watcher.start()
    outputs = []
    try:
        def play(playbook, *extra):
            proc = _run(lab, inventory, playbook, "-e", "@%s" % become_fleet["secrets"], "-vvvv",
                        "-e", "fleetos_report_dir=%s" % (tmp / playbook.stem), *extra)
            outputs.append(proc.stdout)
            return proc

        # A secret on stdin under a become password: the pull secret reaches skopeo, the password sudo.
        pulled = play(pull, "-e", "@%s" % secrets)
        assert pulled.stdout.count("Pull with credentials sent on stdin") == 1
        assert "ok: [%s]" % nodes[0] in pulled.stdout or "changed: [%s]" % nodes[0] in pulled.stdout
        play(ADOPT)
        for node in nodes:
            booted = _booted(lab, node)
            assert booted["checksum"] == lab.base_record["commit"], node
            assert booted["container-image-reference"].endswith("@%s" % lab.base_digest), node
        play(ROLLOUT, "-e", "fleetos_rollout_image=%s" % rollout_image["tag_image"])
        for node in nodes:
            assert _booted(lab, node)["container-image-reference-digest"] == rollout_image["digest"], node
        play(ROLLBACK, "-e", "fleetos_rollback_from=%s" % rollout_image["digest"])
        for node in nodes:
            # Back on the adopted deployment: the disk image's commit, its origin naming the base image.
            booted = _booted(lab, node)
            assert booted["checksum"] == lab.base_record["commit"], node
            assert booted["container-image-reference"].endswith("@%s" % lab.base_digest), node
    finally:
        watcher.stop()
        registry_watcher.stop()
    assert watcher.samples > 10
    assert watcher.hits == [] and registry_watcher.hits == []
    for text in outputs:
        assert BECOME_PASSWORD not in text
        assert "wörd" not in text
        assert registry_password not in text
    # The connection used sudo with a password prompt (not a passwordless sudo by mistake).
    assert "[sudo via ansible" in outputs[0]
    for node in nodes:
        assert _node_files_containing(lab, [BECOME_PASSWORD.encode(), registry_password.encode()], node=node,
                                      dirs=("tmp", "var/tmp", "run", "var/roothome", "var/home")) == []


def test_a_host_whose_sudo_refuses_fails_with_one_sentence(lab, become_fleet):
    node = become_fleet["nodes"][0]
    play = become_fleet["tmp"] / "info.yml"
    play.write_text(yaml.safe_dump([{"name": "Read", "hosts": node, "gather_facts": False, "tasks": [
        {"name": "Read the deployments", "fleetos.layering.os_info": {}}]}]))
    # No become password given: sudo asks for one.
    proc = _run(lab, become_fleet["inventory"], play, check=False)
    assert proc.returncode != 0
    assert ("Failed to read the deployments of the host: sudo refused to make core root on %s (Missing sudo password); "
            "give the user the right or set ansible_become_password." % node) in proc.stdout, proc.stdout[-3000:]
    lab.fleetlab("login", node, "refuse")
    try:
        proc = _run(lab, become_fleet["inventory"], play, "-e", "@%s" % become_fleet["secrets"], check=False)
        assert ("Failed to read the deployments of the host: sudo refused to make core root on %s (core is not in the "
                "sudoers file); give the user the right or set ansible_become_password." % node) in proc.stdout, \
            proc.stdout[-3000:]
        assert BECOME_PASSWORD not in proc.stdout
    finally:
        lab.fleetlab("login", node, "password", input_text=BECOME_PASSWORD + "\n")
