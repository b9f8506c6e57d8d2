# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
name: machine_images
author: fleetos.layering contributors (@fleetos)
version_added: 0.1.0
short_description: Assign MachineImage objects to the hosts of an existing inventory
description:
  - Reads C(MachineImage) manifests (C(apiVersion) V(fleetos.io/v1alpha1), one or many documents per
    file) from a directory and, for every host already in the inventory, resolves the image it should
    run exactly as P(fleetos.layering.resolve_machine_image#filter) does.
  - Sets the host variable named by O(result_var) (default C(fleetos_machine_image)) to the result and
    adds the host to the group C(machine_image_<name>) of the deciding object (C(-) and C(.) in the
    name become C(_)); hosts that get the pool default join no such group.
  - Built on P(ansible.builtin.constructed#inventory); O(compose), O(groups) and O(keyed_groups) see
    the new variable.
  - This source must come after the sources that define the hosts, their labels and their pools
    (give it last with C(-i), or name it so that it sorts after them in an inventory directory). A source
    that finds no host of O(hosts_group) fails, naming this - as when AWX syncs it alone as an inventory
    source of its own; make it part of the source that defines the hosts (an inventory directory).
  - In an inventory directory, keep O(manifests_dir) outside it, such as C(../machine_images), since Ansible
    reads every file of the directory as an inventory source, manifests included.
  - A C(MachineImage) may name a C(LayeredImage) (C(spec.layeredImage)) instead of an image; its result then has
    C(layered_image) and no image.
  - An invalid manifest, a conflict (two objects matching one host at the same level), an image
    without digest and without C(spec.allowTag), or a missing pull secret variable fail the source
    with a message naming the file, the document, the object and the field.
  - The configuration file name must end with C(machine_images.yml) or C(machine_images.yaml).
seealso:
  - plugin: fleetos.layering.resolve_machine_image
    plugin_type: filter
  - plugin: ansible.builtin.constructed
    plugin_type: inventory
options:
  plugin:
    description: Token that makes this file a source for this plugin.
    required: true
    type: string
    choices: [fleetos.layering.machine_images]
  manifests_dir:
    description:
      - Directory holding the manifests, C(*.yaml) and C(*.yml), not recursive.
      - A relative path is relative to the directory of this configuration file; C(~) is expanded.
    type: string
    default: machine_images
  hosts_group:
    description: Only hosts of this group are resolved.
    type: string
    default: all
  labels_var:
    description: Host variable holding the node labels.
    type: string
    default: fleetos_node_labels
  pool_image_var:
    description: Variable (usually a group variable) holding the pool default image.
    type: string
    default: fleetos_pool_image
  pool_layered_image_var:
    description:
      - Variable (usually a group variable) naming the LayeredImage of the pool default, instead of an image;
        the host's result then has C(layered_image) and the planner takes its composed digest from the lock
        (C(fleetos_rollout_lock)). A host with both this and the pool image fails the source.
    type: string
    default: fleetos_pool_layered_image
    version_added: 0.2.0
  pool_pull_secret_var:
    description: Variable naming the variable that holds the pull secret of the pool default image.
    type: string
    default: fleetos_pool_pull_secret
  result_var:
    description: Host variable that receives the result.
    type: string
    default: fleetos_machine_image
  check_pull_secrets:
    description:
      - Fail when the variable a C(spec.pullSecret) names is not defined for the host.
      - Variables from C(group_vars/) and C(host_vars/) directories are only seen with
        O(use_vars_plugins=true).
    type: bool
    default: true
  use_vars_plugins:
    description:
      - Run the vars plugins (C(host_group_vars) reads C(group_vars/) and C(host_vars/)) to get the
        labels, pool images and pull secret variables of the hosts, as in
        P(ansible.builtin.constructed#inventory).
    type: bool
    default: false
extends_documentation_fragment:
  - ansible.builtin.constructed
"""

EXAMPLES = r"""
# inventories/example/machine_images.yml, used after the file that defines the hosts:
#   ansible-inventory -i inventories/example/hosts.yml -i inventories/example/machine_images.yml --graph
plugin: fleetos.layering.machine_images
manifests_dir: machine_images
use_vars_plugins: true
# constructed options see fleetos_machine_image:
keyed_groups:
  - key: fleetos_machine_image.source
    prefix: machine_image_source
groups:
  machine_image_paused: fleetos_machine_image.paused
"""

import os

from ansible.errors import AnsibleParserError
from ansible.module_utils.common.text.converters import to_text
from ansible import constants as C
from ansible.inventory.helpers import get_group_vars
from ansible.plugins.inventory import BaseInventoryPlugin, Constructable
from ansible.plugins.loader import cache_loader
from ansible.utils.vars import combine_vars
from ansible.vars.plugins import get_vars_from_inventory_sources
from ansible_collections.fleetos.layering.plugins.module_utils._errors import FleetosError
from ansible_collections.fleetos.layering.plugins.plugin_utils.images._machine_image import (
    MachineImageSet,
    group_name,
)
from ansible_collections.fleetos.layering.plugins.plugin_utils.images._manifests import load_manifest_dir


class InventoryModule(BaseInventoryPlugin, Constructable):
    """Sets fleetos_machine_image and machine_image_<name> groups from MachineImage manifests."""

    NAME = "fleetos.layering.machine_images"

    def verify_file(self, path):
        return super().verify_file(path) and os.path.basename(path).endswith(
            ("machine_images.yml", "machine_images.yaml"))

    def parse(self, inventory, loader, path, cache=False):
        super().parse(inventory, loader, path, cache=cache)
        self._read_config_data(path)
        sources = getattr(inventory, "processed_sources", [])
        strict = self.get_option("strict")
        manifests_dir = os.path.expanduser(self.get_option("manifests_dir"))
        if not os.path.isabs(manifests_dir):
            manifests_dir = os.path.join(os.path.dirname(to_text(path)), manifests_dir)
        try:
            manifests = load_manifest_dir(manifests_dir, relative_to=os.path.dirname(to_text(path)), missing_ok=False)
            if manifests["error"] is not None:
                raise AnsibleParserError(manifests["error"])
            images = MachineImageSet(manifests["objects"])
        except FleetosError as exc:
            raise AnsibleParserError(exc.msg) from None

        group = self.get_option("hosts_group")
        if group == "all":
            hosts = list(inventory.hosts)
        elif group in inventory.groups:
            hosts = [h.name for h in inventory.groups[group].get_hosts()]
        else:
            raise AnsibleParserError("%s: hosts_group %r is not a group of the inventory" % (path, group))
        if not hosts:
            # Alone (AWX syncs each inventory source on its own) it would give every host nothing, in silence.
            raise AnsibleParserError(
                "%s: no host of group %r is in the inventory when this MachineImage source is read; it assigns images"
                " to the hosts the sources before it define, so give it after them (-i hosts.yml -i machine_images.yml)"
                " or, in AWX, in the same inventory source as them (docs/awx.md)" % (path, group))

        fact_cache = cache_loader.get(C.CACHE_PLUGIN)
        result_var = self.get_option("result_var")
        for name in sorted(hosts):
            hostvars = self._host_vars(inventory, loader, sources, name, fact_cache)
            try:
                result = images.resolve(
                    name,
                    hostvars.get(self.get_option("labels_var")),
                    pool_image=hostvars.get(self.get_option("pool_image_var")),
                    defined_vars=frozenset(hostvars) if self.get_option("check_pull_secrets") else None,
                    pool_pull_secret=hostvars.get(self.get_option("pool_pull_secret_var")),
                    pool_layered_image=hostvars.get(self.get_option("pool_layered_image_var")),
                )
            except FleetosError as exc:
                raise AnsibleParserError(exc.msg) from None
            inventory.set_variable(name, result_var, result)
            if result["name"] is not None:
                inventory.add_group(group_name(result["name"]))
                inventory.add_child(group_name(result["name"]), name)

            hostvars = self._host_vars(inventory, loader, sources, name, fact_cache)
            self._set_composite_vars(self.get_option("compose"), hostvars, name, strict=strict)
            hostvars = self._host_vars(inventory, loader, sources, name, fact_cache)
            self._add_host_to_composed_groups(self.get_option("groups"), hostvars, name, strict=strict,
                                              fetch_hostvars=False)
            self._add_host_to_keyed_groups(self.get_option("keyed_groups"), hostvars, name, strict=strict,
                                           fetch_hostvars=False)

    def _host_vars(self, inventory, loader, sources, name, fact_cache):
        """Group and host variables of a host, as ansible.builtin.constructed computes them."""
        host = inventory.hosts[name]
        group_vars = get_group_vars(host.get_groups())
        host_vars = host.get_vars()
        if self.get_option("use_vars_plugins"):
            group_vars = combine_vars(group_vars, get_vars_from_inventory_sources(loader, sources, host.get_groups(), "all"))
            host_vars = combine_vars(host_vars, get_vars_from_inventory_sources(loader, sources, [host], "all"))
        hostvars = combine_vars(group_vars, host_vars)
        if fact_cache.contains(name):
            hostvars = combine_vars(hostvars, fact_cache.get(name))
        return hostvars
