# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# This is a private plugin_util of fleetos.layering: its interface may change at any
# time and it is not meant to be used by other collections.

"""A registry auth file installed on a host (fleetos.layering.registry_auth_file), with the host's
own tools: the document reaches the host on stdin, is written 0600 atomically by a POSIX shell
script, and is never shown (not in the result, not in the diff)."""

from __future__ import annotations

import json

from ansible_collections.fleetos.layering.plugins.module_utils._errors import FleetosError, InvalidInputError
from ansible_collections.fleetos.layering.plugins.module_utils.host._host import HostFileError, as_host

ARGUMENT_SPEC = dict(
    path=dict(type="path", required=True),
    auth=dict(type="raw", no_log=True),
    state=dict(type="str", choices=["present", "absent"], default="present"),
)
REQUIRED_IF = [("state", "present", ("auth",))]
MODE = 0o600
# One lock for every auth file this module writes: a tmpfs file, never a stray file beside the secret.
LOCK = "/run/fleetos-registry-auth-file.lock"


def document(auth):
    """The dockerconfigjson mapping of the option auth (a mapping or its JSON text); InvalidInputError otherwise."""
    if isinstance(auth, str):
        try:
            auth = json.loads(auth)
        except ValueError:
            raise InvalidInputError("The option auth is not JSON: give a dockerconfigjson mapping or its JSON text "
                                    "(the text is not shown).") from None
    if not isinstance(auth, dict) or not isinstance(auth.get("auths"), dict) or not auth["auths"]:
        raise InvalidInputError("The option auth must be a dockerconfigjson document with a non-empty 'auths' "
                                "mapping of registries.")
    return auth


def content(auth):
    """The bytes written for ``auth``: sorted keys, two-space indent, a final newline."""
    return (json.dumps(auth, indent=2, sort_keys=True, separators=(",", ": ")) + "\n").encode("utf-8")


def _file_error(exc, path):
    if exc.refused:
        return InvalidInputError("The option path '%s' is not a regular file (%s): nothing was changed." % (path, exc))
    return FleetosError("Failed to write the auth file %s: %s." % (path, str(exc).rstrip(".")))


def install(host, params, check_mode):
    """Make ``params["path"]`` hold ``params["auth"]`` (0600), or be gone; -> the task result."""
    host = as_host(host)
    path, state = params["path"], params["state"]
    if not path.startswith("/"):
        raise InvalidInputError("The option path '%s' is not an absolute path." % path)
    wanted = content(document(params["auth"])) if state == "present" else None
    try:
        have = host.read_file(path, siblings=(LOCK,))
        if state == "absent":
            changed = have is not None
            if changed and not check_mode:
                host.remove_file(path)
        else:
            changed = have != wanted or host.mode(path) != MODE
            # Written only when the file still holds what was read: a concurrent writer is not overwritten.
            if changed and not check_mode and not host.replace_file(path, wanted, have, mode=MODE, lock=LOCK):
                raise FleetosError("Failed to write the auth file %s: it changed while it was written; run the task "
                                   "again." % path)
    except HostFileError as exc:
        raise _file_error(exc, path) from None
    before = {"path": path, "state": "absent" if have is None else "present"}
    after = {"path": path, "state": state}
    return {"changed": changed, "path": path, "state": state, "diff": {"before": before, "after": after}}
