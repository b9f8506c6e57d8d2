"""The lab's bootc stand-in (lab/node/usr/bin/bootc) on a bootc-managed lab node.

Conformance against the real bootc contract: `bootc status --format=json` validates
against bootc's host-v1 JSON schema and has the key structure of the real `bootc status`
samples (both read from ../shared/reference/fixtures; skipped when that is absent), and
the switch (download-only) / upgrade --check / rollback cycles behave as bootc's do on
the node's real ostree state, across real lab reboots.

The node is this module's own (`fleetlab claim ... --backend bootc`); each test leaves
nothing staged.
"""

import json
import os
import tempfile
import uuid
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(os.environ.get("FLEETOS_REFERENCE_FIXTURES",
                               str(REPO.parent / "shared" / "reference" / "fixtures")))
SCHEMA = FIXTURES / "bootc-status__bootc-docs__host-v1.schema.json"
# Keys of the real samples that the v1 schema no longer has (bootc's legacy `isContainer`
# of v1alpha1): reported by the samples, not part of the v1 contract.


def samples():
    out = {}
    for path in sorted(FIXTURES.glob("bootc-status__*")):
        if path.name.endswith(".json") and "schema" not in path.name:
            out[path.name] = json.loads(path.read_text())
        elif path.name.endswith((".yaml", ".yml")):
            out[path.name] = yaml.safe_load(path.read_text())
    return out


def need_fixtures():
    if not SCHEMA.exists() or not samples():
        pytest.skip("the bootc reference fixtures are not here (%s): conformance needs ../shared" % FIXTURES)


def bootc(lab, node, *args, check=False):
    return lab.exec(node, ["bootc"] + [str(a) for a in args], check=check)


def status(lab, node):
    proc = bootc(lab, node, "status", "--format=json", check=True)
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def node(lab):
    proc = lab.fleetlab("claim", "test_bootc_standin", "--count", "1", "--backend", "bootc", "--json")
    return json.loads(proc.stdout)[0]


@pytest.fixture(scope="module")
def image_a(lab):
    """An image built on the lab base, with a file of its own; -> (pinned reference, digest)."""
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "a")
        with open(src, "w") as handle:
            handle.write("bootc stand-in test image a\n")
        digest = lab.build_image("fleetos/bootc-a:1", "--from", "fleetos/lab-os:1.0",
                                 "--add-file", "%s:/usr/share/bootc-standin/a" % src)
    return "%s/fleetos/bootc-a@%s" % (lab.registry, digest), digest


@pytest.fixture
def clean(lab, node):
    """Nothing staged before or after the test."""
    lab.exec(node, "rpm-ostree cleanup -p >/dev/null; rm -f /run/ostree/staged-deployment-locked")
    yield
    lab.exec(node, "rpm-ostree cleanup -p >/dev/null; rm -f /run/ostree/staged-deployment-locked")


# --------------------------------------------------------------------------
# conformance of `bootc status`


def test_version_says_it_is_the_lab_standin(lab, node):
    proc = bootc(lab, node, "--version", check=True)
    first, second = proc.stdout.splitlines()[:2]
    assert first.startswith("bootc 1."), proc.stdout
    assert "stand-in" in second and "not the real bootc" in second


def test_only_bootc_nodes_have_bootc(lab, node):
    info = lab.info["nodes"]
    assert info[node].get("backend") == "bootc"
    other = next(n for n in lab.nodes if info[n].get("backend") != "bootc")
    assert lab.exec(other, "command -v bootc", check=False).returncode != 0
    assert lab.exec(node, "command -v bootc", check=False).stdout.strip() == "/usr/bin/bootc"
    rows = {r["node"]: r for r in json.loads(lab.fleetlab("status", "--json").stdout)["nodes"]}
    assert rows[node]["backend"] == "bootc" and rows[other]["backend"] == "rpm-ostree"


def test_status_validates_against_the_host_v1_schema(lab, node, clean):
    need_fixtures()
    import jsonschema
    schema = json.loads(SCHEMA.read_text())
    doc = status(lab, node)
    jsonschema.Draft202012Validator(schema).validate(doc)
    assert doc["apiVersion"] == "org.containers.bootc/v1" and doc["kind"] == "BootcHost"
    assert doc["status"]["type"] == "bootcHost"
    booted = doc["status"]["booted"]
    assert booted["image"]["imageDigest"].startswith("sha256:")
    assert booted["ostree"]["checksum"] == lab.exec(
        node, "ostree admin status | sed -n 's/^\\* [^ ]* \\([0-9a-f]*\\)\\..*/\\1/p'").stdout.strip()
    # --json (older callers) and the YAML form carry the same object.
    assert json.loads(bootc(lab, node, "status", "--json", check=True).stdout) == doc
    assert yaml.safe_load(bootc(lab, node, "status", "--format=yaml", check=True).stdout) == doc
    # --booted drops the other slots.
    only = json.loads(bootc(lab, node, "status", "--format=json", "--booted", check=True).stdout)
    assert only["status"]["staged"] is None and only["status"]["rollback"] is None


def _paths(value, kind, schema, out, prefix=""):
    """Key paths of a status object, each with the $defs type it belongs to."""
    if not isinstance(value, dict):
        return
    props = schema["$defs"][kind]["properties"] if kind != "Host" else schema["properties"]
    for key, item in value.items():
        out.setdefault((prefix, kind), set()).add(key)
        ref = _ref_of(props.get(key, {}))
        if ref and isinstance(item, dict):
            _paths(item, ref, schema, out, "%s.%s" % (prefix, key) if prefix else key)


def _ref_of(prop):
    for cand in [prop] + list(prop.get("anyOf", [])):
        if "$ref" in cand:
            return cand["$ref"].rsplit("/", 1)[1]
    return None


def test_status_has_the_key_structure_of_the_real_samples(lab, node, image_a, clean):
    """Every key that every real sample has at a place (where that place exists), and that
    the v1 schema defines, is in the stand-in's status; the stand-in emits no key the
    schema does not define. Keys come from the samples, not from this test."""
    need_fixtures()
    schema = json.loads(SCHEMA.read_text())
    ref, _digest = image_a
    # A staged deployment too, so that the staged slot is compared as well.
    if status(lab, node)["status"]["booted"]["image"]["image"]["image"] == ref:
        ref = lab.base_image + "@" + lab.base_digest
    bootc(lab, node, "switch", "--download-only", ref, check=True)
    doc = status(lab, node)
    assert doc["status"]["staged"] is not None

    mine = {}
    _paths(doc, "Host", schema, mine)
    for where, keys in mine.items():
        kind = where[1]
        known = set(schema["properties"] if kind == "Host" else schema["$defs"][kind].get("properties", {}))
        assert keys <= known, "stand-in keys unknown to the schema at %s: %s" % (where, keys - known)

    legacy = set()
    for name, sample in samples().items():
        theirs = {}
        _paths(sample, "Host", schema, theirs)
        for (path, kind), keys in theirs.items():
            known = set(schema["properties"] if kind == "Host" else schema["$defs"][kind].get("properties", {}))
            legacy |= {(path, k) for k in keys - known}
            if (path, kind) not in mine:
                continue  # e.g. a rollback or cachedUpdate this node does not have now
            # Keys whose presence depends on the value: ImageReference.signature is left out
            # for an unverified image (serde skip_serializing_if), as the JSON samples show.
            optional = {"signature"} if kind == "ImageReference" else set()
            missing = (keys & known) - mine[(path, kind)] - optional
            assert not missing, "%s: the stand-in lacks %s at %s" % (name, sorted(missing), path or "top")
    # Only v1alpha1's `isContainer` is in the samples and not in the v1 schema.
    assert {k for _p, k in legacy} <= {"isContainer"}, legacy


# --------------------------------------------------------------------------
# switch (download-only), upgrade --check, rollback, across reboots


def test_switch_download_only_stages_but_an_unplanned_reboot_does_not_apply_it(lab, node, image_a, clean):
    ref, digest = image_a
    before = status(lab, node)["status"]["booted"]
    if before["image"]["imageDigest"] == digest:
        ref, digest = lab.base_image + "@" + lab.base_digest, lab.base_digest

    proc = bootc(lab, node, "switch", "--download-only", ref, check=True)
    assert "Staged but not queued for next boot: %s" % ref in proc.stdout, proc.stdout
    assert "  Digest: %s" % digest in proc.stdout
    doc = status(lab, node)
    staged = doc["status"]["staged"]
    assert staged["downloadOnly"] is True and staged["image"]["imageDigest"] == digest
    assert doc["spec"]["image"] == {"image": ref, "transport": "registry"}
    assert bootc(lab, node, "switch", ref, check=True).stdout.strip() == "Image specification is unchanged."

    lab.reboot(node)  # not planned: a download-only deployment is not finalized
    doc = status(lab, node)
    assert doc["status"]["staged"] is None
    assert doc["status"]["booted"]["image"]["imageDigest"] == before["image"]["imageDigest"]


def test_switch_then_planned_apply_boots_the_image_and_rollback_returns(lab, node, image_a, clean):
    ref, digest = image_a
    before = status(lab, node)["status"]["booted"]
    if before["image"]["imageDigest"] == digest:
        ref, digest = lab.base_image + "@" + lab.base_digest, lab.base_digest

    bootc(lab, node, "switch", "--download-only", ref, check=True)
    proc = bootc(lab, node, "upgrade", "--from-downloaded", check=True)
    assert proc.stdout.strip() == "Staged deployment will now be applied on reboot"
    staged = status(lab, node)["status"]["staged"]
    assert staged["downloadOnly"] is False and staged["image"]["imageDigest"] == digest
    assert lab.exec(node, ["cat", "/run/reboot-required"]).stdout == "bootc: Reboot required for image: " + digest

    lab.reboot(node)
    doc = status(lab, node)
    assert doc["status"]["booted"]["image"]["imageDigest"] == digest
    assert doc["status"]["booted"]["image"]["image"]["image"] == ref
    assert doc["status"]["staged"] is None
    assert doc["status"]["rollback"]["ostree"]["checksum"] == before["ostree"]["checksum"]
    assert doc["status"]["rollbackQueued"] is False

    proc = bootc(lab, node, "rollback", check=True)
    assert proc.stdout.strip() == "Next boot: rollback deployment"
    doc = status(lab, node)
    assert doc["status"]["rollbackQueued"] is True and doc["spec"]["bootOrder"] == "rollback"
    # A second rollback reverts the queued one; a third queues it again.
    proc = bootc(lab, node, "rollback", check=True)
    assert proc.stdout.splitlines() == ["notice: Reverting queued rollback state", "Next boot: current deployment"]
    assert status(lab, node)["status"]["rollbackQueued"] is False
    bootc(lab, node, "rollback", check=True)

    lab.reboot(node)
    doc = status(lab, node)
    assert doc["status"]["booted"]["ostree"]["checksum"] == before["ostree"]["checksum"]
    assert doc["status"]["booted"]["image"]["imageDigest"] == before["image"]["imageDigest"]
    assert doc["status"]["rollback"]["image"]["imageDigest"] == digest
    assert doc["status"]["rollbackQueued"] is False


def test_upgrade_check_fills_cached_update_and_upgrade_download_only_stages_it(lab, node, clean):
    tag = "%s/fleetos/bootc-t:latest" % lab.registry
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "t")
        digests = []
        for n in (1, 2):
            with open(src, "w") as handle:
                handle.write("bootc stand-in tag test %s %d\n" % (uuid.uuid4(), n))
            digests.append(lab.build_image("fleetos/bootc-t:latest", "--from", "fleetos/lab-os:1.0",
                                           "--version", "t.%d" % n,
                                           "--add-file", "%s:/usr/share/bootc-standin/t" % src))
            if n == 1:
                bootc(lab, node, "switch", "--download-only", tag, check=True)
                assert status(lab, node)["status"]["staged"]["image"]["imageDigest"] == digests[0]
                proc = bootc(lab, node, "upgrade", "--check", check=True)
                assert proc.stdout.strip() == "No changes in: %s" % tag
    old, new = digests
    proc = bootc(lab, node, "upgrade", "--check", check=True)
    assert proc.stdout.splitlines() == ["Update available for: %s" % tag, "  Version: t.2", "  Digest: %s" % new]
    staged = status(lab, node)["status"]["staged"]
    assert staged["image"]["imageDigest"] == old
    assert staged["cachedUpdate"]["imageDigest"] == new and staged["cachedUpdate"]["version"] == "t.2"
    assert staged["cachedUpdate"]["image"] == {"image": tag, "transport": "registry"}

    proc = bootc(lab, node, "upgrade", "--download-only", check=True)
    assert "Staged but not queued for next boot: %s" % tag in proc.stdout
    staged = status(lab, node)["status"]["staged"]
    assert staged["image"]["imageDigest"] == new and staged["downloadOnly"] is True
    proc = bootc(lab, node, "upgrade", check=True)  # same digest: only unlocks it
    assert proc.stdout.strip() == "Staged deployment will now be applied on reboot"
    assert status(lab, node)["status"]["staged"]["downloadOnly"] is False


def test_errors_are_one_line_as_bootc_gives_them(lab, node, clean):
    proc = bootc(lab, node, "upgrade", "--from-downloaded")
    assert (proc.returncode, proc.stderr) == (1, "error: Upgrading: No staged deployment found\n")
    proc = bootc(lab, node, "upgrade", "--check", "--apply")
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: the argument '--check' cannot be used with '--apply'")
    proc = bootc(lab, node, "status", "--format-version", "2")
    assert (proc.returncode, proc.stderr) == (1, "error: Status: Unsupported format version: 2\n")
    before = status(lab, node)
    proc = bootc(lab, node, "switch", "--transport", "nosuch", "x")
    assert proc.returncode == 1 and proc.stderr.startswith("error: Switching: ")
    assert status(lab, node) == before
