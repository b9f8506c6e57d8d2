# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""plan.yml's report: the texts the playbook's templates gave, written once in Python."""

from __future__ import annotations

import pytest

from ansible_collections.fleetos.layering.plugins.plugin_utils.rollout import _plan_report
from ansible_collections.fleetos.layering.plugins.plugin_utils.rollout._plan import host_plan

DIGEST = "sha256:" + "b" * 64
NOT_READ = host_plan({"source": "selector", "name": "web-zone-c-hold-a-long-name-indeed", "paused": True,
                      "image": "r/web@" + DIGEST, "reason": "a | b"}, "web-03", pool="web",
                     labels={"Zone": "c", "a": ""})
READ = dict(host_plan(None, "db-01", fallback_image="r/db:1"), status_read=True, booted_image="ostree:fedora",
            up_to_date=False, digest=None, action="stage")
LAYERED = dict(host_plan(None, "edge-01"), layered={"name": "worker", "summary": "base 9.6, kubelet 1.31.5",
                                                    "digest": DIGEST}, up_to_date=True)


@pytest.mark.parametrize("row, line", [
    (NOT_READ, "web-03       web      selector  web-zone-c-hold-a-long-n yes    skipped   sha256:bbbbbbbbbbbb "
               "not read            not read"),
    (READ, "db-01        default  fleetos_rollout_image -                        no     stage     r/db:1              "
           "ostree:fedora       -"),
])
def test_a_table_line(row, line):
    assert _plan_report.table([row]) == [
        "HOST         POOL     SOURCE    OBJECT                   PAUSED ACTION    CHOSEN              BOOTED"
        "              STAGED", line]


@pytest.mark.parametrize("row, lines", [
    (NOT_READ, ["web-03 pool=web source=selector object=web-zone-c-hold-a-long-name-indeed (paused)",
                "labels: a=, Zone=c", "image:  r/web@%s [ostree-unverified-registry]" % DIGEST, "action: skipped",
                "layered: -", "digest: %s" % DIGEST, "booted: not read staged: not read up to date: ?",
                "update agents: not read", "reboot: -", "reason: MachineImage is paused: a | b"]),
    (READ, ["db-01 pool=default source=fleetos_rollout_image object=-", "labels: -",
            "image:  r/db:1 [ostree-unverified-registry]",
            "action: stage", "layered: -", "digest: -", "booted: ostree:fedora staged: - up to date: ?",
            "update agents: -", "reboot: -", "reason: fleetos_rollout_image r/db:1"]),
    (LAYERED, ["edge-01 pool=default source=pool object=-", "labels: -", "image:  - [-]", "action: skipped",
               "layered: worker (base 9.6, kubelet 1.31.5) %s" % DIGEST, "digest: -",
               "booted: not read staged: not read up to date: True", "update agents: not read",
               "reboot: -", "reason: no image assigned: no MachineImage, pool default or fleetos_rollout_image"]),
])
def test_the_lines_of_a_host(row, lines):
    assert _plan_report.host_lines(row) == lines


def test_markdown_escapes_a_pipe_and_names_the_errors_first():
    text = _plan_report.markdown([dict(NOT_READ, reason="a | b")], ["bad.yaml is binary"], ["a warning"])
    head, table = text.split("| host |")
    assert head == "# OS image plan\n\nError: bad.yaml is binary\n\nWarning: a warning\n\n"
    assert table.splitlines()[-1] == (
        "| web-03 | web | a=, Zone=c | selector | web-zone-c-hold-a-long-name-indeed (paused) | r/web | - | %s | "
        "ostree-unverified-registry | not read | not read | not read | skipped | - | a \\| b |" % DIGEST)


def test_the_update_agents_of_a_host_are_shown_with_the_policy():
    row = dict(READ, update_agents={"active": ["zincati"], "summary": "zincati: on | updates enabled"},
               update_agents_policy="disable")
    assert _plan_report.host_lines(row)[-3] == (
        "update agents: zincati: on | updates enabled (fleetos_update_agents: disable)")
    assert "| zincati: on \\| updates enabled (fleetos_update_agents: disable) | stage |" in _plan_report.markdown([row])


@pytest.mark.parametrize("reboot, reason, shown", [
    (None, None, "-"),
    ("soft", None, "soft"),
    ("full", "rpm-ostree has no soft reboot (coreos/rpm-ostree#4525)", "full (rpm-ostree has no soft reboot (coreos/rpm-ostree#4525))"),
])
def test_the_reboot_an_activation_would_make_is_shown(reboot, reason, shown):
    row = dict(READ, reboot=reboot, reboot_reason=reason)
    assert _plan_report.host_lines(row)[-2] == "reboot: %s" % shown
    assert "| stage | %s |" % shown in _plan_report.markdown([row])
