# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# This is a private module_util of fleetos.layering: its interface may change at any
# time and it is not meant to be used by other collections.

"""Replacing a whole file atomically, on the host (modules) and on the controller (plugins): the one writer of
the collection's files that runs in Python (the host-side writers run the host's shell: ``_host``)."""

from __future__ import annotations

import os
import tempfile


def place_file(path, fill, mode=None, fsync=False, prefix=None):
    """Make ``path`` whole or not at all: a temporary file in the same directory (``prefix``, default
    ``.<name>.``), made ``mode`` when given (else mkstemp's 0600), filled by ``fill(handle)`` (a binary file),
    synced to disk with ``fsync``, then renamed over ``path``. On any failure (``fill``'s own among them) the
    temporary file is removed and the error raised; ``path`` is left as it was."""
    fd, tmp = tempfile.mkstemp(prefix=prefix or ".%s." % os.path.basename(path), dir=os.path.dirname(path))
    try:
        if mode is not None:
            os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as handle:
            fill(handle)
            if fsync:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def replace_file(path, data, mode=None, fsync=False, prefix=None):
    """Write ``data`` (bytes) to ``path`` atomically (:func:`place_file`)."""
    place_file(path, lambda handle: handle.write(data), mode=mode, fsync=fsync, prefix=prefix)
