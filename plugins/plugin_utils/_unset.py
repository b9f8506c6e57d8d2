# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# This is a private plugin_util of fleetos.layering: its interface may change at any
# time and it is not meant to be used by other collections.

"""An option left unset reaches a filter as ``None`` on every supported ansible-core.

ansible-core 2.19 keeps a template's ``None``: a role default ``"{{ fleetos_pool_image |
default(none) }}"`` is ``None`` when the variable is not set. Before 2.19 a template that is a
whole value is rendered to text, and ``None`` becomes ``""``. The filters whose optional
arguments come from such defaults take both: ``empty_means_unset`` turns ``""`` back into
``None`` for the arguments it names, wherever they are given (by position or keyword).
"""

from __future__ import annotations

import functools
import inspect


def none_if_empty(value):
    """``None`` for ``None`` and ``""``; any other value as it is."""
    return None if isinstance(value, str) and not value else value


def empty_means_unset(*names):
    """Decorator: the arguments ``names`` of the function are ``None`` where they were given as ``""``."""
    def decorate(func):
        signature = inspect.signature(func)

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            try:
                bound = signature.bind(*args, **kwargs)
            except TypeError:
                return func(*args, **kwargs)  # the function's own error for a wrong call
            for name in names:
                if name in bound.arguments:
                    bound.arguments[name] = none_if_empty(bound.arguments[name])
            return func(*bound.args, **bound.kwargs)
        return wrapper
    return decorate
