# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# This is a private module_util of fleetos.layering: its interface may change at any
# time and it is not meant to be used by other collections.

"""The skopeo client and the one tag -> digest resolver of the collection.

The client runs skopeo through :func:`_commands.run_command` (argv lists, ``LC_ALL=C``,
no shell expansion) and retries transient registry failures (connection refused or
reset, timeouts, HTTP 5xx), never authentication failures or missing images.
Credentials only ever reach skopeo as the path of an auth file (``--authfile``), never
as a value in argv.

:func:`resolve` reads only the manifest (``skopeo inspect --raw``, no blob) and names
the digest as the sha256 of the exact bytes the registry served, with the per-platform
entries of an OCI index or Docker manifest list.
"""

from __future__ import annotations

import hashlib
import json
import re

from ansible_collections.fleetos.layering.plugins.module_utils._errors import FleetosError, ImageError
from ansible_collections.fleetos.layering.plugins.module_utils.host._commands import (
    ToolClient,
    run_command,
    strip_decoration,
    to_text,
)
from ansible_collections.fleetos.layering.plugins.module_utils.host._host import as_host
from ansible_collections.fleetos.layering.plugins.module_utils.images._auth import ostree_auth_file
from ansible_collections.fleetos.layering.plugins.module_utils.images._image_ref import (
    is_digest,
    oci_architecture,
    parse,
)

# The options of every module that reads images from a registry with skopeo
# (documented by the fleetos.layering.registry doc fragment).
REGISTRY_ARGS = dict(
    auth_file=dict(type="path", no_log=False),
    ca_cert_dir=dict(type="path"),
    validate_certs=dict(type="bool", default=True),
)
# The skopeo binary of a module whose own tool is another one (fleetos.layering.executables.skopeo).
SKOPEO_ARGS = dict(
    skopeo_executable=dict(type="path"),
)

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
INDEX_TYPES = (OCI_INDEX, DOCKER_LIST)
MANIFEST_TYPES = (OCI_MANIFEST, DOCKER_MANIFEST)

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
    (("timeout", "deadline exceeded"),
     "the registry did not answer in time (timeout)"),
)
# Failures that another attempt will not fix, even when a transient word appears too.
_PERMANENT = ("unauthorized", "authentication required", "denied", "forbidden", "x509:",
              "manifest unknown", "name unknown", "invalid reference format")
_TRANSIENT = ("connection refused", "connection reset", "broken pipe", "i/o timeout", "timeout",
              "deadline exceeded", "unexpected eof")
# An HTTP 5xx answer, as containers-image words it (``received unexpected HTTP status: 503 Service
# Unavailable``, ``StatusCode: 502``, ``status code 500``).
_SERVER_ERROR_RE = re.compile(r"(?:http status:?|status ?code:?|http code:?)\s*(5\d\d)\b"
                              r"|\b(5\d\d) (?:internal server error|not implemented|bad gateway|service unavailable"
                              r"|gateway timeout)")


def _server_error(lowered):
    match = _SERVER_ERROR_RE.search(lowered)
    return (match.group(1) or match.group(2)) if match else None


def describe_failure(stderr):
    """A short cause for a skopeo failure, from its stderr (never the raw log line)."""
    lowered = (stderr or "").lower()
    for needles, cause in _CAUSES[:4]:
        if any(needle in lowered for needle in needles):
            return cause
    status = _server_error(lowered)
    if status:
        return "the registry answered with a server error (HTTP %s)" % status
    for needles, cause in _CAUSES[4:]:
        if any(needle in lowered for needle in needles):
            return cause
    lines = [strip_decoration(line) for line in (stderr or "").splitlines() if line.strip()]
    return lines[-1] if lines else "skopeo failed without a message"


def is_transient(stderr):
    """True for a failure another attempt may not meet: unreachable, reset, timeout, HTTP 5xx."""
    lowered = (stderr or "").lower()
    if any(needle in lowered for needle in _PERMANENT):
        return False
    return any(needle in lowered for needle in _TRANSIENT) or _server_error(lowered) is not None


# --------------------------------------------------------------------------
# manifests (pure functions)


class _NotAManifest(ValueError):
    """The cause, as a clause, why some bytes are not an image manifest."""


def platform_key(platform):
    """``amd64``, ``arm64/v8``: an index entry's platform as architecture and, when it has one, variant."""
    architecture = str(platform.get("architecture") or "")
    variant = platform.get("variant")
    return "%s/%s" % (architecture, variant) if variant else architecture


def _parse_manifest(raw):
    if not isinstance(raw, bytes):
        raw = str(raw).encode("utf-8")
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise _NotAManifest("it is not JSON") from None
    if not isinstance(doc, dict):
        raise _NotAManifest("it is not a JSON object")
    if doc.get("schemaVersion") == 1:
        raise _NotAManifest("it is a Docker schema 1 manifest, which is not supported")
    if doc.get("schemaVersion") != 2:
        raise _NotAManifest("its schemaVersion is %r, not 2" % (doc.get("schemaVersion"),))
    media_type = doc.get("mediaType")
    if media_type is None:  # OCI allows leaving mediaType out
        if isinstance(doc.get("manifests"), list):
            media_type = OCI_INDEX
        elif isinstance(doc.get("layers"), list):
            media_type = OCI_MANIFEST
    if media_type not in INDEX_TYPES + MANIFEST_TYPES:
        raise _NotAManifest("its media type %r is not an image manifest or index" % (media_type,))
    index = media_type in INDEX_TYPES
    manifests = {}
    if index:
        entries = doc.get("manifests")
        if not isinstance(entries, list):
            raise _NotAManifest("the index has no 'manifests' list")
        for entry in entries:
            platform = entry.get("platform") if isinstance(entry, dict) else None
            if not isinstance(platform, dict) or platform.get("os") != "linux" or not platform.get("architecture"):
                continue  # other OSes, attestations (os "unknown") and entries without a platform
            if not is_digest(entry.get("digest")):
                raise _NotAManifest("its entry for %s has an invalid digest %r" % (platform_key(platform),
                                                                                   entry.get("digest")))
            manifests.setdefault(platform_key(platform), entry["digest"])
    elif not isinstance(doc.get("layers"), list):
        raise _NotAManifest("the manifest has no 'layers' list")
    return {
        "digest": "sha256:" + hashlib.sha256(raw).hexdigest(),
        "media_type": media_type,
        "index": index,
        "manifests": manifests,
    }


def describe_manifest(raw):
    """The exact bytes of a manifest -> ``{digest, media_type, index, manifests}``.

    ``digest`` is ``sha256:`` and the hex sha256 of ``raw``; ``index`` is true for an
    OCI index or a Docker manifest list, whose ``manifests`` maps each linux entry's
    architecture (``amd64``, ``arm64``, ``arm/v7`` with the variant when there is one)
    to its manifest digest; ``manifests`` is ``{}`` for a plain manifest. Anything else
    raises ImageError.
    """
    try:
        return _parse_manifest(raw)
    except _NotAManifest as exc:
        raise ImageError("The data is not an image manifest: %s." % exc) from None


def platform_digest(described, architecture):
    """The digest a host of ``architecture`` uses from a :func:`describe_manifest` result, or None.

    A plain manifest serves every architecture. In an index, ``architecture`` matches
    its own entry; ``arm64`` also matches ``arm64/v8``, and an architecture without a
    variant matches the one entry of that architecture when there is only one.
    """
    if not described["index"]:
        return described["digest"]
    manifests = described["manifests"]
    if architecture in manifests:
        return manifests[architecture]
    if "/" in architecture:
        return None
    if architecture == "arm64" and "arm64/v8" in manifests:
        return manifests["arm64/v8"]
    candidates = [key for key in manifests if key.split("/", 1)[0] == architecture]
    return manifests[candidates[0]] if len(candidates) == 1 else None


# --------------------------------------------------------------------------
# the client


class Skopeo(ToolClient):
    """Runs skopeo on a host (a ``_host.Host``, or the AnsibleModule of a module on the host), retrying
    transient registry failures."""

    tool = "skopeo"

    def _run(self, argv, action, image, binary=False):
        """Run ``argv``; -> stdout. Retry transient failures; raise ImageError naming ``action`` and ``image``."""
        def attempt(attempts):
            def describe(stdout, stderr, rc):
                cause = describe_failure(stderr)
                return cause if attempts == 1 else "%s (after %d attempts)" % (cause, attempts)

            return run_command(self.host, argv, "%s image '%s'" % (action, image), binary=binary,
                               error=ImageError, describe=describe)[1]
        return self.retrying(attempt, ImageError, accept=lambda exc: is_transient(exc.details.get("stderr")))

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

    def _inspect_argv(self, image, extra, auth_file, cert_dir, tls_verify):
        return ([self.binary, "inspect"] + extra + self._source_options("", auth_file, cert_dir, tls_verify)
                + ["--", "docker://" + image])

    def _inspect(self, image, extra, action, auth_file, cert_dir, tls_verify):
        argv = self._inspect_argv(image, extra, auth_file, cert_dir, tls_verify)
        stdout = self._run(argv, action, image)
        try:
            return json.loads(stdout)
        except ValueError:
            raise ImageError("Failed to %s image '%s': skopeo printed no valid JSON." % (action, image),
                             cmd=argv, rc=0, stdout=stdout) from None

    def inspect(self, image, auth_file=None, cert_dir=None, tls_verify=True):
        """``skopeo inspect --no-tags``: Digest, Labels, Architecture, Layers... (no blobs but the config)."""
        return self._inspect(image, ["--no-tags"], "inspect", auth_file, cert_dir, tls_verify)

    def inspect_config(self, image, auth_file=None, cert_dir=None, tls_verify=True):
        """``skopeo inspect --config``: the OCI image configuration (labels in config.Labels)."""
        return self._inspect(image, ["--config"], "inspect the configuration of", auth_file, cert_dir,
                             tls_verify)

    def inspect_raw(self, image, auth_file=None, cert_dir=None, tls_verify=True, action="read the manifest of"):
        """``skopeo inspect --raw``: the manifest bytes exactly as the registry served them (no blob is read)."""
        argv = self._inspect_argv(image, ["--raw"], auth_file, cert_dir, tls_verify)
        return self._run(argv, action, image, binary=True)

    def copy(self, image, destination, auth_file=None, cert_dir=None, tls_verify=True):
        """``skopeo copy`` from ``docker://image`` to ``destination`` (e.g. ``oci:DIR:TAG``).

        The host's containers policy still applies to the source (a signature it requires is
        verified); ``--remove-signatures`` only keeps skopeo from writing signatures into a
        destination that cannot hold them, such as an OCI layout.
        """
        argv = [self.binary, "copy", "--quiet", "--remove-signatures"]
        argv += self._source_options("src-", auth_file, cert_dir, tls_verify)
        argv += ["--", "docker://" + image, destination]
        self._run(argv, "pull", image)


# --------------------------------------------------------------------------
# the resolver


def host_architecture(host):
    """The OCI architecture of ``host`` (a ``_host.Host``): its ``uname -m`` mapped by ``_image_ref.oci_architecture``."""
    return oci_architecture(as_host(host).machine())


class Resolver:
    """The stage's target resolved with skopeo on ``host`` (its manifest only, :func:`resolve`), at most once a
    task: ``params`` are the stage's options (``skopeo_executable``, ``retries``, ``retry_delay``, ``auth_file``);
    without an ``auth_file`` the first of ``auth_files`` the host has is used, as the host's tool would.

    ``resolver(ref)`` is the resolution for the host's architecture (read with ``uname -m`` when first needed);
    ``resolver(ref, for_host=False)`` names no architecture, for the digest of a tag alone. A failure is raised
    again when asked again: the registry is not asked twice."""

    def __init__(self, host, params, auth_files):
        self.host = host
        self.params = params
        self.auth_files = auth_files
        self._architecture = None
        self._answers = {}

    @property
    def architecture(self):
        """The host's OCI architecture, read from the host when first needed."""
        if self._architecture is None:
            self._architecture = host_architecture(self.host)
        return self._architecture

    def __call__(self, ref, for_host=True):
        if for_host not in self._answers:
            params = self.params
            skopeo = Skopeo(self.host, params["skopeo_executable"], option="skopeo_executable",
                            retries=params["retries"], retry_delay=params["retry_delay"])
            auth_file = params["auth_file"] or ostree_auth_file(self.auth_files, host=self.host)
            try:
                self._answers[for_host] = resolve(skopeo, ref.image, (self.architecture,) if for_host else (),
                                                  auth_file=auth_file)
            except FleetosError as exc:
                self._answers[for_host] = exc
        answer = self._answers[for_host]
        if isinstance(answer, FleetosError):
            raise answer
        return answer

    def platform_digest(self, ref):
        """The manifest digest of ``ref`` for the host's architecture (the digest itself for a plain manifest)."""
        return self(ref)["platform_digests"][self.architecture]

    def tag_digest(self, ref):
        """The digest ``ref``'s tag names (an index's own digest for an index)."""
        return self(ref, for_host=False)["digest"]


def resolve(skopeo, image_text, architectures=(), auth_file=None, cert_dir=None, tls_verify=True):
    """Resolve an image reference to the digest of its manifest, reading only the manifest.

    -> ``{"image": "REGISTRY/REPO@DIGEST" (tag dropped, no transport), "digest": the
    digest the reference names (an index's own digest for an index), "media_type",
    "index": bool, "manifests": {architecture: digest} (``{}`` for a plain manifest),
    "platform_digests": {architecture: digest}`` for each of ``architectures`` (a
    plain manifest's digest for every one), ``"annotations": {...}}`` (the manifest's or index's own).

    A reference that carries a digest is still read, to learn an index's entries, and
    the served bytes must hash to that digest. An index without an entry for an
    asked architecture, and anything that is not a manifest, raise ImageError.
    """
    ref = parse(image_text)
    named = ref.with_digest(ref.digest) if ref.pinned else ref
    shown = named.image
    raw = skopeo.inspect_raw(shown, auth_file=auth_file, cert_dir=cert_dir, tls_verify=tls_verify, action="resolve")
    try:
        described = _parse_manifest(raw)
    except _NotAManifest as exc:
        raise ImageError("Failed to resolve image '%s': the registry served no image manifest (%s)." % (shown, exc),
                         stdout=to_text(raw)) from None
    digest = described["digest"]
    if ref.pinned and digest != ref.digest:
        raise ImageError("Failed to resolve image '%s': the manifest the registry served hashes to %s, not to the "
                         "digest the reference names." % (shown, digest), digest=digest, expected_digest=ref.digest)
    platform_digests = {}
    for architecture in architectures:
        found = platform_digest(described, architecture)
        if found is None:
            raise ImageError("Failed to resolve image '%s': its index has no linux entry for architecture %s "
                             "(entries: %s)." % (shown, architecture, ", ".join(sorted(described["manifests"])) or "none"),
                             digest=digest, manifests=described["manifests"])
        platform_digests[architecture] = found
    annotations = json.loads(raw.decode("utf-8") if isinstance(raw, bytes) else raw).get("annotations")
    return dict(described, image=ref.with_digest(digest).image, platform_digests=platform_digests,
                annotations=annotations if isinstance(annotations, dict) else {})
