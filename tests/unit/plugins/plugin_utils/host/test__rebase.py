# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The stage step of an rpm-ostree host, its decisions: the pinned reference to rebase to, whether a deployment
runs it already, the input refused before anything runs. The rebase on a host runs through the task:
tests/unit/plugins/action/test_rpm_ostree_rebase.py."""

from __future__ import annotations

import pytest

from ansible_collections.fleetos.layering.tests.unit.plugins.module_utils.utils import LocalHost
from ansible_collections.fleetos.layering.plugins.module_utils._errors import InvalidInputError
from ansible_collections.fleetos.layering.plugins.module_utils.images._image_ref import parse
from ansible_collections.fleetos.layering.plugins.plugin_utils.host._rebase import (
    check_input,
    diff_text,
    reached,
    target_reference,
)

IMAGE = "198.51.100.1:5000/fleetos/lab-os"
INDEX = "sha256:" + "1a" * 32
AMD = "sha256:" + "3d" * 32
OTHER = "sha256:" + "2c" * 32


class Registry:
    """What the registry says of the target (as _skopeo.Resolver reads it with skopeo); ``asked`` counts the reads."""

    def __init__(self, digest=INDEX, platform=AMD):
        self.digest = digest
        self.platform = platform
        self.asked = 0

    def __call__(self, ref):
        self.asked += 1
        return {"digest": self.digest, "platform_digests": {"amd64": self.platform}}

    def platform_digest(self, ref):
        return self(ref)["platform_digests"]["amd64"]


def params(image, transport="registry", ostree_remote=None, allow_tag=False):
    return {"image": image, "transport": transport, "ostree_remote": ostree_remote, "allow_tag": allow_tag}


@pytest.mark.parametrize(("given", "reference"), [
    (params(IMAGE + "@" + AMD), "ostree-unverified-registry:%s@%s" % (IMAGE, AMD)),
    (params(IMAGE + ":stable@" + AMD), "ostree-unverified-registry:%s@%s" % (IMAGE, AMD)),  # the tag is dropped
    (params(IMAGE + "@" + AMD, "signed"), "ostree-image-signed:docker://%s@%s" % (IMAGE, AMD)),
    (params(IMAGE + "@" + AMD, "remote", "fleet"), "ostree-remote-image:fleet:docker://%s@%s" % (IMAGE, AMD)),
])
def test_a_pinned_image_is_its_own_target_and_the_registry_is_not_asked(given, reference):
    registry = Registry()
    assert target_reference(given, registry).format() == reference
    assert registry.asked == 0


def test_a_tag_is_resolved_to_the_digest_the_registry_names_only_with_allow_tag():
    registry = Registry()
    ref = target_reference(params(IMAGE + ":stable", "signed", allow_tag=True), registry)
    assert (ref.format(), ref.tag, registry.asked) == ("ostree-image-signed:docker://%s@%s" % (IMAGE, INDEX), None, 1)
    with pytest.raises(InvalidInputError) as caught:
        target_reference(params(IMAGE + ":stable"), registry)
    assert caught.value.msg == ("image '%s:stable' has no digest: give %s@sha256:<64 hex digits>, or set allow_tag: "
                                "true to resolve the tag to a digest on the host." % (IMAGE, IMAGE))
    assert registry.asked == 1


def deployment(digest, manifest=None):
    return {"checksum": "c0" * 32, "image": {"reference": IMAGE + "@" + digest, "digest": digest,
                                             "manifest_digest": manifest}}


@pytest.mark.parametrize(("found", "platform", "expected", "asked"), [
    (deployment(INDEX, AMD), AMD, True, 0),      # at the digest the reference pins
    (deployment(AMD, AMD), AMD, True, 1),        # at the index's entry for this host
    (deployment(AMD, AMD), OTHER, False, 1),     # at another platform's manifest
    (deployment(OTHER, OTHER), AMD, False, 1),
    ({"checksum": "c0" * 32, "image": None}, AMD, False, 0),  # an ostree origin: nothing to compare
    (None, AMD, False, 0),
])
def test_reached(found, platform, expected, asked):
    registry = Registry(platform=platform)
    assert reached(found, parse("ostree-unverified-registry:%s@%s" % (IMAGE, INDEX)), registry) is expected
    assert registry.asked == asked


def test_diff_text():
    assert diff_text({"reference": "ostree-unverified-registry:%s@%s" % (IMAGE, AMD), "digest": AMD, "checksum": "c"}) \
        == "reference: ostree-unverified-registry:%s@%s\ndigest: %s\n" % (IMAGE, AMD, AMD)


@pytest.mark.parametrize(("change", "message"), [
    (dict(retries=-1), "retries -1 is negative: expected 0 or more."),
    (dict(retry_delay=-5), "retry_delay -5 is negative: expected 0 or more."),
    (dict(auth_file="{tmp}"), "auth_file '{tmp}' does not exist or is not a regular file."),
])
def test_bad_input_is_refused_before_anything_runs(tmp_path, change, message):
    given = dict({"retries": 0, "retry_delay": 0, "auth_file": None}, **change)
    if given["auth_file"]:
        given["auth_file"] = given["auth_file"].format(tmp=tmp_path)
    host = LocalHost()
    with pytest.raises(InvalidInputError) as caught:
        check_input(host, given)
    assert caught.value.msg == message.format(tmp=tmp_path)
    assert all(argv[0] == "test" for argv in host.argvs)


def test_good_input_passes(tmp_path):
    auth_file = tmp_path / "auth.json"
    auth_file.write_text("{}")
    check_input(LocalHost(), {"retries": 0, "retry_delay": 3, "auth_file": str(auth_file)})
    check_input(LocalHost(), {"retries": 5, "retry_delay": 0, "auth_file": None})
