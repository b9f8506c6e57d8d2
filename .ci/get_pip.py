# Copyright (c) fleetos.layering contributors
# SPDX-License-Identifier: GPL-3.0-or-later
"""Offline stand-in for the pip bootstrap script ansible-test downloads.

ansible-test creates each sanity virtual environment without pip and runs
``get-pip-<version>.py`` from https://ci-files.testing.ansible.com, cached as
``~/.ansible/test/cache/get_pip_<version>.py``. When that host cannot be reached,
``make sanity`` installs this file under that name, next to the matching pip wheel
downloaded from PyPI. Like get-pip.py, it runs pip from the wheel and installs the
packages given on the command line (``pip==<version>``); ``--no-setuptools`` and
``--no-wheel`` are get-pip.py options that mean "install only what is asked".
"""

from __future__ import annotations

import glob
import os
import sys

GET_PIP_ONLY_OPTIONS = ("--no-setuptools", "--no-wheel")


def find_wheel() -> str:
    """Return the pip wheel that matches this script's name (get_pip_24_2.py -> pip 24.2)."""
    here = os.path.dirname(os.path.abspath(__file__))
    name = os.path.splitext(os.path.basename(__file__))[0]
    version = name[len("get_pip_"):].replace("_", ".")
    wheels = sorted(glob.glob(os.path.join(here, f"pip-{version}-*.whl")))
    if not wheels:
        raise SystemExit(f"get_pip: no pip {version} wheel next to {__file__}; run 'make sanity-bootstrap'")
    return wheels[0]


def main() -> int:
    """Install the requested packages with pip run from the wheel."""
    sys.path.insert(0, find_wheel())
    from pip._internal.cli.main import main as pip_main  # pylint: disable=import-outside-toplevel

    args = [arg for arg in sys.argv[1:] if arg not in GET_PIP_ONLY_OPTIONS]
    return pip_main(["install", "--upgrade", "--force-reinstall", *args])


if __name__ == "__main__":
    sys.exit(main())
