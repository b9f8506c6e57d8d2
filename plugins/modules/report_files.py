#!/usr/bin/python
# -*- coding: utf-8 -*-

# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: report_files
short_description: Write a playbook's report files into a directory on the controller, in one task
version_added: 0.3.0
description:
  - Writes each of O(files) into the directory O(path) on the controller, creating the directory
    (mode C(0755)) when it is missing. Each file is written atomically (a temporary file in the same
    directory, then a rename), so a reader never sees half a report; a file that already holds the
    same text and mode is left as it is.
  - The playbooks of this collection write their reports (JSON, Markdown, SVG) with it. One task
    writes every file of a report; M(ansible.builtin.copy) runs a stat and a copy per file on the
    target, about a second of controller time each.
  - This module is implemented as an action plugin and always runs on the controller, whatever the
    task's host.
author:
  - fleetos.layering contributors (@fleetos)
extends_documentation_fragment:
  - fleetos.layering.attributes
attributes:
  check_mode:
    support: full
    details:
      - Returns the files that would be written, and writes nothing.
  diff_mode:
    support: none
  idempotent:
    support: full
options:
  path:
    description:
      - The directory on the controller, created with its parents when it is missing.
    type: path
    required: true
  files:
    description:
      - Each file to write, its plain name (no directory) mapped to its text.
    type: dict
    required: true
  mode:
    description:
      - The mode of the files, an octal string.
    type: raw
    default: "0644"
"""

EXAMPLES = r"""
- name: Write the report files
  fleetos.layering.report_files:
    path: "{{ playbook_dir }}/rollout-report"
    files:
      rollout-report.json: "{{ report | to_nice_json }}\n"
      rollout-report.md: "{{ report | fleetos.layering.rollout_report_markdown }}"
"""

RETURN = r"""
path:
  description: The directory.
  returned: success
  type: str
  sample: /home/ops/rollout-report
files:
  description: The path of each file of O(files).
  returned: success
  type: list
  elements: str
  sample: [/home/ops/rollout-report/rollout-report.json, /home/ops/rollout-report/rollout-report.md]
written:
  description: The files written (in check mode, that would be written) because their text or mode differed.
  returned: success
  type: list
  elements: str
  sample: [/home/ops/rollout-report/rollout-report.json]
"""
