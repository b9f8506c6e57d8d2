# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Every option of a host-side action plugin that reaches a command, with hostile strings: the host runs
exactly the argv the step meant (the fake connection splits each line as a POSIX shell does), and a
value never becomes a command of its own."""

from __future__ import annotations

import base64
import hashlib
import json
import os

import pytest

from ansible_collections.fleetos.layering.tests.unit.plugins.action.utils import fake_host, run_action
from ansible_collections.fleetos.layering.tests.unit.plugins.action.test_os_image_pull import fake_pull_host
from ansible_collections.fleetos.layering.tests.unit.plugins.module_utils.host.test__host import HOSTILE
from ansible_collections.fleetos.layering.plugins.action import (
    bootc_info, bootc_switch, os_image_pull, os_info, rpm_ostree_info)
from ansible_collections.fleetos.layering.plugins.module_utils.host import _bootc
from ansible_collections.fleetos.layering.plugins.plugin_utils.host import _pull

RPM_OSTREE_STATUS = json.dumps({"deployments": [{"booted": True, "checksum": "a" * 64, "osname": "fedora-coreos",
                                                 "origin": "fedora:fedora/x86_64/coreos/stable"}],
                                "transaction": None})
BOOTC_STATUS = json.dumps({"apiVersion": "org.containers.bootc/v1", "kind": "BootcHost", "metadata": {"name": "h"},
                           "spec": {"image": None}, "status": {"booted": {
                               "image": None, "pinned": False, "ostree": {"checksum": "b" * 64, "deploySerial": 0}},
                               "staged": None, "rollback": None}})
# (plugin, option, status argv after the binary, what it prints)
STEPS = [
    (rpm_ostree_info, "executable", ["status", "--json"], RPM_OSTREE_STATUS),
    (bootc_info, "executable", ["status", "--format=json"], BOOTC_STATUS),
    (os_info, "rpm_ostree_executable", ["status", "--json"], RPM_OSTREE_STATUS),
]
PRINTABLE = [value for value in HOSTILE if value.isprintable()]
NAMES = [value for value in PRINTABLE if value and "/" not in value]


@pytest.mark.parametrize("value", NAMES)
@pytest.mark.parametrize(("plugin", "option", "argv", "output"), STEPS)
def test_an_executable_name_is_looked_up_as_one_word_and_run_as_one(monkeypatch, plugin, option, argv, output, value):
    fake = fake_host(monkeypatch)
    fake["which"]["bootc"] = None
    fake["results"] = [(0, output, "")]
    args = {option: value}
    if plugin is os_info:
        args["backend"] = "rpm-ostree"
    run_action(plugin, args)
    assert fake["lookups"][0] == ["sh", "-c", 'command -v -- "$1"', "sh", value]
    assert [call[0] for call in fake["calls"]] == [["/usr/bin/" + value] + argv]
    assert fake["calls"][0][1] == {"env": {"LC_ALL": "C"}, "data": None}


@pytest.mark.parametrize("value", ["/opt/bin/" + v for v in PRINTABLE])
@pytest.mark.parametrize(("plugin", "option", "argv", "output"), STEPS)
def test_an_executable_path_is_tested_as_one_word(monkeypatch, plugin, option, argv, output, value):
    fake = fake_host(monkeypatch)
    result = run_action(plugin, {option: value}, failed=True)
    assert fake["lookups"] == [["test", "-f", value, "-a", "-x", value]]
    assert fake["calls"] == []
    assert result["msg"].startswith("%s '" % option)
    assert result["msg"].endswith("' does not exist or is not an executable file: expected the path of %s."
                                  % ("bootc" if plugin is bootc_info else "rpm-ostree"))


@pytest.mark.parametrize("value", [value for value in HOSTILE if not value.isprintable()])
@pytest.mark.parametrize(("plugin", "option", "argv", "output"), STEPS)
def test_a_control_character_is_refused_before_anything_runs(monkeypatch, plugin, option, argv, output, value):
    fake = fake_host(monkeypatch)
    for given in (value, "/opt/bin/" + value):
        result = run_action(plugin, {option: given}, failed=True)
        assert result["msg"].startswith("%s contains a control character" % option)
    assert fake["lookups"] == [] and fake["calls"] == []


# ---------------------------------------------------------------- os_image_pull
# The options that reach a command: executable (the binary), auth_file (read with cat), ca_cert_dir (tested,
# then skopeo's --cert-dir), cache_dir (listed, made, skopeo's destination); username and password reach the
# host only on stdin, inside the auth file skopeo reads.

PULL_IMAGE = "198.51.100.1:5000/fleetos/lab-os:1.0"
PULL_MANIFEST = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                            "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                                       "digest": "sha256:" + "c" * 64, "size": 1}, "layers": []})
PULL_DIGEST = "sha256:" + hashlib.sha256(PULL_MANIFEST.encode()).hexdigest()
PULL_PINNED = "198.51.100.1:5000/fleetos/lab-os@" + PULL_DIGEST
PULL_INSPECT = json.dumps({"Digest": PULL_DIGEST, "Labels": {}, "Architecture": "amd64", "Layers": []})


def _raw(*options, binary="skopeo"):
    return [binary, "inspect", "--raw"] + list(options) + ["--", "docker://" + PULL_IMAGE]


@pytest.fixture
def pull_host(monkeypatch, tmp_path):
    return fake_pull_host(monkeypatch, tmp_path)


@pytest.mark.parametrize("value", NAMES)
def test_os_image_pull_executable_name(pull_host, value):
    pull_host["results"] = [(0, PULL_MANIFEST, "")]
    run_action(os_image_pull, {"image": PULL_IMAGE, "state": "resolved", "executable": value})
    assert pull_host["lookups"][0] == ["sh", "-c", 'command -v -- "$1"', "sh", value]
    assert [call[0] for call in pull_host["calls"]] == [_raw(binary="/usr/bin/" + value)]


@pytest.mark.parametrize("value", ["/opt/bin/" + v for v in PRINTABLE])
def test_os_image_pull_executable_path(pull_host, value):
    result = run_action(os_image_pull, {"image": PULL_IMAGE, "state": "resolved", "executable": value}, failed=True)
    assert pull_host["lookups"] == [["test", "-f", value, "-a", "-x", value]]
    assert pull_host["calls"] == []
    assert result["msg"].startswith("executable '")


@pytest.mark.parametrize("value", PRINTABLE)
def test_os_image_pull_auth_file(pull_host, tmp_path, value):
    path = "%s/auth %s" % (tmp_path, value)
    result = run_action(os_image_pull, {"image": PULL_IMAGE, "state": "resolved", "auth_file": path}, failed=True)
    assert pull_host["files"] == [[path]]
    assert result["msg"].endswith("': No such file or directory.")
    assert pull_host["calls"] == [] and pull_host["host"] == []


@pytest.mark.parametrize("value", PRINTABLE)
def test_os_image_pull_ca_cert_dir(pull_host, value):
    path = "/nonexistent/" + value
    pull_host["results"] = [(0, PULL_MANIFEST, "")]
    run_action(os_image_pull, {"image": PULL_IMAGE, "state": "resolved", "ca_cert_dir": path})
    assert pull_host["lookups"][:2] == [["test", "-d", path], ["test", "-e", path]]
    assert [call[0] for call in pull_host["calls"]] == [_raw("--cert-dir", path)]


@pytest.mark.parametrize("value", PRINTABLE)
def test_os_image_pull_cache_dir(pull_host, tmp_path, value):
    cache = "%s/cache %s" % (tmp_path, value)
    pull_host["results"] = [(0, PULL_MANIFEST, ""), (0, PULL_INSPECT, ""), (0, "", "")]
    run_action(os_image_pull, {"image": PULL_IMAGE, "state": "present", "cache_dir": cache})
    tag = _pull.layout_tag("198.51.100.1:5000/fleetos/lab-os", PULL_DIGEST)
    assert pull_host["calls"][2][0] == ["skopeo", "copy", "--quiet", "--remove-signatures", "--",
                                        "docker://" + PULL_PINNED, "oci:%s:%s" % (cache, tag)]
    assert [argv[3:] if argv[0] == "sh" else argv for argv, _data in pull_host["host"]] == [
        ["sh", cache], ["mkdir", "-p", "-m", "755", "--", cache], ["sh", cache]]
    assert [argv[2] for argv, _data in pull_host["host"] if argv[0] == "sh"] == [_pull.BLOBS_SCRIPT] * 2
    assert os.path.isdir(cache)


@pytest.mark.parametrize("value", [v for v in PRINTABLE if v and ":" not in v])
def test_os_image_pull_username_and_password_go_on_stdin_only(pull_host, value):
    pull_host["results"] = [(0, PULL_MANIFEST, "")]
    run_action(os_image_pull, {"image": PULL_IMAGE, "state": "resolved", "username": value, "password": value})
    ((path, mode, document),) = pull_host["auth_files"]
    assert [call[0] for call in pull_host["calls"]] == [_raw("--authfile", path)]
    ((key, entry),) = document["auths"].items()
    assert (key, base64.b64decode(entry["auth"]).decode("utf-8"), mode) == (
        "198.51.100.1:5000", "%s:%s" % (value, value), 0o600)
    ((argv, data),) = [(argv, data) for argv, data in pull_host["host"] if argv[0] == "sh"]
    assert json.loads(data) == document
    assert argv[4:6] == ["fleetos-auth-", "auth.json"]


# ---------------------------------------------------------------- bootc_switch
# The options that reach a command: executable and skopeo_executable (the binaries), image (an oci layout's
# path: cat of its index.json, then bootc switch's last word), auth_file (test -f, the scripts that put it in
# place and back, skopeo's --authfile).

SWITCH_OLD = "sha256:" + "0a" * 32
SWITCH_NEW = "sha256:" + "1b" * 32
SWITCH_IMAGE = "198.51.100.1:5000/fleetos/lab-os"


def _switch_status(booted_digest, staged=None):
    def entry(digest, reference, transport, download_only):
        return {"image": {"image": {"image": reference, "transport": transport}, "imageDigest": digest},
                "pinned": False, "downloadOnly": download_only, "ostree": {"checksum": digest[7:15]}}
    doc = {"apiVersion": "org.containers.bootc/v1", "kind": "BootcHost", "metadata": {"name": "h"},
           "spec": {"image": None}, "status": {
               "booted": entry(booted_digest, "%s@%s" % (SWITCH_IMAGE, booted_digest), "registry", False),
               "staged": entry(staged[0], staged[1], staged[2], True) if staged else None, "rollback": None}}
    return (0, json.dumps(doc), "")


@pytest.fixture
def switch_host(monkeypatch, tmp_path):
    fake = fake_host(monkeypatch)
    run_auth = tmp_path / "run" / "ostree" / "auth.json"
    monkeypatch.setattr(_bootc, "SYSROOT_LOCK", str(tmp_path / "no-lock"))
    monkeypatch.setattr(_bootc, "AUTH_FILES", (str(run_auth), str(tmp_path / "etc" / "ostree" / "auth.json")))
    fake["run_auth"] = str(run_auth)
    fake["lock"] = str(tmp_path / "no-lock")
    return fake


def _switch_argv(image, transport="registry", binary="bootc"):
    return [binary, "switch", "--quiet", "--transport", transport, "--download-only", "--", image]


@pytest.mark.parametrize("value", NAMES)
def test_bootc_switch_executable_name(switch_host, value):
    switch_host["results"] = [_switch_status(SWITCH_NEW)]
    run_action(bootc_switch, {"image": "%s@%s" % (SWITCH_IMAGE, SWITCH_NEW), "executable": value})
    assert switch_host["lookups"][0] == ["sh", "-c", 'command -v -- "$1"', "sh", value]
    assert [call[0] for call in switch_host["calls"]] == [["/usr/bin/" + value, "status", "--format=json"]]


@pytest.mark.parametrize("value", ["/opt/bin/" + v for v in PRINTABLE])
def test_bootc_switch_executable_path(switch_host, value):
    result = run_action(bootc_switch, {"image": "%s@%s" % (SWITCH_IMAGE, SWITCH_NEW), "executable": value},
                        failed=True)
    assert switch_host["lookups"] == [["test", "-f", value, "-a", "-x", value]]
    assert switch_host["calls"] == []
    assert result["msg"].startswith("executable '")


@pytest.mark.parametrize("value", NAMES)
def test_bootc_switch_skopeo_executable_name(switch_host, value):
    manifest = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                           "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                                      "digest": SWITCH_OLD, "size": 1}, "layers": []})
    resolved = "sha256:" + hashlib.sha256(manifest.encode()).hexdigest()
    switch_host["results"] = [(0, manifest, ""), _switch_status(resolved)]
    result = run_action(bootc_switch, {"image": SWITCH_IMAGE + ":stable", "allow_tag": True, "skopeo_executable": value})
    assert [call[0] for call in switch_host["calls"]] == [
        ["/usr/bin/" + value, "inspect", "--raw", "--", "docker://%s:stable" % SWITCH_IMAGE],
        ["bootc", "status", "--format=json"]]
    assert result["digest"] == resolved and result["changed"] is False


@pytest.mark.parametrize("value", [v for v in PRINTABLE if ":" not in v and "@" not in v])
def test_bootc_switch_oci_layout_path(switch_host, tmp_path, value):
    layout = "%s/layout %s" % (tmp_path, value)
    os.makedirs(layout, exist_ok=True)
    with open(os.path.join(layout, "index.json"), "w", encoding="utf-8") as handle:
        json.dump({"schemaVersion": 2, "manifests": [{"digest": SWITCH_NEW, "size": 1}]}, handle)
    switch_host["results"] = [_switch_status(SWITCH_OLD), (4, "", ""), (0, "", ""),
                              _switch_status(SWITCH_OLD, staged=(SWITCH_NEW, layout, "oci"))]
    result = run_action(bootc_switch, {"image": layout, "transport": "oci", "digest": SWITCH_NEW})
    assert switch_host["files"] == [[layout.rstrip("/") + "/index.json"]]
    assert [call[0] for call in switch_host["calls"]] == [
        ["bootc", "status", "--format=json"], ["sh", "-c", _bootc.LOCK_SCRIPT, "sh", switch_host["lock"]],
        _switch_argv(layout, "oci"), ["bootc", "status", "--format=json"]]
    assert result["changed"] is True and result["image"] == layout


@pytest.mark.parametrize("value", PRINTABLE)
def test_bootc_switch_auth_file(switch_host, tmp_path, value):
    path = "%s/auth %s.json" % (tmp_path, value)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write('{"auths": {}}')
    manifest = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                           "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                                      "digest": SWITCH_OLD, "size": 1}, "layers": []})
    resolved = "sha256:" + hashlib.sha256(manifest.encode()).hexdigest()
    pinned = "%s@%s" % (SWITCH_IMAGE, resolved)
    switch_host["results"] = [(0, manifest, ""), _switch_status(SWITCH_OLD), (4, "", ""), (0, "", ""),
                              _switch_status(SWITCH_OLD, staged=(resolved, pinned, "registry"))]
    result = run_action(bootc_switch, {"image": SWITCH_IMAGE + ":stable", "allow_tag": True, "auth_file": path})
    assert ["test", "-f", path] in switch_host["lookups"]
    assert [call[0] for call in switch_host["calls"]] == [
        ["skopeo", "inspect", "--raw", "--authfile", path, "--", "docker://%s:stable" % SWITCH_IMAGE],
        ["bootc", "status", "--format=json"], ["sh", "-c", _bootc.LOCK_SCRIPT, "sh", switch_host["lock"]],
        _switch_argv(pinned), ["bootc", "status", "--format=json"]]
    run_auth = switch_host["run_auth"]
    assert switch_host["files"] == [[path, run_auth, run_auth + ".fleetos-kept"], [run_auth, run_auth + ".fleetos-kept"]]
    assert result["changed"] is True and not os.path.exists(run_auth)


@pytest.mark.parametrize("value", [value for value in HOSTILE if not value.isprintable()])
@pytest.mark.parametrize("option", ["image", "auth_file", "executable", "skopeo_executable"])
def test_bootc_switch_control_character_is_refused_before_anything_runs(switch_host, option, value):
    args = {"image": "%s@%s" % (SWITCH_IMAGE, SWITCH_NEW)}
    args[option] = "/opt/" + value
    result = run_action(bootc_switch, args, failed=True)
    assert result["msg"].startswith("%s contains a control character" % option)
    assert switch_host["lookups"] == [] and switch_host["calls"] == []


# ---------------------------------------------------------------- ostree_origin
# The options that reach a command: path (the argument of the read and the write scripts) and sysroot (test -d,
# then the directory of the deployment's origin, as is the stateroot name rpm-ostree prints). set and remove
# reach the host only on stdin, inside the new file.

ORIGIN_BEFORE = b"[origin]\nrefspec=a:b\n"


def _origin_plugins():
    from ansible_collections.fleetos.layering.plugins.action import ostree_origin
    from ansible_collections.fleetos.layering.plugins.module_utils.host import _origin
    return ostree_origin, _origin


def _origin_write_argv(path, before, read_only):
    """The one writer as the origin editor runs it: the directory locked, the origin's mode kept, no backup."""
    from ansible_collections.fleetos.layering.plugins.module_utils.host import _host
    write = ["sh", "-c", _host.REPLACE_SCRIPT, "sh", path, hashlib.sha256(before).hexdigest(), "", "", "", "",
             "1" if read_only else ""]
    return (_host.UNSHARE + write) if read_only else write


@pytest.mark.parametrize("read_only", [False, True])
@pytest.mark.parametrize("value", PRINTABLE)
def test_ostree_origin_path(monkeypatch, value, read_only):
    ostree_origin, _origin = _origin_plugins()
    path = "/opt/fleetos/" + value
    fake = fake_host(monkeypatch)
    fake["results"] = [(0, ("ro\n" if read_only else "rw\n") + ORIGIN_BEFORE.decode(), ""), (0, "\n", "")]
    result = run_action(ostree_origin, {"path": path, "set": {"origin.k": value}})
    assert [call[0] for call in fake["calls"]] == [["sh", "-c", _origin.READ_SCRIPT, "sh", path],
                                                   _origin_write_argv(path, ORIGIN_BEFORE, read_only)]
    # The value is in the file, on stdin, never in argv.
    after = ORIGIN_BEFORE + ("k=%s\n" % _origin.escape(value)).encode()
    assert fake["calls"][1][1] == {"env": {"LC_ALL": "C"}, "data": after}
    assert result["changed"] is True and result["path"] == path and fake["lookups"] == []


@pytest.mark.parametrize("value", PRINTABLE)
def test_ostree_origin_sysroot_and_stateroot(monkeypatch, tmp_path, value):
    ostree_origin, _origin = _origin_plugins()
    sysroot = "%s/sysroot %s" % (tmp_path, value)
    os.makedirs(sysroot, exist_ok=True)
    osname = "os " + value.replace("/", "|")
    fake = fake_host(monkeypatch)
    status = {"deployments": [{"booted": True, "checksum": "a" * 64, "serial": 0, "osname": osname}]}
    fake["results"] = [(0, json.dumps(status), ""), (0, "rw\n" + ORIGIN_BEFORE.decode(), "")]
    result = run_action(ostree_origin, {"sysroot": sysroot, "set": {"origin.refspec": "a:b"}})
    origin = "%s/ostree/deploy/%s/deploy/%s.0.origin" % (sysroot.rstrip("/"), osname, "a" * 64)
    assert fake["lookups"] == [["test", "-d", sysroot]]
    assert [call[0] for call in fake["calls"]] == [["rpm-ostree", "status", "--json"],
                                                   ["sh", "-c", _origin.READ_SCRIPT, "sh", origin]]
    assert result["changed"] is False and result["path"] == origin
