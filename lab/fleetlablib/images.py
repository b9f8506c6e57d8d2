"""Bootable OS images for the lab, built without a container engine (umoci + skopeo).

An image's `ostree.commit` label is the checksum its root filesystem makes with the
lab's deterministic commit options, so a node that imports the image gets exactly that
commit (the rpm-ostree stand-in commits the unpacked layers the same way).
"""

import datetime
import hashlib
import json
import os
import re
import shutil
import tempfile
from pathlib import Path

from . import registry
from .common import (
    LAB_NETNS,
    LabError,
    read_json,
    run,
    state_dir,
    write_json,
)

NAME_RE = re.compile(
    r"^(?P<name>[a-z0-9]+(?:[._-][a-z0-9]+)*(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*)"
    r":(?P<tag>[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})$"
)
KERNEL_VERSION = "6.0.0-fleetlab"
COMMIT_OPTIONS = ["--orphan", "--no-bindings", "--no-xattrs", "--owner-uid=0", "--owner-gid=0"]
HOST_ETC_COPIES = ["ld.so.cache", "nsswitch.conf", "alternatives", "containers"]


def images_dir():
    return state_dir() / "images"


def layout():
    return images_dir() / "oci"


def master_repo():
    return images_dir() / "repo"


def built():
    return read_json(images_dir() / "built.json", {})


def parse_name(text, what="image name"):
    """Split NAME:TAG, where NAME may start with the lab registry's address."""
    addr = registry.address()
    if text.startswith(addr + "/"):
        text = text[len(addr) + 1:]
    match = NAME_RE.match(text)
    if not match:
        raise LabError("malformed %s %r: expected NAME:TAG like fleetos/lab-os:1.0" % (what, text))
    return match.group("name"), match.group("tag")


def layout_tag(name, tag):
    """The image's tag in the local OCI layout (umoci accepts [a-z0-9]+ joined by . _ -)."""
    text = re.sub(r"[^a-z0-9]+", "-", ("%s-%s" % (name, tag)).lower()).strip("-")
    return text + "-" + hashlib.sha256(("%s:%s" % (name, tag)).encode()).hexdigest()[:8]


def skopeo_registry_args():
    return ["--authfile", str(registry.auth_file()), "--cert-dir", str(registry.cert_dir())]


def _ensure_stores():
    images_dir().mkdir(parents=True, exist_ok=True)
    if not (layout() / "index.json").exists():
        run(["umoci", "init", "--layout", str(layout())])
    if not (master_repo() / "config").exists():
        run(["ostree", "--repo=%s" % master_repo(), "init", "--mode=bare"])


def _skeleton(rootfs, version):
    """The files every lab OS image starts with."""
    for rel in ["usr/bin", "usr/sbin", "usr/lib", "usr/lib64", "usr/etc", "usr/share/fleetlab",
                "usr/lib/modules/" + KERNEL_VERSION, "sysroot", "boot", "var", "run", "tmp",
                "proc", "sys", "dev", "home", "srv", "opt", "media"]:
        (rootfs / rel).mkdir(parents=True, exist_ok=True)
    os.chmod(str(rootfs / "tmp"), 0o1777)
    for link, target in [("bin", "usr/bin"), ("lib", "usr/lib"), ("lib64", "usr/lib64"),
                         ("sbin", "usr/sbin"), ("ostree", "sysroot/ostree"),
                         ("root", "var/roothome"), ("mnt", "var/mnt")]:
        (rootfs / link).symlink_to(target)
    (rootfs / "usr/lib/modules" / KERNEL_VERSION / "vmlinuz").write_text("fleetlab kernel %s\n" % KERNEL_VERSION)
    etc = rootfs / "usr/etc"
    (etc / "passwd").write_text(
        "root:x:0:0:root:/root:/bin/bash\n"
        "sshd:x:100:65534::/run/sshd:/usr/sbin/nologin\n"
        "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
    )
    (etc / "group").write_text("root:x:0:\nnogroup:x:65534:\n")
    (etc / "shadow").write_text("root:*:19000:0:99999:7:::\nsshd:*:19000:0:99999:7:::\n")
    os.chmod(str(etc / "shadow"), 0o600)
    (etc / "hosts").write_text("127.0.0.1 localhost\n::1 localhost\n")
    for name in HOST_ETC_COPIES:
        src = Path("/etc") / name
        if src.is_dir():
            shutil.copytree(str(src), str(etc / name), symlinks=True)
        elif src.exists():
            shutil.copy2(str(src), str(etc / name))
    (rootfs / "usr/lib/os-release").write_text(
        'NAME="Fleet Lab OS"\nID=fleetlab\nVERSION_ID="%s"\nPRETTY_NAME="Fleet Lab OS %s"\n' % (version, version)
    )
    (etc / "os-release").symlink_to("../lib/os-release")


def _add_file(rootfs, spec):
    if ":" not in spec:
        raise LabError("malformed --add-file %r: expected SRC:DEST" % spec)
    src, dest = spec.split(":", 1)
    if not os.path.isfile(src):
        raise LabError("--add-file source %r is not a file" % src)
    if not dest.startswith("/") or ".." in dest.split("/"):
        raise LabError("--add-file destination %r must be an absolute path without '..'" % dest)
    if dest.startswith("/etc/"):
        dest = "/usr" + dest  # ostree keeps the default /etc in /usr/etc
    target = rootfs / dest.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, str(target))
    os.chmod(str(target), 0o644)


def commit_rootfs(repo, rootfs, created, version, manifest_digest=None):
    """Commit a rootfs with the lab's deterministic options; return the checksum."""
    os.chmod(str(rootfs), 0o755)
    os.chown(str(rootfs), 0, 0)
    argv = ["ostree", "--repo=%s" % repo, "commit"] + COMMIT_OPTIONS + ["--timestamp=%s" % created]
    if version:
        argv.append("--add-metadata-string=version=%s" % version)
    if manifest_digest:
        argv.append("--add-detached-metadata-string=ostree.manifest-digest=%s" % manifest_digest)
    argv.append("--tree=dir=%s" % rootfs)
    return run(argv).stdout.strip()


def _manifest_digest(tag):
    index = json.loads((layout() / "index.json").read_text())
    for entry in index.get("manifests", []):
        if entry.get("annotations", {}).get("org.opencontainers.image.ref.name") == tag:
            return entry["digest"]
    raise LabError("image %s is missing from the lab's OCI layout" % tag)


def _config_created(tag):
    digest = _manifest_digest(tag)
    manifest = json.loads((layout() / "blobs" / digest.replace(":", "/")).read_text())
    config = json.loads((layout() / "blobs" / manifest["config"]["digest"].replace(":", "/")).read_text())
    return config.get("created"), config.get("config", {}).get("Labels") or {}


def fetch(name, tag):
    """Copy an image from the lab registry into the local OCI layout."""
    src = "docker://%s/%s:%s" % (registry.address(), name, tag)
    run(["skopeo", "copy", "--quiet", "--src-authfile", str(registry.auth_file()),
         "--src-cert-dir", str(registry.cert_dir()), src, "oci:%s:%s" % (layout(), layout_tag(name, tag))],
        netns=LAB_NETNS)


def build(name_tag, base=None, add_files=(), size_mb=0, labels=(), version=None, legacy_oscontainer=False):
    """Build a bootable image, push it to the lab registry, return its record.

    With legacy_oscontainer, the pushed image is an old-style OpenShift oscontainer
    instead: no bootable root filesystem, but an ostree archive repository at /srv/repo
    holding the OS commit, named by the label com.coreos.ostree-commit.
    """
    name, tag = parse_name(name_tag)
    extra_labels = {}
    for item in labels:
        if "=" not in item or not item.split("=", 1)[0]:
            raise LabError("malformed --label %r: expected KEY=VALUE" % item)
        key, value = item.split("=", 1)
        extra_labels[key] = value
    if size_mb < 0 or size_mb > 4096:
        raise LabError("--size-mb %d is out of range 0..4096" % size_mb)
    for spec in add_files:
        if ":" not in spec:
            raise LabError("malformed --add-file %r: expected SRC:DEST" % spec)
    if base:
        base_name, base_tag = parse_name(base, "base image name")
    if not registry.running():
        raise LabError("the lab registry is not running: run 'fleetlab up' or 'fleetlab registry start'")
    version = version or tag
    _ensure_stores()
    push_tag = layout_tag(name, tag)
    ltag = push_tag + "-ostree" if legacy_oscontainer else push_tag
    work = Path(tempfile.mkdtemp(prefix="build-", dir=str(images_dir())))
    try:
        bundle = work / "bundle"
        if base:
            fetch(base_name, base_tag)
            run(["umoci", "tag", "--image", "%s:%s" % (layout(), layout_tag(base_name, base_tag)), ltag])
        else:
            run(["umoci", "new", "--image", "%s:%s" % (layout(), ltag)])
        run(["umoci", "unpack", "--image", "%s:%s" % (layout(), ltag), str(bundle)])
        rootfs = bundle / "rootfs"
        if not base:
            _skeleton(rootfs, version)
        for spec in add_files:
            _add_file(rootfs, spec)
        if size_mb:
            payload = rootfs / "usr/share/fleetlab" / ("payload-%s.bin" % ltag)
            payload.parent.mkdir(parents=True, exist_ok=True)
            with open(payload, "wb") as handle:
                for _ in range(size_mb):
                    handle.write(os.urandom(1 << 20))
        release = rootfs / "usr/lib/os-release"
        if base and release.exists():
            text = re.sub(r'(?m)^VERSION_ID=.*$', 'VERSION_ID="%s"' % version, release.read_text())
            text = re.sub(r'(?m)^PRETTY_NAME=.*$', 'PRETTY_NAME="Fleet Lab OS %s"' % version, text)
            release.write_text(text)
        run(["umoci", "repack", "--image", "%s:%s" % (layout(), ltag), str(bundle)])
        created = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")
        config_argv = ["umoci", "config", "--image", "%s:%s" % (layout(), ltag), "--no-history",
                       "--created", created, "--author", "fleetlab"]
        base_labels = {
            "ostree.bootable": "true",
            "containers.bootc": "1",
            "version": version,
            "org.opencontainers.image.version": version,
            "org.opencontainers.image.title": name,
        }
        base_labels.update(extra_labels)
        for key, value in sorted(base_labels.items()):
            config_argv += ["--config.label", "%s=%s" % (key, value)]
        run(config_argv)
        # The commit the image's root filesystem makes, exactly as a node imports it.
        unpacked = work / "rootfs"
        run(["umoci", "raw", "unpack", "--image", "%s:%s" % (layout(), ltag), str(unpacked)])
        created_iso, _ = _config_created(ltag)
        checksum = commit_rootfs(master_repo(), unpacked, created_iso, version)
        run(["umoci", "config", "--image", "%s:%s" % (layout(), ltag), "--no-history",
             "--config.label", "ostree.commit=%s" % checksum])
        digest = _manifest_digest(ltag)
        if legacy_oscontainer:
            digest = _legacy_oscontainer(work, push_tag, checksum, version, name, extra_labels)
        else:
            commit_rootfs(master_repo(), unpacked, created_iso, version, digest)
        digest_file = work / "digest"
        run(["skopeo", "copy", "--quiet", "--dest-authfile", str(registry.auth_file()),
             "--dest-cert-dir", str(registry.cert_dir()), "--digestfile", str(digest_file),
             "oci:%s:%s" % (layout(), push_tag), "docker://%s/%s:%s" % (registry.address(), name, tag)],
            netns=LAB_NETNS)
        pushed = digest_file.read_text().strip()
        if pushed != digest:
            raise LabError("the registry stored %s as %s, not %s" % (name_tag, pushed, digest))
        record = {
            "name": name,
            "tag": tag,
            "reference": "%s/%s" % (registry.address(), name),
            "digest": digest,
            "commit": checksum,
            "version": version,
            "created": created_iso,
            "base": base,
            "legacy_oscontainer": bool(legacy_oscontainer),
        }
        records = built()
        records["%s:%s" % (name, tag)] = record
        write_json(images_dir() / "built.json", records)
        return record
    finally:
        _rmtree(work)


def _legacy_oscontainer(work, ltag, checksum, version, name, extra_labels):
    """An old-style oscontainer: /srv/repo (ostree archive repo) holding the commit."""
    bundle = work / "legacy-bundle"
    run(["umoci", "new", "--image", "%s:%s" % (layout(), ltag)])
    run(["umoci", "unpack", "--image", "%s:%s" % (layout(), ltag), str(bundle)])
    repo = bundle / "rootfs" / "srv" / "repo"
    repo.mkdir(parents=True)
    run(["ostree", "--repo=%s" % repo, "init", "--mode=archive"])
    run(["ostree", "--repo=%s" % repo, "pull-local", str(master_repo()), checksum])
    run(["ostree", "--repo=%s" % repo, "refs", "--create=fleetlab/oscontainer", checksum])
    run(["umoci", "repack", "--image", "%s:%s" % (layout(), ltag), str(bundle)])
    labels = {"com.coreos.ostree-commit": checksum, "version": version,
              "org.opencontainers.image.version": version, "org.opencontainers.image.title": name}
    labels.update(extra_labels)
    argv = ["umoci", "config", "--image", "%s:%s" % (layout(), ltag), "--no-history", "--author", "fleetlab"]
    for key, value in sorted(labels.items()):
        argv += ["--config.label", "%s=%s" % (key, value)]
    run(argv)
    return _manifest_digest(ltag)


def _rmtree(path):
    shutil.rmtree(str(path), ignore_errors=True)


def registry_ref(record):
    return "%s@%s" % (record["reference"], record["digest"])

