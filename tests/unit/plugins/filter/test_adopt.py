# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError
from ansible_collections.fleetos.layering.plugins.filter import adopt
from ansible_collections.fleetos.layering.plugins.module_utils.host import _rpm_ostree

C1 = "5d3965ddc23da6be463b043cd818e26108286f028f95f1bdf9806372b17368fd"
C2 = "f6f57efc27907e9cb02b25abe8f662c83e5518573f8ac72db56d352f0e53132a"
D1 = "sha256:" + "1" * 64
D2 = "sha256:" + "2" * 64
NAME = "198.51.100.1:5000/fleetos/lab-os"
REFSPEC = "fedora:fedora/x86_64/coreos/stable"


def _deployment(checksum, booted=False, staged=False, **raw):
    record = {"id": "fedora-coreos-%s.0" % checksum, "osname": "fedora-coreos", "checksum": checksum,
              "serial": 0, "booted": booted, "staged": staged}
    record.update(raw)
    return record


def _status(*deployments):
    """What rpm_ostree_info returns: the parsed rpm-ostree status."""
    return _rpm_ostree.parse_status({"deployments": list(deployments)})


def _image(digest=D1, labels=None, name=NAME):
    if labels is None:
        labels = {"ostree.bootable": "true", "ostree.commit": C1, "version": "1.0"}
    return {"image": "%s@%s" % (name, digest), "digest": digest, "labels": labels}


BASE_DIFF_IDS = ["sha256:" + "a" * 64, "sha256:" + "b" * 64]


def _derived_adoption(diff_ids):
    """The plan of a host booted from a disk image on C1, for an image whose ostree base is BASE_DIFF_IDS."""
    labels = {"ostree.bootable": "true", "ostree.commit": C1, "version": "1.0", "ostree.final-diffid": BASE_DIFF_IDS[-1]}
    image = dict(_image(labels=labels), diff_ids=diff_ids)
    return adopt.cloud_image_adopt_plan(_status(_deployment(C1, booted=True, origin=REFSPEC)), image)


def test_the_base_image_alone_is_adopted_in_place():
    plan = _derived_adoption(BASE_DIFF_IDS)
    assert (plan["action"], plan["commit"], plan["reboot_required"]) == ("adopt", C1, False)


@pytest.mark.parametrize(("diff_ids", "said"), [
    (BASE_DIFF_IDS + ["sha256:" + "c" * 64], "has 1 layer(s) above its ostree base"),
    (BASE_DIFF_IDS + ["sha256:" + "c" * 64, "sha256:" + "d" * 64], "has 2 layer(s) above its ostree base"),
    (None, "layers that were not read"),
])
def test_a_derived_image_is_rebased_onto_never_adopted_on_its_inherited_commit_label(diff_ids, said):
    plan = _derived_adoption(diff_ids)
    assert (plan["action"], plan["commit"], plan["reboot_required"]) == ("rebase", None, True)
    assert plan["origin_set"] == {}
    assert said in plan["reason"] and C1[:12] in plan["reason"]


def test_booted_commit_equal_to_the_label_is_adopted_in_place():
    status = _status(_deployment(C1, booted=True, origin=REFSPEC))
    plan = adopt.cloud_image_adopt_plan(status, _image())
    reference = "ostree-unverified-registry:%s@%s" % (NAME, D1)
    assert plan["action"] == "adopt"
    assert plan["reference"] == reference
    assert plan["origin_set"] == {"origin.container-image-reference": reference}
    assert plan["origin_remove"] == ["origin.refspec", "origin.custom-url", "origin.custom-description"]
    assert plan["reboot_required"] is False and plan["warning"] is None
    assert plan["booted_image"] == REFSPEC
    assert "no pull, no reboot" in plan["reason"]


@pytest.mark.parametrize(("transport", "remote", "prefix"), [
    ("signed", None, "ostree-image-signed:docker://"),
    ("remote", "fedora", "ostree-remote-image:fedora:docker://"),
])
def test_the_adopted_reference_uses_the_transport(transport, remote, prefix):
    status = _status(_deployment(C1, booted=True, origin=REFSPEC))
    plan = adopt.cloud_image_adopt_plan(status, _image(), transport=transport, ostree_remote=remote)
    assert plan["origin_set"]["origin.container-image-reference"] == "%s%s@%s" % (prefix, NAME, D1)


@pytest.mark.parametrize("label", ["ostree.commit", "com.coreos.ostree-commit", "io.openshift.os-commit"])
def test_each_commit_label_is_read(label):
    status = _status(_deployment(C1, booted=True, origin=REFSPEC))
    plan = adopt.cloud_image_adopt_plan(status, _image(labels={"ostree.bootable": "true", label: C1}))
    assert (plan["action"], plan["commit"]) == ("adopt", C1)


def test_ostree_commit_label_wins_over_the_older_ones():
    labels = {"ostree.bootable": "true", "ostree.commit": C2, "com.coreos.ostree-commit": C1}
    plan = adopt.cloud_image_adopt_plan(_status(_deployment(C1, booted=True, origin=REFSPEC)), _image(labels=labels))
    assert (plan["commit"], plan["action"]) == (C2, "rebase")


def test_other_commit_stages_a_rebase():
    status = _status(_deployment(C2, booted=True, origin=REFSPEC))
    plan = adopt.cloud_image_adopt_plan(status, _image())
    assert plan["action"] == "rebase" and plan["reboot_required"] is True
    assert plan["origin_set"] == {} and plan["origin_remove"] == []
    assert "%s is not the image's commit %s" % (C2[:12], C1[:12]) in plan["reason"]


def test_layered_packages_on_the_commit_are_not_adopted():
    status = _status(_deployment(C2, booted=True, origin=REFSPEC, **{"base-checksum": C1, "packages": ["htop"]}))
    plan = adopt.cloud_image_adopt_plan(status, _image())
    assert plan["action"] == "rebase"
    assert "layers packages" in plan["reason"]


def test_image_without_a_commit_label_is_rebased():
    plan = adopt.cloud_image_adopt_plan(_status(_deployment(C1, booted=True, origin=REFSPEC)),
                                        _image(labels={"ostree.bootable": "true"}))
    assert plan["action"] == "rebase" and plan["commit"] is None
    assert "names no ostree commit" in plan["reason"]


@pytest.mark.parametrize("reference", [
    "ostree-unverified-registry:%s@%s" % (NAME, D1),
    "ostree-image-signed:docker://%s@%s" % (NAME, D1),
])
def test_already_adopted_is_unchanged(reference):
    status = _status(_deployment(C1, booted=True, **{"container-image-reference": reference}))
    plan = adopt.cloud_image_adopt_plan(status, _image())
    assert plan["action"] == "unchanged" and plan["reboot_required"] is False
    assert plan["origin_set"] == {}


def test_digest_not_reference_decides_unchanged():
    # The booted reference names the image by tag; rpm-ostree reports its digest.
    status = _status(_deployment(C1, booted=True, **{"container-image-reference": "ostree-unverified-registry:%s:1.0" % NAME,
                                                     "container-image-reference-digest": D1}))
    assert adopt.cloud_image_adopt_plan(status, _image())["action"] == "unchanged"


def test_same_commit_other_image_is_adopted_to_the_new_digest():
    status = _status(_deployment(C1, booted=True, **{"container-image-reference": "ostree-unverified-registry:%s@%s" % (NAME, D2)}))
    plan = adopt.cloud_image_adopt_plan(status, _image())
    assert plan["action"] == "adopt"
    assert plan["origin_set"]["origin.container-image-reference"].endswith(D1)


def test_another_staged_deployment_is_reported():
    status = _status(_deployment(C2, staged=True, origin=REFSPEC), _deployment(C1, booted=True, origin=REFSPEC))
    plan = adopt.cloud_image_adopt_plan(status, _image())
    assert plan["action"] == "adopt" and plan["reboot_required"] is True
    assert plan["warning"].startswith("a staged deployment (%s" % C2[:12])


def test_staged_deployment_at_the_image_is_no_warning():
    staged = _deployment(C1, staged=True, **{"container-image-reference": "ostree-unverified-registry:%s@%s" % (NAME, D1)})
    status = _status(staged, _deployment(C2, booted=True, origin=REFSPEC))
    plan = adopt.cloud_image_adopt_plan(status, _image())
    assert plan["action"] == "rebase" and plan["warning"] is None


LEGACY_LABELS = {"com.coreos.ostree-commit": C1, "version": "411.86"}


def test_legacy_oscontainer_is_adopted_with_a_pivot_origin():
    status = _status(_deployment(C1, booted=True, origin=REFSPEC))
    plan = adopt.cloud_image_adopt_plan(status, _image(labels=LEGACY_LABELS), description="Fleet")
    url = "pivot://%s@%s" % (NAME, D1)
    assert plan["legacy"] is True and plan["action"] == "adopt"
    assert plan["origin_set"] == {"origin.refspec": C1, "origin.custom-url": url, "origin.custom-description": "Fleet"}
    assert plan["origin_remove"] == ["origin.container-image-reference"]


def test_legacy_pivot_origin_at_the_digest_is_unchanged():
    status = _status(_deployment(C1, booted=True, origin=C1,
                                 **{"custom-origin": ["pivot://%s@%s" % (NAME, D1), "Provisioned from oscontainer"]}))
    plan = adopt.cloud_image_adopt_plan(status, _image(labels=LEGACY_LABELS))
    assert plan["action"] == "unchanged"


def test_pivot_origin_of_the_same_commit_is_adopted_into_the_bootable_image():
    status = _status(_deployment(C1, booted=True, origin=C1,
                                 **{"custom-origin": ["pivot://%s@%s" % (NAME, D2), "Provisioned from oscontainer"]}))
    plan = adopt.cloud_image_adopt_plan(status, _image())
    assert plan["action"] == "adopt"
    assert plan["booted_image"] == "pivot://%s@%s" % (NAME, D2)
    assert "origin.custom-url" in plan["origin_remove"]


@pytest.mark.parametrize(("status", "image", "message"), [
    (_status(_deployment(C1, origin=REFSPEC)), _image(), "has no booted deployment"),
    (_status(_deployment(C1, booted=True, origin=REFSPEC)), _image(labels={"version": "1"}),
     "neither a bootable container image"),
    (_status(_deployment(C1, booted=True, origin=REFSPEC)), dict(_image(), digest="sha256:12"), "has no manifest digest"),
    (_status(_deployment(C1, booted=True, origin=REFSPEC)), dict(_image(), image="%s@%s" % (NAME, D2)),
     "does not have the digest"),
    (_status(_deployment(C1, booted=True, origin=REFSPEC)), dict(_image(), labels=["a"]), "not a mapping"),
    ("status", _image(), "two mappings"),
])
def test_errors_name_the_cause(status, image, message):
    with pytest.raises(AnsibleFilterError, match=message):
        adopt.cloud_image_adopt_plan(status, image)


def test_filter_is_registered():
    assert adopt.FilterModule().filters()["cloud_image_adopt_plan"] is adopt.cloud_image_adopt_plan


def test_report_counts_and_fails_hosts_without_a_result():
    hostvars = {
        "n1": {"cloud_image_adopt_result": {"status": "adopted", "changed": True, "reboot_required": False,
                                            "reason": "same | commit", "booted_checksum": C1, "image": "i"}},
        "n2": {"cloud_image_adopt_result": {"status": "staged", "changed": True, "reboot_required": True,
                                            "reason": "older", "booted_checksum": C2, "image": "i",
                                            "warning": "w"}},
        "n3": {},
    }
    report = adopt.cloud_image_adopt_report(["n3", "n2", "n1", "n1"], hostvars)
    assert [r["host"] for r in report["hosts"]] == ["n1", "n2", "n3"]
    assert report["counts"] == {"adopted": 1, "staged": 1, "rebase-needed": 0, "unchanged": 0, "skipped": 0, "failed": 1}
    assert report["result"] == "failed" and report["changed"] == 2
    assert report["reboot_required"] == ["n2"]
    assert report["hosts"][2]["error"] == adopt.NO_RESULT
    text = adopt.cloud_image_adopt_report_markdown(report)
    assert "Result: **failed**. adopted 1, staged 1, failed 1." in text
    assert "Reboot required (a rebase is staged): n2." in text
    assert "| n1 | adopted | %s | i |  | same \\| commit |" % C1[:12] in text
    assert "older; warning: w |" in text


def test_report_of_a_clean_run_succeeds():
    report = adopt.cloud_image_adopt_report(["n1"], {"n1": {"cloud_image_adopt_result": {"status": "unchanged"}}})
    assert (report["result"], report["changed"], report["reboot_required"]) == ("success", 0, [])


@pytest.mark.parametrize(("hosts", "hostvars", "message"), [
    ("n1", {}, "list of host names"),
    (["n1"], {"n1": {"cloud_image_adopt_result": {"status": "done"}}}, "unknown adoption status 'done'"),
])
def test_report_errors(hosts, hostvars, message):
    with pytest.raises(AnsibleFilterError, match=message):
        adopt.cloud_image_adopt_report(hosts, hostvars)


@pytest.mark.parametrize("want, inspection, status, field, text", [
    ({"host": "n1", "action": "skipped", "wanted": None, "reason": "nothing assigns n1"}, None,
     "skipped", "reason", "nothing assigns n1"),
    ({"host": "n1", "action": "error", "wanted": "REG//x", "reason": "fleetos_rollout_image is invalid: ..."}, None,
     "failed", "error", "fleetos_rollout_image is invalid: ..."),
    ({"host": "n1", "action": None, "wanted": "reg.example/os:1"}, {"failed": True, "msg": "Failed to resolve\n image"},
     "failed", "error", "inspecting reg.example/os:1 failed: Failed to resolve image"),
    ({"host": "n1", "action": None, "wanted": "reg.example/os:1"}, None,
     "failed", "error", "inspecting reg.example/os:1 failed: no result"),
])
def test_precheck_settles_hosts_before_adoption(want, inspection, status, field, text):
    record = adopt.cloud_image_adopt_precheck(want, inspection)
    assert (record["host"], record["status"], record[field], record["changed"]) == ("n1", status, text, False)


def test_precheck_lets_an_inspected_image_through():
    want = {"host": "n1", "action": None, "wanted": "reg.example/os:1"}
    assert adopt.cloud_image_adopt_precheck(want, {"digest": "sha256:" + "a" * 64}) is None
    with pytest.raises(AnsibleFilterError, match="needs the host's plan record"):
        adopt.cloud_image_adopt_precheck("n1", None)


def test_a_bootc_host_on_a_commit_without_image_metadata_is_switched_not_adopted():
    """bootc reads a deployment's image from the metadata of a commit it imported: a disk image's
    commit has none, so rewriting the origin would leave bootc without an image; a switch is staged."""
    status = dict(_status(_deployment(C1, booted=True, origin=REFSPEC)), backend="bootc")
    status["booted"] = dict(status["booted"], image=None)
    plan = adopt.cloud_image_adopt_plan(status, _image())
    assert plan["action"] == "rebase" and plan["reboot_required"] is True
    assert plan["origin_set"] == {}
    assert "bootc tracks an image only on a commit it imported" in plan["reason"]
    # The same host read with rpm-ostree is adopted in place.
    assert adopt.cloud_image_adopt_plan(dict(status, backend="rpm-ostree"), _image())["action"] == "adopt"
