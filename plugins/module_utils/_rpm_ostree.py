# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# This is a private module_util of fleetos.layering: its interface may change at any
# time and it is not meant to be used by other collections.

"""The rpm-ostree client and the parser of ``rpm-ostree status --json``."""

from __future__ import annotations

import json
import os
import re
import time

from ansible_collections.fleetos.layering.plugins.module_utils import _image_ref
from ansible_collections.fleetos.layering.plugins.module_utils._errors import (
    CommandError,
    InvalidInputError,
    TransactionBusyError,
)

EXIT_UNCHANGED = 77
BUSY_MARKER = "Transaction in progress"
ENVIRON = {"LC_ALL": "C"}


# containers-image tools (skopeo) log errors as: time="..." level=fatal msg="..."
_LOGRUS_RE = re.compile(r'time="[^"]*" level=\w+ msg="(?P<msg>.*)"\s*$')


def first_line(text):
    """The first non-empty line of a tool's output, without ``error:`` and log decoration."""
    for line in (text or "").splitlines():
        line = line.strip()
        if line:
            if line.startswith("error: "):
                line = line[len("error: "):]
            line = _LOGRUS_RE.sub(lambda match: match.group("msg").replace('\\"', '"'), line)
            return line
    return ""


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
    return {"reference": custom["url"], "transport": ref.transport, "name": ref.name,
            "tag": ref.tag, "digest": ref.digest}


def _image_of(raw):
    """The ``image`` dict of a deployment record, or None for an ostree origin.

    A checksum origin with a ``pivot://NAME@sha256:...`` custom URL (OpenShift's legacy
    oscontainers) is that image, with transport ``pivot``.
    """
    reference = raw.get("container-image-reference")
    if not reference:
        return _pivot_image(raw)
    image_digest = raw.get("container-image-reference-digest")
    try:
        ref = _image_ref.parse(reference)
    except InvalidInputError:
        # A transport this collection does not handle (oci:, containers-storage:, ...):
        # report what rpm-ostree says without splitting it.
        transport = reference.split(":", 1)[0] if reference.startswith("ostree-") else None
        return {"reference": reference, "transport": transport, "name": None, "tag": None,
                "digest": image_digest or None}
    return {
        "reference": reference,
        "transport": ref.transport,
        "name": ref.name,
        "tag": ref.tag,
        "digest": ref.digest or image_digest or None,
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


def deployment_digest(deployment):
    """The image digest of a deployment, or None (no deployment, or an ostree origin)."""
    if deployment is None or deployment.get("image") is None:
        return None
    return deployment["image"].get("digest")


def has_digest(deployment, digest):
    """True when the deployment is at the image with this manifest digest."""
    return digest is not None and deployment_digest(deployment) == digest


# --------------------------------------------------------------------------
# the client


class RpmOstreeClient:
    """Runs rpm-ostree through an AnsibleModule: argv lists, LC_ALL=C, no expansion."""

    def __init__(self, module, executable=None, retries=0, retry_delay=5, sleep=None):
        self.module = module
        if executable and not (os.path.isfile(executable) and os.access(executable, os.X_OK)):
            raise InvalidInputError(
                "executable '%s' does not exist or is not an executable file: expected the path of rpm-ostree."
                % executable
            )
        self.binary = executable or module.get_bin_path("rpm-ostree", required=True)
        self.retries = max(0, int(retries or 0))
        self.retry_delay = max(0, int(retry_delay or 0))
        self._sleep = sleep or time.sleep
        self.raw_status = None

    def run(self, args, ok_rcs=(0,), action=None):
        """Run ``rpm-ostree ARGS``; -> (rc, stdout, stderr). Raise on other exit codes.

        ``action`` names what failed in the error message (default ``run rpm-ostree SUB``).
        """
        action = action or "run rpm-ostree %s" % args[0]
        argv = [self.binary] + list(args)
        rc, out, err = self.module.run_command(argv, environ_update=dict(ENVIRON), expand_user_and_vars=False)
        if rc in ok_rcs:
            return rc, out, err
        details = {"cmd": argv, "rc": rc, "stdout": out, "stderr": err}
        cause = first_line(err) or first_line(out) or "exit status %d" % rc
        if _is_busy(out, err):
            raise TransactionBusyError("Failed to %s because rpm-ostree is busy: %s." % (action, cause.rstrip(".")),
                                       **details)
        raise CommandError("Failed to %s: %s." % (action, cause.rstrip(".")), **details)

    def run_mutating(self, args, ok_rcs=(0,), action=None):
        """Like :meth:`run`, retrying ``retries`` times when a transaction is in progress."""
        action = action or "run rpm-ostree %s" % args[0]
        attempt = 0
        while True:
            try:
                return self.run(args, ok_rcs, action)
            except TransactionBusyError as exc:
                if attempt >= self.retries:
                    msg = "Failed to %s: another transaction was still in progress after %d %s (%s)." % (
                        action, attempt + 1, "attempt" if attempt == 0 else "attempts",
                        first_line(exc.details.get("stderr")) or BUSY_MARKER)
                    raise TransactionBusyError(msg, **exc.details) from None
                attempt += 1
                self._sleep(self.retry_delay)

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

    def rebase(self, reference, lock_finalization=False):
        """Stage a rebase to ``reference``; -> True when rpm-ostree changed something."""
        args = ["rebase", "--unchanged-exit-77"]
        if lock_finalization:
            args.append("--lock-finalization")
        args += ["--", reference]
        rc, _out, _err = self.run_mutating(args, ok_rcs=(0, EXIT_UNCHANGED), action="rebase to '%s'" % reference)
        return rc != EXIT_UNCHANGED
