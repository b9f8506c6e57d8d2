# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# This is a private module_util of fleetos.layering: its interface may change at any
# time and it is not meant to be used by other collections.

"""The bootc client, the parser of ``bootc status --format=json`` and bootc's image targets.

``bootc status`` prints a ``Host`` object (``org.containers.bootc/v1alpha1`` or
``org.containers.bootc/v1``, the same field names): ``status.booted``, ``staged``,
``rollback`` and ``otherDeployments`` are boot entries, each with ``image`` (the
reference bootc tracks, its ``imageDigest``, ``version``, ``architecture``),
``cachedUpdate`` (what ``bootc upgrade --check`` found), ``pinned``,
``incompatible``, ``downloadOnly`` and ``ostree.checksum``. A host that bootc did not
boot reports ``status.booted: null``: :func:`parse_status` returns that as
``is_bootc: false``, not as an error.

bootc names its own transports (``registry``, ``containers-storage``, ``oci``,
``oci-archive``); an image of the first two is a registry name read by the one image
grammar (``_image_ref``), an image of the last two is ``PATH[:REFERENCE]`` of an OCI
layout or archive on the host, whose digest :func:`oci_layout_digest` reads from the
layout's ``index.json``.

Everything runs on a ``_host.Host``: over an action plugin's connection the host needs bootc,
coreutils and a POSIX shell (``tar`` to read an oci-archive), no Python.
"""

from __future__ import annotations

import json

from ansible_collections.fleetos.layering.plugins.module_utils.images import _image_ref
from ansible_collections.fleetos.layering.plugins.module_utils.images._auth import RUN_AUTH_FILE
from ansible_collections.fleetos.layering.plugins.module_utils.host._commands import (
    ToolClient,
    checked,
    default_cause,
    run_command,
)
from ansible_collections.fleetos.layering.plugins.module_utils.host._host import HostFileError, as_host
from ansible_collections.fleetos.layering.plugins.module_utils.images._oci_index import OciIndex
from ansible_collections.fleetos.layering.plugins.module_utils._errors import (
    CommandError,
    ImageError,
    InvalidInputError,
    TransactionBusyError,
)

API_VERSIONS = ("org.containers.bootc/v1alpha1", "org.containers.bootc/v1")

REGISTRY = "registry"
CONTAINERS_STORAGE = "containers-storage"
OCI = "oci"
OCI_ARCHIVE = "oci-archive"
# The transports bootc_switch takes, as bootc names them (bootc switch --transport).
TRANSPORTS = (REGISTRY, CONTAINERS_STORAGE, OCI, OCI_ARCHIVE)
# Transports whose image is a registry name (read by _image_ref); the others name a path.
NAMED_TRANSPORTS = (REGISTRY, CONTAINERS_STORAGE)

# libostree's sysroot lock (OSTREE_SYSROOT_LOCKFILE under the sysroot): bootc, rpm-ostreed and
# ``ostree admin`` hold it while they change deployments, and bootc waits for it without end.
SYSROOT_LOCK = "/sysroot/ostree/lock"

# $1 the lock file. libostree takes it with an open file description lock (fcntl F_OFD_SETLKW; a BSD
# flock only on a kernel without those), which never conflicts with a flock: flock(1) would find it
# free while bootc waits for it. The kernel's table of held locks, /proc/locks, names each file by
# device and inode, so the script prints the file's (stat) and the table, and the controller matches
# them (lock_held). Exit 4: there is no lock file (libostree removes it as it lets go): nobody holds it.
LOCK_SCRIPT = r"""
id=$(stat -c '%d %i' -- "$1" 2>/dev/null) || exit 4
printf '%s\n' "$id"
exec cat /proc/locks
"""
# The kinds of lock in /proc/locks that make another taker wait: fcntl record locks, open file
# description locks and BSD flock locks (not leases or delegations).
LOCK_KINDS = ("POSIX", "OFDLCK", "FLOCK")


# Fields of the host-v1 schema that bootc_info deliberately does not report (see the unit test
# that walks the schema): metadata and kind say nothing about the host; composefs boot details
# other than the verity, and the storage backend name, are bootc internals.
IGNORED_FIELDS = {
    "Host": ("kind", "metadata"),
    "BootEntry": ("store",),
    "BootEntryComposefs": ("bootDigest", "bootType", "bootloader", "missingVerityAllowed"),
    "ImageStatus": (),
    "ImageReference": (),
    "HostStatus": (),
    "HostSpec": (),
    "BootEntryOstree": (),
}

# The auth files bootc reads, first match wins (ostree-ext's runtime, persistent and system paths).
AUTH_FILES = (RUN_AUTH_FILE, "/etc/ostree/auth.json", "/usr/lib/ostree/auth.json")

# The option every module that runs bootc has (documented in each module; see the module docs).
BOOTC_ARGS = dict(
    executable=dict(type="path"),
)


# --------------------------------------------------------------------------
# image references (pure functions)


def split_image(image, transport):
    """``{name, tag, digest}`` of an image as bootc names it for ``transport``.

    A registry or containers-storage image is read by the image grammar; an oci or
    oci-archive image is ``PATH[:REFERENCE]`` (containers-image splits at the first
    ``:``), whose name is the path and whose tag is the reference. Raises
    InvalidReferenceError for a name the grammar refuses.
    """
    if transport in NAMED_TRANSPORTS:
        ref = _image_ref.parse_image(image, transport_field="the transport option")
        return {"name": ref.name, "tag": ref.tag, "digest": ref.digest}
    path, _sep, reference = image.partition(":")
    return {"name": path, "tag": reference or None, "digest": None}


def _signature(value):
    """bootc's ImageSignature as one text: ``insecure``, ``containerPolicy`` or ``ostreeRemote:NAME``."""
    if isinstance(value, dict) and value.get("ostreeRemote"):
        return "ostreeRemote:%s" % value["ostreeRemote"]
    return value if isinstance(value, str) else None


def _image_of(raw):
    """The ``image`` dict of a boot entry's ImageStatus, or None."""
    if not isinstance(raw, dict) or not isinstance(raw.get("image"), dict):
        return None
    tracked = raw["image"]
    reference = tracked.get("image")
    transport = tracked.get("transport") or REGISTRY
    manifest_digest = raw.get("imageDigest") or None
    try:
        parts = split_image(reference, transport) if isinstance(reference, str) else None
    except InvalidInputError:
        parts = None
    if parts is None or transport not in TRANSPORTS:
        parts = {"name": None, "tag": None, "digest": None}
    return {
        "reference": reference,
        "transport": transport,
        "name": parts["name"],
        "tag": parts["tag"],
        "digest": parts["digest"] or manifest_digest,
        "manifest_digest": manifest_digest,
        "signature": _signature(tracked.get("signature")),
    }


def origin_image(image):
    """A deployment's bootc ``image`` in rpm-ostree's shape (``rpm_ostree_info``), or None.

    bootc writes the image it tracks into the deployment's ostree origin as an
    ostree-container reference, by its transport and signature source: a ``registry``
    image is ``ostree-unverified-registry:NAME`` (signature ``insecure``),
    ``ostree-image-signed:docker://NAME`` (``containerPolicy``) or
    ``ostree-remote-image:REMOTE:docker://NAME`` (``ostreeRemote:REMOTE``); another
    transport is ``ostree-unverified-image:TRANSPORT:NAME``. That reference is
    ``reference`` here, so that one planner compares deployments of either tool;
    ``bootc_transport`` and ``signature`` keep what bootc reported.
    """
    if not isinstance(image, dict) or not image.get("reference"):
        return None
    name, signature = image["reference"], image.get("signature") or "insecure"
    bootc_transport = image.get("transport") or REGISTRY
    if bootc_transport != REGISTRY:
        text = "%s:%s:%s" % (_image_ref.UNVERIFIED_IMAGE, bootc_transport, name)
    elif signature.startswith("ostreeRemote:"):
        text = "%s:%s:%s%s" % (_image_ref.REMOTE_IMAGE, signature.split(":", 1)[1], _image_ref.DOCKER_SCHEME, name)
    elif signature == "containerPolicy":
        text = "%s:%s%s" % (_image_ref.IMAGE_SIGNED, _image_ref.DOCKER_SCHEME, name)
    else:
        text = "%s:%s" % (_image_ref.UNVERIFIED_REGISTRY, name)
    transport = text.split(":", 1)[0]
    return {
        "reference": text,
        "transport": transport,
        "transport_kind": _image_ref.TRANSPORT_KINDS.get(transport),
        "name": image.get("name"),
        "tag": image.get("tag"),
        "digest": image.get("digest"),
        "manifest_digest": image.get("manifest_digest"),
        "bootc_transport": bootc_transport,
        "signature": image.get("signature"),
    }


def origin_status(status):
    """bootc facts (:func:`parse_status`) with every deployment's image in rpm-ostree's shape."""
    def converted(deployment):
        return dict(deployment, image=origin_image(deployment.get("image"))) if deployment is not None else None

    return dict(status, deployments=[converted(d) for d in status["deployments"]],
                **{role: converted(status[role]) for role in ("booted", "staged", "rollback")})


def _cached_update(raw, own_digest):
    """``{digest, version}`` of a boot entry's cachedUpdate, or None (none, or the entry's own image)."""
    cached = raw.get("cachedUpdate")
    if not isinstance(cached, dict) or not cached.get("imageDigest"):
        return None
    if cached["imageDigest"] == own_digest:
        return None
    return {"digest": cached["imageDigest"], "version": cached.get("version")}


def parse_entry(raw, role):
    """One boot entry of ``bootc status`` -> our deployment; ``role`` is booted, staged, rollback or other."""
    if not isinstance(raw, dict):
        raise CommandError("Failed to parse the bootc status: the %s entry is not a JSON object." % role)
    image_status = raw.get("image") if isinstance(raw.get("image"), dict) else {}
    image = _image_of(image_status)
    ostree = raw.get("ostree") if isinstance(raw.get("ostree"), dict) else {}
    composefs = raw.get("composefs") if isinstance(raw.get("composefs"), dict) else {}
    manifest_digest = image["manifest_digest"] if image else None
    return {
        "booted": role == "booted",
        "staged": role == "staged",
        "image": image,
        "version": image_status.get("version"),
        "timestamp": image_status.get("timestamp"),
        "architecture": image_status.get("architecture"),
        "checksum": ostree.get("checksum"),
        "stateroot": ostree.get("stateroot"),
        "deploy_serial": ostree.get("deploySerial"),
        "composefs_verity": composefs.get("verity"),
        "pinned": bool(raw.get("pinned", False)),
        "incompatible": bool(raw.get("incompatible", False)),
        "download_only": bool(raw.get("downloadOnly", False)),
        "soft_reboot_capable": bool(raw.get("softRebootCapable", False)),
        "cached_update": _cached_update(raw, manifest_digest),
    }


def _usr_overlay(value):
    if not isinstance(value, dict):
        return None
    return {"access_mode": value.get("accessMode"), "persistence": value.get("persistence")}


def _load(doc):
    if isinstance(doc, (str, bytes)):
        try:
            doc = json.loads(doc)
        except ValueError as exc:
            raise CommandError("Failed to parse the bootc status: the output is not JSON (%s)." % exc) from None
    if not isinstance(doc, dict):
        raise CommandError("Failed to parse the bootc status: the output is not a JSON object.")
    api_version = doc.get("apiVersion")
    if api_version not in API_VERSIONS:
        raise CommandError("Failed to parse the bootc status: apiVersion '%s' is not one of %s."
                           % (_image_ref.shown(str(api_version), 60), ", ".join(API_VERSIONS)))
    return doc


def parse_status(doc):
    """The document of ``bootc status --format=json`` (a dict or JSON text) -> host facts.

    ``is_bootc`` is false when bootc did not boot the host (``status.booted`` is null): the
    other facts are then null, empty or false. ``cached_update`` is what ``bootc upgrade
    --check`` found for the next boot's image (the staged entry, else the booted one).
    ``reboot_required`` is whether the next boot changes the deployment: a queued rollback, or a
    staged deployment that is not download-only (an ordinary reboot does not apply a
    ``downloadOnly`` one: only ``bootc upgrade --from-downloaded`` unlocks it).
    """
    doc = _load(doc)
    status = doc.get("status") if isinstance(doc.get("status"), dict) else {}
    spec = doc.get("spec") if isinstance(doc.get("spec"), dict) else {}
    entries = {role: parse_entry(status[role], role) if status.get(role) is not None else None
               for role in ("booted", "staged", "rollback")}
    others = [parse_entry(raw, "other") for raw in status.get("otherDeployments") or []]
    rollback_queued = bool(status.get("rollbackQueued", False)) or spec.get("bootOrder") == "rollback"
    deployments = [entries[role] for role in ("staged", "booted", "rollback") if entries[role] is not None] + others
    next_entry = entries["staged"] or entries["booted"]
    spec_image = spec.get("image") if isinstance(spec.get("image"), dict) else None
    return {
        "is_bootc": entries["booted"] is not None,
        "api_version": doc["apiVersion"],
        "type": status.get("type"),
        "booted": entries["booted"],
        "staged": entries["staged"],
        "rollback": entries["rollback"],
        "deployments": deployments,
        "cached_update": next_entry["cached_update"] if next_entry else None,
        "rollback_queued": rollback_queued,
        "reboot_required": (entries["staged"] is not None and not entries["staged"]["download_only"]) or rollback_queued,
        "read_only": bool(status.get("readOnly", False)),
        "usr_overlay": _usr_overlay(status.get("usrOverlay")),
        "spec_image": _image_of({"image": spec_image}) if spec_image else None,
    }


def next_boot(status):
    """The deployment bootc moves to next: the queued rollback, else the staged one, else the booted one."""
    if status["rollback_queued"] and status["rollback"] is not None:
        return status["rollback"]
    return status["staged"] or status["booted"]


# --------------------------------------------------------------------------
# OCI layouts on the host (oci, oci-archive)


def _read_index(host, path, transport, where):
    """The bytes of the ``index.json`` of the OCI layout directory or archive at ``path`` on ``host``."""
    if transport == OCI:
        try:
            data = host.read_file(path.rstrip("/") + "/index.json")
        except HostFileError as exc:
            raise ImageError("Failed to read the OCI layout %s: %s." % (where, str(exc).rstrip("."))) from None
        if data is None:
            raise ImageError("Failed to read the OCI layout %s: no index.json." % where)
        return data
    argv = ["tar", "-x", "-O", "-f", path, "index.json"]
    rc, out, err = run_command(host, argv, "read the OCI layout %s" % where, ok_rcs=range(256), binary=True)
    if rc == 0:
        return out
    # tar's first complaint is the cause: "index.json: Not found in archive" follows any other one.
    cause = default_cause("", err, rc)
    if cause.startswith("tar: "):
        cause = cause[len("tar: "):]
    if cause.lower().endswith("not found in archive"):
        raise ImageError("Failed to read the OCI layout %s: no index.json." % where)
    raise ImageError("Failed to read the OCI layout %s: %s." % (where, cause.rstrip(".")), cmd=argv, rc=rc, stderr=err)


def oci_layout_digest(host, image, transport):
    """The digest of the manifest an oci (directory) or oci-archive (tar) image names, read on ``host``.

    Only ``index.json`` is read (``cat`` of the directory's, ``tar -x -O`` of the archive's): the
    entry whose ``org.opencontainers.image.ref.name`` is the image's reference, or the only entry
    when the image names none.
    """
    path, _sep, reference = image.partition(":")
    where = "'%s'" % _image_ref.shown(path, 80)
    return OciIndex.parse(_read_index(as_host(host), path, transport, where), where).select(reference, where)


# --------------------------------------------------------------------------
# the target of bootc_switch


def target_image(params, resolve_tag, host=None):
    """-> ``(image, digest)``: the image text bootc gets (pinned where the transport can pin) and its digest.

    ``params`` holds ``image``, ``transport``, ``digest`` and ``allow_tag``; ``resolve_tag(ref)``
    returns the digest of a registry ImageRef that has only a tag; an OCI layout is read on
    ``host`` (a ``_host.Host``). Bad input raises InvalidInputError before anything runs; an OCI
    layout whose index names another digest raises ImageError.
    """
    image, transport, digest = params["image"], params["transport"], params["digest"]
    if transport not in TRANSPORTS:
        raise InvalidInputError("transport '%s' is not a bootc transport: expected one of %s."
                                % (_image_ref.shown(str(transport), 60), ", ".join(TRANSPORTS)))
    if transport in NAMED_TRANSPORTS:
        if digest is not None:
            raise InvalidInputError("digest is only for the oci and oci-archive transports: pin a %s image in image as "
                                    "%s." % (transport, _image_ref.PLAIN_FORM))
        ref = _image_ref.parse_image(image, transport_field="the transport option")
        if ref.pinned:
            return ref.with_digest(ref.digest).image, ref.digest
        if not params["allow_tag"]:
            raise InvalidInputError("image '%s' has no digest: give %s@sha256:<64 hex digits>, or set allow_tag: true "
                                    "to resolve the tag to a digest on the host."
                                    % (_image_ref.shown(image), _image_ref.shown(ref.name)))
        if transport == CONTAINERS_STORAGE:
            raise InvalidInputError("image '%s' has no digest: a containers-storage image is pinned by digest only, "
                                    "give %s@sha256:<64 hex digits>." % (_image_ref.shown(image), _image_ref.shown(ref.name)))
        resolved = resolve_tag(ref)
        return ref.with_digest(resolved).image, resolved
    if not image.startswith("/") or "@" in image:
        raise InvalidInputError("image '%s' is not an %s image: expected /PATH[:REFERENCE] of an OCI %s on the host, "
                                "with its digest in the digest option." % (
                                    _image_ref.shown(image), transport,
                                    "layout directory" if transport == OCI else "archive"))
    if digest is None and not params["allow_tag"]:
        raise InvalidInputError("%s image '%s' names no digest: set digest: sha256:<64 hex digits>, or allow_tag: true "
                                "to use the digest its index.json names." % (transport, _image_ref.shown(image)))
    if digest is not None and not _image_ref.is_digest(digest):
        raise InvalidInputError("digest '%s' is not a digest: expected %s."
                                % (_image_ref.shown(digest, 80), _image_ref.DIGEST_FORM))
    named = oci_layout_digest(host, image, transport)
    if digest is not None and named != digest:
        raise ImageError("The %s image '%s' is at %s, not at digest %s: nothing was staged."
                         % (transport, _image_ref.shown(image), named, digest), digest=named, expected_digest=digest)
    return image, named


# --------------------------------------------------------------------------
# the sysroot lock (pure functions)


def linux_device(number):
    """``(major, minor)`` of a Linux device number as stat(1) ``%d`` prints it (glibc's encoding)."""
    major = ((number >> 8) & 0xFFF) | ((number >> 32) & 0xFFFFF000)
    minor = (number & 0xFF) | ((number >> 12) & 0xFFFFFF00)
    return major, minor


def lock_held(output):
    """Whether :data:`LOCK_SCRIPT`'s output (the lock file's ``DEVICE INODE``, then /proc/locks) shows a
    lock held on the file.

    A line of /proc/locks is ``ID: KIND MODE ACCESS PID MAJOR:MINOR:INODE START END``, the device
    numbers in hex; a process waiting for a lock has ``->`` before its kind, and is no holder.
    """
    lines = output.splitlines()
    try:
        device, inode = (int(word) for word in lines[0].split())
    except (IndexError, ValueError):
        raise CommandError("Failed to check the ostree sysroot lock: stat printed no device and inode (%s)."
                           % _image_ref.shown(lines[0] if lines else "nothing", 60)) from None
    wanted = linux_device(device) + (inode,)
    for line in lines[1:]:
        fields = line.split()
        if len(fields) < 6 or fields[1] not in LOCK_KINDS:
            continue
        parts = fields[5].split(":")
        try:
            found = (int(parts[0], 16), int(parts[1], 16), int(parts[2]))
        except (IndexError, ValueError):
            continue
        if found == wanted:
            return True
    return False


# --------------------------------------------------------------------------
# the client


def _unknown_flag(stderr, flag):
    """True when bootc's argument parser (clap) refused ``flag``: this bootc predates it."""
    text = stderr or ""
    return "'%s'" % flag in text and ("unexpected argument" in text or "wasn't expected" in text
                                      or "unrecognized" in text)


class BootcClient(ToolClient):
    """Runs bootc on a host (``_host.Host``, or a module's AnsibleModule): argv lists, LC_ALL=C, no expansion."""

    tool = "bootc"

    def __init__(self, host, executable=None, retries=0, retry_delay=5, sleep=None, lock_path=None):
        super().__init__(host, executable, retries=retries, retry_delay=retry_delay, sleep=sleep)
        self.lock_path = lock_path or SYSROOT_LOCK
        self.status_flags = None

    def status(self):
        """``bootc status --format=json`` (``--json`` on a bootc that predates ``--format``), parsed."""
        flags = self.status_flags or ["--format=json"]
        rc, out, err = self.run(["status"] + flags, "read the bootc status", ok_rcs=range(256))
        if rc != 0 and self.status_flags is None and _unknown_flag(err, "--format"):
            flags = ["--json"]
            rc, out, err = self.run(["status"] + flags, "read the bootc status", ok_rcs=range(256))
        if rc != 0:
            raise CommandError("Failed to read the bootc status: %s." % default_cause(out, err, rc).rstrip("."),
                               cmd=[self.binary, "status"] + flags, rc=rc, stdout=out, stderr=err)
        self.status_flags = flags
        return parse_status(out)

    def _lock_held(self):
        """True when a process holds the ostree sysroot lock, read without waiting (:data:`LOCK_SCRIPT`)."""
        argv = ["sh", "-c", LOCK_SCRIPT, "sh", self.lock_path]
        rc, out, err = self.host.run(argv)
        if rc == 4:
            return False
        if rc != 0:
            raise CommandError("Failed to check the ostree sysroot lock (%s): %s." % (
                self.lock_path, default_cause(out, err, rc).rstrip(".")), cmd=argv, rc=rc, stdout=out, stderr=err)
        return lock_held(out)

    def wait_idle(self, action):
        """Return once the sysroot lock is free; retry ``retries`` times, then raise TransactionBusyError."""
        def idle(attempts):
            if self._lock_held():
                raise TransactionBusyError(
                    "Failed to %s because bootc is busy: another process still held the ostree sysroot lock (%s) "
                    "after %d %s." % (action, self.lock_path, attempts, "attempt" if attempts == 1 else "attempts"))
        self.retrying(idle, TransactionBusyError)

    def switch_argv(self, image, transport, download_only=True, retain=False, enforce_sigpolicy=False):
        """The argv of ``bootc switch`` to ``image`` over ``transport``; never ``--apply`` (never reboots)."""
        args = ["switch", "--quiet", "--transport", transport]
        if download_only:
            args.append("--download-only")
        if retain:
            args.append("--retain")
        if enforce_sigpolicy:
            args.append("--enforce-container-sigpolicy")
        return [self.binary] + args + ["--", image]

    def switch(self, image, transport, download_only=True, retain=False, enforce_sigpolicy=False):
        """``bootc switch`` to ``image`` over ``transport`` once the sysroot lock is free (:meth:`wait_idle`)."""
        action = switch_action(image, transport)
        self.wait_idle(action)
        argv = self.switch_argv(image, transport, download_only, retain, enforce_sigpolicy)
        rc, out, err = self.run(argv[1:], action, ok_rcs=range(256))
        self.switch_finished(argv, action, rc, out, err, download_only)

    def switch_finished(self, argv, action, rc, out, err, download_only, describe=default_cause):
        """Raise what a failed switch (``argv``, exit status ``rc``) means; -> None when it succeeded. ``describe``
        picks the cause from the output (a detached job's stdout and stderr are one: ``_commands.last_cause``)."""
        checked(self.host, argv, action, rc, out, err, ok_rcs=range(256))
        if rc == 0:
            return
        details = dict(cmd=argv, rc=rc, stdout=out, stderr=err)
        if download_only and _unknown_flag(err, "--download-only"):
            raise CommandError("Failed to %s: this bootc has no 'switch --download-only' (added by bootc-dev/bootc "
                               "pull request 2342), set download_only: false to stage a deployment that an "
                               "ordinary reboot applies." % action, **details)
        raise CommandError("Failed to %s: %s." % (action, describe(out, err, rc).rstrip(".")), **details)


def switch_action(image, transport):
    """What a switch does, for its messages."""
    return "switch to %s image '%s'" % (transport, _image_ref.shown(image))
