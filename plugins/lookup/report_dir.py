# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
name: report_dir
short_description: The directory a playbook of fleetos.layering writes its report to
version_added: 0.1.0
description:
  - Returns, in this order, the first of
    O(configured) when it is set and not empty (the playbooks pass C(fleetos_report_dir));
    C(<artifacts>/<name>) when the playbook runs under ansible-runner (AWX, Automation Controller,
    ansible-navigator), in its artifacts directory (environment variable C(AWX_ISOLATED_DATA_DIR)),
    which AWX and ansible-navigator remove when the job ends (set O(configured) to a kept volume);
    C(<working directory>/<name>) otherwise (C(PWD), else the process's working directory).
  - A relative O(configured) is taken relative to the working directory.
author:
  - fleetos.layering contributors (@fleetos)
options:
  _terms:
    description:
      - The name of the report directory under the artifacts or working directory, used when O(configured)
        is not set; V(.) is that directory itself.
    type: list
    elements: str
    required: true
  configured:
    description: The directory the user asked for, if any.
    type: str
notes:
  - Under ansible-runner without an artifacts directory (C(AWX_ISOLATED_DATA_DIR) unset or empty), the
    working directory is used.
"""

EXAMPLES = r"""
- name: Write the report where the job keeps it
  ansible.builtin.copy:
    dest: "{{ lookup('fleetos.layering.report_dir', 'rollout-report', configured=fleetos_report_dir | default('')) }}/rollout-report.json"
    content: "{{ report | to_nice_json }}"
    mode: "0644"
"""

RETURN = r"""
_raw:
  description: The absolute path of the report directory.
  type: list
  elements: str
  sample: /runner/artifacts/42/rollout-report
"""

import os

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

RUNNER_ARTIFACTS = "AWX_ISOLATED_DATA_DIR"


def report_dir(name, configured=None, environ=None, cwd=None):
    """The report directory for a report called ``name`` (see DOCUMENTATION)."""
    environ = os.environ if environ is None else environ
    base = environ.get("PWD") or (cwd if cwd is not None else os.getcwd())
    if configured not in (None, ""):
        return os.path.normpath(os.path.join(base, os.path.expanduser(str(configured))))
    artifacts = environ.get(RUNNER_ARTIFACTS)
    return os.path.normpath(os.path.join(artifacts or base, name))


class LookupModule(LookupBase):

    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        if len(terms) != 1 or not isinstance(terms[0], str) or not terms[0] or "/" in terms[0]:
            raise AnsibleLookupError("report_dir takes one directory name (no '/'), got %r." % (terms,))
        return [report_dir(terms[0], self.get_option("configured"))]
