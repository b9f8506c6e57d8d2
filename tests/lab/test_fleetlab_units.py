"""Unit tests of fleetlab's pure logic (no lab needed)."""

import re
import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "lab"))

from fleetlablib import common, fleetlock, images, inventory, net, registry  # noqa: E402
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
