# One entry point for a fresh machine. `make setup` is idempotent: it installs only what is missing.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
export APPRAFTER_TOOLS_DIR ?= $(HOME)/.cache/apprafter/tools

.PHONY: setup tools venv example dist release test lint bench images chart publish

setup: tools venv

tools:
	tools/setup.sh

venv: $(VENV)/.installed

# Quiet on stdout: `make example`'s stdout is the rendered objects alone, also on a fresh checkout.
$(VENV)/.installed: pyproject.toml
	@echo "venv: python3 -m venv $(VENV); pip install -e '.[all,dev]'" >&2
	@python3 -m venv $(VENV) >&2
	@$(PY) -m pip install --quiet --upgrade pip >&2
	@$(PY) -m pip install --quiet -e '.[all,dev]' >&2
	@touch $@

# The main job on the bundled example: render the parser app's prod environment to stdout.
# Rendering needs only cue, so this installs just that (the test suite installs the rest).
example: venv
	@tools/setup.sh cue >&2
	@$(VENV)/bin/apprafter doctor >&2
	@$(VENV)/bin/apprafter render examples/parser --env prod --mode manifests

# The wheel an app developer installs (`pip install dist/apprafter_render-<version>-py3-none-any.whl`: the base install;
# extras as `...whl[cluster]`), stamped with the last commit's time so the same commit gives the same bytes. Built by
# DIST_PYTHON's pip alone (hatchling in pip's isolated build environment): no venv, no tools, so a fresh checkout with
# Python >= 3.11 builds it in seconds (docs/install.md "The CLI").
DIST_PYTHON ?= python3
dist:
	@rm -rf dist
	@SOURCE_DATE_EPOCH=$$(git log -1 --format=%ct 2>/dev/null || echo 315532800) \
		$(DIST_PYTHON) -m pip wheel --quiet --no-deps --wheel-dir dist . >&2
	@ls dist/*.whl

# The release (docs/development.md#release): on a clean tree whose every version agrees, tag HEAD v<version>
# (scripts/release.py, python3 alone), then the wheel of that commit. The tag is what the docs pin: the action
# (uses: ...@v<version>), pre-commit (rev:) and pip (git+...@v<version>).
release:
	@$(DIST_PYTHON) scripts/release.py
	@$(MAKE) --no-print-directory dist

# pytest's exit 5 ("no tests ran") is a failure here, not a pass. The suite runs on TEST_WORKERS pytest-xdist
# workers, each with beds of its own, the node tier on one of them, the longest units first (tests/parallel.py,
# docs/test-bed.md); TEST_WORKERS=0 runs it in this process, serially. --durations: the slowest tests, to keep the
# budget (docs/development.md "The suite's time budget").
TEST_WORKERS ?= 3
test: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(VENV)/bin/pytest -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder --durations=30; rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "pytest ran no tests" >&2; exit 1; fi; exit $$rc

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

# OCI images (tools/images.sh): buildah into podman's storage as localhost/<name>:<version> (argocd-cue-cmp,
# apprafter-operator), on the local Debian base the set-up builds. `make chart` packages every Helm chart of
# deploy/charts/ reproducibly into build/charts/. `make publish REGISTRY=ghcr.io/apprafter COSIGN_KEY=cosign.key`
# pushes both images and the charts (REGISTRY/charts/), signs and verifies each (COSIGN_PASSWORD in the
# environment; PLAIN_HTTP=1 for a registry without TLS).
images: venv
	@PYTHON=$(PY) tools/images.sh build

chart: venv
	@for chart in deploy/charts/*/; do $(PY) scripts/package_chart.py $$chart build/charts || exit 2; done

publish: venv
	@test -n "$(REGISTRY)" || { echo "make publish: set REGISTRY, e.g. REGISTRY=ghcr.io/apprafter" >&2; exit 1; }
	@PYTHON=$(PY) tools/images.sh publish $(REGISTRY)
