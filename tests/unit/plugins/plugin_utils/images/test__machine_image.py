# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""MachineImage validation and resolution: precedence, conflicts, order independence."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.fleetos.layering.plugins.module_utils._errors import InvalidInputError
from ansible_collections.fleetos.layering.plugins.plugin_utils.images._machine_image import (
    ConflictError,
    MachineImageSet,
    group_name,
    validate,
)
from ansible_collections.fleetos.layering.plugins.plugin_utils.images._selector import compile_selector

D1 = "sha256:" + "1" * 64
D2 = "sha256:" + "2" * 64
POOL = "reg/os@sha256:" + "0" * 64


def mi(name, node_name=None, selector=None, image="reg/os@" + D1, where=None, **spec):
    spec = dict(spec, image=image)
    if node_name is not None:
        spec["nodeName"] = node_name
    if selector is not None:
        spec["nodeSelector"] = selector
    metadata = {"name": name}
    if where:
        metadata["annotations"] = {"fleetos.io/defined-in": where}
    return {"apiVersion": "fleetos.io/v1alpha1", "kind": "MachineImage", "metadata": metadata, "spec": spec}


WEB = {"matchLabels": {"pool": "web"}}
ZONE_A = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}


@pytest.mark.parametrize(
    ("objects", "host", "labels", "source", "name"),
    [
        ([], "n1", {"pool": "web"}, "pool", None),
        ([mi("web", selector=WEB)], "n1", {"pool": "web"}, "selector", "web"),
        ([mi("web", selector=WEB)], "n1", {"pool": "db"}, "pool", None),
        # nodeName beats a selector that also matches
        ([mi("web", selector=WEB), mi("pin", node_name="n1")], "n1", {"pool": "web"}, "nodeName", "pin"),
        # two selectors matching, but a nodeName decides first: no conflict
        ([mi("web", selector=WEB), mi("zone-a", selector=ZONE_A), mi("pin", node_name="n1")], "n1",
         {"pool": "web", "zone": "a"}, "nodeName", "pin"),
        ([mi("pin", node_name="n2")], "n1", {}, "pool", None),
    ],
)
def test_precedence(objects, host, labels, source, name):
    result = MachineImageSet(objects).resolve(host, labels, pool_image=POOL)
    assert (result["source"], result["name"]) == (source, name)
    assert result["image"] == (POOL if source == "pool" else "reg/os@" + D1)


def test_result_fields():
    objects = [mi("web", selector=WEB, where="machine_images/web.yaml document 2", pullSecret="sec",
                  transport="ostree-remote-image:fedora", paused=True, image="reg/web@" + D2)]
    result = MachineImageSet(objects).resolve("n1", {"pool": "web"}, defined_vars={"sec"})
    assert result == {
        "source": "selector",
        "name": "web",
        "image": "reg/web@" + D2,
        "digest": D2,
        "layered_image": None,
        "pull_secret": "sec",
        "transport": "ostree-remote-image:fedora",
        "paused": True,
        "defined_in": "machine_images/web.yaml document 2",
        "reason": "MachineImage 'web' (machine_images/web.yaml document 2) selects n1 with spec.nodeSelector "
                  "pool=web; paused: the rollout skips this host",
    }


@pytest.mark.parametrize(
    ("pool_image", "image", "digest", "reason"),
    [
        (POOL, POOL, "sha256:" + "0" * 64, "no MachineImage names or selects n1; the pool default fleetos_pool_image applies"),
        (None, None, None, "no MachineImage names or selects n1 and fleetos_pool_image is not set"),
    ],
)
def test_pool_default(pool_image, image, digest, reason):
    result = MachineImageSet([]).resolve("n1", {}, pool_image=pool_image)
    assert (result["source"], result["image"], result["digest"], result["reason"]) == ("pool", image, digest, reason)


@pytest.mark.parametrize(
    ("objects", "pool_image", "pool_layered", "expected"),
    [
        # An object naming a LayeredImage: no image, the name for the planner's lock.
        ([mi("web", selector=WEB, image=None, layeredImage="worker", pullSecret="sec")], None, None,
         ("selector", "web", None, "worker", "sec")),
        # It beats a pool default, image or LayeredImage alike.
        ([mi("web", selector=WEB, image=None, layeredImage="worker")], POOL, None,
         ("selector", "web", None, "worker", None)),
        ([mi("web", selector=WEB)], None, "pool-worker", ("selector", "web", "reg/os@" + D1, None, None)),
        # The pool's LayeredImage, with the pool's pull secret.
        ([], None, "pool-worker", ("pool", None, None, "pool-worker", "pool_sec")),
        ([mi("web", selector=WEB, image=None, layeredImage="worker")], None, "pool-worker",
         ("pool", None, None, "pool-worker", "pool_sec")),
    ],
)
def test_layered_image_assignment(objects, pool_image, pool_layered, expected):
    labels = {"pool": "web"} if expected[1] else {"pool": "db"}
    result = MachineImageSet(objects).resolve("n1", labels, pool_image=pool_image, pool_layered_image=pool_layered,
                                              pool_pull_secret="pool_sec", defined_vars={"sec", "pool_sec"})
    assert (result["source"], result["name"], result["image"], result["layered_image"],
            result["pull_secret"]) == expected


def test_pool_layered_image_reason():
    result = MachineImageSet([]).resolve("n1", {}, pool_layered_image="worker")
    assert (result["digest"], result["transport"]) == (None, "ostree-unverified-registry")
    assert result["reason"] == ("no MachineImage names or selects n1; the pool default fleetos_pool_layered_image "
                                "(LayeredImage 'worker') applies")


@pytest.mark.parametrize(
    ("pool_image", "pool_layered", "message"),
    [
        (POOL, "worker", "host n1: fleetos_pool_image and fleetos_pool_layered_image are both set; give the pool "
                         "exactly one of them"),
        (None, "Worker", "host n1: fleetos_pool_layered_image 'Worker' is not a LayeredImage name (its metadata.name, "
                         "a DNS-1123 subdomain)"),
        (None, 3, "host n1: fleetos_pool_layered_image 3 is not a LayeredImage name"),
    ],
)
def test_pool_layered_image_refused(pool_image, pool_layered, message):
    with pytest.raises(InvalidInputError) as caught:
        MachineImageSet([]).resolve("n1", {}, pool_image=pool_image, pool_layered_image=pool_layered)
    assert caught.value.msg.startswith(message) and caught.value.details["field"] == "fleetos_pool_layered_image"


W = "machine_images/web.yaml document 2 (MachineImage 'web-canary'): "


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        (mi("web-canary", where="machine_images/web.yaml document 2", selector={}),
         W + "spec.nodeSelector is empty; an empty selector would select every node"),
        (mi("web-canary", where="machine_images/web.yaml document 2",
            selector={"matchExpressions": [{"key": "zone", "operator": "Has"}]}),
         W + "spec.nodeSelector.matchExpressions[0].operator 'Has' is not one of In, NotIn, Exists, DoesNotExist"),
        (mi("web-canary", where="machine_images/web.yaml document 2", selector=WEB, image="reg/os:latest"),
         W + "spec.image 'reg/os:latest' is not digest-pinned (NAME@sha256:<64 hex>); set spec.allowTag: true"),
        (mi("web-canary", where="machine_images/web.yaml document 2", selector=WEB, image="reg/os@sha256:abc"),
         W + "spec.image 'reg/os@sha256:abc' has an invalid digest: expected sha256: and 64 hex digits"),
        (mi("web-canary", where="machine_images/web.yaml document 2", selector=WEB, node_name="n1"),
         W + "spec.nodeName/spec.nodeSelector are both set; give exactly one of them"),
        (mi("web-canary", where="machine_images/web.yaml document 2"),
         W + "spec.nodeName/spec.nodeSelector are both missing; give exactly one of them"),
        (mi("web-canary", where="machine_images/web.yaml document 2", selector=WEB, pullSecret="not a var"),
         W + "spec.pullSecret 'not a var' is not a variable name"),
        (mi("web-canary", where="machine_images/web.yaml document 2", selector=WEB, transport="docker"),
         W + "spec.transport 'docker' is not an rpm-ostree transport: expected one of ostree-unverified-registry, "
         "ostree-unverified-image, ostree-image-signed, ostree-remote-image:REMOTE, ostree-remote-registry:REMOTE"),
        (mi("web-canary", where="machine_images/web.yaml document 2", selector=WEB, paused="yes"),
         W + "spec.paused is 'yes', not true or false"),
        (mi("web-canary", where="machine_images/web.yaml document 2", selector=WEB, layeredImage="worker"),
         W + "spec.image/spec.layeredImage are both set; give exactly one of them (an image, or the name of a "
         "LayeredImage whose composed digest the lock gives)"),
        (mi("web-canary", where="machine_images/web.yaml document 2", selector=WEB, image=None,
            layeredImage="Worker_1"),
         W + "spec.layeredImage 'Worker_1' is not a LayeredImage name (its metadata.name, a DNS-1123 subdomain)"),
        (mi("web-canary", where="machine_images/web.yaml document 2", selector=WEB, image=None),
         W + "spec.image must be a non-empty image reference NAME@sha256:<64 hex> (or give spec.layeredImage)"),
        (mi("web-canary", where="machine_images/web.yaml document 2", selector=WEB, nodeselector={}),
         W + "spec.nodeselector is not a MachineImage spec field"),
        (dict(mi("Web_Canary", where="f.yaml document 1", selector=WEB)),
         "f.yaml document 1 (MachineImage 'Web_Canary'): metadata.name 'Web_Canary' is not a DNS-1123 subdomain"),
        (dict(mi("x", where="f.yaml document 3", selector=WEB), kind="Pod"),
         "f.yaml document 3 (MachineImage 'x'): kind 'Pod' is not MachineImage"),
        (dict(mi("x", where="f.yaml document 3", selector=WEB), apiVersion="v1"),
         "f.yaml document 3 (MachineImage 'x'): apiVersion 'v1' is not fleetos.io/v1alpha1"),
        ({"apiVersion": "fleetos.io/v1alpha1", "kind": "MachineImage", "metadata": {}, "spec": {}},
         "machine_images[0] (MachineImage without a name): metadata.name must be a non-empty string"),
        ("text", "machine_images[0] is str, not a MachineImage mapping"),
    ],
)
def test_invalid_objects(obj, message):
    with pytest.raises(InvalidInputError) as caught:
        MachineImageSet([obj])
    assert caught.value.msg.startswith(message), caught.value.msg


def test_tag_allowed_with_allow_tag():
    result = MachineImageSet([mi("web", selector=WEB, image="reg/os:40", allowTag=True)]).resolve("n", {"pool": "web"})
    assert (result["image"], result["digest"]) == ("reg/os:40", None)


def test_duplicate_names():
    objects = [mi("web", selector=WEB, where="b.yaml document 1"), mi("web", node_name="n", where="a.yaml document 4")]
    with pytest.raises(InvalidInputError) as caught:
        MachineImageSet(objects)
    assert caught.value.msg == ("b.yaml document 1 (MachineImage 'web'): metadata.name is also used by "
                                "a.yaml document 4; names must be unique")


def test_conflict_names_host_and_both_objects():
    objects = [mi("zone-a", selector=ZONE_A, where="z.yaml document 1"), mi("web", selector=WEB, where="w.yaml document 2")]
    with pytest.raises(ConflictError) as caught:
        MachineImageSet(objects).resolve("n1", {"pool": "web", "zone": "a"})
    assert caught.value.msg == (
        "host n1 matches 2 MachineImages at the selector level: 'web' (w.yaml document 2, spec.nodeSelector) and "
        "'zone-a' (z.yaml document 1, spec.nodeSelector); make them disjoint or pin the host with spec.nodeName")
    assert caught.value.details["objects"] == ["web", "zone-a"]


def test_node_name_conflict():
    with pytest.raises(ConflictError) as caught:
        MachineImageSet([mi("b", node_name="n1"), mi("a", node_name="n1")]).resolve("n1", {})
    assert caught.value.msg.startswith("host n1 matches 2 MachineImages at the nodeName level: "
                                       "'a' (machine_images[1], spec.nodeName) and 'b' (machine_images[0], spec.nodeName)")


@pytest.mark.parametrize(
    ("defined", "pool_secret", "objects", "message"),
    [
        (set(), None, [mi("web", selector=WEB, pullSecret="sec", where="w.yaml document 1")],
         "w.yaml document 1 (MachineImage 'web'): spec.pullSecret names the variable 'sec', which is not defined "
         "for host n1"),
        ({"other"}, "pool_sec", [],
         "host n1: fleetos_pool_pull_secret names the variable 'pool_sec', which is not defined for the host"),
    ],
)
def test_missing_pull_secret(defined, pool_secret, objects, message):
    with pytest.raises(InvalidInputError) as caught:
        MachineImageSet(objects).resolve("n1", {"pool": "web"}, pool_image=POOL, defined_vars=defined,
                                         pool_pull_secret=pool_secret)
    assert caught.value.msg == message


def test_pool_image_must_be_pinned():
    with pytest.raises(InvalidInputError) as caught:
        MachineImageSet([]).resolve("n1", {}, pool_image="reg/os:latest")
    assert caught.value.msg == "host n1: fleetos_pool_image 'reg/os:latest' is not digest-pinned (NAME@sha256:<64 hex>)"


@pytest.mark.parametrize(
    ("pool_image", "pool_transport", "field", "msg"),
    [
        ("REG//repo@" + D1, None, "fleetos_pool_image",
         "host n1: fleetos_pool_image %r has an invalid repository 'REG//repo': expected lowercase letters, digits "
         "and separators ('.', '_', '__', '-') in each '/'-separated component" % ("REG//repo@" + D1)),
        ("ostree-image-signed:docker://quay.io/os@" + D1, None, "fleetos_pool_image",
         "host n1: fleetos_pool_image %r already names an rpm-ostree transport (ostree-image-signed): give a plain "
         "registry/repository@sha256:<64 hex digits> and choose the transport with fleetos_pool_transport"
         % ("ostree-image-signed:docker://quay.io/os@" + D1)),
        (POOL, "ostree-remote-image", "fleetos_pool_transport",
         "host n1: fleetos_pool_transport 'ostree-remote-image' names no ostree remote: expected "
         "ostree-remote-image:REMOTE"),
    ],
)
def test_pool_default_grammar_is_image_ref(pool_image, pool_transport, field, msg):
    with pytest.raises(InvalidInputError) as caught:
        MachineImageSet([]).resolve("n1", {}, pool_image=pool_image, pool_transport=pool_transport)
    assert caught.value.msg == msg
    assert caught.value.details == {"field": field, "host": "n1"}


def test_pool_default_is_normalized():
    result = MachineImageSet([]).resolve("n1", {}, pool_image="docker://quay.io/os@" + D1,
                                         pool_transport="ostree-remote-image:fleet")
    assert (result["image"], result["digest"], result["transport"]) == (
        "quay.io/os@" + D1, D1, "ostree-remote-image:fleet")


@pytest.mark.parametrize(
    ("name", "group"),
    [("web", "machine_image_web"), ("web-zone.c", "machine_image_web_zone_c")],
)
def test_group_name(name, group):
    assert group_name(name) == group


# spec.image: every verdict and cause comes from _image_ref, prefixed with the object and the field.
@pytest.mark.parametrize(
    ("image", "allow_tag", "cause"),
    [
        ("REG//repo@" + D1, True,
         "has an invalid repository 'REG//repo': expected lowercase letters, digits and separators ('.', '_', "
         "'__', '-') in each '/'-separated component"),
        ("reg.example.com//repo@" + D1, True, "has an invalid repository '/repo'"),
        ("quay.io/Fedora/os@" + D1, True, "has an invalid repository 'Fedora/os'"),
        ("quay.io/os:-bad", True, "has an invalid tag '-bad'"),
        ("quay.io/os@sha256:" + "A" * 64, True, "has an invalid digest: expected sha256: and 64 hex digits"),
        ("quay.io:99999/os@" + D1, True, "has an invalid registry 'quay.io:99999': port 99999 is not between 1 and 65535"),
        ("ostree-unverified-registry:quay.io/os@" + D1, False,
         "already names an rpm-ostree transport (ostree-unverified-registry): give a plain registry/repository@sha256:<64 hex "
         "digits> and choose the transport with spec.transport"),
        ("ostree-remote-image:fleet:docker://quay.io/os@" + D1, False,
         "already names an rpm-ostree transport (ostree-remote-image:fleet)"),
        ("ostree-bogus:quay.io/os@" + D1, False, "has an unknown transport 'ostree-bogus'"),
        (" quay.io/os@" + D1, False, "contains whitespace"),
    ],
)
def test_spec_image_grammar_is_image_ref(image, allow_tag, cause):
    with pytest.raises(InvalidInputError) as caught:
        validate(mi("x", node_name="n1", image=image, where="f.yaml document 1", allowTag=allow_tag))
    assert caught.value.msg.startswith("f.yaml document 1 (MachineImage 'x'): spec.image %r %s" % (image, cause)), \
        caught.value.msg
    assert caught.value.details["field"] == "spec.image"


@pytest.mark.parametrize(
    ("image", "allow_tag", "stored", "digest"),
    [
        ("reg/os@" + D1, False, "reg/os@" + D1, D1),
        # a docker:// prefix is accepted and dropped: one spelling per image
        ("docker://quay.io/os@" + D1, False, "quay.io/os@" + D1, D1),
        # a tag next to the digest: the digest decides
        ("quay.io/os:40@" + D1, False, "quay.io/os:40@" + D1, D1),
        ("[fd00::1]:5000/os@" + D1, False, "[fd00::1]:5000/os@" + D1, D1),
        ("Registry.Example.com/os:40", True, "Registry.Example.com/os:40", None),
        ("fedora:40", True, "fedora:40", None),
    ],
)
def test_spec_image_accepted(image, allow_tag, stored, digest):
    obj = validate(mi("x", node_name="n1", image=image, allowTag=allow_tag))
    assert (obj.image, obj.digest) == (stored, digest)


@pytest.mark.parametrize(
    ("transport", "text"),
    [
        (None, "ostree-unverified-registry"),
        ("", "ostree-unverified-registry"),
        ("ostree-unverified-image", "ostree-unverified-image"),
        ("ostree-image-signed", "ostree-image-signed"),
        ("ostree-remote-image:fleet", "ostree-remote-image:fleet"),
        ("ostree-remote-registry:fleet", "ostree-remote-registry:fleet"),
    ],
)
def test_spec_transport_accepted(transport, text):
    spec = {} if transport is None else {"transport": transport}
    assert validate(mi("x", node_name="n1", **spec)).transport == text


@pytest.mark.parametrize(
    ("transport", "cause"),
    [
        ("ostree-remote-image", "names no ostree remote: expected ostree-remote-image:REMOTE"),
        ("ostree-remote-image:", "names no ostree remote: expected ostree-remote-image:REMOTE"),
        ("ostree-image-signed:fleet", "has an extra ':fleet': ostree-image-signed takes no ostree remote"),
        ("signed", "is not an rpm-ostree transport"),
        (5, "is int, not a transport text"),
    ],
)
def test_spec_transport_refused(transport, cause):
    with pytest.raises(InvalidInputError) as caught:
        validate(mi("x", node_name="n1", transport=transport, where="f.yaml document 1"))
    assert caught.value.msg.startswith("f.yaml document 1 (MachineImage 'x'): spec.transport %r %s"
                                       % (transport, cause)), caught.value.msg


def test_group_name_collision():
    with pytest.raises(InvalidInputError) as caught:
        MachineImageSet([mi("a-b", node_name="x"), mi("a.b", node_name="y")])
    assert "metadata.name maps to the same inventory group machine_image_a_b" in caught.value.msg


# ---- properties (hypothesis) -------------------------------------------------------

KEYS = ["pool", "zone", "gpu", "rack"]
VALUES = ["a", "b", "c", ""]
HOSTS = ["n1", "n2", "n3"]

requirement = st.one_of(
    st.tuples(st.sampled_from(KEYS), st.sampled_from(["In", "NotIn"]),
              st.lists(st.sampled_from(VALUES), min_size=1, max_size=3, unique=True)),
    st.tuples(st.sampled_from(KEYS), st.sampled_from(["Exists", "DoesNotExist"]), st.just([])),
)


@st.composite
def selector_st(draw):
    labels = draw(st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=2))
    exprs = draw(st.lists(requirement, max_size=3))
    if not labels and not exprs:
        labels = {"pool": draw(st.sampled_from(VALUES))}
    selector = {}
    if labels:
        selector["matchLabels"] = labels
    if exprs:
        selector["matchExpressions"] = [
            dict({"key": k, "operator": op}, **({"values": v} if v else {})) for k, op, v in exprs]
    return selector


@st.composite
def objects_st(draw):
    count = draw(st.integers(min_value=0, max_value=6))
    objects = []
    for index in range(count):
        if draw(st.booleans()):
            objects.append(mi("o%d" % index, node_name=draw(st.sampled_from(HOSTS)),
                              paused=draw(st.booleans()), where="gen.yaml document %d" % index))
        else:
            objects.append(mi("o%d" % index, selector=draw(selector_st()), paused=draw(st.booleans()),
                              where="gen.yaml document %d" % index))
    return objects


labels_st = st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=4)


# Objects carry where they came from (as the manifest loaders annotate them): without it a
# message can only name an object by its list position, which does depend on the order.
def outcome(objects, host, labels):
    try:
        return ("ok", MachineImageSet(objects).resolve(host, labels, pool_image=POOL))
    except ConflictError as exc:
        return ("conflict", exc.msg)


def reference(objects, host, labels):
    """Linear scan without the index: which objects match, per level."""
    by_name = [o["metadata"]["name"] for o in objects if o["spec"].get("nodeName") == host]
    by_selector = [o["metadata"]["name"] for o in objects
                   if "nodeSelector" in o["spec"] and compile_selector(o["spec"]["nodeSelector"]).matches(labels)]
    return sorted(by_name), sorted(by_selector)


@settings(max_examples=300, deadline=None)
@given(objects=objects_st(), host=st.sampled_from(HOSTS), labels=labels_st, seed=st.integers(0, 2 ** 32 - 1))
def test_result_does_not_depend_on_order(objects, host, labels, seed):
    rng = random.Random(seed)
    shuffled = list(objects)
    rng.shuffle(shuffled)
    items = list(labels.items())
    rng.shuffle(items)
    assert outcome(shuffled, host, dict(items)) == outcome(objects, host, labels)


@settings(max_examples=300, deadline=None)
@given(objects=objects_st(), host=st.sampled_from(HOSTS), labels=labels_st)
def test_same_level_matches_raise_and_index_agrees_with_linear_scan(objects, host, labels):
    by_name, by_selector = reference(objects, host, labels)
    kind, value = outcome(objects, host, labels)
    level = by_name or by_selector
    if len(level) > 1:
        assert kind == "conflict"
        for name in level:
            assert "'%s'" % name in value
    else:
        assert kind == "ok"
        expected = ("nodeName" if by_name else "selector" if by_selector else "pool", level[0] if level else None)
        assert (value["source"], value["name"]) == expected
