"""The lab itself: a really booted ostree fleet reachable by Ansible, with faults."""

import json
import os
import signal
import stat
import subprocess
import sys
import time
import uuid

import pytest
import yaml

from conftest import FLEETLAB, LAB_NETNS, NODE_PYTHON, REPO

sys.path.insert(0, str(REPO / "lab"))

from fleetlablib import nodes  # noqa: E402
from fleetlablib.common import LabError  # noqa: E402


def _one_line_error(proc):
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1, proc
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("fleetlab: error: "), proc.stderr
    return lines[0]


def test_inventory_has_pools_labels_and_addresses(lab):
    inv = yaml.safe_load(lab.inventory.read_text())
    pools = inv["all"]["children"]["fleet"]["children"]
    seen = {}
    for pool, group in pools.items():
        assert group["vars"]["fleetos_pool"] == pool
        for host, hvars in group["hosts"].items():
            seen[host] = hvars
            assert hvars["fleetos_node_labels"]["fleetos.io/pool"] == pool
    assert sorted(seen) == lab.nodes
    for host, hvars in seen.items():
        assert hvars["ansible_host"] == lab.info["nodes"][host]["address"]
        assert hvars["ansible_host"].startswith("198.51.100.")
    assert set(pools) == {"workers", "infra"}
    key = inv["all"]["vars"]["ansible_ssh_private_key_file"]
    assert oct(os.stat(key).st_mode & 0o777) == "0o600"


def test_nodes_are_really_booted_from_their_deployment(lab):
    commit = lab.base_record["commit"]
    for node in lab.nodes:
        out = lab.exec(node, "ostree admin status").stdout
        booted = [line for line in out.splitlines() if line.startswith("* ")]
        assert len(booted) == 1, out
        # / is the deployment directory itself (same device and inode).
        checksum_serial = booted[0].split()[2]
        path = "/ostree/deploy/fedora-coreos/deploy/%s" % checksum_serial
        same = lab.exec(node, "[ / -ef %s ] && [ -e /run/ostree-booted ] && echo same" % path).stdout
        assert same.strip() == "same"
        assert lab.exec(node, "hostname").stdout.strip() == node
    first = lab.info["nodes"][lab.nodes[0]]
    if not first.get("disk_image"):
        out = lab.exec(lab.nodes[0], "ostree admin status").stdout
        assert commit in out


def test_registry_has_tls_and_auth_on_every_node(lab):
    node = lab.nodes[0]
    ok = lab.exec(node, "skopeo inspect --authfile /etc/ostree/auth.json docker://%s" % lab.base_image)
    labels = json.loads(ok.stdout)["Labels"]
    assert labels["ostree.commit"] == lab.base_record["commit"]
    assert labels["ostree.bootable"] == "true"
    anon = lab.exec(node, "skopeo inspect docker://%s" % lab.base_image, check=False)
    assert anon.returncode != 0
    assert "authentication required" in anon.stderr
    perms = lab.exec(node, "stat -c %a /etc/ostree/auth.json").stdout.strip()
    assert perms == "600"


def test_ansible_reaches_every_node(lab):
    proc = lab.ansible("all", "-o", "-m", "ansible.builtin.raw", "-a", "cat /run/lab/node-name")
    # raw asks for a tty: \r\n line ends (as core, through sudo: the become marker's line is taken off).
    lines = dict(line.split(" | ", 1) for line in proc.stdout.splitlines() if " | " in line)
    for node in lab.nodes:
        assert lines[node].startswith("CHANGED | rc=0 | (stdout) ")
        assert "%s\\r\\n" % node in lines[node].split("(stdout)", 1)[1]


def _status_rows(lab):
    return json.loads(lab.fleetlab("status", "--json").stdout)["nodes"]


def test_nodes_have_no_python_unless_made_with_it(lab):
    """As Fedora CoreOS ships: nothing Ansible's interpreter discovery tries is there, the stand-ins run
    on their private interpreter; a node made with --with-python has /usr/bin/python3."""
    node = lab.nodes[0]
    probe = ("for p in python python3 python3.11 python3.12 python3.13 python2 /usr/bin/python3 "
             "/usr/libexec/platform-python /usr/local/bin/python3; do command -v $p; done; "
             "ls /usr/bin /usr/sbin /usr/local/bin | grep -c '^python' || true")
    assert lab.exec(node, probe, check=False).stdout.split() == ["0"]
    assert json.loads(lab.exec(node, "rpm-ostree status --json").stdout)["deployments"]
    assert lab.exec(node, [NODE_PYTHON, "-c", "import sys; print(sys.prefix)"]).stdout.strip() == "/usr"
    failed = lab.ansible(node, "-m", "ansible.builtin.ping", check=False)
    assert failed.returncode != 0 and "python" in failed.stdout.lower()
    assert [row["python"] for row in _status_rows(lab) if row["node"] == node] == [False]

    with_python = lab.own_nodes("test_lab-python", 1, with_python=True)[0]
    assert lab.exec(with_python, "command -v python3").stdout.strip() == "/usr/bin/python3"
    assert "%s | SUCCESS" % with_python in lab.ansible(with_python, "-m", "ansible.builtin.ping").stdout
    assert [row["python"] for row in _status_rows(lab) if row["node"] == with_python] == [True]


def test_ansible_reboot_returns_with_new_boot_id(lab):
    node = lab.nodes[1]
    before = lab.boot_id(node)
    boots_before = len([e for e in lab.journal("boot") if e["node"] == node])
    proc = lab.ansible(node, "-m", "fleetos.layering.os_reboot", "-a",
                       'reboot_command="systemctl reboot" boot_time_command="cat /run/lab-boot-id" reboot_timeout=120')
    assert '"rebooted": true' in proc.stdout
    after = lab.boot_id(node)
    assert after != before
    boots = [e for e in lab.journal("boot") if e["node"] == node]
    assert len(boots) == boots_before + 1
    assert boots[-1]["boot_id"] == after
    assert [e for e in lab.journal("reboot") if e["node"] == node]


def test_image_build_from_base_reuses_its_layers(lab, tmp_path):
    payload = tmp_path / "motd"
    payload.write_text("built by test %s\n" % uuid.uuid4())
    tag = "fleetos/test-layers:%s" % uuid.uuid4().hex[:8]
    digest = lab.build_image(tag, "--from", "fleetos/lab-os:1.0", "--add-file", "%s:/etc/motd" % payload,
                             "--label", "fleetos.test=yes")
    node = lab.nodes[0]
    raw = lab.exec(node, "skopeo inspect --raw --authfile /etc/ostree/auth.json docker://%s/%s"
                   % (lab.registry, tag)).stdout
    base_raw = lab.exec(node, "skopeo inspect --raw --authfile /etc/ostree/auth.json docker://%s"
                        % lab.base_image).stdout
    layers = [item["digest"] for item in json.loads(raw)["layers"]]
    base_layers = [item["digest"] for item in json.loads(base_raw)["layers"]]
    assert layers[:len(base_layers)] == base_layers
    assert len(layers) == len(base_layers) + 1
    info = json.loads(lab.exec(node, "skopeo inspect --authfile /etc/ostree/auth.json docker://%s/%s@%s"
                               % (lab.registry, tag.split(":", maxsplit=1)[0], digest)).stdout)
    assert info["Digest"] == digest
    assert info["Labels"]["fleetos.test"] == "yes"
    assert info["Labels"]["ostree.commit"] == lab.image_record(tag)["commit"]
    assert info["Labels"]["ostree.commit"] != lab.base_record["commit"]


def test_rebase_through_standin_is_booted_after_reboot(lab, tmp_path):
    node = lab.nodes[2]
    payload = tmp_path / "release"
    payload.write_text("release %s\n" % uuid.uuid4())
    tag = "fleetos/test-rebase:%s" % uuid.uuid4().hex[:8]
    digest = lab.build_image(tag, "--from", "fleetos/lab-os:1.0", "--add-file",
                             "%s:/usr/share/fleetlab/release" % payload, "--size-mb", "1")
    record = lab.image_record(tag)
    ref = "ostree-unverified-registry:%s/%s@%s" % (lab.registry, record["name"], digest)
    base_manifest = json.loads(lab.exec(node, "skopeo inspect --raw --authfile /etc/ostree/auth.json "
                                        "docker://%s" % lab.base_image).stdout)
    base_layers = {layer["digest"] for layer in base_manifest["layers"]}
    mark = time.time()
    lab.exec(node, ["rpm-ostree", "rebase", ref])
    status = lab.rpm_ostree_status(node)
    staged = status["deployments"][0]
    assert staged["staged"] is True
    assert staged["checksum"] == record["commit"]
    assert staged["container-image-reference-digest"] == digest
    reads = [e for e in lab.journal("blob_read") if e.get("node") == node and e["ts"] >= mark]
    assert reads, "the rebase read nothing from the registry"
    assert not base_layers & {e["digest"] for e in reads}, "the node fetched a layer it already had"

    proc = lab.ansible(node, "-m", "fleetos.layering.os_reboot", "-a",
                       'reboot_command="systemctl reboot" boot_time_command="cat /run/lab-boot-id" reboot_timeout=120')
    assert '"rebooted": true' in proc.stdout
    status = lab.rpm_ostree_status(node)
    booted = [d for d in status["deployments"] if d["booted"]]
    assert len(booted) == 1
    assert booted[0]["checksum"] == record["commit"]
    assert booted[0]["container-image-reference"] == ref
    assert status["deployments"][0]["booted"] is True
    assert lab.exec(node, "cat /usr/share/fleetlab/release").stdout == payload.read_text()
    # ostree's own view agrees with the stand-in's JSON, in the same order.
    admin = lab.exec(node, "ostree admin status").stdout
    listed = [line[2:].split()[1] for line in admin.splitlines()
              if line.startswith("* ") or line.startswith("  fedora-coreos ")]
    assert listed == ["%s.%d" % (d["checksum"], d["serial"]) for d in status["deployments"]]
    assert [e for e in lab.journal("boot") if e["node"] == node][-1]["checksum"] == record["commit"]


def test_faults_health_unreachable_and_slow_boot(lab):
    node = lab.nodes[0]
    assert lab.exec(node, "lab-health", check=False).returncode == 0
    lab.fleetlab("fault", node, "fail-health")
    failed = lab.exec(node, "lab-health", check=False)
    assert failed.returncode == 1 and "unhealthy" in failed.stderr
    lab.fleetlab("fault", node, "unreachable")
    ping = lab.ansible(node, "-m", "ansible.builtin.raw", "-a", "true", check=False, timeout=120)
    assert ping.returncode != 0 and "UNREACHABLE" in ping.stdout
    lab.fleetlab("fault", node, "clear")
    assert lab.exec(node, "lab-health", check=False).returncode == 0
    lab.ansible(node, "-m", "ansible.builtin.raw", "-a", "true")

    lab.fleetlab("fault", node, "slow-boot", "2")
    start = time.time()
    lab.reboot(node)
    assert time.time() - start >= 2
    reboot = [e for e in lab.journal("reboot") if e["node"] == node][-1]
    boot = [e for e in lab.journal("boot") if e["node"] == node][-1]
    assert boot["ts"] - reboot["ts"] >= 2
    lab.fleetlab("fault", node, "clear")


def test_no_boot_fault_keeps_node_down_until_cleared(lab):
    node = lab.nodes[0]
    lab.fleetlab("fault", node, "no-boot")
    before = lab.boot_id(node)
    lab.exec(node, ["systemctl", "reboot"])
    time.sleep(2)
    down = lab.exec(node, ["true"], check=False)
    assert down.returncode != 0
    assert "not running" in down.stderr
    status = json.loads(lab.fleetlab("status", "--json").stdout)
    row = [r for r in status["nodes"] if r["node"] == node][0]
    assert row["state"] == "rebooting" and row["faults"] == ["no-boot"]
    lab.fleetlab("fault", node, "clear")
    assert lab.wait_up(node, not_boot_id=before) != before


def test_the_machine_reaches_the_lab_services_through_its_own_link(lab):
    """From the machine's own namespace (no `ip netns exec`), as a user's controller: the registry with the
    lab's credentials and CA, FleetLock and the sigstore server, over the lab's link; nothing leaves."""
    network = lab.info["network"]
    ivars = yaml.safe_load(lab.inventory.read_text())["all"]["vars"]
    leaked = lab.leaked_packets()
    for url in (ivars["fleetos_lab_fleetlock_url"], ivars["fleetos_lab_sigstore_url"]):
        route = subprocess.run(["ip", "-o", "route", "get", url.split("/")[2].split(":")[0]],
                               stdout=subprocess.PIPE, text=True, check=True).stdout
        assert route.split()[:3] == [url.split("/")[2].split(":")[0], "dev", network["host_link"]], route
    start = len(lab.journal())
    proc = subprocess.run(["skopeo", "inspect", "--authfile", ivars["fleetos_lab_auth_file"], "--cert-dir",
                           ivars["fleetos_lab_ca_cert_dir"], "docker://%s" % lab.base_image],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["Digest"] == lab.base_digest
    # The registry saw the machine's address on the lab link, and the journal names it the controller.
    assert {e["node"] for e in lab.journal()[start:] if e["event"] == "blob_read"} == {"controller"}
    status = subprocess.run([sys.executable, "-c", "import sys, urllib.request; print(urllib.request.urlopen("
                             "sys.argv[1], timeout=10).read().decode())", ivars["fleetos_lab_fleetlock_url"]
                             + "/v1/status"], stdout=subprocess.PIPE, text=True, timeout=30, check=True).stdout
    assert "holders" in json.loads(status)
    assert lab.leaked_packets() == leaked


def test_a_node_cannot_open_a_connection_to_the_machine(lab):
    """The link carries the machine's connections into the lab and their answers, nothing a node starts."""
    import socket

    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("0.0.0.0", 0))
    server.listen(4)
    port = server.getsockname()[1]
    try:
        host = lab.info["network"]["host_address"]
        assert subprocess.run(["nc", "-z", "-w", "3", host, str(port)], check=False).returncode == 0
        refused = lab.exec(lab.nodes[0], ["nc", "-z", "-w", "3", host, str(port)], check=False)
        assert refused.returncode != 0, refused
    finally:
        server.close()


def test_a_second_lab_on_the_same_addresses_is_refused_before_anything_changes(lab, tmp_path):
    network = lab.info["network"]
    env = dict(os.environ, FLEETLAB_NETNS="flsecond", FLEETLAB_SLICE=network["host_link"][-1],
               FLEETLAB_STATE=str(tmp_path / "state"), FLEETLAB_INVENTORY=str(tmp_path / "inventory"))
    proc = subprocess.run([str(FLEETLAB), "up", "--nodes", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, env=env, timeout=60, check=False)
    line = _one_line_error(proc)
    assert "already lead into lab %s (link %s)" % (LAB_NETNS, network["host_link"]) in line
    assert not (tmp_path / "state").exists() and not os.path.exists("/run/netns/flsecond")
    route = subprocess.run(["ip", "-o", "route", "get", network["bridge_address"]], stdout=subprocess.PIPE,
                           text=True, check=True).stdout
    assert " dev %s " % network["host_link"] in route


def test_status_table_lists_every_node(lab):
    out = lab.fleetlab("status").stdout
    for node in lab.nodes:
        row = [line for line in out.splitlines() if line.startswith(node + " ")]
        assert row, out
        assert lab.info["nodes"][node]["address"] in row[0]


def test_up_again_converges_without_reboots(lab):
    ids = {node: lab.boot_id(node) for node in lab.nodes}
    lab.fleetlab("up", "--nodes", len(lab.nodes))
    assert {node: lab.boot_id(node) for node in lab.nodes} == ids


def test_bad_input_is_one_line_and_changes_nothing(lab):
    before = (lab.state / "lab.json").read_text()
    line = _one_line_error(lab.fleetlab("exec", "node99", "--", "true", check=False))
    assert "unknown node 'node99'" in line
    line = _one_line_error(lab.fleetlab("image", "build", "Not A Name", check=False))
    assert "malformed image name" in line
    line = _one_line_error(lab.fleetlab("up", "--nodes", "0", check=False))
    assert "--nodes 0" in line
    line = _one_line_error(lab.fleetlab("fault", lab.nodes[0], "slow-boot", check=False))
    assert "SECONDS" in line
    nobody = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                             str(FLEETLAB), "down"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, check=False)
    assert "must run as root" in _one_line_error(nobody)
    assert (lab.state / "lab.json").read_text() == before


def test_registry_stop_start_and_port_taken(lab):
    node = lab.nodes[0]
    before = (lab.state / "lab.json").read_text()
    lab.fleetlab("registry", "stop")
    down = lab.exec(node, "skopeo inspect --authfile /etc/ostree/auth.json docker://%s" % lab.base_image,
                    check=False)
    assert down.returncode != 0
    squatter = subprocess.Popen(["ip", "netns", "exec", LAB_NETNS, "nc", "-l", "-k", "-s", "198.51.100.1",
                                 "-p", lab.registry.split(":")[1]],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        line = _one_line_error(lab.fleetlab("up", "--nodes", len(lab.nodes), check=False))
        assert "already taken" in line
        assert (lab.state / "lab.json").read_text() == before
    finally:
        squatter.kill()
        squatter.wait()
    lab.fleetlab("registry", "start")
    lab.exec(node, "skopeo inspect --authfile /etc/ostree/auth.json docker://%s" % lab.base_image)


FLEETLOCK_CLIENT = r"""
import json, sys, urllib.error, urllib.request
path, ident, group = sys.argv[1:4]
req = urllib.request.Request("http://198.51.100.1:8080" + path, method="POST",
                             data=json.dumps({"client_params": {"id": ident, "group": group}}).encode())
req.add_header("fleet-lock-protocol", "true")
try:
    with urllib.request.urlopen(req, timeout=10) as resp:
        print(resp.status, resp.read().decode())
except urllib.error.HTTPError as err:
    print(err.code, err.read().decode())
"""


def test_fleetlock_server_shares_a_budget_between_nodes(lab):
    def call(node, path, ident, group="test-%s" % os.getpid()):
        out = lab.exec(node, [NODE_PYTHON, "-c", FLEETLOCK_CLIENT, path, ident, group]).stdout.split(" ", 1)
        return int(out[0]), json.loads(out[1])

    lab.fleetlab("fleetlock", "slots", "2", "--group", "test-%s" % os.getpid())
    assert call(lab.nodes[0], "/v1/pre-reboot", "a") == (200, {})
    assert call(lab.nodes[1], "/v1/pre-reboot", "b") == (200, {})
    assert call(lab.nodes[1], "/v1/pre-reboot", "b") == (200, {})
    status, body = call(lab.nodes[2], "/v1/pre-reboot", "c")
    assert status == 409 and body["kind"] == "failed_lock_semaphore_full"
    assert call(lab.nodes[0], "/v1/steady-state", "a") == (200, {})
    assert call(lab.nodes[2], "/v1/pre-reboot", "c") == (200, {})
    locks = [e for e in lab.journal("fleetlock_lock") if e["group"] == "test-%s" % os.getpid()]
    assert max(len(e["holders"]) for e in locks) == 2
    call(lab.nodes[1], "/v1/steady-state", "b")
    call(lab.nodes[2], "/v1/steady-state", "c")


def test_legacy_oscontainer_carries_an_ostree_repo(lab):
    tag = "fleetos/test-legacy:%s" % uuid.uuid4().hex[:8]
    record = json.loads(lab.fleetlab("image", "build", tag, "--from", "fleetos/lab-os:1.0",
                                     "--legacy-oscontainer", "--json").stdout)
    node = lab.nodes[0]
    info = json.loads(lab.exec(node, "skopeo inspect --authfile /etc/ostree/auth.json docker://%s/%s"
                               % (lab.registry, tag)).stdout)
    assert info["Labels"]["com.coreos.ostree-commit"] == record["commit"]
    assert "ostree.bootable" not in info["Labels"]
    script = (
        "set -e; d=$(mktemp -d /var/tmp/legacy.XXXX); "
        "skopeo copy --quiet --authfile /etc/ostree/auth.json docker://%s/%s oci:$d/oci:x; "
        "umoci raw unpack --image $d/oci:x $d/root 2>/dev/null; "
        "ostree --repo=$d/root/srv/repo rev-parse fleetlab/oscontainer; rm -rf $d" % (lab.registry, tag)
    )
    assert lab.exec(node, script).stdout.strip() == record["commit"]


def test_disk_image_nodes_boot_the_commit_with_a_refspec_origin(lab, tmp_path):
    marker = tmp_path / "cloud"
    marker.write_text("cloud image\n")
    tag = "fleetos/test-cloud:%s" % uuid.uuid4().hex[:8]
    lab.build_image(tag, "--from", "fleetos/lab-os:1.0", "--add-file", "%s:/usr/share/fleetlab/cloud" % marker)
    record = lab.image_record(tag)
    # A node of this test's own, after the nodes other tests use.
    node = lab.own_nodes("test_lab", 1, disk_image=tag)[0]
    assert lab.info["nodes"][node]["disk_image"] is True
    status = lab.rpm_ostree_status(node)
    booted = [d for d in status["deployments"] if d["booted"]][0]
    assert booted["checksum"] == record["commit"]
    assert booted["origin"] == "fedora:fedora/x86_64/coreos/stable"
    assert "container-image-reference" not in booted
    assert lab.exec(node, "cat /usr/share/fleetlab/cloud").stdout == "cloud image\n"


def _dev_mount(lab, node):
    """The fields of the node's /dev line in its /proc/self/mountinfo (None: not a mount)."""
    for line in lab.exec(node, ["cat", "/proc/self/mountinfo"]).stdout.splitlines():
        fields = line.split()
        if fields[4] == "/dev":
            return {"options": fields[5], "fstype": fields[fields.index("-") + 1]}
    return None


def test_a_node_has_a_dev_of_its_own(lab):
    # One of the nodes test_claim... gives this module (no new node; the same ones each run).
    node = lab.own_nodes("test_lab", 2)[0]
    mount = _dev_mount(lab, node)
    if not mount or mount["fstype"] != "tmpfs":
        # Booted by an older boot script (a lab that was up before): boot it again.
        lab.reboot(node)
        mount = _dev_mount(lab, node)
    # Never go on unless the node's /dev is its own: the steps below would hit the machine's.
    assert mount and mount["fstype"] == "tmpfs", mount
    assert "nosuid" in mount["options"].split(",") and "noexec" in mount["options"].split(",")
    machine = os.stat("/dev/null")
    assert stat.S_ISCHR(machine.st_mode)
    listing = lab.exec(node, "stat -c '%n %F %t:%T' /dev/null /dev/zero /dev/full /dev/random "
                             "/dev/urandom /dev/tty; readlink /dev/ptmx /dev/fd /dev/stdin /dev/stdout "
                             "/dev/stderr").stdout.splitlines()
    assert listing[:6] == ["/dev/null character special file 1:3", "/dev/zero character special file 1:5",
                           "/dev/full character special file 1:7", "/dev/random character special file 1:8",
                           "/dev/urandom character special file 1:9", "/dev/tty character special file 5:0"]
    assert listing[6:] == ["pts/ptmx", "/proc/self/fd", "/proc/self/fd/0", "/proc/self/fd/1", "/proc/self/fd/2"]
    # sshd and python get ptys from the node's own devpts instance.
    pty = lab.exec(node, [NODE_PYTHON, "-c", "import os; m, s = os.openpty(); print(os.ttyname(s))"]).stdout
    assert pty.strip().startswith("/dev/pts/")
    types = lab.exec(node, "stat -f -c '%T' /dev/pts /dev/shm").stdout.split()
    assert types == ["devpts", "tmpfs"]
    try:
        # What a module that writes /dev/null does: the node's /dev/null becomes a file...
        lab.exec(node, "rm /dev/null && touch /dev/null && echo written > /dev/null")
        assert lab.exec(node, "stat -c %F /dev/null; cat /dev/null").stdout.splitlines() == [
            "regular file", "written"]
        # ...and the machine's stays the character device it was.
        after = os.stat("/dev/null")
        assert stat.S_ISCHR(after.st_mode) and after.st_rdev == machine.st_rdev
        assert (after.st_dev, after.st_ino) == (machine.st_dev, machine.st_ino)
        with open("/dev/null", "w") as handle:
            handle.write("still a sink\n")
        assert os.path.getsize("/dev/null") == 0
    finally:
        # Put the node back as it booted.
        lab.exec(node, "rm -f /dev/null && mknod -m 0666 /dev/null c 1 3")
    assert lab.exec(node, "stat -c '%F %t:%T %a' /dev/null").stdout.strip() == "character special file 1:3 666"
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_a_command_enters_a_rebooting_node_only_once_it_booted_its_deployment(lab):
    """While a node boots, its PID 1 sees the machine's filesystem until boot.sh pivots into the
    deployment; a command entered then read the machine's /var (a lease looked missing) and could
    write the machine's files. The lab's exec refuses the node until it has booted: every read of
    a file in the node's /var, as fast as fleetlab exec enters the node, finds it, is refused, or
    goes down with the old boot."""
    node = lab.own_nodes("test_lab", 2)[1]
    probe = "/var/lib/fleetlab-exec-probe-%s" % uuid.uuid4().hex
    assert not os.path.exists(probe)
    lab.exec(node, "echo %s > %s" % (node, probe))
    before = lab.boot_id(node)
    read, refused, killed, wrong = 0, 0, 0, []
    try:
        lab.exec(node, ["systemctl", "reboot"])
        deadline = time.time() + 120
        while time.time() < deadline:
            try:
                # What fleetlab exec runs, without its Python start: fast enough to land in a boot.
                argv = nodes.exec_argv(node, ["sh", "-c", "cat %s && cat /run/lab-boot-id" % probe])
            except LabError:
                refused += 1
                time.sleep(0.005)
                continue
            proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=False)
            lines = proc.stdout.split()
            if proc.returncode == -signal.SIGKILL or proc.stderr.startswith("nsenter: "):
                # Entered the old boot just before it went down (killed with the node, as a command on
                # a real host dies with its reboot), or it went down between the check and the entry
                # (nsenter found no namespace to enter). Neither reads anybody's files.
                killed += 1
                continue
            if proc.returncode != 0 or lines[:1] != [node]:
                wrong.append((proc.returncode, proc.stdout + proc.stderr))
                continue
            read += 1
            if lines[1:] and lines[1] != before:
                break
        else:
            raise AssertionError("node %s did not come back" % node)
    finally:
        lab.wait_up(node, 120)
        lab.exec(node, ["rm", "-f", probe])
    assert not wrong, wrong[:3]
    assert read and refused, (read, refused, killed)
    assert not os.path.exists(probe)


def test_claim_gives_an_owner_the_same_new_nodes_each_time(lab):
    first = json.loads(lab.fleetlab("claim", "test_lab", "--count", "2", "--json").stdout)
    assert len(first) == 2 and all(int(name[4:]) > 10 for name in first)
    assert set(first) <= set(lab.nodes)
    assert json.loads(lab.fleetlab("claim", "test_lab", "--count", "2", "--json").stdout) == first
    other = json.loads(lab.fleetlab("claim", "test_lab-other", "--json").stdout)
    assert not set(other) & set(first)
    bad = lab.fleetlab("claim", "test_lab", "--count", "0", check=False)
    assert bad.returncode != 0 and "--count 0 is out of range" in bad.stderr


@pytest.mark.lab_last
def test_up_grows_then_down_leaves_nothing_behind(lab):
    if os.environ.get("FLEETLAB_KEEP") or not os.environ.get("FLEETLAB_DOWN_TEST"):
        pytest.skip("takes the shared lab down: runs under 'make test-lab' (FLEETLAB_DOWN_TEST=1)")
    count = len(lab.nodes)
    grown = "node%02d" % (count + 1)
    lab.fleetlab("up", "--nodes", count + 1)
    assert grown in lab.nodes
    lab.ansible(grown, "-m", "ansible.builtin.raw", "-a", "true")
    state = str(lab.state)
    network = lab.info["network"]
    lab.fleetlab("down")
    lab.is_up = False
    assert not lab.state.exists()
    assert not lab.inventory.exists()
    # The machine's link into the lab, its route and the lab's guard rules are gone with it.
    assert subprocess.run(["ip", "link", "show", network["host_link"]], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL, check=False).returncode != 0
    route = subprocess.run(["ip", "-o", "route", "get", network["bridge_address"]], stdout=subprocess.PIPE,
                           text=True, check=False).stdout
    assert network["host_link"] not in route
    rules = subprocess.run(["iptables", "-w", "-S"], stdout=subprocess.PIPE, text=True, check=True).stdout
    assert '"fleetlab-guard %s"' % LAB_NETNS not in rules
    netns = os.listdir("/run/netns") if os.path.isdir("/run/netns") else []
    assert [n for n in netns if n == LAB_NETNS or n.startswith(LAB_NETNS + "-")] == []
    with open("/proc/self/mountinfo") as handle:
        assert [line for line in handle if state in line] == []
    leftovers = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as handle:
                cmdline = handle.read().replace(b"\0", b" ").decode(errors="replace")
            root = os.readlink("/proc/%s/root" % pid)
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        if (str(FLEETLAB) + " _" in cmdline and _lab_of(pid) == LAB_NETNS) or state in cmdline \
                or root.startswith(state):
            leftovers.append((pid, cmdline))
    assert leftovers == []


def _lab_of(pid):
    """The lab (FLEETLAB_NETNS) a fleetlab process was started for: make test runs three at once."""
    try:
        with open("/proc/%s/environ" % pid, "rb") as handle:
            environ = handle.read().split(b"\0")
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    for item in environ:
        if item.startswith(b"FLEETLAB_NETNS="):
            return item.split(b"=", 1)[1].decode()
    return "fleetlab"


def test_signature_server_and_signing_vars(lab):
    ivars = yaml.safe_load(lab.inventory.read_text())["all"]["vars"]
    assert ivars["fleetos_rollout_boot_time_command"] == ivars["fleetos_lab_boot_time_command"]
    assert ivars["fleetos_lab_signed_repository"] == lab.registry + "/fleetos-signed"
    assert ivars["fleetos_lab_ostree_remote"] == "fleet"
    url = ivars["fleetos_lab_sigstore_url"]
    assert url == "http://198.51.100.1:8081/"
    pid = int((lab.state / "sigstore.pid").read_text())
    with open("/proc/%d/cmdline" % pid, "rb") as handle:
        assert b"fleetlab\0_sigstore" in handle.read()
    # A connection that fails is tried again for up to 30 s (a loaded machine): the answer must be 404.
    probe = ("import time, urllib.request, urllib.error\n"
             "for attempt in range(6):\n"
             "    try:\n        urllib.request.urlopen(%r, timeout=5)\n"
             "    except urllib.error.HTTPError as e:\n        print(e.code)\n        break\n"
             "    except OSError as e:\n        print('attempt', attempt, e)\n        time.sleep(5)\n"
             % (url + "fleetos-signed/none@sha256=" + "0" * 64 + "/signature-1"))
    node = lab.nodes[0]
    answer = lab.exec(node, [NODE_PYTHON, "-c", probe]).stdout.strip().splitlines()
    log = (lab.state / "sigstore.log").read_text()[-2000:] if (lab.state / "sigstore.log").exists() else ""
    assert answer[-1:] == ["404"], (answer, log)
    reads = [e for e in lab.journal("signature_read") if e.get("node") == node and e["status"] == 404]
    assert reads and reads[-1]["path"].endswith("/signature-1")
