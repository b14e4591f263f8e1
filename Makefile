# The two commands of the README: `make run` and `make test`. `make check` runs every check.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# Extra pytest arguments, e.g. `make test PYTEST_ARGS="-m 'not slow'"`.
PYTEST_ARGS ?=

.PHONY: run test check fast format lint types contracts venv clean bench java

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,spark]'
	touch $(STAMP)

venv: $(STAMP)

## Start a one-node cluster with embedded defaults on localhost:9092 (data in ./data/node-1).
run: $(STAMP)
	$(BIN)/knode start --id 1

## Kafka's Java client, CLI tools and Kafka Streams for tests/cluster/test_java_*.py: Maven
## fetches the jars (into ~/.m2) and copies them to tests/java/target/dependency, and compiles
## the small test programs into tests/java/target/classes; again only when tests/java changes.
JAVA_DIR   := tests/java
JAVA_STAMP := $(JAVA_DIR)/target/.built
JAVA_SRC   := $(JAVA_DIR)/pom.xml $(shell find $(JAVA_DIR)/src -type f 2>/dev/null)

$(JAVA_STAMP): $(JAVA_SRC)
	@command -v java >/dev/null 2>&1 && command -v mvn >/dev/null 2>&1 || { echo "make java: java and mvn are needed (JDK 17+): apt-get install -y openjdk-17-jdk-headless maven" >&2; exit 1; }
	mvn -q -B -f $(JAVA_DIR)/pom.xml package
	touch $(JAVA_STAMP)

java: $(JAVA_STAMP)

## Set up and run the whole test suite.
test: $(STAMP) $(JAVA_STAMP)
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

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache $(JAVA_DIR)/target
