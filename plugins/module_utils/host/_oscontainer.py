# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# This is a private module_util of fleetos.layering: its interface may change at any
# time and it is not meant to be used by other collections.

"""Legacy OpenShift oscontainers: the ostree repository they carry, and the ostree client.

A legacy oscontainer is not bootable itself: it holds an ostree archive repository at
``/srv/repo`` and names the OS commit in the label ``com.coreos.ostree-commit``. The
host pulls that commit into its own repository and rebases to ``:COMMIT`` with the
custom origin ``pivot://NAME@sha256:...``.

:func:`extract_repo` unpacks only the ``srv/repo/`` entries of an image's layers (an
OCI layout written by ``skopeo copy``), in layer order, applying whiteouts, and
refuses any entry that could write outside the destination.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tarfile

from ansible_collections.fleetos.layering.plugins.module_utils._errors import ImageError
from ansible_collections.fleetos.layering.plugins.module_utils.host._commands import (
    RETRY_ARGS,
    find_executable,
    run_command,
)
from ansible_collections.fleetos.layering.plugins.module_utils.host._deployments import deployment_digest
from ansible_collections.fleetos.layering.plugins.module_utils.host._rpm_ostree import RPM_OSTREE_ARGS
from ansible_collections.fleetos.layering.plugins.module_utils.images._labels import BOOTABLE_LABEL, LEGACY_COMMIT_LABEL
from ansible_collections.fleetos.layering.plugins.module_utils.images._oci_index import OciIndex
from ansible_collections.fleetos.layering.plugins.module_utils.images._skopeo import REGISTRY_ARGS, SKOPEO_ARGS

REPO_PATH = ("srv", "repo")
WHITEOUT = ".wh."
OPAQUE = ".wh..wh..opq"
_CHECKSUM_RE = re.compile(r"^[0-9a-f]{64}$")
_MANIFEST_TYPES = ("application/vnd.oci.image.manifest.v1+json",
                   "application/vnd.docker.distribution.manifest.v2+json")

# The options of fleetos.layering.oscontainer_rebase: its module and its action plugin, which checks
# them as given (module_utils/_params.check_arguments) before the module runs on the host.
ARGUMENT_SPEC = dict(
    image=dict(type="str", required=True),
    custom_description=dict(type="str", default="Managed by fleetos.layering"),
    lock_finalization=dict(type="bool", default=False),
    sysroot_repo=dict(type="path", default="/sysroot/ostree/repo"),
    tmpdir=dict(type="path", default="/var/tmp"),
    ostree_executable=dict(type="path"),
)
for _shared in (REGISTRY_ARGS, RETRY_ARGS, RPM_OSTREE_ARGS, SKOPEO_ARGS):
    ARGUMENT_SPEC.update(_shared)


def is_checksum(value):
    """True for an ostree commit checksum: 64 lowercase hex digits."""
    return isinstance(value, str) and bool(_CHECKSUM_RE.match(value))


def oscontainer_commit(image, labels):
    """The commit a legacy oscontainer's label names; raise ImageError for another kind of image."""
    commit = (labels or {}).get(LEGACY_COMMIT_LABEL)
    if not commit:
        kind = "a bootable container image" if (labels or {}).get(BOOTABLE_LABEL) else "an image"
        raise ImageError(
            "Image '%s' is not a legacy oscontainer: it has no label %s (it is %s; rebase to a bootable "
            "image with fleetos.layering.rpm_ostree_rebase)." % (image, LEGACY_COMMIT_LABEL, kind))
    if not is_checksum(commit):
        raise ImageError("Image '%s' has an invalid label %s '%s': expected an ostree commit checksum of "
                         "64 hex digits." % (image, LEGACY_COMMIT_LABEL, commit))
    return commit


# --------------------------------------------------------------------------
# the next boot, before and after


def diff_text(summary):
    return "checksum: %s\nreference: %s\ndigest: %s\n" % (summary["checksum"], summary["reference"],
                                                          summary["digest"])


def is_current(deployment, commit, digest):
    """True when the deployment is at ``commit`` with a pivot origin naming ``digest``."""
    return (deployment is not None and deployment.get("checksum") == commit
            and deployment_digest(deployment) == digest)


# --------------------------------------------------------------------------
# the ostree client


class Ostree:
    """Runs ostree through an AnsibleModule: argv lists, LC_ALL=C, no expansion, ``--`` before values."""

    def __init__(self, module, executable=None):
        self.module = module
        self.binary = find_executable(module, executable, "ostree", "ostree_executable")

    def has_commit(self, repo, commit):
        """True when ``repo`` holds the whole commit (its commit object, and no interrupted pull of it).

        ``ostree show`` exits 1 for a commit the repository does not hold; any other
        failure raises CommandError.
        """
        rc, _out, _err = run_command(self.module, [self.binary, "show", "--repo=" + repo, "--", commit],
                                     "look up commit %s in the repository '%s'" % (commit, repo), ok_rcs=(0, 1))
        if rc != 0:
            return False
        return not os.path.exists(os.path.join(repo, "state", commit + ".commitpartial"))

    def pull_local(self, repo, source, commit):
        """``ostree pull-local --untrusted``: copy ``commit`` from ``source``, verifying every object."""
        run_command(self.module, [self.binary, "pull-local", "--repo=" + repo, "--untrusted", "--", source, commit],
                    "pull commit %s into the repository '%s'" % (commit, repo))


# --------------------------------------------------------------------------
# the image's layers


def _read_json(path, what):
    try:
        with open(path, "rb") as handle:
            return json.loads(handle.read().decode("utf-8"))
    except (OSError, ValueError) as exc:
        raise ImageError("Failed to read the %s of the fetched image: %s." % (
            what, getattr(exc, "strerror", None) or exc)) from None


def _blob_path(layout, digest):
    algo, sep, hexa = str(digest).partition(":")
    if not sep or not re.match(r"^[a-z0-9]+$", algo) or not re.match(r"^[0-9a-f]+$", hexa):
        raise ImageError("Failed to read the fetched image: its manifest names an invalid digest '%s'." % digest)
    return os.path.join(layout, "blobs", algo, hexa)


def oci_layers(layout):
    """[(blob path, media type)] of the one image in the OCI layout ``layout``, bottom layer first."""
    manifests = OciIndex(_read_json(os.path.join(layout, "index.json"), "index")).images(_MANIFEST_TYPES)
    if len(manifests) != 1:
        raise ImageError("Failed to read the fetched image: its OCI layout lists %d image manifests, not 1."
                         % len(manifests))
    manifest = _read_json(_blob_path(layout, manifests[0].get("digest")), "manifest")
    return [(_blob_path(layout, layer.get("digest")), layer.get("mediaType") or "")
            for layer in manifest.get("layers") or []]


class UnsafeEntryError(ImageError):
    """A layer entry that would write outside the destination (absolute, ``..``, escaping link)."""


def _parts(name):
    """The components of a tar entry name, without ``.`` and empty ones; None for an absolute name."""
    if name.startswith("/"):
        return None
    return [part for part in name.split("/") if part not in ("", ".")]


def _in_repo(parts):
    return parts[:len(REPO_PATH)] == list(REPO_PATH)


class _Extractor:
    """Unpacks the srv/repo/ entries of layers into ``dest`` (which becomes the repository)."""

    def __init__(self, dest):
        self.dest = os.path.realpath(dest)
        os.makedirs(self.dest, mode=0o700, exist_ok=True)

    def path(self, parts):
        """The host path of repository-relative ``parts``, its parent checked to be inside ``dest``."""
        target = os.path.join(self.dest, *parts) if parts else self.dest
        parent = os.path.realpath(os.path.dirname(target)) if parts else self.dest
        if parts and parent != self.dest and not parent.startswith(self.dest + os.sep):
            raise UnsafeEntryError("Failed to unpack the ostree repository of the image: the entry '%s' "
                                   "would be written outside the repository through a link." % "/".join(parts))
        return target

    def remove(self, parts):
        target = self.path(parts)
        if os.path.islink(target) or os.path.isfile(target):
            os.unlink(target)
        elif os.path.isdir(target):
            shutil.rmtree(target)
        elif os.path.lexists(target):
            os.unlink(target)

    def clear(self, parts):
        target = self.path(parts)
        if os.path.isdir(target) and not os.path.islink(target):
            for name in os.listdir(target):
                self.remove(parts + [name])

    def check(self, member, parts):
        if parts is None or ".." in parts:
            raise UnsafeEntryError("Failed to unpack the ostree repository of the image: the layer entry "
                                   "'%s' has an absolute path or a '..' component." % member.name)

    def whiteout(self, parts):
        """Apply one whiteout entry (``parts`` relative to the image root) to the lower layers."""
        directory, name = parts[:-1], parts[-1]
        if name == OPAQUE:
            if _in_repo(directory):
                self.clear(directory[len(REPO_PATH):])
            elif REPO_PATH[:len(directory)] == tuple(directory):
                self.clear([])
            return
        hidden = directory + [name[len(WHITEOUT):]]
        if _in_repo(hidden):
            rel = hidden[len(REPO_PATH):]
            if rel:
                self.remove(rel)
            else:
                self.clear([])
        elif REPO_PATH[:len(hidden)] == tuple(hidden):
            self.clear([])

    def _link_source(self, member, rel):
        """Check the target of a link entry; -> the repository-relative parts of a hard link's source."""
        if member.issym():
            target = member.linkname
            resolved = os.path.normpath(os.path.join(os.path.dirname("/".join(rel)), target))
            if os.path.isabs(target) or resolved == ".." or resolved.startswith("../"):
                raise UnsafeEntryError("Failed to unpack the ostree repository of the image: the symbolic link "
                                       "'%s' points outside the repository ('%s')." % (member.name, target))
            return None
        parts = _parts(member.linkname)
        if parts is None or ".." in parts or not _in_repo(parts):
            raise UnsafeEntryError("Failed to unpack the ostree repository of the image: the hard link '%s' "
                                   "points outside the repository ('%s')." % (member.name, member.linkname))
        return parts[len(REPO_PATH):]

    def entry(self, tar, member, rel):
        """Write one entry (``rel`` relative to the repository)."""
        if member.isdir():
            target = self.path(rel)
            if os.path.lexists(target) and not os.path.isdir(target):
                os.unlink(target)
            if rel:
                os.makedirs(target, mode=0o755, exist_ok=True)
                self.path(rel + ["x"])  # a directory that resolves outside is refused here
                os.chmod(target, (member.mode & 0o755) | 0o700)
            return
        if not rel:
            raise ImageError("Failed to unpack the ostree repository of the image: the layer entry '%s' is "
                             "not a directory." % member.name)
        if not (member.isfile() or member.issym() or member.islnk()):
            raise ImageError("Failed to unpack the ostree repository of the image: the layer entry '%s' is a "
                             "device or FIFO, which an ostree repository does not hold." % member.name)
        source = self._link_source(member, rel) if (member.issym() or member.islnk()) else None
        parent = os.path.dirname(self.path(rel))
        os.makedirs(parent, mode=0o755, exist_ok=True)
        target = self.path(rel)
        if os.path.lexists(target):
            self.remove(rel)
        if member.issym():
            os.symlink(member.linkname, target)
        elif member.islnk():
            origin = self.path(source)
            if not os.path.isfile(origin) or os.path.islink(origin):
                raise ImageError("Failed to unpack the ostree repository of the image: the hard link '%s' "
                                 "points to '%s', which is not a file unpacked before." % (
                                     member.name, member.linkname))
            os.link(origin, target)
        else:
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0),
                         member.mode & 0o755)
            with os.fdopen(fd, "wb") as out:
                shutil.copyfileobj(tar.extractfile(member), out, 1 << 20)

    def layer(self, path, media_type):
        if "zstd" in media_type:
            raise ImageError("Failed to unpack the ostree repository of the image: a layer is compressed with "
                             "zstd (%s), which this module cannot read." % media_type)
        try:
            with tarfile.open(path, "r:*") as tar:
                members = tar.getmembers()
                entries = []
                # Whiteouts hide what lower layers hold, never entries of their own layer.
                for member in members:
                    parts = _parts(member.name)
                    if parts is not None and not parts:
                        continue
                    name = member.name.lstrip("/")
                    stripped = _parts(name)
                    if not stripped:
                        continue
                    touches = _in_repo(stripped) or (
                        stripped[-1].startswith(WHITEOUT) and REPO_PATH[:len(stripped) - 1] == tuple(stripped[:-1]))
                    if not touches:
                        continue
                    self.check(member, parts)
                    if stripped[-1].startswith(WHITEOUT):
                        self.whiteout(parts)
                    else:
                        entries.append((member, parts[len(REPO_PATH):]))
                for member, rel in entries:
                    self.entry(tar, member, rel)
        except (tarfile.TarError, EOFError, OSError) as exc:
            raise ImageError("Failed to unpack the ostree repository of the image from layer '%s': %s." % (
                os.path.basename(path), getattr(exc, "strerror", None) or exc)) from None


def extract_repo(layers, dest):
    """Unpack the ``srv/repo/`` entries of ``layers`` [(path, media type)], in order, into ``dest``.

    ``dest`` becomes the repository's root. Entries with an absolute path or a ``..``
    component, links that point outside the repository, and entries that would be
    written through a link to outside ``dest`` raise :class:`UnsafeEntryError`.
    Returns True when the layers held a repository at all.
    """
    extractor = _Extractor(dest)
    for path, media_type in layers:
        extractor.layer(path, media_type)
    return bool(os.listdir(extractor.dest))
