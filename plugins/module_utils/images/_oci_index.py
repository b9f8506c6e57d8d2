# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# This is a private module_util of fleetos.layering: its interface may change at any
# time and it is not meant to be used by other collections.

"""The ``index.json`` of an OCI image layout, read in one place.

Where the bytes come from is the caller's (a file on the host, a tar member, a file on the controller); what the
index says is read here: its manifest entries, the one a reference names (``org.opencontainers.image.ref.name``),
their digests and names, the image manifests among them, and the index with one entry put in place of another
of the same name."""

from __future__ import annotations

import json

from ansible_collections.fleetos.layering.plugins.module_utils._errors import ImageError
from ansible_collections.fleetos.layering.plugins.module_utils.images._image_ref import is_digest, shown

# The annotation that names a manifest of a layout (a tag, or what the writer chose).
REF_NAME = "org.opencontainers.image.ref.name"


class OciIndex:
    """An OCI layout's index: ``document`` (the mapping as read, kept whole for a rewrite) and ``manifests`` (its
    manifest entries that are mappings)."""

    def __init__(self, document):
        self.document = document if isinstance(document, dict) else {}
        entries = self.document.get("manifests")
        self.manifests = [entry for entry in entries if isinstance(entry, dict)] if isinstance(entries, list) else []

    @classmethod
    def parse(cls, data, where=None):
        """The index in ``data`` (bytes or text; None: no file). With ``where`` (the layout, for messages), data
        that is not JSON raises ImageError; without, it reads as an empty index (a cache not written yet). JSON
        that is not an object is an index without entries."""
        try:
            document = json.loads(data.decode("utf-8") if isinstance(data, bytes) else data)
        except (TypeError, UnicodeDecodeError, ValueError):
            if where is not None:
                raise ImageError("Failed to read the OCI layout %s: its index.json is not JSON." % where) from None
            document = None
        return cls(document)

    @staticmethod
    def name_of(entry):
        """The ref name of a manifest entry, or None."""
        annotations = entry.get("annotations")
        return annotations.get(REF_NAME) if isinstance(annotations, dict) else None

    def digests(self):
        """The digests of its manifest entries."""
        return set(entry.get("digest") for entry in self.manifests)

    def names(self):
        """The ref names of its manifest entries."""
        return set(name for name in (self.name_of(entry) for entry in self.manifests) if name)

    def select(self, reference, where):
        """The manifest digest ``reference`` names (the only entry when it names none); ImageError naming ``where``
        when the index has none, several, or an entry without a sha256 digest."""
        if not self.manifests:
            raise ImageError("Failed to read the OCI layout %s: its index.json lists no manifest." % where)
        if reference:
            found = [entry for entry in self.manifests if self.name_of(entry) == reference]
            if not found:
                raise ImageError("Failed to read the OCI layout %s: its index.json has no manifest named '%s'."
                                 % (where, shown(reference, 60)))
        elif len(self.manifests) == 1:
            found = self.manifests
        else:
            raise ImageError("Failed to read the OCI layout %s: its index.json lists %d manifests and the image names "
                             "none: expected PATH:REFERENCE." % (where, len(self.manifests)))
        digest = found[0].get("digest")
        if not is_digest(digest):
            raise ImageError("Failed to read the OCI layout %s: the manifest entry has no sha256 digest." % where)
        return digest

    def images(self, media_types):
        """Its entries of an image manifest: a media type among ``media_types`` (unset: the first of them)."""
        return [entry for entry in self.manifests if entry.get("mediaType", media_types[0]) in media_types]

    def with_entry(self, entry):
        """The bytes of the index with ``entry`` in place of any entry of the same ref name (a fresh index when the
        one read was not one)."""
        document = dict(self.document) if isinstance(self.document.get("manifests"), list) else \
            {"schemaVersion": 2, "manifests": []}
        name = self.name_of(entry)
        document["manifests"] = [old for old in document["manifests"]
                                 if not isinstance(old, dict) or self.name_of(old) != name] + [entry]
        return json.dumps(document).encode("utf-8")
