# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# This is a private module_util of fleetos.layering: its interface may change at any
# time and it is not meant to be used by other collections.

"""The skopeo client: argv lists, ``LC_ALL=C``, no shell expansion, parsed JSON.

Credentials only ever reach skopeo as the path of an auth file (``--authfile``),
never as a value in argv.
"""

from __future__ import annotations

import json

from ansible_collections.fleetos.layering.plugins.module_utils._commands import find_executable
from ansible_collections.fleetos.layering.plugins.module_utils._errors import ImageError

# stderr fragment (lowercase) -> the cause as the error message names it.
_CAUSES = (
    (("unauthorized", "authentication required"),
     "the registry refused the credentials (unauthorized)"),
    (("denied", "forbidden"),
     "the registry denied access (denied)"),
    (("x509:", "certificate signed by unknown authority", "certificate is not valid", "tls: "),
     "the registry's TLS certificate is not trusted (unknown CA or wrong certificate)"),
    (("manifest unknown", "name unknown"),
     "the registry has no such image (manifest unknown)"),
    (("connection refused", "no such host", "i/o timeout", "network is unreachable",
      "no route to host", "connection reset"),
     "the registry is unreachable"),
)


def describe_failure(stderr):
    """A short cause for a skopeo failure, from its stderr."""
    lowered = (stderr or "").lower()
    for needles, cause in _CAUSES:
        if any(needle in lowered for needle in needles):
            return cause
    lines = [line.strip() for line in (stderr or "").splitlines() if line.strip()]
    return lines[-1] if lines else "skopeo failed without a message"


class Skopeo:
    """Runs skopeo through an AnsibleModule's ``run_command``."""

    def __init__(self, module, executable=None, option="executable"):
        self.module = module
        self.binary = find_executable(module, executable, "skopeo", option)

    def _run(self, argv, action, image):
        rc, stdout, stderr = self.module.run_command(
            argv, environ_update={"LC_ALL": "C"}, expand_user_and_vars=False)
        if rc != 0:
            raise ImageError(
                "Failed to %s image '%s': %s" % (action, image, describe_failure(stderr)),
                cmd=argv, rc=rc, stdout=stdout, stderr=stderr)
        return stdout

    @staticmethod
    def _source_options(prefix, auth_file, cert_dir, tls_verify):
        argv = []
        if auth_file:
            argv += ["--%sauthfile" % prefix, auth_file]
        if cert_dir:
            argv += ["--%scert-dir" % prefix, cert_dir]
        if not tls_verify:
            argv.append("--%stls-verify=false" % prefix)
        return argv

    def _inspect(self, image, extra, action, auth_file, cert_dir, tls_verify):
        argv = [self.binary, "inspect"] + extra + self._source_options("", auth_file, cert_dir, tls_verify)
        argv += ["--", "docker://" + image]
        stdout = self._run(argv, action, image)
        try:
            return json.loads(stdout)
        except ValueError:
            raise ImageError("Failed to %s image '%s': skopeo printed no valid JSON" % (action, image),
                             cmd=argv, rc=0, stdout=stdout) from None

    def inspect(self, image, auth_file=None, cert_dir=None, tls_verify=True):
        """``skopeo inspect --no-tags``: Digest, Labels, Architecture, Layers... (no blobs but the config)."""
        return self._inspect(image, ["--no-tags"], "inspect", auth_file, cert_dir, tls_verify)

    def inspect_config(self, image, auth_file=None, cert_dir=None, tls_verify=True):
        """``skopeo inspect --config``: the OCI image configuration (labels in config.Labels)."""
        return self._inspect(image, ["--config"], "inspect the configuration of", auth_file, cert_dir,
                             tls_verify)

    def copy(self, image, destination, auth_file=None, cert_dir=None, tls_verify=True):
        """``skopeo copy`` from ``docker://image`` to ``destination`` (e.g. ``oci:DIR:TAG``)."""
        argv = [self.binary, "copy", "--quiet"]
        argv += self._source_options("src-", auth_file, cert_dir, tls_verify)
        argv += ["--", "docker://" + image, destination]
        self._run(argv, "pull", image)
