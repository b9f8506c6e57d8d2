# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""One deployment as both backends report it: its digest, whether it runs an image, its summary."""

from __future__ import annotations

import pytest

from ansible_collections.fleetos.layering.plugins.module_utils.host._deployments import (
    SUMMARY_EXTRAS,
    deployment_digest,
    has_digest,
    manifest_digest,
    status_digest,
    summary,
)

INDEX = "sha256:" + "5e" * 32
MANIFEST = "sha256:" + "7a" * 32
CHECKSUM = "c0" * 32
DEPLOYMENT = {"checksum": CHECKSUM, "origin": "ostree-image-signed:docker://quay.io/os@" + INDEX,
              "download_only": True,
              "image": {"reference": "quay.io/os@" + INDEX, "transport": "registry", "digest": INDEX,
                        "manifest_digest": MANIFEST}}


@pytest.mark.parametrize(("image", "digest", "expected"), [
    ({"digest": INDEX, "manifest_digest": MANIFEST}, INDEX, True),      # the index digest the reference pins
    ({"digest": INDEX, "manifest_digest": MANIFEST}, MANIFEST, True),   # the manifest digest the tool reports
    ({"digest": INDEX, "manifest_digest": INDEX}, MANIFEST, False),
    ({"digest": None, "manifest_digest": None}, None, False),
    (None, INDEX, False),                                               # an ostree origin: no image
])
def test_has_digest(image, digest, expected):
    assert has_digest({"image": image}, digest) is expected


def test_no_deployment_has_no_digest():
    assert has_digest(None, INDEX) is False
    assert deployment_digest(None) is None
    assert deployment_digest({"checksum": CHECKSUM, "image": None}) is None
    assert deployment_digest(DEPLOYMENT) == INDEX
    # What a read that went wrong may give: no mapping, an image that is not one, an empty digest.
    assert has_digest("booted", INDEX) is False and has_digest({"image": "quay.io/os"}, INDEX) is False
    assert deployment_digest({"image": {"digest": ""}}) is None and deployment_digest(["x"]) is None


def test_the_manifest_digest_a_deployment_reports_else_its_digest():
    assert manifest_digest(DEPLOYMENT) == MANIFEST
    assert manifest_digest({"image": {"digest": INDEX, "manifest_digest": None}}) == INDEX
    assert manifest_digest(None) is None


def test_the_digest_of_a_deployment_of_a_read_by_its_role():
    status = {"booted": DEPLOYMENT, "staged": None, "rollback": {"checksum": CHECKSUM, "image": None}}
    assert status_digest(status, "booted") == INDEX
    # Nothing staged; a rollback deployment from an ostree origin; a read that failed.
    assert status_digest(status, "staged") is None and status_digest(status, "rollback") is None
    assert status_digest(None, "booted") is None and status_digest({"booted": "x"}, "booted") is None


def test_summary_with_the_extras_asked_for():
    base = {"reference": "quay.io/os@" + INDEX, "digest": INDEX, "checksum": CHECKSUM}
    assert summary(DEPLOYMENT) == base
    assert summary(DEPLOYMENT, "transport", "download_only") == dict(base, transport="registry", download_only=True)
    assert summary(DEPLOYMENT, "origin") == dict(base, origin=DEPLOYMENT["origin"])
    assert summary(None, *SUMMARY_EXTRAS) == {"reference": None, "digest": None, "checksum": None,
                                              "transport": None, "download_only": False, "origin": None}
    with pytest.raises(KeyError):
        summary(DEPLOYMENT, "kargs")
