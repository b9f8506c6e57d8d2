"""Signed images in the lab: GPG keys, the signature lookaside server, node trust.

The lab makes two GPG keys once (no passphrase) in `<state>/gpg` (GNUPGHOME):

- `lab`, the key the nodes trust: its public key is on every node at
  /etc/pki/containers/fleetlab.gpg (containers-policy `signedBy`) and in the ostree
  remote `fleet` (`ostree remote gpg-import`);
- `wrong`, a key nobody trusts, for negative tests.

`fleetlab image build --sign` signs the pushed image with skopeo's GPG "simple
signing" (`skopeo copy --sign-by FINGERPRINT`): skopeo writes the signature to the
lookaside directory `<state>/sigstore` (registries.d `sigstore-staging: file://...`),
and a small HTTP server (`fleetlab _sigstore`, started by `up`, stopped by PID by
`down`) serves that directory at http://198.51.100.1:8081/ inside the lab network
namespace; the nodes' registries.d names it as `sigstore:` for the lab registry.
The build also signs the image's ostree commit (`ostree gpg-sign`) and carries the
commit object and its detached metadata (`.commitmeta`) in a layer of their own under
`sysroot/ostree/repo/objects/`, as ostree-ext's container encapsulation does.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from . import registry
from .common import (
    BRIDGE_IP,
    LAB_DIR,
    LAB_NETNS,
    OSTREE_REMOTE,
    SIGNED_NAMESPACE,
    SIGSTORE_PORT,
    LabError,
    journal,
    listening,
    pid_alive,
    read_json,
    read_pid,
    run,
    state_dir,
    stop_pid,
    wait_for,
    write_file,
    write_json,
)

MARKER = "fleetlab _sigstore"
KEYS = {
    "lab": ("fleetlab image signing key", "signing@fleetlab.invalid"),
    "wrong": ("fleetlab untrusted key", "untrusted@fleetlab.invalid"),
}
NODE_PUBKEY = "/etc/pki/containers/fleetlab.gpg"
NODE_REGISTRIES_D = "/etc/containers/registries.d/fleetlab.yaml"
NODE_POLICY = "/etc/containers/policy.json"
# Local transports stay open: only the docker transport is about registries.
LOCAL_TRANSPORTS = ("oci", "oci-archive", "dir", "docker-archive", "containers-storage", "docker-daemon")


def gpg_dir():
    return state_dir() / "gpg"


def sigstore_dir():
    """The lookaside (sigstore) directory skopeo writes signatures to."""
    return state_dir() / "sigstore"


def sigstore_url():
    return "http://%s:%d/" % (BRIDGE_IP, SIGSTORE_PORT)


def signed_repository():
    """The repository namespace of the lab registry whose images must be signed."""
    return "%s/%s" % (registry.address(), SIGNED_NAMESPACE)


def _gpg(args, input_text=None):
    return run(["gpg", "--homedir", str(gpg_dir()), "--batch", "--no-tty"] + list(args),
               input_text=input_text)


def kill_agent():
    """gpg starts a gpg-agent for its home directory; end it (it is ours)."""
    if gpg_dir().exists():
        run(["gpgconf", "--homedir", str(gpg_dir()), "--kill", "all"], check=False)


def ensure_keys():
    """Make the lab's keys once; -> {name: fingerprint}."""
    path = gpg_dir() / "keys.json"
    keys = read_json(path, {})
    if all(name in keys for name in KEYS):
        return keys
    gpg_dir().mkdir(parents=True, exist_ok=True)
    os.chmod(str(gpg_dir()), 0o700)
    try:
        for name, (real, email) in KEYS.items():
            if name in keys:
                continue
            params = ("%%no-protection\nKey-Type: RSA\nKey-Length: 2048\nKey-Usage: sign\n"
                      "Name-Real: %s\nName-Email: %s\nExpire-Date: 0\n%%commit\n" % (real, email))
            _gpg(["--quiet", "--gen-key"], input_text=params)
            out = _gpg(["--with-colons", "--list-secret-keys", email]).stdout
            fprs = [line.split(":")[9] for line in out.splitlines() if line.startswith("fpr:")]
            if not fprs:
                raise LabError("gpg made no key for %s" % email)
            keys[name] = fprs[0]
            public = _gpg(["--export", "--armor", fprs[0]]).stdout
            write_file(gpg_dir() / ("%s.pub.asc" % name), public)
    finally:
        kill_agent()
    write_json(path, keys)
    return keys


def fingerprint(name):
    keys = ensure_keys()
    if name not in keys:
        raise LabError("unknown signing key %r: choose one of %s" % (name, ", ".join(sorted(KEYS))))
    return keys[name]


def public_key(name="lab"):
    ensure_keys()
    return (gpg_dir() / ("%s.pub.asc" % name)).read_text()


def writer_registries_d():
    """A registries.d for skopeo on the machine: write signatures to the lookaside dir."""
    directory = gpg_dir() / "registries.d"
    text = "docker:\n  %s:\n    sigstore-staging: file://%s\n" % (registry.address(), sigstore_dir())
    write_file(directory / "fleetlab.yaml", text)
    sigstore_dir().mkdir(parents=True, exist_ok=True)
    return directory


def signature_dir(name, digest):
    """Where skopeo keeps the signatures of NAME@DIGEST in the lookaside store."""
    return sigstore_dir() / ("%s@%s" % (name, digest.replace(":", "=")))


def drop_signatures(name, digest):
    shutil.rmtree(str(signature_dir(name, digest)), ignore_errors=True)


def gpg_sign_commit(repo, checksum, key, work):
    """Sign an ostree commit with `ostree gpg-sign`; -> (commit bytes, commitmeta bytes).

    Signed in a scratch repository holding only the commit object, so the lab's
    master repository keeps no signature of its own.
    """
    src = Path(repo) / "objects" / checksum[:2] / (checksum[2:] + ".commit")
    scratch = Path(work) / "sign-repo"
    run(["ostree", "--repo=%s" % scratch, "init", "--mode=archive"])
    (scratch / "objects" / checksum[:2]).mkdir(parents=True, exist_ok=True)
    shutil.copyfile(str(src), str(scratch / "objects" / checksum[:2] / (checksum[2:] + ".commit")))
    try:
        run(["ostree", "--repo=%s" % scratch, "gpg-sign", "--gpg-homedir=%s" % gpg_dir(),
             checksum, fingerprint(key)])
    finally:
        kill_agent()
    meta = scratch / "objects" / checksum[:2] / (checksum[2:] + ".commitmeta")
    return src.read_bytes(), meta.read_bytes()


# --------------------------------------------------------------------------
# node trust


def node_policy():
    """The nodes' containers-policy.json.

    `default: reject`: ostree-ext refuses `ostree-image-signed:` when the policy's default
    is `insecureAcceptAnything`. The signed namespace needs the lab key (signedBy,
    GPGKeys); the rest of the lab registry and the local transports accept anything,
    so unsigned lab images keep working for skopeo on the nodes.
    """
    reg = registry.address()
    return {
        "default": [{"type": "reject"}],
        "transports": dict(
            {"docker": {
                signed_repository(): [{"type": "signedBy", "keyType": "GPGKeys", "keyPath": NODE_PUBKEY,
                                       "signedIdentity": {"type": "matchRepoDigestOrExact"}}],
                reg: [{"type": "insecureAcceptAnything"}],
            }},
            **{t: {"": [{"type": "insecureAcceptAnything"}]} for t in LOCAL_TRANSPORTS}),
    }


def node_registries_d():
    return ("# Written by fleetlab: signatures of lab registry images (lookaside store).\n"
            "docker:\n  %s:\n    sigstore: %s\n" % (registry.address(), sigstore_url()))


def install_node_trust(etc, repo):
    """Write the trust files into a deployment's /etc and add the ostree remote to repo."""
    etc = Path(etc)
    write_file(etc / NODE_PUBKEY[len("/etc/"):], public_key("lab"))
    write_file(etc / NODE_REGISTRIES_D[len("/etc/"):], node_registries_d())
    write_file(etc / NODE_POLICY[len("/etc/"):], json.dumps(node_policy(), indent=2) + "\n")
    remotes = run(["ostree", "--repo=%s" % repo, "remote", "list"]).stdout.split()
    if OSTREE_REMOTE not in remotes:
        run(["ostree", "--repo=%s" % repo, "remote", "add", "--set=gpg-verify=true",
             OSTREE_REMOTE, sigstore_url() + "ostree/"])
        keyfile = gpg_dir() / "lab.pub.asc"
        run(["ostree", "--repo=%s" % repo, "remote", "gpg-import", OSTREE_REMOTE, "-k", str(keyfile)])


# --------------------------------------------------------------------------
# the lookaside server


def _client_node(ip):
    return registry._client_node(ip)  # pylint: disable=protected-access


def serve():
    """`fleetlab _sigstore`: serve the lookaside directory (in the lab namespace)."""
    root = str(sigstore_dir())

    class Handler(SimpleHTTPRequestHandler):
        server_version = "fleetlab-sigstore/1"

        def __init__(self, *args, **kwargs):
            super().__init__(*args, directory=root, **kwargs)

        def log_message(self, fmt, *args):
            sys.stdout.write("sigstore: " + (fmt % args) + "\n")
            sys.stdout.flush()

        def log_request(self, code="-", size="-"):
            super().log_request(code, size)
            try:
                status = int(getattr(code, "value", code))
            except (TypeError, ValueError):
                status = 0
            journal("signature_read", client=self.client_address[0],
                    node=_client_node(self.client_address[0]), path=self.path, status=status)

        def list_directory(self, path):
            self.send_error(404, "No listing")
            return None

    sigstore_dir().mkdir(parents=True, exist_ok=True)
    server = ThreadingHTTPServer((BRIDGE_IP, SIGSTORE_PORT), Handler)
    signal.signal(signal.SIGTERM, lambda *a: threading.Thread(target=server.shutdown).start())
    server.serve_forever()
    return 0


def _pidfile():
    return state_dir() / "sigstore.pid"


def running():
    return pid_alive(read_pid(_pidfile()), MARKER)


def start():
    if running():
        return
    sigstore_dir().mkdir(parents=True, exist_ok=True)
    log = open(state_dir() / "sigstore.log", "ab")
    proc = subprocess.Popen(
        ["ip", "netns", "exec", LAB_NETNS, sys.executable, str(LAB_DIR / "fleetlab"), "_sigstore"],
        stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
    )
    write_file(_pidfile(), "%d\n" % proc.pid)
    wait_for(lambda: listening(proc.pid, BRIDGE_IP, SIGSTORE_PORT) or proc.poll() is not None, 10,
             "the signature server to listen")
    if proc.poll() is not None:
        raise LabError("the signature server exited at start; see %s" % (state_dir() / "sigstore.log"))


def stop():
    stop_pid(read_pid(_pidfile()), MARKER)
    kill_agent()
