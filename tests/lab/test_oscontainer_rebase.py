"""oscontainer_rebase on a lab node: a legacy oscontainer (ostree repo at /srv/repo) as a rebase source.

The tests use one plain node of their own with a Python interpreter, which this module alone
needs (conftest's Lab.own_nodes: made after every node the lab has the first time, reused by a
rerun); on a node without one it fails with one sentence. The node is put back at the lab's
base image at the start and at the end.
"""

import json
import os
import subprocess
import uuid

import pytest

from conftest import REPO, VENV_BIN, collections_path

DESCRIPTION = "fleetos lab test"


def _base_ref(lab):
    return "ostree-unverified-registry:%s/fleetos/lab-os@%s" % (lab.registry, lab.base_digest)


def _deployments(lab, node):
    return lab.rpm_ostree_status(node)["deployments"]


def _booted(lab, node):
    return [d for d in _deployments(lab, node) if d["booted"]][0]


def _staged(lab, node):
    return [d for d in _deployments(lab, node) if d.get("staged")]


def reset_to_base(lab, node):
    """Boot the lab's base image with nothing staged."""
    booted = _booted(lab, node)
    if booted["checksum"] != lab.base_record["commit"] or booted.get("container-image-reference") != _base_ref(lab):
        lab.exec(node, ["rpm-ostree", "rebase", _base_ref(lab)])
        lab.reboot(node)
    elif _staged(lab, node):
        lab.exec(node, ["rpm-ostree", "cleanup", "-p"])
    booted = _booted(lab, node)
    assert booted["checksum"] == lab.base_record["commit"]
    assert _staged(lab, node) == []


@pytest.fixture(scope="module")
def node(lab):
    name = lab.own_nodes("test_oscontainer_rebase", 1, with_python=True)[0]
    lab.wait_up(name)
    reset_to_base(lab, name)
    yield name
    reset_to_base(lab, name)


@pytest.fixture(scope="module")
def legacy(lab, tmp_path_factory):
    """A legacy oscontainer built from the base image plus a marker file (so its commit is new)."""
    token = uuid.uuid4().hex[:8]
    marker = tmp_path_factory.mktemp("oscontainer") / "marker"
    marker.write_text("legacy %s\n" % token)
    tag = "fleetos/test-oscontainer:%s" % token
    record = json.loads(lab.fleetlab("image", "build", tag, "--from", "fleetos/lab-os:1.0", "--add-file",
                                     "%s:/usr/share/fleetlab/oscontainer" % marker, "--legacy-oscontainer",
                                     "--json").stdout)
    assert record["commit"] != lab.base_record["commit"]
    record["image"] = "%s/fleetos/test-oscontainer@%s" % (lab.registry, record["digest"])
    record["token"] = token
    return record


def run_module(lab, node, tmp_path, params, check_mode=False):
    """Run the module ad hoc on ``node``; -> its result (from the tree callback).

    The tree callback leaves out ``failed`` and ``diff``: ``rc`` is the exit status of
    ansible, and ``before``/``after`` are what the diff is made of.
    """
    tree = tmp_path / ("tree-%s" % uuid.uuid4().hex[:8])
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(collections_path()), ANSIBLE_NOCOLOR="1",
               ANSIBLE_HOST_KEY_CHECKING="True", ANSIBLE_DEPRECATION_WARNINGS="False")
    argv = [str(VENV_BIN / "ansible"), "-i", str(lab.inventory), node, "-m", "fleetos.layering.oscontainer_rebase",
            "-a", json.dumps(params), "--tree", str(tree)] + (["--check"] if check_mode else [])
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=900, env=env,
                          cwd=str(REPO), check=False)
    path = tree / node
    assert path.exists(), "no result for %s (rc=%d): %s%s" % (node, proc.returncode, proc.stdout, proc.stderr)
    result = json.loads(path.read_text())
    result["rc"] = proc.returncode
    return result


def _tmp_listing(lab, node):
    return lab.exec(node, "ls -A /var/tmp; echo --; ls -A /tmp").stdout


def _assert_one_sentence_failure(result, text):
    assert result["rc"] == 2, result
    assert text in result["msg"], result["msg"]
    assert len(result["msg"].strip().splitlines()) == 1
    assert "exception" not in result, result.get("exception")


def test_a_host_without_python_is_told_in_one_sentence(lab, legacy, tmp_path):
    plain = lab.nodes[0]
    before = _deployments(lab, plain)
    result = run_module(lab, plain, tmp_path, {"image": legacy["image"]})
    _assert_one_sentence_failure(result, "oscontainer_rebase needs a Python interpreter on the host and %s has none"
                                 % plain)
    assert _deployments(lab, plain) == before


def test_a_bootable_image_is_refused_and_nothing_is_staged(lab, node, tmp_path):
    before = _deployments(lab, node)
    result = run_module(lab, node, tmp_path, {"image": "%s/fleetos/lab-os@%s" % (lab.registry, lab.base_digest)})
    _assert_one_sentence_failure(result, "is not a legacy oscontainer: it has no label com.coreos.ostree-commit")
    assert _deployments(lab, node) == before


def test_a_digest_the_registry_lacks_fails_clearly(lab, node, legacy, tmp_path):
    before = _deployments(lab, node)
    listing = _tmp_listing(lab, node)
    wrong = "%s/fleetos/test-oscontainer@sha256:%s" % (lab.registry, "e" * 64)
    result = run_module(lab, node, tmp_path, {"image": wrong})
    _assert_one_sentence_failure(result, "Failed to inspect image '%s': the registry has no such image" % wrong)
    assert _deployments(lab, node) == before
    assert _tmp_listing(lab, node) == listing


def test_a_tag_is_refused(lab, node, tmp_path):
    result = run_module(lab, node, tmp_path, {"image": "%s/fleetos/test-oscontainer:latest" % lab.registry})
    _assert_one_sentence_failure(result, "has no digest: give %s/fleetos/test-oscontainer@sha256:" % lab.registry)


def test_rebase_reboot_and_rerun(lab, node, legacy, tmp_path):
    params = {"image": legacy["image"], "custom_description": DESCRIPTION}
    url = "pivot://" + legacy["image"]
    before = _deployments(lab, node)
    listing = _tmp_listing(lab, node)

    predicted = run_module(lab, node, tmp_path, params, check_mode=True)
    assert predicted["rc"] == 0, predicted
    assert predicted["changed"] is True, predicted
    assert predicted["fetched"] is True
    assert predicted["commit"] == legacy["commit"]
    assert predicted["reboot_required"] is True
    assert predicted["before"] == {"checksum": lab.base_record["commit"], "reference": _base_ref(lab),
                                   "digest": lab.base_digest, "origin": None}
    assert predicted["after"] == {"checksum": legacy["commit"], "reference": url, "digest": legacy["digest"],
                                  "origin": legacy["commit"]}
    assert _deployments(lab, node) == before
    assert lab.exec(node, ["ostree", "--repo=/sysroot/ostree/repo", "show", legacy["commit"]],
                    check=False).returncode != 0

    applied = run_module(lab, node, tmp_path, dict(params, auth_file="/etc/ostree/auth.json"))
    assert applied["rc"] == 0, applied
    assert applied["changed"] is True, applied
    assert applied["fetched"] is True
    assert applied["reference"] == url
    assert applied["digest"] == legacy["digest"]
    assert applied["reboot_required"] is True
    assert applied["after"] == predicted["after"]
    assert applied["before"] == predicted["before"]
    (staged,) = _staged(lab, node)
    assert staged["checksum"] == legacy["commit"]
    assert staged["custom-origin"] == [url, DESCRIPTION]
    assert "container-image-reference" not in staged
    assert _booted(lab, node)["checksum"] == lab.base_record["commit"]
    assert _tmp_listing(lab, node) == listing

    again = run_module(lab, node, tmp_path, params)
    assert again["rc"] == 0, again
    assert again["changed"] is False, again
    assert again["fetched"] is False
    assert again["before"] == again["after"] == applied["after"]
    assert [d["checksum"] for d in _deployments(lab, node)] == [legacy["commit"]] + [
        d["checksum"] for d in before]

    boot_id = lab.boot_id(node)
    lab.exec(node, ["systemctl", "reboot"], check=False)
    assert lab.wait_up(node, not_boot_id=boot_id) != boot_id
    booted = _booted(lab, node)
    assert booted["checksum"] == legacy["commit"]
    assert booted["custom-origin"] == [url, DESCRIPTION]
    assert _staged(lab, node) == []
    assert lab.exec(node, ["cat", "/usr/share/fleetlab/oscontainer"]).stdout == "legacy %s\n" % legacy["token"]

    rebooted = run_module(lab, node, tmp_path, params, check_mode=True)
    assert rebooted["rc"] == 0, rebooted
    assert rebooted["changed"] is False, rebooted
    assert rebooted["reboot_required"] is False
    final = run_module(lab, node, tmp_path, params)
    assert final["rc"] == 0, final
    assert final["changed"] is False, final
    assert final["fetched"] is False
    assert final["reboot_required"] is False
    assert _tmp_listing(lab, node) == listing
