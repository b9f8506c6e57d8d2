# Copyright (c) fleetos.layering contributors
# SPDX-License-Identifier: GPL-3.0-or-later
#
# The collection as users get it: Galaxy tarball and Galaxy's import checks, docs lint,
# execution environment.
# Included by Makefile; `make test` runs `package`. No lab, no container engine.

GALAXY_DIR := $(BUILD_DIR)/galaxy
# The tarball under a version-free name, for execution-environment.yml.
GALAXY_TARBALL := $(GALAXY_DIR)/$(COLLECTION_NAMESPACE)-$(COLLECTION_NAME).tar.gz
EE_DEFINITION := $(REPO_ROOT)/execution-environment.yml
EE_CONTEXT := $(BUILD_DIR)/ee
# The example inventory, planned without contacting any host, from the installed collection.
PACKAGE_INVENTORY := inventories/example
# galaxy-importer's working directory: its log, importer_result.json, the extracted tarball
# (tmp_root_dir), and the ANSIBLE_HOME and temporary directory of its ansible-doc and
# ansible-lint passes, so that nothing is read from or written to $(HOME)/.ansible.
GALAXY_IMPORT_DIR := $(BUILD_DIR)/galaxy-import

.PHONY: package docs-lint galaxy-build galaxy-import ee-create

docs-lint: $(VENV_STAMP) collection-link ## antsibull-docs lint-collection-docs (plugins, roles, links.yml)
	$(VENV_BIN)/antsibull-docs lint-collection-docs --plugin-docs \
		--validate-collection-refs all --disallow-unknown-collection-refs $(COLLECTION_ROOT)

galaxy-build: $(VENV_STAMP) ## Build the Galaxy tarball into .build/galaxy (galaxy.yml build_ignore applies)
	@rm -rf $(GALAXY_DIR) && mkdir -p $(GALAXY_DIR)
	cd $(REPO_ROOT) && $(VENV_BIN)/ansible-galaxy collection build --output-path $(GALAXY_DIR)
	@tarballs=($(GALAXY_DIR)/$(COLLECTION_NAMESPACE)-$(COLLECTION_NAME)-*.tar.gz); \
	(( $${#tarballs[@]} == 1 )) && [[ -f "$${tarballs[0]}" ]] || \
		{ echo "galaxy-build: FAILED: expected one tarball in $(GALAXY_DIR)" >&2; exit 1; }; \
	cp "$${tarballs[0]}" $(GALAXY_TARBALL); \
	echo "galaxy-build: $${tarballs[0]} ($$(tar tzf "$${tarballs[0]}" | grep -vc '/$$') files)"

# galaxy-importer takes the versioned tarball: it reads namespace, name and version from the
# file name. mk/galaxy_import_check.py judges its log and prints the result line.
galaxy-import: galaxy-build ## galaxy-importer on the tarball, offline (ansible-doc, ansible-lint); any error or lint warning fails
	@rm -rf $(GALAXY_IMPORT_DIR) && mkdir -p $(GALAXY_IMPORT_DIR)/tmp $(GALAXY_IMPORT_DIR)/local-tmp \
		$(GALAXY_IMPORT_DIR)/ansible-home
	@tarball=$$(ls $(GALAXY_DIR)/$(COLLECTION_NAMESPACE)-$(COLLECTION_NAME)-*.tar.gz); \
	cd $(GALAXY_IMPORT_DIR); \
	unset ANSIBLE_CONFIG ANSIBLE_COLLECTIONS_PATH ANSIBLE_COLLECTIONS_PATHS; \
	rc=0; \
	GALAXY_IMPORTER_CONFIG=$(REPO_ROOT)/mk/galaxy-importer.cfg \
	GALAXY_IMPORTER_TMP_ROOT_DIR=$(GALAXY_IMPORT_DIR)/tmp \
	GALAXY_IMPORTER_ANSIBLE_LOCAL_TMP=$(GALAXY_IMPORT_DIR)/local-tmp \
	ANSIBLE_HOME=$(GALAXY_IMPORT_DIR)/ansible-home ANSIBLE_NOCOLOR=1 \
		$(VENV_BIN)/python -m galaxy_importer.main "$$tarball" > import.log 2>&1 || rc=$$?; \
	$(VENV_BIN)/python $(REPO_ROOT)/mk/galaxy_import_check.py $(GALAXY_IMPORT_DIR)/import.log \
		importer_result.json $$rc

ee-create: galaxy-build ## ansible-builder create: the execution environment's build context in .build/ee
	@rm -rf $(EE_CONTEXT)
	cd $(REPO_ROOT) && $(VENV_BIN)/ansible-builder create --file $(EE_DEFINITION) \
		--context $(EE_CONTEXT) --output-filename Containerfile
	@for f in Containerfile _build/requirements.yml _build/collections/$(notdir $(GALAXY_TARBALL)); do \
		[[ -s $(EE_CONTEXT)/$$f ]] || { echo "ee-create: FAILED: $(EE_CONTEXT)/$$f missing" >&2; exit 1; }; \
	done

# plan.json of the example inventory: every host planned, no error, the nodeName and
# selector MachineImages applied (so the inventory plugin and the manifests shipped too).
define PACKAGE_PLAN_CHECK
import json, sys
with open(sys.argv[1], encoding="utf-8") as f:
    plan = json.load(f)
hosts = plan["hosts"]
assert hosts and plan["errors"] == 0 and not plan["manifest_errors"], plan
sources = [row["source"] for row in hosts]
assert "nodeName" in sources and "selector" in sources, sources
print("package: fleetos.layering.plan from the installed tarball planned %d hosts (%s) into plan.json"
      % (len(hosts), ", ".join("%s %d" % (s, sources.count(s)) for s in sorted(set(sources)))))
endef
export PACKAGE_PLAN_CHECK

# Installs the tarball into an empty collections path (a temporary directory, removed
# at the end) and runs plan.yml from it by FQCN, with ANSIBLE_COLLECTIONS_PATH pointing
# there alone: a file the playbook needs that build_ignore drops fails here. Then asks
# ansible-builder's own introspection which Python and system packages the installed
# collection adds to an EE: none may come from it (meta/execution-environment.yml).
package: docs-lint galaxy-import ee-create ## Docs lint, tarball, Galaxy's import checks, EE context; install the tarball and run fleetos.layering.plan from it
	@tmp=$$(mktemp -d "$${TMPDIR:-/tmp}/fleetos-package.XXXXXX"); \
	trap 'rm -rf "$$tmp"' EXIT; \
	mkdir -p "$$tmp/collections" "$$tmp/run" "$$tmp/out"; \
	export ANSIBLE_COLLECTIONS_PATH="$$tmp/collections" ANSIBLE_COLLECTIONS_SCAN_SYS_PATH=false \
		ANSIBLE_NOCOLOR=1 ANSIBLE_FORCE_COLOR=0 ANSIBLE_STDOUT_CALLBACK=default; \
	unset ANSIBLE_CONFIG; \
	cd "$$tmp/run"; \
	$(VENV_BIN)/ansible-galaxy collection install --force $(GALAXY_TARBALL) -p "$$tmp/collections" \
		> "$$tmp/install.log" 2>&1 || { cat "$$tmp/install.log" >&2; exit 1; }; \
	installed=$$tmp/collections/ansible_collections/$(COLLECTION_NAMESPACE)/$(COLLECTION_NAME); \
	found=$$($(VENV_BIN)/ansible-galaxy collection list $(COLLECTION_NAMESPACE).$(COLLECTION_NAME) --format json \
		| $(VENV_BIN)/python -c 'import json, sys; print(" ".join(sorted(json.load(sys.stdin))))'); \
	[[ "$$found" == "$$tmp/collections/ansible_collections" ]] || \
		{ echo "package: FAILED: fleetos.layering found in [$$found], expected only $$tmp/collections" >&2; exit 1; }; \
	$(VENV_BIN)/python $(EE_CONTEXT)/_build/scripts/introspect.py introspect "$$tmp/collections" \
		--write-pip "$$tmp/ee-pip.txt" --write-bindep "$$tmp/ee-bindep.txt" > /dev/null; \
	if grep -Hs 'from collection $(COLLECTION_NAMESPACE).$(COLLECTION_NAME)' "$$tmp/ee-pip.txt" "$$tmp/ee-bindep.txt"; then \
		echo "package: FAILED: the collection declares EE dependencies (above); nothing controller-side uses them" >&2; \
		exit 1; \
	fi; \
	rc=0; \
	$(VENV_BIN)/ansible-playbook $(COLLECTION_NAMESPACE).$(COLLECTION_NAME).plan \
		-i "$$installed/$(PACKAGE_INVENTORY)/hosts.yml" -i "$$installed/$(PACKAGE_INVENTORY)/machine_images.yml" \
		-c local -e fleetos_plan_read_status=false -e fleetos_plan_output_dir="$$tmp/out" \
		> "$$tmp/plan.log" 2>&1 || rc=$$?; \
	if (( rc != 0 )); then \
		tail -n 40 "$$tmp/plan.log" >&2; \
		echo "package: FAILED: fleetos.layering.plan from the installed collection exited $$rc" >&2; exit 1; \
	fi; \
	$(VENV_BIN)/python -c "$$PACKAGE_PLAN_CHECK" "$$tmp/out/plan.json"
