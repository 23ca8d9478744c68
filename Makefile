# pytato_like — build / test entry points.
#   make demo   set everything up, run the distributed solver demo
#   make test   set everything up, type-check (mypy), run the test suite,
#               run the docs' code blocks on Python 3.10, build the docs (-W)
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

VENV   ?= .venv
override VENV := $(abspath $(VENV))
PYTHON := $(VENV)/bin/python
# mpiexec (MPICH from PyPI) lives in the venv: put it first on PATH for
# everything run from here (tests launch `mpiexec` by name).
export PATH := $(VENV)/bin:$(PATH)
export VIRTUAL_ENV := $(VENV)
export VENV

PYTEST_ARGS ?=
SPHINX := $(PYTHON) -m sphinx -W -b html doc doc/_build/html -q

.PHONY: help bootstrap check-env demo test pytest test-downstream docs bench clean distclean

help:
	@echo "make demo       set up and run the distributed solver demo (examples/demo.py)"
	@echo "make test       set up, type-check (mypy), run the test suite, build the docs with -W"
	@echo "make test-downstream  set up, run arraycontext's suite (pytato contexts) on pytato_like"
	@echo "make docs       set up and build the docs (doc/_build/html)"
	@echo "make bench      set up and run the benchmarks (python -m bench)"
	@echo "make bootstrap  only set up (apt packages, .venv, pip install)"
	@echo "make check-env  smoke-check OpenCL/PoCL, loopy, MPI, graphviz"
	@echo "make clean      remove build/test/doc artifacts (keeps .venv)"
	@echo "make distclean  clean, and remove .venv"

bootstrap:
	@bash scripts/bootstrap.sh

check-env: bootstrap
	$(PYTHON) scripts/check_env.py

demo: bootstrap
	$(PYTHON) examples/demo.py

# mypy (setup.cfg [mypy]) and pytest's exit status (including 5, "no tests
# collected") fail the target.
test: bootstrap
	$(PYTHON) -m mypy pytato_like
	$(PYTHON) -m pytest -q $(PYTEST_ARGS) tests
	bash scripts/test_lowest_python.sh
	bash scripts/test_downstream.sh
	$(SPHINX)
	@echo "docs: built doc/_build/html (sphinx -W: no warnings)"

pytest: bootstrap
	$(PYTHON) -m pytest -q $(PYTEST_ARGS) tests

# arraycontext's own tests of its pytato array contexts, with pytato_like
# standing in for pytato (scripts/test_downstream.sh)
test-downstream: bootstrap
	bash scripts/test_downstream.sh

docs: bootstrap
	$(SPHINX)
	@echo "docs: built doc/_build/html"

bench: bootstrap
	$(PYTHON) -m bench

clean:
	rm -rf doc/_build build dist .pytest_cache .hypothesis *.egg-info
	find . -path ./.venv -prune -o -name __pycache__ -type d -print0 \
		| xargs -0 rm -rf

distclean: clean
	rm -rf $(VENV)
