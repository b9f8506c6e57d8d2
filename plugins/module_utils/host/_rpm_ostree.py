# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# This is a private module_util of fleetos.layering: its interface may change at any
# time and it is not meant to be used by other collections.

"""The rpm-ostree client and the parser of ``rpm-ostree status --json``."""

from __future__ import annotations

import json

from ansible_collections.fleetos.layering.plugins.module_utils._errors import (
    CommandError,
    InvalidInputError,
    TransactionBusyError,
)
from ansible_collections.fleetos.layering.plugins.module_utils.host._commands import (
    ToolClient,
    default_cause,
    first_line,
    last_cause,
)
from ansible_collections.fleetos.layering.plugins.module_utils.images import _image_ref

EXIT_UNCHANGED = 77
BUSY_MARKER = "Transaction in progress"


def _is_busy(stdout, stderr):
    return BUSY_MARKER in (stderr or "") or BUSY_MARKER in (stdout or "")


# --------------------------------------------------------------------------
# status parsing (pure functions: no AnsibleModule needed)


def _pivot_image(raw):
    """The image a legacy ``pivot://NAME@sha256:...`` custom origin names, or None."""
    custom = _custom_origin(raw)
    ref = _image_ref.parse_pivot(custom["url"]) if custom else None
    if ref is None:
        return None
    return {"reference": custom["url"], "transport": ref.transport.name, "transport_kind": None,
            "name": ref.name, "tag": ref.tag, "digest": ref.digest, "manifest_digest": None}


def _image_of(raw):
    """The ``image`` dict of a deployment record, or None for an ostree origin.

    ``digest`` is the digest the reference pins, else the one rpm-ostree reports;
    ``manifest_digest`` is always the reported ``container-image-reference-digest``:
    rpm-ostree and bootc report the per-platform manifest digest, also when the
    reference pins an OCI index digest or follows a tag.

    A checksum origin with a ``pivot://NAME@sha256:...`` custom URL (OpenShift's legacy
    oscontainers) is that image, with transport ``pivot``.
    """
    reference = raw.get("container-image-reference")
    if not reference:
        return _pivot_image(raw)
    manifest_digest = raw.get("container-image-reference-digest") or None
    try:
        ref = _image_ref.parse(reference)
    except InvalidInputError:
        # A transport this collection does not handle (oci:, containers-storage:, ...):
        # report what rpm-ostree says without splitting it.
        transport = reference.split(":", 1)[0] if reference.startswith("ostree-") else None
        return {"reference": reference, "transport": transport,
                "transport_kind": _image_ref.TRANSPORT_KINDS.get(transport), "name": None, "tag": None,
                "digest": manifest_digest, "manifest_digest": manifest_digest}
    transport = ref.transport
    return {
        "reference": reference,
        "transport": transport.name if transport is not None else None,
        "transport_kind": transport.kind if transport is not None else None,
        "name": ref.name,
        "tag": ref.tag,
        "digest": ref.digest or manifest_digest,
        "manifest_digest": manifest_digest,
    }


def _custom_origin(raw):
    value = raw.get("custom-origin")
    if not value:
        return None
    if isinstance(value, dict):
        return {"url": value.get("url"), "description": value.get("description")}
    if isinstance(value, (list, tuple)):
        url = value[0] if len(value) > 0 else None
        description = value[1] if len(value) > 1 else None
        return {"url": url, "description": description}
    return {"url": str(value), "description": None}


def _layered_packages(raw):
    packages = raw.get("packages")
    if packages is None:
        packages = raw.get("requested-packages")
    return [str(p) for p in (packages or [])]


def parse_deployment(raw):
    """One ``deployments[]`` record of ``rpm-ostree status --json`` -> our structure."""
    if not isinstance(raw, dict):
        raise CommandError("Failed to parse rpm-ostree status: a deployment is not a JSON object.")
    checksum = raw.get("checksum")
    return {
        "id": raw.get("id"),
        "osname": raw.get("osname"),
        "checksum": checksum,
        "serial": raw.get("serial"),
        "booted": bool(raw.get("booted", False)),
        "staged": bool(raw.get("staged", False)),
        "pinned": bool(raw.get("pinned", False)),
        "version": raw.get("version"),
        "timestamp": raw.get("timestamp"),
        "origin": raw.get("origin") or None,
        "image": _image_of(raw),
        "custom_origin": _custom_origin(raw),
        "layered_packages": _layered_packages(raw),
        "base_checksum": raw.get("base-checksum") or checksum,
    }


def parse_status(doc):
    """The document of ``rpm-ostree status --json`` (a dict or JSON text) -> host state.

    Deployments keep rpm-ostree's order (the next boot first). ``rollback`` is the
    first deployment after the booted one that is neither booted nor staged;
    ``reboot_required`` is true when the next boot is not the booted deployment.
    """
    if isinstance(doc, (str, bytes)):
        try:
            doc = json.loads(doc)
        except ValueError as exc:
            raise CommandError("Failed to parse rpm-ostree status: the output is not JSON (%s)." % exc)
    if not isinstance(doc, dict) or not isinstance(doc.get("deployments"), list):
        raise CommandError("Failed to parse rpm-ostree status: the output has no 'deployments' list.")
    deployments = [parse_deployment(raw) for raw in doc["deployments"]]
    booted = next((d for d in deployments if d["booted"]), None)
    staged = next((d for d in deployments if d["staged"]), None)
    rollback = None
    if booted is not None:
        after_booted = deployments[deployments.index(booted) + 1:]
        rollback = next((d for d in after_booted if not d["booted"] and not d["staged"]), None)
    transaction = doc.get("transaction")
    if transaction is not None and not isinstance(transaction, list):
        transaction = [transaction]
    next_boot = deployments[0] if deployments else None
    reboot_required = staged is not None or (next_boot is not None and not next_boot["booted"])
    return {
        "deployments": deployments,
        "booted": booted,
        "staged": staged,
        "rollback": rollback,
        "transaction": transaction or None,
        "reboot_required": reboot_required,
    }


def next_boot(status):
    """The deployment the next boot uses (the first one), or None."""
    return status["deployments"][0] if status["deployments"] else None


# --------------------------------------------------------------------------
# the client


# The option every module that runs rpm-ostree has (fleetos.layering.executables.rpm_ostree).
RPM_OSTREE_ARGS = dict(
    executable=dict(type="path"),
)


class RpmOstreeClient(ToolClient):
    """Runs rpm-ostree on a host (``_host.Host``, or a module's AnsibleModule): argv lists, LC_ALL=C, no expansion."""

    tool = "rpm-ostree"

    def __init__(self, host, executable=None, retries=0, retry_delay=5, sleep=None):
        super().__init__(host, executable, retries=retries, retry_delay=retry_delay, sleep=sleep)
        self.raw_status = None

    def check_result(self, argv, rc, out, err, ok_rcs, action, describe=None):
        """What :meth:`run` makes of ``argv``'s exit status and output once it has run (here, or detached as a
        job): -> (rc, stdout, stderr); TransactionBusyError when another transaction held rpm-ostree."""
        try:
            return super().check_result(argv, rc, out, err, ok_rcs, action, describe)
        except CommandError as exc:
            details = exc.details
            if not _is_busy(details["stdout"], details["stderr"]):
                raise
            cause = default_cause(details["stdout"], details["stderr"], details["rc"])
            raise TransactionBusyError("Failed to %s because rpm-ostree is busy: %s." % (action, cause.rstrip(".")),
                                       **details) from None

    def run_mutating(self, args, action=None, ok_rcs=(0,)):
        """Like :meth:`run`, retrying ``retries`` times when a transaction is in progress."""
        action = action or "run rpm-ostree %s" % args[0]
        return self.retrying(lambda attempts: self.run(args, action, ok_rcs), TransactionBusyError,
                             gave_up=lambda exc, attempts: _still_busy(action, attempts, exc))

    def status(self):
        """``rpm-ostree status --json``, parsed (see :func:`parse_status`)."""
        rc, out, err = self.run(["status", "--json"])
        try:
            doc = json.loads(out)
        except ValueError as exc:
            raise CommandError("Failed to parse the output of rpm-ostree status --json: %s." % exc,
                               cmd=[self.binary, "status", "--json"], rc=rc, stdout=out, stderr=err)
        self.raw_status = doc
        return parse_status(doc)

    def rebase_argv(self, reference, lock_finalization=False):
        """The argv of a rebase to ``reference`` that stages it (``--unchanged-exit-77``: exit 77 when it is the
        next deployment already), with ``--lock-finalization`` for an activation to finalize."""
        args = ["rebase", "--unchanged-exit-77"]
        if lock_finalization:
            args.append("--lock-finalization")
        return [self.binary] + args + ["--", reference]

    def rebase(self, reference, lock_finalization=False):
        """Stage a rebase to ``reference``; -> True when rpm-ostree changed something."""
        argv = self.rebase_argv(reference, lock_finalization)
        rc, _out, _err = self.run_mutating(argv[1:], _rebase_action(reference), (0, EXIT_UNCHANGED))
        return rc != EXIT_UNCHANGED

    def rebase_finished(self, argv, reference, rc, output, attempts):
        """What :meth:`rebase` returns, or raises, for the rebase ``argv`` that ran detached (``_job``): its exit
        status ``rc``, its ``output`` (stdout and stderr as one, the error's ``stderr``), after ``attempts`` runs
        (the job retried it while a transaction was in progress). The cause of a failure is the output's last
        error line: progress lines come first there."""
        action = _rebase_action(reference)
        try:
            self.check_result(argv, rc, "", output, (0, EXIT_UNCHANGED), action, describe=last_cause)
        except TransactionBusyError as exc:
            raise _still_busy(action, attempts, exc) from None
        return rc != EXIT_UNCHANGED


def _rebase_action(reference):
    return "rebase to '%s'" % reference


def _still_busy(action, attempts, exc):
    """The error of a mutating command still refused after ``attempts`` runs because another transaction was in
    progress (``exc`` the last refusal)."""
    return TransactionBusyError("Failed to %s: another transaction was still in progress after %d %s (%s)." % (
        action, attempts, "attempt" if attempts == 1 else "attempts",
        first_line(exc.details.get("stderr")) or BUSY_MARKER), **exc.details)
