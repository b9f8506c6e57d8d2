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


# ostree-ext's encapsulation labels the diff_id of the last layer of the image's ostree
# base; the layers after it are derived (non-ostree) layers (`FROM base` + `COPY`, a
# composed layered image). The host imports such an image as a merge commit of its own,
# so the inherited ostree.commit label does not name what the host boots.
FINAL_DIFFID_LABEL = "ostree.final-diffid"


def derived_layer_count(labels, diff_ids):
    """How many layers of an image lie above its ostree base, as ostree-ext splits them; None when unknown.

    ``diff_ids`` is the configuration's ``rootfs.diff_ids`` (os_image_pull's ``diff_ids``).
    With ``ostree.final-diffid``, the layers after the one it names are derived; a label
    that names no layer of the image is unknown (ostree-ext refuses such an image). Without
    the label, ostree-ext (since it imports non-ostree images) finds no ostree base at all:
    every layer is derived.
    """
    if diff_ids is None:
        return None
    diff_ids = list(diff_ids)
    final = labels.get(FINAL_DIFFID_LABEL)
    if not final:
        return len(diff_ids)
    if final not in diff_ids:
        return None
    return len(diff_ids) - 1 - diff_ids.index(final)


def imported_commit(labels, diff_ids=None):
    """The commit a host gets when it imports the image, when the labels can tell; else None.

    An image's commit label names what the host boots only when the image is its ostree
    base alone: no layer after ``ostree.final-diffid`` (:func:`derived_layer_count` is 0).
    A legacy oscontainer's commit is the one in its repository, whatever its layers. An
    image with ``ostree.final-diffid`` whose ``diff_ids`` are not known has no known commit;
    without that label and without ``diff_ids``, the label is all there is (older results).
    """
    commit = image_commit(labels)
    if commit is None or is_legacy_oscontainer(labels):
        return commit
    if diff_ids is None and not labels.get(FINAL_DIFFID_LABEL):
        return commit
    return commit if derived_layer_count(labels, diff_ids) == 0 else None
