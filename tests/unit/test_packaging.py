# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The collection as Galaxy and an execution environment get it.

Builds the tarball from the working tree (``ansible-galaxy collection build``, about a
second) and checks what galaxy.yml's build_ignore keeps out and what it must keep in;
checks that the collection declares no EE dependencies while its controller-side code
imports nothing beyond the standard library and ansible-core, and that
execution-environment.yml (ansible-builder v3) matches the tools the tests use.
Checks the tarball's metadata with galaxy-importer's own schema, and that every relative
link of a shipped Markdown file names a shipped file. ``make package`` goes further: it runs
galaxy-importer on the tarball, installs it and runs a playbook from it.
"""

from __future__ import annotations

import ast
import fnmatch
import importlib.util
import json
import posixpath
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
NAMESPACE, NAME = "fleetos", "layering"

# Paths of the tree that are for developing and testing only, with why.
DEV_ONLY = {
    "Makefile": "developer entry points",
    "mk": "make fragments",
    "requirements-dev.txt": "the dev venv",
    "requirements-core.txt": "the test pins of the ansible-core matrix",
    ".ci": "CI helpers",
    "execution-environment.yml": "builds an EE from this tree's .build/",
    "docs/development.md": "developer documentation",
    "lab": "the local lab fleet",
    "tests/lab": "lab tests",
    "tests/integration": "integration targets, run on the lab",
    "extensions": "molecule scenarios, run on the lab",
    "bench": "benchmarks on the lab",
    "tests/unit": "unit tests, need the working tree and the dev venv",
}
# Paths that only exist on a developer's machine (never committed); they must be ignored too.
LOCAL_STATE = [".venv", ".build", ".lab", ".ansible", "inventories/lab", "tests/output", ".pytest_cache",
               ".hypothesis"]
# Changes not yet released: a release renders them into CHANGELOG.rst and removes them, so the
# directory may be absent; what a tarball labelled with galaxy.yml's version holds is released.
UNRELEASED = "changelogs/fragments"
# What a user needs: every file under these directories ships, and these files. .ansible-lint
# ships because Galaxy's import lints the tarball with it (the filters' YAML documentation
# files are not playbooks).
SHIPPED_DIRS = ["plugins", "roles", "playbooks", "docs/docsite", "inventories/example", "tests/sanity"]
SHIPPED_FILES = ["README.md", "LICENSE", "CODE_OF_CONDUCT.md", "CONTRIBUTING.md", "CHANGELOG.rst", ".ansible-lint",
                 "meta/runtime.yml", "meta/execution-environment.yml",
                 "changelogs/changelog.yaml", "changelogs/config.yaml", "docs/docsite/links.yml",
                 "docs/rollout.md", "docs/machine-image.md", "playbooks/plan.yml", "MANIFEST.json", "FILES.json"]
# ansible-core's own requirements (PyYAML, Jinja2, ...): importable in every EE without declaring them.
ANSIBLE_CORE_PROVIDES = {"ansible", "yaml", "jinja2", "markupsafe", "cryptography", "packaging", "resolvelib"}
# Code that runs on the controller (and so in the EE); modules run on the managed hosts.
CONTROLLER_DIRS = ["action", "callback", "filter", "inventory", "lookup", "plugin_utils", "test", "vars",
                   "module_utils"]


def load_yaml(path):
    with open(path, encoding="utf-8") as f:
        return yaml.safe_load(f)


def covered(path, patterns):
    """Whether a build_ignore entry drops path (itself or a parent directory), as ansible-galaxy matches them."""
    parts = path.split("/")
    return any(fnmatch.fnmatch("/".join(parts[:i]), pattern) for i in range(1, len(parts) + 1) for pattern in patterns)


@pytest.fixture(scope="module")
def galaxy():
    return load_yaml(REPO / "galaxy.yml")


@pytest.fixture(scope="module")
def tarball_path(tmp_path_factory, galaxy):
    out = tmp_path_factory.mktemp("galaxy")
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-galaxy"), "collection", "build", "--output-path", str(out)],
        cwd=str(REPO), text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False, timeout=120)
    assert proc.returncode == 0, proc.stdout
    return out / ("%s-%s-%s.tar.gz" % (NAMESPACE, NAME, galaxy["version"]))


@pytest.fixture(scope="module")
def tarball(tarball_path):
    with tarfile.open(tarball_path) as tar:
        return {member.name.rstrip("/"): member for member in tar.getmembers()}


def tarball_text(tarball_path, name):
    with tarfile.open(tarball_path) as tar:
        return tar.extractfile(name).read().decode("utf-8")


def tree_files(directory):
    """The files under a directory of the working tree, as ansible-galaxy would see them (no caches)."""
    return sorted(
        path.relative_to(REPO).as_posix() for path in (REPO / directory).rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc")


@pytest.mark.parametrize("path", sorted(DEV_ONLY) + LOCAL_STATE)
def test_build_ignore_covers_dev_only_paths(galaxy, path):
    assert covered(path, galaxy["build_ignore"]), "%s is not in galaxy.yml build_ignore" % path


@pytest.mark.parametrize("path", sorted(DEV_ONLY))
def test_dev_only_path_exists_and_is_not_in_the_tarball(tarball, path):
    # The path exists in the tree (otherwise its absence from the tarball proves nothing) ...
    assert (REPO / path).exists(), "%s is listed as dev-only (%s) but is not in the tree" % (path, DEV_ONLY[path])
    # ... and neither it nor anything under it ships.
    shipped = sorted(name for name in tarball if name == path or name.startswith(path + "/"))
    assert not shipped, "dev-only %s (%s) is in the tarball: %s" % (path, DEV_ONLY[path], shipped[:5])


def test_unreleased_changelog_fragments_stay_out(galaxy, tarball):
    assert covered(UNRELEASED, galaxy["build_ignore"]), "%s is not in galaxy.yml build_ignore" % UNRELEASED
    fragments = tree_files(UNRELEASED) if (REPO / UNRELEASED).is_dir() else []
    shipped = sorted(name for name in tarball if name.startswith(UNRELEASED + "/"))
    assert not shipped, "unreleased fragments in the tarball labelled %s: %s" % (galaxy["version"], shipped[:5])
    assert not [path for path in fragments if path in tarball]


def test_no_local_state_in_the_tarball(tarball):
    shipped = sorted(name for name in tarball for path in LOCAL_STATE if name == path or name.startswith(path + "/"))
    assert not shipped
    assert not [name for name in tarball if "__pycache__" in name.split("/") or name.endswith((".pyc", ".tar.gz"))]


@pytest.mark.parametrize("path", SHIPPED_FILES)
def test_user_facing_file_is_in_the_tarball(tarball, path):
    assert path in tarball and tarball[path].isfile(), "%s is missing from the tarball" % path


@pytest.mark.parametrize("directory", SHIPPED_DIRS)
def test_every_file_of_a_content_directory_ships(tarball, directory):
    files = tree_files(directory)
    assert files, "%s is empty in the tree" % directory
    missing = [path for path in files if path not in tarball]
    assert not missing, "build_ignore drops content of %s: %s" % (directory, missing[:10])


def test_the_tarball_holds_no_molecule_scenario_or_lab_reference(tarball):
    """Nothing shipped needs the lab: no molecule.yml, no playbook or role naming lab/fleetlab."""
    assert not [name for name in tarball if name.endswith("molecule.yml")]
    shipped_yaml = [name for name in tarball if name.startswith(("playbooks/", "roles/")) and name.endswith(".yml")]
    assert shipped_yaml
    offenders = [name for name in shipped_yaml if "lab/fleetlab" in (REPO / name).read_text(encoding="utf-8")]
    assert not offenders


REPO_URL = "https://github.com/fleetos/layering"
# Inline links and reference definitions; fenced code blocks and code spans hold no links.
LINK_RE = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)|^ {0,3}\[[^\]]+\]:\s*<?([^\s>]+)>?", re.M)
FENCE_RE = re.compile(r"^ {0,3}(```|~~~).*?^ {0,3}\1", re.S | re.M)
CODE_SPAN_RE = re.compile(r"`[^`\n]*`")


def markdown_links(text):
    """The link targets of a Markdown text, in order."""
    text = CODE_SPAN_RE.sub("", FENCE_RE.sub("", text))
    return [match.group(1) or match.group(2) for match in LINK_RE.finditer(text)]


def relative_target(document, target):
    """The collection path a link of ``document`` names; None for a URL or an anchor in the same file."""
    if target.startswith("#") or re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):
        return None
    path = re.split(r"[#?]", target, maxsplit=1)[0]
    if path.startswith("/"):
        return posixpath.normpath(path.lstrip("/"))
    return posixpath.normpath(posixpath.join(posixpath.dirname(document), path))


@pytest.mark.parametrize(("text", "links"), [
    ("See [`lab/README.md`](lab/README.md).", ["lab/README.md"]),
    ("[a](docs/a.md#top \"title\") and [b](<docs/b.md>)", ["docs/a.md#top", "docs/b.md"]),
    ("[site](https://example.com/x) [here](#usage)", ["https://example.com/x", "#usage"]),
    ("[ref]: ../CHANGELOG.rst\n", ["../CHANGELOG.rst"]),
    ("```console\n[x](not/a/link.md)\n```\n`[y](no.md)` [z](yes.md)", ["yes.md"]),
])
def test_markdown_links(text, links):
    assert markdown_links(text) == links


@pytest.mark.parametrize(("document", "target", "path"), [
    ("README.md", "lab/README.md", "lab/README.md"),
    ("docs/awx.md", "../README.md#installation", "README.md"),
    ("docs/awx.md", "awx/plan.survey.json", "docs/awx/plan.survey.json"),
    ("README.md", "changelogs/fragments/", "changelogs/fragments"),
    ("docs/awx.md", "/LICENSE", "LICENSE"),
    ("README.md", "../outside.md", "../outside.md"),
    ("README.md", "#supported-ansible-core-versions", None),
    ("README.md", "https://github.com/fleetos/layering/blob/main/lab/README.md", None),
    ("README.md", "mailto:someone@example.com", None),
])
def test_relative_target(document, target, path):
    assert relative_target(document, target) == path


def _shipped_markdown_links(tarball_path, tarball):
    """(document, target) for every link of every Markdown file in the tarball."""
    return [(name, target) for name in sorted(tarball) if name.endswith(".md") and tarball[name].isfile()
            for target in markdown_links(tarball_text(tarball_path, name))]


def test_shipped_markdown_links_name_shipped_files(tarball_path, tarball):
    """A relative link of a shipped document leads to a shipped file or directory (else link the repository URL)."""
    files = {name for name, member in tarball.items() if member.isfile()}
    targets = [(name, target, relative_target(name, target)) for name, target in
               _shipped_markdown_links(tarball_path, tarball)]
    relative = [(name, target, path) for name, target, path in targets if path is not None]
    assert relative, "no relative link found in the shipped Markdown files"
    dangling = [(name, target) for name, target, path in relative
                if path not in files and not any(f.startswith(path + "/") for f in files)]
    assert not dangling, (
        "shipped Markdown links paths the tarball does not hold; ship them or link %s/blob/main/<path>: %s"
        % (REPO_URL, dangling))


def test_repository_url_links_name_paths_of_the_repository(tarball_path, tarball):
    prefixes = ("%s/blob/main/" % REPO_URL, "%s/tree/main/" % REPO_URL)
    paths = [(name, target, re.split(r"[#?]", target[len(prefix):], maxsplit=1)[0].rstrip("/"))
             for name, target in _shipped_markdown_links(tarball_path, tarball)
             for prefix in prefixes if target.startswith(prefix)]
    assert paths, "no link to a path of the repository found"
    missing = [(name, target) for name, target, path in paths if not (REPO / path).exists()]
    assert not missing, "links to paths the repository does not have: %s" % missing


def test_metadata_passes_galaxy_importers_schema(tarball_path, monkeypatch):
    """Galaxy refuses a tarball whose MANIFEST.json breaks its schema (an author over 64 characters did)."""
    schema = pytest.importorskip("galaxy_importer.schema", reason="galaxy-importer is in the dev venv only")
    monkeypatch.setenv("GALAXY_IMPORTER_CONFIG", str(REPO / "mk" / "galaxy-importer.cfg"))
    info = json.loads(tarball_text(tarball_path, "MANIFEST.json"))["collection_info"]
    assert schema.CollectionInfo(**info).label == "%s.%s" % (NAMESPACE, NAME)
    with pytest.raises(ValueError, match="must not be greater than 64 characters"):
        schema.CollectionInfo(**dict(info, authors=info["authors"] + ["x" * 65]))


def _galaxy_import_check():
    spec = importlib.util.spec_from_file_location("galaxy_import_check", REPO / "mk" / "galaxy_import_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


IMPORT_OK = ["Importing with galaxy-importer 0.4.44", "Getting doc strings via ansible-doc",
             "Linting collection via ansible-lint 26.10.1...", "...ansible-lint run complete",
             "Importer processing completed successfully"]


@pytest.mark.parametrize(("log", "counts"), [
    (IMPORT_OK, (0, 0, 0)),
    # An empty sanity ignore file is a warning outside the lint pass: counted, not failed.
    (IMPORT_OK[:4] + ["WARNING: Ignore files skip ansible-test sanity tests, found ignore-2.19.txt with 0 statement(s)"]
     + IMPORT_OK[4:], (0, 0, 1)),
    (IMPORT_OK[:3] + ["WARNING: ERROR    Failed to find fleetos.layering.rollout playbook.",
                      "WARNING: roles/x/tasks/main.yml:3: name[missing]: All tasks should be named."] + IMPORT_OK[3:],
     (0, 2, 0)),
    (["Importing with galaxy-importer 0.4.44", "ERROR: The import failed for the following reason: Invalid collection "
      "metadata. Each author in 'authors' list must not be greater than 64 characters"], (4, 0, 0)),
    ([line for line in IMPORT_OK if "ansible-doc" not in line], (1, 0, 0)),
    (IMPORT_OK[:3] + IMPORT_OK[4:], (1, 0, 0)),
])
def test_galaxy_import_log_verdict(log, counts):
    errors, lint_warnings, other_warnings = _galaxy_import_check().judge_log(log)
    assert (len(errors), len(lint_warnings), len(other_warnings)) == counts, (errors, lint_warnings, other_warnings)


def test_galaxy_import_result_names_undocumented_plugins():
    contents = [{"content_type": "module", "content_name": "os_info", "doc_strings": {"doc": {}}},
                {"content_type": "action", "content_name": "os_info", "doc_strings": None},
                {"content_type": "lookup", "content_name": "layered_image", "doc_strings": None},
                {"content_type": "module_utils", "content_name": "_host", "doc_strings": None}]
    assert _galaxy_import_check().undocumented({"docs_blob": {"contents": contents}}) == (1, ["lookup layered_image"])


def _controller_imports():
    """(file, top-level module) for every import of the controller-side plugin code."""
    found = []
    for directory in CONTROLLER_DIRS:
        for path in sorted((REPO / "plugins" / directory).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                found.extend((path.relative_to(REPO).as_posix(), name) for name in names)
    return found


def test_controller_side_code_needs_nothing_beyond_stdlib_and_ansible_core():
    imports = _controller_imports()
    assert any(name.startswith("ansible_collections.fleetos.layering.") for unused_path, name in imports)
    foreign = sorted(
        (path, name) for path, name in imports
        if name.split(".")[0] not in sys.stdlib_module_names | ANSIBLE_CORE_PROVIDES | {"ansible_collections"}
        or (name.startswith("ansible_collections.") and not name.startswith("ansible_collections.fleetos.layering.")))
    assert not foreign, (
        "controller-side code imports packages an EE must install: %s; declare them in "
        "meta/execution-environment.yml (and galaxy.yml dependencies for collections)" % foreign)


def test_collection_declares_no_ee_dependencies():
    meta = load_yaml(REPO / "meta" / "execution-environment.yml")
    assert meta["version"] == 1
    assert meta["dependencies"] == {}
    # Without meta/execution-environment.yml ansible-builder would read these at the root instead.
    assert not (REPO / "requirements.txt").exists() and not (REPO / "bindep.txt").exists()
    assert not list((REPO / "meta").glob("ee-*"))


def _dev_pin(package):
    for line in (REPO / "requirements-dev.txt").read_text(encoding="utf-8").splitlines():
        match = re.match(r"^%s==(\S+)$" % re.escape(package), line.strip())
        if match:
            return match.group(1)
    raise AssertionError("%s is not pinned in requirements-dev.txt" % package)


def test_execution_environment_definition():
    ee = load_yaml(REPO / "execution-environment.yml")
    assert ee["version"] == 3
    deps = ee["dependencies"]
    # The ansible-core the tests run with, and no Python or Galaxy dependency beyond the collection.
    assert deps["ansible_core"] == {"package_pip": "ansible-core==%s" % _dev_pin("ansible-core")}
    assert deps["ansible_runner"]["package_pip"].startswith("ansible-runner==")
    assert "python" not in deps
    (collection,) = deps["galaxy"]["collections"]
    assert collection["type"] == "file"
    # The tarball ansible-builder copies into the context is the one the requirement installs.
    (build_file,) = ee["additional_build_files"]
    assert collection["name"] == "%s/%s" % (build_file["dest"], Path(build_file["src"]).name)
    assert Path(build_file["src"]).name == "%s-%s.tar.gz" % (NAMESPACE, NAME)


def test_dev_requirements_pin_the_packaging_tools():
    for package in ("antsibull-docs", "ansible-builder", "ansible-core"):
        assert re.match(r"^\d+\.\d+\.\d+$", _dev_pin(package))
    text = (REPO / "requirements-dev.txt").read_text(encoding="utf-8")
    # Declared once for an EE that never used them; nothing imports them.
    assert not re.search(r"^(jmespath|netaddr)\b", text, re.M)


@pytest.mark.parametrize("heading", ["Installation", "Using a requirements file", "Supported ansible-core versions",
                                     "What a managed host needs", "Support", "Release notes", "Communication",
                                     "Contributing", "Code of Conduct"])
def test_readme_has_the_galaxy_sections(heading):
    headings = re.findall(r"^#+ (.+?)\s*$", (REPO / "README.md").read_text(encoding="utf-8"), re.M)
    assert heading in headings


def test_readme_install_commands_name_this_collection():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "ansible-galaxy collection install %s.%s" % (NAMESPACE, NAME) in readme
    blocks = re.findall(r"```yaml\n(.*?)```", readme, re.S)
    requirements = [load for load in map(yaml.safe_load, blocks) if isinstance(load, dict) and "collections" in load]
    assert requirements and requirements[0]["collections"][0]["name"] == "%s.%s" % (NAMESPACE, NAME)


def test_code_of_conduct_is_the_ansible_one():
    text = (REPO / "CODE_OF_CONDUCT.md").read_text(encoding="utf-8")
    assert "https://docs.ansible.com/ansible/latest/community/code_of_conduct.html" in markdown_links(text)
