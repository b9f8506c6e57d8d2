# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The skopeo client: exact argv, environment, JSON and error messages."""

from __future__ import annotations

import json

import pytest

from ansible_collections.fleetos.layering.plugins.module_utils._errors import CommandError, ImageError
from ansible_collections.fleetos.layering.plugins.module_utils._skopeo import Skopeo, describe_failure

IMAGE = "198.51.100.1:5000/fleetos/lab-os:1.0"
INSPECT = {"Name": "198.51.100.1:5000/fleetos/lab-os", "Digest": "sha256:" + "f" * 64,
           "Labels": {"version": "1.0"}, "Architecture": "amd64", "Layers": ["sha256:" + "7" * 64]}


class FakeModule:
    def __init__(self, results=None, found="/usr/bin/skopeo"):
        self.results = list(results or [(0, json.dumps(INSPECT), "")])
        self.calls = []
        self.found = found
        self.looked_up = []

    def get_bin_path(self, name, required=False):
        self.looked_up.append((name, required))
        return self.found

    def run_command(self, argv, **kwargs):
        self.calls.append((argv, kwargs))
        return self.results.pop(0)


SOURCE_OPTIONS = [
    ({}, []),
    ({"auth_file": "/tmp/x/auth.json"}, ["--authfile", "/tmp/x/auth.json"]),
    ({"cert_dir": "/etc/pki/reg"}, ["--cert-dir", "/etc/pki/reg"]),
    ({"tls_verify": False}, ["--tls-verify=false"]),
    ({"auth_file": "/a", "cert_dir": "/c", "tls_verify": False},
     ["--authfile", "/a", "--cert-dir", "/c", "--tls-verify=false"]),
]


@pytest.mark.parametrize(("kwargs", "options"), SOURCE_OPTIONS)
def test_inspect_argv(kwargs, options):
    module = FakeModule()
    assert Skopeo(module).inspect(IMAGE, **kwargs) == INSPECT
    ((argv, run_kwargs),) = module.calls
    assert argv == ["/usr/bin/skopeo", "inspect", "--no-tags"] + options + ["--", "docker://" + IMAGE]
    assert run_kwargs == {"environ_update": {"LC_ALL": "C"}, "expand_user_and_vars": False}


@pytest.mark.parametrize(("kwargs", "options"), SOURCE_OPTIONS)
def test_inspect_config_argv(kwargs, options):
    config = {"config": {"Labels": {"ostree.commit": "abc"}}}
    module = FakeModule([(0, json.dumps(config), "")])
    assert Skopeo(module).inspect_config(IMAGE, **kwargs) == config
    assert module.calls[0][0] == ["/usr/bin/skopeo", "inspect", "--config"] + options + ["--", "docker://" + IMAGE]


@pytest.mark.parametrize(("kwargs", "options"), [
    ({}, []),
    ({"auth_file": "/a", "cert_dir": "/c", "tls_verify": False},
     ["--src-authfile", "/a", "--src-cert-dir", "/c", "--src-tls-verify=false"]),
])
def test_copy_argv(kwargs, options):
    module = FakeModule([(0, "", "")])
    Skopeo(module).copy(IMAGE, "oci:/cache:tag", **kwargs)
    ((argv, run_kwargs),) = module.calls
    assert argv == ["/usr/bin/skopeo", "copy", "--quiet"] + options + ["--", "docker://" + IMAGE, "oci:/cache:tag"]
    assert run_kwargs["environ_update"] == {"LC_ALL": "C"}
    assert run_kwargs["expand_user_and_vars"] is False


@pytest.mark.parametrize(("executable", "lookup", "binary"), [
    (None, [("skopeo", False)], "/usr/bin/skopeo"),
    ("/opt/bin/skopeo", [], "/opt/bin/skopeo"),
    ("skopeo-1.9", [("skopeo-1.9", False)], "/usr/bin/skopeo"),
])
def test_binary(executable, lookup, binary):
    module = FakeModule()
    client = Skopeo(module, executable)
    assert client.binary == binary
    assert module.looked_up == lookup


def test_missing_binary():
    with pytest.raises(CommandError) as raised:
        Skopeo(FakeModule(found=None))
    assert raised.value.msg == ("Failed to find the skopeo executable 'skopeo' on the target: install skopeo "
                                "or set executable.")


# Real skopeo 1.9 stderr lines as the lab registry produces them.
UNAUTHORIZED = ('time="2026-11-29T22:34:34Z" level=fatal msg="Error parsing image name \\"docker://%s\\": '
                'reading manifest 1.0 in 198.51.100.1:5000/fleetos/lab-os: unauthorized: authentication '
                'required"' % IMAGE)
UNKNOWN_CA = ('time="2026-11-29T22:34:34Z" level=fatal msg="Error parsing image name \\"docker://%s\\": pinging '
              'container registry 198.51.100.1:5000: Get \\"https://198.51.100.1:5000/v2/\\": x509: certificate '
              'signed by unknown authority"' % IMAGE)


@pytest.mark.parametrize(("stderr", "cause"), [
    (UNAUTHORIZED, "the registry refused the credentials (unauthorized)"),
    (UNKNOWN_CA, "the registry's TLS certificate is not trusted (unknown CA or wrong certificate)"),
    ('level=fatal msg="reading manifest 9.9 in r/os: manifest unknown: manifest unknown"',
     "the registry has no such image (manifest unknown)"),
    ('level=fatal msg="pinging container registry 198.51.100.1:5000: Get ...: dial tcp 198.51.100.1:5000: '
     'connect: connection refused"', "the registry is unreachable"),
    ("first line\nsomething else went wrong\n", "something else went wrong"),
    ("", "skopeo failed without a message"),
])
def test_describe_failure(stderr, cause):
    assert describe_failure(stderr) == cause


@pytest.mark.parametrize(("method", "args", "action"), [
    ("inspect", (IMAGE,), "inspect"),
    ("inspect_config", (IMAGE,), "inspect the configuration of"),
    ("copy", (IMAGE, "oci:/c:t"), "pull"),
])
def test_failure_raises_image_error_with_details(method, args, action):
    module = FakeModule([(1, "", UNAUTHORIZED)])
    with pytest.raises(ImageError) as raised:
        getattr(Skopeo(module), method)(*args)
    assert raised.value.msg == ("Failed to %s image '%s': the registry refused the credentials (unauthorized)"
                                % (action, IMAGE))
    assert raised.value.details == {"cmd": module.calls[0][0], "rc": 1, "stdout": "", "stderr": UNAUTHORIZED}


def test_inspect_not_json():
    module = FakeModule([(0, "not json", "")])
    with pytest.raises(ImageError) as raised:
        Skopeo(module).inspect(IMAGE)
    assert raised.value.msg == "Failed to inspect image '%s': skopeo printed no valid JSON" % IMAGE
    assert raised.value.details["stdout"] == "not json"


def test_missing_binary_names_the_option_that_sets_it():
    with pytest.raises(CommandError) as raised:
        Skopeo(FakeModule(found=None), option="skopeo_executable")
    assert raised.value.msg.endswith("install skopeo or set skopeo_executable.")
