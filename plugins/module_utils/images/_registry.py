# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# This is a private module_util of fleetos.layering: its interface may change at any
# time and it is not meant to be used by other collections.

"""A small client of the OCI distribution API (``/v2/``), on ``ansible.module_utils.urls``.

It reads and writes what composing an image needs, and nothing more: manifests (GET,
HEAD, PUT; OCI and Docker media types, indexes and manifest lists), a repository's tags
(``GET /v2/NAME/tags/list``, page after page as the ``Link`` header says), blobs (GET, HEAD),
cross-repository mounts (``POST /v2/NAME/blobs/uploads/?mount=DIGEST&from=REPO``, with
the upload session a registry opens instead when it does not mount) and monolithic
uploads (``POST`` then ``PUT ?digest=``).

TLS: the CA certificates (``*.crt``) and client certificate pairs (``*.cert`` /
``*.key``) of a containers-certs.d(5) directory, by default
``/etc/containers/certs.d/REGISTRY``, on top of the system's CAs; ``validate_certs=False``
skips verification. Credentials are an ``_auth.Auths`` source (an auth file, chosen per
repository as containers-auth.json(5) specifies); they go as Basic credentials to the
registry or to the token service a ``Bearer`` challenge names (``realm``, ``service``,
``scope``). Transient failures (connection refused or reset, timeouts, HTTP 5xx) are
retried; credentials, tokens and authorization headers never appear in a message, and
``secrets`` lists every token received, for ``module.no_log_values``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import socket
import ssl
import tempfile
import time
from urllib.error import HTTPError, URLError
from urllib.parse import urlencode, urljoin
from urllib.request import HTTPSHandler, build_opener
from urllib.request import Request as _UrlRequest

from ansible.module_utils.urls import basic_auth_header

from ansible_collections.fleetos.layering.plugins.module_utils.host._commands import retrying
from ansible_collections.fleetos.layering.plugins.module_utils._errors import ImageError
from ansible_collections.fleetos.layering.plugins.module_utils._files import place_file
from ansible_collections.fleetos.layering.plugins.module_utils.images._image_ref import DOCKER_HUB, is_digest, parse
from ansible_collections.fleetos.layering.plugins.module_utils.images._oci_index import REF_NAME, OciIndex
from ansible_collections.fleetos.layering.plugins.module_utils.images._skopeo import (
    DOCKER_LIST,
    DOCKER_MANIFEST,
    OCI_INDEX,
    OCI_MANIFEST,
    describe_manifest,
)

# What a manifest GET or HEAD accepts: both image manifests and both indexes.
MANIFEST_ACCEPT = ", ".join((OCI_INDEX, OCI_MANIFEST, DOCKER_LIST, DOCKER_MANIFEST))
CERTS_D = "/etc/containers/certs.d"
# Docker Hub's API host.
DOCKER_HUB_API = "registry-1.docker.io"
# Blobs held in memory (configs); larger ones are spooled to a temporary file.
SPOOL_MAX = 8 * 1024 * 1024
CHUNK = 1024 * 1024
_CHALLENGE_RE = re.compile(r'(\w+)="([^"]*)"')
# The next page of a paginated list: `Link: </v2/NAME/tags/list?last=X&n=N>; rel="next"`.
_NEXT_LINK_RE = re.compile(r'<([^>]+)>\s*;\s*rel="?next"?')
TAGS_PAGE = 1000


class BlobCopy:
    """How :func:`copy_blob` got a blob into the target repository."""

    SKIPPED = "skipped"
    MOUNTED = "mounted"
    UPLOADED = "uploaded"


def sha256_digest(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


def parse_challenge(header):
    """A ``WWW-Authenticate`` header -> ``(scheme, {param: value})``; scheme lowercased, ``""`` when none."""
    text = (header or "").strip()
    scheme, _sep, rest = text.partition(" ")
    return scheme.lower(), dict(_CHALLENGE_RE.findall(rest))


def ssl_context(cert_dir=None, validate_certs=True):
    """An SSLContext with the system CAs plus ``cert_dir``'s ``*.crt``, and its ``*.cert``/``*.key`` pairs."""
    context = ssl.create_default_context()
    if not validate_certs:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if not cert_dir or not os.path.isdir(cert_dir):
        return context
    try:
        names = sorted(os.listdir(cert_dir))
        for name in names:
            path = os.path.join(cert_dir, name)
            if name.endswith(".crt") and validate_certs:
                context.load_verify_locations(cafile=path)
            elif name.endswith(".cert"):
                key = path[:-len(".cert")] + ".key"
                if not os.path.exists(key):
                    raise ImageError("Failed to read the certificate directory '%s': client certificate %s has no "
                                     "key %s." % (cert_dir, name, os.path.basename(key)))
                context.load_cert_chain(path, keyfile=key)
    except (OSError, ssl.SSLError) as exc:
        raise ImageError("Failed to read the certificate directory '%s': %s." % (
            cert_dir, getattr(exc, "strerror", None) or exc)) from None
    return context


def _error_code(exc):
    """The first ``errors[].code`` of a registry's JSON error body (``MANIFEST_INVALID``), or None."""
    try:
        body = json.loads(exc.read(65536).decode("utf-8"))
        return str(body["errors"][0]["code"])
    except Exception:  # pylint: disable=broad-except
        return None


class _TransientImageError(ImageError):
    """A failed request worth trying again (``_cause``: a timeout, a refused connection, HTTP 429 or 5xx)."""


def _cause(exc, missing):
    """(cause, transient) of a failed request; ``missing`` names what a 404 means."""
    if isinstance(exc, HTTPError):
        if exc.code == 401:
            return "the registry refused the credentials (unauthorized)", False
        if exc.code == 403:
            return "the registry denied access (denied)", False
        if exc.code == 404:
            return missing, False
        if exc.code == 429:
            return "the registry asked to slow down (HTTP 429 too many requests)", True
        if exc.code >= 500:
            return "the registry answered with a server error (HTTP %d)" % exc.code, True
        code = _error_code(exc)
        return "the registry answered HTTP %d%s" % (exc.code, " (%s)" % code if code else ""), False
    reason = getattr(exc, "reason", exc)
    if isinstance(reason, ssl.SSLCertVerificationError) or isinstance(reason, ssl.SSLError):
        return "the registry's TLS certificate is not trusted (unknown CA or wrong certificate)", False
    if isinstance(reason, (socket.timeout, TimeoutError)):
        return "the registry did not answer in time (timeout)", True
    if isinstance(reason, ConnectionRefusedError):
        return "the registry is unreachable (connection refused)", True
    if isinstance(reason, (ConnectionError, OSError)):
        return "the registry is unreachable (%s)" % (getattr(reason, "strerror", None) or type(reason).__name__), True
    return "the registry is unreachable", True


class Registry:
    """One registry (``host[:port]``), with the credentials and TLS settings that apply to it.

    ``auths`` is an ``_auth.Auths`` (or None); ``sleep`` and ``request`` are for tests.
    """

    def __init__(self, registry, auths=None, cert_dir=None, validate_certs=True, retries=0, retry_delay=5,
                 timeout=60, sleep=None, scheme="https"):
        self.registry = registry
        host = DOCKER_HUB_API if registry == DOCKER_HUB else registry
        self.base = "%s://%s" % (scheme, host)
        self.auths = auths
        self.retries = max(0, int(retries or 0))
        self.retry_delay = max(0, int(retry_delay or 0))
        self.timeout = timeout
        self._sleep = sleep or time.sleep
        if cert_dir is None and os.path.isdir(os.path.join(CERTS_D, registry)):
            cert_dir = os.path.join(CERTS_D, registry)
        self._context = ssl_context(cert_dir, validate_certs)
        self._tokens = {}  # scope key -> token
        self._basic = False  # the registry asked for Basic credentials (sent from then on, per repository)
        self._bearer = None  # the last Bearer challenge (realm, service) the registry made
        self.secrets = set()

    # ------------------------------------------------------------------
    # requests

    def _login(self, repository):
        if self.auths is None:
            return None
        return self.auths.login("%s/%s" % (self.registry, repository))

    def _open(self, method, url, headers, data):
        """One request with this client's TLS context; ``Authorization`` is never sent on to a redirect.

        urllib directly rather than ansible-core's ``Request``: ``Request.open`` takes an
        SSLContext only from ansible-core 2.17 on, and the client's context (the system CAs
        plus a certificate directory's CAs and client pairs) must be the same on every
        supported core. Proxies come from the environment, redirects are urllib's.
        """
        request = _UrlRequest(url, data=data, method=method)
        for name, value in (headers or {}).items():
            if name.lower() == "authorization":
                request.add_unredirected_header(name, value)
            else:
                request.add_header(name, value)
        request.add_header("User-Agent", "fleetos.layering")
        return build_opener(HTTPSHandler(context=self._context)).open(request, timeout=self.timeout)

    def _token(self, challenge, repository, scopes):
        """A Bearer token for ``scopes`` from the token service the challenge names (cached per scopes)."""
        key = " ".join(scopes)
        if key in self._tokens:
            return self._tokens[key]
        realm = challenge.get("realm")
        if not realm:
            raise ImageError("the registry's Bearer challenge names no token service (realm)")
        query = [("service", challenge["service"])] if challenge.get("service") else []
        query += [("scope", scope) for scope in scopes]
        url = realm + ("&" if "?" in realm else "?") + urlencode(query)
        login = self._login(repository)
        headers = {"Authorization": basic_auth_header(login[0], login[1])} if login else {}
        try:
            response = self._open("GET", url, headers, None)
            document = json.loads(response.read().decode("utf-8"))
        except HTTPError as exc:
            if exc.code in (401, 403) and not login:
                raise ImageError("the registry's token service requires credentials and none apply to the image "
                                 "(unauthorized)") from None
            if exc.code in (401, 403):
                raise ImageError("the registry's token service refused the credentials (unauthorized)") from None
            raise ImageError("the registry's token service failed (%s)" % _cause(exc, "HTTP 404")[0]) from None
        except (URLError, OSError, ValueError, UnicodeDecodeError) as exc:
            if isinstance(exc, ValueError):
                raise ImageError("the registry's token service answered no JSON") from None
            raise ImageError("the registry's token service is unreachable (%s)" % _cause(exc, "")[0]) from None
        token = document.get("token") or document.get("access_token") if isinstance(document, dict) else None
        if not token:
            raise ImageError("the registry's token service answered no token")
        self.secrets.add(str(token))
        self._tokens[key] = str(token)
        return str(token)

    def _authorization(self, repository, scopes):
        key = " ".join(scopes)
        if key not in self._tokens and self._bearer is not None:
            # The registry asked for a token before: ask its token service for these scopes
            # right away, instead of meeting another 401 first.
            self._token(self._bearer, repository, scopes)
        if key in self._tokens:
            return "Bearer " + self._tokens[key]
        if self._basic:
            login = self._login(repository)
            if login:
                return "Basic " + base64.b64encode(("%s:%s" % login).encode("utf-8")).decode("ascii")
        return None

    def request(self, method, path, action, subject, repository, headers=None, data=None, ok=(200,),
                missing="the registry has no such image (manifest unknown)", scopes=None):
        """One API request, authenticated and retried; -> the open response (status in ``ok``).

        ``path`` is a path on the registry (``/v2/...``) or an absolute URL (an upload
        location). A 401 answer is met once with Basic credentials or a Bearer token for
        ``scopes`` (default ``repository:REPOSITORY:pull``). Other failures raise ImageError
        ``Failed to ACTION 'SUBJECT': CAUSE.``; transient ones are retried first.
        """
        url = urljoin(self.base + "/", path)
        scopes = scopes or ["repository:%s:pull" % repository]
        challenged = []

        def attempt(attempts):
            sent = dict(headers or {})
            try:
                authorization = self._authorization(repository, scopes)
            except ImageError as failure:
                raise ImageError("Failed to %s '%s': %s." % (action, subject, failure.msg.rstrip("."))) from None
            if authorization:
                sent["Authorization"] = authorization
            if hasattr(data, "seek"):
                data.seek(0)
            try:
                response = self._open(method, url, sent, data)
            except HTTPError as exc:
                if exc.code == 401 and not challenged:
                    # Met once, at once: not a try of its own.
                    challenged.append(exc.code)
                    self._answer_challenge(exc, repository, scopes, action, subject)
                    return attempt(attempts)
                response, failure = (exc, None) if exc.code in ok else (None, exc)
            except (URLError, OSError, socket.timeout) as exc:
                response, failure = None, exc
            if response is not None:
                if response.status not in ok and getattr(response, "code", None) not in ok:
                    failure = HTTPError(url, response.status, "unexpected status", response.headers, None)
                else:
                    return response
            cause, transient = _cause(failure, missing)
            if attempts > 1:
                cause = "%s (after %d attempts)" % (cause, attempts)
            error = _TransientImageError if transient else ImageError
            raise error("Failed to %s '%s': %s." % (action, subject, cause))

        return retrying(attempt, ImageError, self.retries, self.retry_delay, self._sleep,
                        accept=lambda exc: isinstance(exc, _TransientImageError))

    def _answer_challenge(self, exc, repository, scopes, action, subject):
        scheme, params = parse_challenge(exc.headers.get("WWW-Authenticate") if exc.headers else None)
        try:
            if scheme == "bearer":
                self._bearer = dict(realm=params.get("realm"), service=params.get("service"))
                wanted = list(scopes)
                if params.get("scope") and params["scope"] not in wanted:
                    wanted.append(params["scope"])
                self._tokens.pop(" ".join(scopes), None)
                token = self._token(params, repository, wanted)
                self._tokens[" ".join(scopes)] = token
                return
        except ImageError as failure:
            raise ImageError("Failed to %s '%s': %s." % (action, subject, failure.msg.rstrip("."))) from None
        if scheme == "basic" and self._login(repository):
            self._basic = True
            return
        if not self._login(repository):
            raise ImageError("Failed to %s '%s': the registry requires credentials and none apply to the image "
                             "(unauthorized)." % (action, subject))
        raise ImageError("Failed to %s '%s': the registry refused the credentials (unauthorized)." % (action, subject))

    # ------------------------------------------------------------------
    # manifests

    def _subject(self, repository, reference):
        joint = "@" if is_digest(reference) else ":"
        return "%s/%s%s%s" % (self.registry, repository, joint, reference)

    def get_manifest(self, repository, reference, action="read the manifest of"):
        """GET a manifest by tag or digest -> ``(raw bytes, media type, digest)``.

        By digest, the bytes served must hash to it.
        """
        subject = self._subject(repository, reference)
        response = self.request("GET", "/v2/%s/manifests/%s" % (repository, reference), action, subject, repository,
                                headers={"Accept": MANIFEST_ACCEPT})
        raw = response.read()
        digest = sha256_digest(raw)
        if is_digest(reference) and digest != reference:
            raise ImageError("Failed to %s '%s': the manifest the registry served hashes to %s." % (
                action, subject, digest))
        media_type = (response.headers.get("Content-Type") or "").split(";")[0].strip()
        return raw, media_type, digest

    def head_manifest(self, repository, reference, action="look up the manifest of"):
        """HEAD a manifest -> ``{digest, media_type, size}``, or None when the registry has none."""
        subject = self._subject(repository, reference)
        response = self.request("HEAD", "/v2/%s/manifests/%s" % (repository, reference), action, subject,
                                repository, headers={"Accept": MANIFEST_ACCEPT}, ok=(200, 404))
        if response.status == 404 or getattr(response, "code", 200) == 404:
            return None
        headers = response.headers
        return dict(digest=headers.get("Docker-Content-Digest"),
                    media_type=(headers.get("Content-Type") or "").split(";")[0].strip() or None,
                    size=int(headers.get("Content-Length") or 0))

    def put_manifest(self, repository, reference, raw, media_type, action="push the manifest of"):
        """PUT a manifest under a tag or its digest -> its digest (checked against the registry's)."""
        subject = self._subject(repository, reference)
        digest = sha256_digest(raw)
        response = self.request("PUT", "/v2/%s/manifests/%s" % (repository, reference), action, subject, repository,
                                headers={"Content-Type": media_type}, data=raw, ok=(201, 200),
                                scopes=["repository:%s:pull,push" % repository])
        served = response.headers.get("Docker-Content-Digest")
        if served and served != digest:
            raise ImageError("Failed to %s '%s': the registry stored it as %s, not %s." % (
                action, subject, served, digest))
        return digest

    def list_tags(self, repository, page=TAGS_PAGE):
        """GET ``/v2/REPOSITORY/tags/list``, following the ``Link`` header page after page -> the tags, in order."""
        subject = "%s/%s" % (self.registry, repository)
        path = "/v2/%s/tags/list?%s" % (repository, urlencode([("n", page)]))
        tags, seen = [], set()
        while path and path not in seen:
            seen.add(path)
            response = self.request("GET", path, "list the tags of", subject, repository,
                                    missing="the registry has no such repository (name unknown)")
            try:
                document = json.loads(response.read().decode("utf-8"))
            except (UnicodeDecodeError, ValueError):
                raise ImageError("Failed to list the tags of '%s': the registry answered no JSON." % subject) from None
            found = document.get("tags") if isinstance(document, dict) else None
            tags += [tag for tag in found or [] if isinstance(tag, str)]
            match = _NEXT_LINK_RE.search(response.headers.get("Link") or "")
            path = match.group(1) if match else None
        return tags

    # ------------------------------------------------------------------
    # blobs

    def has_blob(self, repository, digest):
        """HEAD a blob: True when the repository has it."""
        response = self.request("HEAD", "/v2/%s/blobs/%s" % (repository, digest), "look up blob %s in" % digest,
                                "%s/%s" % (self.registry, repository), repository, ok=(200, 404))
        return response.status == 200 and getattr(response, "code", 200) == 200

    def open_blob(self, repository, digest):
        """GET a blob -> a :class:`VerifiedReader` of its bytes (the digest is checked at its end)."""
        subject = "%s/%s@%s" % (self.registry, repository, digest)
        response = self.request("GET", "/v2/%s/blobs/%s" % (repository, digest), "read blob", subject, repository,
                                missing="the registry has no such blob (blob unknown)")
        return VerifiedReader(response, digest, subject)

    def get_blob(self, repository, digest):
        """GET a (small) blob -> its bytes, checked against ``digest``."""
        reader = self.open_blob(repository, digest)
        data = reader.read()
        reader.verify()
        return data

    def mount_blob(self, repository, digest, from_repository):
        """Cross-repository mount -> None when mounted, else the upload location the registry opened."""
        query = urlencode([("mount", digest), ("from", from_repository)])
        response = self.request(
            "POST", "/v2/%s/blobs/uploads/?%s" % (repository, query), "mount blob %s from '%s' into" % (
                digest, from_repository), "%s/%s" % (self.registry, repository), repository, ok=(201, 202),
            scopes=["repository:%s:pull,push" % repository, "repository:%s:pull" % from_repository],
            headers={"Content-Length": "0"}, data=b"")
        if response.status == 201 or getattr(response, "code", None) == 201:
            return None
        return response.headers.get("Location")

    def upload_blob(self, repository, digest, data, size, location=None):
        """Monolithic upload (``POST``, unless ``location`` is an open session, then ``PUT ?digest=``)."""
        subject = "%s/%s" % (self.registry, repository)
        action = "upload blob %s to" % digest
        scopes = ["repository:%s:pull,push" % repository]
        if location is None:
            response = self.request("POST", "/v2/%s/blobs/uploads/" % repository, action, subject, repository,
                                    ok=(202,), scopes=scopes, headers={"Content-Length": "0"}, data=b"")
            location = response.headers.get("Location")
        if not location:
            raise ImageError("Failed to %s '%s': the registry opened no upload location." % (action, subject))
        url = urljoin(self.base + "/", location)
        url += ("&" if "?" in url else "?") + urlencode([("digest", digest)])
        self.request("PUT", url, action, subject, repository, ok=(201,), scopes=scopes, data=data,
                     headers={"Content-Type": "application/octet-stream", "Content-Length": str(size)})


class VerifiedReader:
    """A blob response read in chunks, hashing as it goes; :meth:`verify` checks the digest at the end."""

    def __init__(self, response, digest, subject):
        self._response = response
        self._hash = hashlib.sha256()
        self.digest = digest
        self.subject = subject
        self.size = 0

    def read(self, size=-1):
        data = self._response.read() if size is None or size < 0 else self._response.read(size)
        self._hash.update(data)
        self.size += len(data)
        return data

    def verify(self):
        """Read what is left, then raise ImageError unless the bytes hash to the digest."""
        while self.read(CHUNK):
            pass
        got = "sha256:" + self._hash.hexdigest()
        if got != self.digest:
            raise ImageError("Failed to read blob '%s': its bytes hash to %s." % (self.subject, got))


def copy_blob(target, repository, digest, size, source, from_repository):
    """Get blob ``digest`` into ``target``'s ``repository`` once -> a :class:`BlobCopy` value.

    A blob the repository has is skipped (HEAD first); on the same registry it is mounted
    from ``from_repository``; when the registry answers the mount with an upload session
    instead (or the source is another registry) the blob is read from ``source`` once,
    spooled to a private temporary file, verified and uploaded.
    """
    if target.has_blob(repository, digest):
        return BlobCopy.SKIPPED
    location = None
    if source.registry == target.registry:
        location = target.mount_blob(repository, digest, from_repository)
        if location is None:
            return BlobCopy.MOUNTED
    reader = source.open_blob(from_repository, digest)
    with tempfile.SpooledTemporaryFile(max_size=SPOOL_MAX) as spool:
        chunk = reader.read(CHUNK)
        while chunk:
            spool.write(chunk)
            chunk = reader.read(CHUNK)
        reader.verify()
        target.upload_blob(repository, digest, spool, reader.size, location=location)
    return BlobCopy.UPLOADED


def push_blob(target, repository, data):
    """Upload bytes (a config) unless the repository has them -> (digest, a :class:`BlobCopy` value)."""
    digest = sha256_digest(data)
    if target.has_blob(repository, digest):
        return digest, BlobCopy.SKIPPED
    target.upload_blob(repository, digest, data, len(data))
    return digest, BlobCopy.UPLOADED


# --------------------------------------------------------------------------
# reading images as skopeo does, in this process

OCI_LAYOUT = {"imageLayoutVersion": "1.0.0"}


class ImageReader:
    """Reads images as ``_skopeo.Skopeo`` does, with this module's client, in the process that runs it.

    The same methods and results as Skopeo's ``inspect_raw``, ``inspect`` (``Digest``, ``Labels``,
    ``Architecture``, ``Os``, ``Layers``), ``inspect_config`` and ``copy`` into an ``oci:DIR:TAG``
    layout, so that ``_skopeo.resolve`` and ``_pull`` take either: os_image_pull on the controller
    (the local connection) needs no skopeo. ``auths`` (an ``_auth.Auths`` or None) are the credentials;
    the methods' ``auth_file`` is not read. A manifest named by its digest and a configuration are read once.
    """

    def __init__(self, auths=None, retries=0, retry_delay=5, sleep=None, scheme="https"):
        self.auths = auths
        self.retries = retries
        self.retry_delay = retry_delay
        self._sleep = sleep
        self._scheme = scheme
        self._clients = {}
        self._configs = {}
        self._pinned = {}  # (registry, repository, digest) -> the manifest's bytes: a digest names them for good

    @property
    def secrets(self):
        """Every token the registries' token services gave (for the result's censoring)."""
        found = set()
        for client in self._clients.values():
            found.update(client.secrets)
        return found

    def _target(self, image, cert_dir, tls_verify):
        """-> (repository, the tag or digest, the client for the image's registry)."""
        ref = parse(image)
        key = (ref.registry, cert_dir, bool(tls_verify))
        if key not in self._clients:
            self._clients[key] = Registry(ref.registry, auths=self.auths, cert_dir=cert_dir, validate_certs=tls_verify,
                                          retries=self.retries, retry_delay=self.retry_delay, sleep=self._sleep,
                                          scheme=self._scheme)
        return ref.canonical_name.split("/", 1)[1], ref.digest or ref.tag or "latest", self._clients[key]

    def inspect_raw(self, image, auth_file=None, cert_dir=None, tls_verify=True, action="read the manifest of"):
        """The manifest's bytes exactly as the registry served them (no blob is read)."""
        repository, reference, client = self._target(image, cert_dir, tls_verify)
        return client.get_manifest(repository, reference, action="%s image" % action)[0]

    def _manifest(self, image, cert_dir, tls_verify, action):
        """-> (the image manifest as a document, its bytes, its digest, repository, client); an index is refused."""
        repository, reference, client = self._target(image, cert_dir, tls_verify)
        key = (client.registry, repository, reference)
        if key in self._pinned:
            raw, digest = self._pinned[key], reference
        else:
            raw, dummy, digest = client.get_manifest(repository, reference, action="%s image" % action)
            if is_digest(reference):
                self._pinned[key] = raw
        try:
            described = describe_manifest(raw)
        except ImageError as exc:
            raise ImageError("Failed to %s image '%s': the registry served no image manifest (%s)." % (
                action, image, exc.msg.split(": ", 1)[-1].rstrip("."))) from None
        if described["index"]:
            raise ImageError("Failed to %s image '%s': it names a multi-architecture index, not one platform's "
                             "manifest." % (action, image))
        document = json.loads(raw.decode("utf-8"))
        config = document.get("config") if isinstance(document.get("config"), dict) else {}
        if not is_digest(config.get("digest")):
            raise ImageError("Failed to %s image '%s': its manifest names no configuration digest." % (action, image))
        return document, raw, digest, repository, client

    def _config(self, image, document, repository, client, action):
        digest = document["config"]["digest"]
        if digest not in self._configs:
            try:
                config = json.loads(client.get_blob(repository, digest).decode("utf-8"))
            except (UnicodeDecodeError, ValueError):
                config = None
            if not isinstance(config, dict):
                raise ImageError("Failed to %s image '%s': its configuration %s is not a JSON object." % (
                    action, image, digest))
            self._configs[digest] = config
        return self._configs[digest]

    def inspect(self, image, auth_file=None, cert_dir=None, tls_verify=True):
        """What ``skopeo inspect --no-tags`` prints that the collection reads, from the manifest and its config."""
        document, dummy, digest, repository, client = self._manifest(image, cert_dir, tls_verify, "inspect")
        config = self._config(image, document, repository, client, "inspect")
        layers = document.get("layers") if isinstance(document.get("layers"), list) else []
        return {"Digest": digest, "Labels": (config.get("config") or {}).get("Labels"),
                "Architecture": config.get("architecture"), "Os": config.get("os"),
                "Layers": [layer.get("digest") for layer in layers if isinstance(layer, dict)]}

    def inspect_config(self, image, auth_file=None, cert_dir=None, tls_verify=True):
        """The image's OCI configuration, as ``skopeo inspect --config`` prints it."""
        document, dummy, dummy, repository, client = self._manifest(image, cert_dir, tls_verify,
                                                                    "inspect the configuration of")
        return self._config(image, document, repository, client, "inspect the configuration of")

    def copy(self, image, destination, auth_file=None, cert_dir=None, tls_verify=True):
        """Copy the image into the OCI layout ``oci:DIR:TAG``: each blob it lacks (verified, then renamed into
        place), the manifest, and ``index.json`` with the entry for TAG (written whole, then renamed)."""
        directory, dummy, tag = destination[len("oci:"):].rpartition(":")
        document, raw, digest, repository, client = self._manifest(image, cert_dir, tls_verify, "pull")
        layers = document.get("layers") if isinstance(document.get("layers"), list) else []
        wanted = [document["config"]["digest"]] + [layer.get("digest") for layer in layers if isinstance(layer, dict)]
        bad = [str(blob) for blob in wanted if not is_digest(blob)]
        if bad:
            raise ImageError("Failed to pull image '%s': its manifest names an invalid blob digest %s." % (
                image, bad[0][:80]))
        try:
            for blob in wanted:
                path = os.path.join(directory, "blobs", *blob.split(":", 1))
                if not os.path.exists(path):
                    _write_verified(path, client.open_blob(repository, blob))
            _write_file(os.path.join(directory, "blobs", *digest.split(":", 1)), raw)
            layout = os.path.join(directory, "oci-layout")
            if not os.path.exists(layout):
                _write_file(layout, json.dumps(OCI_LAYOUT).encode("utf-8"))
            _write_file(os.path.join(directory, "index.json"), _layout_index(directory, dict(
                mediaType=describe_manifest(raw)["media_type"], digest=digest, size=len(raw),
                annotations={REF_NAME: tag})))
        except OSError as exc:
            raise ImageError("Failed to pull image '%s': cannot write the OCI layout '%s': %s." % (
                image, directory, exc.strerror or exc)) from None


def _layout_index(directory, entry):
    """The bytes of the layout's ``index.json`` with ``entry`` in place of any entry of the same ref name."""
    try:
        with open(os.path.join(directory, "index.json"), "rb") as handle:
            data = handle.read()
    except OSError:
        data = None
    return OciIndex.parse(data).with_entry(entry)


def _place(path, fill):
    """Make ``path`` whole or not at all: ``fill(handle)`` writes a file beside it, renamed into place (0644)."""
    os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
    place_file(path, fill, mode=0o644, prefix=".tmp-")


def _write_file(path, data):
    _place(path, lambda handle: handle.write(data))


def _write_verified(path, reader):
    """A blob's bytes into ``path`` as they are read; its digest is checked before it is renamed into place."""

    def fill(handle):
        chunk = reader.read(CHUNK)
        while chunk:
            handle.write(chunk)
            chunk = reader.read(CHUNK)
        reader.verify()

    _place(path, fill)
