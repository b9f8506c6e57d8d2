#!/usr/bin/env bash
# Copyright (c) fleetos.layering contributors
# SPDX-License-Identifier: GPL-3.0-or-later
#
# sanity-bootstrap.sh VENV CACHE GET_PIP: make sure the ansible-test of VENV can bootstrap pip
# into its sanity venvs offline. ansible-test would download get_pip_<version>.py from its own
# CI host; this machine reaches only PyPI and Debian, so GET_PIP (.ci/get_pip.py) takes its
# place in CACHE, next to the pip wheel of that version from PyPI.
set -euo pipefail
venv=$1 cache=$2 get_pip=$3
requirements=$(echo "$venv"/lib/python*/site-packages/ansible_test/_internal/python_requirements.py)
version=$(sed -n "s/^ *pip='\([0-9.]*\)',$/\1/p" "$requirements")
[[ -n "$version" ]] || { echo "sanity-bootstrap: cannot find the pip version of $requirements" >&2; exit 1; }
script=$cache/get_pip_${version//./_}.py
[[ -s "$script" ]] && exit 0
mkdir -p "$cache"
"$venv/bin/python" -m pip download --quiet --no-deps --only-binary :all: --dest "$cache" "pip==$version"
install -m 0644 "$get_pip" "$script"
echo "sanity-bootstrap: using $get_pip with pip $version from PyPI for $venv"
