"""Derived OS images: a lab image's layers unchanged, plus one layer on top.

What `FROM base` + `COPY` gives: the base image's layers (its ostree base, up to its
`ostree.final-diffid`) and a new non-ostree layer above them. The derived image inherits
the base's labels, `ostree.commit` and `ostree.final-diffid` included, as a container build
does; so the label names the base's commit, not the commit a host gets. rpm-ostree and
bootc (ostree-ext) import such an image as the base commit with the derived layers laid
over it, committed as a merge commit; which commit that is, only the import tells, so the
record has no `commit`.

`fleetlab image derive NAME:TAG --from BASE:TAG --add-file SRC:DEST [--remove DEST]
[--label K=V] [--version V] [--json]`.
"""

import datetime
import io
import json
import os
import shutil
import tarfile
import tempfile
from pathlib import Path

from . import images, registry
from .common import LabError, StateLock, run, write_json

FINAL_DIFFID_LABEL = "ostree.final-diffid"
# Fixed layer metadata, so the same files give the same layer (and digest) on any machine.
LAYER_MTIME = 0


def _check_dest(dest, what):
    if not dest.startswith("/") or ".." in dest.split("/") or dest.rstrip("/") == "":
        raise LabError("%s destination %r must be an absolute path without '..'" % (what, dest))
    return dest.strip("/")


def _layer_tar(path, add_files, removals):
    """Write the derived layer (an uncompressed tar, PAX) at path; -> its member names.

    Paths are written as a container build writes them (`/etc/x` stays `etc/x`: it is the
    import that moves /etc to /usr/etc); a removal is an OCI whiteout `.wh.NAME`.
    """
    entries = {}
    for spec in add_files:
        if ":" not in spec:
            raise LabError("malformed --add-file %r: expected SRC:DEST" % spec)
        src, dest = spec.split(":", 1)
        if not os.path.isfile(src):
            raise LabError("--add-file source %r is not a file" % src)
        entries[_check_dest(dest, "--add-file")] = Path(src).read_bytes()
    for dest in removals:
        rel = _check_dest(dest, "--remove")
        parent, _, leaf = rel.rpartition("/")
        entries[(parent + "/" if parent else "") + ".wh." + leaf] = b""
    if not entries:
        raise LabError("image derive needs at least one --add-file or --remove")
    dirs = set()
    for rel in entries:
        parts = rel.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            dirs.add("/".join(parts[:i]))
    with tarfile.open(str(path), "w", format=tarfile.PAX_FORMAT) as tar:
        for rel in sorted(dirs):
            info = tarfile.TarInfo(rel)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, LAYER_MTIME
            tar.addfile(info)
        for rel, data in sorted(entries.items()):
            info = tarfile.TarInfo(rel)
            info.size, info.mode, info.mtime = len(data), 0o644, LAYER_MTIME
            tar.addfile(info, io.BytesIO(data))
    return sorted(entries)


def parse_labels(items):
    """--label K=V values -> {K: V}."""
    found = {}
    for item in items:
        if "=" not in item or not item.split("=", 1)[0]:
            raise LabError("malformed --label %r: expected KEY=VALUE" % item)
        key, value = item.split("=", 1)
        found[key] = value
    return found


def ready_stores():
    """The registry must run; the lab's OCI layout and ostree repo exist."""
    if not registry.running():
        raise LabError("the lab registry is not running: run 'fleetlab up' or 'fleetlab registry start'")
    images._ensure_stores()


def _config_of(ltag):
    manifest = json.loads(images._blob_path(images._manifest_digest(ltag)).read_text())
    config = json.loads(images._blob_path(manifest["config"]["digest"]).read_text())
    return manifest, config


def derive(name_tag, base, add_files=(), removals=(), labels=(), version=None):
    """Build a derived image from the lab image base, push it, record it; -> the record."""
    name, tag = images.parse_name(name_tag)
    base_name, base_tag = images.parse_name(base, "base image name")
    base_record = images.built().get("%s:%s" % (base_name, base_tag))
    if base_record is None:
        raise LabError("--from %s was not built by 'fleetlab image build' or 'image derive'" % base)
    if base_record.get("legacy_oscontainer") or base_record.get("multi_arch"):
        raise LabError("--from %s: a legacy oscontainer or multi-arch image cannot be derived from" % base)
    extra_labels = parse_labels(labels)
    if version:
        extra_labels.setdefault("version", version)
        extra_labels.setdefault("org.opencontainers.image.version", version)
    ready_stores()
    ltag = images.layout_tag(name, tag)
    work = Path(tempfile.mkdtemp(prefix="derive-", dir=str(images.images_dir())))
    try:
        layer = work / "layer.tar"
        members = _layer_tar(layer, add_files, removals)
        images.fetch(base_name, base_tag)
        run(["umoci", "tag", "--image", "%s:%s" % (images.layout(), images.layout_tag(base_name, base_tag)),
                    ltag])
        _, base_config = _config_of(ltag)
        base_labels = (base_config.get("config") or {}).get("Labels") or {}
        if FINAL_DIFFID_LABEL not in base_labels:
            raise LabError("--from %s has no %s label: rebuild it with this lab" % (base, FINAL_DIFFID_LABEL))
        run(["umoci", "raw", "add-layer", "--image", "%s:%s" % (images.layout(), ltag), "--no-history",
                    str(layer)])
        created = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")
        argv = ["umoci", "config", "--image", "%s:%s" % (images.layout(), ltag), "--no-history",
                "--created", created]
        for key, value in sorted(extra_labels.items()):
            argv += ["--config.label", "%s=%s" % (key, value)]
        run(argv)
        manifest, config = _config_of(ltag)
        digest = images._manifest_digest(ltag)
        images._push("oci:%s:%s" % (images.layout(), ltag), name, tag, digest, work)
        new_layer = manifest["layers"][-1]
        labels_now = (config.get("config") or {}).get("Labels") or {}
        record = {
            "name": name,
            "tag": tag,
            "reference": "%s/%s" % (registry.address(), name),
            "digest": digest,
            # Known only once a host imports it (ostree-ext's merge commit): not the label.
            "commit": None,
            "version": labels_now.get("version") or base_record.get("version"),
            "created": config.get("created"),
            "base": "%s:%s" % (base_name, base_tag),
            "base_digest": base_record["digest"],
            "base_commit": base_record.get("commit"),
            "derived": True,
            "config_digest": manifest["config"]["digest"],
            "derived_layers": [{"digest": new_layer["digest"], "size": int(new_layer["size"]),
                                "diff_id": config["rootfs"]["diff_ids"][-1], "paths": members}],
            "legacy_oscontainer": False,
            "signed_by": None,
            "multi_arch": False,
        }
        return save_record(record)
    finally:
        shutil.rmtree(str(work), ignore_errors=True)


def save_record(record):
    """Add an image's record to the lab's built.json (under NAME:TAG); -> the record."""
    records = images.built()
    records["%s:%s" % (record["name"], record["tag"])] = record
    write_json(images.images_dir() / "built.json", records)
    return record


def print_record(record, as_json):
    """What an image command prints: the whole record (--json), else the digest."""
    if as_json:
        print(json.dumps(record, indent=2, sort_keys=True))
    else:
        print(record["digest"])


def cmd_image_derive(args):
    if os.geteuid() != 0:
        raise LabError("fleetlab must run as root")
    with StateLock("images.lock"):
        record = derive(args.name, args.base, add_files=args.add_file or [], removals=args.remove or [],
                        labels=args.label or [], version=args.version)
    print_record(record, args.json)
    return 0


def add_parser(isub):
    """`fleetlab image derive` (isub: the `image` subcommand's subparsers)."""
    derive_p = isub.add_parser("derive", help="derive an image from a lab image: its layers plus one new layer "
                                              "(FROM base + COPY), pushed to the lab registry")
    derive_p.add_argument("name", help="NAME:TAG, e.g. fleetos/lab-derived:1.0")
    derive_p.add_argument("--from", dest="base", required=True, help="the lab image NAME:TAG to derive from")
    add_layer_arguments(derive_p, "the version labels (default: the base's)")
    derive_p.set_defaults(func=cmd_image_derive)
    return derive_p


def add_layer_arguments(parser, version_help):
    """The options of a command that writes one layer (_layer_tar): files, whiteouts, labels, version, --json."""
    parser.add_argument("--add-file", action="append", metavar="SRC:DEST",
                        help="a file of the new layer (/etc/x is written as etc/x, as COPY does)")
    parser.add_argument("--remove", action="append", metavar="DEST",
                        help="a path to remove: an OCI whiteout in the new layer")
    parser.add_argument("--label", action="append", metavar="K=V")
    parser.add_argument("--version", default=None, help=version_help)
    parser.add_argument("--json", action="store_true", help="print the whole record")
