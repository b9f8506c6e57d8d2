# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Parsing and formatting of rpm-ostree image references."""

from __future__ import annotations

import pytest

from ansible_collections.fleetos.layering.plugins.module_utils._errors import InvalidInputError
from ansible_collections.fleetos.layering.plugins.module_utils.images import _image_ref

D1 = "sha256:" + "f55ba58f2e79c31ae4735067a47db9c8aee2e6efdf086755fe04c7f25d4575a3"
D2 = "sha256:" + "0" * 63 + "1"

# text, transport, remote, registry, repository, tag, digest, name
PARSE_CASES = [
    ("ostree-unverified-registry:198.51.100.1:5000/fleetos/lab-os@" + D1,
     "ostree-unverified-registry", None, "198.51.100.1:5000", "fleetos/lab-os", None, D1,
     "198.51.100.1:5000/fleetos/lab-os"),
    ("ostree-unverified-registry:quay.io/fedora/fedora-coreos:testing-devel",
     "ostree-unverified-registry", None, "quay.io", "fedora/fedora-coreos", "testing-devel", None,
     "quay.io/fedora/fedora-coreos"),
    ("ostree-unverified-image:docker://quay.io/fedora/fedora-coreos:stable@" + D2,
     "ostree-unverified-image", None, "quay.io", "fedora/fedora-coreos", "stable", D2,
     "quay.io/fedora/fedora-coreos"),
    ("ostree-remote-image:fedora:docker://quay.io/fedora/fedora-coreos:stable",
     "ostree-remote-image", "fedora", "quay.io", "fedora/fedora-coreos", "stable", None,
     "quay.io/fedora/fedora-coreos"),
    ("ostree-remote-registry:fedora:quay.io/fedora/fedora-coreos@" + D1,
     "ostree-remote-registry", "fedora", "quay.io", "fedora/fedora-coreos", None, D1,
     "quay.io/fedora/fedora-coreos"),
    ("ostree-image-signed:docker://quay.io/fedora/fedora-coreos:stable",
     "ostree-image-signed", None, "quay.io", "fedora/fedora-coreos", "stable", None,
     "quay.io/fedora/fedora-coreos"),
    ("ostree-unverified-registry:192.168.122.1:5000/bootc-insights:latest",
     "ostree-unverified-registry", None, "192.168.122.1:5000", "bootc-insights", "latest", None,
     "192.168.122.1:5000/bootc-insights"),
    ("localhost/os:1", None, None, "localhost", "os", "1", None, "localhost/os"),
    ("localhost:5000/a/b/c", None, None, "localhost:5000", "a/b/c", None, None, "localhost:5000/a/b/c"),
    ("registry.example.com/os@" + D1, None, None, "registry.example.com", "os", None, D1,
     "registry.example.com/os"),
    ("fedora:39", None, None, "docker.io", "fedora", "39", None, "fedora"),
    ("library/fedora@" + D1, None, None, "docker.io", "library/fedora", None, D1, "library/fedora"),
    ("[2001:db8::1]:5000/os:1", None, None, "[2001:db8::1]:5000", "os", "1", None, "[2001:db8::1]:5000/os"),
    ("docker://quay.io/a/b:c", None, None, "quay.io", "a/b", "c", None, "quay.io/a/b"),
]


@pytest.mark.parametrize(("text", "transport", "remote", "registry", "repository", "tag", "digest", "name"),
                         PARSE_CASES)
def test_parse(text, transport, remote, registry, repository, tag, digest, name):
    ref = _image_ref.parse(text)
    assert (ref.transport.name if ref.transport else None, ref.remote, ref.registry, ref.repository, ref.tag,
            ref.digest) == (transport, remote, registry, repository, tag, digest)
    if transport is not None:
        assert ref.transport == _image_ref.Transport(transport, remote)
    assert ref.name == name
    assert ref.pinned is (digest is not None)


@pytest.mark.parametrize("text", [case[0] for case in PARSE_CASES if not case[0].startswith("docker://")])
def test_format_round_trips(text):
    assert _image_ref.parse(text).format() == text


@pytest.mark.parametrize(("text", "canonical"), [
    ("fedora:39", "docker.io/library/fedora"),
    ("org/os", "docker.io/org/os"),
    ("quay.io/org/os", "quay.io/org/os"),
])
def test_canonical_name(text, canonical):
    assert _image_ref.parse(text).canonical_name == canonical


@pytest.mark.parametrize(("text", "fragment"), [
    ("x@sha256:12", "image reference 'x@sha256:12' has an invalid digest: expected sha256: and 64 hex digits"),
    ("quay.io/os@md5:" + "0" * 32, "has an invalid digest"),
    ("quay.io/os@sha256:" + "A" * 64, "has an invalid digest"),
    ("quay.io/Fedora/os", "has an invalid repository 'Fedora/os'"),
    ("quay.io/os:-bad", "has an invalid tag '-bad'"),
    ("quay.io/os:" + "t" * 129, "has an invalid tag"),
    ("ostree-unverified-thing:quay.io/os", "has an unknown transport 'ostree-unverified-thing'"),
    ("ostree-image-signed:quay.io/os", "unsupported image transport: expected docker://"),
    ("ostree-unverified-image:oci:/var/os", "unsupported image transport"),
    ("ostree-remote-image:docker://quay.io/os", "has no ostree remote: expected ostree-remote-image:REMOTE:"),
    ("ostree-remote-registry:quay.io/os", "has an invalid ostree remote"),
    ("ostree-unverified-registry:", "has no image name"),
    ("quay.io/", "has no repository"),
    ("quay.io/os with space", "contains whitespace"),
    ("bad_host.example:port/os", "has an invalid registry 'bad_host.example:port'"),
    ("", "is empty"),
])
def test_parse_rejects(text, fragment):
    with pytest.raises(InvalidInputError) as caught:
        _image_ref.parse(text)
    assert fragment in caught.value.msg


@pytest.mark.parametrize(("image", "transport", "remote", "expected"), [
    ("198.51.100.1:5000/fleetos/lab-os@" + D1, "registry", None,
     "ostree-unverified-registry:198.51.100.1:5000/fleetos/lab-os@" + D1),
    ("quay.io/fedora/fedora-coreos@" + D1, "remote", "fedora",
     "ostree-remote-image:fedora:docker://quay.io/fedora/fedora-coreos@" + D1),
    ("quay.io/fedora/fedora-coreos:stable", "signed", None,
     "ostree-image-signed:docker://quay.io/fedora/fedora-coreos:stable"),
    ("quay.io/fedora/fedora-coreos@" + D1, "signed", "ignored",
     "ostree-image-signed:docker://quay.io/fedora/fedora-coreos@" + D1),
])
def test_from_image(image, transport, remote, expected):
    assert _image_ref.from_image(image, transport, remote).format() == expected


@pytest.mark.parametrize(("image", "transport", "remote", "fragment"), [
    ("quay.io/os@" + D1, "remote", None, "transport 'remote' needs the name of an ostree remote"),
    ("quay.io/os@" + D1, "remote", "bad remote", "ostree_remote 'bad remote' is invalid"),
    ("quay.io/os@" + D1, "ftp", None, "transport 'ftp' is not supported"),
    ("ostree-unverified-registry:quay.io/os@" + D1, "registry", None,
     "already names an rpm-ostree transport (ostree-unverified-registry): give a plain registry/repository@sha256:<64 hex "
     "digits> and choose the transport with the transport option"),
])
def test_from_image_rejects(image, transport, remote, fragment):
    with pytest.raises(InvalidInputError) as caught:
        _image_ref.from_image(image, transport, remote)
    assert fragment in caught.value.msg


def test_with_digest_drops_the_tag_unless_asked():
    ref = _image_ref.parse("ostree-image-signed:docker://quay.io/os:stable")
    assert ref.with_digest(D1).format() == "ostree-image-signed:docker://quay.io/os@" + D1
    assert ref.with_digest(D1, keep_tag=True).format() == "ostree-image-signed:docker://quay.io/os:stable@" + D1
    assert ref.with_digest(D1).pinned and not ref.pinned
    with pytest.raises(InvalidInputError) as caught:
        ref.with_digest("sha256:12")
    assert caught.value.msg == ("image reference 'quay.io/os@sha256:12' has an invalid digest: "
                                "expected sha256: and 64 hex digits")


@pytest.mark.parametrize(("text", "kind"), [
    ("ostree-unverified-registry:quay.io/os", "registry"),
    ("ostree-unverified-image:docker://quay.io/os", "registry"),
    ("ostree-remote-image:r:docker://quay.io/os", "remote"),
    ("ostree-remote-registry:r:quay.io/os", "remote"),
    ("ostree-image-signed:docker://quay.io/os", "signed"),
    ("quay.io/os", None),
])
def test_kind(text, kind):
    assert _image_ref.parse(text).kind == kind


def test_docker_reference_and_image():
    ref = _image_ref.parse("ostree-remote-image:fedora:docker://quay.io/os:1@" + D1)
    assert ref.image == "quay.io/os:1@" + D1
    assert ref.docker_reference == "docker://quay.io/os:1@" + D1
    assert str(ref) == ref.format()


@pytest.mark.parametrize(("url", "name", "digest"), [
    ("pivot://quay.io/openshift/os@sha256:" + "1" * 64, "quay.io/openshift/os", "sha256:" + "1" * 64),
    ("pivot://198.51.100.1:5000/os:4.11@sha256:" + "2" * 64, "198.51.100.1:5000/os", "sha256:" + "2" * 64),
    ("pivot://quay.io/os:4.11", None, None),          # no digest: nothing to compare
    ("pivot://Quay.io/OS@sha256:" + "1" * 64, None, None),  # not an image name
    ("https://quay.io/os@sha256:" + "1" * 64, None, None),
    ("", None, None),
    (None, None, None),
])
def test_parse_pivot(url, name, digest):
    ref = _image_ref.parse_pivot(url)
    if name is None:
        assert ref is None
    else:
        assert (ref.transport.text, ref.transport.kind, ref.name, ref.digest) == ("pivot", None, name, digest)
        assert ref.format() == url


def test_pivot_url_round_trip():
    image = "198.51.100.1:5000/fleetos/legacy@sha256:" + "3" * 64
    url = _image_ref.pivot_url(image)
    assert url == "pivot://" + image
    assert _image_ref.parse_pivot(url).name == "198.51.100.1:5000/fleetos/legacy"


@pytest.mark.parametrize("image", ["quay.io/os:4.11", "ostree-unverified-registry:quay.io/os@sha256:" + "3" * 64])
def test_pivot_url_needs_a_plain_pinned_image(image):
    with pytest.raises(InvalidInputError, match="cannot name a legacy oscontainer"):
        _image_ref.pivot_url(image)


@pytest.mark.parametrize(("text", "fragment"), [
    ("quay.io:0/os", "has an invalid registry 'quay.io:0': port 0 is not between 1 and 65535"),
    ("quay.io:65536/os", "port 65536 is not between 1 and 65535"),
    ("[1:2:3]:5000/os", "has an invalid registry '[1:2:3]:5000': '1:2:3' is not an IPv6 address"),
    ("quay.io//os", "has an invalid repository '/os'"),
    (5, "image reference 5 is int, not a string"),
])
def test_parse_rejects_registries(text, fragment):
    with pytest.raises(_image_ref.InvalidReferenceError) as caught:
        _image_ref.parse(text)
    assert fragment in caught.value.msg
    assert caught.value.msg == "%s %s" % (caught.value.subject, caught.value.cause)


@pytest.mark.parametrize(("text", "registry"), [
    ("quay.io:65535/os", "quay.io:65535"),
    ("[fd00::1]/os", "[fd00::1]"),
    ("Registry.Example.COM/os", "Registry.Example.COM"),
])
def test_parse_accepts_registries(text, registry):
    assert _image_ref.parse(text).registry == registry


# ---- transports ----------------------------------------------------------------------

# text, name, remote, kind, verified, docker_prefixed
TRANSPORT_CASES = [
    (None, "ostree-unverified-registry", None, "registry", False, False),
    ("", "ostree-unverified-registry", None, "registry", False, False),
    ("ostree-unverified-registry", "ostree-unverified-registry", None, "registry", False, False),
    ("ostree-unverified-image", "ostree-unverified-image", None, "registry", False, True),
    ("ostree-image-signed", "ostree-image-signed", None, "signed", True, True),
    ("ostree-remote-image:fleet", "ostree-remote-image", "fleet", "remote", True, True),
    ("ostree-remote-registry:fedora_1.x", "ostree-remote-registry", "fedora_1.x", "remote", True, False),
]


@pytest.mark.parametrize(("text", "name", "remote", "kind", "verified", "docker_prefixed"), TRANSPORT_CASES)
def test_parse_transport(text, name, remote, kind, verified, docker_prefixed):
    transport = _image_ref.parse_transport(text)
    assert (transport.name, transport.remote, transport.kind, transport.verified, transport.docker_prefixed) == (
        name, remote, kind, verified, docker_prefixed)
    assert transport.text == (text or "ostree-unverified-registry")
    assert str(transport) == transport.text
    assert _image_ref.parse_transport(transport.text) == transport


@pytest.mark.parametrize(("text", "field", "msg"), [
    ("ostree-remote-image", "transport",
     "transport 'ostree-remote-image' names no ostree remote: expected ostree-remote-image:REMOTE"),
    ("ostree-remote-registry:", "spec.transport",
     "spec.transport 'ostree-remote-registry:' names no ostree remote: expected ostree-remote-registry:REMOTE"),
    ("ostree-remote-image:bad remote", "transport",
     "transport 'ostree-remote-image:bad remote' has an invalid ostree remote 'bad remote': expected letters, "
     "digits, '_', '.' or '-'"),
    ("ostree-image-signed:fleet", "transport",
     "transport 'ostree-image-signed:fleet' has an extra ':fleet': ostree-image-signed takes no ostree remote"),
    ("ostree-unverified-registry:", "transport",
     "transport 'ostree-unverified-registry:' has an extra ':': ostree-unverified-registry takes no ostree remote"),
    ("registry", "transport",
     "transport 'registry' is not an rpm-ostree transport: expected one of ostree-unverified-registry, "
     "ostree-unverified-image, ostree-image-signed, ostree-remote-image:REMOTE, ostree-remote-registry:REMOTE"),
    ("docker", "transport", "transport 'docker' is not an rpm-ostree transport"),
    ("pivot", "transport", "transport 'pivot' is not an rpm-ostree transport"),
    (["ostree-image-signed"], "spec.transport", "spec.transport is list, not a transport text"),
])
def test_parse_transport_rejects(text, field, msg):
    with pytest.raises(InvalidInputError) as caught:
        _image_ref.parse_transport(text, field=field)
    assert caught.value.msg.startswith(msg), caught.value.msg


@pytest.mark.parametrize(("name", "remote", "fragment"), [
    ("ostree-remote-image", None, "names no valid ostree remote"),
    ("ostree-image-signed", "fleet", "names an ostree remote, which only ostree-remote-registry and "
                                     "ostree-remote-image take"),
    ("ostree-bogus", None, "is not an rpm-ostree transport"),
])
def test_transport_constructor_refuses_invalid_values(name, remote, fragment):
    with pytest.raises(InvalidInputError) as caught:
        _image_ref.Transport(name, remote)
    assert fragment in caught.value.msg


@pytest.mark.parametrize(("kind", "remote", "text"), [
    ("registry", None, "ostree-unverified-registry"),
    ("registry", "ignored", "ostree-unverified-registry"),
    ("signed", None, "ostree-image-signed"),
    ("remote", "fleet", "ostree-remote-image:fleet"),
])
def test_transport_of_kind(kind, remote, text):
    transport = _image_ref.transport_of_kind(kind, remote)
    assert (transport.text, transport.kind) == (text, kind)


def test_image_ref_transport_property_and_with_transport():
    ref = _image_ref.parse("quay.io/os:1@" + D1)
    assert ref.transport is None and ref.remote is None and ref.kind is None
    remote = ref.with_transport("ostree-remote-image:fleet")
    assert remote.transport == _image_ref.Transport("ostree-remote-image", "fleet")
    assert (remote.remote, remote.kind, remote.transport.verified) == ("fleet", "remote", True)
    assert remote.format() == "ostree-remote-image:fleet:docker://quay.io/os:1@" + D1
    signed = remote.with_transport(_image_ref.Transport("ostree-image-signed"))
    assert signed.format() == "ostree-image-signed:docker://quay.io/os:1@" + D1
    assert ref.with_transport(None).format() == "ostree-unverified-registry:quay.io/os:1@" + D1
    with pytest.raises(InvalidInputError):
        ref.with_transport("ostree-remote-image")


# ---- plain images and full references ------------------------------------------------

@pytest.mark.parametrize(("text", "image"), [
    ("quay.io/os@" + D1, "quay.io/os@" + D1),
    ("docker://quay.io/os@" + D1, "quay.io/os@" + D1),
    ("fedora:40", "fedora:40"),
    ("quay.io/os:40@" + D1, "quay.io/os:40@" + D1),
])
def test_parse_image(text, image):
    ref = _image_ref.parse_image(text)
    assert ref.transport is None and ref.image == image


@pytest.mark.parametrize(("text", "field", "msg"), [
    ("ostree-image-signed:docker://quay.io/os@" + D1, "spec.transport",
     "image reference 'ostree-image-signed:docker://quay.io/os@%s' already names an rpm-ostree transport "
     "(ostree-image-signed): give a plain registry/repository@sha256:<64 hex digits> and choose the transport with "
     "spec.transport" % D1),
    ("quay.io/Os@" + D1, "spec.transport",
     "image reference 'quay.io/Os@%s' has an invalid repository 'Os': expected lowercase letters, digits and "
     "separators ('.', '_', '__', '-') in each '/'-separated component" % D1),
])
def test_parse_image_rejects(text, field, msg):
    with pytest.raises(_image_ref.InvalidReferenceError) as caught:
        _image_ref.parse_image(text, transport_field=field)
    assert caught.value.msg == msg


@pytest.mark.parametrize(("image", "transport", "expected"), [
    ("quay.io/os@" + D1, "ostree-remote-image:fleet", "ostree-remote-image:fleet:docker://quay.io/os@" + D1),
    ("quay.io/os@" + D1, "ostree-remote-registry:fleet", "ostree-remote-registry:fleet:quay.io/os@" + D1),
    ("quay.io/os@" + D1, "ostree-image-signed", "ostree-image-signed:docker://quay.io/os@" + D1),
    ("quay.io/os@" + D1, "ostree-unverified-image", "ostree-unverified-image:docker://quay.io/os@" + D1),
    ("quay.io/os@" + D1, "ostree-unverified-registry", "ostree-unverified-registry:quay.io/os@" + D1),
    ("quay.io/os@" + D1, None, "ostree-unverified-registry:quay.io/os@" + D1),
    ("quay.io/os@" + D1, _image_ref.Transport("ostree-image-signed"), "ostree-image-signed:docker://quay.io/os@" + D1),
    # the tag is dropped (containers-image refuses a tag and a digest), so is docker://
    ("docker://quay.io/os:40@" + D1, "ostree-image-signed", "ostree-image-signed:docker://quay.io/os@" + D1),
    ("[fd00::1]:5000/os@" + D1, "ostree-remote-image:r", "ostree-remote-image:r:docker://[fd00::1]:5000/os@" + D1),
])
def test_reference(image, transport, expected):
    text = _image_ref.reference(image, transport)
    assert text == expected
    # What rpm-ostree will show parses back to the same transport: never weakened.
    parsed = _image_ref.parse(text)
    assert parsed.transport == (transport if isinstance(transport, _image_ref.Transport)
                                else _image_ref.parse_transport(transport))


@pytest.mark.parametrize(("image", "transport", "msg"), [
    ("quay.io/os:40", "ostree-image-signed",
     "image reference 'quay.io/os:40' is not digest-pinned: expected registry/repository@sha256:<64 hex digits>"),
    # an unknown or incomplete transport is refused, never replaced by the unverified default
    ("quay.io/os@" + D1, "ostree-remote-image", "transport 'ostree-remote-image' names no ostree remote"),
    ("quay.io/os@" + D1, "signed", "transport 'signed' is not an rpm-ostree transport"),
    ("quay.io/os@" + D1, "ostree-image-signed:", "transport 'ostree-image-signed:' has an extra ':'"),
    # an image with a transport of its own is refused rather than choosing one of the two
    ("ostree-image-signed:docker://quay.io/os@" + D1, "ostree-unverified-registry",
     "already names an rpm-ostree transport (ostree-image-signed)"),
])
def test_reference_rejects(image, transport, msg):
    with pytest.raises(InvalidInputError) as caught:
        _image_ref.reference(image, transport)
    assert msg in caught.value.msg


@pytest.mark.parametrize(("machine", "architecture"), [
    ("x86_64", "amd64"),
    ("aarch64", "arm64"),
    ("ppc64le", "ppc64le"),
    ("s390x", "s390x"),
    ("armv7l", "arm"),
    ("i686", "386"),
    ("riscv64", "riscv64"),
    ("mips64", "mips64"),
])
def test_oci_architecture(machine, architecture):
    assert _image_ref.oci_architecture(machine) == architecture


def test_a_huge_reference_gives_a_short_sentence():
    huge = "reg.example.com/" + "A" * 100000
    with pytest.raises(_image_ref.InvalidReferenceError) as caught:
        _image_ref.parse(huge)
    assert len(caught.value.msg) < 400
    assert "(100016 characters)" in caught.value.msg
    assert _image_ref.shown("short") == "short" and _image_ref.shown(5) == 5
