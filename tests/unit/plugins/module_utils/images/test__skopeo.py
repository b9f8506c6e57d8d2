# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The skopeo client and the resolver: exact argv, environment, manifests, retries and error messages."""

from __future__ import annotations

import hashlib
import json

import pytest

from ansible_collections.fleetos.layering.tests.unit.plugins.module_utils.utils import FakeModule, LocalHost
from ansible_collections.fleetos.layering.plugins.module_utils.images import _skopeo
from ansible_collections.fleetos.layering.plugins.module_utils._errors import CommandError, ImageError, InvalidInputError
from ansible_collections.fleetos.layering.plugins.module_utils.host._host import Host
from ansible_collections.fleetos.layering.plugins.module_utils.images._image_ref import parse
from ansible_collections.fleetos.layering.plugins.module_utils.images._skopeo import (
    Skopeo,
    describe_failure,
    describe_manifest,
    is_transient,
    platform_digest,
    resolve,
)

IMAGE = "198.51.100.1:5000/fleetos/lab-os:1.0"
INSPECT = {"Name": "198.51.100.1:5000/fleetos/lab-os", "Digest": "sha256:" + "f" * 64,
           "Labels": {"version": "1.0"}, "Architecture": "amd64", "Layers": ["sha256:" + "7" * 64]}


def fake_module(results=None, found="/usr/bin/skopeo"):
    """A module whose skopeo is at /usr/bin/skopeo and answers ``results`` (by default: INSPECT, once)."""
    return FakeModule(results or [(0, json.dumps(INSPECT), "")], found)


SOURCE_OPTIONS = [
    ({}, []),
    ({"auth_file": "/tmp/x/auth.json"}, ["--authfile", "/tmp/x/auth.json"]),
    ({"cert_dir": "/etc/pki/reg"}, ["--cert-dir", "/etc/pki/reg"]),
    ({"tls_verify": False}, ["--tls-verify=false"]),
    ({"auth_file": "/a", "cert_dir": "/c", "tls_verify": False},
     ["--authfile", "/a", "--cert-dir", "/c", "--tls-verify=false"]),
]


@pytest.mark.parametrize(("kwargs", "options"), SOURCE_OPTIONS)
def test_inspect_argv(kwargs, options):
    module = fake_module()
    assert Skopeo(module).inspect(IMAGE, **kwargs) == INSPECT
    ((argv, run_kwargs),) = module.calls
    assert argv == ["/usr/bin/skopeo", "inspect", "--no-tags"] + options + ["--", "docker://" + IMAGE]
    assert run_kwargs == {"environ_update": {"LC_ALL": "C"}, "expand_user_and_vars": False}


@pytest.mark.parametrize(("kwargs", "options"), SOURCE_OPTIONS)
def test_inspect_config_argv(kwargs, options):
    config = {"config": {"Labels": {"ostree.commit": "abc"}}}
    module = fake_module([(0, json.dumps(config), "")])
    assert Skopeo(module).inspect_config(IMAGE, **kwargs) == config
    assert module.calls[0][0] == ["/usr/bin/skopeo", "inspect", "--config"] + options + ["--", "docker://" + IMAGE]


@pytest.mark.parametrize(("kwargs", "options"), [
    ({}, []),
    ({"auth_file": "/a", "cert_dir": "/c", "tls_verify": False},
     ["--src-authfile", "/a", "--src-cert-dir", "/c", "--src-tls-verify=false"]),
])
def test_copy_argv(kwargs, options):
    module = fake_module([(0, "", "")])
    Skopeo(module).copy(IMAGE, "oci:/cache:tag", **kwargs)
    ((argv, run_kwargs),) = module.calls
    assert argv == ["/usr/bin/skopeo", "copy", "--quiet", "--remove-signatures"] + options + ["--", "docker://" + IMAGE, "oci:/cache:tag"]
    assert run_kwargs["environ_update"] == {"LC_ALL": "C"}
    assert run_kwargs["expand_user_and_vars"] is False


@pytest.mark.parametrize(("executable", "lookup", "binary"), [
    (None, [("skopeo", False)], "/usr/bin/skopeo"),
    ("{tmp}/skopeo", [], "{tmp}/skopeo"),
    ("skopeo-1.9", [("skopeo-1.9", False)], "/usr/bin/skopeo"),
])
def test_binary(executable, lookup, binary, tmp_path):
    (tmp_path / "skopeo").write_text("#!/bin/sh\n")
    (tmp_path / "skopeo").chmod(0o755)
    module = fake_module()
    client = Skopeo(module, executable and executable.format(tmp=tmp_path))
    assert client.binary == binary.format(tmp=tmp_path)
    assert module.looked_up == lookup


@pytest.mark.parametrize(("kind", "make"), [
    ("missing", lambda path: None),
    ("a directory", lambda path: path.mkdir()),
    ("not executable", lambda path: path.write_text("#!/bin/sh\n")),
])
def test_an_executable_path_must_be_an_executable_file(tmp_path, kind, make):
    path = tmp_path / "skopeo"
    make(path)
    module = fake_module()
    with pytest.raises(InvalidInputError) as raised:
        Skopeo(module, str(path), option="skopeo_executable")
    assert raised.value.msg == ("skopeo_executable '%s' does not exist or is not an executable file: expected the "
                                "path of skopeo." % path)
    assert module.looked_up == []


def test_missing_binary():
    with pytest.raises(CommandError) as raised:
        Skopeo(fake_module(found=None))
    assert raised.value.msg == ("Failed to find the skopeo executable 'skopeo' on the target: install skopeo "
                                "or set executable.")


# Real skopeo 1.9 stderr lines as the lab registry produces them.
UNAUTHORIZED = ('time="2026-11-29T22:34:34Z" level=fatal msg="Error parsing image name \\"docker://%s\\": '
                'reading manifest 1.0 in 198.51.100.1:5000/fleetos/lab-os: unauthorized: authentication '
                'required"' % IMAGE)
UNKNOWN_CA = ('time="2026-11-29T22:34:34Z" level=fatal msg="Error parsing image name \\"docker://%s\\": pinging '
              'container registry 198.51.100.1:5000: Get \\"https://198.51.100.1:5000/v2/\\": x509: certificate '
              'signed by unknown authority"' % IMAGE)


@pytest.mark.parametrize(("stderr", "cause"), [
    (UNAUTHORIZED, "the registry refused the credentials (unauthorized)"),
    (UNKNOWN_CA, "the registry's TLS certificate is not trusted (unknown CA or wrong certificate)"),
    ('level=fatal msg="reading manifest 9.9 in r/os: manifest unknown: manifest unknown"',
     "the registry has no such image (manifest unknown)"),
    ('level=fatal msg="pinging container registry 198.51.100.1:5000: Get ...: dial tcp 198.51.100.1:5000: '
     'connect: connection refused"', "the registry is unreachable"),
    ('level=fatal msg="reading manifest 1.0 in r/os: received unexpected HTTP status: 503 Service Unavailable"',
     "the registry answered with a server error (HTTP 503)"),
    ('time="t" level=fatal msg="Get \\"https://r/v2/\\": net/http: TLS handshake timeout"',
     "the registry did not answer in time (timeout)"),
    ("first line\nsomething else went wrong\n", "something else went wrong"),
    ('time="2026-11-29T22:34:34Z" level=fatal msg="Error: \\"odd\\" failure"', 'Error: "odd" failure'),
    ("", "skopeo failed without a message"),
])
def test_describe_failure(stderr, cause):
    assert describe_failure(stderr) == cause


@pytest.mark.parametrize(("method", "args", "action"), [
    ("inspect", (IMAGE,), "inspect"),
    ("inspect_config", (IMAGE,), "inspect the configuration of"),
    ("copy", (IMAGE, "oci:/c:t"), "pull"),
])
def test_failure_raises_image_error_with_details(method, args, action):
    module = fake_module([(1, "", UNAUTHORIZED)])
    with pytest.raises(ImageError) as raised:
        getattr(Skopeo(module), method)(*args)
    assert raised.value.msg == ("Failed to %s image '%s': the registry refused the credentials (unauthorized)."
                                % (action, IMAGE))
    assert raised.value.details == {"cmd": module.calls[0][0], "rc": 1, "stdout": "", "stderr": UNAUTHORIZED}


def test_inspect_not_json():
    module = fake_module([(0, "not json", "")])
    with pytest.raises(ImageError) as raised:
        Skopeo(module).inspect(IMAGE)
    assert raised.value.msg == "Failed to inspect image '%s': skopeo printed no valid JSON." % IMAGE
    assert raised.value.details["stdout"] == "not json"


def test_missing_binary_names_the_option_that_sets_it():
    with pytest.raises(CommandError) as raised:
        Skopeo(fake_module(found=None), option="skopeo_executable")
    assert raised.value.msg.endswith("install skopeo or set skopeo_executable.")


# ---------------------------------------------------------------- manifests

def sha(raw):
    return "sha256:" + hashlib.sha256(raw).hexdigest()


AMD = "sha256:" + "a1" * 32
ARM = "sha256:" + "b2" * 32
ARM7 = "sha256:" + "c3" * 32
ATTEST = "sha256:" + "d4" * 32
WIN = "sha256:" + "e5" * 32
CONFIG = {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": "sha256:" + "9" * 64, "size": 2}
LAYERS = [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": "sha256:" + "8" * 64, "size": 9}]

# Raw bytes as registries serve them: the spacing is part of what the digest hashes.
OCI_INDEX = json.dumps({
    "schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
    "manifests": [
        {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": AMD, "size": 1,
         "platform": {"architecture": "amd64", "os": "linux"}},
        {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": ARM, "size": 1,
         "platform": {"architecture": "arm64", "os": "linux", "variant": "v8"}},
        {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": ATTEST, "size": 1,
         "platform": {"architecture": "unknown", "os": "unknown"},
         "annotations": {"vnd.docker.reference.type": "attestation-manifest"}},
    ]}, indent=3).encode()
DOCKER_LIST = json.dumps({
    "schemaVersion": 2, "mediaType": "application/vnd.docker.distribution.manifest.list.v2+json",
    "manifests": [
        {"mediaType": "application/vnd.docker.distribution.manifest.v2+json", "digest": AMD, "size": 1,
         "platform": {"architecture": "amd64", "os": "linux"}},
        {"mediaType": "application/vnd.docker.distribution.manifest.v2+json", "digest": ARM7, "size": 1,
         "platform": {"architecture": "arm", "os": "linux", "variant": "v7"}},
        {"mediaType": "application/vnd.docker.distribution.manifest.v2+json", "digest": WIN, "size": 1,
         "platform": {"architecture": "amd64", "os": "windows", "os.version": "10.0.17763.1"}},
    ]}).encode()
OCI_MANIFEST = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                           "config": CONFIG, "layers": LAYERS}, separators=(",", ":")).encode()
# An OCI manifest without mediaType (allowed by the image spec), with a trailing newline.
OCI_MANIFEST_BARE = (json.dumps({"schemaVersion": 2, "config": CONFIG, "layers": LAYERS}) + "\n").encode()
DOCKER_MANIFEST = json.dumps({"schemaVersion": 2,
                              "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
                              "config": dict(CONFIG, mediaType="application/vnd.docker.container.image.v1+json"),
                              "layers": LAYERS}, indent=2).encode()


@pytest.mark.parametrize(("raw", "media_type", "index", "manifests"), [
    (OCI_INDEX, "application/vnd.oci.image.index.v1+json", True, {"amd64": AMD, "arm64/v8": ARM}),
    (DOCKER_LIST, "application/vnd.docker.distribution.manifest.list.v2+json", True, {"amd64": AMD, "arm/v7": ARM7}),
    (OCI_MANIFEST, "application/vnd.oci.image.manifest.v1+json", False, {}),
    (OCI_MANIFEST_BARE, "application/vnd.oci.image.manifest.v1+json", False, {}),
    (DOCKER_MANIFEST, "application/vnd.docker.distribution.manifest.v2+json", False, {}),
])
def test_describe_manifest(raw, media_type, index, manifests):
    assert describe_manifest(raw) == {"digest": sha(raw), "media_type": media_type, "index": index,
                                      "manifests": manifests}


def test_the_digest_hashes_the_exact_bytes():
    reformatted = json.dumps(json.loads(OCI_MANIFEST), indent=1).encode()
    assert describe_manifest(reformatted)["digest"] != describe_manifest(OCI_MANIFEST)["digest"]


@pytest.mark.parametrize(("raw", "cause"), [
    (b"\x89PNG\r\n", "it is not JSON"),
    (b"<html>502 Bad Gateway</html>", "it is not JSON"),
    (b"[1, 2]", "it is not a JSON object"),
    (b'{"schemaVersion": 1, "name": "x", "fsLayers": []}', "it is a Docker schema 1 manifest, which is not supported"),
    (b'{"schemaVersion": 2, "mediaType": "application/vnd.oci.image.config.v1+json"}',
     "its media type 'application/vnd.oci.image.config.v1+json' is not an image manifest or index"),
    (b'{"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json"}',
     "the manifest has no 'layers' list"),
    (b'{"architecture": "amd64"}', "its schemaVersion is None, not 2"),
    (json.dumps({"schemaVersion": 2, "manifests": [{"digest": "sha256:12", "platform": {
        "architecture": "amd64", "os": "linux"}}]}).encode(), "its entry for amd64 has an invalid digest 'sha256:12'"),
])
def test_describe_manifest_refuses_what_is_not_a_manifest(raw, cause):
    with pytest.raises(ImageError) as raised:
        describe_manifest(raw)
    assert raised.value.msg == "The data is not an image manifest: %s." % cause


@pytest.mark.parametrize(("raw", "architecture", "digest"), [
    (OCI_INDEX, "amd64", AMD),
    (OCI_INDEX, "arm64", ARM),          # arm64 matches arm64/v8
    (OCI_INDEX, "arm64/v8", ARM),
    (OCI_INDEX, "ppc64le", None),
    (DOCKER_LIST, "arm/v7", ARM7),
    (DOCKER_LIST, "arm", ARM7),         # the only arm entry
    (DOCKER_LIST, "arm/v6", None),
    (OCI_MANIFEST, "s390x", sha(OCI_MANIFEST)),  # a plain manifest serves every architecture
])
def test_platform_digest(raw, architecture, digest):
    assert platform_digest(describe_manifest(raw), architecture) == digest


# ---------------------------------------------------------------- resolve

NAME = "198.51.100.1:5000/fleetos/lab-os"


def raw_argv(image, *options):
    return ["/usr/bin/skopeo", "inspect", "--raw"] + list(options) + ["--", "docker://" + image]


def test_inspect_raw_returns_the_bytes_unchanged():
    module = fake_module([(0, OCI_INDEX, b"")])
    assert Skopeo(module).inspect_raw(IMAGE, auth_file="/a", cert_dir="/c", tls_verify=False) == OCI_INDEX
    ((argv, kwargs),) = module.calls
    assert argv == raw_argv(IMAGE, "--authfile", "/a", "--cert-dir", "/c", "--tls-verify=false")
    assert kwargs == {"environ_update": {"LC_ALL": "C"}, "expand_user_and_vars": False, "encoding": None}


@pytest.mark.parametrize(("image", "raw", "architectures", "expected"), [
    (IMAGE, OCI_INDEX, ("amd64", "arm64"),
     {"image": NAME + "@" + sha(OCI_INDEX), "digest": sha(OCI_INDEX), "index": True,
      "media_type": "application/vnd.oci.image.index.v1+json", "manifests": {"amd64": AMD, "arm64/v8": ARM},
      "platform_digests": {"amd64": AMD, "arm64": ARM}, "annotations": {}}),
    (IMAGE, DOCKER_LIST, ("arm/v7",),
     {"image": NAME + "@" + sha(DOCKER_LIST), "digest": sha(DOCKER_LIST), "index": True,
      "media_type": "application/vnd.docker.distribution.manifest.list.v2+json",
      "manifests": {"amd64": AMD, "arm/v7": ARM7}, "platform_digests": {"arm/v7": ARM7}, "annotations": {}}),
    ("docker://" + IMAGE, DOCKER_MANIFEST, ("amd64", "arm64"),
     {"image": NAME + "@" + sha(DOCKER_MANIFEST), "digest": sha(DOCKER_MANIFEST), "index": False,
      "media_type": "application/vnd.docker.distribution.manifest.v2+json", "manifests": {},
      "platform_digests": {"amd64": sha(DOCKER_MANIFEST), "arm64": sha(DOCKER_MANIFEST)}, "annotations": {}}),
    ("ostree-unverified-registry:" + IMAGE, OCI_MANIFEST, (),
     {"image": NAME + "@" + sha(OCI_MANIFEST), "digest": sha(OCI_MANIFEST), "index": False,
      "media_type": "application/vnd.oci.image.manifest.v1+json", "manifests": {}, "platform_digests": {},
      "annotations": {}}),
])
def test_resolve(image, raw, architectures, expected):
    module = fake_module([(0, raw, b"")])
    assert resolve(Skopeo(module), image, architectures, auth_file="/a") == expected
    assert [call[0] for call in module.calls] == [raw_argv(IMAGE, "--authfile", "/a")]


def test_resolve_gives_the_manifests_own_annotations():
    raw = json.dumps(dict(json.loads(OCI_MANIFEST), annotations={"fleetos.io/inputs": "sha256:" + "1" * 64})).encode()
    resolved = resolve(Skopeo(fake_module([(0, raw, b"")])), IMAGE, ())
    assert resolved["annotations"] == {"fleetos.io/inputs": "sha256:" + "1" * 64}


@pytest.mark.parametrize("given", [NAME + "@%s", NAME + ":1.0@%s"])
def test_resolve_a_pinned_reference_reads_and_checks_the_manifest(given):
    digest = sha(OCI_INDEX)
    module = fake_module([(0, OCI_INDEX, b"")])
    result = resolve(Skopeo(module), given % digest, ("amd64",))
    # The tag is dropped: containers-image refuses a docker:// reference with both.
    assert [call[0] for call in module.calls] == [raw_argv(NAME + "@" + digest)]
    assert (result["image"], result["digest"], result["platform_digests"]) == (NAME + "@" + digest, digest,
                                                                               {"amd64": AMD})


def test_resolve_a_pinned_reference_whose_bytes_hash_otherwise_fails():
    other = "sha256:" + "0" * 64
    with pytest.raises(ImageError) as raised:
        resolve(Skopeo(fake_module([(0, OCI_MANIFEST, b"")])), NAME + "@" + other)
    assert raised.value.msg == ("Failed to resolve image '%s@%s': the manifest the registry served hashes to %s, "
                                "not to the digest the reference names." % (NAME, other, sha(OCI_MANIFEST)))
    assert raised.value.details == {"digest": sha(OCI_MANIFEST), "expected_digest": other}


def test_resolve_an_index_without_the_architecture_fails_naming_both():
    with pytest.raises(ImageError) as raised:
        resolve(Skopeo(fake_module([(0, OCI_INDEX, b"")])), IMAGE, ("amd64", "s390x"))
    assert raised.value.msg == ("Failed to resolve image '%s': its index has no linux entry for architecture s390x "
                                "(entries: amd64, arm64/v8)." % IMAGE)


def test_resolve_garbage_fails_in_one_sentence():
    with pytest.raises(ImageError) as raised:
        resolve(Skopeo(fake_module([(0, b"<html>oops</html>", b"")])), IMAGE)
    assert raised.value.msg == ("Failed to resolve image '%s': the registry served no image manifest (it is not "
                                "JSON)." % IMAGE)
    assert raised.value.details == {"stdout": "<html>oops</html>"}


def test_resolve_failure_keeps_the_raw_log_line_out_of_msg():
    stderr = UNAUTHORIZED.encode()
    module = fake_module([(1, b"", stderr)])
    with pytest.raises(ImageError) as raised:
        resolve(Skopeo(module), IMAGE)
    assert raised.value.msg == ("Failed to resolve image '%s': the registry refused the credentials "
                                "(unauthorized)." % IMAGE)
    assert "level=fatal" not in raised.value.msg
    assert raised.value.details == {"cmd": raw_argv(IMAGE), "rc": 1, "stdout": "", "stderr": UNAUTHORIZED}


# ---------------------------------------------------------------- retries

REFUSED = ('time="t" level=fatal msg="pinging container registry r: Get \\"https://r/v2/\\": dial tcp r:443: '
           'connect: connection refused"')
UNAVAILABLE = 'level=fatal msg="reading manifest 1.0 in r/os: received unexpected HTTP status: 503 Service Unavailable"'
RESET = 'level=fatal msg="read tcp 10.0.0.1:1->r:443: read: connection reset by peer"'
TIMEOUT = 'level=fatal msg="Get \\"https://r/v2/\\": context deadline exceeded (Client.Timeout exceeded)"'
MISSING = 'level=fatal msg="reading manifest 9 in r/os: manifest unknown: manifest unknown"'


@pytest.mark.parametrize(("stderr", "transient"), [
    (REFUSED, True), (UNAVAILABLE, True), (RESET, True), (TIMEOUT, True),
    ('level=fatal msg="StatusCode: 502, <html>"', True),
    (UNAUTHORIZED, False), (UNKNOWN_CA, False), (MISSING, False),
    ('level=fatal msg="requested access to the resource is denied"', False),
    ("something odd", False), ("", False),
])
def test_is_transient(stderr, transient):
    assert is_transient(stderr) is transient


@pytest.mark.parametrize(("results", "retries", "attempts", "sleeps"), [
    ([(1, b"", REFUSED), (1, b"", UNAVAILABLE), (0, OCI_MANIFEST, b"")], 3, 3, [7, 7]),
    ([(1, b"", RESET), (0, OCI_MANIFEST, b"")], 1, 2, [7]),
])
def test_transient_failures_are_retried(results, retries, attempts, sleeps):
    module = fake_module(results)
    slept = []
    result = resolve(Skopeo(module, retries=retries, retry_delay=7, sleep=slept.append), IMAGE)
    assert result["digest"] == sha(OCI_MANIFEST)
    assert [call[0] for call in module.calls] == [raw_argv(IMAGE)] * attempts
    assert slept == sleeps


def test_retries_exhausted_name_the_attempts():
    module = fake_module([(1, b"", REFUSED)] * 3)
    slept = []
    with pytest.raises(ImageError) as raised:
        Skopeo(module, retries=2, retry_delay=1, sleep=slept.append).copy(IMAGE, "oci:/c:t")
    assert raised.value.msg == "Failed to pull image '%s': the registry is unreachable (after 3 attempts)." % IMAGE
    assert len(module.calls) == 3 and slept == [1, 1]


@pytest.mark.parametrize("stderr", [UNAUTHORIZED, MISSING, UNKNOWN_CA])
def test_permanent_failures_are_not_retried(stderr):
    module = fake_module([(1, "", stderr)])
    slept = []
    with pytest.raises(ImageError):
        Skopeo(module, retries=3, sleep=slept.append).inspect(IMAGE)
    assert len(module.calls) == 1 and slept == []


@pytest.mark.parametrize(("machine", "architecture"), [("aarch64", "arm64"), ("x86_64", "amd64")])
def test_host_architecture(machine, architecture):
    class Machine(LocalHost):
        def machine(self):
            return machine
    assert _skopeo.host_architecture(Machine()) == architecture


class RegistryHost(Host):
    """A host whose skopeo answers ``raw`` (or fails with ``stderr``), with the auth files of ``present``; it
    records every command it runs."""

    finds_on_run = True

    def __init__(self, raw=OCI_INDEX, stderr=None, present=(), machine="x86_64"):
        self.raw, self.stderr, self.present, self._machine = raw, stderr, present, machine
        self.commands = []

    def run(self, argv, data=None, binary=False):
        self.commands.append(list(argv))
        return (1, b"", self.stderr) if self.stderr else (0, self.raw, b"")

    def test(self, *expression):
        self.commands.append(["test"] + list(expression))
        return expression[-1] in self.present

    def machine(self):
        self.commands.append(["uname", "-m"])
        return self._machine


RESOLVER_PARAMS = {"skopeo_executable": None, "retries": 0, "retry_delay": 0, "auth_file": None}


def test_the_resolver_reads_the_manifest_once_for_the_host_s_architecture_with_the_host_s_auth_file():
    host = RegistryHost(present=("/run/b.json",))
    resolver = _skopeo.Resolver(host, RESOLVER_PARAMS, ("/etc/a.json", "/run/b.json"))
    ref = parse(IMAGE)
    assert resolver.platform_digest(ref) == AMD and resolver(ref)["digest"] == sha(OCI_INDEX)
    assert host.commands == [["test", "-e", "/etc/a.json"], ["test", "-e", "/run/b.json"], ["uname", "-m"],
                             ["skopeo", "inspect", "--raw", "--authfile", "/run/b.json", "--", "docker://" + IMAGE]]


def test_the_resolver_gives_a_tag_s_digest_without_reading_the_host_s_architecture():
    host = RegistryHost()
    resolver = _skopeo.Resolver(host, dict(RESOLVER_PARAMS, auth_file="/given.json"), ("/etc/a.json",))
    assert resolver.tag_digest(parse(IMAGE)) == sha(OCI_INDEX)
    assert host.commands == [["skopeo", "inspect", "--raw", "--authfile", "/given.json", "--", "docker://" + IMAGE]]


def test_the_resolver_raises_its_failure_again_without_asking_the_registry_again():
    host = RegistryHost(stderr=b"manifest unknown")
    resolver = _skopeo.Resolver(host, RESOLVER_PARAMS, ())
    for _attempt in range(2):
        with pytest.raises(ImageError) as caught:
            resolver.tag_digest(parse(IMAGE))
        assert "manifest unknown" in caught.value.msg
    assert len([argv for argv in host.commands if argv[0] == "skopeo"]) == 1
