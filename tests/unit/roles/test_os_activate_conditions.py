# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Which hosts of the book the role os_activate activates in each batch: the condition of its entry point main,
rendered by the running ansible-core, with the book's members (open's fact) and without (a book from before)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

try:  # ansible-core 2.19 and later: only a trusted string is a template
    from ansible.template import trust_as_template
except ImportError:  # ansible-core 2.16 to 2.18
    def trust_as_template(value):
        return value

MAIN = Path(__file__).resolve().parents[3] / "roles" / "os_activate" / "tasks" / "main.yml"
HOSTS = ["n%d" % index for index in range(1, 6)]
CANARY = ["n1", "n2"]


def condition():
    (task,) = yaml.safe_load(MAIN.read_text())
    return task["when"]


def activated(book, batch, host):
    variables = {"os_activate_book": book, "os_activate_batch": batch, "inventory_hostname": host}
    templar = Templar(loader=DataLoader(), variables=variables)
    expression = trust_as_template(condition())
    if hasattr(templar, "evaluate_conditional"):
        return templar.evaluate_conditional(expression)
    return templar.template("{{ %s }}" % expression) in (True, "True")


@pytest.mark.parametrize("members", [True, False], ids=["members", "hosts-only"])
@pytest.mark.parametrize("batch, expected", [
    ("all", HOSTS),
    ("canary", CANARY),
    ("rest", ["n3", "n4", "n5"]),
])
def test_each_batch_activates_its_hosts_of_the_book_and_no_other(members, batch, expected):
    book = {"path": "/run/book.json", "hosts": HOSTS, "canary": CANARY}
    if members:
        book["members"] = dict(zip(HOSTS, HOSTS))
    assert [host for host in HOSTS + ["n9"] if activated(book, batch, host)] == expected


def test_without_a_book_no_host_is_activated():
    assert not activated({}, "all", "n1")
