# Copyright (c) fleetos.layering contributors
# SPDX-License-Identifier: GPL-3.0-or-later
"""Checks on the collection's metadata and tooling files, computed from the files."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]

# SPDX identifiers of licences an Ansible collection may carry (GPL-compatible).
KNOWN_SPDX = {
    "GPL-3.0-or-later",
    "GPL-3.0-only",
    "GPL-2.0-or-later",
    "Apache-2.0",
    "MIT",
    "BSD-2-Clause",
    "BSD-3-Clause",
    "PSF-2.0",
    "MPL-2.0",
}
FULL_VERSION = r"\d+\.\d+\.\d+"
# One or more comma-separated clauses, each an operator and a full x.y.z version.
REQUIRES_ANSIBLE_RE = re.compile(
    rf"^\s*(?:>=|>|<=|<|==|!=|~=)\s*{FULL_VERSION}"
    rf"(?:\s*,\s*(?:>=|>|<=|<|==|!=|~=)\s*{FULL_VERSION})*\s*$"
)


def load_yaml(path: Path):
    with path.open(encoding="utf-8") as handle:
        return yaml.safe_load(handle)


@pytest.fixture(scope="module")
def galaxy() -> dict:
    return load_yaml(REPO_ROOT / "galaxy.yml")


@pytest.fixture(scope="module")
def changelog_sections() -> set[str]:
    config = load_yaml(REPO_ROOT / "changelogs" / "config.yaml")
    sections = {name for name, _title in config["sections"]}
    sections.add(config["prelude_section_name"])
    sections.add(config["trivial_section_name"])
    # Plugin/object announcements antsibull-changelog accepts in fragments.
    sections.update({"add plugin.module", "add object.role", "add object.playbook"})
    return sections


def test_galaxy_identity(galaxy):
    assert galaxy["namespace"] == "fleetos"
    assert galaxy["name"] == "layering"
    assert galaxy["version"] == "0.2.0"


def test_galaxy_license_is_spdx(galaxy):
    licenses = galaxy["license"]
    assert isinstance(licenses, list) and licenses, "license must be a non-empty list"
    assert set(licenses) <= KNOWN_SPDX, f"not a known SPDX identifier: {set(licenses) - KNOWN_SPDX}"
    assert "license_file" not in galaxy, "license and license_file are mutually exclusive"
    assert (REPO_ROOT / "LICENSE").read_text(encoding="utf-8").lstrip().startswith(
        "GNU GENERAL PUBLIC LICENSE"
    )


def test_galaxy_build_ignore_keeps_lab_out(galaxy):
    ignored = set(galaxy["build_ignore"])
    for entry in (".ansible", "lab", "bench", ".lab", ".venv", ".build", "inventories/lab", "tests/output", ".ci"):
        assert entry in ignored, f"{entry} missing from build_ignore"


@pytest.mark.parametrize(
    ("spec", "ok"),
    [
        (">=2.16.0", True),
        (">=2.16.0,<2.21.0", True),
        (">=2.16", False),
        ("2.16.0", False),
        (">= 2.16.0, < 3", False),
    ],
)
def test_requires_ansible_pattern(spec, ok):
    assert bool(REQUIRES_ANSIBLE_RE.match(spec)) is ok


def test_requires_ansible_is_full_version():
    runtime = load_yaml(REPO_ROOT / "meta" / "runtime.yml")
    spec = runtime["requires_ansible"]
    assert REQUIRES_ANSIBLE_RE.match(spec), f"requires_ansible {spec!r} is not a full version spec"


def test_changelog_fragments(changelog_sections):
    """Fragments wait for the next release; right after a release there are none, and the releases hold them."""
    fragments = sorted((REPO_ROOT / "changelogs" / "fragments").glob("*.yml"))
    releases = load_yaml(REPO_ROOT / "changelogs" / "changelog.yaml").get("releases") or {}
    assert fragments or releases, "no changelog fragments found and no release in changelogs/changelog.yaml"
    galaxy = load_yaml(REPO_ROOT / "galaxy.yml")
    if not fragments:
        assert galaxy["version"] in releases, "no fragments, yet galaxy.yml's version %s is not released" % (
            galaxy["version"])
    for fragment in fragments:
        content = load_yaml(fragment)
        assert isinstance(content, dict) and content, f"{fragment.name}: empty or not a mapping"
        unknown = set(content) - changelog_sections
        assert not unknown, f"{fragment.name}: unknown sections {sorted(unknown)}"


def test_sanity_ignore_files_are_empty():
    ignore_files = sorted((REPO_ROOT / "tests" / "sanity").glob("ignore-*.txt"))
    assert ignore_files, "no tests/sanity/ignore-*.txt files found"
    not_empty = [path.name for path in ignore_files if path.read_text(encoding="utf-8").strip()]
    assert not not_empty, f"sanity ignore files must stay empty: {not_empty}"


def test_ansible_lint_config():
    config = load_yaml(REPO_ROOT / ".ansible-lint")
    assert config["profile"] == "production"
    assert not config.get("skip_list"), "skip_list must be empty"
    assert not config.get("warn_list"), "warn_list must be empty"


def _spec_option_keys(role: Path) -> set[str]:
    specs = load_yaml(role / "meta" / "argument_specs.yml")["argument_specs"]
    keys: set[str] = set()
    for entry_point in specs.values():
        keys.update((entry_point or {}).get("options") or {})
    return keys


def _roles() -> list[Path]:
    roles_dir = REPO_ROOT / "roles"
    if not roles_dir.is_dir():
        return []
    return sorted(path for path in roles_dir.iterdir() if path.is_dir())


@pytest.mark.parametrize(
    "role",
    _roles() or [pytest.param(None, marks=pytest.mark.skip(reason="no roles under roles/ yet"))],
    ids=lambda role: role.name if role else "none",
)
def test_role_argument_specs_match_defaults(role):
    spec_file = role / "meta" / "argument_specs.yml"
    assert spec_file.is_file(), f"{role.name}: meta/argument_specs.yml missing"
    specs = load_yaml(spec_file)["argument_specs"]
    for name, entry_point in specs.items():
        for option, spec in ((entry_point or {}).get("options") or {}).items():
            assert "type" in spec, f"{role.name}:{name}: option {option} has no type"
    defaults_file = role / "defaults" / "main.yml"
    defaults = set(load_yaml(defaults_file) or {}) if defaults_file.is_file() else set()
    option_keys = _spec_option_keys(role)
    required = {
        option
        for entry_point in specs.values()
        for option, spec in ((entry_point or {}).get("options") or {}).items()
        if spec.get("required")
    }
    assert defaults <= option_keys, f"{role.name}: defaults without a spec: {sorted(defaults - option_keys)}"
    missing = option_keys - required - defaults
    assert not missing, f"{role.name}: optional options without a default: {sorted(missing)}"
    internal = {key for key in option_keys if key.startswith("__")}
    assert not internal, f"{role.name}: internal variables in the spec: {sorted(internal)}"
    for key in option_keys:
        assert key.startswith(f"{role.name}_"), f"{role.name}: option {key} lacks the role prefix"


# The lowest ansible-core a requires_ansible clause admits: ">=2.19.0", "==2.19.1", "~=2.19.0".
LOWER_BOUND_RE = re.compile(r"^\s*(?:>=|==|~=)\s*(\d+)\.(\d+)\.\d+\s*$")


def _requires_ansible_minimum(spec: str) -> tuple[int, int]:
    """(major, minor) of the lower bound of a requires_ansible spec; ValueError when it has none."""
    bounds = [match.groups() for match in map(LOWER_BOUND_RE.match, spec.split(",")) if match]
    if not bounds:
        raise ValueError(f"requires_ansible {spec!r} has no lower bound (>=, == or ~=)")
    return max((int(major), int(minor)) for major, minor in bounds)


def _major_minor(version: str) -> tuple[int, int]:
    """(major, minor) of a "2.19" or "2.19.0" text; ValueError otherwise."""
    match = re.fullmatch(r"(\d+)\.(\d+)(?:\.\d+)?", version)
    if not match:
        raise ValueError(f"{version!r} is not a major.minor version")
    return int(match.group(1)), int(match.group(2))


@pytest.mark.parametrize(
    ("spec", "minimum"),
    [
        (">=2.19.0", (2, 19)),
        (">=2.16.0,<2.21.0", (2, 16)),
        ("<2.21.0, >=2.17.3", (2, 17)),
        ("==2.19.1", (2, 19)),
        ("<2.21.0", None),
    ],
)
def test_requires_ansible_minimum(spec, minimum):
    if minimum is None:
        with pytest.raises(ValueError):
            _requires_ansible_minimum(spec)
    else:
        assert _requires_ansible_minimum(spec) == minimum


@pytest.mark.parametrize(
    ("version", "expected"),
    [("2.19", (2, 19)), ("2.19.0", (2, 19)), ("2.1", (2, 1)), ("2", None), ("2.19-rc1", None)],
)
def test_major_minor(version, expected):
    if expected is None:
        with pytest.raises(ValueError):
            _major_minor(version)
    else:
        assert _major_minor(version) == expected


@pytest.mark.parametrize(
    "role",
    _roles() or [pytest.param(None, marks=pytest.mark.skip(reason="no roles under roles/ yet"))],
    ids=lambda role: role.name if role else "none",
)
def test_role_min_ansible_version_matches_runtime(role):
    minimum = _requires_ansible_minimum(load_yaml(REPO_ROOT / "meta" / "runtime.yml")["requires_ansible"])
    meta_file = role / "meta" / "main.yml"
    assert meta_file.is_file(), f"{role.name}: meta/main.yml missing"
    version = (load_yaml(meta_file).get("galaxy_info") or {}).get("min_ansible_version")
    # A YAML number would turn "2.10" into 2.1: the version must be quoted.
    assert isinstance(version, str), f"{role.name}: min_ansible_version {version!r} is not a quoted string"
    assert _major_minor(version) == minimum, (
        f"{role.name}: min_ansible_version {version} differs from meta/runtime.yml's minimum "
        f"{minimum[0]}.{minimum[1]}"
    )


def _options_not_mentioned(text: str, options) -> list[str]:
    """The options that ``text`` does not name as a whole word."""
    return sorted(option for option in options if not re.search(rf"(?<![\w]){re.escape(option)}(?![\w])", text))


@pytest.mark.parametrize(
    ("text", "missing"),
    [
        ("| `role_a` | 1 |\n| `role_b` | 2 |", []),
        ("| `role_a` | 1 |", ["role_b"]),
        ("| `role_a_long` | 1 |\n| `role_bb` |", ["role_a", "role_b"]),
        ("", ["role_a", "role_b"]),
    ],
)
def test_options_not_mentioned(text, missing):
    assert _options_not_mentioned(text, {"role_a", "role_b"}) == missing


@pytest.mark.parametrize(
    "role",
    _roles() or [pytest.param(None, marks=pytest.mark.skip(reason="no roles under roles/ yet"))],
    ids=lambda role: role.name if role else "none",
)
def test_role_readme_documents_every_option(role):
    readme = role / "README.md"
    assert readme.is_file(), f"{role.name}: README.md missing"
    missing = _options_not_mentioned(readme.read_text(encoding="utf-8"), _spec_option_keys(role))
    assert not missing, f"{role.name}: README.md does not mention the options {missing}"


def _filter_docs() -> list[Path]:
    return sorted((REPO_ROOT / "plugins" / "filter").glob("*.yml"))


@pytest.mark.parametrize("doc", _filter_docs(), ids=lambda path: path.stem)
def test_filter_documentation_loads_and_names_its_filter(doc):
    """Each filter's documentation file is valid YAML (ansible-doc reads nothing else) and documents that filter."""
    data = yaml.safe_load(doc.read_text(encoding="utf-8"))
    assert data["DOCUMENTATION"]["name"] == doc.stem
    assert all(isinstance(line, str) for line in data["DOCUMENTATION"]["description"]), \
        "%s: a description item is not a string (a ': ' in a plain scalar makes it a mapping)" % doc.name
    assert "EXAMPLES" in data and "_value" in data["RETURN"]


def test_every_filter_has_its_documentation_file():
    registered = set()
    for source in (REPO_ROOT / "plugins" / "filter").glob("*.py"):
        tree = ast.parse(source.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name == "filters":
                for inner in ast.walk(node):
                    if isinstance(inner, ast.Dict):
                        registered.update(k.value for k in inner.keys if isinstance(k, ast.Constant))
    assert registered == {doc.stem for doc in _filter_docs()}


PYTHON_PLUGINS = sorted(
    path for kind in ("modules", "lookup", "inventory", "action") for path in (REPO_ROOT / "plugins" / kind).glob("*.py")
    if path.name != "__init__.py")


def _documentation_of(source):
    """The DOCUMENTATION string of a plugin's source file, or None; read without importing it."""
    for node in ast.parse(source.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "DOCUMENTATION" for t in node.targets):
            return ast.literal_eval(node.value)
    return None


@pytest.mark.parametrize("source", PYTHON_PLUGINS, ids=lambda path: "%s/%s" % (path.parent.name, path.name))
def test_python_plugin_documentation_loads(source):
    """ansible-doc (and ansible-lint) parse DOCUMENTATION as YAML: a ': ' in a plain scalar breaks it."""
    text = _documentation_of(source)
    if text is None:
        assert source.parent.name == "action", "%s has no DOCUMENTATION" % source.name  # an action's doc is its module's
        return
    data = yaml.safe_load(text)
    assert data.get("module", data.get("name")) == source.stem
    assert all(isinstance(line, str) for line in data["description"]), \
        "%s: a description item is not a string (a ': ' in a plain scalar makes it a mapping)" % source.name
