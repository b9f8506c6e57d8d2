# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# This is a private module_util of fleetos.layering: its interface may change at any
# time and it is not meant to be used by other collections.

"""The arguments of every module and action, checked as given, before Ansible converts them.

AnsibleModule turns a list given to a ``str`` option into its Python text (``['a']``),
and echoes a value it cannot convert or that is not one of the choices in full (a
100,000-character value makes a 100,000-character message). :func:`check_arguments`
refuses such input first, in one sentence that names the option and the accepted
form: a type error is named as such, a value is shown cut short (``_image_ref.shown``),
control characters and oversized values are refused. An action plugin calls
:func:`check_arguments` on its task arguments: a Python module's too
(``plugin_utils/host/_module_action.py``), as a module has no public way to read its options
before AnsibleModule converts them.
"""

from __future__ import annotations

import math
import os
import stat

from ansible.module_utils.common.validation import (
    check_type_bool,
    check_type_dict,
    check_type_float,
    check_type_int,
    check_type_list,
)

from ansible_collections.fleetos.layering.plugins.module_utils._errors import InvalidInputError
from ansible_collections.fleetos.layering.plugins.module_utils.host._origin import describe_char
from ansible_collections.fleetos.layering.plugins.module_utils.images._image_ref import shown

# The longest value of a one-line option (PATH_MAX), and of a shell command option.
MAX_LENGTH = 4096
MAX_TEXT_LENGTH = 65536
# The largest number an int option takes (seconds, counts): what a C int holds.
MAX_INT = 2 ** 31 - 1

_KINDS = (
    (bool, "a boolean"),
    (int, "an integer"),
    (float, "a number"),
    (str, "a string"),
    (dict, "a dict"),
    ((list, tuple), "a list"),
)
_WANTED = {"str": "a string", "path": "a string", "int": "an integer", "float": "a number",
           "bool": "a boolean (true or false)", "dict": "a dict", "list": "a list"}
_CHECKERS = {"int": check_type_int, "float": check_type_float, "bool": check_type_bool, "dict": check_type_dict,
             "list": check_type_list}
# Control characters a multi-line text option (a shell command) may hold.
_TEXT_CONTROLS = "\t\n"


def kind(value):
    """What a value is, for a message: ``a list``, ``the string 'x'``, ``null``."""
    if value is None:
        return "null"
    if isinstance(value, str):
        return "the string '%s'" % shown(value, 60)
    for types, name in _KINDS:
        if isinstance(value, types):
            return name
    return "a %s" % type(value).__name__


def control_char(text, allowed=""):
    """The first control character (C0, DEL, C1) of ``text`` that is not in ``allowed``, or None."""
    for char in text:
        code = ord(char)
        if (code < 32 or 127 <= code < 160) and char not in allowed:
            return char
    return None


def check_text(name, value, text=False):
    """Refuse a string option value with a control character, or longer than its limit.

    ``text`` marks a multi-line text option (a shell command): tab and newline are
    allowed there, and it may be up to MAX_TEXT_LENGTH characters long.
    """
    limit = MAX_TEXT_LENGTH if text else MAX_LENGTH
    if len(value) > limit:
        raise InvalidInputError("%s is %d characters long: expected at most %d." % (name, len(value), limit))
    bad = control_char(value, _TEXT_CONTROLS if text else "")
    if bad is not None:
        raise InvalidInputError("%s contains a control character (%s): expected %s." % (
            name, describe_char(bad), "text without control characters other than tab and newline" if text
            else "one line of printable text"))


def _check_value(name, option, value, text):
    wanted = option.get("type", "str")
    if wanted in ("str", "path"):
        if not isinstance(value, str):
            raise InvalidInputError("%s must be a string, got %s." % (name, kind(value)))
        check_text(name, value, text)
        choices = option.get("choices")
        if choices and value not in choices:
            raise InvalidInputError("%s must be one of %s, got '%s'." % (name, ", ".join(choices), shown(value, 60)))
        return
    if wanted not in _CHECKERS:
        return
    if isinstance(value, bool) and wanted in ("int", "float") or isinstance(value, str) and len(value) > MAX_LENGTH:
        raise InvalidInputError("%s must be %s, got %s." % (name, _WANTED[wanted], kind(value)))
    try:
        converted = _CHECKERS[wanted](value)
    except (TypeError, ValueError):
        raise InvalidInputError("%s must be %s, got %s." % (name, _WANTED[wanted], kind(value))) from None
    if wanted == "int" and abs(converted) > MAX_INT:
        raise InvalidInputError("%s must be an integer of at most %d, got %s." % (name, MAX_INT, shown(str(converted), 40)))
    if wanted == "float" and not math.isfinite(converted):
        raise InvalidInputError("%s must be a finite number, got %s." % (name, converted))
    if wanted == "list" and option.get("elements") in ("str", "path"):
        for index, item in enumerate(converted):
            _check_value("%s[%d]" % (name, index), {"type": option["elements"]}, item, text)


def check_arguments(argument_spec, arguments, text_options=()):
    """Raise InvalidInputError for the first argument that does not fit its option as given.

    ``arguments`` are the task's arguments before any conversion; options not given or
    null are left to the argument spec. ``text_options`` names the multi-line text
    options (shell commands, see :func:`check_text`).
    """
    arguments = arguments or {}
    for name, option in argument_spec.items():
        value = arguments.get(name)
        if value is not None:
            _check_value(name, option, value, name in text_options)


def no_log_values(argument_spec, arguments):
    """The texts an action's result must not show: every non-empty leaf value (as text) of the arguments
    whose option is ``no_log``, as AnsibleModule gathers them for its ``no_log_values``."""
    found = set()

    def leaves(value):
        if isinstance(value, dict):
            for item in value.values():
                leaves(item)
        elif isinstance(value, (list, tuple, set)):
            for item in value:
                leaves(item)
        elif value is not None and not isinstance(value, bool) and str(value):
            found.add(str(value))

    for name, option in argument_spec.items():
        if option.get("no_log") and (arguments or {}).get(name) is not None:
            leaves(arguments[name])
    return found


def defaults(argument_spec, **given):
    """The options of a module called from other code: each option's default in ``argument_spec``, then ``given``."""
    options = {name: option.get("default") for name, option in argument_spec.items()}
    options.update(given)
    return options


def check_directory(name, path, missing_ok=False, host=None):
    """Refuse ``path`` unless it is a directory (a symlink to one is fine); ``missing_ok`` lets it not exist yet.

    On ``host`` (a ``_host.Host``) when given, with test(1) there; else here.
    """
    if host is not None:
        if host.test("-d", path):
            return
        if host.test("-e", path):
            raise InvalidInputError("%s '%s' is not a directory." % (name, shown(path, 80)))
        if missing_ok:
            return
        raise InvalidInputError("%s '%s' does not exist: expected a directory." % (name, shown(path, 80)))
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if missing_ok:
            return
        raise InvalidInputError("%s '%s' does not exist: expected a directory." % (name, shown(path, 80))) from None
    except OSError as exc:
        raise InvalidInputError("%s '%s' cannot be read: %s." % (name, shown(path, 80), exc.strerror)) from None
    if not stat.S_ISDIR(st.st_mode):
        raise InvalidInputError("%s '%s' is not a directory." % (name, shown(path, 80)))
