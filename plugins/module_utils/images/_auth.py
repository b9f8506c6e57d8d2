# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# This is a private module_util of fleetos.layering: its interface may change at any
# time and it is not meant to be used by other collections.

"""Registry credentials turned into a temporary containers-auth.json(5) file.

Credentials come from an existing auth file, a dockerconfigjson pull secret (the JSON
text ``{"auths": {...}}``, raw or base64-encoded, or the parsed mapping) or a username
and password. The entry that applies to an image is chosen as containers-auth.json(5)
specifies: ``registry/namespace/repository``, then each shorter namespace, then the
registry (``host`` or ``host:port``, which are different keys); legacy keys written as
URLs (``https://index.docker.io/v1/``) match their host. The chosen entry is written,
in the ``auth`` form, into a 0600 file in a private temporary directory that is removed
on every path: here (:func:`temporary_auth_file`), or on a ``_host.Host`` reached over a
connection (:func:`host_auth_file`: the document on stdin, never in argv). No secret is ever
put in an exception message.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import shutil
import tempfile
from contextlib import contextmanager

from ansible_collections.fleetos.layering.plugins.module_utils._errors import CommandError, InvalidInputError
from ansible_collections.fleetos.layering.plugins.module_utils.host._host import HostFileError, error_line
from ansible_collections.fleetos.layering.plugins.module_utils.images._image_ref import DOCKER_HUB, parse, shown

AUTH_FILE_NAME = "auth.json"
RUN_AUTH_FILE = "/run/ostree/auth.json"
# The auth files rpm-ostree reads, first match wins.
OSTREE_AUTH_FILES = (RUN_AUTH_FILE, "/etc/ostree/auth.json")
TEMP_PREFIX = "fleetos-auth-"
_LEGACY_DOCKER_HUB = ("index.docker.io", "registry-1.docker.io")


def ostree_auth_file(paths=OSTREE_AUTH_FILES, host=None):
    """The auth file rpm-ostree would use (the first of ``paths`` that exists), or None; on ``host`` (a
    ``_host.Host``) when given, else here."""
    if host is not None:
        return next((path for path in paths if host.test("-e", path)), None)
    return next((path for path in paths if os.path.exists(path)), None)


def auth_file_test(auth_file):
    """The argv that tests ``auth_file`` before a stage: a caller that batches its reads (``Host.prefetch``) asks
    for this one, so that :func:`check_auth_file` finds its answer."""
    return ["test", "-f", auth_file]


def check_auth_file(host, auth_file):
    """InvalidInputError unless ``auth_file`` (when given) is a regular file on the host."""
    if auth_file and host.run(auth_file_test(auth_file))[0] != 0:
        raise InvalidInputError("auth_file '%s' does not exist or is not a regular file." % shown(auth_file, 80))


def default_auth_files(environ=None, home=None, uid=None):
    """The auth files the containers tools (skopeo) read when given none, in the order they are searched
    (containers-auth.json(5)): ``$REGISTRY_AUTH_FILE`` alone when it is set, else
    ``$XDG_RUNTIME_DIR/containers/auth.json`` (``/run/containers/UID/auth.json`` without it),
    ``$XDG_CONFIG_HOME/containers/auth.json`` (``~/.config``), ``~/.docker/config.json``, ``~/.dockercfg``."""
    environ = os.environ if environ is None else environ
    if environ.get("REGISTRY_AUTH_FILE"):
        return [environ["REGISTRY_AUTH_FILE"]]
    home = home or os.path.expanduser("~")
    uid = os.getuid() if uid is None else uid
    runtime = environ.get("XDG_RUNTIME_DIR")
    runtime = os.path.join(runtime, "containers") if runtime else "/run/containers/%d" % uid
    config = environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    return [os.path.join(runtime, AUTH_FILE_NAME), os.path.join(config, "containers", AUTH_FILE_NAME),
            os.path.join(home, ".docker", "config.json"), os.path.join(home, ".dockercfg")]


def default_credentials(image, paths):
    """The credentials of the first of ``paths`` (read here) that exists and has an entry for ``image``, or None."""
    for path in paths:
        if os.path.isfile(path):
            found = from_auth_file(path)
            if found.match(image) is not None:
                return found
    return None


def normalize_key(key):
    """An auth file key as containers-image compares it.

    A key written as a URL (``http://``/``https://``) keeps only its host, and
    ``index.docker.io`` becomes ``docker.io``; other keys are kept as written
    (``host``, ``host:port`` or ``host[:port]/namespace...``).
    """
    text = str(key).strip()
    for scheme in ("https://", "http://"):
        if text.startswith(scheme):
            text = text[len(scheme):].split("/", 1)[0]
            break
    else:
        text = text.rstrip("/")
    if text in _LEGACY_DOCKER_HUB:
        return DOCKER_HUB
    return text


def image_scopes(image):
    """The auth file keys that may apply to ``image``, most specific first.

    ``198.51.100.1:5000/fleetos/lab-os:1.0`` gives
    ``198.51.100.1:5000/fleetos/lab-os``, ``198.51.100.1:5000/fleetos``, ``198.51.100.1:5000``.
    """
    ref = parse(image)
    registry = normalize_key(ref.registry)
    repository = ref.repository
    if registry == DOCKER_HUB and "/" not in repository:
        repository = "library/" + repository
    parts = repository.split("/")
    scopes = ["%s/%s" % (registry, "/".join(parts[:count])) for count in range(len(parts), 0, -1)]
    scopes.append(registry)
    return scopes


def registry_of(image):
    """The registry key (``host`` or ``host:port``) of an image, Docker Hub as ``docker.io``."""
    return normalize_key(parse(image).registry)


def _encode(username, password):
    return base64.b64encode(("%s:%s" % (username, password)).encode("utf-8")).decode("ascii")


def _decode_auth(value, source, key):
    try:
        text = base64.b64decode(str(value), validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        text = None
    if text is None or ":" not in text:
        raise InvalidInputError(
            "The entry '%s' of the %s has an invalid auth value: expected base64 of username:password"
            % (key, source)
        )
    username, password = text.split(":", 1)
    return username, password


def _entry(value, source, key):
    """One ``auths`` entry -> (auth, username, password); accepts ``auth`` or ``username``/``password``."""
    if not isinstance(value, dict):
        raise InvalidInputError(
            "The entry '%s' of the %s is not a mapping: expected {\"auth\": \"base64(user:password)\"}"
            % (key, source)
        )
    if value.get("auth"):
        username, password = _decode_auth(value["auth"], source, key)
        return str(value["auth"]), username, password
    if value.get("username") is not None and value.get("password") is not None:
        username, password = str(value["username"]), str(value["password"])
        return _encode(username, password), username, password
    if value.get("identitytoken"):
        return None, None, None
    raise InvalidInputError(
        "The entry '%s' of the %s has no credentials: expected an auth value or a username and password"
        % (key, source)
    )


class Auths:
    """The ``auths`` entries of one credential source, keyed by normalized key."""

    def __init__(self, source, entries):
        self.source = source
        self.entries = entries  # normalized key -> original entry (a dict)

    def keys(self):
        return list(self.entries)

    def secrets(self):
        """Every secret value these entries hold (for ``module.no_log_values``)."""
        values = set()
        for key, value in self.entries.items():
            auth, dummy, password = _entry(value, self.source, key)
            for secret in (auth, password, value.get("auth"), value.get("identitytoken"),
                           value.get("registrytoken")):
                if secret:
                    values.add(str(secret))
            if auth:
                values.add(base64.b64decode(auth).decode("utf-8"))
        return values

    def match(self, image):
        """``(key, entry)`` of the most specific entry for ``image``, or ``None``."""
        for scope in image_scopes(image):
            if scope in self.entries:
                return scope, self.entries[scope]
        return None

    def login(self, image):
        """``(username, password)`` of the most specific entry for ``image``, or None.

        None as well for an entry that holds only an identity token. What a registry
        client (``_registry``) sends as Basic credentials, to the registry or its token service.
        """
        found = self.match(image)
        if found is None:
            return None
        key, value = found
        dummy, username, password = _entry(value, self.source, key)
        return None if username is None else (username, password)

    def for_image(self, image):
        """A containers-auth.json document holding only the entry for ``image`` (or None)."""
        found = self.match(image)
        if found is None:
            return None
        key, value = found
        entry = {}
        auth = _entry(value, self.source, key)[0]
        if auth:
            entry["auth"] = auth
        if value.get("identitytoken"):
            entry["identitytoken"] = str(value["identitytoken"])
        return {"auths": {key: entry}}


def _auths_from_document(document, source):
    if not isinstance(document, dict):
        raise InvalidInputError(
            "The %s is not a JSON object: expected {\"auths\": {\"registry\": {\"auth\": ...}}}" % source
        )
    if "auths" in document:
        auths = document["auths"]
    elif document and all(isinstance(value, dict) for value in document.values()) and not (
            set(document) & {"credHelpers", "credsStore"}):
        auths = document  # legacy .dockercfg: the registries at the top level
    else:
        auths = {}
    if not isinstance(auths, dict):
        raise InvalidInputError("The %s has an 'auths' that is not a mapping of registries" % source)
    entries = {}
    for key, value in auths.items():
        normalized = normalize_key(key)
        _entry(value, source, key)
        # A key written exactly wins over a legacy (URL) spelling of the same registry.
        if normalized not in entries or normalized == key:
            entries[normalized] = value
    return Auths(source, entries)


def from_pull_secret(secret):
    """A dockerconfigjson pull secret: a mapping, its JSON text, or base64 of that text."""
    source = "pull secret"
    if isinstance(secret, dict):
        return _auths_from_document(secret, source)
    if not isinstance(secret, str) or not secret.strip():
        raise InvalidInputError(
            "The pull secret is empty or not text: expected dockerconfigjson JSON, raw or base64-encoded"
        )
    text = secret.strip()
    try:
        document = json.loads(text)
    except ValueError:
        try:
            document = json.loads(base64.b64decode("".join(text.split()), validate=True).decode("utf-8"))
        except (ValueError, binascii.Error):
            raise InvalidInputError(
                "The pull secret is neither JSON nor base64-encoded JSON: expected dockerconfigjson "
                "{\"auths\": {...}}"
            ) from None
    return _auths_from_document(document, source)


def from_auth_file(path, host=None):
    """The entries of an existing containers-auth.json / docker config file; on ``host`` (a
    ``_host.Host``, read with ``cat``) when given, else here."""
    source = "auth file '%s'" % path
    if host is not None:
        try:
            raw = host.read_file(path)
        except HostFileError as exc:
            cause = "it is not a regular file" if exc.refused else str(exc).rstrip(".")
            raise InvalidInputError("Failed to read the auth file '%s': %s" % (path, cause)) from None
        if raw is None:
            raise InvalidInputError("Failed to read the auth file '%s': No such file or directory" % path)
    else:
        try:
            with open(path, "rb") as handle:
                raw = handle.read()
        except OSError as exc:
            raise InvalidInputError("Failed to read the auth file '%s': %s" % (path, exc.strerror)) from None
    try:
        document = json.loads(raw.decode("utf-8"))
    except ValueError:
        raise InvalidInputError("The auth file '%s' is not valid JSON" % path) from None
    return _auths_from_document(document, source)


def from_username(image, username, password):
    """Username and password for the registry of ``image``."""
    if not username or password is None or password == "":
        raise InvalidInputError("A username needs a non-empty password, and a password a username")
    if ":" in username:
        raise InvalidInputError("The username must not contain ':' (containers-auth.json keeps user:password)")
    registry = registry_of(image)
    return Auths("username and password", {registry: {"auth": _encode(username, password)}})


def credentials(image, auth_file=None, pull_secret=None, username=None, password=None, host=None):
    """The one credential source given (or None when none is); ``auth_file`` is read on ``host`` when given."""
    if auth_file:
        return from_auth_file(auth_file, host=host)
    if pull_secret:
        return from_pull_secret(pull_secret)
    if username or password:
        return from_username(image, username, password)
    return None


@contextmanager
def temporary_auth_file(document, tmpdir=None):
    """Write ``document`` to a 0600 file in a private 0700 directory; yield its path.

    Yields None for no document. The directory is removed when the block ends,
    whether it succeeds or raises.
    """
    if document is None:
        yield None
        return
    directory = tempfile.mkdtemp(prefix=TEMP_PREFIX, dir=tmpdir)
    try:
        path = os.path.join(directory, AUTH_FILE_NAME)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(document, handle)
        yield path
    finally:
        shutil.rmtree(directory, ignore_errors=True)


# Where a private auth file goes on a host: /run, a tmpfs that only root writes to.
PRIVATE_DIRS = ("/run",)
# $1 the prefix of the directory's name, $2 the file's name, then the directories to try first
# (PRIVATE_DIRS). Reads the auth file on stdin into a private directory (0700, made by mktemp) under
# the first of those, $XDG_RUNTIME_DIR (a user's own /run/user/UID) and $TMPDIR or /tmp that the user
# can write to, as a 0600 file (umask 077), and prints the directory. Nothing is left when it fails.
PRIVATE_AUTH_SCRIPT = r"""
prefix=$1 file=$2
shift 2
umask 077
for top in "$@" "${XDG_RUNTIME_DIR:-}" "${TMPDIR:-/tmp}"; do
  [ -n "$top" ] && [ -d "$top" ] && [ -w "$top" ] || continue
  dir=$(mktemp -d "$top/${prefix}XXXXXXXX") || continue
  if cat > "$dir/$file"; then printf '%s\n' "$dir"; exit 0; fi
  rm -rf -- "$dir"
  exit 1
done
echo 'no directory to write to: /run, $XDG_RUNTIME_DIR, $TMPDIR and /tmp are not writable' >&2
exit 1
"""


def _private_directory(out):
    """The directory PRIVATE_AUTH_SCRIPT printed, or None when its output is not one."""
    lines = out.strip("\n").split("\n") if out else []
    path = lines[-1] if lines else ""
    ok = path.startswith("/") and os.path.basename(path).startswith(TEMP_PREFIX) and "/../" not in path + "/"
    return path if ok else None


@contextmanager
def host_auth_file(host, document):
    """Write ``document`` to a 0600 file in a private 0700 directory on ``host`` (a ``_host.Host``),
    under ``/run`` (a tmpfs) when the user can write there (see PRIVATE_AUTH_SCRIPT); yield its path.

    The document goes to the host on stdin, never in argv. Yields None for no document. The
    directory is removed when the block ends, whether it succeeds or raises; CommandError when it
    cannot be written, or cannot be removed after a block that succeeded.
    """
    if document is None:
        yield None
        return
    argv = ["sh", "-c", PRIVATE_AUTH_SCRIPT, "sh", TEMP_PREFIX, AUTH_FILE_NAME] + list(PRIVATE_DIRS)
    rc, out, err = host.run(argv, data=json.dumps(document).encode("utf-8"))
    directory = _private_directory(out) if rc == 0 else None
    if directory is None:
        cause = error_line(err, rc) if rc != 0 else "the script printed no private directory"
        raise CommandError("Failed to write the registry credentials to a private file on the host: %s."
                           % cause, cmd=argv, rc=rc, stderr=err)
    remove = ["rm", "-rf", "--", directory]
    try:
        yield directory + "/" + AUTH_FILE_NAME
    except BaseException:
        # The block's own error is the one to report; the removal is still attempted.
        try:
            host.run(remove)
        except Exception:  # pylint: disable=broad-except
            pass
        raise
    rc, _out, err = host.run(remove)
    if rc != 0:
        raise CommandError("Failed to remove the private auth file directory '%s' from the host: %s."
                           % (directory, error_line(err, rc)), cmd=remove, rc=rc, stderr=err)
