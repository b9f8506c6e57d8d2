# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The cloud-image adoption decision; documented in cloud_image_adopt_plan.yml next to this one."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.fleetos.layering.plugins.module_utils._errors import FleetosError, InvalidInputError
from ansible_collections.fleetos.layering.plugins.module_utils.images import _image_ref
from ansible_collections.fleetos.layering.plugins.module_utils.images._labels import (
    COMMIT_LABELS,
    LEGACY_COMMIT_LABEL,
    derived_layer_count,
    image_commit,
    imported_commit,
    is_bootable,
    is_legacy_oscontainer,
)

DEFAULT_DESCRIPTION = "Managed by fleetos.layering"

# Keys of [origin] that name what a deployment tracks; adoption replaces them.
CONTAINER_KEY = "origin.container-image-reference"
REFSPEC_KEY = "origin.refspec"
CUSTOM_URL_KEY = "origin.custom-url"
CUSTOM_DESCRIPTION_KEY = "origin.custom-description"


def _labels(info):
    labels = info.get("labels") or {}
    if not isinstance(labels, dict):
        raise InvalidInputError("the image's labels are %s, not a mapping" % type(labels).__name__)
    return labels


def _pinned_image(info):
    """-> (image, digest): the inspected image as ``registry/repository@digest``."""
    digest = info.get("digest")
    if not _image_ref.is_digest(digest):
        raise InvalidInputError("the inspected image has no manifest digest: expected %s, got %r"
                                % (_image_ref.DIGEST_FORM, digest))
    ref = _image_ref.parse(str(info.get("image") or ""))
    if ref.transport is not None:
        raise InvalidInputError("the inspected image '%s' names an rpm-ostree transport: expected "
                                "registry/repository@sha256:..." % info.get("image"))
    if ref.digest is not None and ref.digest != digest:
        raise InvalidInputError("the inspected image '%s' does not have the digest %s it was inspected at"
                                % (info.get("image"), digest))
    return "%s@%s" % (ref.name, digest), digest


def _short(checksum):
    return (checksum or "none")[:12]


def adopt_plan(status, image_info, transport="registry", ostree_remote=None, description=DEFAULT_DESCRIPTION):
    """What adopting the booted deployment into an image takes.

    ``status`` is the result of fleetos.layering.os_info (or rpm_ostree_info), ``image_info`` that of
    fleetos.layering.os_image_pull (state inspected). Commits and digests decide,
    never reference strings.
    """
    if not isinstance(status, dict) or not isinstance(image_info, dict):
        raise InvalidInputError("cloud_image_adopt_plan needs the rpm_ostree_info result and the "
                                "os_image_pull result, two mappings")
    booted = status.get("booted")
    if not isinstance(booted, dict) or not booted.get("checksum"):
        raise InvalidInputError("the host has no booted deployment in rpm-ostree status: "
                                "it is not booted from an ostree deployment")
    image, digest = _pinned_image(image_info)
    labels = _labels(image_info)
    commit = imported_commit(labels, image_info.get("diff_ids"))
    legacy = is_legacy_oscontainer(labels)
    if not legacy and not is_bootable(labels):
        raise InvalidInputError(
            "image %s is neither a bootable container image (label ostree.bootable) nor a legacy "
            "oscontainer (label %s)" % (image, LEGACY_COMMIT_LABEL))
    if legacy:
        reference = _image_ref.pivot_url(image)
    else:
        reference = _image_ref.from_image(image, transport, ostree_remote).format()
    booted_image = booted.get("image") or {}
    booted_checksum = booted["checksum"]
    staged = status.get("staged")
    plan = {
        "action": None,
        "reason": None,
        "image": image,
        "digest": digest,
        "commit": commit,
        "legacy": legacy,
        "reference": reference,
        "booted_checksum": booted_checksum,
        "booted_image": booted_image.get("reference") or booted.get("origin"),
        "origin_set": {},
        "origin_remove": [],
        "reboot_required": False,
        "warning": None,
    }
    if staged and not (staged.get("checksum") == commit and (staged.get("image") or {}).get("digest") == digest):
        plan["warning"] = (
            "a staged deployment (%s, %s) replaces the booted one at the next boot"
            % (_short(staged.get("checksum")), (staged.get("image") or {}).get("reference") or staged.get("origin")))
    if booted_image.get("digest") == digest:
        plan.update(action="unchanged", reboot_required=bool(staged) and plan["warning"] is not None,
                    reason="the booted deployment is already %s" % booted_image.get("reference"))
    elif commit is None and image_commit(labels) is not None:
        derived = derived_layer_count(labels, image_info.get("diff_ids"))
        what = ("layers that were not read or do not hold its ostree.final-diffid" if derived is None
                else "%d layer(s) above its ostree base" % derived)
        plan.update(action="rebase", reboot_required=True,
                    reason="image %s has %s: a host imports it as a merge commit of its own, not as its label's "
                           "commit %s, so a rebase is staged" % (image, what, _short(image_commit(labels))))
    elif commit is None:
        plan.update(action="rebase", reboot_required=True,
                    reason="image %s names no ostree commit (labels %s): it cannot be compared with the booted "
                           "commit %s" % (image, ", ".join(COMMIT_LABELS), _short(booted_checksum)))
    elif booted_checksum == commit and status.get("backend") == "bootc" and not booted.get("image"):
        plan.update(action="rebase", reboot_required=True,
                    reason="the booted commit %s is the image's commit, but bootc tracks an image only on a commit it "
                           "imported from one (with the image's metadata), which this one was not: a switch to %s is "
                           "staged, and the host already has the image's content" % (_short(booted_checksum), reference))
    elif booted_checksum == commit:
        if legacy:
            plan["origin_set"] = {REFSPEC_KEY: commit, CUSTOM_URL_KEY: reference,
                                  CUSTOM_DESCRIPTION_KEY: description}
            plan["origin_remove"] = [CONTAINER_KEY]
        else:
            plan["origin_set"] = {CONTAINER_KEY: reference}
            plan["origin_remove"] = [REFSPEC_KEY, CUSTOM_URL_KEY, CUSTOM_DESCRIPTION_KEY]
        plan.update(action="adopt", reboot_required=plan["warning"] is not None,
                    reason="the booted commit %s is the image's commit: the origin %s becomes %s, no pull, no reboot"
                           % (_short(booted_checksum), plan["booted_image"], reference))
    else:
        layered = booted.get("base_checksum") == commit and booted_checksum != commit
        plan.update(action="rebase", reboot_required=True,
                    reason=("the booted deployment layers packages on the image's commit %s: adopting a local "
                            "layer in place is not supported, a rebase is staged" % _short(commit)) if layered
                    else "the booted commit %s is not the image's commit %s: a rebase is staged"
                    % (_short(booted_checksum), _short(commit)))
    return plan


def adopt_precheck(want, inspection):
    """The adoption result of a host that is settled before it is looked at, or None.

    ``want`` is the host's plan record (filter rollout_plan, without resolutions): no image
    skips the host, an invalid image or transport fails it. ``inspection`` is the result of
    fleetos.layering.os_image_pull for its image; a failed one fails the host.
    """
    if not isinstance(want, dict):
        raise InvalidInputError("cloud_image_adopt_precheck needs the host's plan record, a mapping")
    record = {"host": want.get("host"), "status": None, "changed": False, "image": want.get("wanted"),
              "reboot_required": False, "reason": None, "error": None}
    if want.get("action") == "skipped":
        record.update(status="skipped", reason=want.get("reason"))
    elif want.get("action") == "error":
        record.update(status="failed", error=want.get("reason"))
    elif not isinstance(inspection, dict) or not inspection.get("digest") or inspection.get("failed"):
        cause = inspection.get("msg") if isinstance(inspection, dict) else None
        record.update(status="failed", error="inspecting %s failed: %s" % (
            want.get("wanted"), " ".join(str(cause or "no result").split())))
    else:
        return None
    return record


STATUSES = ("adopted", "staged", "rebase-needed", "unchanged", "skipped", "failed")
NO_RESULT = "no result: the host was unreachable, or its play stopped before the adoption"


def adopt_report(hosts, hostvars):
    """The per-host results of a run of the role, counted; hosts without one are failed."""
    if isinstance(hosts, str) or not isinstance(hosts, (list, tuple)):
        raise InvalidInputError("cloud_image_adopt_report needs a list of host names")
    records = []
    for host in sorted(set(hosts)):
        result = (hostvars.get(host) or {}).get("cloud_image_adopt_result")
        if isinstance(result, dict):
            record = dict(result)
        else:
            record = {"status": "failed", "changed": False, "error": NO_RESULT}
        record["host"] = host
        if record.get("status") not in STATUSES:
            raise InvalidInputError("host %s has an unknown adoption status %r" % (host, record.get("status")))
        records.append(record)
    counts = dict((status, sum(1 for r in records if r["status"] == status)) for status in STATUSES)
    return {
        "result": "failed" if counts["failed"] else "success",
        "counts": counts,
        "changed": sum(1 for r in records if r.get("changed")),
        "reboot_required": [r["host"] for r in records if r.get("reboot_required")],
        "hosts": records,
    }


def _cell(value):
    return str("" if value is None else value).replace("|", "\\|").replace("\n", " ")


def adopt_report_markdown(report):
    """A Markdown summary of cloud_image_adopt_report's result."""
    counts = report["counts"]
    lines = ["# Cloud-image adoption", "",
             "Result: **%s**. %s." % (report["result"], ", ".join(
                 "%s %d" % (status, counts[status]) for status in STATUSES if counts.get(status))), ""]
    if report["reboot_required"]:
        lines += ["Reboot required (a rebase is staged): %s." % ", ".join(report["reboot_required"]), ""]
    lines += ["| host | status | booted commit | image | origin before | reason |",
              "| --- | --- | --- | --- | --- | --- |"]
    for r in report["hosts"]:
        why = r.get("error") or r.get("reason")
        if r.get("warning"):
            why = "%s; warning: %s" % (why, r["warning"])
        lines.append("| %s |" % " | ".join(_cell(v) for v in (
            r["host"], r["status"], (r.get("booted_checksum") or "")[:12], r.get("image"), r.get("origin_before"), why)))
    return "\n".join(lines) + "\n"


def cloud_image_adopt_report(hosts, hostvars):
    """Filter: the adoption report of a play (see cloud_image_adopt_report.yml)."""
    try:
        return adopt_report(hosts, hostvars)
    except FleetosError as exc:
        raise AnsibleFilterError(exc.msg) from None


def cloud_image_adopt_report_markdown(report):
    """Filter: the adoption report as Markdown (see cloud_image_adopt_report_markdown.yml)."""
    return adopt_report_markdown(report)


def cloud_image_adopt_plan(status, image_info, transport="registry", ostree_remote=None,
                           description=DEFAULT_DESCRIPTION):
    """Filter: the adoption decision of one host (see cloud_image_adopt_plan.yml)."""
    try:
        return adopt_plan(status, image_info, transport=transport, ostree_remote=ostree_remote,
                          description=description)
    except FleetosError as exc:
        raise AnsibleFilterError(exc.msg) from None


def cloud_image_adopt_precheck(want, inspection=None):
    """Filter: the result of a host settled before adoption, or None (see cloud_image_adopt_precheck.yml)."""
    try:
        return adopt_precheck(want, inspection)
    except FleetosError as exc:
        raise AnsibleFilterError(exc.msg) from None


class FilterModule:
    """Adopting cloud-image hosts into their container image."""

    def filters(self):
        return {
            "cloud_image_adopt_plan": cloud_image_adopt_plan,
            "cloud_image_adopt_precheck": cloud_image_adopt_precheck,
            "cloud_image_adopt_report": cloud_image_adopt_report,
            "cloud_image_adopt_report_markdown": cloud_image_adopt_report_markdown,
        }
