# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""os_image_stage: each backend stages with its own module's code, given options mapped from one set; one result."""

from __future__ import annotations

import pytest

from ansible_collections.fleetos.layering.tests.unit.plugins.action.utils import fake_host, run_action
from ansible_collections.fleetos.layering.plugins.action import os_image_stage
from ansible_collections.fleetos.layering.plugins.module_utils import _rebase, _switch

IMAGE = "registry.example.com/os/fleet@sha256:" + "a" * 64
CHECKSUM = "c" * 64


@pytest.fixture
def stages(monkeypatch):
    """The options each backend's stage got, and the result it gives back."""
    seen = {"rpm-ostree": [], "bootc": []}
    answer = {"changed": True, "digest": "sha256:" + "a" * 64, "before": {"checksum": "b" * 64},
              "after": {"checksum": CHECKSUM}}

    def rebase(host, params, check_mode):
        seen["rpm-ostree"].append((params, check_mode))
        return dict(answer, reboot_required=seen.get("reboot_required", True))

    def switch(host, params, check_mode):
        seen["bootc"].append((params, check_mode))
        return dict(answer, reboot_required=False, staged=seen.get("bootc_staged", True))

    monkeypatch.setattr(_rebase, "rebase", rebase)
    monkeypatch.setattr(_switch, "switch", switch)
    fake_host(monkeypatch)
    return seen


def test_rpm_ostree_stages_with_rebase_and_locked_finalization(stages):
    result = run_action(os_image_stage, dict(image=IMAGE, backend="rpm-ostree", transport="remote",
                                             ostree_remote="fleet", auth_file="/etc/ostree/auth.json"))
    (params, check_mode), = stages["rpm-ostree"]
    given = (params["image"], params["transport"], params["ostree_remote"], params["lock_finalization"],
             params["auth_file"], params["state"], check_mode)
    assert given == (IMAGE, "remote", "fleet", True, "/etc/ostree/auth.json", "staged", False)
    # The rebase module's own defaults fill the rest.
    assert params["retries"] == _rebase.ARGUMENT_SPEC["retries"]["default"] and params["allow_tag"] is False
    assert (result["backend"], result["staged"], result["staged_checksum"]) == ("rpm-ostree", True, CHECKSUM)


def test_rpm_ostree_with_nothing_to_reboot_into_has_nothing_staged(stages):
    stages["reboot_required"] = False
    result = run_action(os_image_stage, dict(image=IMAGE, backend="rpm-ostree"))
    assert (result["staged"], result["staged_checksum"]) == (False, None)


@pytest.mark.parametrize("transport,sigpolicy", [("registry", False), ("signed", True)])
def test_bootc_switches_download_only(stages, transport, sigpolicy):
    result = run_action(os_image_stage, dict(image=IMAGE, backend="bootc", transport=transport), check_mode=True)
    (params, check_mode), = stages["bootc"]
    assert (params["transport"], params["enforce_container_sigpolicy"], params["download_only"], check_mode) == (
        "registry", sigpolicy, True, True)
    # Download-only: staged for the activation although an ordinary reboot would not apply it.
    assert (result["staged"], result["staged_checksum"], result["reboot_required"]) == (True, CHECKSUM, False)


def test_bootc_refuses_an_ostree_remote_before_anything_runs(stages):
    result = run_action(os_image_stage, dict(image=IMAGE, backend="bootc", transport="remote", ostree_remote="fleet"),
                        failed=True)
    assert result["msg"] == ("transport remote cannot be used on a bootc host (image '%s'): bootc verifies images "
                             "only with the containers policy (transport signed)." % IMAGE)
    assert stages["bootc"] == [] and stages["rpm-ostree"] == []


@pytest.mark.parametrize("args,message", [
    (dict(image=IMAGE, backend="apt"), "backend"),
    (dict(image=IMAGE), "backend"),
    (dict(image=IMAGE, backend="rpm-ostree", transport="remote"), "ostree_remote"),
])
def test_bad_options_are_refused(stages, args, message):
    result = run_action(os_image_stage, args, failed=True)
    assert message in result["msg"] and stages == {"rpm-ostree": [], "bootc": []}
