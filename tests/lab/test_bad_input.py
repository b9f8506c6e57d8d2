"""Bad input to every module, as a table: each case fails with one short sentence and changes nothing.

One playbook runs every case of the table on one node of this test's own, made with a Python
interpreter for oscontainer_rebase, the one module that needs it (the others do not use it) (shell
metacharacters, a 100,000-character value, lists, dicts and numbers where a string is
expected, control characters, negative numbers, non-regular paths, unknown choices),
registers each result and writes them all to one JSON file on the controller. Each result
must be a failure whose ``msg`` is one sentence under 300 characters that names the
option, with no traceback, no tool log line and no control character; the node (its
deployments, its origin files, its ``/dev/null``, the directories the cases point to)
and the machine's ``/dev/null`` must be the same after the run as before it.
"""

import json
import os
import time

import pytest
import yaml

from conftest import read_hosts
from test_integration_targets import run_playbook

OWNER = "test_bad_input"
FIX = "/var/tmp/fleetos-bad-input"
# A file a shell would create if a case's metacharacters ever reached one.
PWNED = "/var/tmp/fleetos-bad-input-pwned"
HUGE_LEN = 100000
MSG_MAX = 300
DIGEST_ZERO = "sha256:" + "0" * 64

# Everything a case could change: the deployments, the origin files (and any backup of
# them), the node's /dev/null, the fixture directory, the directories modules write
# temporary files, caches and auth files to, and the objects of the sysroot repository.
SNAPSHOT = r"""
set -u
echo '== status'; rpm-ostree status --json
echo '== origins'; find /sysroot/ostree/deploy/*/deploy -maxdepth 1 -name '*.origin*' -type f -exec sha256sum {} + | sort
echo '== deploy'; find /sysroot/ostree/deploy/*/deploy -maxdepth 1 -printf '%y %p %l\n' | sort
echo '== dev/null'; stat -c '%F %t:%T %i %a %U:%G' /dev/null
echo '== fixtures'; find FIX -printf '%y %p %l %s %T@ %m\n' | sort
find FIX -type f -exec sha256sum {} + | sort
for dir in /tmp /var/tmp /run/ostree /etc/ostree /var/cache /sysroot/ostree/container-cache; do
    echo "== $dir"; ls -a "$dir" 2>&1
done
echo '== repo'; find /sysroot/ostree/repo/objects /sysroot/ostree/repo/refs -type f | sort | sha256sum
echo '== pwned'; ls -la PWNED 2>&1 || true
""".replace("FIX", FIX).replace("PWNED", PWNED)


def _cases(lab):
    """(module, case, option named in the message, module arguments) for every bad input."""
    registry = lab.registry
    base = "%s/fleetos/lab-os" % registry
    pinned = "%s@%s" % (base, lab.base_digest)
    missing = "%s@%s" % (base, DIGEST_ZERO)      # a digest the registry does not have
    huge = "a" * HUGE_LEN
    metachars = {
        "semicolon": "; rm -rf %s" % FIX,
        "command substitution": "$(touch %s)" % PWNED,
        "backticks": "`touch %s`" % PWNED,
    }
    controls = {"NUL": "\x00", "newline": "\n", "ESC": "\x1b[31m"}
    non_strings = {"a list": ["a", "b"], "a dict": {"a": "b"}, "an integer": 5}
    origin_copy = FIX + "/copy.origin"
    cases = []

    def add(module, case, field, args):
        cases.append((module, case, field, args))

    # Every module that takes an image: metacharacters, huge, non-string and control characters.
    image_modules = {
        "os_image_pull": ({"state": "resolved"}, base + ":1.0"),
        "rpm_ostree_rebase": ({"state": "booted"}, pinned),
        "oscontainer_rebase": ({}, missing),
    }
    for module, (extra, good) in image_modules.items():
        for name, value in metachars.items():
            add(module, "image with " + name, "image", dict(extra, image=good + value))
        add(module, "huge image", "image", dict(extra, image="%s/fleetos/%s" % (registry, huge)))
        for name, value in non_strings.items():
            add(module, "image is " + name, "image", dict(extra, image=value))
        for name, value in controls.items():
            add(module, "image with " + name, "image", dict(extra, image=good + value))
        add(module, "negative retries", "retries", dict(extra, image=good, retries=-1))
        add(module, "negative retry_delay", "retry_delay", dict(extra, image=good, retry_delay=-5))
        add(module, "retries is a word", "retries", dict(extra, image=good, retries="many"))

    add("os_image_pull", "huge state", "state", {"image": base + ":1.0", "state": huge})
    add("os_image_pull", "expected_digest is a list", "expected_digest",
        {"image": base + ":1.0", "state": "resolved", "expected_digest": [lab.base_digest]})
    add("os_image_pull", "huge expected_digest", "expected_digest",
        {"image": base + ":1.0", "state": "resolved", "expected_digest": "sha256:" + huge})
    add("os_image_pull", "architecture with metacharacters", "architecture",
        {"image": base + ":1.0", "state": "resolved", "architecture": "amd64; touch %s" % PWNED})
    add("os_image_pull", "cache_dir is /dev/null", "cache_dir",
        {"image": base + ":1.0", "state": "present", "cache_dir": "/dev/null"})
    add("os_image_pull", "cache_dir is a regular file", "cache_dir",
        {"image": base + ":1.0", "state": "present", "cache_dir": origin_copy})
    add("os_image_pull", "cache_dir is an integer", "cache_dir",
        {"image": base + ":1.0", "state": "present", "cache_dir": 5})
    add("os_image_pull", "ca_cert_dir is /dev/null", "ca_cert_dir",
        {"image": base + ":1.0", "state": "resolved", "ca_cert_dir": "/dev/null"})
    add("os_image_pull", "auth_file is a directory", "auth_file",
        {"image": base + ":1.0", "state": "resolved", "auth_file": FIX + "/dir"})
    add("os_image_pull", "username is a list", "username",
        {"image": base + ":1.0", "state": "resolved", "username": ["fleetos"], "password": "x"})
    add("os_image_pull", "validate_certs is a word", "validate_certs",
        {"image": base + ":1.0", "state": "resolved", "validate_certs": "perhaps"})
    add("os_image_pull", "executable with metacharacters", "executable",
        {"image": base + ":1.0", "state": "resolved", "executable": "/usr/bin/skopeo; touch %s" % PWNED})

    add("rpm_ostree_rebase", "unknown transport", "transport",
        {"image": pinned, "state": "booted", "transport": "ostree-unverified-image"})
    add("rpm_ostree_rebase", "huge transport", "transport", {"image": pinned, "state": "booted", "transport": huge})
    add("rpm_ostree_rebase", "ostree_remote with metacharacters", "ostree_remote",
        {"image": pinned, "state": "booted", "transport": "remote", "ostree_remote": "fleet; touch %s" % PWNED})
    add("rpm_ostree_rebase", "ostree_remote with NUL", "ostree_remote",
        {"image": pinned, "state": "booted", "transport": "remote", "ostree_remote": "fleet\x00"})
    add("rpm_ostree_rebase", "auth_file is /dev/null", "auth_file",
        {"image": pinned, "state": "booted", "auth_file": "/dev/null"})
    add("rpm_ostree_rebase", "auth_file is a directory", "auth_file",
        {"image": pinned, "state": "booted", "auth_file": FIX + "/dir"})
    add("rpm_ostree_rebase", "allow_tag is a dict", "allow_tag",
        {"image": pinned, "state": "booted", "allow_tag": {"yes": True}})
    add("rpm_ostree_rebase", "executable is a directory", "executable",
        {"image": pinned, "state": "booted", "executable": FIX + "/dir"})

    add("oscontainer_rebase", "custom_description with NUL", "custom_description",
        {"image": missing, "custom_description": "fleet\x00os"})
    add("oscontainer_rebase", "custom_description with a newline", "custom_description",
        {"image": missing, "custom_description": "fleet\nos"})
    add("oscontainer_rebase", "tmpdir is /dev/null", "tmpdir", {"image": missing, "tmpdir": "/dev/null"})
    add("oscontainer_rebase", "tmpdir is an integer", "tmpdir", {"image": missing, "tmpdir": 5})
    add("oscontainer_rebase", "sysroot_repo is a symlink to a file", "sysroot_repo",
        {"image": missing, "sysroot_repo": FIX + "/link"})
    add("oscontainer_rebase", "ostree_executable is /dev/null", "ostree_executable",
        {"image": missing, "ostree_executable": "/dev/null"})

    # ostree_origin: non-regular and odd paths, bad edits of a regular copy of an origin.
    for name, path in (("/dev/null", "/dev/null"), ("a directory", FIX + "/dir"),
                       ("a symlink to the booted origin", FIX + "/link"), ("a fifo", FIX + "/fifo")):
        add("ostree_origin", "path is " + name, "path", {"path": path, "set": {"origin.fleetos-test": "x"}})
    add("ostree_origin", "path is an integer", "path", {"path": 5, "set": {"origin.fleetos-test": "x"}})
    add("ostree_origin", "path is a list", "path", {"path": [origin_copy], "set": {"origin.fleetos-test": "x"}})
    add("ostree_origin", "huge path", "path", {"path": "/" + huge, "set": {"origin.fleetos-test": "x"}})
    add("ostree_origin", "path with NUL", "path", {"path": origin_copy + "\x00", "set": {"origin.fleetos-test": "x"}})
    add("ostree_origin", "path with metacharacters", "path",
        {"path": origin_copy + metachars["semicolon"], "set": {"origin.fleetos-test": "x"}})
    for name, value in controls.items():
        if name != "newline":       # an origin value may hold a newline: GKeyFile escapes it
            add("ostree_origin", "set value with " + name, "set",
                {"path": origin_copy, "set": {"origin.fleetos-test": "x" + value}})
    add("ostree_origin", "huge set key", "set", {"path": origin_copy, "set": {"origin." + huge: "x"}})
    add("ostree_origin", "set is a list", "set", {"path": origin_copy, "set": ["origin.fleetos-test=x"]})
    add("ostree_origin", "remove entry is an integer", "remove", {"path": origin_copy, "remove": [5]})
    add("ostree_origin", "huge deployment", "deployment", {"deployment": huge, "set": {"origin.fleetos-test": "x"}})
    add("ostree_origin", "deployment with metacharacters", "deployment",
        {"deployment": "booted" + metachars["command substitution"], "set": {"origin.fleetos-test": "x"}})
    add("ostree_origin", "sysroot is /dev/null", "sysroot", {"sysroot": "/dev/null", "set": {"origin.fleetos-test": "x"}})
    add("ostree_origin", "backup is a word", "backup",
        {"path": origin_copy, "set": {"origin.fleetos-test": "x"}, "backup": "please"})

    # rpm_ostree_info takes only the executable.
    for name, value in (("metacharacters", "/usr/bin/rpm-ostree; touch %s" % PWNED), ("a directory", FIX + "/dir"),
                        ("/dev/null", "/dev/null"), ("huge", "/" + huge), ("a list", ["rpm-ostree"]),
                        ("NUL", "/usr/bin/rpm-ostree\x00")):
        add("rpm_ostree_info", "executable is " + name, "executable", {"executable": value})

    # os_rollout_lease: the lease file must be a regular file (or missing), its values plain.
    lease = {"rollout": "r-bad-input", "owner": {"controller": "ctl", "user": "ops", "pid": 1},
             "started_at": 1.0, "path": FIX + "/lease.json"}
    for name, path in (("/dev/null", "/dev/null"), ("a directory", FIX + "/dir"), ("a symlink", FIX + "/link"),
                       ("a fifo", FIX + "/fifo"), ("relative", "lease.json"), ("with NUL", FIX + "/lease\x00")):
        add("os_rollout_lease", "path is " + name, "path", dict(lease, path=path))
    for name, value in dict(non_strings, huge="r" * HUGE_LEN, NUL="r\x00", ESC="r\x1b").items():
        add("os_rollout_lease", "rollout is " + name, "rollout", dict(lease, rollout=value))
    add("os_rollout_lease", "zero ttl", "ttl", dict(lease, ttl=0))
    add("os_rollout_lease", "negative wait", "wait", dict(lease, wait=-1))
    add("os_rollout_lease", "unknown phase", "phase", dict(lease, phase="rebooting; reboot"))
    add("os_rollout_lease", "started_at is a word", "started_at", dict(lease, started_at="yesterday"))
    add("os_rollout_lease", "owner is a string", "owner", dict(lease, owner="ops@ctl"))

    # bootc_switch and bootc_info: refused before bootc is looked for (this node is an rpm-ostree one).
    for name, value in dict(non_strings, huge="%s/fleetos/%s" % (registry, huge), NUL=pinned + "\x00",
                            ESC=pinned + "\x1b[31m").items():
        add("bootc_switch", "image is " + name, "image", {"image": value})
    add("bootc_switch", "unknown transport", "transport", {"image": pinned, "transport": "docker-daemon"})
    add("bootc_switch", "negative retries", "retries", {"image": pinned, "retries": -1})
    add("bootc_switch", "labels is a list", "labels", {"image": pinned, "labels": ["ostree.bootable"]})
    add("bootc_switch", "auth_file is /dev/null", "auth_file", {"image": pinned, "auth_file": "/dev/null"})
    for name, value in (("metacharacters", "/usr/bin/bootc; touch %s" % PWNED), ("a directory", FIX + "/dir"),
                        ("a list", ["bootc"]), ("NUL", "/usr/bin/bootc\x00")):
        add("bootc_info", "executable is " + name, "executable", {"executable": value})
    add("os_info", "unknown backend", "backend", {"backend": "dnf"})
    add("os_info", "backend is a list", "backend", {"backend": ["bootc"]})
    add("os_info", "bootc_executable has metacharacters", "bootc_executable",
        {"bootc_executable": "/usr/bin/bootc; touch %s" % PWNED})
    add("os_info", "rpm_ostree_executable is a directory", "rpm_ostree_executable",
        {"rpm_ostree_executable": FIX + "/dir"})

    # os_reboot runs its two commands through the shell by design: the cases are the ones that
    # must be refused before its reboot command (a marker file under FIX) could run.
    reboot = {"reboot_command": "touch %s/rebooted" % FIX, "boot_time_command": "cat /run/lab-boot-id",
              "reboot_timeout": 1, "poll_interval": 0.2}
    for name, value in non_strings.items():
        add("os_reboot", "reboot_command is " + name, "reboot_command", dict(reboot, reboot_command=value))
    add("os_reboot", "reboot_command with NUL", "reboot_command", dict(reboot, reboot_command="true\x00"))
    add("os_reboot", "reboot_command with ESC", "reboot_command", dict(reboot, reboot_command="true\x1b"))
    add("os_reboot", "boot_time_command prints no boot id", "boot_time_command",
        dict(reboot, boot_time_command="echo '$(id); `id`'"))
    add("os_reboot", "huge boot_time_command", "boot_time_command", dict(reboot, boot_time_command="#" + huge))
    add("os_reboot", "boot_time_command is a dict", "boot_time_command", dict(reboot, boot_time_command={"a": 1}))
    add("os_reboot", "negative reboot_timeout", "reboot_timeout", dict(reboot, reboot_timeout=-1))
    add("os_reboot", "zero poll_interval", "poll_interval", dict(reboot, poll_interval=0))
    add("os_reboot", "negative connect_timeout", "connect_timeout", dict(reboot, connect_timeout=-5))
    add("os_reboot", "reboot_timeout is a word", "reboot_timeout", dict(reboot, reboot_timeout="soon"))
    add("os_reboot", "huge reboot_timeout", "reboot_timeout", dict(reboot, reboot_timeout="9" * HUGE_LEN))
    return cases


def _playbook(path, node, cases, results):
    """One task per case (result registered, errors ignored), then one task that writes them all."""
    tasks = []
    for index, (module, case, _field, args) in enumerate(cases):
        tasks.append({"name": "%s: %s" % (module, case), "fleetos.layering." + module: args,
                      "register": "case%03d" % index, "ignore_errors": True})
    tasks.append({
        "name": "Write every result to the controller",
        "ansible.builtin.copy": {
            "content": "{{ [%s] | to_json }}" % ", ".join("case%03d" % i for i in range(len(cases))),
            "dest": str(results), "mode": "0600"},
        "delegate_to": "localhost", "run_once": True,
    })
    path.write_text(yaml.safe_dump([{"name": "Bad input", "hosts": node, "gather_facts": False, "tasks": tasks}],
                                   sort_keys=False))


@pytest.fixture(scope="module")
def node(lab):
    """A node of this test's own, with the fixtures the cases point to."""
    name = [n["name"] if isinstance(n, dict) else n for n in lab.own_nodes(OWNER, 1, with_python=True)][0]
    origin = lab.exec(name, "ls /sysroot/ostree/deploy/*/deploy/*.origin").stdout.split()[0]
    lab.exec(name, "rm -rf {fix} {pwned} && mkdir -p {fix}/dir && cp {origin} {fix}/copy.origin "
                   "&& ln -s {origin} {fix}/link && mkfifo {fix}/fifo".format(fix=FIX, pwned=PWNED, origin=origin))
    yield name
    lab.exec(name, "rm -rf %s %s" % (FIX, PWNED))


def _snapshot(lab, node):
    return lab.exec(node, SNAPSHOT).stdout


def _machine_dev_null():
    st = os.lstat("/dev/null")
    return (st.st_mode, st.st_rdev, st.st_ino, st.st_size)


def test_bad_input_fails_in_one_sentence_and_changes_nothing(lab, node, tmp_path):
    cases = _cases(lab)
    hosts, all_vars = read_hosts(lab.inventory)
    inventory = tmp_path / "hosts.yml"
    # Pipelining: one ssh round trip per case instead of a copy and a run.
    inventory.write_text(yaml.safe_dump({"all": {"vars": dict(all_vars, ansible_pipelining=True),
                                                 "hosts": {node: hosts[node]}}}))
    results = tmp_path / "results.json"
    playbook = tmp_path / "bad-input.yml"
    _playbook(playbook, node, cases, results)

    before, machine_before = _snapshot(lab, node), _machine_dev_null()
    # The snapshot sees what it is meant to see (else the comparison below could not fail).
    assert '"booted" : true' in before
    assert ".origin" in before.split("== origins")[1].split("==")[0]
    assert before.split("== dev/null")[1].split()[:2] == ["character", "special"]
    for entry in ("d %s/dir" % FIX, "l %s/link" % FIX, "p %s/fifo" % FIX, "f %s/copy.origin" % FIX):
        assert entry in before
    assert "No such file" in before.split("== pwned")[1]

    start = time.monotonic()
    proc = run_playbook(_Lab(lab, inventory), playbook, check=False, timeout=600)
    print("%d cases in %.1f s" % (len(cases), time.monotonic() - start))
    assert results.exists(), proc.stdout[-5000:]
    outcome = json.loads(results.read_text())
    after, machine_after = _snapshot(lab, node), _machine_dev_null()

    assert len(outcome) == len(cases)
    problems = []
    for (module, case, field, _args), result in zip(cases, outcome):
        msg = result.get("msg")
        why = []
        if result.get("failed") is not True:
            why.append("did not fail")
        if not isinstance(msg, str):
            why.append("has no msg")
        else:
            if len(msg) >= MSG_MAX:
                why.append("msg has %d characters" % len(msg))
            if "\n" in msg.strip() or not msg.rstrip().endswith("."):
                why.append("msg is not one sentence")
            if any(ord(char) < 32 or ord(char) == 127 for char in msg):
                why.append("msg holds a control character")
            if "Traceback" in msg or 'time="' in msg or "level=" in msg:
                why.append("msg holds a traceback or a tool log line")
            if field not in msg and field.replace("_", " ") not in msg:
                why.append("msg does not name %s" % field)
        if "most recent call last" in str(result.get("exception", "")):
            why.append("crashed")
        if why:
            problems.append("%s: %s: %s: %r" % (module, case, ", ".join(why), (msg or "")[:400]))
    assert problems == [], "\n".join(problems)
    assert after == before
    assert machine_after == machine_before


class _Lab:
    """The lab as run_playbook sees it, with this test's inventory."""

    def __init__(self, lab, inventory):
        self._lab = lab
        self.inventory = inventory

    def __getattr__(self, name):
        return getattr(self._lab, name)
