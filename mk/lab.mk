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
		--limit $(DEMO_NODES) \
		-e 'fleetos_rollout_image={{ fleetos_lab_registry }}/fleetos/lab-os:1.1' \
		-e fleetos_report_dir=$(DEMO_REPORT)
	@cat $(DEMO_REPORT)/rollout-report.md
	@echo "demo: report in $(DEMO_REPORT) (rollout-report.json, rollout-report.md, rollout-timeline.svg)"
	cd $(REPO_ROOT) && ANSIBLE_NOCOLOR=1 ANSIBLE_COLLECTIONS_PATH=$(RUNTIME_COLLECTIONS) \
		$(VENV_BIN)/ansible-playbook -i $(LAB_INVENTORY) playbooks/status.yml --limit $(DEMO_NODES) \
		-e fleetos_status_json=$(DEMO_REPORT)/fleet-status.json
	$(FLEETLAB) status

# The lab tests start a fresh lab themselves (tests/lab/conftest.py; a lab left by
# `make demo` is taken down first, so every run starts from the same fleet) and take
# it down at the end. Zero collected tests is a failure, never a silent pass.
# LAB_PYTHON picks the ansible-core (the venv's by default; mk/matrix.mk's test-lab-oldest and
# test-lab-newest give the oldest and the newest core's), LAB_TESTS the files.
LAB_PYTHON ?= $(VENV_BIN)/python
LAB_TESTS ?= tests/lab
define run_lab_tests
	$(FLEETLAB) down
	@cd $(REPO_ROOT); rc=0; \
	echo "$@: $$($(LAB_PYTHON) -c 'import ansible; print("ansible-core", ansible.__version__)'), lab $${FLEETLAB_NETNS:-fleetlab}: $(1)"; \
	FLEETLAB_DOWN_TEST=1 $(LAB_PYTHON) -m pytest -p no:cacheprovider --durations=15 $(1) || rc=$$?; \
	if (( rc == 5 )); then \
		echo "$@: FAILED: no lab tests collected in $(1)" >&2; \
		exit 1; \
	fi; \
	exit $$rc
endef

test-lab: deps venv ## Lab tests: the fleet, the stand-in's conformance, modules and playbooks on the lab
	$(call run_lab_tests,$(LAB_TESTS))

# The lab tests in three parts, each on a lab of its own, to run at once (`make -j3 test-lab-a
# test-lab-b test-lab-c`; the lab's tests wait on sshd, reboots and the registry most of the time):
# test-lab-a on the default lab, test-lab-b on a second one (LAB2_ENV) and then, on that same lab,
# the newest ansible-core's tests, test-lab-c on a third (LAB3_ENV) and then, on that same lab, the
# oldest ansible-core's tests (mk/matrix.mk). Every lab
# test file not named in LAB_TESTS_B or LAB_TESTS_C is in test-lab-a, so a new file runs without
# being listed. The molecule scenarios read inventories/lab: they stay on the default lab.
# `make test` runs the three at once, beside the checks (Makefile).
# Balanced on CI's durations (stop 21: A 36 min, B 27, C 19 + the oldest core's 12): about 31 min each.
LAB_TESTS_B := tests/lab/test_resume.py tests/lab/test_rollout.py tests/lab/test_bootc_rollout.py \
	tests/lab/test_plan.py tests/lab/test_runner.py tests/lab/test_layering_rollout.py
LAB_TESTS_C := tests/lab/test_rollout_failures.py tests/lab/test_adopt.py tests/lab/test_transports.py \
	tests/lab/test_windows.py
LAB_TESTS_A = $(filter-out $(LAB_TESTS_B) $(LAB_TESTS_C),$(sort $(patsubst $(REPO_ROOT)/%,%,$(wildcard $(REPO_ROOT)/tests/lab/test_*.py))))
LAB2_ENV := FLEETLAB_NETNS=fleetlab2 FLEETLAB_SLICE=1 FLEETLAB_STATE=$(BUILD_DIR)/lab2/state FLEETLAB_INVENTORY=$(BUILD_DIR)/lab2/inventory
LAB3_ENV := FLEETLAB_NETNS=fleetlabc FLEETLAB_SLICE=2 FLEETLAB_STATE=$(BUILD_DIR)/lab3/state FLEETLAB_INVENTORY=$(BUILD_DIR)/lab3/inventory

.PHONY: test-lab-a test-lab-b test-lab-c

test-lab-a: deps venv ## The lab tests not in LAB_TESTS_B or LAB_TESTS_C, on the default lab, then test-lab-free on it
	$(call run_lab_tests,$(LAB_TESTS_A))
	$(MAKE) --no-print-directory test-lab-free

test-lab-b: deps venv ## The lab tests of LAB_TESTS_B on a second lab, then test-lab-newest on it
	env $(LAB2_ENV) $(MAKE) --no-print-directory test-lab LAB_TESTS="$(LAB_TESTS_B)"
	env $(LAB2_ENV) $(MAKE) --no-print-directory test-lab-newest

test-lab-c: deps venv ## The lab tests of LAB_TESTS_C on a third lab, then test-lab-oldest on it
	env $(LAB3_ENV) $(MAKE) --no-print-directory test-lab LAB_TESTS="$(LAB_TESTS_C)"
	env $(LAB3_ENV) $(MAKE) --no-print-directory test-lab-oldest
