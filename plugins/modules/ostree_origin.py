#!/usr/bin/python
# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ostree_origin
short_description: Edit the origin file of an ostree deployment
version_added: 0.1.0
description:
  - Reads and edits the origin file (C(<checksum>.<serial>.origin)) of an ostree deployment,
    the GKeyFile that tells rpm-ostree and bootc what the deployment tracks
    (C(refspec), C(baserefspec) or C(container-image-reference) in C([origin]), layered
    packages, overrides, a custom origin).
  - Only the keys named in O(set) and O(remove) change; every other group, key, comment,
    blank line and their order are written back byte for byte.
  - The file is replaced atomically (a temporary file in the same directory with the file's
    mode, owner and SELinux label, synced, renamed over the file, the directory synced); when
    anything fails the file is left as it was, with no temporary file or backup beside it.
  - The file is replaced only if it still holds what was read (compare and swap, under an
    exclusive C(flock) of its directory); when another writer changed it meanwhile, it is read and
    edited again, so that change is kept.
  - Refuses to produce an origin whose C([origin]) group holds both an ostree base
    (C(refspec) or C(baserefspec)) and C(container-image-reference).
  - The new origin is read by rpm-ostree, bootc and libostree the next time they load
    the sysroot; nothing is staged and nothing reboots.
  - Implemented as an action plugin, it runs the host's own tools over the connection and reads,
    edits and decides on the controller, so the host needs no Python interpreter. It runs
    C(rpm-ostree status --json) for O(deployment), and two POSIX shell scripts, one that reads
    the file (C(stat), C(findmnt), C(dd)) and one that replaces it (C(mktemp), C(cat), C(chmod),
    C(chown), C(chcon), C(flock), C(sha256sum), C(date), C(sync), C(mv); C(unshare) and C(mount)
    for a read-only mount).
author:
  - fleetos.layering contributors (@fleetos)
requirements:
  - A POSIX shell, GNU coreutils and util-linux (C(flock), C(findmnt), C(unshare), C(mount)) on the
    managed host, as Fedora CoreOS and RHEL ship them; no Python.
  - rpm-ostree on the managed host when O(deployment) is used (C(rpm-ostree status --json)
    lists the deployments).
extends_documentation_fragment:
  - fleetos.layering.attributes
attributes:
  check_mode:
    support: full
    details:
      - Reads the file and predicts C(changed), the diff and RV(origin); writes nothing, makes no
        backup and no temporary file.
  diff_mode:
    support: full
    details:
      - The diff holds the whole origin file before and after the edit.
  idempotent:
    support: full
options:
  deployment:
    description:
      - Which deployment's origin to edit, when O(path) is not given.
      - V(booted) is the booted deployment.
      - V(staged) names the staged deployment, which is always refused, because
        until it is finalized at shutdown its origin lives in
        C(/run/ostree/staged-deployment) and not in a file; stage it again with
        M(fleetos.layering.rpm_ostree_rebase) instead.
      - A number V(0), V(1), ... is an index into the deployment list as
        C(rpm-ostree status --json) orders it (the next boot first); an index that
        names the staged deployment is refused as well.
      - Mutually exclusive with O(path).
    type: str
    default: booted
  path:
    description:
      - Edit the origin file at this absolute path on the managed host directly instead of
        looking up a deployment.
      - It must be a regular file; a symlink, device, directory or pipe is refused before
        anything is written (no backup either), in check mode as well. The same holds for
        the origin file of O(deployment).
      - Mutually exclusive with O(deployment).
    type: path
  sysroot:
    description:
      - The directory (an absolute path) that holds the C(ostree/deploy) tree in which the origin
        file of O(deployment) is looked up, as
        C(<sysroot>/ostree/deploy/<osname>/deploy/<checksum>.<serial>.origin).
      - The deployment list still comes from C(rpm-ostree status --json) of the managed
        node.
      - Not used with O(path).
    type: path
    default: /
  set:
    description:
      - Keys to set, as a mapping of C(group.key) to the value.
      - The name is split on its first dot; group names in origin files have no dots,
        keys may.
      - A string value is written escaped as GKeyFile does (a leading space as C(\s), a
        newline as C(\n), a tab as C(\t), a backslash as C(\\)); a list is written as a
        C(;)-separated list with a trailing C(;), as GKeyFile writes string lists; a
        boolean as C(true) or C(false); a number as its decimal form.
      - A value holding a control character other than tab, newline or carriage return (a
        NUL, an escape, ...), or a name holding any control character, is refused before
        anything changes.
      - An existing key keeps its place; a new key goes after the last key of its group;
        a new group goes at the end of the file.
    type: dict
    default: {}
  remove:
    description:
      - Keys to remove, each as C(group.key). A key that is not there is not an error.
      - A group left without keys stays in the file, as GKeyFile leaves it.
    type: list
    elements: str
    default: []
  backup:
    description:
      - Before changing the file, copy it to C(<file>.<UTC timestamp>.bak) in the same
        directory (for example C(abc.0.origin.20250101T120000.000000Z.bak), the time of the
        host's clock), with the same mode, owner and SELinux label. Every backup gets a new name;
        none is overwritten.
      - libostree does not remove such copies when it prunes the deployment.
    type: bool
    default: false
notes:
  - On hosts that mount C(/sysroot) read-only (Fedora CoreOS, RHCOS), the file is written from
    a private mount namespace in which only that mount is writable, as rpm-ostree writes
    there (C(unshare -m --propagation private), then C(mount -o remount,bind,rw) of the mount that
    holds the file, in the same shell script as the write); every other process keeps seeing it
    read-only. This needs root (C(become)).
seealso:
  - module: fleetos.layering.rpm_ostree_rebase
    description: Stage a deployment of another image, which writes a new origin.
  - module: fleetos.layering.rpm_ostree_info
    description: Show the deployments and their origins.
  - name: ostree origin files
    description: How libostree stores a deployment's origin.
    link: https://ostreedev.github.io/ostree/deployment/
"""

EXAMPLES = r"""
- name: Mark the booted deployment's origin
  fleetos.layering.ostree_origin:
    set:
      origin.fleetos-managed: "true"
    backup: true

- name: Turn a disk image's plain ostree origin into a container image origin
  fleetos.layering.ostree_origin:
    deployment: booted
    remove:
      - origin.refspec
    set:
      origin.container-image-reference: >-
        ostree-unverified-registry:quay.io/fedora/fedora-coreos@sha256:4c5dfa4e1a35d6ecba0d2bd0cc57e91e86a3d40ee1ad03b2d8c1b0c61b9e9b1e

- name: Set the layered packages of the rollback deployment
  fleetos.layering.ostree_origin:
    deployment: "1"
    set:
      packages.requested:
        - htop
        - tmux

- name: Edit an origin file by path
  fleetos.layering.ostree_origin:
    path: /srv/images/sysroot/ostree/deploy/fedora-coreos/deploy/abc.0.origin
    remove:
      - origin.custom-url
      - origin.custom-description
"""

RETURN = r"""
path:
  description: The origin file that was read (and edited).
  returned: always
  type: str
  sample: /ostree/deploy/fedora-coreos/deploy/5d3965ddc23da6be463b043cd818e26108286f028f95f1bdf9806372b17368fd.0.origin
changed:
  description: Whether the file changed (in check mode, whether it would change).
  returned: always
  type: bool
  sample: true
diff:
  description: The whole file before and after the edit.
  returned: always
  type: dict
  contains:
    before:
      description: The file's text before the edit.
      returned: always
      type: str
      sample: "[origin]\ncontainer-image-reference=ostree-unverified-registry:example.com/os@sha256:4c5d\n"
    after:
      description: The file's text after the edit (in check mode, what it would be).
      returned: always
      type: str
      sample: "[origin]\ncontainer-image-reference=ostree-unverified-registry:example.com/os@sha256:4c5d\nfleetos-managed=true\n"
  sample:
    before: "[origin]\nrefspec=fedora:fedora/x86_64/coreos/stable\n"
    after: "[origin]\nrefspec=fedora:fedora/x86_64/coreos/stable\nfleetos-managed=true\n"
backup_file:
  description: The backup copy of the original file.
  returned: when O(backup=true) and the file changed (not in check mode)
  type: str
  sample: /ostree/deploy/fedora-coreos/deploy/abc.0.origin.20250101T120000.000000Z.bak
origin:
  description:
    - The resulting file (in check mode, the predicted one) as a mapping of group to a
      mapping of key to value.
    - Values are as written in the file, GKeyFile escapes included; lists are the raw
      C(;)-separated text.
  returned: always
  type: dict
  sample:
    origin:
      container-image-reference: "ostree-unverified-registry:example.com/os@sha256:4c5d"
      fleetos-managed: "true"
    packages:
      requested: "htop;tmux;"
"""
