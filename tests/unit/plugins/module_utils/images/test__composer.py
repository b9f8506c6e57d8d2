# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The compose engine's own parts: its input checked before any request, tags in version order, the blob cache.

The composition against a registry is os_image_compose's (tests/unit/plugins/modules/test_os_image_compose.py)."""

from __future__ import annotations

import os

import pytest

from ansible_collections.fleetos.layering.plugins.module_utils._errors import InvalidInputError
from ansible_collections.fleetos.layering.plugins.module_utils.images._composer import (
    BlobCache,
    _version_key,
    check_params,
)

REG = "198.51.100.1:5000"
DIGEST = "sha256:" + "5e" * 32


def params(**changes):
    """os_image_compose's options: a base, one layer, an output repository."""
    given = dict(base=REG + "/os/base:1.0", output=REG + "/os/worker", tag=None, retries=0, retry_delay=0,
                 layers=[dict(name="kubelet", image=REG + "/os/kubelet:1.31.4")], ca_cert_dir=None,
                 layer_cache_dir=None)
    given.update(changes)
    return given


def test_the_inputs_as_parsed_references():
    requires = {"labels": {"ostree.linux": "6.0", "abi": 2}}
    layers = [dict(name="kubelet", image=REG + "/os/kubelet@" + DIGEST, requires=requires),
              dict(name="ovs_3.4-x", image="docker://%s/os/ovs:3.4" % REG)]
    base, parsed, output, tag = check_params(params(base=REG + "/os/base@" + DIGEST, layers=layers, tag="v1.2-rc_3"))
    assert (base.name, base.digest, output.name, tag) == (REG + "/os/base", DIGEST, REG + "/os/worker", "v1.2-rc_3")
    assert [(layer["name"], ref.image) for layer, ref in parsed] == [
        ("kubelet", REG + "/os/kubelet@" + DIGEST), ("ovs_3.4-x", REG + "/os/ovs:3.4")]
    assert parsed[0][0] is layers[0]
    assert check_params(params())[3] is None


@pytest.mark.parametrize(("change", "message"), [
    (dict(base="ostree-unverified-registry:%s/os/base:1.0" % REG), "choose the transport with the rollout, not in base"),
    (dict(layers=[dict(name="k", image="ostree-image-signed:docker://%s/os/k:1" % REG)]),
     "choose the transport with the rollout, not in layers[0].image"),
    (dict(output=REG + "/os/worker@" + DIGEST), "... (99 characters)' names a tag or digest: expected a repository"),
    (dict(tag="v" * 129), "... (129 characters)' is not a tag"),
    (dict(tag="a@b"), "The option tag 'a@b' is not a tag"),
    (dict(layers=[dict(name="k", image=REG + "/os/k:1"), dict(name="x" * 64, image=REG + "/os/x:1")]),
     "The option layers[1].name '%s... (64 characters)' is invalid: expected lowercase" % ("x" * 36)),
    (dict(layers=[dict(name="k", image=REG + "/os/k:1", requires={"labels": {"gpu": True}})]),
     "The option layers[0].requires.labels.gpu must be a string, got bool."),
    (dict(layers=[dict(name="k", image=REG + "/os/k:1", requires={"labels": {"gpu": ["a"]}})]),
     "The option layers[0].requires.labels.gpu must be a string, got list."),
    (dict(retries=-1), "The option retries -1 is negative: expected 0 or more."),
    (dict(retry_delay=-2), "The option retry_delay -2 is negative: expected 0 or more."),
])
def test_bad_input_is_refused_naming_the_option(change, message):
    with pytest.raises(InvalidInputError) as caught:
        check_params(params(**change))
    assert message in caught.value.msg


def test_the_certificate_directory_must_exist_the_cache_directory_may_not_yet(tmp_path):
    missing, a_file = tmp_path / "missing", tmp_path / "file"
    a_file.write_text("")
    assert check_params(params(ca_cert_dir=str(tmp_path), layer_cache_dir=str(missing)))[3] is None
    for option, path, said in (("ca_cert_dir", missing, "does not exist"), ("ca_cert_dir", a_file, "is not a directory"),
                               ("layer_cache_dir", a_file, "is not a directory")):
        with pytest.raises(InvalidInputError) as caught:
            check_params(params(**{option: str(path)}))
        assert caught.value.msg.startswith("%s '%s' %s" % (option, path, said))


def test_tags_sort_as_versions():
    tags = ["1.9", "1.10", "1.9.1", "latest", "1.2-rc1", "1.2-rc10", "1.2-rc2", "2"]
    assert sorted(tags, key=_version_key) == ["1.2-rc1", "1.2-rc2", "1.2-rc10", "1.9", "1.9.1", "1.10", "2", "latest"]


def test_the_compose_cache_leaves_no_temporary_file_when_it_cannot_write(tmp_path, monkeypatch):
    cache = BlobCache(str(tmp_path))
    cache.put("config", b"{}", "sha256:" + "ab" * 32)
    assert cache.get("config", "sha256:" + "ab" * 32) == b"{}"

    def refuse(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", refuse)
    monkeypatch.setattr(os, "rename", refuse)
    cache.put("config", b"{}", "sha256:" + "cd" * 32)  # a cache that cannot be written is not an error
    assert cache.get("config", "sha256:" + "cd" * 32) is None
    assert os.listdir(tmp_path / "config") == ["sha256-" + "ab" * 32]
