# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# This is a private plugin_util of fleetos.layering: its interface may change at any
# time and it is not meant to be used by other collections.

"""The plan of every host of a play at once, from the inventory alone, on the controller.

A task per host costs Ansible a worker and a variable lookup per host: planning 10,000 hosts
that way took minutes before a single decision was made. Here one run_once task reads each
host's variables once (:func:`host_values`, through ``hostvars``) and decides for all of them
(:func:`plan_fleet`): the MachineImage of each host (``MachineImageSet``, compiled once), the
LayeredImage of the lock, the pool default and the fallback image, each through the one
function that decides it for a single host (``_plan.host_plan``).

A host's inputs are read from the host's own variables (inventory, group_vars, facts, extra
variables): the role option when the host has it (``machine_image_node_labels``), else the
inventory variable the option defaults to (``fleetos_node_labels``). A value given to the play as
a whole (a role parameter of the ``include_role``, a play variable) is not a variable of the
host; :func:`host_inputs` takes it from ``play``: the options as the run_once host sees them,
used where a host has neither variable, unless the run_once host has one itself (then the
value is that host's own and not the play's).
"""

from __future__ import annotations

from collections.abc import Mapping

from ansible.module_utils.parsing.convert_bool import boolean
from ansible_collections.fleetos.layering.plugins.module_utils._errors import FleetosError
from ansible_collections.fleetos.layering.plugins.plugin_utils._unset import none_if_empty
from ansible_collections.fleetos.layering.plugins.plugin_utils.images._machine_image import MachineImageSet
from ansible_collections.fleetos.layering.plugins.plugin_utils.rollout._plan import host_plan

# The inputs of one host's plan: (key, role option, the inventory variable it defaults to, default).
INPUTS = (
    ("inventory_result", "machine_image_inventory_result", "fleetos_machine_image", None),
    ("labels", "machine_image_node_labels", "fleetos_node_labels", None),
    ("pool_image", "machine_image_pool_image", "fleetos_pool_image", None),
    ("pool_layered_image", "machine_image_pool_layered_image", "fleetos_pool_layered_image", None),
    ("pool_pull_secret", "machine_image_pool_pull_secret", "fleetos_pool_pull_secret", None),
    ("pool", "os_plan_pool", "fleetos_pool", None),
    ("pool_paused", "os_plan_pool_paused", "fleetos_pool_paused", False),
    ("fallback_image", "os_plan_fallback_image", "fleetos_rollout_image", None),
    ("fallback_transport", "os_plan_fallback_transport", "fleetos_rollout_transport", None),
    ("update_agents", "os_plan_update_agents", "fleetos_update_agents", None),
    ("soft_reboot", "os_plan_soft_reboot", "fleetos_rollout_soft_reboot", None),
)
KEYS = tuple(key for key, _option, _variable, _default in INPUTS)
# Inputs that are text: "" is unset (a template that gave None renders as "" before ansible-core 2.19).
_TEXT = frozenset(("pool_image", "pool_layered_image", "pool_pull_secret", "pool", "fallback_image",
                   "fallback_transport", "update_agents", "soft_reboot"))


def plain(value):
    """``value`` as plain dicts and lists (a templated value may be a lazy container or a tuple)."""
    if isinstance(value, Mapping):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    return value


def host_values(hostvars, hosts, names):
    """``{host: {name: templated value}}`` for each name of ``names`` that the host has.

    ``hostvars`` is Ansible's ``hostvars`` (or any mapping of host to a mapping of its variables);
    each host's variables are looked up once.
    """
    found = {}
    for host in hosts or ():
        variables = hostvars[host]
        found[host] = {name: plain(variables[name]) for name in names if name in variables}
    return found


def input_names():
    """Every variable :func:`host_inputs` reads of a host."""
    names = []
    for _key, option, variable, _default in INPUTS:
        names.extend((option, variable))
    return names


def read_hosts(hostvars, hosts, secrets=(), play=None, extra=()):
    """Each host's input variables and the pull secret variables it has, looking each host up once.

    -> ``(values, defined)``: ``values`` as :func:`host_values` gives them for :func:`input_names` and
    the names of ``extra`` (read in the same lookup: a host's variables cost Ansible about a
    millisecond to gather); ``defined`` maps each host to the names among ``secrets`` (the
    MachineImages' pull secrets), its pool pull secret and the play's that the host has.
    """
    names = list(dict.fromkeys(input_names() + list(extra)))
    play_secret = none_if_empty((play or {}).get("pool_pull_secret"))
    values, defined = {}, {}
    for host in hosts or ():
        variables = hostvars[host]
        found = {name: plain(variables[name]) for name in names if name in variables}
        candidates = set(secrets)
        for name in ("machine_image_pool_pull_secret", "fleetos_pool_pull_secret"):
            if isinstance(found.get(name), str) and found[name]:
                candidates.add(found[name])
        if play_secret:
            candidates.add(play_secret)
        values[host] = found
        defined[host] = sorted(name for name in candidates if name in variables)
    return values, defined


def _normal(key, value):
    if key in _TEXT:
        return none_if_empty(value)
    if key == "pool_paused":
        return boolean(value, strict=False) if value is not None else False
    if key in ("labels", "inventory_result"):
        return value if isinstance(value, Mapping) and value else None
    return value


def host_inputs(values, run_host=None, play=None):
    """Each host's plan inputs, ``{host: {key: value}}``, from :func:`host_values` of :func:`input_names`.

    ``play`` maps a key of ``INPUTS`` to the value the play gives it (the role option as the
    run_once host ``run_host`` sees it), used for a host that has neither the option nor the
    variable, unless ``run_host`` has one of them itself.
    """
    play = play or {}
    own = values.get(run_host) or {}
    found = {}
    for host, variables in values.items():
        inputs = {}
        for key, option, variable, default in INPUTS:
            name = option if option in variables else variable
            if option in variables:
                value = variables[option]
            elif variable in variables:
                value = variables[variable]
            elif key in play and option not in own and variable not in own:
                value = play[key]
            else:
                value = default
            if key in _TEXT and value is not None and not isinstance(value, str) and "input_error" not in inputs:
                # A host's own bad value makes its plan an error, not the fleet's (a list cannot even be compared).
                inputs["input_error"] = "The variable %s of host %s is a %s, not a text." % (name, host, _type_name(value))
                value = None
            inputs[key] = _normal(key, value)
        found[host] = inputs
    return found


def _type_name(value):
    """A value's type as a playbook author names it."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, Mapping):
        return "mapping"
    if isinstance(value, (list, tuple)):
        return "list"
    return type(value).__name__


def secret_names(manifests):
    """The pull secret names the MachineImages of a loaded manifest record name."""
    try:
        images = MachineImageSet((manifests or {}).get("objects") or []).images
    except FleetosError:
        return []
    return sorted({image.pull_secret for image in images if image.pull_secret})


def _assignment(images, host, inputs, defined):
    if inputs["inventory_result"]:
        return inputs["inventory_result"]
    return images.resolve(host, inputs["labels"], pool_image=inputs["pool_image"], defined_vars=defined,
                          pool_pull_secret=inputs["pool_pull_secret"], pool_layered_image=inputs["pool_layered_image"])


def plan_fleet(inputs, manifests, lock=None, defined=None, brief=False, pins=None):
    """The plan of every host, from the inventory alone -> ``{"hosts", "wanted", "manifests"}``.

    ``inputs`` is :func:`host_inputs`; ``manifests`` the record ``machine_image_load`` gives (its
    ``error`` makes every host ``error`` with that sentence); ``lock`` the lock read once
    (``layered_image_lock_read``), or None; ``defined`` maps a host to the pull secret variables it
    has, or is None to check no pull secret. ``hosts`` gives each host its ``inputs``, its
    ``assignment`` (the ``machine_image_result`` of the role fleetos.layering.machine_image), the
    ``error`` that left it without one (None when it has one) and its ``plan`` (``_plan.host_plan``
    without a status: an ``error`` is the plan's reason); ``wanted`` the images the plans name, once
    each, sorted (what a status read resolves); ``manifests`` the record as given.

    ``pins`` are the digests a verified canary run resolved its tags to (``_plan.pin_to_canary``), or None.
    ``brief`` leaves out each host's ``inputs`` and ``assignment``, which only a status read plans
    with: a plan from the inventory alone is all its ``plan`` (every further copy of the record,
    as Ansible hands it from task to task, costs in proportion to its size).
    """
    manifests = manifests if isinstance(manifests, dict) else {}
    error = manifests.get("error")
    images = None
    if error is None:
        try:
            images = MachineImageSet(manifests.get("objects") or [])
        except FleetosError as exc:
            error = exc.msg
    hosts = {}
    for host in sorted(inputs):
        given = inputs[host]
        assignment, failure = None, error or given.get("input_error")
        if failure is None:
            try:
                assignment = _assignment(images, host, given,
                                         None if defined is None else frozenset(defined.get(host) or ()))
            except FleetosError as exc:
                failure = exc.msg
        labels = given["labels"] or {}
        if failure is not None:
            plan = host_plan(None, host, pool=given["pool"], labels=labels, error=failure)
        else:
            plan = host_plan(assignment, host, pool=given["pool"], fallback_image=given["fallback_image"],
                             fallback_transport=given["fallback_transport"], pool_paused=given["pool_paused"],
                             labels=labels, lock=lock, pins=pins, soft_reboot=given.get("soft_reboot"))
        hosts[host] = ({"error": failure, "plan": plan} if brief
                       else {"inputs": given, "assignment": assignment, "error": failure, "plan": plan})
    wanted = sorted({entry["plan"]["wanted"] for entry in hosts.values() if entry["plan"]["wanted"]})
    return {"hosts": hosts, "wanted": wanted, "manifests": manifests}
