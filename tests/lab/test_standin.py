"""The lab's rpm-ostree stand-in (lab/node/usr/bin/rpm-ostree) on a really booted node.

Each test leaves the node's boot state as it found it (nothing staged, same booted
deployment).
"""

import json
import os
import tempfile
import time

import pytest

BUSY_HINT = " You can cancel the current transaction with `rpm-ostree cancel`"


def ro(lab, node, *args, env=None):
    cmd = ["rpm-ostree"] + list(args)
    if env:
        cmd = ["env"] + ["%s=%s" % kv for kv in env.items()] + cmd
    return lab.exec(node, cmd, check=False)


def status(lab, node):
    return lab.rpm_ostree_status(node)


def staged(doc):
    return [d for d in doc["deployments"] if d.get("staged")]


def booted(doc):
    found = [d for d in doc["deployments"] if d["booted"]]
    assert len(found) == 1, doc
    return found[0]


@pytest.fixture(scope="module")
def node(lab):
    return "node04"  # lab tests share the fleet: the stand-in tests own node04


@pytest.fixture(scope="module")
def standin_images(lab):
    """Two images built on the lab base, each with one file of its own."""
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("a", "b"):
            src = os.path.join(tmp, name)
            with open(src, "w") as handle:
                handle.write("stand-in test image %s\n" % name)
            tag = "fleetos/standin-%s:1" % name
            digest = lab.build_image(tag, "--from", "fleetos/lab-os:1.0",
                                     "--add-file", "%s:/usr/share/standin/%s" % (src, name))
            record = lab.image_record(tag)
            out[name] = {"digest": digest, "commit": record["commit"],
                         "repo": "%s/fleetos/standin-%s" % (lab.registry, name),
                         "tag": "%s/%s" % (lab.registry, tag)}
    return out


@pytest.fixture
def clean(lab, node):
    """Nothing staged or pending before and after the test; no transaction left over."""
    ro(lab, node, "cancel")
    ro(lab, node, "cleanup", "-p")
    before = booted(status(lab, node))
    yield before
    ro(lab, node, "cancel")
    ro(lab, node, "cleanup", "-p")
    lab.exec(node, ["rm", "-f", "/run/ostree/staged-deployment-locked"])


def test_version_says_emulated_lab_standin(lab, node):
    proc = ro(lab, node, "--version")
    assert proc.returncode == 0, proc
    assert proc.stdout.startswith("rpm-ostree:\n Version: '20"), proc.stdout
    assert "lab stand-in" in proc.stdout
    assert "emulated" in proc.stdout


def test_unknown_option_is_an_error_line(lab, node):
    proc = ro(lab, node, "status", "--no-such-option")
    assert proc.returncode == 1
    assert proc.stderr.startswith("error: "), proc.stderr


def test_status_json_has_one_booted_deployment(lab, node, clean):
    doc = status(lab, node)
    assert doc["transaction"] is None
    assert set(doc) >= {"deployments", "transaction", "cached-update"}
    b = booted(doc)
    assert b["id"] == "%s-%s.%d" % (b["osname"], b["checksum"], b["serial"])
    assert isinstance(b["timestamp"], int)
    human = ro(lab, node, "status")
    assert human.returncode == 0
    assert human.stdout.startswith("State: idle\nDeployments:\n")
    assert "\u25cf " in human.stdout


def test_rebase_digest_pinned_stages_then_unchanged_77(lab, node, standin_images, clean):
    img = standin_images["a"]
    ref = "ostree-unverified-registry:%s@%s" % (img["repo"], img["digest"])
    proc = ro(lab, node, "rebase", "--unchanged-exit-77", ref)
    assert proc.returncode == 0, proc
    assert "Staging deployment...done" in proc.stdout
    assert 'Run "systemctl reboot" to start a reboot' in proc.stdout
    doc = status(lab, node)
    (new,) = staged(doc)
    assert doc["deployments"][0] is not None and doc["deployments"][0]["staged"]
    assert new["container-image-reference"] == ref
    assert new["container-image-reference-digest"] == img["digest"]
    assert new["checksum"] == img["commit"]  # the image's ostree.commit label, reproduced
    assert new["base-commit-meta"]["ostree.manifest-digest"] == img["digest"]
    assert "origin" not in new
    assert lab.exec(node, ["test", "-e", "/run/ostree/staged-deployment"], check=False).returncode == 0

    again = ro(lab, node, "rebase", "--unchanged-exit-77", ref)
    assert again.returncode == 77, again
    assert "No change." in again.stdout
    plain = ro(lab, node, "rebase", ref)
    assert plain.returncode == 0, plain
    assert "No change." in plain.stdout
    assert len(staged(status(lab, node))) == 1


def test_cleanup_pending_drops_staged(lab, node, standin_images, clean):
    img = standin_images["b"]
    assert ro(lab, node, "rebase", "ostree-unverified-registry:" + img["tag"]).returncode == 0
    assert staged(status(lab, node))
    proc = ro(lab, node, "cleanup", "-p")
    assert proc.returncode == 0, proc
    doc = status(lab, node)
    assert not staged(doc)
    assert booted(doc)["checksum"] == clean["checksum"]
    assert lab.exec(node, ["test", "-e", "/run/ostree/staged-deployment"], check=False).returncode != 0
    assert "Deployments unchanged." in ro(lab, node, "cleanup", "-p").stdout
    nothing = ro(lab, node, "cleanup")
    assert nothing.returncode == 1 and nothing.stderr.startswith("error: ")


def test_lock_finalization_marks_staged(lab, node, standin_images, clean):
    img = standin_images["a"]
    ref = "ostree-unverified-registry:%s@%s" % (img["repo"], img["digest"])
    assert ro(lab, node, "rebase", "--lock-finalization", ref).returncode == 0
    (new,) = staged(status(lab, node))
    assert new["finalization-locked"] is True
    assert lab.exec(node, ["test", "-e", "/run/ostree/staged-deployment-locked"], check=False).returncode == 0
    wrong = ro(lab, node, "finalize-deployment", "0" * 64)
    assert wrong.returncode == 1
    assert "Expected staged base checksum" in wrong.stderr


def test_staged_reboot_booted_then_rollback(lab, node, standin_images, clean):
    img = standin_images["a"]
    original = clean
    ref = "ostree-unverified-registry:%s@%s" % (img["repo"], img["digest"])
    assert ro(lab, node, "rebase", ref).returncode == 0
    lab.reboot(node)
    doc = status(lab, node)
    now = booted(doc)
    assert now["checksum"] == img["commit"]
    assert now["container-image-reference"] == ref
    assert now["container-image-reference-digest"] == img["digest"]
    assert not staged(doc)
    assert lab.exec(node, ["cat", "/usr/share/standin/a"]).stdout == "stand-in test image a\n"
    # The previous deployment is the rollback one.
    assert doc["deployments"][1]["checksum"] == original["checksum"]

    proc = ro(lab, node, "rollback")
    assert proc.returncode == 0, proc
    assert "Moving '%s.%d' to be first deployment" % (original["checksum"], original["serial"]) in proc.stdout
    doc = status(lab, node)
    assert doc["deployments"][0]["checksum"] == original["checksum"]
    assert doc["deployments"][0]["booted"] is False
    lab.reboot(node)
    back = booted(status(lab, node))
    assert back["checksum"] == original["checksum"]
    assert back.get("container-image-reference") == original.get("container-image-reference")
    assert back.get("origin") == original.get("origin")


def test_custom_origin_rebase(lab, node, clean):
    csum = clean["checksum"]
    url, desc = "https://fleet.example.com/pools/workers", "Managed by fleetos.layering"
    args = ["rebase", ":" + csum, "--custom-origin-url", url, "--custom-origin-description", desc]
    proc = ro(lab, node, *args)
    assert proc.returncode == 0, proc
    (new,) = staged(status(lab, node))
    assert new["checksum"] == csum
    assert new["origin"] == csum
    assert new["custom-origin"] == [url, desc]
    assert "container-image-reference" not in new
    # Options after the refspec work too; the same origin again is no change.
    again = ro(lab, node, "rebase", "--unchanged-exit-77", "--custom-origin-url", url,
               "--custom-origin-description", desc, ":" + csum)
    assert again.returncode == 77, again
    half = ro(lab, node, "rebase", ":" + csum, "--custom-origin-url", url)
    assert half.returncode == 1 and half.stderr.startswith("error: ")


def test_signed_transports_refused_under_insecure_policy(lab, node, standin_images, clean):
    policy = json.loads(lab.exec(node, ["cat", "/etc/containers/policy.json"]).stdout)
    if policy.get("transports", {}).get("docker"):
        pytest.skip("the node's policy has docker scopes; this test needs insecureAcceptAnything")
    img = standin_images["a"]
    for ref in ("ostree-image-signed:docker://" + img["tag"],
                "ostree-remote-image:fleetos:docker://" + img["tag"]):
        proc = ro(lab, node, "rebase", ref)
        assert proc.returncode == 1, proc
        assert proc.stderr.startswith("error: "), proc.stderr
        assert "signature" in proc.stderr
        assert not staged(status(lab, node))


def test_busy_transaction_error_and_cancel(lab, node, clean):
    lab.exec(node, "RPMOSTREE_LAB_HOLD_SECONDS=30 setsid rpm-ostree cleanup -b "
                   "</dev/null >/dev/null 2>&1 &")
    deadline = time.time() + 20
    txn = None
    while time.time() < deadline:
        txn = status(lab, node)["transaction"]
        if txn:
            break
        time.sleep(0.2)
    assert isinstance(txn, list) and len(txn) == 3 and all(isinstance(x, str) for x in txn), txn
    human = ro(lab, node, "status")
    assert human.stdout.startswith("State: busy\nTransaction: cleanup\n")
    proc = ro(lab, node, "rollback")
    assert proc.returncode == 1
    assert proc.stderr == "error: Transaction in progress: cleanup\n" + BUSY_HINT + "\n"
    cancel = ro(lab, node, "cancel")
    assert cancel.returncode == 0
    assert status(lab, node)["transaction"] is None
    none = ro(lab, node, "cancel")
    assert none.returncode == 0 and "No active transaction." in none.stdout


def test_upgrade_unchanged_on_pinned_container(lab, node, clean):
    ref = clean.get("container-image-reference")
    if not ref or "@sha256:" not in ref:
        pytest.skip("the node is not booted from a digest-pinned container image")
    proc = ro(lab, node, "upgrade", "--unchanged-exit-77")
    assert proc.returncode == 77, proc
    check = ro(lab, node, "upgrade", "--check")
    assert check.returncode == 77, check
    assert not staged(status(lab, node))
