"""os_image_stage with phase start and finish on a lab node of its own (no Python on it, as on Fedora CoreOS).

The node's link is shaped so that the pull takes seconds: the start returns while rpm-ostree still runs on the
node, detached (the lab's nodes have no systemd: setsid), and the job has no exit status yet; a finish past
its timeout leaves the job running; the finish collects it and returns what the stage in one task returns, the
staged checksum the one ``rpm-ostree status --json`` shows. A host with the image staged starts nothing. The
auth file at /run/ostree/auth.json is put back as it was, and the credentials are in no argv and no job file.
A bootc node stages the same way, download-only.
"""

import json
import time

import pytest

from test_no_python import ansible

OWNER = "test_stage_detached"
RUN_AUTH = "/run/ostree/auth.json"
ETC_AUTH = "/etc/ostree/auth.json"
# What was at /run/ostree/auth.json before the stage (not the lab's credentials): put back afterwards.
PREVIOUS = '{"auths": {"example.invalid": {"auth": "cHJldmlvdXM6b25l"}}}\n'


def _staged(lab, node):
    return [d for d in lab.rpm_ostree_status(node)["deployments"] if d.get("staged")]


def _stage(lab, node, image, failed=False, **args):
    return ansible(lab, node, "fleetos.layering.os_image_stage",
                   dict(image=image, backend="rpm-ostree", auth_file=ETC_AUTH, **args), failed=failed)


@pytest.fixture(scope="module")
def node(lab):
    name = lab.own_nodes(OWNER, 1)[0]
    booted = [d for d in lab.rpm_ostree_status(name)["deployments"] if d["booted"]][0]
    assert booted.get("container-image-reference-digest") == lab.base_digest and not _staged(lab, name)
    yield name
    lab.fleetlab("shape", "off", "--nodes", name)
    lab.exec(name, "rpm-ostree cleanup -p >/dev/null; rm -rf /run/fleetos %s" % RUN_AUTH)


@pytest.fixture(scope="module")
def target(rollout_image):
    return "%s@%s" % (rollout_image["tag_image"].rsplit(":", 1)[0], rollout_image["digest"])


def test_start_returns_while_the_stage_runs_and_finish_collects_it(lab, node, target, rollout_image):
    lab.exec(node, "mkdir -p /run/ostree && printf '%%s' '%s' > %s && chmod 644 %s" % (PREVIOUS, RUN_AUTH, RUN_AUTH))
    credentials = json.loads(lab.exec(node, ["cat", ETC_AUTH]).stdout)
    secret = list(credentials["auths"].values())[0]["auth"]
    # The rollout image's own layer (2 MB) through a 1 Mbit/s link: the pull takes about 16 seconds, well
    # beyond what the start takes on a loaded machine (6 s seen), so the job is caught running.
    lab.fleetlab("shape", "1mbit", "--nodes", node)

    begun = time.monotonic()
    started = _stage(lab, node, target, phase="start")
    took = time.monotonic() - begun
    job = started["job"]
    running = lab.exec(node, "test -d %s && ! test -e %s/rc && ps -eo args" % (job, job)).stdout
    print("start took %.2fs (ansible's own start included)" % took)
    # The start returned while the stage ran: the job has no exit status yet (read just below) and nothing is
    # staged; a start that waited for the pull would find both (no wall-clock bound: the machine's load varies).
    assert (started["changed"], started["started"], started["staged"], started["staged_checksum"]) == (
        True, True, False, None)
    assert started["digest"] == rollout_image["digest"] and job.startswith("/run/fleetos/stage.")
    # rpm-ostree runs on the node, detached, with the credentials where it reads them; nothing is staged yet.
    assert [line for line in running.splitlines() if "/usr/bin/rpm-ostree rebase --unchanged-exit-77" in line]
    assert lab.exec(node, ["cmp", ETC_AUTH, RUN_AUTH], check=False).returncode == 0
    assert not _staged(lab, node)
    assert secret not in running and secret not in lab.exec(node, "cat %s/*" % job).stdout
    assert lab.exec(node, ["stat", "-c", "%a", "/run/fleetos", job]).stdout.split() == ["700", "700"]

    # Past its timeout the finish fails and the job keeps running.
    late = _stage(lab, node, target, failed=True, phase="finish", job=job, timeout=0)
    assert late["msg"] == ("The stage job %s on the host did not end within the timeout of 0 seconds: it keeps "
                           "running, and a later task with phase finish and this job collects it." % job)
    assert lab.exec(node, ["test", "-d", job], check=False).returncode == 0

    finished = _stage(lab, node, target, phase="finish", job=job, poll_interval=0.5)
    staged = _staged(lab, node)
    assert len(staged) == 1 and staged[0]["container-image-reference-digest"] == rollout_image["digest"]
    assert (finished["changed"], finished["staged"], finished["staged_checksum"]) == (True, True, staged[0]["checksum"])
    assert finished["before"] == started["before"] and finished["after"]["digest"] == rollout_image["digest"]
    assert finished["reboot_required"] is True and secret not in json.dumps(finished)
    # The job's directory is gone; what was at /run/ostree/auth.json is back, as it was.
    assert lab.exec(node, ["ls", "-A", "/run/fleetos"]).stdout == ""
    assert lab.exec(node, ["cat", RUN_AUTH]).stdout == PREVIOUS
    assert lab.exec(node, ["stat", "-c", "%a", RUN_AUTH]).stdout.strip() == "644"
    assert not [f for f in lab.exec(node, ["ls", "-A", "/run/ostree"]).stdout.split() if "fleetos" in f or ".tmp" in f]


def test_a_host_with_the_image_staged_starts_nothing(lab, node, target, rollout_image):
    lab.fleetlab("shape", "off", "--nodes", node)
    if not _staged(lab, node):
        _stage(lab, node, target)
    checksum = _staged(lab, node)[0]["checksum"]
    in_one_task = _stage(lab, node, target)
    started = _stage(lab, node, target, phase="start")
    assert (started["changed"], started["job"], started["started"], started["staged_checksum"]) == (
        False, None, False, checksum)
    finished = _stage(lab, node, target, phase="finish", job=started["job"])
    assert finished == in_one_task and (finished["changed"], finished["staged"], finished["staged_checksum"]) == (
        False, True, checksum)
    assert dict(finished, job=None, started=False) == started
    assert lab.exec(node, ["ls", "-A", "/run/fleetos"], check=False).stdout == ""


def test_a_bootc_node_stages_download_only_the_same_way(lab, target, rollout_image):
    name = json.loads(lab.fleetlab("claim", OWNER + "-bootc", "--count", "1", "--backend", "bootc",
                                   "--json").stdout)[0]
    args = dict(image=target, backend="bootc", auth_file=ETC_AUTH)
    try:
        started = ansible(lab, name, "fleetos.layering.os_image_stage", dict(args, phase="start"))
        assert (started["changed"], started["started"], started["staged"]) == (True, True, False)
        finished = ansible(lab, name, "fleetos.layering.os_image_stage",
                           dict(args, phase="finish", job=started["job"], poll_interval=0.5))
        staged = json.loads(lab.exec(name, ["bootc", "status", "--format=json"]).stdout)["status"]["staged"]
        assert staged["image"]["imageDigest"] == rollout_image["digest"] and staged["downloadOnly"] is True
        assert (finished["changed"], finished["staged"], finished["staged_checksum"], finished["reboot_required"]) == (
            True, True, staged["ostree"]["checksum"], False)
        assert lab.exec(name, ["ls", "-A", "/run/fleetos"]).stdout == ""
        assert lab.exec(name, ["test", "-e", RUN_AUTH], check=False).returncode != 0
    finally:
        lab.exec(name, "rpm-ostree cleanup -p >/dev/null")
