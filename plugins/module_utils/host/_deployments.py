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

from ansible_collections.fleetos.layering.plugins.module_utils._errors import CommandError
from ansible_collections.fleetos.layering.plugins.module_utils.host import _update_agents
from ansible_collections.fleetos.layering.plugins.module_utils.host._bootc import BootcClient, origin_status
from ansible_collections.fleetos.layering.plugins.module_utils.host._commands import find_executable
from ansible_collections.fleetos.layering.plugins.module_utils.host._host import as_host, which_argv
from ansible_collections.fleetos.layering.plugins.module_utils.host._rpm_ostree import RpmOstreeClient
from ansible_collections.fleetos.layering.plugins.module_utils.images._image_ref import oci_architecture

BACKENDS = ("auto", "bootc", "rpm-ostree")

# The options of fleetos.layering.os_info.
OS_INFO_ARGS = dict(
    backend=dict(type="str", choices=list(BACKENDS), default="auto"),
    rpm_ostree_executable=dict(type="path"),
    bootc_executable=dict(type="path"),
    update_agents=dict(type="bool", default=False),
)


# --------------------------------------------------------------------------
# one deployment, as both backends report it (``image``: reference, transport, digest, manifest_digest)

# The keys summary() adds to reference, digest and checksum on request.
SUMMARY_EXTRAS = ("transport", "download_only", "origin")


def deployment_digest(deployment):
    """The image digest of a deployment, or None (no deployment, or an ostree origin)."""
    if isinstance(deployment, dict) and isinstance(deployment.get("image"), dict):
        return deployment["image"].get("digest") or None
    return None


def status_digest(status, role):
    """The image digest of the ``role`` deployment (``booted``, ``staged``, ``rollback``) of a deployments read
    (os_info's result), or None."""
    deployment = status.get(role) if isinstance(status, dict) else None
    return deployment_digest(deployment)


def manifest_digest(deployment):
    """The per-platform manifest digest a deployment reports (rpm-ostree's ``container-image-reference-digest``),
    else its image digest, or None."""
    image = (deployment or {}).get("image") or {}
    return image.get("manifest_digest") or image.get("digest")


def has_digest(deployment, digest):
    """True when the deployment runs the image with this digest: the digest its reference pins (possibly an OCI
    index digest, or the one reported for a tag) or the per-platform manifest digest the tool reports. For a host
    of that platform an index digest and its manifest digest name the same content."""
    if digest is None or not isinstance(deployment, dict) or not isinstance(deployment.get("image"), dict):
        return False
    image = deployment["image"]
    return digest in (image.get("digest"), image.get("manifest_digest"))


def summary(deployment, *extras):
    """{reference, digest, checksum} of a deployment (values None when unknown), with the keys of ``extras``
    (among SUMMARY_EXTRAS) as well: a module's before and after."""
    deployment = deployment or {}
    image = deployment.get("image") or {}
    values = {"transport": image.get("transport"), "download_only": bool(deployment.get("download_only", False)),
              "origin": deployment.get("origin")}
    result = {"reference": image.get("reference"), "digest": image.get("digest"), "checksum": deployment.get("checksum")}
    result.update((key, values[key]) for key in extras)
    return result


def read_bootc(host, executable, required, architecture=True):
    """The bootc facts in rpm-ostree's shape, or None when bootc did not boot the host (``required`` False)."""
    try:
        status = BootcClient(host, executable=executable).status()
    except CommandError:
        if required:
            raise
        # A bootc that cannot say (an older one on a package-mode host): not a bootc host.
        return None
    if not status["is_bootc"]:
        if required:
            raise CommandError("Failed to read the host with bootc: bootc did not boot it (status.booted is null).")
        return None
    facts = dict(origin_status(status), backend="bootc")
    if architecture:
        booted = status["booted"] or {}
        facts["architecture"] = booted.get("architecture") or oci_architecture(as_host(host).machine())
    return facts


def read_rpm_ostree(host, executable, architecture=True):
    facts = dict(RpmOstreeClient(host, executable=executable).status(), backend="rpm-ostree")
    if architecture:
        facts["architecture"] = oci_architecture(as_host(host).machine())
    return facts


def read_commands(backend, rpm_ostree_executable=None, bootc_executable=None, architecture=True,
                  update_agents=False):
    """What :func:`read_host` runs on a host reached over a connection, for ``Host.prefetch``: the look-up of bootc
    (``auto``), the status of the tool that booted the host, its machine name; with ``update_agents``, the probe of
    the update agents (``_update_agents.read``). Without the probe, empty with an executable given (it is checked
    first, as read_host checks it)."""
    agents = [(_update_agents.probe_argv(), None)] if update_agents else []
    if rpm_ostree_executable or bootc_executable:
        return agents
    bootc, rpm_ostree = ["bootc", "status", "--format=json"], ["rpm-ostree", "status", "--json"]
    commands = {"auto": [(which_argv("bootc"), None), (bootc, (0, True)), (rpm_ostree, (0, False))],
                "bootc": [(bootc, None)], "rpm-ostree": [(rpm_ostree, None)]}[backend]
    return commands + ([(["uname", "-m"], None)] if architecture else []) + agents


def read_host(host, backend, rpm_ostree_executable=None, bootc_executable=None, architecture=True):
    """The host's deployments, read with ``backend`` (``auto``: bootc when it booted the host).

    ``host`` is a ``_host.Host`` (or the AnsibleModule of a module on the host). An executable
    given as a path is checked before any tool runs, and named by its option. Without
    ``architecture``, the host's architecture is not read (one command less on a host reached
    over a connection).
    """
    host = as_host(host)
    if rpm_ostree_executable:
        find_executable(host, rpm_ostree_executable, "rpm-ostree", "rpm_ostree_executable")
    if bootc_executable or backend == "bootc":
        find_executable(host, bootc_executable, "bootc", "bootc_executable")
    elif backend == "auto" and not host.which("bootc"):
        backend = "rpm-ostree"
    if backend != "rpm-ostree":
        facts = read_bootc(host, bootc_executable, required=backend == "bootc", architecture=architecture)
        if facts is not None:
            return facts
    return read_rpm_ostree(host, rpm_ostree_executable, architecture=architecture)
