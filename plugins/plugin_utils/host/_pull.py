# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# This is a private plugin_util of fleetos.layering: its interface may change at any
# time and it is not meant to be used by other collections.

"""The pull step (fleetos.layering.os_image_pull): resolve an image to its digests, read its
configuration, fetch its blobs into an OCI layout cache.

Everything runs on a ``_host.Host``: over an action plugin's connection the host (a node, or the
controller itself with the local connection) needs skopeo, coreutils and a POSIX shell, no Python.
The credentials that apply to the image are chosen here and go to the host on stdin, into a private
0600 file that skopeo reads (``--authfile``) and that is removed on every path
(``_auth.host_auth_file``); the cache is listed with a shell glob and its ``index.json`` read with
``cat``.
"""

from __future__ import annotations

import re

from ansible_collections.fleetos.layering.plugins.module_utils._errors import ImageError, InvalidInputError
from ansible_collections.fleetos.layering.plugins.module_utils._params import check_directory
from ansible_collections.fleetos.layering.plugins.module_utils.host._commands import RETRY_ARGS
from ansible_collections.fleetos.layering.plugins.module_utils.host._host import HostFileError
from ansible_collections.fleetos.layering.plugins.module_utils.images._auth import (
    OSTREE_AUTH_FILES,
    credentials,
    default_auth_files,
    default_credentials,
    host_auth_file,
    image_scopes,
    ostree_auth_file,
)
from ansible_collections.fleetos.layering.plugins.module_utils.images._image_ref import (
    DIGEST_FORM,
    is_digest,
    parse,
    shown,
)
from ansible_collections.fleetos.layering.plugins.module_utils.images._labels import (
    FINAL_DIFFID_LABEL,
    VERSION_LABELS,
    first_label,
    image_commit,
)
from ansible_collections.fleetos.layering.plugins.module_utils.images._oci_index import OciIndex
from ansible_collections.fleetos.layering.plugins.module_utils.images._registry import ImageReader
from ansible_collections.fleetos.layering.plugins.module_utils.images._skopeo import (
    REGISTRY_ARGS,
    Skopeo,
    host_architecture,
    resolve,
)

# The options of fleetos.layering.os_image_pull.
ARGUMENT_SPEC = dict(
    image=dict(type="str", required=True),
    state=dict(type="str", choices=["resolved", "inspected", "present"], default="inspected"),
    architecture=dict(type="str"),
    pull_secret=dict(type="raw", no_log=True),
    username=dict(type="str"),
    password=dict(type="str", no_log=True),
    expected_digest=dict(type="str"),
    cache_dir=dict(type="path"),
    executable=dict(type="path"),
)
ARGUMENT_SPEC.update(REGISTRY_ARGS)
ARGUMENT_SPEC.update(RETRY_ARGS)
MUTUALLY_EXCLUSIVE = [("auth_file", "pull_secret", "username")]
REQUIRED_TOGETHER = [("username", "password")]

OSTREE_CACHE = "/sysroot/ostree/container-cache"
DEFAULT_CACHE = "/var/cache/fleetos/images"
ARCHITECTURE_RE = re.compile(r"^[a-z0-9_]+(?:/[a-z0-9_]+)?$")

# $1 an OCI layout: the path of every entry of its blobs/ALGORITHM/ directories, one a line (none when
# there is no layout). The quoted part of the pattern is taken as it is, only the two * glob.
BLOBS_SCRIPT = r"""
for f in "$1"/blobs/*/*; do
  [ -e "$f" ] && printf '%s\n' "$f"
done
exit 0
"""


def layout_blobs(host, cache):
    """``algo:hex`` of every blob in the OCI layout ``cache`` on ``host`` (empty when there is none)."""
    rc, out, _err = host.run(["sh", "-c", BLOBS_SCRIPT, "sh", cache])
    prefix = cache + "/blobs/"
    found = set()
    for line in out.splitlines() if rc == 0 else ():
        if line.startswith(prefix) and line.count("/", len(prefix)) == 1:
            found.add(line[len(prefix):].replace("/", ":"))
    return found


def layout_index(host, cache):
    """(manifest digests, ref names) listed in the ``index.json`` of the OCI layout ``cache`` on ``host``."""
    try:
        index = OciIndex.parse(host.read_file(cache + "/index.json"))
    except HostFileError:
        index = OciIndex({})
    return index.digests(), index.names()


def layout_tag(name, digest):
    """The OCI layout ref name this module gives an image: its name and digest, sanitized."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", name)[:80]
    return "fleetos_%s_%s" % (safe, digest.split(":", 1)[-1][:16])


def pick_cache(host, cache_dir):
    """``cache_dir``, else the ostree container cache when ``host`` has one, else DEFAULT_CACHE."""
    if cache_dir:
        return cache_dir
    return OSTREE_CACHE if host.test("-d", OSTREE_CACHE) else DEFAULT_CACHE


def check_params(host, params):
    """Refuse bad input before anything runs (the directories on ``host``); -> (ImageRef, expected digest)."""
    ref = parse(params["image"])
    expected = params["expected_digest"]
    if expected is not None and not is_digest(expected):
        raise InvalidInputError("The option expected_digest '%s' is not a digest: expected %s."
                                % (shown(expected, 80), DIGEST_FORM))
    architecture = params["architecture"]
    if architecture is not None and not ARCHITECTURE_RE.match(architecture):
        raise InvalidInputError("The option architecture '%s' is invalid: expected an OCI architecture such as "
                                "amd64, arm64 or arm/v7." % shown(architecture, 60))
    for name in ("retries", "retry_delay"):
        if params[name] < 0:
            raise InvalidInputError("The option %s %d is negative: expected 0 or more." % (name, params[name]))
    if params["ca_cert_dir"] is not None:
        check_directory("ca_cert_dir", params["ca_cert_dir"], missing_ok=True, host=host)
    if params["state"] == "present" and params["cache_dir"] is not None:
        check_directory("cache_dir", params["cache_dir"], missing_ok=True, host=host)
    return ref, expected


def pull(host, params, check_mode=False, diff=False, secrets=None, local=False):
    """The result of an os_image_pull task with ``params`` on ``host``: resolve (with state=inspected also
    inspect, with state=present also fetch) one image; FleetosError for a failure.

    ``local``: ``host`` is the controller itself (the local connection); the registry is read with
    ``_registry.ImageReader`` in this process, not skopeo, unless the option executable names a skopeo.
    ``secrets`` (a set) receives every secret of the credentials used, for the result's censoring.
    """
    ref, expected = check_params(host, params)
    local = local and not params["executable"]
    retries = dict(retries=params["retries"], retry_delay=params["retry_delay"])
    skopeo = None if local else Skopeo(host, params["executable"], **retries)
    architecture = params["architecture"] or host_architecture(host)
    image = ref.image
    given = any(params[name] is not None for name in ("auth_file", "pull_secret", "username"))
    # Without credentials of its own, the step reads the auth file rpm-ostree reads, as
    # rpm_ostree_rebase does, so that an inspection sees what the rebase will see.
    auth_file = params["auth_file"] if given else ostree_auth_file(OSTREE_AUTH_FILES, host=host)
    creds = credentials(image, auth_file=auth_file, pull_secret=params["pull_secret"],
                        username=params["username"], password=params["password"], host=host)
    if local and creds is None:
        # Then skopeo would read the containers tools' own auth files: so does the reader.
        creds = default_credentials(image, default_auth_files())
    document = None
    if creds is not None:
        if secrets is not None:
            secrets.update(creds.secrets())
        document = creds.for_image(image)
        if document is None and given:
            raise InvalidInputError(
                "Failed to find credentials for image '%s': the %s has no entry for %s (entries: %s)."
                % (image, creds.source, " or ".join("'%s'" % scope for scope in image_scopes(image)),
                   ", ".join(sorted(creds.keys())) or "none"))
    if local:
        reader = ImageReader(auths=creds if document is not None else None, **retries)
        try:
            return _read(host, reader, ref, params, architecture, expected, None, check_mode, diff)
        finally:
            if secrets is not None:
                secrets.update(reader.secrets)
    with host_auth_file(host, document) as host_file:
        return _read(host, skopeo, ref, params, architecture, expected, host_file, check_mode, diff)


def _read(host, client, ref, params, architecture, expected, auth_file, check_mode, diff):
    """The pull itself, with ``client`` (a ``_skopeo.Skopeo`` on the host, or a ``_registry.ImageReader``)."""
    image = ref.image
    options = dict(cert_dir=params["ca_cert_dir"], tls_verify=params["validate_certs"])
    resolved = resolve(client, image, (architecture,), auth_file=auth_file, **options)
    digest, platform = resolved["digest"], resolved["platform_digests"][architecture]
    if expected and expected not in (digest, platform):
        served = digest if platform == digest else "%s (for %s: %s)" % (digest, architecture, platform)
        raise ImageError("Failed to verify image '%s': the registry serves digest %s, not the expected "
                         "digest %s." % (image, served, expected), digest=digest, expected_digest=expected)
    result = dict(changed=False, image=resolved["image"], digest=digest, index=resolved["index"],
                  manifests=resolved["manifests"], platform_digest=platform, annotations=resolved["annotations"])
    if params["state"] == "resolved":
        return result
    # The manifest for the platform, by digest: what a host of that platform pulls.
    platform_image = ref.with_digest(platform).image
    info = client.inspect(platform_image, auth_file=auth_file, **options)
    if info.get("Digest") != platform:
        raise ImageError("Failed to inspect image '%s': the inspection reported digest %s, not the resolved digest "
                         "%s." % (platform_image, info.get("Digest"), platform))
    config = None
    if "Labels" in info:
        labels = info.get("Labels") or {}
    else:
        config = client.inspect_config(platform_image, auth_file=auth_file, **options)
        labels = (config.get("config") or {}).get("Labels") or {}
    if config is None and labels.get(FINAL_DIFFID_LABEL):
        # Where the ostree base ends: the planner tells a derived image from its base.
        config = client.inspect_config(platform_image, auth_file=auth_file, **options)
    result.update(labels=labels, ostree_commit=image_commit(labels),
                  version=first_label(labels, VERSION_LABELS),
                  architecture=info.get("Architecture") or None,
                  diff_ids=((config or {}).get("rootfs") or {}).get("diff_ids"))
    if params["state"] == "present":
        cache = pick_cache(host, params["cache_dir"])
        result.update(fetch(host, client, ref.name, platform_image, platform, info.get("Layers") or [],
                            cache, dict(options, auth_file=auth_file), check_mode, diff))
    return result


def fetch(host, client, name, pinned, digest, layers, cache, options, check_mode, diff):
    """Copy the image's blobs into the OCI layout ``cache`` on ``host`` with ``client`` (skopeo or the reader);
    changed when a blob was new."""
    tag = layout_tag(name, digest)
    before = layout_blobs(host, cache)
    digests, names = layout_index(host, cache)
    missing = sorted(({digest} | set(layers)) - before)
    listed = digest in digests or tag in names
    cached = listed and not set(layers) - before
    fetched = [] if cached else missing
    if not cached and not check_mode:
        argv = ["mkdir", "-p", "-m", "755", "--", cache]
        rc, _out, err = host.run(argv)
        if rc != 0:
            lines = err.strip().splitlines()
            cause = lines[-1].rsplit(": ", 1)[-1].strip() if lines else "exit status %d" % rc
            raise ImageError("Failed to pull image '%s': cannot create the cache directory '%s': %s."
                             % (pinned, cache, cause.rstrip(".")), cmd=argv, rc=rc, stderr=err)
        client.copy(pinned, "oci:%s:%s" % (cache, tag), **options)
        fetched = sorted(layout_blobs(host, cache) - before)
    result = dict(changed=bool(fetched), cache_dir=cache, fetched_blobs=fetched)
    if diff:
        result["diff"] = dict(before=dict(image=pinned, cached=cached),
                              after=dict(image=pinned, cached=True))
    return result
