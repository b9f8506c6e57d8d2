# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""_registry: the OCI distribution client against a small registry served on 127.0.0.1 by the test."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import shutil
import ssl
import subprocess
import tempfile
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from ansible_collections.fleetos.layering.plugins.module_utils._errors import ImageError
from ansible_collections.fleetos.layering.plugins.module_utils.images import _registry
from ansible_collections.fleetos.layering.plugins.module_utils.images._auth import from_pull_secret

USER, PASSWORD = "robot", "s3cret$pass"
TOKEN = "tok-" + "z" * 20
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"


def sha(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


_CERTIFICATE = {}


def server_context(directory):
    """A TLS server context with a self-signed certificate for 127.0.0.1 (made once), its ca.crt in ``directory``."""
    if not _CERTIFICATE:
        made = Path(tempfile.mkdtemp(prefix="fake-registry-tls-"))
        key, crt = made / "server.key", made / "server.pem"
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-sha256", "-days", "2",
                        "-subj", "/CN=fake registry", "-addext", "subjectAltName=IP:127.0.0.1",
                        "-addext", "basicConstraints=critical,CA:TRUE", "-keyout", str(key), "-out", str(crt)],
                       check=True, capture_output=True)
        _CERTIFICATE.update(key=key.read_bytes(), crt=crt.read_bytes())
        shutil.rmtree(str(made))
    key, crt = directory / "server.key", directory / "server.pem"
    key.write_bytes(_CERTIFICATE["key"])
    crt.write_bytes(_CERTIFICATE["crt"])
    certs = directory / "certs.d"
    certs.mkdir()
    (certs / "ca.crt").write_bytes(_CERTIFICATE["crt"])
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(crt), str(key))
    return context


class FakeRegistry:
    """Just enough of the distribution API: manifests, blobs, mounts, uploads, Basic or Bearer auth."""

    def __init__(self, auth="bearer", mount=True, tls_dir=None):
        self.auth = auth
        self.mount = mount
        self.manifests = {}  # (repo, reference) -> (bytes, media type)
        self.blobs = {}  # (repo, digest) -> bytes
        self.uploads = {}
        self.requests = []
        self.token_requests = []
        self.fail = []  # statuses to answer first, one per request
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.scheme = "http"
        if tls_dir is not None:
            self.scheme = "https"
            self.server.socket = server_context(tls_dir).wrap_socket(self.server.socket, server_side=True)
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()
        self.address = "127.0.0.1:%d" % self.server.server_address[1]

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def add_manifest(self, repo, tag, raw, media_type=OCI_MANIFEST):
        self.manifests[(repo, tag)] = (raw, media_type)
        self.manifests[(repo, sha(raw))] = (raw, media_type)

    def _handler(self):
        registry = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, status, body=b"", headers=None):
                self.send_response(status)
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def _authorized(self):
                header = self.headers.get("Authorization") or ""
                if registry.auth == "none":
                    return True
                if registry.auth == "bearer":
                    return header == "Bearer " + TOKEN
                return header == "Basic " + base64.b64encode(("%s:%s" % (USER, PASSWORD)).encode()).decode()

            def _challenge(self, scope):
                if registry.auth == "bearer":
                    value = 'Bearer realm="%s://%s/token",service="fake",scope="%s"' % (
                        registry.scheme, registry.address, scope)
                else:
                    value = 'Basic realm="fake"'
                self._send(401, b'{"errors":[{"code":"UNAUTHORIZED"}]}', {"WWW-Authenticate": value})

            def _body(self):
                length = int(self.headers.get("Content-Length") or 0)
                return self.rfile.read(length) if length else b""

            def _tags(self, repo, query):
                """tags/list, sorted, ``n`` per page with a ``Link`` to the next page after ``last``."""
                if not self._authorized():
                    return self._challenge("repository:%s:pull" % repo)
                tags = sorted(ref for (name, ref) in registry.manifests if name == repo and not ref.startswith("sha256:"))
                if not tags:
                    return self._send(404, b'{"errors":[{"code":"NAME_UNKNOWN"}]}')
                tags = [tag for tag in tags if tag > query.get("last", [""])[0]]
                size = int(query.get("n", [len(tags) or 1])[0])
                headers = {"Content-Type": "application/json"}
                if len(tags) > size:
                    headers["Link"] = '</v2/%s/tags/list?last=%s&n=%d>; rel="next"' % (repo, tags[size - 1], size)
                return self._send(200, json.dumps({"name": repo, "tags": tags[:size]}).encode(), headers)

            def handle_one(self):
                url = urlsplit(self.path)
                registry.requests.append((self.command, url.path, bool(self.headers.get("Authorization"))))
                if url.path == "/token":
                    registry.token_requests.append(parse_qs(url.query))
                    header = self.headers.get("Authorization") or ""
                    expected = "Basic " + base64.b64encode(("%s:%s" % (USER, PASSWORD)).encode()).decode()
                    if header != expected:
                        return self._send(401)
                    return self._send(200, json.dumps({"token": TOKEN}).encode())
                if registry.fail:
                    return self._send(registry.fail.pop(0))
                if url.path == "/v2/":
                    # The version check a client such as skopeo makes first.
                    return self._send(200, b"{}") if self._authorized() else self._challenge("")
                listing = re.match(r"^/v2/(.+)/tags/list$", url.path)
                if listing:
                    return self._tags(listing.group(1), parse_qs(url.query))
                match = re.match(r"^/v2/(.+)/(manifests|blobs)/(uploads/)?(.*)$", url.path)
                if not match:
                    return self._send(404)
                repo, kind, upload, rest = match.groups()
                if not self._authorized():
                    return self._challenge("repository:%s:pull" % repo)
                body = self._body() if self.command in ("PUT", "POST") else b""
                if kind == "manifests":
                    if self.command == "PUT":
                        registry.add_manifest(repo, rest, body, self.headers.get("Content-Type"))
                        return self._send(201, headers={"Docker-Content-Digest": sha(body)})
                    if (repo, rest) not in registry.manifests:
                        return self._send(404, b'{"errors":[{"code":"MANIFEST_UNKNOWN"}]}')
                    raw, media_type = registry.manifests[(repo, rest)]
                    return self._send(200, raw, {"Content-Type": media_type, "Docker-Content-Digest": sha(raw)})
                if upload is not None:
                    query = parse_qs(url.query)
                    if self.command == "POST":
                        if "mount" in query and registry.mount and (query["from"][0], query["mount"][0]) in registry.blobs:
                            registry.blobs[(repo, query["mount"][0])] = registry.blobs[(query["from"][0],
                                                                                       query["mount"][0])]
                            return self._send(201, headers={"Location": "/v2/%s/blobs/%s" % (repo, query["mount"][0])})
                        session = uuid.uuid4().hex
                        registry.uploads[session] = repo
                        return self._send(202, headers={"Location": "/v2/%s/blobs/uploads/%s?_state=x" % (repo, session)})
                    if self.command == "PUT" and rest in registry.uploads:
                        digest = query["digest"][0]
                        if sha(body) != digest:
                            return self._send(400, b'{"errors":[{"code":"DIGEST_INVALID"}]}')
                        registry.blobs[(repo, digest)] = body
                        return self._send(201, headers={"Docker-Content-Digest": digest})
                    return self._send(404)
                if (repo, rest) not in registry.blobs:
                    return self._send(404, b'{"errors":[{"code":"BLOB_UNKNOWN"}]}')
                return self._send(200, registry.blobs[(repo, rest)])

            do_GET = do_HEAD = do_PUT = do_POST = handle_one

        return Handler


@pytest.fixture
def fake():
    registry = FakeRegistry()
    yield registry
    registry.close()


def client(fake_registry, auth=True, **kwargs):
    auths = from_pull_secret({"auths": {fake_registry.address: {"username": USER, "password": PASSWORD}}}) if auth else None
    return _registry.Registry(fake_registry.address, auths=auths, scheme="http", sleep=lambda s: None, **kwargs)


MANIFEST = json.dumps({"schemaVersion": 2, "mediaType": OCI_MANIFEST, "config": {}, "layers": []}).encode()


def test_bearer_flow_gets_a_token_with_the_credentials_and_reuses_it(fake):
    fake.add_manifest("os/base", "1.0", MANIFEST)
    registry = client(fake)
    raw, media_type, digest = registry.get_manifest("os/base", "1.0")
    assert (raw, media_type, digest) == (MANIFEST, OCI_MANIFEST, sha(MANIFEST))
    assert registry.get_manifest("os/base", digest)[2] == digest
    assert fake.token_requests[0] == {"service": ["fake"], "scope": ["repository:os/base:pull"]}
    # one 401, then authorized requests only; a new scope gets its token without another 401
    assert registry.has_blob("os/other", sha(b"x")) is False
    assert [r[2] for r in fake.requests if r[1] != "/token"] == [False, True, True, True]
    assert fake.token_requests[1] == {"service": ["fake"], "scope": ["repository:os/other:pull"]}
    assert registry.secrets == {TOKEN}


def test_bearer_without_credentials_is_refused_in_one_sentence_without_secrets(fake):
    fake.add_manifest("os/base", "1.0", MANIFEST)
    with pytest.raises(ImageError) as raised:
        client(fake, auth=False).get_manifest("os/base", "1.0")
    assert raised.value.msg == ("Failed to read the manifest of '%s/os/base:1.0': the registry's token service "
                                "requires credentials and none apply to the image (unauthorized)." % fake.address)


def test_basic_auth_is_sent_after_the_challenge(fake):
    fake.auth = "basic"
    fake.blobs[("os/base", sha(b"config"))] = b"config"
    registry = client(fake)
    assert registry.get_blob("os/base", sha(b"config")) == b"config"
    assert registry.has_blob("os/base", sha(b"config")) is True
    assert fake.token_requests == []
    assert [r[2] for r in fake.requests] == [False, True, True]


def test_wrong_password_never_appears_in_the_message(fake):
    fake.auth = "basic"
    auths = from_pull_secret({"auths": {fake.address: {"username": USER, "password": "wrong-pass"}}})
    registry = _registry.Registry(fake.address, auths=auths, scheme="http")
    with pytest.raises(ImageError) as raised:
        registry.get_manifest("os/base", "1.0")
    assert "wrong-pass" not in raised.value.msg and "unauthorized" in raised.value.msg


def test_a_manifest_that_does_not_hash_to_its_digest_is_refused(fake):
    fake.manifests[("os/base", "sha256:" + "0" * 64)] = (MANIFEST, OCI_MANIFEST)
    with pytest.raises(ImageError, match="hashes to %s" % sha(MANIFEST)):
        client(fake).get_manifest("os/base", "sha256:" + "0" * 64)


def test_head_manifest_and_missing_ones(fake):
    fake.add_manifest("os/base", "1.0", MANIFEST)
    registry = client(fake)
    assert registry.head_manifest("os/base", "1.0") == {
        "digest": sha(MANIFEST), "media_type": OCI_MANIFEST, "size": len(MANIFEST)}
    assert registry.head_manifest("os/base", "2.0") is None
    with pytest.raises(ImageError) as raised:
        registry.get_manifest("os/base", "2.0")
    assert raised.value.msg == ("Failed to read the manifest of '%s/os/base:2.0': the registry has no such image "
                                "(manifest unknown)." % fake.address)


def test_transient_failures_are_retried_and_permanent_ones_are_not(fake):
    fake.add_manifest("os/base", "1.0", MANIFEST)
    registry = client(fake, retries=2)
    fake.fail = [503, 502]
    assert registry.get_manifest("os/base", "1.0")[0] == MANIFEST
    fake.fail = [503, 503, 503]
    with pytest.raises(ImageError) as raised:
        client(fake, retries=2).get_manifest("os/base", "1.0")
    assert raised.value.msg.endswith("the registry answered with a server error (HTTP 503) (after 3 attempts).")
    fake.fail = [403]
    with pytest.raises(ImageError, match=r"denied access \(denied\)\.$"):
        registry.get_manifest("os/base", "1.0")
    assert fake.fail == []


def test_unreachable_registry_is_named():
    registry = _registry.Registry("127.0.0.1:9", scheme="http", retries=1, sleep=lambda s: None)
    with pytest.raises(ImageError) as raised:
        registry.get_manifest("os/base", "1.0")
    assert raised.value.msg == ("Failed to read the manifest of '127.0.0.1:9/os/base:1.0': the registry is "
                                "unreachable (connection refused) (after 2 attempts).")


def test_copy_blob_mounts_skips_and_falls_back_to_upload(fake):
    data = b"layer bytes" * 1000
    digest = sha(data)
    fake.blobs[("os/kubelet", digest)] = data
    registry = client(fake)
    assert _registry.copy_blob(registry, "os/worker", digest, len(data), registry, "os/kubelet") == "mounted"
    assert fake.blobs[("os/worker", digest)] == data
    assert _registry.copy_blob(registry, "os/worker", digest, len(data), registry, "os/kubelet") == "skipped"
    # A registry that answers the mount with an upload session (202): the blob is read once and uploaded there.
    fake.mount = False
    assert _registry.copy_blob(registry, "os/other", digest, len(data), registry, "os/kubelet") == "uploaded"
    assert fake.blobs[("os/other", digest)] == data
    assert [r for r in fake.requests if r[0] == "GET" and r[1].endswith(digest)] == [
        ("GET", "/v2/os/kubelet/blobs/" + digest, True)]
    posts = [r[1] for r in fake.requests if r[0] == "POST"]
    assert posts[-1] == "/v2/os/other/blobs/uploads/"  # the mount attempt; its session is used for the PUT
    assert len([r for r in fake.requests if r[0] == "POST" and r[1] == "/v2/os/other/blobs/uploads/"]) == 1
    # The token asked for covers the push and the pull from the source repository.
    assert {"scope": ["repository:os/worker:pull,push", "repository:os/kubelet:pull"],
            "service": ["fake"]} in fake.token_requests


def test_copy_between_registries_uploads_without_mounting():
    source, target = FakeRegistry(auth="none"), FakeRegistry(auth="basic")
    try:
        data = b"x" * 5000
        source.blobs[("os/kubelet", sha(data))] = data
        how = _registry.copy_blob(client(target), "os/worker", sha(data), len(data), client(source), "os/kubelet")
        assert how == "uploaded" and target.blobs[("os/worker", sha(data))] == data
        assert not [r for r in target.requests if r[0] == "POST" and "mount" in r[1]]
    finally:
        source.close()
        target.close()


def test_push_blob_and_put_manifest(fake):
    registry = client(fake)
    digest, how = _registry.push_blob(registry, "os/worker", b"{}")
    assert (digest, how) == (sha(b"{}"), "uploaded")
    assert _registry.push_blob(registry, "os/worker", b"{}") == (sha(b"{}"), "skipped")
    assert registry.put_manifest("os/worker", "v1", MANIFEST, OCI_MANIFEST) == sha(MANIFEST)
    assert fake.manifests[("os/worker", "v1")] == (MANIFEST, OCI_MANIFEST)


def test_a_blob_whose_bytes_do_not_match_is_refused(fake):
    fake.blobs[("os/base", "sha256:" + "1" * 64)] = b"other bytes"
    with pytest.raises(ImageError, match="its bytes hash to %s" % sha(b"other bytes")):
        client(fake).get_blob("os/base", "sha256:" + "1" * 64)


@pytest.mark.parametrize("header, expected", [
    ('Bearer realm="https://auth.example/token",service="registry.example",scope="repository:a/b:pull"',
     ("bearer", {"realm": "https://auth.example/token", "service": "registry.example", "scope": "repository:a/b:pull"})),
    ('Basic realm="Registry Realm"', ("basic", {"realm": "Registry Realm"})),
    (None, ("", {})),
])
def test_parse_challenge(header, expected):
    assert _registry.parse_challenge(header) == expected


def test_tls_with_the_cert_dir_and_refused_without_it(tmp_path):
    fake = FakeRegistry(tls_dir=tmp_path)
    try:
        fake.add_manifest("os/base", "1.0", MANIFEST)
        auths = from_pull_secret({"auths": {fake.address: {"username": USER, "password": PASSWORD}}})
        registry = _registry.Registry(fake.address, auths=auths, cert_dir=str(tmp_path / "certs.d"))
        assert registry.get_manifest("os/base", "1.0")[0] == MANIFEST
        with pytest.raises(ImageError) as raised:
            _registry.Registry(fake.address, auths=auths).get_manifest("os/base", "1.0")
        assert raised.value.msg.endswith("the registry's TLS certificate is not trusted (unknown CA or wrong "
                                         "certificate).")
        insecure = _registry.Registry(fake.address, auths=auths, validate_certs=False)
        assert insecure.get_manifest("os/base", "1.0")[0] == MANIFEST
    finally:
        fake.close()


def test_basic_credentials_go_to_every_repository_once_asked(fake):
    fake.auth = "basic"
    fake.add_manifest("os/base", "1.0", MANIFEST)
    fake.add_manifest("os/kubelet", "1.0", MANIFEST)
    registry = client(fake)
    registry.get_manifest("os/base", "1.0")
    registry.get_manifest("os/kubelet", "1.0")
    assert [r[2] for r in fake.requests] == [False, True, True]


def test_list_tags_follows_the_next_link_page_after_page(fake):
    for tag in ("1.0", "1.1", "2.0"):
        fake.add_manifest("os/base", tag, MANIFEST.replace(b"[]", b'[{"t":"%s"}]' % tag.encode()))
    registry = client(fake)
    assert registry.list_tags("os/base", page=2) == ["1.0", "1.1", "2.0"]
    assert [r[1] for r in fake.requests if r[1].endswith("/tags/list") and r[2]] == ["/v2/os/base/tags/list"] * 2
    with pytest.raises(ImageError) as raised:
        registry.list_tags("os/none")
    assert raised.value.msg == ("Failed to list the tags of '%s/os/none': the registry has no such repository "
                                "(name unknown)." % fake.address)
