# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Filters for MachineImage assignment; documented in the .yml files next to this one."""

from __future__ import annotations

import os

from ansible.errors import AnsibleFilterError
from ansible_collections.fleetos.layering.plugins.module_utils._errors import FleetosError
from ansible_collections.fleetos.layering.plugins.plugin_utils._unset import empty_means_unset
from ansible_collections.fleetos.layering.plugins.plugin_utils.images._machine_image import MachineImageSet
from ansible_collections.fleetos.layering.plugins.plugin_utils.images._selector import (
    compile_selector,
    normalize_labels,
)
from ansible_collections.fleetos.layering.plugins.plugin_utils.images._manifests import (
    load_manifest_dir,
    parse_manifests,
)


def machine_image_load(directory, relative_to=None, required=False):
    """Filter: read, parse and validate the manifests of a directory, once; a file that does not load is
    named in the result, never raised (see machine_image_load.yml). A ``required`` directory that does
    not exist is the result's ``error`` too, so that every host is told, not only the first."""
    try:
        record = load_manifest_dir(directory, relative_to=relative_to)
    except FleetosError as exc:
        raise AnsibleFilterError(exc.msg) from None
    if required and not os.path.isdir(directory):
        record["error"] = ("MachineImage manifests were expected in %s (fleetos_machine_images_dir or "
                           "machine_image_manifests_dir), but that directory does not exist" % directory)
        record["errors"] = [record["error"]]
    return record


def machine_image_manifests(contents, names):
    """Filter: parse manifest texts into annotated MachineImage objects."""
    try:
        return parse_manifests(contents, names)
    except FleetosError as exc:
        raise AnsibleFilterError(exc.msg) from None


@empty_means_unset("pool_image", "pool_pull_secret", "pool_transport", "pool_layered_image")
def resolve_machine_image(machine_images, host, labels=None, pool_image=None, defined_vars=None,
                          pool_pull_secret=None, pool_transport=None, pool_layered_image=None):
    """Filter: the MachineImage assignment of one host (see resolve_machine_image.yml)."""
    try:
        names = None if defined_vars is None else frozenset(defined_vars)
        return MachineImageSet(machine_images).resolve(
            host, labels, pool_image=pool_image, defined_vars=names,
            pool_pull_secret=pool_pull_secret, pool_transport=pool_transport, pool_layered_image=pool_layered_image)
    except FleetosError as exc:
        raise AnsibleFilterError(exc.msg) from None


def machine_image_warnings(machine_images, hosts):
    """Filter: sentences about objects that cannot apply, e.g. a nodeName naming no inventory host.

    An invalid set gives no warning: the hosts' resolution reports it as an error.
    """
    try:
        images = MachineImageSet(machine_images).images
    except FleetosError:
        return []
    known = frozenset(hosts or ())
    return ["%s names %s in spec.nodeName, which is not a host of the inventory; it applies to no host"
            % (image.where, image.node_name)
            for image in images if image.node_name is not None and image.node_name not in known]


def match_label_selector(labels, selector):
    """Filter: True when the node labels match a Kubernetes label selector."""
    try:
        return compile_selector(selector, field="selector").matches(normalize_labels(labels))
    except FleetosError as exc:
        raise AnsibleFilterError(exc.msg) from None


# The sentence a plan starts with when no host was given a MachineImage source.
NO_SOURCE = ("No MachineImage source was read: no host has fleetos_machine_image (the inventory plugin"
             " fleetos.layering.machine_images sets it), fleetos_machine_images_dir is not set and there is no"
             " machine_images directory beside the inventory, so every host gets its pool default or fleetos_rollout_image")


def machine_image_sources(hosts, hostvars, manifests_dir=None, default_dir=None):
    """Filter: whether the run read a MachineImage source -> ``{read, message}``: a manifests directory named
    (``manifests_dir``), the directory the role machine_image reads when none is named (``default_dir``, when it
    exists), or the inventory plugin's result on a host of ``hosts`` (looked up until the first one has it)."""
    if not isinstance(hosts, (list, tuple)):
        raise AnsibleFilterError("machine_image_sources needs a list of host names, such as ansible_play_hosts")
    if (manifests_dir not in (None, "") or (default_dir not in (None, "") and os.path.isdir(default_dir))
            or any("fleetos_machine_image" in hostvars[host] for host in hosts)):
        return {"read": True, "message": None}
    return {"read": False, "message": NO_SOURCE}


class FilterModule:
    """MachineImage resolution and Kubernetes label selectors."""

    def filters(self):
        return {
            "machine_image_load": machine_image_load,
            "machine_image_manifests": machine_image_manifests,
            "resolve_machine_image": resolve_machine_image,
            "match_label_selector": match_label_selector,
            "machine_image_warnings": machine_image_warnings,
            "machine_image_sources": machine_image_sources,
        }
