# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""playbooks/specs/: one spec per playbook, listing exactly the fleetos_ variables its import chain reads.

The chain of a playbook is the playbook, the task files it imports and the roles it includes
(their tasks and defaults), recursively. A name it mentions in a value (not in a comment) is
read, unless the chain sets it itself (set_fact). Where a variable feeds a role option (the
role's default reads it) or a module option, the spec's type and choices agree with the
role's argument spec or the module's documentation.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest
import yaml

from ansible_collections.fleetos.layering.plugins.plugin_utils import _playbook_specs

REPO = Path(__file__).resolve().parents[2]
PLAYBOOKS = ["adopt", "compose", "plan", "rollback", "rollout", "status"]
NAME = re.compile(r"\bfleetos_[a-z0-9_]*[a-z0-9](?![a-z0-9_*])")
ROLE = re.compile(r"^fleetos\.layering\.([a-z0-9_]+)$")
# "{{ fleetos_x }}" or "{{ fleetos_x | default(...) }}": an option that takes the variable as it is.
FED_BY = re.compile(r"^\{\{\s*(fleetos_[a-z0-9_]+)\s*(\|\s*default\(|\}\}$)")
# A spec type and the types of a role or module option it can feed.
FEEDS = {"str": {"str", "raw"}, "path": {"path", "str", "raw"}, "raw": {"raw"}, "int": {"int", "raw"},
         "bool": {"bool", "raw"}, "dict": {"dict", "raw"}}


def load(path):
    return yaml.safe_load(Path(path).read_text()) or []


def walk(data):
    """Every (key, value) pair and string of a YAML document."""
    if isinstance(data, dict):
        for key, value in data.items():
            yield key, value
            yield from walk(value)
    elif isinstance(data, list):
        for item in data:
            yield from walk(item)


def tasks(data):
    """Every task (a mapping with a name or an action) of a YAML document, blocks and plays included."""
    if isinstance(data, list):
        for item in data:
            yield from tasks(item)
    elif isinstance(data, dict):
        yield data
        for key in ("tasks", "pre_tasks", "post_tasks", "handlers", "block", "rescue", "always"):
            yield from tasks(data.get(key))


def strings(data):
    if isinstance(data, str):
        yield data
    elif isinstance(data, dict):
        for value in data.values():
            yield from strings(value)
    elif isinstance(data, list):
        for item in data:
            yield from strings(item)


class Chain:
    """The files a playbook reads, and what they read and feed."""

    def __init__(self, playbook):
        self.files = []
        self.roles = []
        self._add_tasks(REPO / "playbooks" / ("%s.yml" % playbook))

    def _add_tasks(self, path):
        if path in self.files:
            return
        self.files.append(path)
        for task in tasks(load(path)):
            for key, value in task.items():
                # A templated task file is the user's (os_activate_pre_tasks); a role's own are all added.
                if key in ("ansible.builtin.import_tasks", "ansible.builtin.include_tasks") and "{{" not in str(value):
                    self._add_tasks(path.parent / value)
                if key in ("ansible.builtin.include_role", "ansible.builtin.import_role"):
                    self._add_role(ROLE.match(value["name"]).group(1))

    def _add_role(self, role):
        if role in self.roles:
            return
        self.roles.append(role)
        self.files.append(REPO / "roles" / role / "defaults" / "main.yml")
        for path in sorted((REPO / "roles" / role / "tasks").glob("*.yml")):
            self._add_tasks(path)

    def read(self):
        documents = [load(path) for path in self.files]
        mentioned = {name for document in documents for text in strings(document) for name in NAME.findall(text)}
        set_here = {name for document in documents for task in tasks(document)
                    for name in (task.get("ansible.builtin.set_fact") or {}) if name.startswith("fleetos_")}
        return {name for name in mentioned - set_here if not name.startswith(("fleetos_lab_", "fleetos_last_"))}

    def feeds(self):
        """(variable, where, option spec) for each role or module option a variable is the default of."""
        found = []
        for role in self.roles:
            options = role_options(role)
            for option, value in load(REPO / "roles" / role / "defaults" / "main.yml").items():
                if isinstance(value, str) and passes(value):
                    found.append((FED_BY.match(value).group(1), "%s.%s" % (role, option), options[option]))
        for path in self.files:
            for task in tasks(load(path)):
                for key, args in task.items():
                    module = ROLE.match(str(key))
                    if module and isinstance(args, dict):
                        # Options of a doc fragment (auth_file, ca_cert_dir) have no choices.
                        options = module_options(module.group(1))
                        for option, value in args.items():
                            if isinstance(value, str) and passes(value) and option in options:
                                found.append((FED_BY.match(value).group(1), "%s.%s" % (key, option), options[option]))
                if "ansible.builtin.include_role" in task:
                    role = ROLE.match(task["ansible.builtin.include_role"]["name"]).group(1)
                    options = role_options(role)
                    for option, value in (task.get("vars") or {}).items():
                        if isinstance(value, str) and passes(value) and option in options:
                            found.append((FED_BY.match(value).group(1), "%s.%s" % (role, option), options[option]))
        return found


def role_options(role):
    """The options of every entry point of a role's argument spec (main, and tasks_from ones)."""
    options = {}
    for entry_point in load(REPO / "roles" / role / "meta" / "argument_specs.yml")["argument_specs"].values():
        options.update((entry_point or {}).get("options") or {})
    return options


def passes(value):
    """The template is the variable itself, or the variable with a default (not a value computed from it)."""
    match = FED_BY.match(value)
    if not match:
        return False
    if match.group(2).startswith("}}"):
        return True
    depth, rest = 1, value[match.end():]
    for index, char in enumerate(rest):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth == 0:
            return rest[index + 1:].strip() == "}}"
    return False


def module_options(module):
    source = importlib.import_module("ansible_collections.fleetos.layering.plugins.modules.%s" % module)
    return yaml.safe_load(source.DOCUMENTATION)["options"]


def spec(playbook):
    return _playbook_specs.load_spec(playbook)


def test_every_playbook_has_a_spec_and_imports_the_check_with_its_name():
    assert _playbook_specs.playbooks() == sorted(p.stem for p in (REPO / "playbooks").glob("*.yml"))
    for playbook in PLAYBOOKS:
        # The play that only gives each host cached facts of its own (rollout, rollback) comes before the check.
        plays = [p for p in load(REPO / "playbooks" / ("%s.yml" % playbook))
                 if p["name"] != "Give each host cached facts of its own"]
        first = plays[0]["tasks"][0]
        # A play that runs once on the controller (compose) has its tasks in one block.
        first = first["block"][0] if "block" in first else first
        assert first["ansible.builtin.import_tasks"] == "tasks/check_variables.yml", playbook
        assert first["vars"]["__fleetos_check_playbook"] == playbook
        # Only plan.yml checks in a read of its own, when it reads no host (see tasks/check_variables.yml).
        assert set(first["vars"]) == ({"__fleetos_check_playbook", "__fleetos_check_hosts"} if playbook == "plan"
                                      else {"__fleetos_check_playbook"}), playbook


@pytest.mark.parametrize("playbook", PLAYBOOKS)
def test_a_spec_lists_exactly_what_its_playbook_reads(playbook):
    read = Chain(playbook).read()
    listed = set(spec(playbook))
    assert sorted(read - listed) == [], "read by %s.yml but not in its spec" % playbook
    assert sorted(listed - read) == [], "in the spec of %s but read by nothing" % playbook


@pytest.mark.parametrize("playbook", PLAYBOOKS)
def test_every_entry_has_a_type_and_a_description_and_a_raw_one_a_form(playbook):
    for name, option in spec(playbook).items():
        assert name.startswith("fleetos_"), name
        assert set(option) <= {"type", "description", "choices", "elements"}, name
        assert option["type"] in FEEDS and option["description"].endswith("."), name
        assert (option["type"] == "raw") == (name in _playbook_specs.FORMS), name


def test_a_variable_has_one_type_and_one_set_of_choices_in_every_spec():
    seen = {}
    for playbook in PLAYBOOKS:
        for name, option in spec(playbook).items():
            kind = (option["type"], tuple(option.get("choices") or ()), option.get("elements"))
            assert seen.setdefault(name, (kind, playbook))[0] == kind, (name, playbook, seen[name][1])


@pytest.mark.parametrize("playbook", PLAYBOOKS)
def test_a_spec_agrees_with_the_options_its_variables_feed(playbook):
    options = spec(playbook)
    feeds = Chain(playbook).feeds()
    assert feeds or playbook == "compose"
    for variable, where, target in feeds:
        assert target.get("type", "str") in FEEDS[options[variable]["type"]], (variable, where)
        if target.get("choices"):
            assert sorted(options[variable].get("choices") or []) == sorted(target["choices"]), (variable, where)


def test_the_backend_is_checked_where_it_feeds_a_role_and_a_module():
    """The check above sees both kinds of option (it could otherwise pass on nothing)."""
    assert {where for variable, where, _target in Chain("rollout").feeds() + Chain("status").feeds()
            if variable == "fleetos_os_backend"} == {"os_plan.os_plan_backend", "fleetos.layering.os_info.backend"}
