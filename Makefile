# The two commands of the README: `make run` and `make test`. `make check` runs every check.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# Extra pytest arguments, e.g. `make test PYTEST_ARGS="-m 'not slow'"`.
PYTEST_ARGS ?=

.PHONY: run test check fast format lint types contracts venv clean bench chaos

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,spark]'
	touch $(STAMP)

venv: $(STAMP)

## Start a one-node cluster with embedded defaults on localhost:9092 (data in ./data/node-1).
run: $(STAMP)
	$(BIN)/knode start --id 1

## Set up and run the whole test suite.
test: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

## A quick subset for development: no real clusters, no Spark, nothing slow.
fast: $(STAMP)
	$(BIN)/python -m pytest -m "not slow and not cluster and not spark" $(PYTEST_ARGS)

format: $(STAMP)
	$(BIN)/ruff format trafka tests bench

lint: $(STAMP)
	$(BIN)/ruff format --check trafka tests bench
	$(BIN)/ruff check trafka tests bench

types: $(STAMP)
	$(BIN)/mypy

contracts: $(STAMP)
	$(BIN)/lint-imports

## Format check, lint, types, import contracts, then every test.
check: lint types contracts test

bench: $(STAMP)
	$(BIN)/python bench/log_append.py

## Fault injection (docs/reliability.md): 10 minutes, 3 nodes in network namespaces, every
## nemesis, Kafka's default timeouts; the seed is printed first. Needs root.
## CHAOS_NODES=5 for five nodes, CHAOS_SEED=N to replay a schedule, CHAOS_DURATION=seconds.
CHAOS_NODES ?= 3
CHAOS_DURATION ?= 600
chaos: $(STAMP)
	CHAOS_NODES=$(CHAOS_NODES) CHAOS_DURATION=$(CHAOS_DURATION) $(BIN)/python bench/chaos.py

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
