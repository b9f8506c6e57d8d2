# Copyright (c) fleetos.layering contributors
# SPDX-License-Identifier: GPL-3.0-or-later
#
# The lab: a real image-mode fleet on this machine (lab/README.md). Included by Makefile.

FLEETLAB := $(REPO_ROOT)/lab/fleetlab
LAB_NODES ?= 3
LAB_INVENTORY := $(REPO_ROOT)/inventories/lab/hosts.yml

RUNTIME_COLLECTIONS := $(REPO_ROOT)/.build/runtime

.PHONY: lab-up lab-down lab-status demo test-lab collection-runtime

lab-up: deps venv ## Bring the lab fleet up (LAB_NODES, default 3)
	$(FLEETLAB) up --nodes $(LAB_NODES)

lab-down: ## Stop the lab and remove all its state
	$(FLEETLAB) down

lab-status: ## The lab fleet's status table
	$(FLEETLAB) status

collection-runtime: ## Link the working tree where Ansible finds collections (.build/runtime)
	@mkdir -p $(RUNTIME_COLLECTIONS)/ansible_collections/fleetos
	@[[ -L $(RUNTIME_COLLECTIONS)/ansible_collections/fleetos/layering ]] || \
		ln -s $(REPO_ROOT) $(RUNTIME_COLLECTIONS)/ansible_collections/fleetos/layering

DEMO_NODES := $(shell seq -s, -f 'node%02g' 1 $(LAB_NODES))
DEMO_REPORT := $(REPO_ROOT)/.build/demo-report

demo: lab-up collection-runtime ## On a 3-node lab fleet: build image 1.1, roll it out, show the report and status
	@$(FLEETLAB) image list | grep '^fleetos/lab-os:1.1 ' >/dev/null || \
		$(FLEETLAB) image build fleetos/lab-os:1.1 --from fleetos/lab-os:1.0 --label fleetos.io/demo=true
	cd $(REPO_ROOT) && ANSIBLE_NOCOLOR=1 ANSIBLE_COLLECTIONS_PATH=$(RUNTIME_COLLECTIONS) \
		$(VENV_BIN)/ansible-playbook -i $(LAB_INVENTORY) playbooks/rollout.yml --forks 10 \
		--limit $(DEMO_NODES),localhost \
		-e 'fleetos_rollout_image={{ fleetos_lab_registry }}/fleetos/lab-os:1.1' \
		-e fleetos_report_dir=$(DEMO_REPORT)
	@cat $(DEMO_REPORT)/rollout-report.md
	@echo "demo: report in $(DEMO_REPORT) (rollout-report.json, rollout-report.md, rollout-timeline.svg)"
	cd $(REPO_ROOT) && ANSIBLE_NOCOLOR=1 ANSIBLE_COLLECTIONS_PATH=$(RUNTIME_COLLECTIONS) \
		$(VENV_BIN)/ansible-playbook -i $(LAB_INVENTORY) playbooks/status.yml --limit $(DEMO_NODES),localhost \
		-e fleetos_status_json=$(DEMO_REPORT)/fleet-status.json
	$(FLEETLAB) status

# The lab tests start a fresh lab themselves (tests/lab/conftest.py; a lab left by
# `make demo` is taken down first, so every run starts from the same fleet) and take
# it down at the end. Zero collected tests is a failure, never a silent pass.
test-lab: deps venv ## Lab tests: the fleet, the stand-in's conformance, modules and playbooks on the lab
	$(FLEETLAB) down
	@cd $(REPO_ROOT); rc=0; \
	FLEETLAB_DOWN_TEST=1 $(VENV_BIN)/python -m pytest -p no:cacheprovider --durations=25 tests/lab || rc=$$?; \
	if (( rc == 5 )); then \
		echo "test-lab: FAILED: no lab tests collected under tests/lab" >&2; \
		exit 1; \
	fi; \
	exit $$rc
