# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The layered_image lookup: the composed image of a LayeredImage, pinned, from the lock."""

from __future__ import annotations

import pytest

from ansible.errors import AnsibleLookupError
from ansible_collections.fleetos.layering.plugins.lookup.layered_image import layered_images

DIGEST = "sha256:" + "4" * 64
LOCK = """kind: LayeredImageLock
apiVersion: fleetos.io/v1alpha1
images:
  - name: worker
    image: reg.example.com/os/worker@%s
    digest: %s
""" % (DIGEST, DIGEST)


def test_returns_the_pinned_image(tmp_path):
    lock = tmp_path / "layered-images.lock.yml"
    lock.write_text(LOCK)
    assert layered_images(["worker"], str(lock)) == ["reg.example.com/os/worker@" + DIGEST]


@pytest.mark.parametrize("name, text, message", [
    ("infra", LOCK, "The lock {lock} has no LayeredImage 'infra'; it has: worker."),
    ("worker", None, "The lock {lock} does not exist; run compose.yml to write it."),
    ("worker", "kind: Nope\n", "{lock} is not a LayeredImageLock: expected kind LayeredImageLock with a list of images."),
])
def test_fails_with_one_sentence(tmp_path, name, text, message):
    lock = tmp_path / "layered-images.lock.yml"
    if text is not None:
        lock.write_text(text)
    with pytest.raises(AnsibleLookupError) as info:
        layered_images([name], str(lock))
    assert str(info.value) == message.format(lock=lock)
