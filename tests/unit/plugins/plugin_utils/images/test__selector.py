# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Label selectors with Kubernetes semantics (metav1.LabelSelector)."""

from __future__ import annotations

import pytest

from ansible_collections.fleetos.layering.plugins.module_utils._errors import InvalidInputError
from ansible_collections.fleetos.layering.plugins.plugin_utils.images._selector import (
    compile_selector,
    normalize_labels,
)

NODE = {"pool": "web", "zone": "a", "role": "", "gpu": "nvidia"}


def expr(key, operator, *values):
    entry = {"key": key, "operator": operator}
    if values:
        entry["values"] = list(values)
    return entry


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        # matchLabels: key present with exactly that value
        ({"matchLabels": {"pool": "web"}}, NODE, True),
        ({"matchLabels": {"pool": "db"}}, NODE, False),
        ({"matchLabels": {"missing": "x"}}, NODE, False),
        ({"matchLabels": {"role": ""}}, NODE, True),
        ({"matchLabels": {"pool": "web", "zone": "b"}}, NODE, False),  # AND of all entries
        # In: key present and value listed
        ({"matchExpressions": [expr("zone", "In", "a", "b")]}, NODE, True),
        ({"matchExpressions": [expr("zone", "In", "b", "c")]}, NODE, False),
        ({"matchExpressions": [expr("missing", "In", "a")]}, NODE, False),
        # NotIn: key absent, or value not listed
        ({"matchExpressions": [expr("zone", "NotIn", "b")]}, NODE, True),
        ({"matchExpressions": [expr("zone", "NotIn", "a", "b")]}, NODE, False),
        ({"matchExpressions": [expr("missing", "NotIn", "a")]}, NODE, True),
        # Exists / DoesNotExist: key presence only (an empty value is present)
        ({"matchExpressions": [expr("role", "Exists")]}, NODE, True),
        ({"matchExpressions": [expr("missing", "Exists")]}, NODE, False),
        ({"matchExpressions": [expr("missing", "DoesNotExist")]}, NODE, True),
        ({"matchExpressions": [expr("role", "DoesNotExist")]}, NODE, False),
        ({"matchExpressions": [{"key": "gpu", "operator": "Exists", "values": []}]}, NODE, True),
        # matchLabels AND matchExpressions
        ({"matchLabels": {"pool": "web"}, "matchExpressions": [expr("zone", "NotIn", "a")]}, NODE, False),
        ({"matchLabels": {"pool": "web"}, "matchExpressions": [expr("gpu", "Exists"), expr("zone", "In", "a")]},
         NODE, True),
        # a node without labels
        ({"matchExpressions": [expr("zone", "NotIn", "a")]}, {}, True),
        ({"matchExpressions": [expr("zone", "DoesNotExist")]}, {}, True),
        ({"matchExpressions": [expr("zone", "Exists")]}, {}, False),
    ],
)
def test_selector_matches(selector, labels, expected):
    assert compile_selector(selector).matches(labels) is expected


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        ({}, "spec.nodeSelector is empty"),
        ({"matchLabels": {}, "matchExpressions": []}, "spec.nodeSelector is empty"),
        ({"matchExpressions": [expr("zone", "Has")]},
         "spec.nodeSelector.matchExpressions[0].operator 'Has' is not one of In, NotIn, Exists, DoesNotExist"),
        ({"matchExpressions": [{"key": "zone", "operator": "In", "values": []}]},
         "spec.nodeSelector.matchExpressions[0].values must not be empty with operator In"),
        ({"matchExpressions": [expr("zone", "NotIn")]},
         "spec.nodeSelector.matchExpressions[0].values must not be empty with operator NotIn"),
        ({"matchExpressions": [expr("a", "Exists"), expr("zone", "Exists", "a")]},
         "spec.nodeSelector.matchExpressions[1].values must be empty with operator Exists"),
        ({"matchExpressions": [expr("zone", "DoesNotExist", "a")]},
         "spec.nodeSelector.matchExpressions[0].values must be empty with operator DoesNotExist"),
        ({"matchExpressions": [{"operator": "Exists"}]},
         "spec.nodeSelector.matchExpressions[0].key must be a non-empty string"),
        ({"matchExpressions": [{"key": "z", "operator": "In", "values": ["a"], "value": "a"}]},
         "spec.nodeSelector.matchExpressions[0] has unknown key(s) value"),
        ({"matchLabels": {"index": 3}}, "spec.nodeSelector.matchLabels[index] is 3, not a string"),
        ({"matchLabels": {"role": None}}, "spec.nodeSelector.matchLabels[role] is null, not a string"),
        ({"matchlabels": {"a": "b"}}, "spec.nodeSelector has unknown key(s) matchlabels"),
        (["a"], "spec.nodeSelector must be a mapping"),
        ({"matchExpressions": {"key": "a"}}, "spec.nodeSelector.matchExpressions must be a list"),
    ],
)
def test_selector_invalid(selector, message):
    with pytest.raises(InvalidInputError) as caught:
        compile_selector(selector, prefix="f.yaml document 1 (MachineImage 'x'): ")
    assert caught.value.msg.startswith("f.yaml document 1 (MachineImage 'x'): " + message)


@pytest.mark.parametrize(
    ("selector", "text"),
    [
        ({"matchLabels": {"b": "1", "a": "2"}}, "a=2,b=1"),
        ({"matchExpressions": [expr("z", "In", "y", "x"), expr("g", "DoesNotExist"), expr("e", "Exists"),
                               expr("c", "NotIn", "q")]}, "c notin (q),e,!g,z in (x,y)"),
    ],
)
def test_selector_text_is_sorted(selector, text):
    assert compile_selector(selector).text == text


@pytest.mark.parametrize(
    ("selector", "anchor"),
    [
        ({"matchLabels": {"a": "1"}, "matchExpressions": [expr("b", "In", "x", "y")]}, ("value", "a", frozenset({"1"}))),
        ({"matchExpressions": [expr("b", "Exists"), expr("c", "NotIn", "x")]}, ("key", "b")),
        ({"matchExpressions": [expr("b", "DoesNotExist"), expr("c", "NotIn", "x")]}, None),
    ],
)
def test_selector_anchor(selector, anchor):
    assert compile_selector(selector).anchor == anchor


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        (None, {}),
        ({"a": None, "b": True, "c": 3, "d": "x"}, {"a": "", "b": "true", "c": "3", "d": "x"}),
    ],
)
def test_normalize_labels(labels, expected):
    assert normalize_labels(labels) == expected


def test_normalize_labels_refuses_a_list():
    with pytest.raises(InvalidInputError) as caught:
        normalize_labels(["a"], "fleetos_node_labels of host n1")
    assert caught.value.msg == "fleetos_node_labels of host n1 must be a mapping of label keys to values, got list"
