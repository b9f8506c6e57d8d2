"""The molecule scenarios `rollout`, `adopt`, `bootc` and `layering` (extensions/molecule/) against the lab.

Runs the venv's molecule from the repository root (molecule finds collection scenarios
under extensions/molecule/), with the working tree linked where Ansible finds the
collection (.build/runtime, set in the scenario's provisioner env). `rollout` uses
node05-node10 and leaves them on the lab's base image; `adopt` claims two disk-image
nodes of its own (fleetlab claim) and leaves them with their disk-image origin; `bootc`
claims two bootc-managed nodes of its own and leaves them on its image; `layering`
claims one node of its own, rolls a composed image out through the lock and rolls the
node back to the lab's base image.
"""

import os
import subprocess
import time

import pytest
import yaml

from conftest import REPO, VENV_BIN, collections_path


@pytest.mark.parametrize("scenario", ["rollout", "adopt", "bootc", "layering"])
def test_molecule_scenario(lab, scenario):
    collections_path()
    env = dict(os.environ, PATH="%s:%s" % (VENV_BIN, os.environ.get("PATH", "")), ANSIBLE_NOCOLOR="1",
               NO_COLOR="1", ANSIBLE_FORCE_COLOR="0", PY_COLORS="0")
    began = time.time()
    proc = subprocess.run([str(VENV_BIN / "molecule"), "test", "-s", scenario], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, env=env, cwd=str(REPO), timeout=1800, check=False)
    out = proc.stdout
    assert proc.returncode == 0, out[-20000:]
    # Every step of the sequence ran and succeeded, idempotence (the rerun reported
    # changed=0) among them.
    sequence = yaml.safe_load((REPO / "extensions" / "molecule" / scenario / "molecule.yml").read_text())[
        "scenario"]["test_sequence"]
    assert "idempotence" in sequence and "verify" in sequence
    for step in sequence:
        assert "[%s > %s] Executed: Successful" % (scenario, step) in out, step
    assert "Molecule executed 1 scenario (1 successful)" in out
    print("molecule test -s %s: %.1f s" % (scenario, time.time() - began))
