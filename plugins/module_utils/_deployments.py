# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# This is a private module_util of fleetos.layering: its interface may change at any
# time and it is not meant to be used by other collections.

"""The deployments of a host, read with bootc or rpm-ostree in one shape: what
fleetos.layering.os_info returns, and fleetos.layering.os_rollout_lease with its
option deployments."""

from __future__ import annotations

import os

from ansible_collections.fleetos.layering.plugins.module_utils._bootc import BootcClient, origin_status
from ansible_collections.fleetos.layering.plugins.module_utils._commands import find_executable
from ansible_collections.fleetos.layering.plugins.module_utils._errors import CommandError
from ansible_collections.fleetos.layering.plugins.module_utils._image_ref import oci_architecture
from ansible_collections.fleetos.layering.plugins.module_utils._rpm_ostree import RpmOstreeClient

BACKENDS = ("auto", "bootc", "rpm-ostree")


def read_bootc(module, executable, required):
    """The bootc facts in rpm-ostree's shape, or None when bootc did not boot the host (``required`` False)."""
    try:
        status = BootcClient(module, executable=executable).status()
    except CommandError:
        if required:
            raise
        # A bootc that cannot say (an older one on a package-mode host): not a bootc host.
        return None
    if not status["is_bootc"]:
        if required:
            raise CommandError("Failed to read the host with bootc: bootc did not boot it (status.booted is null).")
        return None
    booted = status["booted"] or {}
    architecture = booted.get("architecture") or oci_architecture(os.uname().machine)
    return dict(origin_status(status), backend="bootc", architecture=architecture)


def read_rpm_ostree(module, executable):
    status = RpmOstreeClient(module, executable=executable).status()
    return dict(status, backend="rpm-ostree", architecture=oci_architecture(os.uname().machine))


def read_host(module, backend, rpm_ostree_executable=None, bootc_executable=None):
    """The host's deployments, read with ``backend`` (``auto``: bootc when it booted the host).

    An executable given as a path is checked before any tool runs, and named by its option.
    """
    if rpm_ostree_executable:
        find_executable(module, rpm_ostree_executable, "rpm-ostree", "rpm_ostree_executable")
    if bootc_executable or backend == "bootc":
        find_executable(module, bootc_executable, "bootc", "bootc_executable")
    elif backend == "auto" and not module.get_bin_path("bootc", required=False):
        backend = "rpm-ostree"
    if backend != "rpm-ostree":
        facts = read_bootc(module, bootc_executable, required=backend == "bootc")
        if facts is not None:
            return facts
    return read_rpm_ostree(module, rpm_ostree_executable)
