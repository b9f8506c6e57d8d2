# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""module_utils/host/_update_agents: what each update agent would do, read from one command, and turning them off."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from ansible_collections.fleetos.layering.plugins.module_utils._errors import InvalidInputError
from ansible_collections.fleetos.layering.plugins.module_utils.host import _update_agents as agents
from ansible_collections.fleetos.layering.plugins.module_utils.host._host import Host

SHIPPED = b"[updates]\nenabled = true\n"
STRATEGY = b"[updates]\nstrategy = \"fleet_lock\"\n\n[updates.fleet_lock]\nbase_url = \"http://fleetlock.example.com:8080/\"\n"


def probe_output(units=None, files=None):
    """What PROBE_SCRIPT prints for these units (unit -> (is-enabled, is-active)) and files (path -> bytes)."""
    units = dict({unit: ("not-found", "inactive") for unit in agents.UNITS.values()}, **(units or {}))
    out = b"".join(b"unit\t%s\t%s\t%s\n" % (unit.encode(), state[0].encode(), state[1].encode())
                   for unit, state in units.items())
    for path, data in (files or {}).items():
        out += b"file\t%s\t%d\n" % (path.encode(), len(data)) + data
    return out


def test_the_probe_script_prints_what_parse_probe_reads(tmp_path):
    # The script run for real by a POSIX shell with coreutils but no systemctl: every unit not found.
    for tool in ("cat", "wc"):
        (tmp_path / tool).symlink_to(shutil.which(tool))
    proc = subprocess.run(["/bin/sh", "-c", agents.PROBE_SCRIPT, "sh", "zincati.service"], capture_output=True,
                          env={"PATH": str(tmp_path)}, check=False)
    assert proc.returncode == 0
    assert agents.parse_probe(proc.stdout) == {"units": {"zincati.service": ("not-found", "inactive")}, "files": {}}


def test_files_come_back_byte_for_byte_whatever_they_hold():
    data = b"[updates]\nenabled = false\nfile\tfake\t3\n\xff"
    raw = agents.parse_probe(probe_output(files={"/etc/zincati/config.d/50-x.toml": data, agents.RPM_OSTREED_CONF: b""}))
    assert raw["files"] == {"/etc/zincati/config.d/50-x.toml": data, agents.RPM_OSTREED_CONF: b""}


@pytest.mark.parametrize("units, files, active, zincati_summary", [
    # Fedora CoreOS as shipped: Zincati on, updates enabled, strategy immediate.
    ({"zincati.service": ("enabled", "active")}, {"/usr/lib/zincati/config.d/10-auto-updates.toml": SHIPPED},
     ["zincati"], "on, updates enabled: updates and reboots the host on its own (strategy immediate)"),
    # A drop-in in /etc turns updates off; a later name wins the merge.
    ({"zincati.service": ("enabled", "active")}, {
        "/usr/lib/zincati/config.d/10-auto-updates.toml": SHIPPED,
        "/etc/zincati/config.d/90-fleetos-updates-disabled.toml": agents.ZINCATI_DISABLED},
     [], "on, updates disabled ([updates] enabled = false)"),
    # An /etc fragment of the same name replaces the /usr/lib one, even with an earlier-sorting other file.
    ({"zincati.service": ("enabled", "active")}, {
        "/usr/lib/zincati/config.d/10-auto-updates.toml": b"[updates]\nenabled = false\n",
        "/etc/zincati/config.d/10-auto-updates.toml": SHIPPED},
     ["zincati"], "on, updates enabled: updates and reboots the host on its own (strategy immediate)"),
    ({"zincati.service": ("enabled", "active")}, {"/etc/zincati/config.d/55-strategy.toml": STRATEGY},
     ["zincati"], "on, updates enabled: updates and reboots the host on its own (when the FleetLock server "
                  "http://fleetlock.example.com:8080/ grants a slot)"),
    ({"zincati.service": ("masked", "inactive")}, {}, [], "zincati.service is masked"),
    ({"zincati.service": ("disabled", "active")}, {}, ["zincati"],
     "on, updates enabled: updates and reboots the host on its own (strategy immediate)"),
    ({}, {}, [], "not installed"),
])
def test_zincati(units, files, active, zincati_summary):
    judged = agents.judge(agents.parse_probe(probe_output(units, files)))
    assert judged["active"] == active
    assert judged["zincati"]["summary"] == zincati_summary


@pytest.mark.parametrize("units, conf, active", [
    ({"bootc-fetch-apply-updates.timer": ("enabled", "active")}, None, ["bootc"]),
    ({"bootc-fetch-apply-updates.timer": ("masked", "inactive")}, None, []),
    ({"rpm-ostreed-automatic.timer": ("enabled", "active")}, b"[Daemon]\nAutomaticUpdatePolicy=stage\n", ["rpm-ostree"]),
    ({"rpm-ostreed-automatic.timer": ("enabled", "active")}, b"[Daemon]\nAutomaticUpdatePolicy=check\n", []),
    ({"rpm-ostreed-automatic.timer": ("enabled", "active")}, b"[Other]\nAutomaticUpdatePolicy=stage\n", []),
    ({"rpm-ostreed-automatic.timer": ("disabled", "inactive")}, b"[Daemon]\nAutomaticUpdatePolicy=stage\n", []),
])
def test_bootc_and_rpm_ostree(units, conf, active):
    files = {agents.RPM_OSTREED_CONF: conf} if conf is not None else {}
    assert agents.judge(agents.parse_probe(probe_output(units, files)))["active"] == active


def test_the_refusal_names_the_agent_the_host_and_the_variable():
    judged = agents.judge(agents.parse_probe(probe_output({"zincati.service": ("enabled", "active")})))
    assert agents.refusal("fcos-01", judged) == (
        "the update agent zincati (on, updates enabled: updates and reboots the host on its own (strategy "
        "immediate)) of fcos-01 would replace the rolled-out image on its own: set fleetos_update_agents: disable "
        "to turn it off (or keep to leave it on purpose)")
    assert agents.refusal("fcos-01", agents.judge(agents.parse_probe(probe_output()))) is None


@pytest.mark.parametrize("value, expected", [(None, None), ("", None), ("disable", "disable"), ("keep", "keep")])
def test_the_policy(value, expected):
    assert agents.check_policy(value) == expected


def test_a_bad_policy_names_the_field_and_the_accepted_values():
    with pytest.raises(InvalidInputError, match="^fleetos_update_agents 'off' is not one of disable, keep$"):
        agents.check_policy("off")


class FakeHost(Host):
    def __init__(self, units, files):
        self.units, self.files, self.ran = units, dict(files), []

    def run(self, argv, data=None, binary=False):
        if argv[:3] == ["sh", "-c", agents.PROBE_SCRIPT]:
            return 0, probe_output(self.units, self.files), ""
        self.ran.append(list(argv))
        return 0, "", ""

    def replace_file(self, path, data, expected, mode=0o600, lock=None):
        assert self.files.get(path) == expected and lock == agents.LOCK and mode == 0o644
        self.files[path] = data
        return True


CONF = b"# rpm-ostreed\r\n[Daemon]\r\nAutomaticUpdatePolicy=stage\r\nIdleExitTimeout=60\r\n"


@pytest.mark.parametrize("check_mode", [True, False])
def test_disable_turns_every_agent_off_the_documented_way(check_mode):
    host = FakeHost({"zincati.service": ("enabled", "active"), "bootc-fetch-apply-updates.timer": ("enabled", "active"),
                     "rpm-ostreed-automatic.timer": ("enabled", "active")},
                    {"/usr/lib/zincati/config.d/10-auto-updates.toml": SHIPPED, agents.RPM_OSTREED_CONF: CONF})
    result = agents.disable(host, check_mode=check_mode)
    assert (result["changed"], result["disabled"]) == (True, ["zincati", "bootc", "rpm-ostree"])
    headers = [agents.ZINCATI_DROP_IN, "bootc-fetch-apply-updates.timer", agents.RPM_OSTREED_CONF]
    assert [d["before_header"] for d in result["diff"]] == headers
    assert result["diff"][2]["after"] == CONF.decode().replace("=stage", "=none")
    if check_mode:
        assert host.ran == [] and agents.ZINCATI_DROP_IN not in host.files
    else:
        assert host.ran == [["mkdir", "-p", "-m", "0755", "--", "/etc/zincati/config.d"],
                            ["systemctl", "restart", "zincati.service"],
                            ["systemctl", "mask", "--now", "bootc-fetch-apply-updates.timer"],
                            ["rpm-ostree", "reload"]]
        assert host.files[agents.ZINCATI_DROP_IN] == agents.ZINCATI_DISABLED
        assert host.files[agents.RPM_OSTREED_CONF] == CONF.replace(b"=stage", b"=none")


def test_disable_again_changes_nothing():
    host = FakeHost({"zincati.service": ("enabled", "active"), "bootc-fetch-apply-updates.timer": ("masked", "inactive")},
                    {"/usr/lib/zincati/config.d/10-auto-updates.toml": SHIPPED,
                     agents.ZINCATI_DROP_IN: agents.ZINCATI_DISABLED,
                     agents.RPM_OSTREED_CONF: b"[Daemon]\nAutomaticUpdatePolicy=none\n"})
    result = agents.disable(host)
    assert (result["changed"], result["disabled"], result["actions"], host.ran) == (False, [], [], [])
