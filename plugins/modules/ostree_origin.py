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
  - The file is replaced atomically (a temporary file in the same directory, fsync,
    rename, fsync of the directory); when anything fails the file is left as it was.
  - Refuses to produce an origin whose C([origin]) group holds both an ostree base
    (C(refspec) or C(baserefspec)) and C(container-image-reference).
  - The new origin is read by rpm-ostree, bootc and libostree the next time they load
    the sysroot; nothing is staged and nothing reboots.
author:
  - fleetos.layering contributors (@fleetos)
requirements:
  - rpm-ostree on the managed node when O(deployment) is used (C(rpm-ostree status --json)
    lists the deployments).
extends_documentation_fragment:
  - fleetos.layering.attributes
attributes:
  check_mode:
    support: full
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
      - Edit the origin file at this path directly instead of looking up a deployment.
      - It must be a regular file; a symlink, device, directory or pipe is refused before
        anything is written (no backup either), in check mode as well. The same holds for
        the origin file of O(deployment).
      - Mutually exclusive with O(deployment).
    type: path
  sysroot:
    description:
      - The directory that holds the C(ostree/deploy) tree in which the origin file of
        O(deployment) is looked up, as
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
        directory (for example C(abc.0.origin.20250101T120000.000000Z.bak)), with the
        same mode and owner. Every backup gets a new name; none is overwritten.
      - libostree does not remove such copies when it prunes the deployment.
    type: bool
    default: false
notes:
  - On hosts that mount C(/sysroot) read-only (Fedora CoreOS, RHCOS), the file is written from
    a private mount namespace in which only that mount is writable, as rpm-ostree writes
    there; every other process keeps seeing it read-only. This needs root.
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

import json
import os
import traceback

from ansible.module_utils.common.text.converters import to_text

from ansible_collections.fleetos.layering.plugins.module_utils._errors import (
    FleetosError,
    InvalidInputError,
    OriginError,
    sentence,
)
from ansible_collections.fleetos.layering.plugins.module_utils._image_ref import shown
from ansible_collections.fleetos.layering.plugins.module_utils._mounts import call_writable
from ansible_collections.fleetos.layering.plugins.module_utils._origin import (
    Origin,
    check_group_name,
    check_key_name,
    describe_char,
    escape,
    format_list,
    invalid_name_char,
    invalid_value_char,
    write_atomic,
)
from ansible_collections.fleetos.layering.plugins.module_utils._params import check_directory, checked_module
from ansible_collections.fleetos.layering.plugins.module_utils._rpm_ostree import RpmOstreeClient

VALUE_CHARS = "only tab, newline and carriage return are allowed in origin values"
NAME_CHARS = "group and key names hold no control characters"
STAGED_REFUSAL = (
    "Refusing to edit the origin of the staged deployment %s because a staged "
    "deployment's origin lives in /run/ostree/staged-deployment until it is finalized, "
    "not in a file; stage it again with fleetos.layering.rpm_ostree_rebase instead"
)


def split_name(option, name, where):
    """``group.key`` -> (group, key), split on the first dot; ``where`` names it in a message."""
    bad = invalid_name_char(name)
    if bad:
        raise InvalidInputError("%s '%s' contains a control character (%s): %s" % (where, shown(name, 60), describe_char(bad),
                                                                                   NAME_CHARS))
    group, dot, key = name.partition(".")
    try:
        if not dot:
            raise ValueError("it has no dot")
        check_group_name(group)
        check_key_name(key)
    except ValueError as exc:
        raise InvalidInputError("Invalid %s entry '%s': expected group.key (%s)" % (option, shown(name, 60), exc))
    return group, key


def check_text(where, text):
    """Raise InvalidInputError when ``text`` holds a control character GKeyFile cannot keep."""
    bad = invalid_value_char(text)
    if bad:
        raise InvalidInputError("%s contains a control character (%s): %s" % (where, describe_char(bad), VALUE_CHARS))


def raw_value(name, value):
    """A value of the set option -> its raw GKeyFile text."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        check_text("set['%s']" % shown(name, 60), value)
        return escape(value)
    if isinstance(value, (list, tuple)):
        if not all(isinstance(item, (str, int, float)) and not isinstance(item, bool) for item in value):
            raise InvalidInputError("Invalid set value for %s: a list may hold only strings and numbers" % shown(name, 60))
        items = [to_text(item) for item in value]
        for index, item in enumerate(items):
            check_text("set['%s'][%d]" % (shown(name, 60), index), item)
        return format_list(items)
    raise InvalidInputError("Invalid set value for %s: expected a string, number, boolean or list of strings, "
                            "got %s" % (shown(name, 60), type(value).__name__))


def parse_edits(set_, remove):
    """Validate the options before anything is read: -> ([(group, key, raw)], [(group, key)])."""
    sets = []
    for name, value in set_.items():
        group, key = split_name("set", name, "set key")
        sets.append((group, key, raw_value(name, value)))
    removes = [split_name("remove", name, "remove[%d]" % index) for index, name in enumerate(remove)]
    both = sorted(set("%s.%s" % gk[:2] for gk in sets) & set("%s.%s" % gk for gk in removes))
    if both:
        raise InvalidInputError("Invalid options: %s is both in set and in remove" % ", ".join(both))
    return sets, removes


def resolve_deployment(module, deployment, sysroot):
    """The origin file path of ``deployment`` (booted, staged or an index)."""
    if deployment not in ("booted", "staged") and not deployment.isdigit():
        raise InvalidInputError("Invalid deployment '%s': expected booted, staged or an index (0, 1, ...)"
                                % shown(deployment, 60))
    client = RpmOstreeClient(module)
    cmd = [client.binary, "status", "--json"]
    rc, out, err = client.run(["status", "--json"], action="list the deployments with rpm-ostree status")
    try:
        deployments = json.loads(out)["deployments"]
    except (ValueError, KeyError, TypeError) as exc:
        raise FleetosError("Failed to list the deployments: rpm-ostree status printed no deployment list (%s)"
                           % exc, cmd=cmd, rc=rc, stdout=out, stderr=err)
    if deployment == "booted":
        found = [d for d in deployments if d.get("booted")]
        if not found:
            raise OriginError("Failed to find the booted deployment: rpm-ostree status shows none booted")
        chosen = found[0]
    elif deployment == "staged":
        found = [d for d in deployments if d.get("staged")]
        if not found:
            raise OriginError("Failed to find the staged deployment: rpm-ostree status shows none staged")
        raise OriginError(STAGED_REFUSAL % found[0].get("id"))
    else:
        index = int(deployment)
        if index >= len(deployments):
            raise InvalidInputError("Invalid deployment index %d: rpm-ostree status lists %d deployment(s)"
                                    % (index, len(deployments)))
        chosen = deployments[index]
        if chosen.get("staged"):
            raise OriginError(STAGED_REFUSAL % chosen.get("id"))
    try:
        name = "%s.%d.origin" % (chosen["checksum"], int(chosen["serial"]))
        return os.path.join(sysroot, "ostree", "deploy", chosen["osname"], "deploy", name)
    except (KeyError, TypeError, ValueError) as exc:
        raise FleetosError("Failed to locate the origin of deployment %s: rpm-ostree status lacks %s"
                           % (chosen.get("id"), exc))


def edit_origin(path, sets, removes, check_mode, backup, label=None):
    """Read, edit, validate and (unless check_mode) write; -> result dict.

    ``label`` names the file in the refusal of one that is not a regular file.
    """
    doc = Origin.read(path, label)
    before = doc.text()
    for group, key in removes:
        doc.remove(group, key)
    for group, key, raw in sets:
        doc.set_value(group, key, raw)
    after = doc.text()
    changed = after != before
    result = dict(changed=changed, path=path, diff=dict(before=before, after=after), origin=doc.to_dict())
    if changed:
        doc.validate()
        if not check_mode:
            data = doc.to_bytes()
            backup_file = call_writable(os.path.dirname(os.path.abspath(path)),
                                        lambda: write_atomic(path, data, backup=backup, label=label))
            if backup_file:
                result["backup_file"] = backup_file
    return result


def main():
    module = checked_module(
        dict(
            deployment=dict(type="str", default="booted"),
            path=dict(type="path"),
            sysroot=dict(type="path", default="/"),
            set=dict(type="dict", default={}),
            remove=dict(type="list", elements="str", default=[]),
            backup=dict(type="bool", default=False),
        ),
        mutually_exclusive=[("deployment", "path")],
        supports_check_mode=True,
    )
    params = module.params
    path = params["path"]
    try:
        sets, removes = parse_edits(params["set"], params["remove"])
        if path is None:
            check_directory("sysroot", params["sysroot"])
            path = resolve_deployment(module, params["deployment"], params["sysroot"])
            label = "the origin file '%s' of deployment %s" % (path, params["deployment"])
        else:
            label = "path '%s'" % path
        result = edit_origin(path, sets, removes, module.check_mode, params["backup"], label)
    except FleetosError as exc:
        failure = dict(path=path)
        failure.update(exc.details)
        module.fail_json(msg=sentence(exc.msg), **failure)
    except Exception as exc:
        module.fail_json(msg=sentence("Failed to edit origin %s: %s" % (shown(path, 80), to_text(exc))), path=path,
                         exception=traceback.format_exc())
    module.exit_json(**result)


if __name__ == "__main__":
    main()
