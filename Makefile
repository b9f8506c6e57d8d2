# Copyright (c) fleetos.layering contributors
# SPDX-License-Identifier: GPL-3.0-or-later
#
# Developer entry points. `make help` lists the targets.

SHELL := /bin/bash
.SHELLFLAGS := -o errexit -o nounset -o pipefail -c
.DEFAULT_GOAL := help
.DELETE_ON_ERROR:

REPO_ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))
PYTHON ?= python3
VENV := $(REPO_ROOT)/.venv
VENV_BIN := $(VENV)/bin
VENV_STAMP := $(VENV)/.stamp
REQUIREMENTS := $(REPO_ROOT)/requirements-dev.txt

# ansible-test needs the collection at ansible_collections/<namespace>/<name>;
# the repository root stays as it is and a copy is kept in sync here.
COLLECTION_NAMESPACE := fleetos
COLLECTION_NAME := layering
BUILD_DIR := $(REPO_ROOT)/.build
COLLECTION_ROOT := $(BUILD_DIR)/ansible_collections/$(COLLECTION_NAMESPACE)/$(COLLECTION_NAME)
# Top-level entries that are never part of the collection copy.
COLLECTION_EXCLUDE := .git .venv .build .lab lab bench tests/lab
empty :=
space := $(empty) $(empty)
COLLECTION_EXCLUDE_RE := ^($(subst $(space),|,$(subst .,\.,$(COLLECTION_EXCLUDE))))(/|$$)

SANITY_PYTHON := 3.11
# ansible-test bootstraps pip into each sanity venv with a get-pip script it would
# download from its own CI host; this machine reaches only PyPI and Debian, so
# .ci/get_pip.py and the pip wheel from PyPI take its place in ansible-test's cache
# (see sanity-bootstrap).
ANSIBLE_TEST_CACHE := $(HOME)/.ansible/test/cache

# Debian packages the lab and the tooling need.
DEB_PACKAGES := ostree gir1.2-ostree-1.0 python3 python3-gi skopeo umoci \
	docker-registry apache2-utils openssh-server openssh-client iproute2 \
	netcat-openbsd socat openssl util-linux procps e2fsprogs git make rsync shellcheck gnupg iptables \
	sudo

# Tools from the venv come first (once, also in recursive makes).
ifeq ($(filter $(VENV_BIN),$(subst :, ,$(PATH))),)
export PATH := $(VENV_BIN):$(PATH)
endif

.PHONY: help deps venv collection-link sanity-bootstrap unit sanity lint changelog-lint checks checks-niced test clean

help: ## List the targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | sort | \
		awk 'BEGIN {FS = ":.*## "}; {printf "  %-18s %s\n", $$1, $$2}'

deps: ## Install missing Debian packages (apt-get, only when something is missing)
	@missing=(); \
	for pkg in $(DEB_PACKAGES); do \
		status=$$(dpkg-query -W -f='$${Status}' "$$pkg" 2>/dev/null || true); \
		[[ "$$status" == "install ok installed" ]] || missing+=("$$pkg"); \
	done; \
	if (( $${#missing[@]} == 0 )); then \
		echo "deps: all $(words $(DEB_PACKAGES)) Debian packages present"; \
	else \
		echo "deps: installing $${missing[*]}"; \
		apt-get update; \
		DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$${missing[@]}"; \
	fi

venv: $(VENV_STAMP) ## Create .venv with the pinned development tools

$(VENV_STAMP): $(REQUIREMENTS)
	[[ -x $(VENV_BIN)/python ]] || $(PYTHON) -m venv $(VENV)
	$(VENV_BIN)/python -m pip install --quiet --upgrade pip
	$(VENV_BIN)/python -m pip install --quiet -r $(REQUIREMENTS)
	touch $@

# The copy holds what git lists (tracked plus untracked-not-ignored files) minus
# COLLECTION_EXCLUDE. Symlinks to the repository's directories do not work:
# ansible-test lists content with git (or os.walk) and neither descends into a
# directory symlink. The copy gets its own empty .git, because otherwise
# ansible-test finds the repository's .git, which ignores .build, and sees no files.
collection-link: ## Sync the collection into .build/ansible_collections/fleetos/layering
	@mkdir -p $(COLLECTION_ROOT)
	@cd $(REPO_ROOT) && git ls-files -z --cached --others --exclude-standard \
		| grep -zEv '$(COLLECTION_EXCLUDE_RE)' | sort -zu > $(BUILD_DIR)/files.want
	@cd $(REPO_ROOT) && rsync -a --from0 --files-from=$(BUILD_DIR)/files.want \
		--ignore-missing-args ./ $(COLLECTION_ROOT)/
	@cd $(COLLECTION_ROOT) && find . -path ./.git -prune -o -path ./tests/output -prune \
		-o \( -type f -o -type l \) -printf '%P\0' | sort -zu > $(BUILD_DIR)/files.have
	@cd $(COLLECTION_ROOT) && comm -z -23 $(BUILD_DIR)/files.have $(BUILD_DIR)/files.want \
		| xargs -0r rm -f --
	@cd $(COLLECTION_ROOT) && find . -mindepth 1 -path ./.git -prune -o -path ./tests/output -prune \
		-o -type d -empty -print0 | xargs -0r rmdir -p --ignore-fail-on-non-empty --
	@[[ -d $(COLLECTION_ROOT)/.git ]] || git -C $(COLLECTION_ROOT) init --quiet
	@echo "collection-link: $$(tr -cd '\0' < $(BUILD_DIR)/files.want | wc -c) files in $(COLLECTION_ROOT)"

unit: $(VENV_STAMP) ## Unit tests (pytest tests/unit); zero collected tests is a failure
	@cd $(REPO_ROOT); rc=0; \
	$(VENV_BIN)/python -m pytest tests/unit || rc=$$?; \
	if (( rc == 5 )); then \
		echo "unit: FAILED: no unit tests collected under tests/unit" >&2; \
		exit 1; \
	fi; \
	exit $$rc

sanity-bootstrap: $(VENV_STAMP) ## Make sure ansible-test can bootstrap pip into its sanity venvs
	@$(REPO_ROOT)/mk/sanity-bootstrap.sh $(VENV) $(ANSIBLE_TEST_CACHE) $(REPO_ROOT)/.ci/get_pip.py

sanity: $(VENV_STAMP) collection-link sanity-bootstrap ## ansible-test sanity on the collection copy
	@cd $(COLLECTION_ROOT) && \
		$(VENV_BIN)/ansible-test sanity --python $(SANITY_PYTHON) --requirements --color no \
		2>&1 | tee $(BUILD_DIR)/sanity.log
	@if grep -F 'Skipping sanity test' $(BUILD_DIR)/sanity.log; then \
		echo "sanity: FAILED: ansible-test skipped a test (see above)" >&2; exit 1; fi

lint: $(VENV_STAMP) ## ansible-lint (production profile) from the repository root
	cd $(REPO_ROOT) && $(VENV_BIN)/ansible-lint

changelog-lint: $(VENV_STAMP) ## antsibull-changelog lint on changelogs/
	cd $(REPO_ROOT) && $(VENV_BIN)/antsibull-changelog lint

# The checks beside the lab tests, in three parts on three labs of their own (mk/lab.mk): the
# lab's tests wait on sshd, reboots and the registry most of the time, the checks want the CPU.
# The checks run at the lowest CPU priority (nice 19), so the lab's nodes and controllers,
# whose timeouts are real, get the CPU first. Each part's output is printed when it ends.
checks: ## unit and sanity on every ansible-core (mk/matrix.mk), lint, changelog-lint, package (mk/package.mk)
	$(MAKE) --no-print-directory -C $(REPO_ROOT) unit unit-matrix sanity sanity-matrix lint changelog-lint package

# -j1: one check after another, whatever make test's -j; a job slot of its own, not the labs'.
checks-niced: ## checks at the lowest CPU priority (nice 19), as make test runs them beside the lab tests
	nice -n 19 $(MAKE) --no-print-directory -C $(REPO_ROOT) -j1 checks

test: ## deps and the venvs, then at once: checks-niced, test-lab-a (then test-lab-free), test-lab-b (then test-lab-newest), test-lab-c (then test-lab-oldest)
	$(MAKE) --no-print-directory -C $(REPO_ROOT) deps venv core-venvs
	$(MAKE) --no-print-directory -C $(REPO_ROOT) -j4 --output-sync=target checks-niced test-lab-a test-lab-b test-lab-c

clean: ## Remove the venv, the collection copy and test output
	rm -rf $(VENV) $(BUILD_DIR) $(REPO_ROOT)/tests/output $(REPO_ROOT)/.pytest_cache
	find $(REPO_ROOT) -path $(REPO_ROOT)/.git -prune -o -path $(REPO_ROOT)/lab -prune \
		-o -type d -name __pycache__ -prune -exec rm -rf {} +

# The collection as users get it: docs lint, Galaxy tarball, EE context, install + FQCN run.
include $(REPO_ROOT)/mk/package.mk

# The ansible-core matrix: unit and sanity on every supported core, lab tests on the oldest and the newest.
include $(REPO_ROOT)/mk/matrix.mk

# Lab targets (test-lab, demo, lab-*) belong to the lab; the file may not exist yet.
-include $(REPO_ROOT)/mk/lab.mk
