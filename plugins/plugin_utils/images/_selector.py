# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# This is a private plugin_util of fleetos.layering: its interface may change at any
# time and it is not meant to be used by other collections.

"""Kubernetes label selectors (matchLabels and matchExpressions) over node labels.

Semantics follow Kubernetes ``metav1.LabelSelector``: every ``matchLabels`` entry and
every ``matchExpressions`` entry must hold (AND).

- ``In``: the key exists and its value is one of ``values`` (non-empty).
- ``NotIn``: the key is absent, or its value is none of ``values`` (non-empty).
- ``Exists`` / ``DoesNotExist``: the key is present / absent; ``values`` must be empty.

An empty selector (no labels, no expressions) is refused: in Kubernetes it selects
everything, which for a fleet is almost always an accident.
"""

from __future__ import annotations

from ansible_collections.fleetos.layering.plugins.module_utils._errors import InvalidInputError

OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
_SELECTOR_KEYS = ("matchLabels", "matchExpressions")
_EXPRESSION_KEYS = ("key", "operator", "values")


def normalize_labels(labels, what="node labels"):
    """Return a node's labels as a dict of str to str.

    Inventory YAML may hold unquoted numbers or an empty value; Kubernetes labels are
    strings, so ``None`` becomes ``""``, booleans ``"true"``/``"false"`` and numbers
    their decimal text.
    """
    if labels is None:
        return {}
    if not isinstance(labels, dict):
        raise InvalidInputError("%s must be a mapping of label keys to values, got %s"
                                % (what, type(labels).__name__))
    result = {}
    for key, value in labels.items():
        if value is None:
            value = ""
        elif isinstance(value, bool):
            value = "true" if value else "false"
        elif not isinstance(value, str):
            value = str(value)
        result[str(key)] = value
    return result


def _fail(prefix, field, cause):
    raise InvalidInputError("%s%s %s" % (prefix, field, cause), field=field)


def _label_string(value, prefix, field):
    if not isinstance(value, str):
        shown = "null" if value is None else repr(value)
        _fail(prefix, field, "is %s, not a string (quote it; an empty value is \"\")" % shown)
    return value


class Selector:
    """A compiled label selector: requirements as tuples, checked with dict lookups.

    ``requirements`` holds ``(key, operator, frozenset(values))``; ``matchLabels``
    entries become ``In`` with one value. ``anchor`` is one requirement every
    matching node must satisfy through a present key, used to index selectors:
    ``("value", key, values)`` or ``("key", key)``, or ``None`` when the selector
    has only ``NotIn``/``DoesNotExist`` (it may match nodes without any label).
    """

    __slots__ = ("requirements", "anchor", "text")

    def __init__(self, requirements, text):
        # Sorted so that the compiled form, and its text, never depend on input order.
        self.requirements = tuple(sorted(requirements, key=lambda r: (r[0], r[1], sorted(r[2]))))
        self.text = text
        self.anchor = None
        best = None
        for key, operator, values in self.requirements:
            if operator == "In":
                # The fewest values make the most selective index entry.
                if best is None or best[0] != "value" or len(values) < len(best[2]):
                    best = ("value", key, values)
            elif operator == "Exists" and best is None:
                best = ("key", key)
        self.anchor = best

    def matches(self, labels):
        """True when every requirement holds for ``labels`` (a dict of str to str)."""
        for key, operator, values in self.requirements:
            if operator == "In":
                value = labels.get(key)
                if value is None or value not in values:
                    return False
            elif operator == "NotIn":
                value = labels.get(key)
                if value is not None and value in values:
                    return False
            elif operator == "Exists":
                if key not in labels:
                    return False
            elif key in labels:  # DoesNotExist
                return False
        return True


def _describe(requirements):
    """kubectl-style text: ``a=b,c in (d,e),f notin (g),h,!i``."""
    parts = []
    for key, operator, values in requirements:
        if operator == "In" and len(values) == 1:
            parts.append("%s=%s" % (key, next(iter(values))))
        elif operator == "In":
            parts.append("%s in (%s)" % (key, ",".join(sorted(values))))
        elif operator == "NotIn":
            parts.append("%s notin (%s)" % (key, ",".join(sorted(values))))
        elif operator == "Exists":
            parts.append(key)
        else:
            parts.append("!%s" % key)
    return ",".join(parts)


def compile_selector(raw, prefix="", field="spec.nodeSelector"):
    """Validate a ``nodeSelector`` mapping and return a :class:`Selector`.

    Errors raise :class:`InvalidInputError` whose message starts with ``prefix``
    (e.g. ``"machine_images/web.yaml document 2 (MachineImage 'web'): "``) and names
    the field, e.g. ``spec.nodeSelector.matchExpressions[0].operator``.
    """
    if not isinstance(raw, dict):
        _fail(prefix, field, "must be a mapping with matchLabels and/or matchExpressions")
    unknown = sorted(str(k) for k in raw if k not in _SELECTOR_KEYS)
    if unknown:
        _fail(prefix, field, "has unknown key(s) %s; allowed: matchLabels, matchExpressions"
              % ", ".join(unknown))
    requirements = []
    match_labels = raw.get("matchLabels")
    if match_labels is not None:
        if not isinstance(match_labels, dict):
            _fail(prefix, field + ".matchLabels", "must be a mapping of label keys to values")
        for key, value in match_labels.items():
            if not isinstance(key, str) or not key:
                _fail(prefix, field + ".matchLabels", "has a key %r that is not a non-empty string" % (key,))
            value = _label_string(value, prefix, "%s.matchLabels[%s]" % (field, key))
            requirements.append((key, "In", frozenset((value,))))
    expressions = raw.get("matchExpressions")
    if expressions is not None:
        if not isinstance(expressions, list):
            _fail(prefix, field + ".matchExpressions", "must be a list of {key, operator, values}")
        for index, expression in enumerate(expressions):
            requirements.append(_compile_expression(expression, prefix, "%s.matchExpressions[%d]" % (field, index)))
    if not requirements:
        _fail(prefix, field, "is empty; an empty selector would select every node of the fleet, "
              "so give matchLabels or matchExpressions (or use spec.nodeName)")
    return Selector(requirements, _describe(sorted(requirements, key=lambda r: (r[0], r[1], sorted(r[2])))))


def _compile_expression(expression, prefix, field):
    if not isinstance(expression, dict):
        _fail(prefix, field, "must be a mapping with key, operator and values")
    unknown = sorted(str(k) for k in expression if k not in _EXPRESSION_KEYS)
    if unknown:
        _fail(prefix, field, "has unknown key(s) %s; allowed: key, operator, values" % ", ".join(unknown))
    key = expression.get("key")
    if not isinstance(key, str) or not key:
        _fail(prefix, field + ".key", "must be a non-empty string")
    operator = expression.get("operator")
    if operator not in OPERATORS:
        _fail(prefix, field + ".operator", "%r is not one of %s" % (operator, ", ".join(OPERATORS)))
    values = expression.get("values")
    if values is None:
        values = []
    if not isinstance(values, list):
        _fail(prefix, field + ".values", "must be a list of strings")
    values = [_label_string(v, prefix, "%s.values[%d]" % (field, i)) for i, v in enumerate(values)]
    if operator in ("In", "NotIn") and not values:
        _fail(prefix, field + ".values", "must not be empty with operator %s" % operator)
    if operator in ("Exists", "DoesNotExist") and values:
        _fail(prefix, field + ".values", "must be empty with operator %s" % operator)
    return (key, operator, frozenset(values))
