# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# This is a private plugin_util of fleetos.layering: its interface may change at any
# time and it is not meant to be used by other collections.

"""MachineImage objects: validation and resolution of the image a node should run.

Precedence: an object whose ``spec.nodeName`` names the node, then an object whose
``spec.nodeSelector`` selects the node's labels, then the pool default
(``fleetos_pool_image``, or ``fleetos_pool_layered_image``). Two matches at the same level are an error naming the
host and both objects, never a silent pick. The result depends only on the set of
objects and labels, never on their order.

Compile once (:class:`MachineImageSet`), resolve per host: nodeName objects are
indexed by name, selectors by one label they require, so a host only evaluates the
selectors that can match it.

Images and transports (``spec.image``, ``spec.transport``, ``fleetos_pool_image``,
``fleetos_pool_transport``) are read by ``_image_ref``, the collection's one grammar:
an image is a plain ``registry/repository@sha256:<64 hex>`` (a ``docker://`` prefix is
accepted and dropped; an rpm-ostree transport belongs in ``spec.transport``).

Instead of an image, an object (``spec.layeredImage``) or a pool (``fleetos_pool_layered_image``)
may name a LayeredImage: the assignment then carries ``layered_image`` (its name) and no image;
the planner (``plugin_utils/rollout/_plan.py``) takes the composed digest from the lock compose.yml wrote.
"""

from __future__ import annotations

import re

from ansible_collections.fleetos.layering.plugins.module_utils._errors import InvalidInputError
from ansible_collections.fleetos.layering.plugins.module_utils.images import _image_ref
from ansible_collections.fleetos.layering.plugins.plugin_utils.images._selector import (
    compile_selector,
    normalize_labels,
)

API_VERSION = "fleetos.io/v1alpha1"
KIND = "MachineImage"
# metadata.annotations key the manifest loaders set to say where an object came from.
DEFINED_IN_ANNOTATION = "fleetos.io/defined-in"
DEFAULT_TRANSPORT = _image_ref.DEFAULT_TRANSPORT
SOURCES = ("nodeName", "selector", "pool")

_SPEC_KEYS = ("image", "layeredImage", "nodeName", "nodeSelector", "pullSecret", "transport", "paused", "allowTag")
_TOP_KEYS = ("apiVersion", "kind", "metadata", "spec")
_METADATA_KEYS = ("name", "labels", "annotations")
_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_VAR_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def group_name(name):
    """Inventory group for a MachineImage: ``machine_image_`` plus the name, ``-``/``.`` as ``_``."""
    return "machine_image_" + re.sub(r"[^A-Za-z0-9_]", "_", name)


class MachineImage:
    """One validated MachineImage."""

    __slots__ = ("name", "defined_in", "image", "digest", "layered_image", "node_name", "selector", "pull_secret",
                 "transport", "paused", "allow_tag")

    def __init__(self, name, defined_in, spec, selector, ref, transport):
        self.name = name
        self.defined_in = defined_in
        # The plain image as parsed: a docker:// prefix is dropped; None for a LayeredImage.
        self.image = ref.image if ref is not None else None
        self.digest = ref.digest if ref is not None else None
        self.layered_image = spec.get("layeredImage")
        self.node_name = spec.get("nodeName")
        self.selector = selector
        self.pull_secret = spec.get("pullSecret")
        # The rpm-ostree transport text, e.g. ostree-remote-image:fleet.
        self.transport = transport.text
        self.paused = bool(spec.get("paused", False))
        self.allow_tag = bool(spec.get("allowTag", False))

    @property
    def where(self):
        return "%s (MachineImage '%s')" % (self.defined_in, self.name)

    @property
    def field(self):
        return "spec.nodeName" if self.node_name is not None else "spec.nodeSelector"


def _defined_in(obj, index, list_name="machine_images"):
    annotations = ((obj.get("metadata") or {}).get("annotations") or {}) if isinstance(obj.get("metadata"), dict) else {}
    value = annotations.get(DEFINED_IN_ANNOTATION) if isinstance(annotations, dict) else None
    return value if isinstance(value, str) and value else "%s[%d]" % (list_name, index)


def only_keys(mapping, allowed, field, what, fail):
    """Call ``fail`` for the first key of ``mapping`` that is not ``allowed``, naming ``field`` and ``what``."""
    unknown = sorted(str(k) for k in mapping if k not in allowed)
    if unknown:
        fail((field + "." if field else "") + unknown[0], "is not %s field; allowed: %s" % (what, ", ".join(allowed)))


def check_header(obj, index, kind, list_name):
    """Check what every fleetos.io object shares (top-level keys, apiVersion, kind, metadata and its name).

    -> ``(defined_in, name, prefix, fail)``; ``fail(field, cause)`` raises InvalidInputError prefixed
    with ``prefix``, ``"<defined_in> (<kind> '<name>'): "``.
    """
    if not isinstance(obj, dict):
        raise InvalidInputError("%s[%d] is %s, not a %s mapping" % (list_name, index, type(obj).__name__, kind),
                                field="")
    defined_in = _defined_in(obj, index, list_name)
    metadata = obj.get("metadata")
    raw_name = metadata.get("name") if isinstance(metadata, dict) else None
    shown = raw_name if isinstance(raw_name, str) and raw_name else None
    prefix = "%s (%s %s): " % (defined_in, kind, "'%s'" % shown if shown else "without a name")

    def fail(field, cause):
        raise InvalidInputError("%s%s %s" % (prefix, field, cause), field=field)

    only_keys(obj, _TOP_KEYS, "", "a %s" % kind, fail)
    if obj.get("apiVersion") != API_VERSION:
        fail("apiVersion", "%r is not %s" % (obj.get("apiVersion"), API_VERSION))
    if obj.get("kind") != kind:
        fail("kind", "%r is not %s" % (obj.get("kind"), kind))
    if not isinstance(metadata, dict):
        fail("metadata", "must be a mapping with a name")
    only_keys(metadata, _METADATA_KEYS, "metadata", "a %s metadata" % kind, fail)
    if not shown:
        fail("metadata.name", "must be a non-empty string")
    if len(raw_name) > 253 or not _NAME_RE.match(raw_name):
        fail("metadata.name", "%r is not a DNS-1123 subdomain (lowercase letters, digits, '-' and '.')"
             % raw_name)
    return defined_in, raw_name, prefix, fail


def layered_image_name(value):
    """True when ``value`` can name a LayeredImage (its metadata.name: a DNS-1123 subdomain)."""
    return isinstance(value, str) and 0 < len(value) <= 253 and bool(_NAME_RE.match(value))


def _check_image(spec, fail):
    """The ImageRef of ``spec.image``, or None for a ``spec.layeredImage``; exactly one of them."""
    image, layered = spec.get("image"), spec.get("layeredImage")
    if image is not None and layered is not None:
        fail("spec.image/spec.layeredImage", "are both set; give exactly one of them (an image, or the name of "
             "a LayeredImage whose composed digest the lock gives)")
    if layered is not None:
        if not layered_image_name(layered):
            fail("spec.layeredImage", "%r is not a LayeredImage name (its metadata.name, a DNS-1123 subdomain)"
                 % (layered,))
        return None
    if not isinstance(image, str) or not image:
        fail("spec.image", "must be a non-empty image reference NAME@sha256:<64 hex> (or give spec.layeredImage)")
    ref = None
    try:
        ref = _image_ref.parse_image(image, transport_field="spec.transport")
    except _image_ref.InvalidReferenceError as exc:
        fail("spec.image", "%r %s" % (_image_ref.shown(image), exc.cause))
    if not ref.pinned and not spec.get("allowTag", False):
        fail("spec.image", "%r is not digest-pinned (NAME@sha256:<64 hex>); set spec.allowTag: true "
             "to allow a tag" % image)
    return ref


def validate(obj, index=0):
    """Validate one object (a dict) and return a :class:`MachineImage`.

    ``index`` is the object's position in the list, used in messages only when the
    object carries no ``fleetos.io/defined-in`` annotation.
    """
    defined_in, raw_name, prefix, fail = check_header(obj, index, KIND, "machine_images")
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        fail("spec", "must be a mapping with image (or layeredImage) and nodeName or nodeSelector")
    only_keys(spec, _SPEC_KEYS, "spec", "a MachineImage spec", fail)
    for flag in ("paused", "allowTag"):
        if flag in spec and not isinstance(spec[flag], bool):
            fail("spec." + flag, "is %r, not true or false" % (spec[flag],))
    ref = _check_image(spec, fail)
    has_name = spec.get("nodeName") is not None
    has_selector = spec.get("nodeSelector") is not None
    if has_name == has_selector:
        fail("spec.nodeName/spec.nodeSelector", "are %s; give exactly one of them"
             % ("both set" if has_name else "both missing"))
    selector = None
    if has_name:
        if not isinstance(spec["nodeName"], str) or not spec["nodeName"]:
            fail("spec.nodeName", "must be a non-empty host name")
    else:
        selector = compile_selector(spec["nodeSelector"], prefix=prefix, field="spec.nodeSelector")
    pull_secret = spec.get("pullSecret")
    if pull_secret is not None and (not isinstance(pull_secret, str) or not _VAR_RE.match(pull_secret)):
        fail("spec.pullSecret", "%r is not a variable name" % (pull_secret,))
    transport = None
    try:
        transport = _image_ref.parse_transport(spec.get("transport"), field="spec.transport")
    except _image_ref.InvalidReferenceError as exc:
        fail("spec.transport", "%r %s" % (_image_ref.shown(spec.get("transport")), exc.cause))
    return MachineImage(raw_name, defined_in, spec, selector, ref, transport)


class ConflictError(InvalidInputError):
    """Two or more MachineImages match one host at the same level."""


class MachineImageSet:
    """Validated, indexed MachineImages; :meth:`resolve` answers per host."""

    def __init__(self, objects):
        if objects is None:
            objects = []
        if not isinstance(objects, (list, tuple)):
            raise InvalidInputError("machine_images must be a list of MachineImage objects, got %s"
                                    % type(objects).__name__, field="machine_images")
        self.images = []
        seen = {}
        groups = {}
        for index, obj in enumerate(objects):
            image = validate(obj, index)
            if image.name in seen:
                first, second = sorted((seen[image.name].defined_in, image.defined_in))
                raise InvalidInputError(
                    "%s (MachineImage '%s'): metadata.name is also used by %s; names must be unique"
                    % (second, image.name, first), field="metadata.name")
            other = groups.get(group_name(image.name))
            if other is not None:
                first, second = sorted((other, image), key=lambda i: i.name)
                raise InvalidInputError(
                    "%s: metadata.name maps to the same inventory group %s as %s; rename one"
                    % (second.where, group_name(image.name), first.where), field="metadata.name")
            seen[image.name] = image
            groups[group_name(image.name)] = image
            self.images.append(image)
        self.by_node = {}
        self.by_value = {}
        self.by_key = {}
        self.unanchored = []
        for image in self.images:
            if image.selector is None:
                self.by_node.setdefault(image.node_name, []).append(image)
                continue
            anchor = image.selector.anchor
            if anchor is None:
                self.unanchored.append(image)
            elif anchor[0] == "value":
                for value in anchor[2]:
                    self.by_value.setdefault((anchor[1], value), []).append(image)
            else:
                self.by_key.setdefault(anchor[1], []).append(image)

    def selector_matches(self, labels):
        """The selector objects whose selectors match ``labels`` (normalized)."""
        found = [i for i in self.unanchored if i.selector.matches(labels)]
        by_value = self.by_value
        by_key = self.by_key
        for item in labels.items():
            for image in by_value.get(item, ()):
                if image.selector.matches(labels):
                    found.append(image)
            for image in by_key.get(item[0], ()):
                if image.selector.matches(labels):
                    found.append(image)
        return found

    def resolve(self, host, labels=None, pool_image=None, defined_vars=None, pool_pull_secret=None,
                pool_transport=None, pool_layered_image=None):
        """Return the assignment for ``host`` as a dict (see the filter's RETURN).

        ``defined_vars`` is a collection of variable names defined for the host; when
        given, a ``pullSecret`` that names none of them is an error.
        """
        if not isinstance(host, str) or not host:
            raise InvalidInputError("the host name must be a non-empty string, got %r" % (host,),
                                    field="host")
        labels = normalize_labels(labels, "fleetos_node_labels of host %s" % host)
        level = "nodeName"
        matches = self.by_node.get(host, [])
        if not matches:
            level = "selector"
            matches = self.selector_matches(labels)
        if len(matches) > 1:
            matches = sorted(matches, key=lambda i: i.name)
            listed = " and ".join("'%s' (%s, %s)" % (m.name, m.defined_in, m.field) for m in matches)
            raise ConflictError(
                "host %s matches %d MachineImages at the %s level: %s; make them disjoint or pin the "
                "host with spec.nodeName" % (host, len(matches), level, listed),
                host=host, objects=[m.name for m in matches])
        if matches:
            return self._from_object(host, level, matches[0], defined_vars)
        return self._from_pool(host, pool_image, defined_vars, pool_pull_secret, pool_transport, pool_layered_image)

    @staticmethod
    def _from_object(host, level, image, defined_vars):
        if image.pull_secret is not None and defined_vars is not None and image.pull_secret not in defined_vars:
            raise InvalidInputError(
                "%s: spec.pullSecret names the variable '%s', which is not defined for host %s"
                % (image.where, image.pull_secret, host), field="spec.pullSecret", host=host)
        if level == "nodeName":
            reason = "MachineImage '%s' (%s) names %s in spec.nodeName" % (image.name, image.defined_in, host)
        else:
            reason = "MachineImage '%s' (%s) selects %s with spec.nodeSelector %s" % (
                image.name, image.defined_in, host, image.selector.text)
        if image.paused:
            reason += "; paused: the rollout skips this host"
        return {
            "source": level,
            "name": image.name,
            "image": image.image,
            "digest": image.digest,
            "layered_image": image.layered_image,
            "pull_secret": image.pull_secret,
            "transport": image.transport,
            "paused": image.paused,
            "defined_in": image.defined_in,
            "reason": reason,
        }

    @staticmethod
    def _from_pool(host, pool_image, defined_vars, pool_pull_secret, pool_transport, pool_layered_image=None):
        ref = transport = None
        if pool_layered_image is not None:
            if pool_image is not None:
                raise InvalidInputError(
                    "host %s: fleetos_pool_image and fleetos_pool_layered_image are both set; give the pool exactly "
                    "one of them" % host, field="fleetos_pool_layered_image", host=host)
            if not layered_image_name(pool_layered_image):
                raise InvalidInputError(
                    "host %s: fleetos_pool_layered_image %r is not a LayeredImage name (its metadata.name, a DNS-1123 "
                    "subdomain)" % (host, pool_layered_image), field="fleetos_pool_layered_image", host=host)
        if pool_image is not None or pool_layered_image is not None:
            if pool_image is not None:
                ref = _pool_image_ref(host, pool_image)
            try:
                transport = _image_ref.parse_transport(pool_transport, field="fleetos_pool_transport")
            except _image_ref.InvalidReferenceError as exc:
                raise InvalidInputError("host %s: fleetos_pool_transport %r %s" % (host, _image_ref.shown(pool_transport), exc.cause),
                                        field="fleetos_pool_transport", host=host) from None
            if pool_pull_secret is not None and defined_vars is not None and pool_pull_secret not in defined_vars:
                raise InvalidInputError(
                    "host %s: fleetos_pool_pull_secret names the variable '%s', which is not defined for the host"
                    % (host, pool_pull_secret), field="fleetos_pool_pull_secret", host=host)
            reason = "no MachineImage names or selects %s; the pool default %s applies" % (
                host, "fleetos_pool_image" if pool_image is not None else
                "fleetos_pool_layered_image (LayeredImage '%s')" % pool_layered_image)
        else:
            reason = "no MachineImage names or selects %s and fleetos_pool_image is not set" % host
        return {
            "source": "pool",
            "name": None,
            "image": ref.image if ref is not None else None,
            "digest": ref.digest if ref is not None else None,
            "layered_image": pool_layered_image,
            "pull_secret": pool_pull_secret if ref is not None or pool_layered_image is not None else None,
            "transport": transport.text if transport is not None else None,
            "paused": False,
            "defined_in": None,
            "reason": reason,
        }


def _pool_image_ref(host, pool_image):
    """The ImageRef of a pool's ``fleetos_pool_image``: parsed and digest-pinned, else InvalidInputError."""
    try:
        ref = _image_ref.parse_image(pool_image, transport_field="fleetos_pool_transport")
    except _image_ref.InvalidReferenceError as exc:
        raise InvalidInputError("host %s: fleetos_pool_image %r %s" % (host, _image_ref.shown(pool_image), exc.cause),
                                field="fleetos_pool_image", host=host) from None
    if not ref.pinned:
        raise InvalidInputError(
            "host %s: fleetos_pool_image %r is not digest-pinned (NAME@sha256:<64 hex>)"
            % (host, pool_image), field="fleetos_pool_image", host=host)
    return ref
