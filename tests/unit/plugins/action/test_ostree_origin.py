# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""ostree_origin: the action plugin on a faked connection against origin files in a temporary directory.

The read and write scripts of ``_origin`` run for real on the test's files, as the host's shell would run
them (the fake connection splits each line back into its argv); only rpm-ostree is faked."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from ansible_collections.fleetos.layering.tests.unit.plugins.action.utils import fake_host, run_action
from ansible_collections.fleetos.layering.tests.unit.plugins.modules.utils import snapshot_dir
from ansible_collections.fleetos.layering.plugins.action import ostree_origin
from ansible_collections.fleetos.layering.plugins.module_utils.host import _host, _origin
from ansible_collections.fleetos.layering.plugins.plugin_utils.host import _origin_edit

REFERENCE = "ostree-unverified-registry:198.51.100.1:5000/fleetos/lab-os@sha256:" + "f5" * 32
CONTAINER = "# kept\n[origin]\ncontainer-image-reference=%s\n\n[x-unknown]\nb=2\na=1\n" % REFERENCE
CHECKSUM_A = "a" * 64
CHECKSUM_B = "b" * 64
ENV = {"LC_ALL": "C"}
BACKUP_NAME = re.compile(r"^(?P<origin>.+)\.\d{8}T\d{6}\.\d{6}Z\.bak$")


def _read_argv(path):
    return ["sh", "-c", _origin.READ_SCRIPT, "sh", str(path)]


def _write_argv(path, before, backup=False, read_only=False):
    # The one writer: the directory locked, the origin's mode kept, the file required.
    args = ["sh", "-c", _host.REPLACE_SCRIPT, "sh", str(path), hashlib.sha256(before).hexdigest(), "", "", "",
            "1" if backup else "", "1" if read_only else ""]
    return (_host.UNSHARE + args) if read_only else args


def run_scripts(state, prefix=(), before_write=None):
    """Make the fake connection run the origin scripts for real (``prefix``: in front of each argv), after
    ``before_write(words)`` for a write; everything else stays faked by ``state["results"]``."""

    def run(words):
        if words[:3] not in (["sh", "-c", _origin.READ_SCRIPT], ["sh", "-c", _host.REPLACE_SCRIPT]) \
                and words[:len(_host.UNSHARE)] != _host.UNSHARE:
            return
        if before_write is not None and _host.REPLACE_SCRIPT in words:
            before_write(words)
        proc = subprocess.run(list(prefix) + words, input=state["calls"][-1][1]["data"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, env=dict(os.environ, **ENV), check=False)
        state["results"].insert(0, (proc.returncode, proc.stdout.decode("utf-8", "surrogateescape"),
                                    proc.stderr.decode("utf-8", "replace")))

    state["hooks"]["-c"] = run
    state["hooks"]["-m"] = run
    return state


@pytest.fixture
def fake(monkeypatch):
    return run_scripts(fake_host(monkeypatch))


def _run(args, check_mode=False, failed=False):
    return run_action(ostree_origin, args, failed=failed, check_mode=check_mode)


def _argvs(fake):
    return [call[0] for call in fake["calls"]]


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
    assert _argvs(fake) == [_read_argv(origin_file)]

    applied = _run(args)
    assert applied["changed"] is True
    assert applied["diff"] == {"before": CONTAINER, "after": after}
    assert applied["path"] == str(origin_file)
    assert "backup_file" not in applied
    assert origin_file.read_text() == after
    # The write got the new content on stdin and the sha256 of what was read, in the C locale.
    assert fake["calls"][2] == (_write_argv(origin_file, CONTAINER.encode()), {"env": ENV, "data": after.encode()})

    again = _run(args, check_mode=True)
    assert again["changed"] is False
    assert again["diff"] == {"before": after, "after": after}
    final = _run(args)
    assert final["changed"] is False
    assert origin_file.read_text() == after
    assert sorted(p.name for p in origin_file.parent.iterdir()) == [origin_file.name]
    # No write when nothing changes: reads only, and nothing but the scripts ran (no Python on the host).
    assert _argvs(fake)[3:] == [_read_argv(origin_file)] * 2
    assert fake["lookups"] == []


def test_origin_return_is_parsed_result(origin_file, fake):
    result = _run({"path": str(origin_file), "set": {"origin.k": "v"}, "remove": ["x-unknown.a"]}, check_mode=True)
    assert result["origin"] == {"origin": {"container-image-reference": REFERENCE, "k": "v"},
                                "x-unknown": {"b": "2"}}


def test_backup_file_keeps_the_content_and_the_mode(origin_file, fake):
    os.chmod(origin_file, 0o640)
    inode = origin_file.stat().st_ino
    result = _run({"path": str(origin_file), "set": {"origin.k": "v"}, "backup": True})
    backup = Path(result["backup_file"])
    assert backup.parent == origin_file.parent
    assert BACKUP_NAME.match(backup.name).group("origin") == origin_file.name
    assert backup.read_text() == CONTAINER
    assert stat.S_IMODE(backup.stat().st_mode) == 0o640
    assert origin_file.read_text() == CONTAINER.replace(REFERENCE + "\n", REFERENCE + "\nk=v\n")
    # Replaced by a rename (a new inode), with the mode it had.
    assert origin_file.stat().st_ino != inode
    assert stat.S_IMODE(origin_file.stat().st_mode) == 0o640
    assert _argvs(fake)[-1] == _write_argv(origin_file, CONTAINER.encode(), backup=True)

    unchanged = _run({"path": str(origin_file), "set": {"origin.k": "v"}, "backup": True})
    assert "backup_file" not in unchanged
    second = _run({"path": str(origin_file), "set": {"origin.k": "w"}, "backup": True})
    assert second["backup_file"] != result["backup_file"]
    assert Path(second["backup_file"]).read_text() == CONTAINER.replace(REFERENCE + "\n", REFERENCE + "\nk=v\n")
    assert sorted(p.name for p in origin_file.parent.iterdir()) == sorted(
        [origin_file.name, backup.name, Path(second["backup_file"]).name])


def test_a_backup_name_in_use_is_not_overwritten(origin_file, fake, monkeypatch, tmp_path):
    # A clock that always says the same second: the next backups take .1, .2 instead.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "date").write_text("#!/bin/sh\necho 20250101T120000.000000Z\n")
    (bin_dir / "date").chmod(0o755)
    monkeypatch.setenv("PATH", "%s:%s" % (bin_dir, os.environ["PATH"]))
    taken = Path("%s.20250101T120000.000000Z.bak" % origin_file)
    taken.write_text("someone else's\n")
    first = _run({"path": str(origin_file), "set": {"origin.k": "1"}, "backup": True})
    second = _run({"path": str(origin_file), "set": {"origin.k": "2"}, "backup": True})
    assert (first["backup_file"], second["backup_file"]) == (str(taken) + ".1", str(taken) + ".2")
    assert taken.read_text() == "someone else's\n"
    assert Path(first["backup_file"]).read_text() == CONTAINER
    assert "k=1\n" in Path(second["backup_file"]).read_text()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give the file another owner")
def test_owner_is_kept(origin_file, fake):
    os.chown(origin_file, 4321, 4322)
    result = _run({"path": str(origin_file), "set": {"origin.k": "v"}, "backup": True})
    for path in (origin_file, Path(result["backup_file"])):
        assert (path.stat().st_uid, path.stat().st_gid) == (4321, 4322)


def test_backup_not_made_in_check_mode(origin_file, fake):
    result = _run({"path": str(origin_file), "set": {"origin.k": "v"}, "backup": True}, check_mode=True)
    assert result["changed"] is True
    assert "backup_file" not in result
    assert [p.name for p in origin_file.parent.iterdir()] == [origin_file.name]
    assert _argvs(fake) == [_read_argv(origin_file)]


# --- compare and swap ------------------------------------------------------------------------------

def test_a_change_between_the_read_and_the_write_is_kept(origin_file, monkeypatch):
    concurrent = CONTAINER.replace("b=2\n", "b=2\nconcurrent=yes\n")
    writes = []

    def other_writer(words):
        writes.append(words)
        if len(writes) == 1:
            origin_file.write_text(concurrent)

    fake = run_scripts(fake_host(monkeypatch), before_write=other_writer)
    result = _run({"path": str(origin_file), "set": {"origin.k": "v"}, "backup": True})
    expected = concurrent.replace(REFERENCE + "\n", REFERENCE + "\nk=v\n")
    assert origin_file.read_text() == expected
    # Read, a write refused (the file changed), read again and edited again, written.
    assert _argvs(fake) == [_read_argv(origin_file), _write_argv(origin_file, CONTAINER.encode(), backup=True),
                            _read_argv(origin_file), _write_argv(origin_file, concurrent.encode(), backup=True)]
    assert result["diff"] == {"before": concurrent, "after": expected}
    # The backup holds what the write replaced: the concurrent change.
    assert Path(result["backup_file"]).read_text() == concurrent
    assert len(list(origin_file.parent.iterdir())) == 2


def test_a_file_that_keeps_changing_is_left_to_its_other_writer(origin_file, monkeypatch):
    seen = []

    def other_writer(words):
        seen.append(words)
        origin_file.write_text(CONTAINER + "#%d\n" % len(seen))

    run_scripts(fake_host(monkeypatch), before_write=other_writer)
    result = _run({"path": str(origin_file), "set": {"origin.k": "v"}, "backup": True}, failed=True)
    assert result["msg"] == ("Failed to write origin %s: it changed on the host each of the %d times it was read "
                             "and edited; nothing was written." % (origin_file, _origin_edit.ATTEMPTS))
    assert len(seen) == _origin_edit.ATTEMPTS
    assert origin_file.read_text() == CONTAINER + "#%d\n" % _origin_edit.ATTEMPTS
    assert [p.name for p in origin_file.parent.iterdir()] == [origin_file.name]


# --- failures --------------------------------------------------------------------------------------

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
    ("[origin]\nk=\xff\n", {"set": {"origin.k": "v"}}, "origin {path} is not valid UTF-8 at byte 11"),
])
@pytest.mark.parametrize("check_mode", [False, True])
def test_failures_leave_file_as_it_was(tmp_path, fake, content, args, message, check_mode):
    path = tmp_path / "x.origin"
    data = content.encode("latin-1") if "\xff" in content else content.encode()
    path.write_bytes(data)
    result = _run(dict(args, path=str(path)), check_mode=check_mode, failed=True)
    assert result["msg"] == message.format(path=path) + "."
    assert result["path"] == str(path)
    assert path.read_bytes() == data
    assert [p.name for p in tmp_path.iterdir()] == ["x.origin"]
    assert _host.REPLACE_SCRIPT not in sum(_argvs(fake), [])


def test_missing_file(tmp_path, fake):
    result = _run({"path": str(tmp_path / "none.origin")}, failed=True)
    assert result["msg"] == "Failed to read path '%s': No such file or directory." % (tmp_path / "none.origin")
    assert result["rc"] == 4


def test_path_and_deployment_are_exclusive(origin_file, fake):
    result = _run({"path": str(origin_file), "deployment": "booted"}, failed=True)
    assert result["msg"] == "parameters are mutually exclusive: deployment|path"
    assert fake["calls"] == []


@pytest.mark.parametrize("args, message", [
    ({"path": "relative.origin"}, "path 'relative.origin' is not an absolute path: expected one that starts with /."),
    ({"sysroot": "sysroot"}, "sysroot 'sysroot' is not an absolute path: expected one that starts with /."),
    ({"sysroot": "/dev/null"}, "sysroot '/dev/null' is not a directory."),
    ({"sysroot": "/nonexistent/fleetos"}, "sysroot '/nonexistent/fleetos' does not exist: expected a directory."),
    ({"deployment": "next"}, "Invalid deployment 'next': expected booted, staged or an index (0, 1, ...)."),
])
def test_paths_and_deployment_are_checked_before_rpm_ostree(fake, args, message):
    result = _run(dict(args, set={"origin.k": "v"}), failed=True)
    assert result["msg"] == message
    assert fake["calls"] == []


# --- deployment lookup through rpm-ostree status --json ----------------------------------------------

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
    origin = sysroot / "ostree" / "deploy" / "fedora-coreos" / "deploy" / expected
    assert result["path"] == str(origin)
    assert result["changed"] is True
    assert fake["lookups"] == [["test", "-d", str(sysroot)]]
    assert fake["calls"] == [(["rpm-ostree", "status", "--json"], {"env": ENV, "data": None}),
                             (_read_argv(origin), {"env": ENV, "data": None})]


def test_deployment_origin_is_written(fake, sysroot):
    fake["results"] = [(0, _status(_dep(CHECKSUM_B, 1), _dep(CHECKSUM_A, 0, booted=True)), "")]
    result = _run({"sysroot": str(sysroot), "set": {"origin.k": "v"}, "backup": True})
    origin = sysroot / "ostree" / "deploy" / "fedora-coreos" / "deploy" / ("%s.0.origin" % CHECKSUM_A)
    assert result["changed"] is True and result["path"] == str(origin)
    assert origin.read_text() == CONTAINER.replace(REFERENCE + "\n", REFERENCE + "\nk=v\n")
    assert BACKUP_NAME.match(Path(result["backup_file"]).name).group("origin") == origin.name


STAGED_MSG = ("Refusing to edit the origin of the staged deployment fedora-coreos-%s.1 because a staged "
              "deployment's origin lives in /run/ostree/staged-deployment until it is finalized, not in a file; "
              "stage it again with fleetos.layering.rpm_ostree_rebase instead" % CHECKSUM_B)


@pytest.mark.parametrize("deployment, deployments, message", [
    ("staged", [_dep(CHECKSUM_B, 1, staged=True), _dep(CHECKSUM_A, 0, booted=True)], STAGED_MSG),
    ("0", [_dep(CHECKSUM_B, 1, staged=True), _dep(CHECKSUM_A, 0, booted=True)], STAGED_MSG),
    ("2", [_dep(CHECKSUM_A, 0, booted=True)], "Invalid deployment index 2: rpm-ostree status lists 1 deployment(s)"),
    ("booted", [_dep(CHECKSUM_A, 0)], "Failed to find the booted deployment: rpm-ostree status shows none booted"),
    ("staged", [_dep(CHECKSUM_A, 0, booted=True)], "Failed to find the staged deployment: rpm-ostree status shows none staged"),
])
def test_deployment_lookup_failures(fake, sysroot, deployment, deployments, message):
    fake["results"] = [(0, _status(*deployments), "")]
    result = _run({"deployment": deployment, "sysroot": str(sysroot), "set": {"origin.k": "v"}}, failed=True)
    assert result["msg"] == message + "."
    assert (sysroot / "ostree/deploy/fedora-coreos/deploy" / ("%s.0.origin" % CHECKSUM_A)).read_text() == CONTAINER
    assert _argvs(fake) == [["rpm-ostree", "status", "--json"]]


def test_rpm_ostree_failure_keeps_output(fake, sysroot):
    fake["results"] = [(1, "", "error: Connection refused")]
    result = _run({"sysroot": str(sysroot)}, failed=True)
    assert result["msg"] == "Failed to list the deployments with rpm-ostree status: Connection refused."
    assert (result["rc"], result["stderr"], result["cmd"]) == (1, "error: Connection refused",
                                                               ["rpm-ostree", "status", "--json"])


def test_rpm_ostree_output_without_deployments(fake, sysroot):
    fake["results"] = [(0, '{"transaction": null}', "")]
    result = _run({"sysroot": str(sysroot)}, failed=True)
    assert result["msg"] == ("Failed to list the deployments: rpm-ostree status printed no deployment list "
                             "('deployments').")
    assert result["stdout"] == '{"transaction": null}'


# --- only regular files, no control characters -------------------------------------------------------

def _symlink(tmp_path):
    (tmp_path / "real.origin").write_text(CONTAINER)
    (tmp_path / "x.origin").symlink_to("real.origin")


def _dangling_symlink(tmp_path):
    (tmp_path / "x.origin").symlink_to("nowhere.origin")


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
    (_dangling_symlink, "a symbolic link"),
    (_directory, "a directory"),
    (_fifo, "a named pipe"),
    (_char_device, "a character device"),
])
@pytest.mark.parametrize("check_mode", [False, True])
@pytest.mark.parametrize("backup", [False, True])
def test_path_must_be_a_regular_file(tmp_path, fake, make, kind, check_mode, backup):
    make(tmp_path)
    path = tmp_path / "x.origin"
    before = snapshot_dir(tmp_path)
    result = _run({"path": str(path), "set": {"origin.k": "v"}, "backup": backup}, check_mode=check_mode, failed=True)
    assert result["msg"] == "path '%s' is not a regular file (%s): ostree_origin edits origin files only." % (path, kind)
    assert result["path"] == str(path)
    assert snapshot_dir(tmp_path) == before     # nothing replaced, no temporary file, no backup
    assert _argvs(fake) == [_read_argv(path)]   # refused by the read, before any write


@pytest.mark.parametrize("make, kind", [(_symlink, "a symbolic link"), (_fifo, "a named pipe"),
                                        (_directory, "a directory")])
def test_a_file_replaced_before_the_write_is_refused(tmp_path, monkeypatch, make, kind):
    path = tmp_path / "x.origin"
    path.write_text(CONTAINER)

    def swap(_words):
        path.unlink()
        make(tmp_path)

    fake = run_scripts(fake_host(monkeypatch), before_write=swap)
    result = _run({"path": str(path), "set": {"origin.k": "v"}, "backup": True}, failed=True)
    assert result["msg"] == "path '%s' is not a regular file (%s): ostree_origin edits origin files only." % (path, kind)
    assert _argvs(fake)[-1] == _write_argv(path, CONTAINER.encode(), backup=True)
    left = ["x.origin", "real.origin"] if make is _symlink else ["x.origin"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(left)
    if make is _symlink:
        assert (tmp_path / "real.origin").read_text() == CONTAINER


def test_deployment_origin_must_be_a_regular_file(fake, sysroot):
    deploy = sysroot / "ostree" / "deploy" / "fedora-coreos" / "deploy"
    origin = deploy / ("%s.0.origin" % CHECKSUM_A)
    origin.unlink()
    origin.symlink_to("%s.1.origin" % CHECKSUM_B)
    before = snapshot_dir(deploy)
    fake["results"] = [(0, _status(_dep(CHECKSUM_A, 0, booted=True), _dep(CHECKSUM_B, 1)), "")]
    result = _run({"sysroot": str(sysroot), "set": {"origin.k": "v"}, "backup": True}, failed=True)
    assert result["msg"] == ("the origin file '%s' of deployment booted is not a regular file (a symbolic link): "
                             "ostree_origin edits origin files only." % origin)
    assert snapshot_dir(deploy) == before


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
    before = snapshot_dir(origin_file.parent)
    result = _run(dict(args, path=str(origin_file), backup=True), check_mode=check_mode, failed=True)
    assert result["msg"] == message + "."
    assert snapshot_dir(origin_file.parent) == before
    assert fake["calls"] == []


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
    ({"path": "/tmp/x\x00.origin"}, "path contains a control character (U+0000 NUL): expected one line of printable text."),
    ({"set": ["origin.k=v"]}, "set must be a dict, got a list."),
    ({"remove": [5]}, "remove[0] must be a string, got an integer."),
    ({"backup": "please"}, "backup must be a boolean (true or false), got the string 'please'."),
    ({"deployment": "a" * 100000}, "deployment is 100000 characters long: expected at most 4096."),
    ({"set": {"origin." + "k" * 100000: "v"}}, "Invalid set entry '%s... (100007 characters)': expected group.key "
     "(a key must be non-empty, at most 255 characters, without =, [, ], control characters or surrounding "
     "whitespace)." % ("origin." + "k" * 29)),
])
def test_bad_arguments_are_refused_as_given(origin_file, fake, args, message):
    before = snapshot_dir(origin_file.parent)
    result = _run(dict({"path": str(origin_file)}, **args) if "deployment" not in args else args, failed=True)
    assert result["msg"] == message
    assert fake["calls"] == [] and fake["lookups"] == []
    assert snapshot_dir(origin_file.parent) == before


def test_a_missing_tool_is_named(origin_file, monkeypatch, tmp_path):
    # A host whose PATH has the shell and coreutils' stat but no findmnt, dd or mktemp.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("stat", "sh"):
        (bin_dir / tool).symlink_to(shutil.which(tool))
    run_scripts(fake_host(monkeypatch), prefix=[shutil.which("env"), "PATH=%s" % bin_dir])
    result = _run({"path": str(origin_file), "set": {"origin.k": "v"}}, failed=True)
    assert result["msg"] == "Failed to read path '%s': the host has no 'dd' command." % origin_file
    assert origin_file.read_text() == CONTAINER


# --- a read-only mount, as /sysroot on Fedora CoreOS ---------------------------------------------------

@pytest.fixture
def read_only_namespace(tmp_path):
    """A mount namespace of the test's own in which ``tmp_path/sysroot`` is a read-only bind mount; -> (the
    directory, the argv prefix that runs a command in that namespace)."""
    if os.geteuid() != 0 or not (shutil.which("unshare") and shutil.which("nsenter")):
        pytest.skip("needs root, unshare(1) and nsenter(1)")
    target = tmp_path / "sysroot"
    target.mkdir()
    holder = subprocess.Popen(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c",
         'mount --bind "$1" "$1" && mount -o remount,bind,ro,nosuid,nodev "$1" && echo ready && exec sleep 600',
         "sh", str(target)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "ready\n"
        yield target, ["nsenter", "--mount=/proc/%d/ns/mnt" % holder.pid, "--"]
    finally:
        holder.kill()
        holder.wait()


def test_a_read_only_mount_is_written_from_a_private_mount_namespace(read_only_namespace, monkeypatch):
    target, inside = read_only_namespace
    origin = target / "abc.0.origin"
    origin.write_text(CONTAINER)   # written outside the namespace, where the directory is writable
    probe = subprocess.run(inside + ["touch", str(target / "probe")], stderr=subprocess.PIPE, text=True, check=False)
    assert probe.returncode != 0 and "Read-only file system" in probe.stderr

    fake = run_scripts(fake_host(monkeypatch), prefix=inside)
    result = _run({"path": str(origin), "set": {"origin.k": "v"}, "backup": True})
    assert result["changed"] is True
    assert origin.read_text() == CONTAINER.replace(REFERENCE + "\n", REFERENCE + "\nk=v\n")
    assert Path(result["backup_file"]).read_text() == CONTAINER
    assert _argvs(fake) == [_read_argv(origin), _write_argv(origin, CONTAINER.encode(), backup=True, read_only=True)]
    # The namespace the host's processes share still sees the mount read-only, with its other flags.
    options = subprocess.run(inside + ["findmnt", "-n", "-o", "VFS-OPTIONS", "-T", str(target)],
                             stdout=subprocess.PIPE, text=True, check=True).stdout.strip().split(",")
    assert options[0] == "ro" and "nosuid" in options and "nodev" in options

    again = _run({"path": str(origin), "set": {"origin.k": "v"}, "backup": True})
    assert again["changed"] is False
    assert sorted(p.name for p in target.iterdir()) == sorted([origin.name, Path(result["backup_file"]).name])


@pytest.mark.parametrize("confined, cause", [
    # In a user namespace of its own, unshare may not clear the read-only flag of a mount from the namespace above.
    (["unshare", "--user", "--map-root-user"],
     "cannot make {dir} writable in a private mount namespace (permission denied)"),
    # Root without capabilities may not unshare its mount namespace at all.
    (["setpriv", "--bounding-set=-all", "--inh-caps=-all"],
     "cannot make the mount that holds {path} writable in a private mount namespace (Operation not permitted)"),
])
def test_a_mount_that_cannot_be_made_writable_fails_in_one_sentence(read_only_namespace, monkeypatch, confined, cause):
    target, inside = read_only_namespace
    if not shutil.which(confined[0]):
        pytest.skip("needs %s(1)" % confined[0])
    origin = target / "abc.0.origin"
    origin.write_text(CONTAINER)
    run_scripts(fake_host(monkeypatch), prefix=inside + confined)
    result = _run({"path": str(origin), "set": {"origin.k": "v"}, "backup": True}, failed=True)
    assert result["msg"] == "Failed to write origin %s: %s." % (origin, cause.format(dir=target, path=origin))
    assert origin.read_text() == CONTAINER
    assert [p.name for p in target.iterdir()] == [origin.name]


@pytest.mark.parametrize("osname, part", [("../../../etc", "../../../etc"), ("..", ".."), ("", "")])
def test_a_stateroot_name_that_is_no_file_name_is_refused(fake, sysroot, osname, part):
    fake["results"] = [(0, _status(dict(_dep(CHECKSUM_A, 0, booted=True), osname=osname)), "")]
    result = _run({"sysroot": str(sysroot), "set": {"origin.k": "v"}}, failed=True)
    assert result["msg"] == ("Failed to locate the origin of deployment fedora-coreos-%s.0: rpm-ostree status names "
                             "'%s', which is not a file name." % (CHECKSUM_A, part))
    assert _argvs(fake) == [["rpm-ostree", "status", "--json"]]


def test_the_argument_spec_is_the_documented_one():
    """The action checks its arguments against _origin_edit.ARGUMENT_SPEC; the module file documents them: each
    option with the same type, default, elements and choices."""
    import yaml

    from ansible_collections.fleetos.layering.plugins.modules import ostree_origin as documentation

    documented = yaml.safe_load(documentation.DOCUMENTATION)["options"]
    assert sorted(documented) == sorted(_origin_edit.ARGUMENT_SPEC)
    for name, option in _origin_edit.ARGUMENT_SPEC.items():
        doc = documented[name]
        assert (doc["type"], doc.get("default"), doc.get("choices"), doc.get("elements"), bool(doc.get("required"))) \
            == (option["type"], option.get("default"), option.get("choices"), option.get("elements"),
                bool(option.get("required"))), name
