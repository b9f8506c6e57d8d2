"""Unit tests of fleetlab's pure logic (no lab needed)."""

import hashlib
import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "lab"))

from fleetlablib import cli, common, fleetlock, images, inventory, net, nodes, registry, signing  # noqa: E402
from fleetlablib.cli import build_parser  # noqa: E402

UMOCI_TAG = re.compile(r"^[a-z0-9]+(?:[._-][a-z0-9]+)*$")


@pytest.fixture(autouse=True)
def _empty_state(tmp_path, monkeypatch):
    monkeypatch.setenv("FLEETLAB_STATE", str(tmp_path / "state"))


@pytest.mark.parametrize("text,name,tag", [
    ("fleetos/lab-os:1.0", "fleetos/lab-os", "1.0"),
    ("lab-os:latest", "lab-os", "latest"),
    ("a/b/c:V_1.2-rc1", "a/b/c", "V_1.2-rc1"),
    ("198.51.100.1:5000/fleetos/lab-os:2", "fleetos/lab-os", "2"),
])
def test_parse_name_accepts(text, name, tag):
    assert images.parse_name(text) == (name, tag)


@pytest.mark.parametrize("text", [
    "fleetos/lab-os", "Fleetos/lab-os:1", "fleetos//x:1", "x:", ":1", "x:-bad", "a b:1",
    "fleetos/lab-os:1@sha256:" + "0" * 64, "x:" + "t" * 129,
])
def test_parse_name_refuses_with_the_form(text):
    with pytest.raises(common.LabError, match=r"malformed image name .*expected NAME:TAG"):
        images.parse_name(text)


def test_layout_tags_are_valid_for_umoci_and_distinct():
    pairs = [("fleetos/lab-os", "1.0"), ("fleetos/lab-os", "1-0"), ("fleetos/lab_os", "1.0"),
             ("x", "UPPER"), ("x", "upper")]
    tags = [images.layout_tag(n, t) for n, t in pairs]
    assert all(UMOCI_TAG.match(t) for t in tags), tags
    assert len(set(tags)) == len(tags)


def test_access_log_blob_reads_are_recognised():
    line = ('198.51.100.11 - - [29/Nov/2026:22:10:11 +0000] "GET /v2/fleetos/lab-os/blobs/sha256:'
            + "ab" * 32 + ' HTTP/1.1" 200 2100186 "" "skopeo/1.9.3"')
    match = registry.ACCESS_RE.match(line)
    assert match.group("method") == "GET" and match.group("status") == "200"
    assert match.group("bytes") == "2100186"
    blob = registry.BLOB_RE.match(match.group("path"))
    assert blob.group("repo") == "fleetos/lab-os"
    assert blob.group("digest") == "sha256:" + "ab" * 32
    manifest = registry.BLOB_RE.match("/v2/fleetos/lab-os/manifests/1.0")
    assert manifest is None


@pytest.mark.parametrize("ip,node", [
    ("198.51.100.1", "controller"), ("198.51.100.11", "node01"), ("198.51.100.110", "node100"),
    ("198.51.100.5", None), ("garbage", None),
])
def test_blob_reader_is_named_by_address(ip, node):
    assert registry._client_node(ip) == node  # pylint: disable=protected-access


def test_inventory_yaml_round_trips():
    tree = {"all": {"vars": {"a": "x %h", "n": 3, "flag": True},
                    "children": {"fleet": {"hosts": {"node01": {
                        "fleetos_node_labels": {"node-role.kubernetes.io/worker": "", "k": "v: w"}}}}}}}
    text = "\n".join(inventory._yaml(tree, 0))  # pylint: disable=protected-access
    assert yaml.safe_load(text) == tree


@pytest.mark.parametrize("ip", ["192.0.2.10", "10.0.0.1", "198.51.101.1"])
def test_only_test_net_2_is_ever_configured(ip):
    with pytest.raises(common.LabError, match="only 198.51.100.0/24"):
        net._check_lab_address(ip)  # pylint: disable=protected-access


def test_node_names_and_addresses():
    assert common.node_name(7) == "node07"
    assert common.node_index("node07") == 7
    assert common.node_ip(7) == "198.51.100.17"
    assert common.node_ip(common.MAX_NODES).startswith("198.51.100.")
    assert int(common.node_ip(common.MAX_NODES).rsplit(".", 1)[1]) < 255
    with pytest.raises(common.LabError, match="unknown node 'web1'"):
        common.node_index("web1")


def test_each_slice_holds_its_addresses_and_no_two_overlap():
    import ipaddress

    lab_range = ipaddress.ip_network(common.LAB_RANGE)
    subnets = []
    for index in range(len(common.SLICES)):
        subnet, bridge, host, first, most = common.slice_network(index)
        network = ipaddress.ip_network(subnet)
        assert network.subnet_of(lab_range)
        assert all(not network.overlaps(other) for other in subnets), subnet
        subnets.append(network)
        nodes_ = [ipaddress.ip_address(common.SUBNET_PREFIX + str(first + n)) for n in (1, most)]
        addresses = [ipaddress.ip_address(bridge), ipaddress.ip_address(host)] + nodes_
        assert all(a in network and a not in (network.network_address, network.broadcast_address)
                   for a in addresses), (subnet, addresses)
        assert len(set(addresses)) == 4 and nodes_[0] > ipaddress.ip_address(host)
        assert ipaddress.ip_address(common.SUBNET_PREFIX + str(first + most + 1)) == network.broadcast_address
    # The default lab grows to about a hundred nodes (the rollout benches claim 12, 24 and 48 after node10).
    assert common.slice_network(0)[4] >= 100 and min(common.slice_network(i)[4] for i in (1, 2)) >= 50


@pytest.mark.parametrize("argv,message", [
    (["up", "--nodes", "x"], "invalid int value"),
    (["fault", "node01", "melt"], "invalid choice"),
    (["image"], "required"),
])
def test_cli_parse_errors_raise_one_line_lab_errors(argv, message):
    with pytest.raises(common.LabError, match=message):
        build_parser().parse_args(argv)


def test_fleetlock_semaphore_is_owned_recursive_and_counting():
    sem = fleetlock.Semaphores(default_slots=2, slots={"infra": 1})
    assert sem.acquire("workers", "a") == ["a"]
    assert sem.acquire("workers", "a") == ["a"]  # recursive: still one slot
    assert sem.acquire("workers", "b") == ["a", "b"]
    with pytest.raises(fleetlock.FleetLockError) as full:
        sem.acquire("workers", "c")
    assert (full.value.status, full.value.kind) == (409, "failed_lock_semaphore_full")
    assert sem.release("workers", "c") == ["a", "b"]  # not held: a no-op
    assert sem.release("workers", "a") == ["b"]
    assert sem.acquire("workers", "c") == ["b", "c"]
    assert sem.acquire("infra", "x") == ["x"]
    with pytest.raises(fleetlock.FleetLockError):
        sem.acquire("infra", "y")
    assert sem.snapshot()["holders"] == {"workers": ["b", "c"], "infra": ["x"]}


def test_fleetlock_saves_from_many_threads_leave_a_whole_file_of_the_last_holders(tmp_path):
    # The server saves after each request, from the request's thread: two saves at once once left
    # one file with the end of another's text after it (a temporary file shared by both writers).
    path = tmp_path / "holders.json"
    sem = fleetlock.Semaphores(default_slots=1000)
    save = fleetlock.saver(sem, path)
    torn = []
    stop = threading.Event()

    def read():
        while not stop.is_set():
            try:
                common.read_json(path, {})
            except ValueError as exc:
                torn.append(str(exc))

    def client(group):
        for n in range(60):
            sem.acquire(group, "%s-%03d" % (group, n))
            save()
            if n % 2:
                sem.release(group, "%s-%03d" % (group, n))
                save()

    reader = threading.Thread(target=read)
    reader.start()
    clients = [threading.Thread(target=client, args=("g%d" % i,)) for i in range(6)]
    for thread in clients:
        thread.start()
    for thread in clients:
        thread.join()
    stop.set()
    reader.join()
    assert torn == []
    assert common.read_json(path) == sem.snapshot()
    assert len(sem.snapshot()["holders"]["g0"]) == 30
    assert [p.name for p in tmp_path.iterdir()] == ["holders.json"]


@pytest.mark.parametrize("headers,body,kind", [
    ({}, b'{"client_params": {"id": "a", "group": "g"}}', "missing_fleet_lock_protocol_header"),
    ({"fleet-lock-protocol": "false"}, b'{"client_params": {"id": "a", "group": "g"}}',
     "missing_fleet_lock_protocol_header"),
    ({"fleet-lock-protocol": "true"}, b"not json", "invalid_body"),
    ({"fleet-lock-protocol": "true"}, b'{"client_params": []}', "invalid_client_params"),
    ({"fleet-lock-protocol": "true"}, b'{"client_params": {"id": "", "group": "g"}}', "invalid_client_params"),
    ({"fleet-lock-protocol": "true"}, b'{"client_params": {"id": "a"}}', "invalid_client_params"),
])
def test_fleetlock_requests_are_validated(headers, body, kind):
    with pytest.raises(fleetlock.FleetLockError) as err:
        fleetlock.parse_request(headers, body)
    assert err.value.kind == kind and err.value.status == 400


def test_fleetlock_request_from_the_real_sample_form():
    body = b'{"client_params": {"group": "default", "id": "c988d2509fdf5cdcbed39037c56406fb"}}'
    assert fleetlock.parse_request({"fleet-lock-protocol": "true"}, body) == (
        "default", "c988d2509fdf5cdcbed39037c56406fb")


# --------------------------------------------------------------------------
# Signed and multi-arch images


def test_image_build_parses_sign_and_multi_arch_flags():
    args = build_parser().parse_args(["image", "build", "fleetos-signed/x:1", "--sign", "--multi-arch"])
    assert (args.sign, args.sign_key, args.multi_arch) == (True, None, True)
    args = build_parser().parse_args(["image", "build", "fleetos-signed/x:1", "--sign-key", "wrong"])
    assert (args.sign, args.sign_key, args.multi_arch) == (False, "wrong", False)
    assert build_parser().parse_args(["image", "list", "--json"]).json is True


def test_node_policy_rejects_by_default_and_requires_the_lab_key_for_signed_images():
    policy = signing.node_policy()
    assert policy["default"] == [{"type": "reject"}]
    docker = policy["transports"]["docker"]
    reg = registry.address()
    assert set(docker) == {reg, reg + "/" + common.SIGNED_NAMESPACE}
    (req,) = docker[signing.signed_repository()]
    assert req == {"type": "signedBy", "keyType": "GPGKeys", "keyPath": signing.NODE_PUBKEY,
                   "signedIdentity": {"type": "matchRepoDigestOrExact"}}
    assert docker[reg] == [{"type": "insecureAcceptAnything"}]
    for transport in ("oci", "dir", "containers-storage"):
        assert policy["transports"][transport] == {"": [{"type": "insecureAcceptAnything"}]}


def test_node_lookaside_config_names_the_signature_server():
    doc = yaml.safe_load(signing.node_registries_d())
    assert doc == {"docker": {registry.address(): {"sigstore": "http://198.51.100.1:8081/"}}}
    assert signing.signature_dir("fleetos-signed/a", "sha256:" + "ab" * 32).name == "a@sha256=" + "ab" * 32


def test_inventory_carries_the_rollout_boot_command_and_signing_vars(tmp_path, monkeypatch):
    monkeypatch.setenv("FLEETLAB_INVENTORY", str(tmp_path / "inv"))
    lab = {"nodes": {"node01": {"address": "198.51.100.11", "pool": "workers", "labels": {"a": "b"}}},
           "base_image_ref": "198.51.100.1:5000/fleetos/lab-os@sha256:" + "0" * 64}
    inventory.write(lab)
    hosts, all_vars = inventory.read_hosts(tmp_path / "inv" / "hosts.yml")
    raw = yaml.safe_load((tmp_path / "inv" / "hosts.yml").read_text())["all"]["vars"]
    assert raw["fleetos_rollout_boot_time_command"] == "cat /run/lab-boot-id"
    assert raw["fleetos_lab_boot_time_command"] == "cat /run/lab-boot-id"
    assert raw["fleetos_lab_signed_repository"] == "198.51.100.1:5000/fleetos-signed"
    assert raw["fleetos_lab_ostree_remote"] == "fleet"
    assert raw["fleetos_lab_sigstore_url"] == "http://198.51.100.1:8081/"
    assert all_vars == raw and hosts["node01"]["ansible_host"] == "198.51.100.11"


def _standin():
    import importlib.machinery
    import importlib.util
    path = str(Path(__file__).resolve().parents[2] / "lab" / "node" / "usr" / "bin" / "rpm-ostree")
    loader = importlib.machinery.SourceFileLoader("rpm_ostree_standin", path)
    spec = importlib.util.spec_from_loader("rpm_ostree_standin", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def test_standin_picks_the_platform_manifest_of_an_index(monkeypatch):
    standin = _standin()
    monkeypatch.setattr(standin, "node_architecture", lambda: "amd64")
    index = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": [
        {"digest": "sha256:" + "a" * 64, "platform": {"architecture": "arm64", "os": "linux", "variant": "v8"}},
        {"digest": "sha256:" + "b" * 64, "platform": {"architecture": "amd64", "os": "linux"}}]}
    assert standin.platform_manifest_digest(json.dumps(index)) == "sha256:" + "b" * 64
    manifest = json.dumps({"schemaVersion": 2, "config": {}, "layers": []})
    assert standin.platform_manifest_digest(manifest) == "sha256:" + hashlib.sha256(manifest.encode()).hexdigest()
    index["manifests"].pop()
    with pytest.raises(standin.Error, match="no image found in image index for architecture amd64"):
        standin.platform_manifest_digest(json.dumps(index))


@pytest.mark.parametrize("default,insecure", [
    ([{"type": "insecureAcceptAnything"}], True),
    ([{"type": "reject"}], False),
    ([{"type": "insecureAcceptAnything"}, {"type": "reject"}], False),
    (None, False),
])
def test_standin_default_insecure_rule_is_ostree_ext_s(tmp_path, monkeypatch, default, insecure):
    standin = _standin()
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps({"default": default} if default is not None else {"transports": {}}))
    monkeypatch.setattr(standin, "POLICY_FILE", str(policy))
    assert standin.container_policy_is_default_insecure() is insecure
    if insecure:
        with pytest.raises(standin.Error, match="refusing usage"):
            standin.refuse_default_insecure("signed")
    for sigmode in ("none", "remote"):
        standin.refuse_default_insecure(sigmode)  # never refused: other transports


def test_standin_skopeo_errors_are_one_line():
    standin = _standin()
    stderr = ('time="2026-12-01T01:45:57Z" level=fatal msg="copying system image from manifest list: '
              'Source image rejected: A signature was required, but no signature exists"\n')
    assert standin.skopeo_error(stderr) == ("copying system image from manifest list: Source image rejected: "
                                            "A signature was required, but no signature exists")
    assert standin.skopeo_error("plain\nlast line\n") == "last line"
    assert standin.skopeo_base("copy", "signed")[:2] == ["skopeo", "copy"]
    assert standin.skopeo_base("copy", "remote")[:3] == ["skopeo", "--insecure-policy", "copy"]


def _run_into_a_closed_pipe(argv, state):
    """Run lab/fleetlab with stdout a pipe whose reader has already gone (as after
    `fleetlab ... | head -1`); returns (exit status, stderr)."""
    fleetlab = Path(__file__).resolve().parents[2] / "lab" / "fleetlab"
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run([sys.executable, str(fleetlab)] + argv, stdout=write_end,
                              stderr=subprocess.PIPE, text=True, timeout=60, check=False,
                              env=dict(os.environ, FLEETLAB_STATE=str(state)))
    finally:
        os.close(write_end)
    return proc.returncode, proc.stderr


@pytest.mark.parametrize("argv", [["status"], ["journal"], ["image", "list"]])
def test_output_into_a_closed_pipe_ends_quietly(tmp_path, argv):
    state = tmp_path / "state"
    state.mkdir()
    lab = {"registry": "198.51.100.1:5000", "nodes": {
        "node%02d" % i: {"index": i, "address": common.node_ip(i), "pool": "workers", "labels": {}}
        for i in range(1, 4)}}
    (state / "lab.json").write_text(json.dumps(lab))
    (state / "journal.jsonl").write_text("".join(
        json.dumps({"ts": float(i), "event": "boot", "node": "node01"}) + "\n" for i in range(5000)))
    (state / "images").mkdir()
    (state / "images" / "built.json").write_text(json.dumps({"fleetos/lab-os:1.0": {
        "digest": "sha256:" + "0" * 64, "version": "1.0", "commit": "a" * 64}}))
    rc, stderr = _run_into_a_closed_pipe(argv, state)
    assert stderr == ""
    assert rc == 141  # what a shell reports for a command ended by SIGPIPE


def test_a_broken_pipe_that_is_not_stdout_is_not_hidden(monkeypatch, capsys):
    def _fails(_args):
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(cli, "cmd_journal", _fails)
    with pytest.raises(BrokenPipeError):
        cli.main(["journal"])
    capsys.readouterr()


def test_exec_refuses_a_node_whose_boot_has_not_reached_its_deployment():
    """PID 1 of a node that is booting still sees the machine's own filesystem until boot.sh
    pivots into the deployment: a command entering it then would read and write the machine's
    files (a lease read there found none). Here PID 1 is this test's process, whose root is
    the machine's: the node counts as not running."""
    assert not os.path.exists("/run/ostree-booted"), "this machine is itself ostree-booted"
    ndir = nodes.node_dir("node01")
    ndir.mkdir(parents=True)
    (ndir / "init.pid").write_text("%d\n" % os.getpid())
    assert nodes.init_pid("node01") == os.getpid()
    assert nodes.booted_pid("node01") is None
    with pytest.raises(common.LabError, match="node node01 is not running"):
        nodes.exec_argv("node01", ["true"])
