"""Layer images: files of their own in one layer, built FROM scratch, each with its own version.

What a component team ships to be composed onto a base OS image (kubelet, openvswitch, a
GPU driver): no base layers, no ostree commit, only the files it adds. The lab writes the
files as given, with no rule applied, so that a bad layer (a file under /var, a whiteout)
can be built for the tests of whatever refuses it.

`fleetlab image build-layer NAME:TAG --add-file SRC:DEST [--add-file ...] [--remove DEST]
--version V [--json]`.
"""

import datetime
import json
import os
import shutil
import tempfile
from pathlib import Path

from . import derived, images, registry
from .common import LabError, StateLock, run, write_json


def build_layer(name_tag, add_files=(), removals=(), version=None):
    """Build a FROM-scratch layer image, push it to the lab registry, record it; -> the record."""
    name, tag = images.parse_name(name_tag)
    if not version:
        raise LabError("image build-layer needs --version")
    extra = {"version": version, "org.opencontainers.image.version": version, "org.opencontainers.image.title": name}
    if not registry.running():
        raise LabError("the lab registry is not running: run 'fleetlab up' or 'fleetlab registry start'")
    images._ensure_stores()
    ltag = images.layout_tag(name, tag)
    work = Path(tempfile.mkdtemp(prefix="layer-", dir=str(images.images_dir())))
    try:
        layer = work / "layer.tar"
        members = derived._layer_tar(layer, add_files, removals)
        run(["umoci", "new", "--image", "%s:%s" % (images.layout(), ltag)])
        run(["umoci", "raw", "add-layer", "--image", "%s:%s" % (images.layout(), ltag), str(layer)])
        created = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")
        argv = ["umoci", "config", "--image", "%s:%s" % (images.layout(), ltag), "--no-history",
                "--created", created, "--author", "fleetlab"]
        for key, value in sorted(extra.items()):
            argv += ["--config.label", "%s=%s" % (key, value)]
        run(argv)
        manifest, config = derived._config_of(ltag)
        digest = images._manifest_digest(ltag)
        images._push("oci:%s:%s" % (images.layout(), ltag), name, tag, digest, work)
        # A layer image has no ostree commit of its own ("commit": None), and no base.
        record = dict(name=name, tag=tag, reference="%s/%s" % (registry.address(), name), digest=digest, commit=None,
                      version=version, created=config.get("created"), base=None, layer=True,
                      config_digest=manifest["config"]["digest"], paths=members,
                      layers=[{"digest": entry["digest"], "size": int(entry["size"])} for entry in manifest["layers"]])
        records = images.built()
        records["%s:%s" % (name, tag)] = record
        write_json(images.images_dir() / "built.json", records)
        return record
    finally:
        shutil.rmtree(str(work), ignore_errors=True)


def cmd_image_build_layer(args):
    if os.geteuid() != 0:
        raise LabError("fleetlab must run as root")
    with StateLock("images.lock"):
        record = build_layer(args.name, add_files=args.add_file or [], removals=args.remove or [],
                             version=args.version)
    if args.json:
        print(json.dumps(record, indent=2, sort_keys=True))
    else:
        print(record["digest"])
    return 0


def add_parser(isub):
    """`fleetlab image build-layer` (isub: the `image` subcommand's subparsers)."""
    layer_p = isub.add_parser("build-layer", help="build a layer image FROM scratch (its files only, its own "
                                                  "version) and push it to the lab registry")
    layer_p.add_argument("name", help="NAME:TAG, e.g. fleetos/kubelet:1.31.4")
    layer_p.add_argument("--add-file", action="append", metavar="SRC:DEST", required=True,
                         help="a file of the layer, written at DEST as given (no rule applied: /var/x is possible)")
    layer_p.add_argument("--remove", action="append", metavar="DEST",
                         help="an OCI whiteout for DEST in the layer (a bad layer, for tests)")
    layer_p.add_argument("--version", required=True, help="the version labels of the layer image")
    layer_p.add_argument("--json", action="store_true", help="print the whole record")
    layer_p.set_defaults(func=cmd_image_build_layer)
    return layer_p
