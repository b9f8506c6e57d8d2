"""The lab fixture: a real image-mode fleet (lab/fleetlab) for the lab tests.

The session brings the lab up when it is not already (3 nodes) and takes it down at
the end if it brought it up; `FLEETLAB_KEEP=1` keeps it running.
"""

import json
import os
import shlex
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "lab"))

from fleetlablib.common import NODE_PYTHON as _NODE_PYTHON  # noqa: E402
from fleetlablib.inventory import read_hosts  # noqa: E402,F401  (re-exported for the tests)
# The interpreter of the lab's stand-ins on a node: a test's own probe on a node without Python uses it.
NODE_PYTHON = str(_NODE_PYTHON)
FLEETLAB = REPO / "lab" / "fleetlab"
STATE = Path(os.environ.get("FLEETLAB_STATE", str(REPO / ".lab")))
LAB_NETNS = os.environ.get("FLEETLAB_NETNS", "fleetlab")
VENV_BIN = Path(sys.executable).parent
NODES = 4


def pool_inventory(lab, path, group, nodes, group_vars):
    """Write an inventory of the lab's ``nodes`` in one ``group`` with ``group_vars`` (a pool's), and the lab's
    all.vars, to ``path``; -> ``path``."""
    hosts, allvars = read_hosts(lab.inventory)
    path.write_text(yaml.safe_dump({"all": {"vars": allvars, "children": {group: {
        "vars": group_vars, "hosts": {name: hosts[name] for name in nodes}}}}}, sort_keys=False))
    return path


def collections_path():
    """ANSIBLE_COLLECTIONS_PATH that loads fleetos.layering from this working tree."""
    runtime = REPO / ".build" / "runtime"
    link = runtime / "ansible_collections" / "fleetos" / "layering"
    link.parent.mkdir(parents=True, exist_ok=True)
    if not link.is_symlink():
        try:
            link.symlink_to(REPO)
        except FileExistsError:  # made at the same moment by the other half of `make test`'s lab tests
            pass
    return runtime


def controller_without_skopeo(env, directory):
    """``env`` for a controller without skopeo: the first directory of its PATH holds a ``skopeo`` that appends its
    arguments to ``directory/skopeo-ran`` and fails as a missing command does; -> (env, that file)."""
    shims = Path(directory) / "no-skopeo"
    shims.mkdir(parents=True, exist_ok=True)
    ran = Path(directory) / "skopeo-ran"
    shim = shims / "skopeo"
    shim.write_text("#!/bin/sh\nprintf '%%s\\n' \"$*\" >> %s\necho 'skopeo: not installed on this controller' >&2\n"
                    "exit 127\n" % shlex.quote(str(ran)))
    shim.chmod(0o755)
    return dict(env, PATH="%s%s%s" % (shims, os.pathsep, env.get("PATH", ""))), ran


def pytest_collection_modifyitems(config, items):
    """Tests marked lab_last (they take the lab down) run after all the others."""
    items.sort(key=lambda item: 1 if item.get_closest_marker("lab_last") else 0)


def pytest_configure(config):
    config.addinivalue_line("markers", "lab_last: runs after every other lab test (it stops the lab)")


class Lab:
    def __init__(self):
        self.root = REPO
        self.state = STATE
        self.started_here = False
        self.is_up = False
        self._journal_file = None
        self._journal_offset = 0
        self._journal_records = []

    def fleetlab(self, *args, check=True, timeout=600, input_text=None):
        proc = subprocess.run([str(FLEETLAB)] + [str(a) for a in args], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, timeout=timeout, check=False,
                              input=input_text, stdin=None if input_text is not None else subprocess.DEVNULL)
        if check and proc.returncode != 0:
            raise AssertionError("fleetlab %s failed (rc=%d): %s%s" % (
                " ".join(map(str, args)), proc.returncode, proc.stdout, proc.stderr))
        return proc

    # Backwards-friendly alias.
    run = fleetlab

    @property
    def info(self):
        return json.loads((self.state / "lab.json").read_text())

    @property
    def nodes(self):
        return sorted(self.info["nodes"])

    @property
    def registry(self):
        return self.info["registry"]

    @property
    def images(self):
        return json.loads((self.state / "images" / "built.json").read_text())

    @property
    def base_record(self):
        return self.images["fleetos/lab-os:1.0"]

    @property
    def base_image(self):
        return "%s/fleetos/lab-os:1.0" % self.registry

    @property
    def base_digest(self):
        return self.base_record["digest"]

    @property
    def inventory(self):
        """The inventory fleetlab writes: FLEETLAB_INVENTORY (a second lab's) or inventories/lab."""
        return Path(os.environ.get("FLEETLAB_INVENTORY", str(self.root / "inventories" / "lab"))) / "hosts.yml"

    def exec(self, node, cmd, check=True, timeout=300):
        argv = ["bash", "-c", cmd] if isinstance(cmd, str) else list(cmd)
        proc = subprocess.run([str(FLEETLAB), "exec", node, "--"] + argv, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, timeout=timeout, check=False)
        if check and proc.returncode != 0:
            raise AssertionError("on %s, %r failed (rc=%d): %s%s" % (
                node, cmd, proc.returncode, proc.stdout, proc.stderr))
        return proc

    def build_image(self, name_tag, *args):
        proc = self.fleetlab("image", "build", name_tag, "--json", *args)
        return json.loads(proc.stdout)["digest"]

    def image_record(self, name_tag):
        return self.images[name_tag]

    def boot_id(self, node):
        return self.exec(node, ["cat", "/run/lab-boot-id"]).stdout.strip()

    def wait_up(self, node, timeout=120, not_boot_id=None):
        deadline = time.time() + timeout
        while time.time() < deadline:
            proc = self.exec(node, ["cat", "/run/lab-boot-id"], check=False)
            if proc.returncode == 0 and proc.stdout.strip() and proc.stdout.strip() != not_boot_id:
                return proc.stdout.strip()
            time.sleep(0.2)
        raise AssertionError("node %s did not come back within %ds" % (node, timeout))

    def reboot(self, node, timeout=120):
        before = self.boot_id(node)
        self.exec(node, ["systemctl", "reboot"])
        return self.wait_up(node, timeout, not_boot_id=before)

    def journal(self, event=None):
        """The lab's events journal, oldest first (``event``: only events of that kind).

        Read incrementally: the records parsed so far are kept and only the lines appended
        since the last call are parsed (the tests poll it while a rollout runs); a journal
        that was replaced or truncated (the lab taken down and up again) is read anew."""
        path = self.state / "journal.jsonl"
        with path.open("rb") as handle:
            st = os.fstat(handle.fileno())
            # Same file: same inode and same first record (an inode can be reused).
            ident = (st.st_dev, st.st_ino, handle.read(128))
            if ident != self._journal_file or st.st_size < self._journal_offset:
                self._journal_file, self._journal_offset, self._journal_records = ident, 0, []
            if st.st_size > self._journal_offset:
                handle.seek(self._journal_offset)
                data = handle.read()
                # Only whole lines: a line being appended right now is read on the next call.
                end = data.rfind(b"\n") + 1
                self._journal_records.extend(json.loads(line) for line in data[:end].decode().splitlines()
                                             if line.strip())
                self._journal_offset += end
        return [r for r in self._journal_records if event is None or r.get("event") == event]

    def rpm_ostree_status(self, node):
        return json.loads(self.exec(node, ["rpm-ostree", "status", "--json"]).stdout)

    def ansible(self, *args, check=True, timeout=600):
        env = dict(os.environ, ANSIBLE_HOST_KEY_CHECKING="True", ANSIBLE_NOCOLOR="1",
                   ANSIBLE_DEPRECATION_WARNINGS="False", ANSIBLE_COLLECTIONS_PATH=str(collections_path()))
        proc = subprocess.run([str(VENV_BIN / "ansible"), "-i", str(self.inventory)] + list(args),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              timeout=timeout, env=env, cwd=str(self.root), check=False)
        if check and proc.returncode != 0:
            raise AssertionError("ansible %s failed (rc=%d): %s%s" % (
                " ".join(args), proc.returncode, proc.stdout, proc.stderr))
        return proc

    def own_nodes(self, owner, count, disk_image=None, with_python=False, backend=None):
        """``count`` nodes that only the caller (``owner``) uses, optionally booted from
        ``disk_image`` as a cloud image would be, or with a Python interpreter, or managed by ``backend``
        (bootc): ``fleetlab claim`` (made after node10 and after every node the lab has, the first time; the
        same nodes on every later call). The caller puts them back into the state it needs."""
        args = ["claim", owner, "--count", count, "--json"] + (["--disk-image", disk_image] if disk_image else [])
        args += ["--with-python"] if with_python else []
        args += ["--backend", backend] if backend else []
        return json.loads(self.fleetlab(*args).stdout)

    def ensure_up(self):
        if os.geteuid() != 0:
            pytest.skip("the lab needs root (network namespaces and mounts)")
        if not (self.state / "lab.json").exists():
            self.started_here = True
        have = len(self.info["nodes"]) if (self.state / "lab.json").exists() else 0
        self.fleetlab("up", "--nodes", max(NODES, have))
        self.is_up = True
        self.check_route()

    def check_route(self):
        """The machine's own namespace reaches the lab registry through the lab's link, not the default
        gateway: a controller-side step must never send lab traffic out of the machine."""
        network = self.info["network"]
        registry_ip = self.registry.split(":")[0]
        route = subprocess.run(["ip", "-o", "route", "get", registry_ip], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, check=False).stdout
        default = subprocess.run(["ip", "-o", "route", "show", "default"], stdout=subprocess.PIPE,
                                 text=True, check=False).stdout.split()
        gateway = default[default.index("via") + 1] if "via" in default else None
        if " dev %s " % network["host_link"] not in route + " " or " via " in route \
                or (gateway and gateway in route.split()):
            pytest.exit("the lab registry %s is not routed into the lab from this machine (%s): "
                        "'ip route get' says %r" % (registry_ip, network["host_link"], route.strip()), returncode=3)

    def leaked_packets(self):
        """Packets to lab addresses the machine's firewall stopped on their way out so far (fleetlab's guard
        and any other DROP rule for 198.51.100.0/24 in OUTPUT)."""
        return json.loads(self.fleetlab("status", "--json").stdout)["network"]["leaked_packets"]


@pytest.fixture(scope="session")
def rollout_image(lab):
    """The image the rollout tests roll out (test_rollout, test_rollout_failures, test_resume:
    fixture ``fleet``): the base image plus 2 MB, built once a session. Every test leaves its
    nodes booted on the base image again, so each can roll the same image out."""
    tag = uuid.uuid4().hex[:8]
    digest = lab.build_image("fleetos/rollout-test:%s" % tag, "--from", "fleetos/lab-os:1.0", "--size-mb", "2",
                             "--version", "rollout-%s" % tag)
    return {"tag_image": "%s/fleetos/rollout-test:%s" % (lab.registry, tag), "digest": digest}


@pytest.fixture(scope="session")
def lab():
    instance = Lab()
    instance.ensure_up()
    leaked = instance.leaked_packets()
    yield instance
    after = instance.leaked_packets() if (instance.state / "lab.json").exists() else leaked
    if instance.is_up and instance.started_here and not os.environ.get("FLEETLAB_KEEP"):
        instance.fleetlab("down")
    # Every lab test's traffic stayed on the machine: none of it tried to leave through another interface.
    assert after == leaked, "%d packets to lab addresses tried to leave the machine during the lab tests" % (
        after - leaked)
