# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""_bootc: the status parser against the host-v1 schema, image targets, OCI layouts read on a host, the busy
probe against locks held for real, auth files."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from ansible_collections.fleetos.layering.tests.unit.plugins.module_utils.utils import LocalHost
from ansible_collections.fleetos.layering.plugins.module_utils.host import _bootc
from ansible_collections.fleetos.layering.plugins.module_utils._errors import (
    CommandError,
    ImageError,
    InvalidInputError,
    TransactionBusyError,
)

SHARED = Path(os.environ.get("FLEETOS_SHARED", str(Path(__file__).resolve().parents[6] / "shared")))
SCHEMA = SHARED / "reference" / "fixtures" / "bootc-status__bootc-docs__host-v1.schema.json"
D = "sha256:" + "5e" * 32
OTHER = "sha256:" + "7a" * 32

# ---------------------------------------------------------------- the host-v1 schema

# Every property of the schema's objects -> where parse_status reports it (a path into the
# result, "entry.KEY" for a boot entry), or None for a property that only decides another one.
REPORTED = {
    ("Host", "apiVersion"): "api_version",
    ("Host", "spec"): None,
    ("Host", "status"): None,
    ("HostSpec", "image"): "spec_image",
    ("HostSpec", "bootOrder"): "rollback_queued",
    ("HostStatus", "booted"): "booted",
    ("HostStatus", "staged"): "staged",
    ("HostStatus", "rollback"): "rollback",
    ("HostStatus", "otherDeployments"): "deployments",
    ("HostStatus", "readOnly"): "read_only",
    ("HostStatus", "rollbackQueued"): "rollback_queued",
    ("HostStatus", "type"): "type",
    ("HostStatus", "usrOverlay"): "usr_overlay",
    ("BootEntry", "cachedUpdate"): "entry.cached_update",
    ("BootEntry", "composefs"): "entry.composefs_verity",
    ("BootEntry", "downloadOnly"): "entry.download_only",
    ("BootEntry", "image"): "entry.image",
    ("BootEntry", "incompatible"): "entry.incompatible",
    ("BootEntry", "ostree"): None,
    ("BootEntry", "pinned"): "entry.pinned",
    ("BootEntry", "softRebootCapable"): "entry.soft_reboot_capable",
    ("BootEntryOstree", "checksum"): "entry.checksum",
    ("BootEntryOstree", "deploySerial"): "entry.deploy_serial",
    ("BootEntryOstree", "stateroot"): "entry.stateroot",
    ("BootEntryComposefs", "verity"): "entry.composefs_verity",
    ("ImageStatus", "architecture"): "entry.architecture",
    ("ImageStatus", "image"): "entry.image.reference",
    ("ImageStatus", "imageDigest"): "entry.image.manifest_digest",
    ("ImageStatus", "timestamp"): "entry.timestamp",
    ("ImageStatus", "version"): "entry.version",
    ("ImageReference", "image"): "entry.image.reference",
    ("ImageReference", "transport"): "entry.image.transport",
    ("ImageReference", "signature"): "entry.image.signature",
}


@pytest.fixture(scope="module")
def schema():
    if not SCHEMA.is_file():
        pytest.skip("the host-v1 schema is read from %s, which is absent" % SCHEMA)
    return json.loads(SCHEMA.read_text(encoding="utf-8"))


def test_every_schema_field_is_reported_or_deliberately_ignored(schema):
    objects = {"Host": schema}
    objects.update({name: definition for name, definition in schema["$defs"].items()
                    if name in _bootc.IGNORED_FIELDS})
    missing = []
    for name, definition in objects.items():
        for field in definition.get("properties", {}):
            if (name, field) not in REPORTED and field not in _bootc.IGNORED_FIELDS[name]:
                missing.append("%s.%s" % (name, field))
    assert missing == []
    # Every object a boot entry or the status is made of is looked at.
    assert set(_bootc.IGNORED_FIELDS) >= {"HostStatus", "BootEntry", "ImageStatus", "ImageReference",
                                          "BootEntryOstree", "BootEntryComposefs", "HostSpec"}


def _full_entry(digest, checksum, **extra):
    """A boot entry with every schema property set to a distinct value."""
    entry = {
        "image": {"image": {"image": "quay.io/example/os:1", "transport": "registry",
                            "signature": {"ostreeRemote": "fleet"}},
                  "imageDigest": digest, "architecture": "arm64", "version": "9.1",
                  "timestamp": "2025-01-02T03:04:05Z"},
        "cachedUpdate": {"image": {"image": "quay.io/example/os:1", "transport": "registry"},
                         "imageDigest": OTHER, "version": "9.2", "architecture": "arm64"},
        "incompatible": True, "pinned": True, "downloadOnly": True, "softRebootCapable": True,
        "store": "ostreeContainer",
        "ostree": {"checksum": checksum, "deploySerial": 3, "stateroot": "rhel"},
        "composefs": {"verity": "f" * 64, "bootType": "Bls", "bootloader": "grub", "missingVerityAllowed": False},
    }
    entry.update(extra)
    return entry


def test_a_status_with_every_schema_field_is_read_whole():
    doc = {"apiVersion": "org.containers.bootc/v1", "kind": "BootcHost", "metadata": {"name": "host"},
           "spec": {"image": {"image": "quay.io/example/os:1", "transport": "registry", "signature": "insecure"},
                    "bootOrder": "rollback"},
           "status": {"booted": _full_entry(D, "b" * 64), "staged": _full_entry(OTHER, "s" * 64),
                      "rollback": None, "otherDeployments": [_full_entry(D, "o" * 64)], "readOnly": True,
                      "rollbackQueued": False, "type": "bootcHost",
                      "usrOverlay": {"accessMode": "readOnly", "persistence": "transient"}}}
    result = _bootc.parse_status(doc)
    booted = result["booted"]
    assert booted["image"] == {"reference": "quay.io/example/os:1", "transport": "registry",
                               "name": "quay.io/example/os", "tag": "1", "digest": D, "manifest_digest": D,
                               "signature": "ostreeRemote:fleet"}
    assert (booted["architecture"], booted["version"], booted["timestamp"]) == ("arm64", "9.1", "2025-01-02T03:04:05Z")
    assert (booted["checksum"], booted["deploy_serial"], booted["stateroot"]) == ("b" * 64, 3, "rhel")
    assert booted["composefs_verity"] == "f" * 64
    assert (booted["pinned"], booted["incompatible"], booted["download_only"], booted["soft_reboot_capable"]) == (
        True, True, True, True)
    assert booted["cached_update"] == {"digest": OTHER, "version": "9.2"}
    # The staged entry's cached update is its own image: nothing newer.
    assert result["staged"]["cached_update"] is None and result["cached_update"] is None
    assert [d["checksum"] for d in result["deployments"]] == ["s" * 64, "b" * 64, "o" * 64]
    assert result["rollback_queued"] is True          # spec.bootOrder: rollback
    assert result["reboot_required"] is True          # the queued rollback, whatever is staged
    assert result["read_only"] is True and result["type"] == "bootcHost"
    assert result["usr_overlay"] == {"access_mode": "readOnly", "persistence": "transient"}
    assert result["spec_image"]["signature"] == "insecure"
    assert result["api_version"] == "org.containers.bootc/v1"


def _doc(staged=None, rollback_queued=False):
    status = {"booted": _full_entry(D, "b" * 64, downloadOnly=False), "staged": staged, "rollback": None,
              "rollbackQueued": rollback_queued}
    return {"apiVersion": "org.containers.bootc/v1", "kind": "BootcHost", "metadata": {"name": "host"},
            "spec": {"image": None}, "status": status}


@pytest.mark.parametrize(("staged", "rollback_queued", "expected"), [
    (None, False, False),
    (_full_entry(OTHER, "s" * 64, downloadOnly=False), False, True),
    # Download-only: an ordinary reboot boots the booted deployment again.
    (_full_entry(OTHER, "s" * 64, downloadOnly=True), False, False),
    (_full_entry(OTHER, "s" * 64, downloadOnly=True), True, True),
])
def test_reboot_required_is_whether_the_next_boot_changes_the_deployment(staged, rollback_queued, expected):
    result = _bootc.parse_status(_doc(staged, rollback_queued))
    assert result["reboot_required"] is expected
    assert (result["staged"] is not None) is (staged is not None)
    if staged is not None:
        assert result["staged"]["download_only"] is staged["downloadOnly"]


# ---------------------------------------------------------------- pure functions

@pytest.mark.parametrize(("image", "transport", "expected"), [
    ("quay.io/os@" + D, "registry", {"name": "quay.io/os", "tag": None, "digest": D}),
    ("quay.io/os:1@" + D, "containers-storage", {"name": "quay.io/os", "tag": "1", "digest": D}),
    ("/var/tmp/layout:stable", "oci", {"name": "/var/tmp/layout", "tag": "stable", "digest": None}),
    ("/var/tmp/os.tar", "oci-archive", {"name": "/var/tmp/os.tar", "tag": None, "digest": None}),
])
def test_split_image(image, transport, expected):
    assert _bootc.split_image(image, transport) == expected


@pytest.mark.parametrize(("status", "expected"), [
    ({"rollback_queued": True, "rollback": "R", "staged": "S", "booted": "B"}, "R"),
    ({"rollback_queued": False, "rollback": "R", "staged": "S", "booted": "B"}, "S"),
    ({"rollback_queued": False, "rollback": "R", "staged": None, "booted": "B"}, "B"),
    ({"rollback_queued": True, "rollback": None, "staged": None, "booted": "B"}, "B"),
])
def test_next_boot(status, expected):
    assert _bootc.next_boot(status) == expected


def _params(**overrides):
    params = {"image": "quay.io/os@" + D, "transport": "registry", "digest": None, "allow_tag": False}
    params.update(overrides)
    return params


def _no_resolve(ref):
    raise AssertionError("nothing should be resolved")


@pytest.mark.parametrize(("params", "message"), [
    (_params(transport="docker-daemon"), "transport 'docker-daemon' is not a bootc transport"),
    (_params(image="quay.io/os:1"), "image 'quay.io/os:1' has no digest: give quay.io/os@sha256"),
    (_params(image="quay.io/os:1", transport="containers-storage", allow_tag=True),
     "a containers-storage image is pinned by digest only"),
    (_params(digest=D), "digest is only for the oci and oci-archive transports"),
    (_params(image="ostree-unverified-registry:quay.io/os@" + D), "already names an rpm-ostree transport"),
    (_params(image="relative/layout", transport="oci", digest=D), "expected /PATH[:REFERENCE]"),
    (_params(image="/layout", transport="oci"), "oci image '/layout' names no digest"),
    (_params(image="/layout", transport="oci", digest="sha256:abc"), "digest 'sha256:abc' is not a digest"),
])
def test_target_image_refuses_bad_input(params, message):
    host = LocalHost()
    with pytest.raises(InvalidInputError) as caught:
        _bootc.target_image(params, _no_resolve, host)
    assert host.argvs == []
    assert message in caught.value.msg


def test_target_image_pins_registry_images():
    assert _bootc.target_image(_params(image="quay.io/os:1@" + D), _no_resolve) == ("quay.io/os@" + D, D)
    resolved = _bootc.target_image(_params(image="quay.io/os:1", allow_tag=True), lambda ref: OTHER)
    assert resolved == ("quay.io/os@" + OTHER, OTHER)


def _layout(directory, *entries):
    directory.mkdir(parents=True, exist_ok=True)
    index = {"schemaVersion": 2, "manifests": [
        {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": digest, "size": 1,
         "annotations": {"org.opencontainers.image.ref.name": name} if name else {}} for name, digest in entries]}
    (directory / "index.json").write_text(json.dumps(index))
    return directory


def _archive(path, directory):
    with tarfile.open(path, "w") as archive:
        archive.add(directory / "index.json", arcname="index.json")
    return path


def test_oci_layouts_name_their_digest(tmp_path):
    host = LocalHost()
    layout = _layout(tmp_path / "layout", ("stable", D), ("next", OTHER))
    archive = _archive(tmp_path / "os.tar", layout)
    assert _bootc.oci_layout_digest(host, "%s:next" % layout, "oci") == OTHER
    assert _bootc.oci_layout_digest(host, "%s:stable" % archive, "oci-archive") == D
    # The host's own tools read index.json: cat (through the read script) and tar.
    assert host.argvs[0][:2] == ["sh", "-c"] and host.argvs[0][4:] == [str(layout) + "/index.json"]
    assert host.argvs[1] == ["tar", "-x", "-O", "-f", str(archive), "index.json"]
    assert _bootc.target_image(_params(image="%s:stable" % layout, transport="oci", digest=D), _no_resolve,
                               host) == ("%s:stable" % layout, D)
    assert _bootc.target_image(_params(image="%s:next" % archive, transport="oci-archive", allow_tag=True),
                               _no_resolve, host) == ("%s:next" % archive, OTHER)
    single = _layout(tmp_path / "single", (None, D))
    assert _bootc.oci_layout_digest(host, str(single), "oci") == D
    gzipped = tmp_path / "os.tar.gz"
    with tarfile.open(gzipped, "w:gz") as handle:
        handle.add(single / "index.json", arcname="index.json")
    assert _bootc.oci_layout_digest(host, str(gzipped), "oci-archive") == D


@pytest.mark.parametrize(("image", "message"), [
    ("{layout}:stable", "is at %s, not at digest %s: nothing was staged" % (D, OTHER)),
    ("{layout}:gone", "has no manifest named 'gone'"),
    ("{layout}", "lists 2 manifests and the image names none"),
    ("{missing}:stable", "no index.json"),
    ("{linked}:stable", "index.json is not a regular file"),
    ("{garbage}:stable", "its index.json is not JSON"),
])
def test_oci_layout_errors(tmp_path, image, message):
    layout = _layout(tmp_path / "layout", ("stable", D), ("next", OTHER))
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / "index.json").symlink_to(layout / "index.json")
    garbage = tmp_path / "garbage"
    garbage.mkdir()
    (garbage / "index.json").write_bytes(b"\x00not json")
    params = _params(image=image.format(layout=layout, missing=tmp_path / "missing", linked=linked, garbage=garbage),
                     transport="oci", digest=OTHER)
    with pytest.raises(ImageError) as caught:
        _bootc.target_image(params, _no_resolve, LocalHost())
    assert message in caught.value.msg
    assert caught.value.msg.startswith("The oci image" if "nothing was staged" in message else "Failed to read")


def test_oci_archive_without_index(tmp_path):
    path = tmp_path / "empty.tar"
    with tarfile.open(path, "w") as archive:
        info = tarfile.TarInfo("oci-layout")
        data = b'{"imageLayoutVersion": "1.0.0"}'
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    with pytest.raises(ImageError) as caught:
        _bootc.oci_layout_digest(LocalHost(), str(path), "oci-archive")
    assert caught.value.msg == "Failed to read the OCI layout '%s': no index.json." % path


def test_oci_archive_that_is_no_tar(tmp_path):
    path = tmp_path / "os.ociarchive"
    path.write_bytes(b"not a tar archive at all" * 40)
    with pytest.raises(ImageError) as caught:
        _bootc.oci_layout_digest(LocalHost(), str(path), "oci-archive")
    assert caught.value.msg == "Failed to read the OCI layout '%s': This does not look like a tar archive." % path
    assert caught.value.details["cmd"] == ["tar", "-x", "-O", "-f", str(path), "index.json"]
    assert caught.value.details["rc"] != 0


# ---------------------------------------------------------------- the busy probe

# A child that takes an exclusive lock of argv[2]'s kind on the file argv[1] and holds it: an open file
# description lock (as libostree's glnx_make_lock_file takes the sysroot lock), a POSIX record lock, or a
# BSD flock (libostree's fallback on a kernel without OFD locks).
HOLD = ("import fcntl, os, struct, sys, time\n"
        "fd = os.open(sys.argv[1], os.O_RDWR)\n"
        "kind = sys.argv[2]\n"
        "if kind == 'ofd':\n"
        "    fcntl.fcntl(fd, fcntl.F_OFD_SETLK, struct.pack('hhqqi4x', fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0))\n"
        "elif kind == 'posix':\n"
        "    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
        "else:\n"
        "    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
        "print('held', flush=True)\n"
        "time.sleep(60)\n")


class _Host(LocalHost):
    """This machine, where bootc is not installed: the client is made, the probe runs for real."""

    def which(self, name):
        return "/usr/bin/" + name


@pytest.fixture(params=["ofd", "posix", "flock"])
def held_lock(request, tmp_path):
    lock = tmp_path / "lock"
    lock.write_bytes(b"")
    child = subprocess.Popen([sys.executable, "-c", HOLD, str(lock), request.param], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "held"
        yield lock
    finally:
        child.kill()
        child.wait()


def test_a_held_sysroot_lock_is_found_in_proc_locks_retried_then_refused(held_lock):
    sleeps = []
    host = _Host()
    client = _bootc.BootcClient(host, retries=2, retry_delay=4, sleep=sleeps.append, lock_path=str(held_lock))
    with pytest.raises(TransactionBusyError) as caught:
        client.wait_idle("switch to registry image 'x'")
    assert sleeps == [4, 4]
    assert caught.value.msg == ("Failed to switch to registry image 'x' because bootc is busy: another process still "
                                "held the ostree sysroot lock (%s) after 3 attempts." % held_lock)
    assert host.argvs[-3:] == [["sh", "-c", _bootc.LOCK_SCRIPT, "sh", str(held_lock)]] * 3


def test_a_lock_on_another_file_is_not_this_one(held_lock):
    other = held_lock.parent / "other-lock"
    other.write_bytes(b"")
    client = _bootc.BootcClient(_Host(), sleep=pytest.fail, lock_path=str(other))
    client.wait_idle("switch")
    assert client._lock_held() is False


def test_free_or_missing_lock_is_idle(tmp_path):
    free = tmp_path / "lock"
    free.write_bytes(b"")
    for path in (free, tmp_path / "missing"):
        host = _Host()
        client = _bootc.BootcClient(host, sleep=pytest.fail, lock_path=str(path))
        client.wait_idle("switch")
        assert host.argvs[-1] == ["sh", "-c", _bootc.LOCK_SCRIPT, "sh", str(path)]


@pytest.mark.parametrize(("major", "minor"), [
    (8, 1),              # sda1
    (253, 0),            # dm-0
    (0, 46),             # an anonymous device (tmpfs, overlay)
    (259, 0x10004),      # a minor above 255
    (0x12345, 0x45),     # a major above 4095
])
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="os.makedev is glibc's encoding on Linux only")
def test_linux_device(major, minor):
    # stat(1) prints the st_dev glibc's makedev built; the controller may not run Linux, so it decodes it itself.
    assert _bootc.linux_device(os.makedev(major, minor)) == (major, minor)


LOCKS = """1: POSIX  ADVISORY  WRITE 812 08:01:393232 0 EOF
2: OFDLCK ADVISORY  WRITE -1 fd:00:1835201 0 EOF
2: -> OFDLCK ADVISORY  WRITE -1 00:2e:77 0 EOF
3: FLOCK  ADVISORY  WRITE 901 00:2f:12 0 EOF
4: LEASE  ACTIVE    READ  777 00:30:5 0 EOF
5: POSIX  ADVISORY  READ 0 <none>:0 0 EOF
"""


@pytest.mark.parametrize(("stat_line", "held"), [
    ("%d 1835201" % 0xFD00, True),       # the OFD lock libostree takes, on dm-0
    ("%d 393232" % 0x801, True),         # a POSIX record lock
    ("%d 12" % 0x2F, True),              # a BSD flock
    ("%d 1835201" % 0x801, False),       # the same inode on another device
    ("%d 77" % 0x2E, False),             # only a process waiting for it
    ("%d 5" % 0x30, False),              # a lease makes no one wait for the lock
])
def test_lock_held_matches_device_and_inode(stat_line, held):
    assert _bootc.lock_held("%s\n%s" % (stat_line, LOCKS)) is held


def test_unreadable_probe_output_fails_in_one_sentence():
    with pytest.raises(CommandError) as caught:
        _bootc.lock_held("stat: cannot stat\n")
    assert caught.value.msg == ("Failed to check the ostree sysroot lock: stat printed no device and inode "
                                "(stat: cannot stat).")
