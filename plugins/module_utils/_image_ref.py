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
``NAME`` without a transport is accepted as well (transport ``None``).

OpenShift's old pivot tool named a legacy oscontainer in a custom origin URL,
``pivot://NAME@sha256:<64 hex>``; :func:`parse_pivot` reads those.
"""

from __future__ import annotations

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
# Transports whose NAME is written after a "docker://" prefix.
_DOCKER_PREFIXED = (UNVERIFIED_IMAGE, REMOTE_IMAGE, IMAGE_SIGNED)
# Transports that name an ostree remote (its signature configuration) first.
_WITH_REMOTE = (REMOTE_REGISTRY, REMOTE_IMAGE)

# The module option `transport` -> the rpm-ostree transport it writes.
TRANSPORT_CHOICES = {
    "registry": UNVERIFIED_REGISTRY,
    "remote": REMOTE_IMAGE,
    "signed": IMAGE_SIGNED,
}

_DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")
_TAG_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_PATH_COMPONENT_RE = re.compile(r"^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$")
_HOST_RE = re.compile(
    r"^(?:(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)(?:\.(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?))*"
    r"|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?$"
)
_REMOTE_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
DIGEST_FORM = "sha256: and 64 hex digits"


@dataclass(frozen=True)
class ImageRef:
    """One image reference, split into its parts.

    ``registry`` is the registry host (``host[:port]``); for a Docker Hub short name
    (``fedora:39``, ``library/fedora``) it is ``docker.io`` and ``registry_implicit``
    is true, so that :meth:`format` keeps the reference as it was given.
    """

    transport: str | None
    remote: str | None
    registry: str
    repository: str
    tag: str | None = None
    digest: str | None = None
    registry_implicit: bool = False

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
        return "docker://" + self.image

    @property
    def kind(self):
        """The module option value for this transport (registry, remote, signed) or None."""
        for choice, transport in TRANSPORT_CHOICES.items():
            if transport == self.transport:
                return choice
        if self.transport == UNVERIFIED_IMAGE:
            return "registry"
        if self.transport == REMOTE_REGISTRY:
            return "remote"
        return None

    def format(self):
        """The reference as rpm-ostree writes it (the plain image when no transport)."""
        if self.transport is None:
            return self.image
        parts = [self.transport]
        if self.transport in _WITH_REMOTE:
            parts.append(self.remote)
        if self.transport in _DOCKER_PREFIXED:
            parts.append(self.docker_reference)
        else:
            parts.append(self.image)
        return ":".join(parts)

    def with_digest(self, digest, keep_tag=False):
        """A copy pinned to ``digest``; the tag is dropped unless ``keep_tag``.

        containers-image refuses a ``docker://`` reference with both a tag and a
        digest, so the pinned reference rpm-ostree gets carries only the digest.
        """
        _check_digest(digest, "%s@%s" % (self.name, digest))
        return replace(self, digest=digest, tag=self.tag if keep_tag else None)

    def __str__(self):
        return self.format()


def is_digest(value):
    """True for ``sha256:`` and 64 lowercase hex digits."""
    return isinstance(value, str) and bool(_DIGEST_RE.match(value))


def _check_digest(digest, whole):
    if not is_digest(digest):
        raise InvalidInputError(
            "image reference '%s' has an invalid digest: expected %s" % (whole, DIGEST_FORM)
        )


def parse_name(text, whole=None):
    """Split ``[registry[:port]/]repository[:tag][@digest]`` -> (registry, repository, tag, digest, implicit)."""
    whole = text if whole is None else whole
    if not text:
        raise InvalidInputError("image reference '%s' has no image name: expected registry/repository" % whole)
    if any(char.isspace() for char in text):
        raise InvalidInputError("image reference '%s' contains whitespace" % whole)
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
            raise InvalidInputError(
                "image reference '%s' has an invalid tag '%s': expected up to 128 letters, digits, "
                "'_', '.' or '-', not starting with '.' or '-'" % (whole, tag)
            )
    first, sep, rest = text.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost" or first.startswith("[")):
        registry, repository, implicit = first, rest, False
        if not _HOST_RE.match(registry):
            raise InvalidInputError(
                "image reference '%s' has an invalid registry '%s': expected host or host:port" % (whole, registry)
            )
    else:
        registry, repository, implicit = DOCKER_HUB, text, True
    if not repository:
        raise InvalidInputError(
            "image reference '%s' has no repository: expected registry/repository" % whole
        )
    for component in repository.split("/"):
        if not _PATH_COMPONENT_RE.match(component):
            raise InvalidInputError(
                "image reference '%s' has an invalid repository '%s': expected lowercase letters, digits "
                "and separators ('.', '_', '__', '-') in each '/'-separated component" % (whole, repository)
            )
    return registry, repository, tag, digest, implicit


def parse(text):
    """Parse an rpm-ostree image reference, or a plain image without a transport."""
    if not isinstance(text, str) or not text:
        raise InvalidInputError("image reference %r is empty: expected [TRANSPORT:]registry/repository" % (text,))
    transport = remote = None
    rest = text
    head, sep, tail = text.partition(":")
    if sep and head.startswith("ostree-"):
        if head not in TRANSPORTS:
            raise InvalidInputError(
                "image reference '%s' has an unknown transport '%s': expected one of %s"
                % (text, head, ", ".join(TRANSPORTS))
            )
        transport, rest = head, tail
        if transport in _WITH_REMOTE:
            if rest.startswith("docker://"):
                raise InvalidInputError(
                    "image reference '%s' has no ostree remote: expected %s:REMOTE:..." % (text, transport)
                )
            remote, sep, rest = rest.partition(":")
            if not sep or not _REMOTE_RE.match(remote):
                raise InvalidInputError(
                    "image reference '%s' has an invalid ostree remote '%s': expected %s:REMOTE:..."
                    % (text, remote, transport)
                )
        if transport in _DOCKER_PREFIXED:
            if not rest.startswith("docker://"):
                raise InvalidInputError(
                    "image reference '%s' has an unsupported image transport: expected docker:// after %s:"
                    % (text, transport if remote is None else "%s:%s" % (transport, remote))
                )
            rest = rest[len("docker://"):]
    elif text.startswith("docker://"):
        rest = text[len("docker://"):]
    registry, repository, tag, digest, implicit = parse_name(rest, text)
    return ImageRef(transport=transport, remote=remote, registry=registry, repository=repository,
                    tag=tag, digest=digest, registry_implicit=implicit)


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
    return ImageRef(transport=PIVOT, remote=None, registry=registry, repository=repository,
                    tag=tag, digest=digest, registry_implicit=implicit)


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
    if transport not in TRANSPORT_CHOICES:
        raise InvalidInputError(
            "transport '%s' is not supported: expected one of %s" % (transport, ", ".join(TRANSPORT_CHOICES))
        )
    ref = parse(image)
    if ref.transport is not None:
        raise InvalidInputError(
            "image '%s' already names an rpm-ostree transport: give a plain registry/repository@sha256:... "
            "and choose the transport with the transport option" % image
        )
    if transport == "remote":
        if not remote or not _REMOTE_RE.match(remote):
            raise InvalidInputError(
                "ostree remote %r is invalid: transport 'remote' needs the name of an ostree remote" % (remote,)
            )
    else:
        remote = None
    return replace(ref, transport=TRANSPORT_CHOICES[transport], remote=remote)
