# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""ostree_origin: main() against origin files in a temporary directory."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from ansible_collections.fleetos.layering.tests.unit.plugins.modules.utils import patch_module_args, ExitJson, FailJson, fake_module, snapshot_dir
from ansible_collections.fleetos.layering.plugins.modules import ostree_origin

REFERENCE = "ostree-unverified-registry:198.51.100.1:5000/fleetos/lab-os@sha256:" + "f5" * 32
CONTAINER = "# kept\n[origin]\ncontainer-image-reference=%s\n\n[x-unknown]\nb=2\na=1\n" % REFERENCE
CHECKSUM_A = "a" * 64
CHECKSUM_B = "b" * 64


@pytest.fixture
def fake(monkeypatch):
    return fake_module(monkeypatch)


def _run(args, check_mode=False, expect=ExitJson):
    if check_mode:
        args = dict(args, _ansible_check_mode=True)
    with patch_module_args(args):
        with pytest.raises(expect) as caught:
            ostree_origin.main()
    return caught.value.args[0]


@pytest.fixture
def origin_file(tmp_path):
    path = tmp_path / ("%s.0.origin" % CHECKSUM_A)
    path.write_text(CONTAINER)
    return path


MARKED = CONTAINER.replace(REFERENCE + "\n", REFERENCE + "\nfleetos-test-marker=yes\n")


@pytest.mark.parametrize("edit, after", [
    ({"set": {"origin.fleetos-test-marker": "yes"}}, MARKED),
    ({"set": {"origin.fleetos-test-marker": True}}, MARKED.replace("=yes", "=true")),
    ({"set": {"packages.requested": ["htop", "tmux"]}}, CONTAINER + "\n[packages]\nrequested=htop;tmux;\n"),
    ({"set": {"x-unknown.a": 7}}, CONTAINER.replace("a=1", "a=7")),
    ({"set": {"origin.custom-description": " lead\nline"}},
     CONTAINER.replace(REFERENCE + "\n", REFERENCE + "\ncustom-description=\\slead\\nline\n")),
    ({"set": {"x-unknown.dotted.key": "v"}}, CONTAINER + "dotted.key=v\n"),
    ({"remove": ["x-unknown.b"]}, CONTAINER.replace("b=2\n", "")),
])
def test_check_apply_check_apply(origin_file, fake, edit, after):
    args = dict(edit, path=str(origin_file))
    predicted = _run(args, check_mode=True)
    assert predicted["changed"] is True
    assert predicted["diff"] == {"before": CONTAINER, "after": after}
    assert origin_file.read_text() == CONTAINER

    applied = _run(args)
    assert applied["changed"] is True
    assert applied["diff"] == {"before": CONTAINER, "after": after}
    assert applied["path"] == str(origin_file)
    assert "backup_file" not in applied
    assert origin_file.read_text() == after

    again = _run(args, check_mode=True)
    assert again["changed"] is False
    assert again["diff"] == {"before": after, "after": after}
    final = _run(args)
    assert final["changed"] is False
    assert origin_file.read_text() == after
    assert sorted(p.name for p in origin_file.parent.iterdir()) == [origin_file.name]
    assert fake["calls"] == []


def test_origin_return_is_parsed_result(origin_file, fake):
    result = _run({"path": str(origin_file), "set": {"origin.k": "v"}, "remove": ["x-unknown.a"]}, check_mode=True)
    assert result["origin"] == {"origin": {"container-image-reference": REFERENCE, "k": "v"},
                                "x-unknown": {"b": "2"}}


def test_backup_file(origin_file, fake):
    result = _run({"path": str(origin_file), "set": {"origin.k": "v"}, "backup": True})
    backup = Path(result["backup_file"])
    assert backup.parent == origin_file.parent
    assert backup.name.startswith(origin_file.name + ".") and backup.name.endswith("Z.bak")
    assert backup.read_text() == CONTAINER
    assert origin_file.read_text() == CONTAINER.replace(REFERENCE + "\n", REFERENCE + "\nk=v\n")
    unchanged = _run({"path": str(origin_file), "set": {"origin.k": "v"}, "backup": True})
    assert "backup_file" not in unchanged
    assert len(list(origin_file.parent.iterdir())) == 2


def test_backup_not_made_in_check_mode(origin_file, fake):
    result = _run({"path": str(origin_file), "set": {"origin.k": "v"}, "backup": True}, check_mode=True)
    assert result["changed"] is True
    assert "backup_file" not in result
    assert [p.name for p in origin_file.parent.iterdir()] == [origin_file.name]


@pytest.mark.parametrize("content, args, message", [
    ("[origin]\nrefspec=a:b\nthis is not valid\n", {"set": {"origin.k": "v"}},
     "origin {path} line 3 is neither a [group], a key=value nor a comment"),
    (CONTAINER, {"set": {"origin.refspec": "fedora:fedora/x86_64/coreos/stable"}},
     "Refusing to write origin {path} because [origin] would hold both refspec and container-image-reference, "
     "an ostree base and a container image base at once"),
    (CONTAINER, {"set": {"origin.baserefspec": "x"}},
     "Refusing to write origin {path} because [origin] would hold both baserefspec and container-image-reference, "
     "an ostree base and a container image base at once"),
    (CONTAINER, {"set": {"nodot": "v"}}, "Invalid set entry 'nodot': expected group.key (it has no dot)"),
    (CONTAINER, {"remove": ["origin."]}, "Invalid remove entry 'origin.': expected group.key (a key must be "
                                         "non-empty, at most 255 characters, without =, [, ], control characters or "
                                         "surrounding whitespace)"),
    (CONTAINER, {"set": {"origin.k": "v"}, "remove": ["origin.k"]},
     "Invalid options: origin.k is both in set and in remove"),
    (CONTAINER, {"set": {"origin.k": {"nested": 1}}},
     "Invalid set value for origin.k: expected a string, number, boolean or list of strings, got dict"),
])
@pytest.mark.parametrize("check_mode", [False, True])
def test_failures_leave_file_as_it_was(tmp_path, fake, content, args, message, check_mode):
    path = tmp_path / "x.origin"
    path.write_text(content)
    result = _run(dict(args, path=str(path)), check_mode=check_mode, expect=FailJson)
    assert result["msg"] == message.format(path=path) + "."
    assert path.read_text() == content
    assert [p.name for p in tmp_path.iterdir()] == ["x.origin"]


def test_missing_file(tmp_path, fake):
    result = _run({"path": str(tmp_path / "none.origin")}, expect=FailJson)
    assert result["msg"] == "Failed to read path '%s': No such file or directory." % (tmp_path / "none.origin")


def test_path_and_deployment_are_exclusive(origin_file, fake):
    result = _run({"path": str(origin_file), "deployment": "booted"}, expect=FailJson)
    assert "mutually exclusive" in result["msg"]


# --- deployment lookup through rpm-ostree status --json ---------------------------------------

def _status(*deployments):
    return json.dumps({"deployments": list(deployments), "transaction": None})


def _dep(checksum, serial, booted=False, staged=False):
    return {"id": "fedora-coreos-%s.%d" % (checksum, serial), "osname": "fedora-coreos", "checksum": checksum,
            "serial": serial, "booted": booted, "staged": staged}


@pytest.fixture
def sysroot(tmp_path):
    deploy = tmp_path / "ostree" / "deploy" / "fedora-coreos" / "deploy"
    deploy.mkdir(parents=True)
    (deploy / ("%s.0.origin" % CHECKSUM_A)).write_text(CONTAINER)
    (deploy / ("%s.1.origin" % CHECKSUM_B)).write_text("[origin]\nrefspec=fedora:fedora/x86_64/coreos/stable\n")
    return tmp_path


@pytest.mark.parametrize("deployment, deployments, expected", [
    ("booted", [_dep(CHECKSUM_B, 1), _dep(CHECKSUM_A, 0, booted=True)], "%s.0.origin" % CHECKSUM_A),
    ("0", [_dep(CHECKSUM_B, 1), _dep(CHECKSUM_A, 0, booted=True)], "%s.1.origin" % CHECKSUM_B),
    ("1", [_dep(CHECKSUM_B, 1), _dep(CHECKSUM_A, 0, booted=True)], "%s.0.origin" % CHECKSUM_A),
    ("1", [_dep(CHECKSUM_B, 1, staged=True), _dep(CHECKSUM_A, 0, booted=True)], "%s.0.origin" % CHECKSUM_A),
])
def test_deployment_lookup(fake, sysroot, deployment, deployments, expected):
    fake["results"] = [(0, _status(*deployments), "")]
    result = _run({"deployment": deployment, "sysroot": str(sysroot), "set": {"origin.k": "v"}}, check_mode=True)
    assert result["path"] == str(sysroot / "ostree" / "deploy" / "fedora-coreos" / "deploy" / expected)
    assert result["changed"] is True
    assert fake["calls"] == [(["/usr/bin/rpm-ostree", "status", "--json"],
                              {"environ_update": {"LC_ALL": "C"}, "expand_user_and_vars": False})]


STAGED_MSG = ("Refusing to edit the origin of the staged deployment fedora-coreos-%s.1 because a staged "
              "deployment's origin lives in /run/ostree/staged-deployment until it is finalized, not in a file; "
              "stage it again with fleetos.layering.rpm_ostree_rebase instead" % CHECKSUM_B)


@pytest.mark.parametrize("deployment, deployments, message", [
    ("staged", [_dep(CHECKSUM_B, 1, staged=True), _dep(CHECKSUM_A, 0, booted=True)], STAGED_MSG),
    ("0", [_dep(CHECKSUM_B, 1, staged=True), _dep(CHECKSUM_A, 0, booted=True)], STAGED_MSG),
    ("2", [_dep(CHECKSUM_A, 0, booted=True)], "Invalid deployment index 2: rpm-ostree status lists 1 deployment(s)"),
    ("next", [_dep(CHECKSUM_A, 0, booted=True)], "Invalid deployment 'next': expected booted, staged or an index (0, 1, ...)"),
    ("booted", [_dep(CHECKSUM_A, 0)], "Failed to find the booted deployment: rpm-ostree status shows none booted"),
    ("staged", [_dep(CHECKSUM_A, 0, booted=True)], "Failed to find the staged deployment: rpm-ostree status shows none staged"),
])
def test_deployment_lookup_failures(fake, sysroot, deployment, deployments, message):
    fake["results"] = [(0, _status(*deployments), "")]
    result = _run({"deployment": deployment, "sysroot": str(sysroot), "set": {"origin.k": "v"}}, expect=FailJson)
    assert result["msg"] == message + "."
    assert (sysroot / "ostree/deploy/fedora-coreos/deploy" / ("%s.0.origin" % CHECKSUM_A)).read_text() == CONTAINER


def test_rpm_ostree_failure_keeps_output(fake, sysroot):
    fake["results"] = [(1, "", "error: Connection refused")]
    result = _run({"sysroot": str(sysroot)}, expect=FailJson)
    assert result["msg"] == "Failed to list the deployments with rpm-ostree status: Connection refused."
    assert (result["rc"], result["stderr"], result["cmd"]) == (1, "error: Connection refused",
                                                               ["/usr/bin/rpm-ostree", "status", "--json"])


# --- only regular files, no control characters -------------------------------------------------

_snapshot = snapshot_dir


def _symlink(tmp_path):
    (tmp_path / "real.origin").write_text(CONTAINER)
    (tmp_path / "x.origin").symlink_to("real.origin")


def _directory(tmp_path):
    (tmp_path / "x.origin").mkdir()


def _fifo(tmp_path):
    os.mkfifo(tmp_path / "x.origin")


def _char_device(tmp_path):
    try:
        os.mknod(tmp_path / "x.origin", 0o666 | stat.S_IFCHR, os.makedev(1, 3))   # a /dev/null of its own
    except (OSError, AttributeError) as exc:
        pytest.skip("cannot make a device node here: %s" % exc)


@pytest.mark.parametrize("make, kind", [
    (_symlink, "a symbolic link"),
    (_directory, "a directory"),
    (_fifo, "a named pipe"),
    (_char_device, "a character device"),
])
@pytest.mark.parametrize("check_mode", [False, True])
@pytest.mark.parametrize("backup", [False, True])
def test_path_must_be_a_regular_file(tmp_path, fake, make, kind, check_mode, backup):
    make(tmp_path)
    path = tmp_path / "x.origin"
    before = _snapshot(tmp_path)
    result = _run({"path": str(path), "set": {"origin.k": "v"}, "backup": backup}, check_mode=check_mode, expect=FailJson)
    assert result["msg"] == "path '%s' is not a regular file (%s): ostree_origin edits origin files only." % (path, kind)
    assert result["path"] == str(path)
    assert _snapshot(tmp_path) == before     # nothing replaced, no temporary file, no backup


def test_deployment_origin_must_be_a_regular_file(fake, sysroot):
    deploy = sysroot / "ostree" / "deploy" / "fedora-coreos" / "deploy"
    origin = deploy / ("%s.0.origin" % CHECKSUM_A)
    origin.unlink()
    origin.symlink_to("%s.1.origin" % CHECKSUM_B)
    before = _snapshot(deploy)
    fake["results"] = [(0, _status(_dep(CHECKSUM_A, 0, booted=True), _dep(CHECKSUM_B, 1)), "")]
    result = _run({"sysroot": str(sysroot), "set": {"origin.k": "v"}, "backup": True}, expect=FailJson)
    assert result["msg"] == ("the origin file '%s' of deployment booted is not a regular file (a symbolic link): "
                             "ostree_origin edits origin files only." % origin)
    assert _snapshot(deploy) == before


CONTROL_MSG = "contains a control character (%s): only tab, newline and carriage return are allowed in origin values"
NAME_MSG = "contains a control character (%s): group and key names hold no control characters"


@pytest.mark.parametrize("args, message", [
    ({"set": {"origin.custom-description": "a\x00b"}}, "set['origin.custom-description'] " + CONTROL_MSG % "U+0000 NUL"),
    ({"set": {"origin.custom-description": "\x00"}}, "set['origin.custom-description'] " + CONTROL_MSG % "U+0000 NUL"),
    ({"set": {"origin.k": "red\x1b[31m"}}, "set['origin.k'] " + CONTROL_MSG % "U+001B ESC"),
    ({"set": {"origin.k": "\x0bv"}}, "set['origin.k'] " + CONTROL_MSG % "U+000B VT"),
    ({"set": {"origin.k": "v\x7f"}}, "set['origin.k'] " + CONTROL_MSG % "U+007F DEL"),
    ({"set": {"origin.ok": "v", "origin.k": "tab\tok\x01"}}, "set['origin.k'] " + CONTROL_MSG % "U+0001 SOH"),
    ({"set": {"packages.requested": ["htop", "tm\x00ux"]}}, "set['packages.requested'][1] " + CONTROL_MSG % "U+0000 NUL"),
    ({"set": {"origin.a\x00b": "v"}}, "set key 'origin.a\\x00b' " + NAME_MSG % "U+0000 NUL"),
    ({"set": {"origin.k\n": "v"}}, "set key 'origin.k\\n' " + NAME_MSG % "U+000A LF"),
    ({"set": {"ori\tgin.k": "v"}}, "set key 'ori\\tgin.k' " + NAME_MSG % "U+0009 HT"),
    # The argument check refuses it first, as every option with a control character.
    ({"remove": ["origin.k", "origin.\x1bk"]}, "remove[1] contains a control character (U+001B ESC): expected one line "
                                               "of printable text"),
])
@pytest.mark.parametrize("check_mode", [False, True])
def test_control_characters_are_refused(origin_file, fake, args, message, check_mode):
    before = _snapshot(origin_file.parent)
    result = _run(dict(args, path=str(origin_file), backup=True), check_mode=check_mode, expect=FailJson)
    assert result["msg"] == message + "."
    assert _snapshot(origin_file.parent) == before
    assert origin_file.read_text() == CONTAINER


@pytest.mark.parametrize("value, line", [
    ("a\tb", "k=a\tb"),
    ("\ta", "k=\\ta"),
    ("a\r\nb", "k=a\\r\\nb"),
])
def test_tab_newline_and_carriage_return_are_escaped(origin_file, fake, value, line):
    result = _run({"path": str(origin_file), "set": {"origin.k": value}})
    assert result["changed"] is True
    assert origin_file.read_text() == CONTAINER.replace(REFERENCE + "\n", REFERENCE + "\n" + line + "\n")


@pytest.mark.parametrize("args, message", [
    ({"path": ["/tmp/x.origin"]}, "path must be a string, got a list."),
    ({"path": 5}, "path must be a string, got an integer."),
    ({"set": ["origin.k=v"]}, "set must be a dict, got a list."),
    ({"remove": [5]}, "remove[0] must be a string, got an integer."),
    ({"backup": "please"}, "backup must be a boolean (true or false), got the string 'please'."),
    ({"deployment": "a" * 100000}, "deployment is 100000 characters long: expected at most 4096."),
    ({"set": {"origin." + "k" * 100000: "v"}}, "Invalid set entry '%s... (100007 characters)': expected group.key "
     "(a key must be non-empty, at most 255 characters, without =, [, ], control characters or surrounding "
     "whitespace)." % ("origin." + "k" * 29)),
])
def test_bad_arguments_are_refused_as_given(origin_file, fake, args, message):
    before = _snapshot(origin_file.parent)
    result = _run(dict({"path": str(origin_file)}, **args) if "deployment" not in args else args, expect=FailJson)
    assert result["msg"] == message
    assert fake["calls"] == []
    assert _snapshot(origin_file.parent) == before


def test_a_sysroot_that_is_no_directory_is_refused_before_rpm_ostree(fake):
    result = _run({"sysroot": "/dev/null", "set": {"origin.k": "v"}}, expect=FailJson)
    assert result["msg"] == "sysroot '/dev/null' is not a directory."
    assert fake["calls"] == []
