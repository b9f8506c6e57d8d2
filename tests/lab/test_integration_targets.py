"""Runs each integration target in tests/integration/targets against the lab.

A target is a role-shaped directory (tasks/main.yml, optional defaults/, files/).
Its `aliases` file names the lab node it runs on with a line `lab/nodeNN`, or
`lab/python-NAME`: a node of the targets' own made with a Python interpreter (`fleetlab claim
--with-python`), shared by the targets that name the same NAME (default `lab/python-default`).
The targets check what a module did with modules such as stat, slurp and command, which need
an interpreter; the modules under test need none (test_no_python.py, and every playbook test
runs them on nodes without). The collection is loaded from the working tree through a
symlink at .build/runtime/ansible_collections/fleetos/layering.
"""

import os
import subprocess

import pytest

from conftest import REPO, VENV_BIN, collections_path

TARGETS = REPO / "tests" / "integration" / "targets"


def _targets():
    if not TARGETS.is_dir():
        return []
    return sorted(p.name for p in TARGETS.iterdir() if (p / "tasks" / "main.yml").is_file())


def _lab_host(lab, target):
    aliases = TARGETS / target / "aliases"
    lines = aliases.read_text().splitlines() if aliases.is_file() else []
    host = next((line.strip()[len("lab/"):] for line in lines if line.strip().startswith("lab/")), "python-default")
    if host.startswith("python-"):
        return lab.own_nodes("integration-%s" % host, 1, with_python=True)[0]
    return host


def run_playbook(lab, playbook, *extra, check=True, timeout=900):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(collections_path()), ANSIBLE_NOCOLOR="1",
               ANSIBLE_ROLES_PATH=str(TARGETS), ANSIBLE_DEPRECATION_WARNINGS="False",
               ANSIBLE_FORCE_COLOR="0", ANSIBLE_STDOUT_CALLBACK="default")
    proc = subprocess.run([str(VENV_BIN / "ansible-playbook"), "-i", str(lab.inventory), str(playbook)]
                          + list(extra), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=timeout, env=env, cwd=str(REPO), check=False)
    if check and proc.returncode != 0:
        raise AssertionError("ansible-playbook %s failed (rc=%d):\n%s" % (playbook, proc.returncode,
                                                                          proc.stdout[-20000:]))
    return proc


@pytest.fixture(scope="module")
def other_image(lab):
    """A second image (the base plus 1 MB), for targets that need a digest other than the booted one."""
    name = "fleetos/integration-other:1"
    if name not in lab.images:
        lab.build_image(name, "--from", "fleetos/lab-os:1.0", "--size-mb", "1")
    record = lab.image_record(name)
    return "%s@%s" % (record["reference"], record["digest"])


@pytest.mark.parametrize("target", _targets())
def test_integration_target(lab, target, tmp_path, other_image):
    host = _lab_host(lab, target)
    assert host in lab.nodes, "target %s wants lab host %s, which the lab does not have" % (target, host)
    playbook = tmp_path / "run.yml"
    playbook.write_text(
        "- name: Integration target %s\n"
        "  hosts: %s\n"
        "  gather_facts: false\n"
        "  roles:\n"
        "    - role: %s\n" % (target, host, target)
    )
    proc = run_playbook(lab, playbook, "-e", "fleetos_lab_image_digest=%s" % lab.base_digest,
                        "-e", "fleetos_lab_other_image=%s" % other_image)
    assert "failed=0" in proc.stdout
