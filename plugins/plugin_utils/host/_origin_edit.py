# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# This is a private plugin_util of fleetos.layering: its interface may change at any
# time and it is not meant to be used by other collections.

"""The origin edit of fleetos.layering.ostree_origin: which file (a deployment's, through
``rpm-ostree status --json``, or a path), the edits checked before anything is read, and the
read, edit and compare-and-swap write of the file (``_origin.read_origin`` and
``_origin.write_origin``).

Everything runs on a ``_host.Host``: over an action plugin's connection the host needs no Python,
only rpm-ostree (for a deployment), coreutils, util-linux and a POSIX shell.
"""

from __future__ import annotations

import json

from ansible.module_utils.common.text.converters import to_text

from ansible_collections.fleetos.layering.plugins.module_utils._errors import (
    FleetosError,
    InvalidInputError,
    OriginError,
)
from ansible_collections.fleetos.layering.plugins.module_utils._params import check_directory
from ansible_collections.fleetos.layering.plugins.module_utils.host._origin import (
    Origin,
    check_group_name,
    check_key_name,
    describe_char,
    escape,
    format_list,
    invalid_name_char,
    invalid_value_char,
    read_origin,
    write_origin,
)
from ansible_collections.fleetos.layering.plugins.module_utils.host._rpm_ostree import RpmOstreeClient
from ansible_collections.fleetos.layering.plugins.module_utils.images._image_ref import shown

# The options of fleetos.layering.ostree_origin.
ARGUMENT_SPEC = dict(
    deployment=dict(type="str", default="booted"),
    path=dict(type="path"),
    sysroot=dict(type="path", default="/"),
    set=dict(type="dict", default={}),
    remove=dict(type="list", elements="str", default=[]),
    backup=dict(type="bool", default=False),
)
MUTUALLY_EXCLUSIVE = [("deployment", "path")]

# How many times the file is read and edited again when it changed between the read and the write.
ATTEMPTS = 5

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


def check_absolute(option, path):
    """Refuse a relative path: over a connection it would name a file relative to the login's directory."""
    if not path.startswith("/"):
        raise InvalidInputError("%s '%s' is not an absolute path: expected one that starts with /" % (option, shown(path, 80)))


def check_sysroot(host, sysroot):
    """Refuse a sysroot that is not a directory on the host (a symlink to one is fine)."""
    check_absolute("sysroot", sysroot)
    check_directory("sysroot", sysroot, host=host)


def check_deployment(deployment):
    if deployment not in ("booted", "staged") and not deployment.isdigit():
        raise InvalidInputError("Invalid deployment '%s': expected booted, staged or an index (0, 1, ...)"
                                % shown(deployment, 60))


def resolve_deployment(host, deployment, sysroot):
    """The origin file path of ``deployment`` (booted, staged or an index), from ``rpm-ostree status --json``."""
    check_deployment(deployment)
    client = RpmOstreeClient(host)
    rc, out, err = client.run(["status", "--json"], action="list the deployments with rpm-ostree status")
    try:
        deployments = json.loads(out)["deployments"]
        if not isinstance(deployments, list):
            raise TypeError("its deployments are not a list")
    except (ValueError, KeyError, TypeError) as exc:
        raise FleetosError("Failed to list the deployments: rpm-ostree status printed no deployment list (%s)"
                           % exc, cmd=[client.binary, "status", "--json"], rc=rc, stdout=out, stderr=err)
    deployments = [d if isinstance(d, dict) else {} for d in deployments]
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
        osname = chosen["osname"]
    except (KeyError, TypeError, ValueError) as exc:
        raise FleetosError("Failed to locate the origin of deployment %s: rpm-ostree status lacks %s"
                           % (chosen.get("id"), exc))
    # Names from the host's output become one path under sysroot, never another directory.
    for part in (str(osname), name):
        if "/" in part or part in ("", ".", ".."):
            raise FleetosError("Failed to locate the origin of deployment %s: rpm-ostree status names '%s', "
                               "which is not a file name" % (chosen.get("id"), shown(part, 80)))
    return "%s/ostree/deploy/%s/deploy/%s" % (sysroot.rstrip("/"), osname, name)


def edit_origin(host, path, sets, removes, check_mode, backup, label=None):
    """Read, edit, validate and (unless ``check_mode``) write the origin file ``path``; -> the result.

    The write happens only if the file still holds what was read; when it changed meanwhile, it is
    read and edited again (up to ATTEMPTS times), so a concurrent change is kept, not overwritten.
    ``label`` names the file in the refusal of one that is not a regular file.
    """
    for _attempt in range(ATTEMPTS):
        data, read_only = read_origin(host, path, label)
        doc = Origin.parse(data, path)
        before = doc.text()
        for group, key in removes:
            doc.remove(group, key)
        for group, key, raw in sets:
            doc.set_value(group, key, raw)
        after = doc.text()
        changed = after != before
        result = dict(changed=changed, path=path, diff=dict(before=before, after=after), origin=doc.to_dict())
        if not changed:
            return result
        doc.validate()
        if check_mode:
            return result
        written, backup_file = write_origin(host, path, doc.to_bytes(), data, backup=backup,
                                            read_only=read_only, label=label)
        if written:
            if backup_file:
                result["backup_file"] = backup_file
            return result
    raise OriginError("Failed to write origin %s: it changed on the host each of the %d times it was read and "
                      "edited; nothing was written" % (path, ATTEMPTS), path=path)


def task_result(host, params, check_mode):
    """The result of an ostree_origin task with ``params`` (its options, defaults filled) on ``host``.

    FleetosError for a failure, its details holding ``path`` (the file, once known).
    """
    path = params["path"]
    try:
        sets, removes = parse_edits(params["set"], params["remove"])
        if path is None:
            check_deployment(params["deployment"])
            check_sysroot(host, params["sysroot"])
            path = resolve_deployment(host, params["deployment"], params["sysroot"])
            label = "the origin file '%s' of deployment %s" % (path, params["deployment"])
        else:
            check_absolute("path", path)
            label = "path '%s'" % path
        return edit_origin(host, path, sets, removes, check_mode, params["backup"], label)
    except FleetosError as exc:
        exc.details.setdefault("path", path)
        raise
