# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The fleetos_ variables checked against the playbook's spec, by a real ansible-playbook.

Connection local, the example inventory and fleetos_plan_read_status=false: nothing is
contacted. A wrong value fails the check's task with one sentence, and no later task runs.
Run with the ansible-core of the running interpreter (the dev venv, or a 2.16 venv).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "inventories" / "example"
RUNTIME = REPO / ".build" / "runtime"
ENV = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(RUNTIME), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
           ANSIBLE_STDOUT_CALLBACK="default", ANSIBLE_DEPRECATION_WARNINGS="False")
CHECK = "TASK [Refuse fleetos_ variables of the wrong type or value]"


def run(tmp_path, playbook, extra, inventory=EXAMPLE / "hosts.yml"):
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), playbook, "-c", "local", "-i", str(inventory),
         "-e", "fleetos_plan_read_status=false", "-e", "fleetos_plan_output_dir=%s" % out]
        + [arg for value in extra for arg in ("-e", value)],
        env=ENV, cwd=str(tmp_path), text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False,
        timeout=300)
    failed = re.search(r"fatal: \[[^]]+\]: FAILED! => (\{.*\})", proc.stdout)
    return proc, json.loads(failed.group(1))["msg"] if failed else None


@pytest.mark.parametrize("playbook, extra, msg", [
    ("plan", ["fleetos_plan_read_status=maybe"],
     "The variable fleetos_plan_read_status is 'maybe'; it must be true or false."),
    ("plan", ["fleetos_os_backend=bootcc"],
     "The variable fleetos_os_backend is 'bootcc'; it must be one of auto, bootc, rpm-ostree."),
    # Templated before it is validated: the sentence shows the value the template gives.
    ("plan", ['{"fleetos_os_backend": "{{ \'boot\' ~ \'cc\' }}", "fleetos_node_labels": "{{ [1, 2] }}"}'],
     "The variable fleetos_node_labels is [1, 2]; it must be a mapping. The variable fleetos_os_backend is 'bootcc'; "
     "it must be one of auto, bootc, rpm-ostree."),
    ("rollout", ["fleetos_rollout_max_failures=many"],
     "The variable fleetos_rollout_max_failures is 'many'; it must be a count or a percentage up to 100%, such as 2 "
     "or 25%."),
    # By FQCN, from any directory: the spec comes from the collection, not from the working directory.
    ("fleetos.layering.rollback", ["fleetos_rollout_reboot_timeout=soon"],
     "The variable fleetos_rollout_reboot_timeout is 'soon'; it must be an integer."),
], ids=["bool", "choice", "templated", "budget", "fqcn"])
def test_a_wrong_value_fails_before_anything_is_contacted(tmp_path, playbook, extra, msg):
    path = playbook if "." in playbook else str(REPO / "playbooks" / ("%s.yml" % playbook))
    proc, failed = run(tmp_path, path, extra)
    assert proc.returncode == 2, proc.stdout[-3000:]
    assert failed == msg
    assert not (tmp_path / "out" / "plan.json").exists()
    tasks = re.findall(r"^TASK \[(.*?)\] \*", proc.stdout, re.M)
    if path.endswith("/plan.yml"):
        # Without a status read (a wrong fleetos_plan_read_status is no status read either), plan.yml checks
        # the variables in the plan's one read of every host (os_plan, report.yml, filter option check),
        # on the one host that plans them all: no host is contacted, and nothing runs after the refusal.
        assert tasks[-1] == "fleetos.layering.os_plan : " + CHECK[len("TASK ["):-1], tasks
        assert tasks[-2] == "fleetos.layering.os_plan : Plan every host of the play and report the plan", tasks
        assert "PLAY [Report the plan]" not in proc.stdout
        assert set(re.findall(r"^(?:ok|fatal|failed|changed): \[([^]]+)\]", proc.stdout, re.M)) == {"web-01"}
        return
    assert proc.stdout.index(CHECK) < proc.stdout.index("fatal:")
    # Nothing after the check ran: no other task, no other play; and the check's three tasks (refuse unknown
    # variables, check every host's values once, refuse wrong values) ran once each (on the first
    # host), not once per host.
    assert len(tasks) == 3, proc.stdout[-3000:]
    assert re.findall(r"^(?:ok|fatal|failed): \[([^]]+)\]", proc.stdout, re.M) == ["web-01"] * 3


def test_an_inventory_variable_is_checked_on_every_host_and_a_templated_one_passes(tmp_path):
    inventory = tmp_path / "inventory"
    shutil.copytree(EXAMPLE, inventory)
    hosts = (inventory / "hosts.yml").read_text()
    pinned = "registry.example.com/fleetos/web-os@sha256:b080eb929f9b204e2e8869ff1a37a513eed1ca1de83a4ddb1e57a3de19b847c7"
    assert hosts.count('"%s"' % pinned) == 1
    templated = hosts.replace('"%s"' % pinned, "\"{{ 'registry.example.com/fleetos/web-os@' ~ 'sha256:%s' }}\""
                              % pinned.rsplit(":", maxsplit=1)[-1])
    (inventory / "hosts.yml").write_text(templated)
    proc, failed = run(tmp_path, str(REPO / "playbooks" / "plan.yml"), [], inventory=inventory / "hosts.yml")
    assert proc.returncode == 0 and failed is None, proc.stdout[-3000:]
    report = json.loads((tmp_path / "out" / "plan.json").read_text())
    from_pool = [row["image"] for row in report["hosts"] if row["pool"] == "web" and row["source"] == "pool"]
    assert from_pool and set(from_pool) == {pinned}

    (inventory / "hosts.yml").write_text(templated.replace("fleetos_pool: db\n", "fleetos_pool: db\n"
                                                           "            fleetos_pool_paused: maybe\n"))
    proc, failed = run(tmp_path, str(REPO / "playbooks" / "plan.yml"), [], inventory=inventory / "hosts.yml")
    assert proc.returncode == 2
    assert failed == "The variable fleetos_pool_paused is 'maybe' on db-01, db-02, db-03; it must be true or false."
