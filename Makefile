# kbctl: two commands set everything up on a fresh machine.
#   make demo   install, ingest sample_corpus/ into the embedded store, search it with the real model
#   make test   install with test extras, lint (make lint), run the whole suite
#   make test-dsn  the database tests again, against a separate PostgreSQL reached over TCP by DSN
#   make lint   ruff check and format check, mypy, and the layer contracts of pyproject.toml (lint-imports)
#   make fmt    ruff format, then ruff check --fix (what the linter can mend by itself)
#   make unit   the unit tests that need no database (tests/unit, -m "not db"): a quick pass
#   make bench  install with bench extras, run the benchmarks (figures go to docs/benchmarks.md)
#   make bench-smoke  every benchmark part at tiny sizes in a fresh home (no evaldata); CI runs it
#   make clean  remove the venv, the demo home and the tool caches

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
KBCTL  := $(BIN)/kbctl
DEMO_HOME ?= $(CURDIR)/.kbctl/demo
# torch is pinned to the CPU build on this machine's disk; a plain `torch` would pull CUDA (GBs).
TORCH  ?= torch==2.13.0
# The suite runs on this many pytest-xdist workers, each with its own embedded PostgreSQL; whole test
# files go to one worker (module fixtures stay shared). PYTEST_WORKERS=0 runs it in one process.
PYTEST_WORKERS ?= 2

.PHONY: install demo lint fmt unit test test-dsn bench bench-install bench-smoke clean

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check $(TORCH)
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[test]'
	touch $@

demo: install
	@echo "== ingesting sample_corpus/ into $(DEMO_HOME) (embedded PostgreSQL + pgvector, all-MiniLM-L6-v2)"
	KBCTL_HOME=$(DEMO_HOME) $(KBCTL) ingest sample_corpus/support/billing   -n billing_kb
	KBCTL_HOME=$(DEMO_HOME) $(KBCTL) ingest sample_corpus/support/technical -n technical_kb
	KBCTL_HOME=$(DEMO_HOME) $(KBCTL) ingest sample_corpus/support/account   -n account_kb
	KBCTL_HOME=$(DEMO_HOME) $(KBCTL) ingest sample_corpus/engineering/handbook -n handbook_kb
	KBCTL_HOME=$(DEMO_HOME) $(KBCTL) ingest sample_corpus/engineering/releases -n releases_kb
	KBCTL_HOME=$(DEMO_HOME) $(KBCTL) namespaces
	@echo "== search: how long do refunds take (billing_kb)"
	KBCTL_HOME=$(DEMO_HOME) $(KBCTL) search "how long do refunds take" -n billing_kb -k 3
	@echo "== search: LMN-4012 (technical_kb, exact error code)"
	KBCTL_HOME=$(DEMO_HOME) $(KBCTL) search "LMN-4012" -n technical_kb -k 3
	@echo "== search: I forgot my password and cannot get in (account_kb)"
	KBCTL_HOME=$(DEMO_HOME) $(KBCTL) search "I forgot my password and cannot get in" -n account_kb -k 3
	KBCTL_HOME=$(DEMO_HOME) $(KBCTL) db stop

lint: install
	$(BIN)/ruff check kbctl tests bench
	$(BIN)/ruff format --check kbctl tests bench
	$(BIN)/mypy
	$(BIN)/lint-imports

fmt: install
	$(BIN)/ruff format kbctl tests bench
	$(BIN)/ruff check --fix kbctl tests bench

unit: install
	$(BIN)/python -m pytest -q -m "not db" tests/unit

test: install lint
	$(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --dist loadfile --durations=20

# A PostgreSQL of its own (the wheel's binaries, its own data directory, a free port on 127.0.0.1),
# a login that is not a superuser; stopped and deleted on exit, whatever the tests did.
test-dsn: install
	@dir=$$(mktemp -d /tmp/kbctl-dsn.XXXXXX); \
	trap '$(BIN)/python tests/pgserver_tcp.py stop "$$dir"; rm -rf "$$dir"' EXIT; \
	dsn=$$($(BIN)/python -W ignore tests/pgserver_tcp.py start "$$dir") || exit 1; \
	echo "== database tests against $${dsn%%:*}://…@$${dsn#*@}"; \
	KBCTL_TEST_DSN="$$dsn" $(BIN)/python -m pytest -q -p no:randomly tests/db tests/server


bench-install: $(VENV)/.bench-installed

$(VENV)/.bench-installed: $(VENV)/.installed
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[test,bench]'
	touch $@

bench: bench-install
	$(BIN)/python bench/run.py

bench-smoke: bench-install
	$(BIN)/python bench/run.py --smoke

clean:
	rm -rf $(VENV) .kbctl .pytest_cache .ruff_cache .mypy_cache .hypothesis .import_linter_cache
	find . -name __pycache__ -type d -not -path './$(VENV)/*' -prune -exec rm -rf {} +
