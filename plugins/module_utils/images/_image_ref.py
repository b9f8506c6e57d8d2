# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# This is a private module_util of fleetos.layering: its interface may change at any
# time and it is not meant to be used by other collections.

"""Parse and format rpm-ostree container image references.

An rpm-ostree image reference is ``TRANSPORT:NAME`` where the transport is one of::

    ostree-unverified-registry:NAME
    ostree-unverified-image:docker://NAME
    ostree-remote-registry:REMOTE:NAME
    ostree-remote-image:REMOTE:docker://NAME
    ostree-image-signed:docker://NAME

and ``NAME`` is ``[registry[:port]/]repository[:tag][@sha256:<64 hex>]``. A plain
``NAME`` without a transport is accepted as well (transport ``None``), with or without
the containers-image ``docker://`` prefix.

This module is the only grammar of image references and transports in the collection:
:func:`parse` reads what rpm-ostree shows, :func:`parse_image` a plain image given by a
user (a module option, ``spec.image`` of a MachineImage, ``fleetos_pool_image``),
:func:`parse_transport` a transport (``spec.transport``), and :func:`reference` puts
a plain pinned image and a transport together, never weakening the transport.

OpenShift's old pivot tool named a legacy oscontainer in a custom origin URL,
``pivot://NAME@sha256:<64 hex>``; :func:`parse_pivot` reads those.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, replace

from ansible_collections.fleetos.layering.plugins.module_utils._errors import InvalidInputError

DOCKER_HUB = "docker.io"

UNVERIFIED_REGISTRY = "ostree-unverified-registry"
UNVERIFIED_IMAGE = "ostree-unverified-image"
REMOTE_REGISTRY = "ostree-remote-registry"
REMOTE_IMAGE = "ostree-remote-image"
IMAGE_SIGNED = "ostree-image-signed"

# The scheme of the custom origin URL OpenShift's pivot tool wrote for legacy oscontainers.
PIVOT_SCHEME = "pivot://"
PIVOT = "pivot"

TRANSPORTS = (UNVERIFIED_REGISTRY, UNVERIFIED_IMAGE, REMOTE_REGISTRY, REMOTE_IMAGE, IMAGE_SIGNED)
DEFAULT_TRANSPORT = UNVERIFIED_REGISTRY
DOCKER_SCHEME = "docker://"
# Transports whose NAME is written after a "docker://" prefix.
_DOCKER_PREFIXED = (UNVERIFIED_IMAGE, REMOTE_IMAGE, IMAGE_SIGNED)
# Transports that name an ostree remote (its signature configuration) first.
_WITH_REMOTE = (REMOTE_REGISTRY, REMOTE_IMAGE)

# Transports whose image is verified (signature policy of an ostree remote, or the
# host's containers policy); a planner must never replace one by an unverified one.
_VERIFIED = (REMOTE_REGISTRY, REMOTE_IMAGE, IMAGE_SIGNED)

# The module option `transport` -> the rpm-ostree transport it writes.
TRANSPORT_CHOICES = {
    "registry": UNVERIFIED_REGISTRY,
    "remote": REMOTE_IMAGE,
    "signed": IMAGE_SIGNED,
}
# Every rpm-ostree transport -> the module option value of the same kind.
TRANSPORT_KINDS = {
    UNVERIFIED_REGISTRY: "registry",
    UNVERIFIED_IMAGE: "registry",
    REMOTE_REGISTRY: "remote",
    REMOTE_IMAGE: "remote",
    IMAGE_SIGNED: "signed",
}
# The accepted forms of a transport, for messages.
TRANSPORT_FORMS = (UNVERIFIED_REGISTRY, UNVERIFIED_IMAGE, IMAGE_SIGNED, REMOTE_IMAGE + ":REMOTE",
                   REMOTE_REGISTRY + ":REMOTE")

_DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")
_TAG_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_PATH_COMPONENT_RE = re.compile(r"^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$")
_HOST_RE = re.compile(
    r"^(?:(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)(?:\.(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?))*"
    r"|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?$"
)
_REMOTE_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
DIGEST_FORM = "sha256: and 64 hex digits"
PLAIN_FORM = "registry/repository@sha256:<64 hex digits>"

# os.uname().machine -> the architecture name of the OCI image index (GOARCH).
_OCI_ARCHITECTURES = {
    "x86_64": "amd64",
    "amd64": "amd64",
    "aarch64": "arm64",
    "arm64": "arm64",
    "ppc64le": "ppc64le",
    "s390x": "s390x",
    "armv7l": "arm",
    "armv6l": "arm",
    "i386": "386",
    "i486": "386",
    "i586": "386",
    "i686": "386",
    "riscv64": "riscv64",
}


class InvalidReferenceError(InvalidInputError):
    """An image reference or a transport that the grammar refuses.

    The message is ``SUBJECT CAUSE``; ``subject`` names what was read (``image
    reference 'x'``, ``transport 'y'``) and ``cause`` is the rest of the sentence, so
    that a caller can name its own field instead: ``spec.image 'x' CAUSE``.
    """

    def __init__(self, subject, cause, **details):
        super().__init__("%s %s" % (subject, cause), **details)
        self.subject = subject
        self.cause = cause


# A value echoed in a message is cut to this many characters, so that a huge input gives a short sentence.
SHOWN_MAX = 120


def shown(value, limit=SHOWN_MAX):
    """``value`` for a message: itself when short, else the start of its text and its length.

    Control characters in a string are shown escaped (``\\x1b``), so that a message stays one line of text.
    """
    text = value if isinstance(value, str) else repr(value)
    if isinstance(value, str) and not value.isprintable():
        value = text = "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)
    if len(text) <= limit:
        return value
    return "%s... (%d characters)" % (text[:limit - 24], len(text))


def _bad(whole, cause):
    return InvalidReferenceError("image reference '%s'" % (shown(whole),), cause)


@dataclass(frozen=True)
class Transport:
    """How rpm-ostree fetches and verifies an image: ``name`` and, for the remote
    transports, the ostree ``remote`` whose signature configuration verifies it.

    Build one with :func:`parse_transport` or :func:`transport_of_kind`; the
    constructor refuses a remote transport without a remote and a remote on another one.
    """

    name: str
    remote: str | None = None

    def __post_init__(self):
        if self.name not in TRANSPORTS and self.name != PIVOT:
            raise InvalidReferenceError("transport '%s'" % (self.name,), "is not an rpm-ostree transport: expected "
                                        "one of %s" % ", ".join(TRANSPORT_FORMS))
        if self.name in _WITH_REMOTE:
            if not isinstance(self.remote, str) or not _REMOTE_RE.match(self.remote):
                raise InvalidReferenceError("transport '%s'" % self.text, "names no valid ostree remote: expected "
                                            "%s:REMOTE" % self.name)
        elif self.remote is not None:
            raise InvalidReferenceError("transport '%s'" % self.text, "names an ostree remote, which only %s take"
                                        % " and ".join(_WITH_REMOTE))

    @property
    def kind(self):
        """The module option value: ``registry``, ``remote`` or ``signed`` (None for ``pivot``)."""
        return TRANSPORT_KINDS.get(self.name)

    @property
    def text(self):
        """The transport as written before the image: ``ostree-remote-image:fleet``, ``ostree-image-signed``."""
        if self.remote is None:
            return self.name
        return "%s:%s" % (self.name, self.remote)

    @property
    def verified(self):
        """True when rpm-ostree verifies the image (a signed or remote transport)."""
        return self.name in _VERIFIED

    @property
    def docker_prefixed(self):
        """True when the image follows as ``docker://NAME``."""
        return self.name in _DOCKER_PREFIXED

    def __str__(self):
        return self.text


def parse_transport(text, field="transport"):
    """Parse a transport text; None or an empty string is the default ``ostree-unverified-registry``.

    Accepted: ``ostree-unverified-registry``, ``ostree-unverified-image``,
    ``ostree-image-signed``, ``ostree-remote-image:REMOTE``, ``ostree-remote-registry:REMOTE``.
    ``field`` names the input in the message (``spec.transport``).
    """
    if text is None or text == "":
        return Transport(DEFAULT_TRANSPORT)
    expected = "expected one of %s" % ", ".join(TRANSPORT_FORMS)
    if not isinstance(text, str):
        raise InvalidReferenceError(field, "is %s, not a transport text: %s" % (type(text).__name__, expected))
    subject = "%s '%s'" % (field, text)
    name, sep, remote = text.partition(":")
    if name in _WITH_REMOTE:
        if not sep or not remote:
            raise InvalidReferenceError(subject, "names no ostree remote: expected %s:REMOTE" % name)
        if not _REMOTE_RE.match(remote):
            raise InvalidReferenceError(subject, "has an invalid ostree remote '%s': expected letters, digits, "
                                        "'_', '.' or '-'" % remote)
        return Transport(name, remote)
    if name in TRANSPORTS and not sep:
        return Transport(name)
    if name in TRANSPORTS:
        raise InvalidReferenceError(subject, "has an extra ':%s': %s takes no ostree remote" % (remote, name))
    raise InvalidReferenceError(subject, "is not an rpm-ostree transport: %s" % expected)


def transport_of_kind(kind, remote=None):
    """The Transport a module option ``transport`` (registry, remote, signed) writes.

    ``remote`` is required for ``remote`` and ignored otherwise.
    """
    if kind not in TRANSPORT_CHOICES:
        raise InvalidReferenceError("transport '%s'" % (kind,), "is not supported: expected one of %s"
                                    % ", ".join(TRANSPORT_CHOICES))
    if kind != "remote":
        return Transport(TRANSPORT_CHOICES[kind])
    if not remote or not isinstance(remote, str) or not _REMOTE_RE.match(remote):
        raise InvalidReferenceError("ostree_remote %r" % (shown(remote, 60),), "is invalid: transport 'remote' "
                                    "needs the name of an ostree remote")
    return Transport(TRANSPORT_CHOICES[kind], remote)


def oci_architecture(machine):
    """The OCI (GOARCH) architecture name of a kernel machine name (``os.uname().machine``).

    ``x86_64`` -> ``amd64``, ``aarch64`` -> ``arm64``, ``armv7l`` -> ``arm``, ``i686`` ->
    ``386``; ``ppc64le`` and ``s390x`` are the same in both; an unknown name is returned as is.
    """
    return _OCI_ARCHITECTURES.get(machine, machine)


@dataclass(frozen=True)
class ImageRef:
    """One image reference, split into its parts.

    ``transport`` is a :class:`Transport` (None for a plain image); ``registry`` is the
    registry host (``host[:port]``); for a Docker Hub short name (``fedora:39``,
    ``library/fedora``) it is ``docker.io`` and ``registry_implicit`` is true, so that
    :meth:`format` keeps the reference as it was given.
    """

    transport: Transport | None
    registry: str
    repository: str
    tag: str | None = None
    digest: str | None = None
    registry_implicit: bool = False

    @property
    def remote(self):
        """The ostree remote of a remote transport, or None."""
        return self.transport.remote if self.transport is not None else None

    @property
    def name(self):
        """``registry/repository`` as given (a Docker Hub short name stays short)."""
        if self.registry_implicit:
            return self.repository
        return "%s/%s" % (self.registry, self.repository)

    @property
    def canonical_name(self):
        """``registry/repository`` with Docker Hub spelled out (``docker.io/library/x``)."""
        repository = self.repository
        if self.registry == DOCKER_HUB and "/" not in repository:
            repository = "library/" + repository
        return "%s/%s" % (self.registry, repository)

    @property
    def pinned(self):
        """True when the reference carries a digest."""
        return self.digest is not None

    @property
    def image(self):
        """The plain ``registry/repository[:tag][@digest]`` part, without a transport."""
        text = self.name
        if self.tag is not None:
            text += ":" + self.tag
        if self.digest is not None:
            text += "@" + self.digest
        return text

    @property
    def docker_reference(self):
        """The containers-image ``docker://`` reference (for skopeo)."""
        return DOCKER_SCHEME + self.image

    @property
    def kind(self):
        """The module option value for this transport (registry, remote, signed) or None."""
        return self.transport.kind if self.transport is not None else None

    def format(self):
        """The reference as rpm-ostree writes it (the plain image when no transport)."""
        if self.transport is None:
            return self.image
        if self.transport.name == PIVOT:
            return PIVOT_SCHEME + self.image
        if self.transport.docker_prefixed:
            return "%s:%s" % (self.transport.text, self.docker_reference)
        return "%s:%s" % (self.transport.text, self.image)

    def with_digest(self, digest, keep_tag=False):
        """A copy pinned to ``digest``; the tag is dropped unless ``keep_tag``.

        containers-image refuses a ``docker://`` reference with both a tag and a
        digest, so the pinned reference rpm-ostree gets carries only the digest.
        """
        _check_digest(digest, "%s@%s" % (self.name, digest))
        return replace(self, digest=digest, tag=self.tag if keep_tag else None)

    def with_transport(self, transport):
        """A copy with ``transport``: a :class:`Transport`, or a transport text read by
        :func:`parse_transport` (None or ``""`` is the default ``ostree-unverified-registry``).
        """
        if not isinstance(transport, Transport):
            transport = parse_transport(transport)
        return replace(self, transport=transport)

    def __str__(self):
        return self.format()


def is_digest(value):
    """True for ``sha256:`` and 64 lowercase hex digits."""
    return isinstance(value, str) and bool(_DIGEST_RE.match(value))


def _check_digest(digest, whole):
    if not is_digest(digest):
        raise _bad(whole, "has an invalid digest: expected %s" % DIGEST_FORM)


def _check_registry(registry, whole):
    cause = None
    if not _HOST_RE.match(registry):
        cause = "expected host or host:port"
    else:
        host, port = registry, None
        if registry.startswith("["):
            host, _sep, rest = registry[1:].partition("]")
            port = rest[1:] if rest else None
            try:
                ipaddress.IPv6Address(host)
            except ValueError:
                cause = "'%s' is not an IPv6 address" % host
        elif ":" in registry:
            host, port = registry.rsplit(":", 1)
        if cause is None and port is not None and not 0 < int(port) < 65536:
            cause = "port %s is not between 1 and 65535" % port
    if cause is not None:
        raise _bad(whole, "has an invalid registry '%s': %s" % (shown(registry, 60), cause))


def parse_name(text, whole=None):
    """Split ``[registry[:port]/]repository[:tag][@digest]`` -> (registry, repository, tag, digest, implicit)."""
    whole = text if whole is None else whole
    if not text:
        raise _bad(whole, "has no image name: expected registry/repository")
    if any(char.isspace() for char in text):
        raise _bad(whole, "contains whitespace")
    digest = None
    if "@" in text:
        text, digest = text.split("@", 1)
        _check_digest(digest, whole)
    tag = None
    last_slash = text.rfind("/")
    last_colon = text.rfind(":")
    if last_colon > last_slash:
        text, tag = text[:last_colon], text[last_colon + 1:]
        if not _TAG_RE.match(tag):
            raise _bad(whole, "has an invalid tag '%s': expected up to 128 letters, digits, '_', '.' or '-', "
                              "not starting with '.' or '-'" % shown(tag, 60))
    first, sep, rest = text.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost" or first.startswith("[")):
        registry, repository, implicit = first, rest, False
        _check_registry(registry, whole)
    else:
        registry, repository, implicit = DOCKER_HUB, text, True
    if not repository:
        raise _bad(whole, "has no repository: expected registry/repository")
    for component in repository.split("/"):
        if not _PATH_COMPONENT_RE.match(component):
            raise _bad(whole, "has an invalid repository '%s': expected lowercase letters, digits and separators "
                              "('.', '_', '__', '-') in each '/'-separated component" % shown(repository, 60))
    return registry, repository, tag, digest, implicit


def parse(text):
    """Parse an rpm-ostree image reference, or a plain image without a transport.

    A plain image may carry the containers-image ``docker://`` prefix; it is dropped.
    """
    if not isinstance(text, str):
        raise InvalidReferenceError("image reference %r" % (text,), "is %s, not a string: expected "
                                    "[TRANSPORT:]registry/repository" % type(text).__name__)
    if not text:
        raise _bad(text, "is empty: expected [TRANSPORT:]registry/repository")
    transport = None
    rest = text
    head, sep, tail = text.partition(":")
    if sep and head.startswith("ostree-"):
        if head not in TRANSPORTS:
            raise _bad(text, "has an unknown transport '%s': expected one of %s" % (head, ", ".join(TRANSPORTS)))
        rest = tail
        remote = None
        if head in _WITH_REMOTE:
            if rest.startswith(DOCKER_SCHEME):
                raise _bad(text, "has no ostree remote: expected %s:REMOTE:..." % head)
            remote, sep, rest = rest.partition(":")
            if not sep or not _REMOTE_RE.match(remote):
                raise _bad(text, "has an invalid ostree remote '%s': expected %s:REMOTE:..." % (remote, head))
        transport = Transport(head, remote)
        if transport.docker_prefixed:
            if not rest.startswith(DOCKER_SCHEME):
                raise _bad(text, "has an unsupported image transport: expected docker:// after %s:" % transport.text)
            rest = rest[len(DOCKER_SCHEME):]
    elif text.startswith(DOCKER_SCHEME):
        rest = text[len(DOCKER_SCHEME):]
    registry, repository, tag, digest, implicit = parse_name(rest, text)
    return ImageRef(transport=transport, registry=registry, repository=repository, tag=tag, digest=digest,
                    registry_implicit=implicit)


def parse_image(text, transport_field="the transport option"):
    """Parse a plain image, ``[registry[:port]/]repository[:tag][@sha256:<64 hex>]``.

    What a user gives as an image (a module's ``image``, a MachineImage's
    ``spec.image``, ``fleetos_pool_image``). A ``docker://`` prefix is accepted and
    dropped (``ImageRef.image`` never has it); an rpm-ostree transport is refused, as the
    transport is chosen separately, with ``transport_field`` (named in the message).
    Whether a digest is required is the caller's decision (``ImageRef.pinned``).
    """
    ref = parse(text)
    if ref.transport is not None:
        raise _bad(text, "already names an rpm-ostree transport (%s): give a plain %s and choose the transport with %s"
                   % (ref.transport.text, PLAIN_FORM, transport_field))
    return ref


def reference(image, transport_text=None):
    """The full rpm-ostree reference of a plain digest-pinned image and a transport text.

    ``reference("quay.io/os@sha256:...", "ostree-remote-image:fleet")`` is
    ``"ostree-remote-image:fleet:docker://quay.io/os@sha256:..."``. The transport is
    exactly the one given (a :class:`Transport` or a text for :func:`parse_transport`;
    None or ``""`` is ``ostree-unverified-registry``): an unknown text is refused, never
    replaced by a default, and an image that names a transport of its own is refused
    rather than choosing between the two. A tag next to the digest is dropped.
    """
    transport = transport_text if isinstance(transport_text, Transport) else parse_transport(transport_text)
    ref = parse_image(image)
    if not ref.pinned:
        raise _bad(image, "is not digest-pinned: expected %s" % PLAIN_FORM)
    return ref.with_digest(ref.digest).with_transport(transport).format()


def parse_pivot(url):
    """The image named by a custom origin URL ``pivot://NAME@sha256:...``, or None.

    None when the URL is not a pivot URL, or names no valid digest-pinned image: a
    custom origin is free text, and only a pinned image can be compared by digest.
    """
    if not isinstance(url, str) or not url.startswith(PIVOT_SCHEME):
        return None
    try:
        registry, repository, tag, digest, implicit = parse_name(url[len(PIVOT_SCHEME):], url)
    except InvalidInputError:
        return None
    if digest is None:
        return None
    return ImageRef(transport=Transport(PIVOT), registry=registry, repository=repository, tag=tag, digest=digest,
                    registry_implicit=implicit)


def pivot_url(image):
    """The pivot custom origin URL of a digest-pinned plain image: ``pivot://NAME@sha256:...``."""
    ref = parse(image)
    if ref.transport is not None or ref.digest is None:
        raise InvalidInputError(
            "image '%s' cannot name a legacy oscontainer: expected registry/repository@sha256:... "
            "without a transport" % image
        )
    return "%s%s@%s" % (PIVOT_SCHEME, ref.name, ref.digest)


def from_image(image, transport="registry", remote=None):
    """Build the rpm-ostree reference for a plain image and a transport choice.

    ``transport`` is ``registry`` (ostree-unverified-registry), ``remote``
    (ostree-remote-image:REMOTE:docker://, needs ``remote``) or ``signed``
    (ostree-image-signed:docker://).
    """
    chosen = transport_of_kind(transport, remote)
    return parse_image(image).with_transport(chosen)
