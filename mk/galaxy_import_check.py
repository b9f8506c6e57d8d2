# Copyright (c) fleetos.layering contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Judge a galaxy-importer run (`make galaxy-import`, mk/package.mk) from its log and result.

galaxy-importer exits 0 whenever it produced a result, whatever its ansible-lint pass
found, and logs every lint finding as a WARNING between "Linting collection via
ansible-lint" and "...ansible-lint run complete". Galaxy shows those on the import page;
here any ERROR, any lint WARNING, a pass that did not run or a module, lookup or inventory
plugin without documentation fails. Other warnings (an empty sanity ignore file is
reported as one) are counted, not failed.

Usage: galaxy_import_check.py IMPORT_LOG IMPORTER_RESULT_JSON EXIT_STATUS
"""

from __future__ import annotations

import json
import sys

LINT_START = "Linting collection via ansible-lint"
LINT_END = "...ansible-lint run complete"
DOC_PASS = "Getting doc strings via ansible-doc"
COMPLETED = "Importer processing completed successfully"
# Plugin types that ansible-doc documents from their own file; actions share their module's
# documentation and filters live several to a file, each documented in a YAML file of its own.
DOCUMENTED_TYPES = {"module", "lookup", "inventory", "strategy", "callback", "connection", "become", "cache",
                    "cliconf", "httpapi", "netconf", "shell", "vars", "test"}


def judge_log(lines):
    """(errors, lint_warnings, other_warnings): the log's ERROR lines and its WARNING lines by pass.

    A missing ansible-doc or ansible-lint pass, or an import that did not complete, is an error.
    """
    errors, lint_warnings, other_warnings = [], [], []
    in_lint = lint_seen = lint_done = False
    for line in lines:
        if line.startswith(LINT_START):
            in_lint = lint_seen = True
        elif line.startswith(LINT_END):
            in_lint, lint_done = False, True
        elif line.startswith(("ERROR:", "CRITICAL:")):
            errors.append(line)
        elif line.startswith("WARNING:"):
            (lint_warnings if in_lint else other_warnings).append(line)
    if not any(line.startswith(DOC_PASS) for line in lines):
        errors.append("galaxy-importer ran no ansible-doc pass (run_ansible_doc)")
    if not (lint_seen and lint_done):
        errors.append("galaxy-importer's ansible-lint pass did not run to its end (run_ansible_lint)")
    if not any(line.startswith(COMPLETED) for line in lines):
        errors.append("galaxy-importer did not complete the import")
    return errors, lint_warnings, other_warnings


def undocumented(result):
    """(documented count, names of plugins of DOCUMENTED_TYPES that have no documentation)."""
    contents = result["docs_blob"]["contents"]
    documented = sum(1 for item in contents if item.get("doc_strings"))
    missing = sorted("%s %s" % (item["content_type"], item["content_name"]) for item in contents
                     if item["content_type"] in DOCUMENTED_TYPES and not item.get("doc_strings"))
    return documented, missing


def main(log_path, result_path, status):
    with open(log_path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    errors, lint_warnings, other_warnings = judge_log(lines)
    if status != "0":
        errors.append("galaxy-importer exited %s" % status)
    documented, missing = 0, []
    try:
        with open(result_path, encoding="utf-8") as f:
            documented, missing = undocumented(json.load(f))
    except FileNotFoundError:
        errors.append("galaxy-importer wrote no %s" % result_path)
    errors.extend("ansible-doc gave no documentation for the %s" % name for name in missing)
    for line in errors + lint_warnings:
        print(line, file=sys.stderr)
    verdict = "FAILED: " if errors or lint_warnings else ""
    importer = next((line.split(" with ", 1)[1] for line in lines if line.startswith("Importing with ")),
                    "galaxy-importer")
    print("galaxy-import: %s%s: %d errors, %d lint warnings, ansible-doc documented %d plugins; %d other warnings "
          "(%s)" % (verdict, importer, len(errors), len(lint_warnings), documented, len(other_warnings), log_path))
    return 1 if verdict else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
