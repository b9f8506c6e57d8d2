# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Legacy oscontainers: safe unpacking of srv/repo from real layer tars, the OCI layout, the ostree client."""

from __future__ import annotations

import functools
import hashlib
import io
import json
import os
import tarfile

import pytest

from ansible_collections.fleetos.layering.tests.unit.plugins.module_utils.utils import FakeModule
from ansible_collections.fleetos.layering.plugins.module_utils._errors import CommandError, ImageError
from ansible_collections.fleetos.layering.plugins.module_utils.host import _deployments
from ansible_collections.fleetos.layering.plugins.module_utils.host._oscontainer import (
    Ostree,
    UnsafeEntryError,
    diff_text,
    extract_repo,
    is_current,
    oci_layers,
    oscontainer_commit,
)

COMMIT = "5d3965ddc23da6be463b043cd818e26108286f028f95f1bdf9806372b17368fd"
DIGEST = "sha256:" + "1b" * 32
GZ = "application/vnd.oci.image.layer.v1.tar+gzip"
TAR = "application/vnd.oci.image.layer.v1.tar"


def layer(path, entries, compress=True):
    """Write a layer tar: entries are (name, kind, data) with kind file/dir/sym/link/fifo."""
    with tarfile.open(str(path), "w:gz" if compress else "w") as tar:
        for name, kind, data in entries:
            info = tarfile.TarInfo(name)
            if kind == "file":
                payload = data.encode() if isinstance(data, str) else data
                info.size = len(payload)
                info.mode = 0o4755 if name.endswith("setuid") else 0o644
                tar.addfile(info, io.BytesIO(payload))
                continue
            if kind == "dir":
                info.type, info.mode = tarfile.DIRTYPE, 0o755
            elif kind == "sym":
                info.type, info.linkname = tarfile.SYMTYPE, data
            elif kind == "link":
                info.type, info.linkname = tarfile.LNKTYPE, data
            elif kind == "fifo":
                info.type = tarfile.FIFOTYPE
            tar.addfile(info)
    return (str(path), GZ if compress else TAR)


def tree(root):
    """{relative path: content or '->target' or '/'} of everything under root."""
    found = {}
    for dirpath, dirs, files in os.walk(str(root)):
        for name in dirs + files:
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, str(root))
            if os.path.islink(path):
                found[rel] = "->" + os.readlink(path)
            elif os.path.isdir(path):
                found[rel] = "/"
            else:
                with open(path) as handle:
                    found[rel] = handle.read()
    return found


BASE = [("srv/", "dir", None), ("srv/repo/", "dir", None), ("srv/repo/config", "file", "[core]\n"),
        ("srv/repo/objects/ab/", "dir", None), ("srv/repo/objects/ab/cd.file", "file", "old"),
        ("srv/repo/objects/ef/x.file", "file", "x"), ("usr/bin/tool", "file", "not the repo"),
        ("./etc/passwd", "file", "root")]


def test_only_srv_repo_entries_are_unpacked_in_layer_order(tmp_path):
    layers = [
        layer(tmp_path / "l1", BASE),
        layer(tmp_path / "l2", [("./srv/repo/objects/ab/cd.file", "file", "new"),
                                ("srv/repo/refs/heads/os", "file", COMMIT)], compress=False),
    ]
    dest = tmp_path / "repo"
    assert extract_repo(layers, str(dest)) is True
    assert tree(dest) == {"config": "[core]\n", "objects": "/", "objects/ab": "/", "objects/ab/cd.file": "new",
                          "objects/ef": "/", "objects/ef/x.file": "x", "refs": "/", "refs/heads": "/",
                          "refs/heads/os": COMMIT}


def test_modes_drop_setuid(tmp_path):
    dest = tmp_path / "repo"
    extract_repo([layer(tmp_path / "l1", [("srv/repo/setuid", "file", "x")])], str(dest))
    assert oct(os.stat(str(dest / "setuid")).st_mode & 0o7777) == oct(0o755)


def test_whiteouts_hide_lower_layers_only(tmp_path):
    layers = [
        layer(tmp_path / "l1", BASE),
        # The whiteout and the file it hides are in the same layer: the new file stays.
        layer(tmp_path / "l2", [("srv/repo/objects/ab/cd.file", "file", "again"),
                                ("srv/repo/objects/ab/.wh.cd.file", "file", ""),
                                ("srv/repo/objects/.wh.ef", "file", "")]),
    ]
    dest = tmp_path / "repo"
    extract_repo(layers, str(dest))
    assert tree(dest) == {"config": "[core]\n", "objects": "/", "objects/ab": "/", "objects/ab/cd.file": "again"}


@pytest.mark.parametrize("whiteout", [
    "srv/repo/.wh..wh..opq", "srv/.wh..wh..opq", "srv/.wh.repo", ".wh.srv", ".wh..wh..opq",
])
def test_whiteout_of_the_repo_or_a_parent_clears_it(tmp_path, whiteout):
    layers = [layer(tmp_path / "l1", BASE),
              layer(tmp_path / "l2", [(whiteout, "file", ""), ("srv/repo/config", "file", "fresh")])]
    dest = tmp_path / "repo"
    extract_repo(layers, str(dest))
    assert tree(dest) == {"config": "fresh"}


def test_unrelated_whiteouts_are_ignored(tmp_path):
    layers = [layer(tmp_path / "l1", BASE),
              layer(tmp_path / "l2", [("srv/.wh.other", "file", ""), ("etc/.wh..wh..opq", "file", ""),
                                      ("srv/repox/.wh.config", "file", "")])]
    dest = tmp_path / "repo"
    extract_repo(layers, str(dest))
    assert tree(dest)["config"] == "[core]\n"
    assert tree(dest)["objects/ab/cd.file"] == "old"


def test_no_repo_in_the_layers(tmp_path):
    dest = tmp_path / "repo"
    assert extract_repo([layer(tmp_path / "l1", [("usr/bin/tool", "file", "x")])], str(dest)) is False
    assert os.listdir(str(dest)) == []


@pytest.mark.parametrize("entries,message", [
    ([("srv/repo/../../../escaped", "file", "evil")], "'..' component"),
    ([("/srv/repo/objects/abs", "file", "evil")], "absolute path"),
    ([("srv/repo/objects/../../../../escaped", "file", "evil")], "'..' component"),
    ([("srv/repo/out", "sym", "../../../escaped")], "points outside the repository"),
    ([("srv/repo/out", "sym", "/etc")], "points outside the repository"),
    ([("srv/repo/hard", "link", "etc/passwd")], "points outside the repository"),
    ([("srv/repo/hard", "link", "srv/repo/../../etc/passwd")], "points outside the repository"),
])
def test_path_traversal_is_rejected(tmp_path, entries, message):
    dest = tmp_path / "work" / "repo"
    with pytest.raises(UnsafeEntryError) as caught:
        extract_repo([layer(tmp_path / "l1", [("srv/repo/config", "file", "x")] + entries)], str(dest))
    assert message in caught.value.msg
    assert not (tmp_path / "escaped").exists()
    assert not (tmp_path / "work" / "escaped").exists()


def test_writing_through_a_lower_layer_link_is_rejected(tmp_path):
    """A link allowed inside the repository cannot become a path out of it in a later layer."""
    outside = tmp_path / "outside"
    outside.mkdir()
    dest = tmp_path / "repo"
    dest.mkdir()
    # A lower layer left a link that points outside (as if an older version had allowed it).
    os.symlink(str(outside), str(dest / "objects"))
    with pytest.raises(UnsafeEntryError) as caught:
        extract_repo([layer(tmp_path / "l1", [("srv/repo/objects/evil", "file", "x")])], str(dest))
    assert "outside the repository through a link" in caught.value.msg
    assert os.listdir(str(outside)) == []


def test_links_inside_the_repository(tmp_path):
    dest = tmp_path / "repo"
    extract_repo([layer(tmp_path / "l1", [
        ("srv/repo/objects/ab/cd.file", "file", "data"),
        ("srv/repo/objects/ab/same.file", "link", "srv/repo/objects/ab/cd.file"),
        ("srv/repo/refs/current", "sym", "../objects/ab/cd.file"),
    ])], str(dest))
    assert tree(dest)["objects/ab/same.file"] == "data"
    assert os.stat(str(dest / "objects/ab/same.file")).st_ino == os.stat(str(dest / "objects/ab/cd.file")).st_ino
    assert tree(dest)["refs/current"] == "->../objects/ab/cd.file"


@pytest.mark.parametrize("entries,message", [
    ([("srv/repo/fifo", "fifo", None)], "device or FIFO"),
    ([("srv/repo/hard", "link", "srv/repo/missing")], "not a file unpacked before"),
])
def test_unsupported_entries(tmp_path, entries, message):
    with pytest.raises(ImageError) as caught:
        extract_repo([layer(tmp_path / "l1", entries)], str(tmp_path / "repo"))
    assert message in caught.value.msg


def test_zstd_and_corrupt_layers(tmp_path):
    with pytest.raises(ImageError) as caught:
        extract_repo([(str(tmp_path / "l1"), GZ + "+zstd")], str(tmp_path / "repo"))
    assert "zstd" in caught.value.msg
    (tmp_path / "bad").write_bytes(b"\x1f\x8b not really gzip")
    with pytest.raises(ImageError) as caught:
        extract_repo([(str(tmp_path / "bad"), GZ)], str(tmp_path / "repo"))
    assert caught.value.msg.startswith("Failed to unpack the ostree repository of the image from layer 'bad'")


# ---------------------------------------------------------------- the OCI layout

def blob(layout, data):
    digest = hashlib.sha256(data).hexdigest()
    path = layout / "blobs" / "sha256" / digest
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return "sha256:" + digest


def test_oci_layers_in_manifest_order(tmp_path):
    layout = tmp_path / "oci"
    first, second = blob(layout, b"one"), blob(layout, b"two")
    manifest = blob(layout, json.dumps({"layers": [{"digest": first, "mediaType": GZ},
                                                   {"digest": second, "mediaType": TAR}]}).encode())
    (layout / "index.json").write_text(json.dumps({"manifests": [
        {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": manifest}]}))
    assert oci_layers(str(layout)) == [
        (str(layout / "blobs" / "sha256" / first.split(":")[1]), GZ),
        (str(layout / "blobs" / "sha256" / second.split(":")[1]), TAR)]


@pytest.mark.parametrize("index,message", [
    (None, "Failed to read the index of the fetched image"),
    ({"manifests": []}, "lists 0 image manifests, not 1"),
    ({"manifests": [{"digest": "sha256:../../etc"}]}, "invalid digest 'sha256:../../etc'"),
])
def test_oci_layout_errors(tmp_path, index, message):
    layout = tmp_path / "oci"
    layout.mkdir()
    if index is not None:
        (layout / "index.json").write_text(json.dumps(index))
    with pytest.raises(ImageError) as caught:
        oci_layers(str(layout))
    assert message in caught.value.msg


# ---------------------------------------------------------------- labels and the next boot

def test_commit_label():
    assert oscontainer_commit("r/i@" + DIGEST, {"com.coreos.ostree-commit": COMMIT}) == COMMIT


@pytest.mark.parametrize("labels,message", [
    ({"ostree.bootable": "true", "ostree.commit": COMMIT},
     "Image 'r/i' is not a legacy oscontainer: it has no label com.coreos.ostree-commit (it is a bootable "
     "container image; rebase to a bootable image with fleetos.layering.rpm_ostree_rebase)."),
    ({}, "Image 'r/i' is not a legacy oscontainer: it has no label com.coreos.ostree-commit (it is an image;"),
    ({"com.coreos.ostree-commit": "main"}, "invalid label com.coreos.ostree-commit 'main'"),
])
def test_commit_label_errors(labels, message):
    with pytest.raises(ImageError) as caught:
        oscontainer_commit("r/i", labels)
    assert message in caught.value.msg


PIVOT = {"reference": "pivot://r/i@" + DIGEST, "transport": "pivot", "digest": DIGEST}


@pytest.mark.parametrize("deployment,current", [
    ({"checksum": COMMIT, "image": PIVOT}, True),
    ({"checksum": "0" * 64, "image": PIVOT}, False),
    ({"checksum": COMMIT, "image": dict(PIVOT, digest="sha256:" + "2c" * 32)}, False),
    ({"checksum": COMMIT, "image": None}, False),
    (None, False),
])
def test_is_current(deployment, current):
    assert is_current(deployment, COMMIT, DIGEST) is current


def test_summary_and_diff_text():
    summary = _deployments.summary({"checksum": COMMIT, "image": PIVOT, "origin": COMMIT}, "origin")
    assert summary == {"reference": PIVOT["reference"], "digest": DIGEST, "checksum": COMMIT, "origin": COMMIT}
    assert diff_text(summary) == "checksum: %s\nreference: %s\ndigest: %s\n" % (COMMIT, PIVOT["reference"], DIGEST)
    assert _deployments.summary(None, "origin") == {"reference": None, "digest": None, "checksum": None, "origin": None}


# ---------------------------------------------------------------- the ostree client

# A module whose ostree is at /usr/bin/ostree.
fake_module = functools.partial(FakeModule, found="/usr/bin/ostree")
ENV = {"environ_update": {"LC_ALL": "C"}, "expand_user_and_vars": False}


@pytest.mark.parametrize("rc,partial,present", [(0, False, True), (1, False, False), (0, True, False)])
def test_has_commit(tmp_path, rc, partial, present):
    if partial:
        (tmp_path / "state").mkdir()
        (tmp_path / "state" / (COMMIT + ".commitpartial")).write_text("")
    module = fake_module([(rc, "", "" if rc == 0 else "error: No such metadata object")])
    assert Ostree(module).has_commit(str(tmp_path), COMMIT) is present
    assert module.calls == [(["/usr/bin/ostree", "show", "--repo=" + str(tmp_path), "--", COMMIT], ENV)]


def test_has_commit_other_failures_raise(tmp_path):
    module = fake_module([(2, "", 'error: opening repo: ENOENT\n')])
    with pytest.raises(CommandError) as caught:
        Ostree(module).has_commit(str(tmp_path), COMMIT)
    assert caught.value.msg == ("Failed to look up commit %s in the repository '%s': opening repo: ENOENT."
                                % (COMMIT, tmp_path))
    assert caught.value.details["rc"] == 2


def test_pull_local_argv_and_error(tmp_path):
    module = fake_module([(0, "4 metadata, 1 content objects imported\n", ""),
                          (1, "", "error: Opening content object x: Couldn't find file object 'x'\n")])
    binary = tmp_path / "ostree"
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    ostree = Ostree(module, str(binary))
    ostree.pull_local("/sysroot/ostree/repo", "/var/tmp/w/repo", COMMIT)
    with pytest.raises(CommandError) as caught:
        ostree.pull_local("/sysroot/ostree/repo", "/var/tmp/w/repo", COMMIT)
    argv = [str(binary), "pull-local", "--repo=/sysroot/ostree/repo", "--untrusted", "--",
            "/var/tmp/w/repo", COMMIT]
    assert module.calls == [(argv, ENV), (argv, ENV)]
    assert caught.value.msg == ("Failed to pull commit %s into the repository '/sysroot/ostree/repo': Opening "
                                "content object x: Couldn't find file object 'x'." % COMMIT)
    assert caught.value.details["rc"] == 1


def test_missing_ostree_binary():
    with pytest.raises(CommandError) as caught:
        Ostree(fake_module([], found=None))
    assert caught.value.msg == ("Failed to find the ostree executable 'ostree' on the target: install ostree "
                                "or set ostree_executable.")
