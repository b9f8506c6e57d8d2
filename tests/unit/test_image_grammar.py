# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""One image grammar: every place that reads a user's image gives the same verdict.

Each reference below has one verdict: is it a valid plain image (what a user writes in
``spec.image`` of a MachineImage with ``allowTag: true``, or in the ``image`` option of
``rpm_ostree_rebase`` with ``allow_tag: true``)? Every verdict function in
``VERDICTS`` must agree with it, and a refusal must give ``_image_ref``'s reason.

``_image_ref.parse`` also reads the references rpm-ostree itself shows
(``ostree-image-signed:docker://...``): as a plain image, a reference that names an
rpm-ostree transport is refused (the transport is chosen separately), so its verdict
here is "parses, and names no rpm-ostree transport".
"""

from __future__ import annotations

import importlib

import pytest

from ansible_collections.fleetos.layering.plugins.module_utils.images import _image_ref
from ansible_collections.fleetos.layering.plugins.plugin_utils.images import _machine_image
from ansible_collections.fleetos.layering.plugins.module_utils._errors import FleetosError
from ansible_collections.fleetos.layering.plugins.plugin_utils.host import _rebase as rpm_ostree_rebase

D = "sha256:" + "5e" * 32
RESOLVED = "sha256:" + "7a" * 32
OK, BAD = "ok", "bad"

# reference, verdict
CASES = [
    ("quay.io/fedora/fedora-coreos@" + D, OK),
    ("198.51.100.1:5000/fleetos/lab-os@" + D, OK),              # IPv4 host and port
    ("localhost:5000/os@" + D, OK),
    ("localhost/os:1", OK),                                      # a tag (allowTag)
    ("registry.example.com:443/a/b/c:40", OK),
    ("Registry.Example.COM/os@" + D, OK),                        # upper-case host: DNS is case-insensitive
    ("[fd00::1]:5000/os@" + D, OK),                              # IPv6 host and port
    ("[2001:db8::1]/os:1", OK),
    ("fedora@" + D, OK),                                         # short Docker Hub name
    ("fedora:40", OK),
    ("library/fedora:40", OK),
    ("quay.io/os:40@" + D, OK),                                  # tag and digest: the digest decides
    ("docker://quay.io/os@" + D, OK),                            # docker:// is accepted and dropped
    ("quay.io/a__b/c-d.e@" + D, OK),                             # separators
    ("REG//repo@" + D, BAD),                                     # upper-case name and double slash
    ("quay.io//repo@" + D, BAD),                                 # double slash
    ("MyRegistry/os@" + D, BAD),                                 # no dot: a Docker Hub repository, upper-case
    ("quay.io/Fedora/os@" + D, BAD),                             # upper-case repository
    ("quay.io/os@sha256:abc", BAD),                              # short digest
    ("quay.io/os@sha256:" + "A" * 64, BAD),                      # upper-case hex
    ("quay.io/os@sha512:" + "0" * 128, BAD),                     # another algorithm
    ("quay.io/os@" + D + "@" + D, BAD),                          # two digests
    ("quay.io/os:@" + D, BAD),                                   # empty tag
    ("quay.io/os:-1", BAD),                                      # tag starting with '-'
    ("quay.io:99999/os@" + D, BAD),                              # port out of range
    ("[fd00::zz]:5000/os@" + D, BAD),                            # not an IPv6 address
    (" quay.io/os@" + D, BAD),                                   # whitespace
    ("quay.io/os@" + D + "\n", BAD),
    ("ostree-unverified-registry:quay.io/os@" + D, BAD),         # transport prefixes: chosen separately
    ("ostree-image-signed:docker://quay.io/os@" + D, BAD),
    ("ostree-remote-image:fleet:docker://quay.io/os@" + D, BAD),
    ("ostree-bogus:quay.io/os@" + D, BAD),                       # unknown transport
    ("ostree-remote-image::docker://quay.io/os@" + D, BAD),      # remote without a name
    ("ostree-remote-image:docker://quay.io/os@" + D, BAD),
    ("oci:/var/lib/os", BAD),                                    # other containers-image transports
    ("containers-storage:quay.io/os@" + D, BAD),
    ("https://quay.io/os@" + D, BAD),
    ("quay.io/", BAD),                                           # no repository
    ("", BAD),
]


def _machine_image_object(image):
    return {"apiVersion": "fleetos.io/v1alpha1", "kind": "MachineImage",
            "metadata": {"name": "grammar", "annotations": {"fleetos.io/defined-in": "grammar.yaml document 1"}},
            "spec": {"image": image, "nodeName": "n1", "allowTag": True}}


def _rebase_params(image):
    return {"image": image, "transport": "registry", "ostree_remote": None, "allow_tag": True, "auth_file": None}


# Each verdict function takes the reference and returns the parsed image as
# (name, digest), or raises; a tag is resolved to RESOLVED where the function resolves tags.
def verdict_image_ref_parse(text):
    ref = _image_ref.parse(text)
    if ref.transport is not None:
        raise _image_ref.InvalidReferenceError(text, "names an rpm-ostree transport")
    return ref.name, ref.digest


def verdict_image_ref_parse_image(text):
    ref = _image_ref.parse_image(text)
    return ref.name, ref.digest


def verdict_machine_image(text):
    image = _machine_image.validate(_machine_image_object(text))
    return _image_ref.parse(image.image).name, image.digest


def _resolve_tag(ref):
    """Stands for the module's resolver (skopeo on the host): a tag resolves to RESOLVED."""
    return {"digest": RESOLVED}


def verdict_rpm_ostree_rebase(text):
    ref = rpm_ostree_rebase.target_reference(_rebase_params(text), _resolve_tag)
    return ref.name, ref.digest


# ---- verdict functions -------------------------------------------------------------------
# Every reader of a user's image goes here. The controller planner joins when it exists:
# plugin_utils.rollout._plan.check_image(text) raises (or returns False) for a refused image.
VERDICTS = [
    ("module_utils.images._image_ref.parse", verdict_image_ref_parse),
    ("module_utils.images._image_ref.parse_image", verdict_image_ref_parse_image),
    ("plugin_utils.images._machine_image.validate", verdict_machine_image),
    ("plugin_utils.host._rebase.target_reference", verdict_rpm_ostree_rebase),
]

PLAN_MODULE = "ansible_collections.fleetos.layering.plugins.plugin_utils.rollout._plan"


def _planner():
    try:
        return importlib.import_module(PLAN_MODULE)
    except ModuleNotFoundError as exc:
        if exc.name not in (PLAN_MODULE, PLAN_MODULE.rsplit(".", 1)[0]):
            raise
        return None


_PLAN = _planner()
if _PLAN is not None and callable(getattr(_PLAN, "check_image", None)):
    def verdict_plan(text):
        if _PLAN.check_image(text) is False:
            raise _image_ref.InvalidReferenceError(text, "is refused by check_image")
        return None

    VERDICTS.append(("plugin_utils.rollout._plan.check_image", verdict_plan))
# ---- end of verdict functions ------------------------------------------------------------


def _verdict(function, text):
    try:
        return OK, function(text)
    except (FleetosError, ValueError) as exc:
        return BAD, getattr(exc, "msg", str(exc))


def test_the_table_covers_both_verdicts():
    assert {verdict for _text, verdict in CASES} == {OK, BAD}
    assert len({text for text, _verdict in CASES}) == len(CASES)


@pytest.mark.parametrize(("text", "expected"), CASES, ids=["%02d-%s" % (i, v) for i, (_t, v) in enumerate(CASES)])
def test_every_reader_gives_the_same_verdict(text, expected):
    verdicts = {name: _verdict(function, text) for name, function in VERDICTS}
    assert {name: verdict for name, (verdict, _value) in verdicts.items()} == {name: expected for name in verdicts}
    if expected == OK:
        # The same image: the same name, and the same digest (a tag is resolved by the module only).
        ref = _image_ref.parse(text)
        for name in ("module_utils.images._image_ref.parse", "module_utils.images._image_ref.parse_image",
                     "plugin_utils.images._machine_image.validate"):
            assert verdicts[name][1] == (ref.name, ref.digest), name
        assert verdicts["plugin_utils.host._rebase.target_reference"][1] == (ref.name, ref.digest or RESOLVED)


@pytest.mark.parametrize("text", [text for text, verdict in CASES if verdict == BAD and text])
def test_a_refusal_gives_the_grammar_reason(text):
    """MachineImage and rpm_ostree_rebase refuse with _image_ref's own cause, naming their own field."""
    with pytest.raises(_image_ref.InvalidReferenceError) as grammar:
        _image_ref.parse_image(text, transport_field="spec.transport")
    with pytest.raises(FleetosError) as machine_image:
        _machine_image.validate(_machine_image_object(text))
    assert machine_image.value.msg == "grammar.yaml document 1 (MachineImage 'grammar'): spec.image %r %s" % (
        _image_ref.shown(text), grammar.value.cause)
    with pytest.raises(_image_ref.InvalidReferenceError) as module_option:
        verdict_rpm_ostree_rebase(text)
    with pytest.raises(_image_ref.InvalidReferenceError) as option_grammar:
        _image_ref.parse_image(text, transport_field="the transport option")
    assert module_option.value.msg == option_grammar.value.msg
