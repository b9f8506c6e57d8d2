# Copyright (c) fleetos.layering contributors
# SPDX-License-Identifier: GPL-3.0-or-later
#
# The ansible-core matrix, included by Makefile. The venv (requirements-dev.txt) holds the core
# the lab tests run on (2.19, on $(PYTHON)); each core of CORE_MATRIX gets a venv of its own in
# .build/core/<version> with requirements-core.txt. On every core: the unit tests and
# ansible-test sanity. On the oldest and the newest: the lab tests of LAB_CORE_TESTS too (the
# venv's core runs all of them, `make test-lab`).
#
# CORE_MATRIX starts at the oldest core the execution environments of Red Hat Ansible Automation
# Platform's supported releases ship (2.16); meta/runtime.yml declares the same floor.

CORE_MATRIX := 2.16.19 2.17.14 2.18.19 2.20.10 2.21.5
# The Python of each core's venv, which is also the one ansible-test sanity runs on: $(PYTHON)
# (3.11) unless CORE_PYTHON_<version> names another. ansible-core 2.20 and 2.21 need a controller
# Python of 3.12 or later: one on 3.12, the other on 3.13, so that both are tested. pyenv's
# interpreters by path, because its shims run only the versions `pyenv global` selects.
PYENV_ROOT ?= $(HOME)/.pyenv
CORE_PYTHON_2.20.10 ?= $(PYENV_ROOT)/versions/3.12.1/bin/python3.12
CORE_PYTHON_2.21.5 ?= $(PYENV_ROOT)/versions/3.13.0/bin/python3.13
# The next ansible-core, as PyPI has it before its release (a beta or release candidate): its unit tests run too, so
# that a change of the core's internals (the strategy, the fact cache) shows before the release. Not its sanity:
# ansible-test 2.22's pylint requirements fetch a package from GitHub, which this machine does not reach. When the
# release is out, it moves into CORE_MATRIX.
CORE_NEXT := 2.22.0rc1
CORE_PYTHON_2.22.0rc1 ?= $(PYENV_ROOT)/versions/3.13.0/bin/python3.13
core_python = $(or $(CORE_PYTHON_$(1)),$(PYTHON))
CORE_OLDEST := $(firstword $(CORE_MATRIX))
CORE_NEWEST := $(lastword $(CORE_MATRIX))
CORE_DIR := $(BUILD_DIR)/core
CORE_REQUIREMENTS := $(REPO_ROOT)/requirements-core.txt
CORE_STAMPS := $(foreach version,$(CORE_MATRIX) $(CORE_NEXT),$(CORE_DIR)/$(version)/.stamp)
# What the oldest and the newest core run of the lab tests: the playbooks end to end, as the CLI
# and as an AWX job (ansible-runner) run them, on rpm-ostree and bootc hosts.
LAB_CORE_TESTS ?= tests/lab/test_plan.py tests/lab/test_rollout.py tests/lab/test_runner.py \
	tests/lab/test_bootc_rollout.py tests/lab/test_adopt.py

.PHONY: core-venvs unit-matrix sanity-matrix test-lab-oldest test-lab-newest

$(CORE_DIR)/%/.stamp: $(CORE_REQUIREMENTS)
	[[ -x $(@D)/bin/python ]] || $(call core_python,$*) -m venv $(@D)
	$(@D)/bin/python -m pip install --quiet --upgrade pip
	$(@D)/bin/python -m pip install --quiet "ansible-core==$*" -r $(CORE_REQUIREMENTS)
	touch $@

core-venvs: $(CORE_STAMPS) ## A venv per ansible-core of CORE_MATRIX in .build/core

unit-matrix: $(CORE_STAMPS) ## The unit tests on every ansible-core of CORE_MATRIX and on CORE_NEXT
	@cd $(REPO_ROOT); for version in $(CORE_MATRIX) $(CORE_NEXT); do \
		echo "unit-matrix: ansible-core $$version"; rc=0; \
		$(CORE_DIR)/$$version/bin/python -m pytest -q -p no:cacheprovider tests/unit || rc=$$?; \
		if (( rc == 5 )); then echo "unit-matrix: FAILED: no unit tests collected on $$version" >&2; exit 1; fi; \
		if (( rc != 0 )); then echo "unit-matrix: FAILED on ansible-core $$version" >&2; exit $$rc; fi; \
	done

# ansible-test sanity runs on the Python of the core's venv (--python <its version>): ansible-test
# takes its own interpreter for that version, so no python3.12 needs to be on the PATH.
sanity-matrix: $(CORE_STAMPS) collection-link ## ansible-test sanity on every ansible-core of CORE_MATRIX
	@for version in $(CORE_MATRIX); do \
		echo "sanity-matrix: ansible-core $$version"; \
		$(REPO_ROOT)/mk/sanity-bootstrap.sh $(CORE_DIR)/$$version $(ANSIBLE_TEST_CACHE) $(REPO_ROOT)/.ci/get_pip.py; \
		log=$(BUILD_DIR)/sanity-$$version.log; \
		python=$$($(CORE_DIR)/$$version/bin/python -c 'import sys; print("%d.%d" % sys.version_info[:2])'); \
		( cd $(COLLECTION_ROOT) && $(CORE_DIR)/$$version/bin/ansible-test sanity --python $$python \
			--requirements --color no ) 2>&1 | tee $$log; \
		if grep -F 'Skipping sanity test' $$log; then \
			echo "sanity-matrix: FAILED: ansible-test $$version skipped a test (see above)" >&2; exit 1; fi; \
	done

# Same lab, same rules as test-lab (a fresh lab, taken down at the end), on the oldest core and on
# the newest.
test-lab-oldest: deps $(CORE_DIR)/$(CORE_OLDEST)/.stamp ## The lab tests of LAB_CORE_TESTS on the oldest ansible-core
	$(call run_lab_tests,$(LAB_CORE_TESTS))

test-lab-oldest: LAB_PYTHON = $(CORE_DIR)/$(CORE_OLDEST)/bin/python

test-lab-newest: deps $(CORE_DIR)/$(CORE_NEWEST)/.stamp ## The lab tests of LAB_CORE_TESTS on the newest ansible-core
	$(call run_lab_tests,$(LAB_CORE_TESTS))

test-lab-newest: LAB_PYTHON = $(CORE_DIR)/$(CORE_NEWEST)/bin/python

# The rollout tests once more on the newest core, on ansible-core's own free strategy instead of the collection's
# (fleetos_rollout_strategy: strategy plugins outside ansible.builtin are deprecated from ansible-core 2.19 on).
LAB_FREE_TESTS ?= tests/lab/test_rollout.py

.PHONY: test-lab-free

test-lab-free: deps $(CORE_DIR)/$(CORE_NEWEST)/.stamp ## The rollout lab tests on the newest ansible-core with its free strategy
	$(call run_lab_tests,$(LAB_FREE_TESTS))

test-lab-free: LAB_PYTHON = $(CORE_DIR)/$(CORE_NEWEST)/bin/python
test-lab-free: export FLEETOS_LAB_ROLLOUT_STRATEGY = free
