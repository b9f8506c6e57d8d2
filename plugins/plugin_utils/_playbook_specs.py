# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# This is a private plugin_util of fleetos.layering: its interface may change at any
# time and it is not meant to be used by other collections.

"""The argument spec of each playbook, and one sentence per ``fleetos_*`` variable that fails it.

``playbooks/specs/<playbook>.yml`` lists every ``fleetos_*`` variable a playbook and the roles
it includes read, in the format of a role's argument spec. ``playbooks/tasks/check_variables.yml``
validates the variables each host sees with ``ansible.builtin.validate_argument_spec`` before
any host is contacted; its messages differ between ansible-core releases and span lines, so
``variable_errors`` words the failures itself: each failing variable is validated alone, with
the same validator, and named once with its value, the hosts (when not all of them have that
value) and the accepted form. A count-or-percentage budget is ``type: raw`` in a spec (an
argument spec cannot say "2 or 25%"); ``FORMS`` checks it. The maintenance windows are ``type: raw``
too: each bad field of them (``fleetos_rollout_windows[0].start``) is named by ``_windows``.
"""

from __future__ import annotations

import json
import os
import re

import yaml
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.fleetos.layering.plugins.module_utils._errors import InvalidInputError
from ansible_collections.fleetos.layering.plugins.plugin_utils.rollout._fleet import plain
from ansible_collections.fleetos.layering.plugins.plugin_utils.rollout._windows import problems as window_problems

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SPEC_DIR = os.path.join("playbooks", "specs")
_SPECS = {}
_COUNT = re.compile(r"^\s*\d+\s*$")
_PERCENT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%\s*$")
# Shown hosts of a per-host failure; the others are counted.
_HOSTS_SHOWN = 5


def _count_or_percent(value):
    """What the filter ``rollout_budget`` accepts: a count (``2``, ``"2"``) or a percentage up to 100 (``"25%"``)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return value >= 0
    if isinstance(value, str):
        percent = _PERCENT.match(value)
        return bool(_COUNT.match(value)) or (percent is not None and float(percent.group(1)) <= 100)
    return False


# The maintenance windows of a pool and their zone (``type: raw`` in a spec), checked by ``_windows``.
WINDOWS = "fleetos_rollout_windows"
_BUDGET = (_count_or_percent, "a count or a percentage up to 100%, such as 2 or 25%")
# The maintenance windows and their zone: every bad field is named by ``_windows`` (``variable_errors``),
# so the value as a whole passes here.
_WINDOWS = (lambda value: True, "maintenance windows as docs/rollout.md describes them")
# The raw options of the specs and the form each must have.
FORMS = {"fleetos_pool_max_unavailable": _BUDGET, "fleetos_rollout_max_failures": _BUDGET,
         WINDOWS: _WINDOWS, WINDOWS + "_timezone": _WINDOWS}
_TYPE_FORMS = {
    "bool": "true or false",
    "int": "an integer",
    "float": "a number",
    "dict": "a mapping",
    "list": "a list",
    "str": "a string",
    "path": "a path",
}


def playbooks(root=_ROOT):
    """The playbooks that have a spec."""
    return sorted(name[:-4] for name in os.listdir(os.path.join(root, SPEC_DIR)) if name.endswith(".yml"))


def load_spec(playbook, root=_ROOT):
    """The options of ``playbooks/specs/<playbook>.yml``, read once."""
    if (root, playbook) not in _SPECS:
        known = playbooks(root)
        if playbook not in known:
            raise InvalidInputError("The playbook %r has no argument spec in %s; expected one of %s." % (
                playbook, SPEC_DIR, ", ".join(known)), field="playbook")
        with open(os.path.join(root, SPEC_DIR, playbook + ".yml"), encoding="utf-8") as handle:
            _SPECS[(root, playbook)] = yaml.safe_load(handle)["argument_specs"][playbook]["options"]
    return _SPECS[(root, playbook)]


def accepted_form(name, option):
    """The form an option accepts, as a sentence ends: ``one of auto, bootc, rpm-ostree``."""
    if option.get("choices"):
        return "one of %s" % ", ".join(str(choice) for choice in option["choices"])
    if name in FORMS:
        return FORMS[name][1]
    form = _TYPE_FORMS.get(option.get("type", "str"), "a %s" % option.get("type"))
    if option.get("elements"):
        form += " of %s elements" % option["elements"]
    return form


def problem(name, option, value):
    """None when ``value`` is valid for ``option``, else the accepted form."""
    if value is None:
        return None
    result = ArgumentSpecValidator({name: option}).validate({name: value}, validate_role_argument_spec=True)
    if result.error_messages or (name in FORMS and not FORMS[name][0](value)):
        return accepted_form(name, option)
    return None


def _shown(value):
    text = "'%s'" % value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 80 else text[:77] + "..."


def _on(hosts, total):
    if len(hosts) == total:
        return ""
    more = len(hosts) - _HOSTS_SHOWN
    return " on %s%s" % (", ".join(hosts[:_HOSTS_SHOWN]), " and %d more hosts" % more if more > 0 else "")


def _key(option, value):
    """A key for a value as the validator sees it (values repeat across the hosts of a group).

    A mapping or a list is valid for an option without sub-options or element type by its type
    alone (each host's node labels differ: validating each would cost as much as reading them).
    """
    if not option.get("options") and not option.get("elements"):
        if isinstance(value, dict) and option.get("type") in ("dict", "raw"):
            return "a mapping", option.get("type")
        if isinstance(value, list) and option.get("type") in ("list", "raw"):
            return "a list", option.get("type")
    try:
        return json.dumps(value, sort_keys=True, default=repr), type(value).__name__
    except (TypeError, ValueError):
        return None


def variable_errors(results, playbook, root=_ROOT):
    """One sentence per failing variable, from the values each host sees.

    ``results`` maps a host to the ``fleetos_*`` values it sees (templated), ``{name: value}``, or
    to its registered ``validate_argument_spec`` result, whose ``validate_args_context.values``
    holds them. Each distinct value of a variable is validated once.
    """
    # Plain values: ansible-core 2.19 hands a filter lazy containers, which the validator would copy
    # with everything they can template.
    results = plain(results)
    spec = load_spec(playbook, root)
    failing = {}
    unexplained = []
    checked = {}
    for host in sorted(results):
        result = results[host] if isinstance(results[host], dict) else {}
        if "validate_args_context" in result or "argument_errors" in result:
            values = (result.get("validate_args_context") or {}).get("values") or {}
        else:
            values, result = result, {}
        found = False
        for name in sorted(values):
            if name not in spec:
                continue
            key = _key(spec[name], values[name])
            if key is None or (name, key) not in checked:
                form = problem(name, spec[name], values[name])
                if key is not None:
                    checked[(name, key)] = form
            else:
                form = checked[(name, key)]
            if form is not None:
                failing.setdefault((name, _shown(values[name]), form), []).append(host)
                found = True
        if WINDOWS in spec and (WINDOWS in values or WINDOWS + "_timezone" in values):
            # The windows and their zone are raw in the spec: each bad field is named here.
            for field, value, form in window_problems(values.get(WINDOWS), values.get(WINDOWS + "_timezone", "UTC"), WINDOWS):
                failing.setdefault((field, _shown(value), form), []).append(host)
                found = True
        if result.get("argument_errors") and not found:
            unexplained.append((host, result["argument_errors"]))
    sentences = ["The variable %s is %s%s; it must be %s." % (name, shown, _on(hosts, len(results)), form)
                 for (name, shown, form), hosts in sorted(failing.items())]
    sentences.extend("The fleetos_ variables of %s failed their argument spec: %s." % (
        host, "; ".join(" ".join(str(error).split()) for error in errors)) for host, errors in unexplained)
    return sentences
