# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# This is a private module_util of fleetos.layering: its interface may change at any
# time and it is not meant to be used by other collections.

"""The labels of container OS images: which commit, which version, which kind of image."""

from __future__ import annotations

# The labels that name an image's ostree commit, in the order they are trusted.
COMMIT_LABELS = ("ostree.commit", "com.coreos.ostree-commit", "io.openshift.os-commit")
VERSION_LABELS = ("version", "org.opencontainers.image.version")
# A legacy OpenShift oscontainer names its commit here (and carries an ostree repo at /srv/repo).
LEGACY_COMMIT_LABEL = "com.coreos.ostree-commit"
BOOTABLE_LABEL = "ostree.bootable"
# Label -> the values that make an image bootable by rpm-ostree or bootc.
BOOTABLE_LABELS = ((BOOTABLE_LABEL, ("true", "1")), ("containers.bootc", ("1", "true")))


def first_label(labels, names):
    """The value of the first label of ``names`` that is set, or None."""
    for name in names:
        if labels.get(name):
            return labels[name]
    return None


def image_commit(labels):
    """The ostree commit an image's labels name (the first of COMMIT_LABELS), or None."""
    return first_label(labels, COMMIT_LABELS)


def is_bootable(labels):
    return any(str(labels.get(key, "")).lower() in values for key, values in BOOTABLE_LABELS)


def is_legacy_oscontainer(labels):
    """A legacy oscontainer: an ostree repo at /srv/repo, not a bootable image."""
    return not is_bootable(labels) and bool(labels.get(LEGACY_COMMIT_LABEL))
