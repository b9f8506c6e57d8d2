"""The lab's rpm-ostree stand-in (lab/node/usr/bin/rpm-ostree) on a really booted node.

Each test leaves the node's boot state as it found it (nothing staged, same booted
deployment).
"""

import hashlib
import json
import os
import tempfile
import time
import uuid

import pytest
import yaml

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


# --------------------------------------------------------------------------
# Signed images and verification per transport (on a node of this module's own).


def inventory_vars(lab):
    return yaml.safe_load(lab.inventory.read_text())["all"]["vars"]


@pytest.fixture(scope="module")
def own_node(lab):
    return lab.own_nodes("test_standin_signed", 1)[0]


@pytest.fixture
def own_clean(lab, own_node):
    ro(lab, own_node, "cancel")
    ro(lab, own_node, "cleanup", "-p")
    before = booted(status(lab, own_node))
    yield before
    ro(lab, own_node, "cancel")
    ro(lab, own_node, "cleanup", "-p")


@pytest.fixture(scope="module")
def signed_images(lab):
    """Under the signed namespace: signed with the lab key, unsigned, signed with the
    wrong key; each image with a file of its own (so distinct digests)."""
    registry_prefix = lab.registry + "/"
    namespace = inventory_vars(lab)["fleetos_lab_signed_repository"]
    assert namespace.startswith(registry_prefix)
    namespace = namespace[len(registry_prefix):]
    run = uuid.uuid4().hex[:8]
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for kind, flags in (("good", ["--sign"]), ("unsigned", []), ("wrong", ["--sign-key", "wrong"])):
            src = os.path.join(tmp, kind)
            with open(src, "w") as handle:
                handle.write("signed test image %s %s\n" % (kind, run))
            tag = "%s/standin-signed:%s-%s" % (namespace, kind, run)
            lab.build_image(tag, "--from", "fleetos/lab-os:1.0", "--add-file",
                            "%s:/usr/share/standin-signed/%s" % (src, kind), *flags)
            record = lab.image_record(tag)
            out[kind] = dict(record, image="%s/%s" % (lab.registry, tag))
    assert out["good"]["signed_by"] == "lab" and out["wrong"]["signed_by"] == "wrong"
    assert out["unsigned"]["signed_by"] is None
    return out


def verified_ref(form, remote, image):
    if form == "image-signed":
        return "ostree-image-signed:docker://" + image
    if form == "remote-image":
        return "ostree-remote-image:%s:docker://%s" % (remote, image)
    return "ostree-remote-registry:%s:%s" % (remote, image)


def repo_refs(lab, node):
    return sorted(lab.exec(node, ["ostree", "refs"]).stdout.split())


def test_node_trusts_the_lab_key_for_the_signed_namespace(lab, own_node):
    ivars = inventory_vars(lab)
    policy = json.loads(lab.exec(own_node, ["cat", "/etc/containers/policy.json"]).stdout)
    assert policy["default"] == [{"type": "reject"}]
    docker = policy["transports"]["docker"]
    (req,) = docker[ivars["fleetos_lab_signed_repository"]]
    assert (req["type"], req["keyType"]) == ("signedBy", "GPGKeys")
    assert lab.exec(own_node, ["gpg", "--show-keys", req["keyPath"]]).stdout.count("fleetlab image signing key") == 1
    assert docker[lab.registry] == [{"type": "insecureAcceptAnything"}]
    lookaside = yaml.safe_load(lab.exec(own_node, ["cat", "/etc/containers/registries.d/fleetlab.yaml"]).stdout)
    assert lookaside["docker"][lab.registry]["sigstore"] == ivars["fleetos_lab_sigstore_url"]
    remote = ivars["fleetos_lab_ostree_remote"]
    assert remote in lab.exec(own_node, ["ostree", "remote", "list"]).stdout.split()
    gpg_verify = lab.exec(own_node, ["ostree", "config", "get", 'remote "%s".gpg-verify' % remote]).stdout
    assert gpg_verify.strip() == "true"


@pytest.mark.parametrize("form", ["image-signed", "remote-image", "remote-registry"])
def test_signed_image_stages_under_verifying_transports(lab, own_node, own_clean, signed_images, form):
    img = signed_images["good"]
    ref = verified_ref(form, inventory_vars(lab)["fleetos_lab_ostree_remote"], img["image"])
    mark = time.time()
    proc = ro(lab, own_node, "rebase", ref)
    assert proc.returncode == 0, proc
    (new,) = staged(status(lab, own_node))
    assert new["container-image-reference"] == ref
    assert new["container-image-reference-digest"] == img["digest"]
    assert new["checksum"] == img["commit"]  # sysroot/ostree objects are not part of the tree
    shown = lab.exec(own_node, ["ostree", "show", img["commit"]]).stdout
    assert "Found 1 signature" in shown and 'Good signature from "fleetlab image signing key' in shown
    if form == "image-signed":
        reads = [e for e in lab.journal("signature_read") if e["ts"] >= mark and e.get("node") == own_node]
        assert any(e["status"] == 200 and img["digest"].replace(":", "=") in e["path"] for e in reads), reads


@pytest.mark.parametrize("kind,form,message", [
    ("unsigned", "image-signed", "A signature was required, but no signature exists"),
    ("wrong", "image-signed", "Invalid GPG signature"),
    ("unsigned", "remote-image", "Using remote fleet for verification"),
    ("wrong", "remote-image", "public key not found"),
    ("unsigned", "remote-registry", "Using remote fleet for verification"),
    ("wrong", "remote-registry", "public key not found"),
])
def test_unsigned_or_wrong_key_is_refused_and_nothing_staged(lab, own_node, own_clean, signed_images,
                                                              kind, form, message):
    img = signed_images[kind]
    ref = verified_ref(form, inventory_vars(lab)["fleetos_lab_ostree_remote"], img["image"])
    refs = repo_refs(lab, own_node)
    proc = ro(lab, own_node, "rebase", ref)
    assert proc.returncode == 1, proc
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert message in lines[0], lines[0]
    assert not staged(status(lab, own_node))
    assert lab.exec(own_node, ["test", "-e", "/run/ostree/staged-deployment"], check=False).returncode != 0
    assert repo_refs(lab, own_node) == refs


@pytest.mark.parametrize("kind", ["unsigned", "wrong"])
def test_unverified_transport_accepts_any_image(lab, own_node, own_clean, signed_images, kind):
    img = signed_images[kind]
    ref = "ostree-unverified-registry:" + img["image"]
    proc = ro(lab, own_node, "rebase", ref)
    assert proc.returncode == 0, proc
    (new,) = staged(status(lab, own_node))
    assert (new["container-image-reference"], new["checksum"]) == (ref, img["commit"])
    assert new["container-image-reference-digest"] == img["digest"]


def test_image_signed_refused_when_the_policy_default_accepts_anything(lab, own_node, own_clean, signed_images):
    """ostree-ext refuses ostree-image-signed with a default of insecureAcceptAnything,
    even for an image the policy's scopes would verify."""
    path = "/etc/containers/policy.json"
    original = lab.exec(own_node, ["cat", path]).stdout
    policy = json.loads(original)
    policy["default"] = [{"type": "insecureAcceptAnything"}]
    write = "printf '%%s' '%s' > %s" % (json.dumps(policy), path)
    try:
        lab.exec(own_node, write)
        img = signed_images["good"]
        proc = ro(lab, own_node, "rebase", "ostree-image-signed:docker://" + img["image"])
        assert proc.returncode == 1, proc
        assert proc.stderr == ("error: Preparing import: Fetching manifest: containers-policy.json specifies "
                               "a default of `insecureAcceptAnything`; refusing usage\n")
        assert not staged(status(lab, own_node))
        remote = ro(lab, own_node, "rebase", verified_ref("remote-image", "fleet", img["image"]))
        assert remote.returncode == 0, remote  # that rule is ostree-image-signed's alone
    finally:
        lab.exec(own_node, "printf '%%s' '%s' > %s" % (original, path))
    assert json.loads(lab.exec(own_node, ["cat", path]).stdout) == json.loads(original)


# --------------------------------------------------------------------------
# Multi-arch images (an OCI image index)


@pytest.fixture(scope="module")
def multi_image(lab):
    tag = "fleetos/standin-multi:%s" % uuid.uuid4().hex[:8]
    with tempfile.NamedTemporaryFile("w", suffix=".txt") as handle:
        handle.write("multi-arch %s\n" % tag)
        handle.flush()
        out = json.loads(lab.fleetlab("image", "build", tag, "--json", "--multi-arch", "--from", "fleetos/lab-os:1.0",
                                      "--add-file", "%s:/usr/share/standin/multi" % handle.name).stdout)
    assert out == lab.image_record(tag)
    return dict(out, image="%s/%s" % (lab.registry, tag))


def test_multi_arch_pushes_an_index_with_each_platform(lab, own_node, multi_image):
    raw = lab.exec(own_node, ["skopeo", "inspect", "--raw", "--authfile", "/etc/ostree/auth.json",
                              "docker://" + multi_image["image"]]).stdout
    index = json.loads(raw)
    assert "sha256:" + hashlib.sha256(raw.encode()).hexdigest() == multi_image["digest"]
    assert index["mediaType"] == "application/vnd.oci.image.index.v1+json"
    platforms = {m["platform"]["architecture"]: m["digest"] for m in index["manifests"]}
    assert len(platforms) >= 2 and set(platforms) >= {"amd64", "arm64"}
    assert platforms == multi_image["manifests"]
    assert len(set(platforms.values())) == len(platforms)
    listing = lab.fleetlab("image", "list").stdout
    line = [l for l in listing.splitlines() if l.startswith(multi_image["name"] + ":" + multi_image["tag"])][0]
    assert multi_image["digest"] in line and "amd64=" + platforms["amd64"] in line


@pytest.mark.parametrize("pin", ["tag", "index-digest"])
def test_multi_arch_rebase_reports_the_platform_manifest_digest(lab, own_node, own_clean, multi_image, pin):
    repo = multi_image["reference"]
    name = multi_image["image"] if pin == "tag" else "%s@%s" % (repo, multi_image["digest"])
    ref = "ostree-unverified-registry:" + name
    proc = ro(lab, own_node, "rebase", ref)
    assert proc.returncode == 0, proc
    (new,) = staged(status(lab, own_node))
    assert new["container-image-reference"] == ref  # exactly what was asked
    assert new["container-image-reference-digest"] == multi_image["manifests"]["amd64"]
    assert new["container-image-reference-digest"] != multi_image["digest"]
    assert new["checksum"] == multi_image["commit"]


def test_multi_arch_upgrade_with_nothing_new_reads_no_blob(lab, own_node, own_clean, multi_image):
    ref = "ostree-unverified-registry:" + multi_image["image"]
    assert ro(lab, own_node, "rebase", ref).returncode == 0
    (before,) = staged(status(lab, own_node))
    mark = time.time()
    proc = ro(lab, own_node, "upgrade", "--unchanged-exit-77")
    assert proc.returncode == 77, proc
    assert "No upgrade available." in proc.stdout
    check = ro(lab, own_node, "upgrade", "--check")
    assert check.returncode == 77 and "No updates available." in check.stdout, check
    (after,) = staged(status(lab, own_node))
    assert (after["checksum"], after["serial"], after["container-image-reference-digest"]) == (
        before["checksum"], before["serial"], multi_image["manifests"]["amd64"])
    time.sleep(0.5)  # the registry wrapper journals reads as its access log arrives
    reads = [e for e in lab.journal("blob_read") if e["ts"] >= mark and e.get("node") == own_node]
    assert reads == []
