"""Bootable OS images for the lab, built without a container engine (umoci + skopeo).

An image's `ostree.commit` label is the checksum its root filesystem makes with the
lab's deterministic commit options, so a node that imports the image gets exactly that
commit (the rpm-ostree stand-in commits the unpacked layers the same way).
"""

import datetime
import hashlib
import io
import json
import os
import re
import shutil
import tarfile
import tempfile
from pathlib import Path

from . import registry, signing
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
# Where ostree-ext's container encapsulation keeps ostree objects in an image: not part
# of the OS tree (the commit leaves it out, as ostree-ext does when it imports).
OSTREE_OBJECTS_DIR = "sysroot/ostree/repo/objects"
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
# --multi-arch: the lab's image (amd64) plus these platforms, same layers, own config.
EXTRA_PLATFORMS = [{"architecture": "arm64", "os": "linux", "variant": "v8"}]


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
    """Commit a rootfs with the lab's deterministic options; return the checksum.

    sysroot/ostree (ostree objects an image carries, e.g. a signed commit) is not part
    of the tree.
    """
    _rmtree(Path(rootfs) / "sysroot" / "ostree")
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


def _final_diffid(tag):
    """The diff_id of the image's last layer (its config's rootfs.diff_ids)."""
    manifest = json.loads(_blob_path(_manifest_digest(tag)).read_text())
    config = json.loads(_blob_path(manifest["config"]["digest"]).read_text())
    return config["rootfs"]["diff_ids"][-1]


def fetch(name, tag):
    """Copy an image from the lab registry into the local OCI layout."""
    src = "docker://%s/%s:%s" % (registry.address(), name, tag)
    run(["skopeo", "copy", "--quiet", "--src-authfile", str(registry.auth_file()),
         "--src-cert-dir", str(registry.cert_dir()), src, "oci:%s:%s" % (layout(), layout_tag(name, tag))],
        netns=LAB_NETNS)


def build(name_tag, base=None, add_files=(), size_mb=0, labels=(), version=None, legacy_oscontainer=False,
          sign=None, multi_arch=False, kernel=None):
    """Build a bootable image, push it to the lab registry, return its record.

    With legacy_oscontainer, the pushed image is an old-style OpenShift oscontainer
    instead: no bootable root filesystem, but an ostree archive repository at /srv/repo
    holding the OS commit, named by the label com.coreos.ostree-commit.

    sign names a lab key ("lab" or "wrong"): the ostree commit is signed with it
    (`ostree gpg-sign`) and travels in the image with its .commitmeta, and the pushed
    image gets a GPG simple-signing signature (`skopeo copy --sign-by`) in the lookaside
    store. multi_arch pushes an OCI image index: this image (amd64) and an arm64 entry.
    kernel replaces the image's kernel (/usr/lib/modules/VERSION/vmlinuz) with one of that
    version: a deployment of the image has another boot checksum, so it cannot be soft-rebooted
    into from one of the lab's default kernel.
    """
    name, tag = parse_name(name_tag)
    if sign is not None and sign not in signing.KEYS:
        raise LabError("unknown signing key %r: choose one of %s" % (sign, ", ".join(sorted(signing.KEYS))))
    if legacy_oscontainer and (sign or multi_arch):
        raise LabError("--legacy-oscontainer cannot be combined with --sign or --multi-arch")
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
    if kernel is not None and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}", kernel):
        raise LabError("--kernel %r is not a kernel version (letters, digits, '.', '_', '+', '-')" % kernel)
    if base:
        base_name, base_tag = parse_name(base, "base image name")
        if built().get("%s:%s" % (base_name, base_tag), {}).get("derived"):
            raise LabError("--from %s is a derived image (its commit is a node's merge commit): use 'image derive'" % base)
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
        if kernel is not None:
            modules = rootfs / "usr/lib/modules"
            shutil.rmtree(str(modules))
            (modules / kernel).mkdir(parents=True)
            (modules / kernel / "vmlinuz").write_text("fleetlab kernel %s\n" % kernel)
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
        if sign:
            _add_signed_commit_layer(work, ltag, checksum, sign)
        # ostree.final-diffid: where the image's ostree base ends (its last layer, the signed
        # commit's layer included), as ostree-ext's encapsulation labels it.
        run(["umoci", "config", "--image", "%s:%s" % (layout(), ltag), "--no-history",
             "--created", created, "--config.label", "ostree.commit=%s" % checksum,
             "--config.label", "ostree.final-diffid=%s" % _final_diffid(ltag)])
        digest = _manifest_digest(ltag)
        manifests = None
        if legacy_oscontainer:
            digest = _legacy_oscontainer(work, push_tag, checksum, version, name, extra_labels)
        else:
            commit_rootfs(master_repo(), unpacked, created_iso, version, digest)
        source = "oci:%s:%s" % (layout(), push_tag)
        pushed_digest = digest
        if multi_arch:
            multi = work / "multi"
            pushed_digest, manifests = _image_index(multi, digest)
            source = "oci:%s:%s" % (multi, "index")
        _push(source, name, tag, pushed_digest, work, sign=sign, all_instances=multi_arch)
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
            "signed_by": sign,
            "multi_arch": bool(multi_arch),
        }
        if multi_arch:
            # digest is the index's; each platform's own manifest digest is in manifests.
            record["digest"] = pushed_digest
            record["manifests"] = manifests
        records = built()
        records["%s:%s" % (name, tag)] = record
        write_json(images_dir() / "built.json", records)
        return record
    finally:
        _rmtree(work)


def _push(source, name, tag, expected, work, sign=None, all_instances=False):
    """Push an image from an OCI layout to the lab registry; check the stored digest."""
    digest_file = work / "digest"
    argv = ["skopeo"]
    env = None
    if sign:
        argv += ["--registries.d", str(signing.writer_registries_d())]
        env = {"GNUPGHOME": str(signing.gpg_dir())}
        signing.drop_signatures(name, expected)
    argv += ["copy", "--quiet", "--dest-authfile", str(registry.auth_file()),
             "--dest-cert-dir", str(registry.cert_dir()), "--digestfile", str(digest_file)]
    if sign:
        argv += ["--sign-by", signing.fingerprint(sign)]
    if all_instances:
        argv.append("--all")
    argv += [source, "docker://%s/%s:%s" % (registry.address(), name, tag)]
    try:
        run(argv, netns=LAB_NETNS, env=env)
    finally:
        if sign:
            signing.kill_agent()
    pushed = digest_file.read_text().strip()
    if pushed != expected:
        raise LabError("the registry stored %s:%s as %s, not %s" % (name, tag, pushed, expected))


def _add_signed_commit_layer(work, ltag, checksum, key):
    """Sign the commit and add a layer with its objects, as ostree-ext encapsulates them:
    sysroot/ostree/repo/objects/XX/REST.commit and .commitmeta (detached metadata)."""
    commit, commitmeta = signing.gpg_sign_commit(master_repo(), checksum, key, work)
    layer = work / "ostree-commit.tar"
    objdir = "%s/%s" % (OSTREE_OBJECTS_DIR, checksum[:2])
    with tarfile.open(str(layer), "w", format=tarfile.PAX_FORMAT) as tar:
        parts = objdir.split("/")
        for i in range(2, len(parts) + 1):  # sysroot/ostree ... objects/XX (sysroot is the image's)
            info = tarfile.TarInfo("/".join(parts[:i]))
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, 0
            tar.addfile(info)
        for suffix, data in ((".commit", commit), (".commitmeta", commitmeta)):
            info = tarfile.TarInfo("%s/%s%s" % (objdir, checksum[2:], suffix))
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
    run(["umoci", "raw", "add-layer", "--image", "%s:%s" % (layout(), ltag), "--no-history", str(layer)])


def _blob_path(digest):
    return layout() / "blobs" / digest.replace(":", "/")


def _put_blob(data):
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    path = _blob_path(digest)
    if not path.exists():
        path.write_bytes(data)
    return digest


def _image_index(directory, digest):
    """An OCI layout at directory whose entry "index" is an image index: the image
    (amd64) and EXTRA_PLATFORMS (same layers, a config with their architecture).
    -> (index digest, {architecture: manifest digest})."""
    manifest_bytes = _blob_path(digest).read_bytes()
    manifest = json.loads(manifest_bytes)
    config = json.loads(_blob_path(manifest["config"]["digest"]).read_bytes())
    entries = [{"mediaType": OCI_MANIFEST, "digest": digest, "size": len(manifest_bytes),
                "platform": {"architecture": config.get("architecture", "amd64"), "os": config.get("os", "linux")}}]
    for platform in EXTRA_PLATFORMS:
        other = dict(config, architecture=platform["architecture"], os=platform["os"])
        if platform.get("variant"):
            other["variant"] = platform["variant"]
        config_bytes = json.dumps(other, separators=(",", ":"), sort_keys=True).encode()
        other_manifest = dict(manifest, config=dict(manifest["config"], digest=_put_blob(config_bytes),
                                                   size=len(config_bytes)))
        other_bytes = json.dumps(other_manifest, separators=(",", ":"), sort_keys=True).encode()
        entries.append({"mediaType": OCI_MANIFEST, "digest": _put_blob(other_bytes), "size": len(other_bytes),
                        "platform": dict(platform)})
    index_bytes = json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": entries},
                             separators=(",", ":"), sort_keys=True).encode()
    index_digest = _put_blob(index_bytes)
    # A layout of its own (sharing the blobs), so the lab's layout keeps only images.
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}\n')
    (directory / "blobs").symlink_to(layout() / "blobs")
    (directory / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [
        {"mediaType": OCI_INDEX, "digest": index_digest, "size": len(index_bytes),
         "annotations": {"org.opencontainers.image.ref.name": "index"}}]}))
    return index_digest, {e["platform"]["architecture"]: e["digest"] for e in entries}


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

