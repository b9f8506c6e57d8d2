"""Secrets and registry failures end to end: os_image_pull and rpm_ostree_rebase on the lab.

A registry user whose password holds `$`, `'`, a space and non-ASCII letters pulls an
image; a watcher samples every process's argv (the node's processes are visible from
the machine) while it runs; the password must appear in no argv, in no -vvvv output
and in no file left on the node. Then the failure messages: wrong password, missing
credentials, unknown CA, registry down, each one sentence and nothing staged.
"""

import base64
import json
import os
import subprocess
import threading
import time

import pytest
import yaml

from conftest import REPO
from test_integration_targets import run_playbook

NODE = "node04"
USER = "fleetos-secret"
PASSWORD = "pa$$ 'wörd ünïcode $HOME"


class ArgvWatcher(threading.Thread):
    """Samples /proc/*/cmdline until stopped; records any argv that contains needle."""

    def __init__(self, needle):
        super().__init__(daemon=True)
        self.needle = needle.encode()
        self.hits = []
        self.samples = 0
        self.running = True

    def run(self):
        while self.running:
            for pid in os.listdir("/proc"):
                if not pid.isdigit():
                    continue
                try:
                    with open("/proc/%s/cmdline" % pid, "rb") as handle:
                        argv = handle.read()
                except OSError:
                    continue
                if self.needle in argv:
                    self.hits.append(argv.replace(b"\0", b" ").decode(errors="replace"))
            self.samples += 1
            time.sleep(0.01)

    def stop(self):
        self.running = False
        self.join()


@pytest.fixture(scope="module")
def secret_user(lab):
    proc = subprocess.run([str(REPO / "lab" / "fleetlab"), "registry", "user", USER],
                          input=PASSWORD + "\n", text=True, capture_output=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert PASSWORD not in (lab.state / "registry" / "registry.log").read_text()
    return USER


def _playbook(tmp_path, tasks):
    path = tmp_path / "play.yml"
    path.write_text(yaml.safe_dump([{
        "name": "Secrets scenario", "hosts": NODE, "gather_facts": False, "tasks": tasks,
    }], sort_keys=False))
    return path


def _vars_file(tmp_path, data):
    path = tmp_path / "secret-vars.yml"
    fd = os.open(str(path), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        yaml.safe_dump(data, handle, allow_unicode=True)
    return path


def _node_files_containing(lab, needles, dirs=("tmp", "var/tmp", "run", "var/roothome"), node=NODE):
    """Files under the node's dirs (read from the machine through /proc/PID/root) holding a needle."""
    pid = int((lab.state / "nodes" / node / "init.pid").read_text())
    root = "/proc/%d/root" % pid
    found = []
    for top in dirs:
        for dirpath, _dirs, files in os.walk(os.path.join(root, top)):
            for name in files:
                path = os.path.join(dirpath, name)
                try:
                    with open(path, "rb") as handle:
                        data = handle.read(1 << 20)
                except OSError:
                    continue
                if any(n in data for n in needles):
                    found.append(path[len(root):])
    return found


def test_special_password_works_and_leaks_nowhere(lab, secret_user, tmp_path):
    image = "%s/fleetos/lab-os:1.0" % lab.registry
    secrets = _vars_file(tmp_path, {"secret_user": secret_user, "secret_password": PASSWORD})
    play = _playbook(tmp_path, [
        {"name": "Pull with the special password", "fleetos.layering.os_image_pull": {
            "image": image, "username": "{{ secret_user }}", "password": "{{ secret_password }}",
            "state": "present", "cache_dir": "/var/tmp/fleetos-secret-test"},
         "register": "pulled"},
        {"name": "Show the digest", "ansible.builtin.debug": {"var": "pulled.digest"}},
    ])
    watcher = ArgvWatcher(PASSWORD)
    watcher.start()
    try:
        proc = run_playbook(lab, play, "-e", "@%s" % secrets, "-vvvv")
    finally:
        watcher.stop()
    assert lab.base_digest in proc.stdout
    assert watcher.samples > 10
    assert watcher.hits == []
    assert PASSWORD not in proc.stdout
    assert "wörd" not in proc.stdout
    token = base64.b64encode(("%s:%s" % (USER, PASSWORD)).encode())
    assert _node_files_containing(lab, [PASSWORD.encode(), token]) == []
    lab.exec(NODE, ["rm", "-rf", "/var/tmp/fleetos-secret-test"])
    reads = [e for e in lab.journal("blob_read") if e.get("node") == NODE and e["repo"] == "fleetos/lab-os"]
    assert reads, "the pull read nothing from the registry"


@pytest.mark.parametrize("case,module_args,message", [
    ("wrong password", {"username": USER, "password": "{{ secret_password }}x"},
     "the registry refused the credentials (unauthorized)"),
    ("missing credentials", {"auth_file": "/nonexistent/auth.json"}, "/nonexistent/auth.json"),
    ("unknown CA", {"auth_file": "/etc/ostree/auth.json", "ca_cert_dir": "/var/empty-ca"},
     "certificate"),
])
def test_pull_failures_are_one_sentence(lab, secret_user, tmp_path, case, module_args, message):
    image = "%s/fleetos/lab-os:1.0" % lab.registry
    secrets = _vars_file(tmp_path, {"secret_password": PASSWORD})
    play = _playbook(tmp_path, [
        {"name": "Make an empty CA dir", "ansible.builtin.raw": "mkdir -p /var/empty-ca"},
        {"name": "Pull (%s)" % case, "fleetos.layering.os_image_pull": dict(module_args, image=image),
         "register": "pulled", "ignore_errors": True},
        {"name": "Report", "ansible.builtin.copy": {"content": "{{ pulled | to_json }}",
                                                     "dest": str(tmp_path / "result.json"), "mode": "0600"},
         "delegate_to": "localhost"},
    ])
    run_playbook(lab, play, "-e", "@%s" % secrets)
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["failed"] is True
    assert message in result["msg"], result["msg"]
    assert "Traceback" not in result["msg"]
    assert "most recent call last" not in result.get("exception", "")  # a handled error, not a crash
    assert len(result["msg"].strip().splitlines()) == 1
    assert PASSWORD not in json.dumps(result)


def test_registry_down_fails_clearly_and_stages_nothing(lab, tmp_path):
    before = lab.rpm_ostree_status(NODE)
    target = "%s/fleetos/lab-os@%s" % (lab.registry, "sha256:" + "e" * 64)
    play = _playbook(tmp_path, [
        # The default retries (a refused connection is transient: retried, then the one-sentence
        # failure), one second apart instead of the default five.
        {"name": "Pull while the registry is down", "fleetos.layering.os_image_pull": {
            "image": "%s/fleetos/lab-os:1.0" % lab.registry, "auth_file": "/etc/ostree/auth.json",
            "retry_delay": 1},
         "register": "pulled", "ignore_errors": True},
        {"name": "Rebase while the registry is down", "fleetos.layering.rpm_ostree_rebase": {
            "image": target, "retries": 0},
         "register": "rebased", "ignore_errors": True},
        {"name": "Report", "ansible.builtin.copy": {
            "content": "{{ {'pull': pulled, 'rebase': rebased} | to_json }}",
            "dest": str(tmp_path / "result.json"), "mode": "0600"},
         "delegate_to": "localhost"},
    ])
    lab.fleetlab("registry", "stop")
    try:
        run_playbook(lab, play)
    finally:
        lab.fleetlab("registry", "start")
    result = json.loads((tmp_path / "result.json").read_text())
    for key in ("pull", "rebase"):
        assert result[key]["failed"] is True, result[key]
        assert len(result[key]["msg"].strip().splitlines()) == 1, result[key]["msg"]
        assert "Traceback" not in result[key]["msg"]
        assert "most recent call last" not in result[key].get("exception", "")
    after = lab.rpm_ostree_status(NODE)
    assert [d["checksum"] for d in after["deployments"]] == [d["checksum"] for d in before["deployments"]]
    assert not any(d.get("staged") for d in after["deployments"]) or any(
        d.get("staged") for d in before["deployments"])
