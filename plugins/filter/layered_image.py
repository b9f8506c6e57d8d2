# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Filters for LayeredImage objects and their lock; documented in the .yml files next to this one."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.fleetos.layering.plugins.module_utils._errors import FleetosError
from ansible_collections.fleetos.layering.plugins.plugin_utils.images import _layered


def layered_image_load(directory, relative_to=None, required=False):
    """Filter: read, parse and validate the LayeredImages of a directory; a file that does not load is named
    in the result's ``errors`` and ``error``, never raised (see layered_image_load.yml)."""
    try:
        return _layered.load_dir(directory, relative_to=relative_to, required=required)
    except FleetosError as exc:
        raise AnsibleFilterError(exc.msg) from None


def layered_image_compositions(images, resolutions=None, auth_dir=None):
    """Filter: without ``resolutions``, every input reference once with the auth file to read it with (what
    to resolve); with them, the os_image_compose options of each LayeredImage, every input pinned to its digest."""
    try:
        if resolutions is None:
            return _layered.resolutions_to_make(images, auth_dir=auth_dir)
        return _layered.compositions(images, resolutions, auth_dir=auth_dir)
    except FleetosError as exc:
        raise AnsibleFilterError(exc.msg) from None


def layered_image_lock(results, images, previous=None, lock_path=None):
    """Filter: the lock text, what moved since the ``previous`` lock file, the Markdown summary and the
    report of a compose run, from the os_image_compose results (see layered_image_lock.yml)."""
    try:
        document = _layered.lock_document(images, results)
        before = _layered.read_lock_file(previous, missing_ok=True) if previous else None
        changes = _layered.diff_locks(before, document)
        return {"text": _layered.lock_text(document), "changes": changes,
                "summary": _layered.summary_markdown(changes, document, lock_path=lock_path),
                "report": _layered.compose_report(images, results, changes, lock_path=lock_path)}
    except FleetosError as exc:
        raise AnsibleFilterError(exc.msg) from None


def layered_image_auth(secret, name):
    """Filter: the auth file text of the pull secret held by the variable ``name`` (see layered_image_auth.yml)."""
    try:
        return _layered.pull_secret_auth(secret, name)
    except FleetosError as exc:
        raise AnsibleFilterError(exc.msg) from None


def layered_image_lock_read(path):
    """Filter: the lock a rollout reads (fleetos_rollout_lock), once: ``{path, document, error}``, or None
    without a path; never raised (see layered_image_lock_read.yml)."""
    return _layered.lock_record(path)


def layered_image_status(rows, inspections=None):
    """Filter: without ``inspections``, the booted images of fleet status rows once each (what to inspect);
    with them, the rows with ``layers``, the layers each host's booted image records (see layered_image_status.yml)."""
    if not isinstance(rows, (list, tuple)):
        raise AnsibleFilterError("layered_image_status needs a list of status rows")
    if inspections is None:
        return _layered.status_inspections(rows)
    return _layered.status_layers(rows, inspections)


class FilterModule:
    """LayeredImage objects, their compositions and their lock."""

    def filters(self):
        return {"layered_image_load": layered_image_load, "layered_image_auth": layered_image_auth, "layered_image_compositions": layered_image_compositions,
                "layered_image_lock": layered_image_lock, "layered_image_lock_read": layered_image_lock_read,
                "layered_image_status": layered_image_status}
