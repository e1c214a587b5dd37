# The two commands of the quick start, and a few more. Each sets up what it needs first, once: a virtual
# environment in .venv with the pinned requirements, reinstalled only when a requirements file changes.
#
#   make run     set up, then start the app (http://localhost:8501)
#   make test    set up (with the development tools), then run the test suite
#   make test-long  the long tests (minutes each: many rounds or runs), which `make test` leaves out
#   make lint    ruff, as CI runs it
#   make phoenix  Arize Phoenix (an OTLP receiver the trace tests start) in its own environment, .phoenix-venv
#   make clean   remove .venv (your runs in .planrag/ are kept)

# Python: $(PYTHON) if given (make run PYTHON=/path/to/python3.12), else the first of python3.13, python3.12,
# python3.11 and python3 that is 3.11 or newer. Looked for only when .venv is made.
PYTHON ?=
VENV := .venv
BIN := $(VENV)/bin

.PHONY: run test test-long lint setup setup-dev bytecode phoenix clean

run: setup
	$(BIN)/streamlit run app.py

# TEST_JOBS: the suite on that many processes (pytest-xdist; the Neo4j tests on one of them, the longest tests first:
# tests/conftest.py); 0: in this process. Three by default: many tests wait (a server starting, a store away, a
# model's delay), so a third process fills two cores. Fresh-clone .ci/run of one head on 2 cores, one after the
# other: make test 8 min 56 s on 2 processes, 8 min 30 s on 3 (on 4, the machine was CPU-bound at load 13: no faster).
TEST_JOBS ?= 3
# The long tests at once, one per process: one of them (a 5-minute outage of the store) mostly waits, the others are
# a browser beside a CPU hog and fresh servers opened by 8 sessions, so together they take about as long as the
# longest, not the sum.
LONG_JOBS ?= 3

test: setup-dev
	$(BIN)/python -m pytest -n $(TEST_JOBS) $(PYTEST_ARGS)

test-long: setup-dev
	$(BIN)/python -m pytest -m long -n $(LONG_JOBS) $(PYTEST_ARGS)

lint: setup-dev
	$(BIN)/ruff check .

setup: $(VENV)/.runtime bytecode
setup-dev: $(VENV)/.dev bytecode

# The project's own modules compiled, as the packages are (below): where PYTHONDONTWRITEBYTECODE is set, Python
# never writes their .pyc files, so every process (an app, a worker, a command, a test's server) compiled the ones
# it imports again (the app's first page: 78 modules, 0.17 s of a fresh server's first look). Only files changed
# since are compiled again; a file edited later is read from source until then, as always.
bytecode: | $(VENV)/bin/python
	@$(BIN)/python -m compileall -q -j 0 app.py core ui sims pages tests bench >/dev/null

$(VENV)/bin/python:
	@python="$(PYTHON)"; new_enough="import sys; sys.exit(sys.version_info < (3, 11))"; \
	if [ -z "$$python" ]; then for p in python3.13 python3.12 python3.11 python3; do \
		if $$p -c "$$new_enough" 2>/dev/null; then python=$$p; break; fi; done; fi; \
	if [ -z "$$python" ] || ! $$python -c "$$new_enough" 2>/dev/null; then \
		echo "error: PlanRAG Workbench needs Python 3.11 or newer; found: $$($${python:-python3} --version 2>&1)."; \
		echo "  Install one, then: make $(or $(MAKECMDGOALS),run) PYTHON=/path/to/python3.11"; \
		exit 1; fi; \
	echo "$$python -m venv $(VENV)"; $$python -m venv $(VENV)

# The requirements are installed by uv (pinned here; pip installs it first), about ten times quicker than pip on
# two cores (11 s against 150 s for requirements-dev.txt from an empty cache); the same pinned versions either way.
# uv reads no pip configuration: a private index is given by UV_INDEX_URL. INSTALLER=pip: install with pip instead.
# --compile-bytecode, as pip does by default: where PYTHONDONTWRITEBYTECODE is set (this project's CI machines set
# it), a package installed without its .pyc files is compiled again by every process that imports it (a worker's or
# an app's imports took 6 s of CPU instead of 2.6).
UV_VERSION := 0.13.9
INSTALLER ?= uv
ifeq ($(INSTALLER),pip)
install = $(1)/bin/python -m pip install -q --disable-pip-version-check -r $(2)
else
install = $(BIN)/uv pip install -q --compile-bytecode --python $(1)/bin/python -r $(2)
endif

$(BIN)/uv: | $(VENV)/bin/python
	$(BIN)/python -m pip install -q --disable-pip-version-check uv==$(UV_VERSION)

$(VENV)/.runtime: requirements.txt | $(VENV)/bin/python $(BIN)/uv
	$(call install,$(VENV),requirements.txt)
	@touch $@

$(VENV)/.dev: requirements.txt requirements-dev.txt | $(VENV)/bin/python $(BIN)/uv
	$(call install,$(VENV),requirements-dev.txt)
	@touch $@ $(VENV)/.runtime

phoenix: .phoenix-venv/.installed

.phoenix-venv/.installed: tests/phoenix-requirements.txt | $(VENV)/bin/python $(BIN)/uv
	$(BIN)/python -m venv .phoenix-venv
	$(call install,.phoenix-venv,tests/phoenix-requirements.txt)
	@touch $@

clean:
	rm -rf $(VENV)
