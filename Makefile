# The two commands of the README: `make run` and `make test`. `make check` runs every check.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# kafkajs, for the Node.js client tests (tests/js/package.json pins it).
JS_DIR   := tests/js
JS_STAMP := $(JS_DIR)/node_modules/.installed
# Extra pytest arguments, e.g. `make test PYTEST_ARGS="-m 'not slow'"`.
PYTEST_ARGS ?=
# pytest-xdist workers for `make test` (tests/conftest.py keeps the heavy tests apart);
# PYTEST_WORKERS=0 runs everything in one process.
PYTEST_WORKERS ?= 2

# $(call require,COMMAND,DEBIAN PACKAGES): stop in one line when COMMAND is not on PATH,
# naming the apt-get command that installs it (README, "System packages").
require = @command -v $(1) >/dev/null 2>&1 || { \
	echo "make: '$(1)' is missing (the tests need it); install it with: apt-get install -y $(2)" >&2; \
	exit 1; }

.PHONY: run test soak test-deps test-tools check fast format lint types contracts venv clean bench chaos java spark-kafka bench-kafka kafka-jars

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

## Spark's Kafka connector for tests/spark/test_spark_kafka*.py: Maven copies
## spark-sql-kafka-0-10 (and kafka-clients, commons-pool2, the token provider) into
## tests/spark/connector/target/dependency; again only when its pom.xml changes.
SPARK_KAFKA_DIR   := tests/spark/connector
SPARK_KAFKA_STAMP := $(SPARK_KAFKA_DIR)/target/.built

$(SPARK_KAFKA_STAMP): $(SPARK_KAFKA_DIR)/pom.xml
	@command -v mvn >/dev/null 2>&1 || { echo "make spark-kafka: mvn is needed: apt-get install -y maven" >&2; exit 1; }
	mvn -q -B -f $(SPARK_KAFKA_DIR)/pom.xml package
	touch $(SPARK_KAFKA_STAMP)

spark-kafka: $(SPARK_KAFKA_STAMP)

## Apache Kafka's broker and tools for bench/vs_kafka.py (issue 19): Maven copies them into
## KAFKA_JARS once per version (bench/kafka/pom.xml), so the smoke test run by `make test`
## (tests/bench/test_vs_kafka_smoke.py) does not count the download.
KAFKA_VERSION := $(shell sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' bench/kafka/pom.xml)
KAFKA_JARS    := $(HOME)/.cache/trafka-bench/kafka-$(KAFKA_VERSION)

$(KAFKA_JARS)/.complete: bench/kafka/pom.xml
	@command -v mvn >/dev/null 2>&1 || { echo "make kafka-jars: mvn is needed: apt-get install -y maven" >&2; exit 1; }
	mvn -q -B -f bench/kafka/pom.xml package -DoutputDirectory=$(KAFKA_JARS)
	echo $(KAFKA_VERSION) > $@

kafka-jars: $(KAFKA_JARS)/.complete

## trafka against Apache Kafka on this machine (bench/vs_kafka.py, every goal of issue 19,
## 1 and 3 nodes, ~15-30 min); the report is appended to docs/performance.md.
BENCH_KAFKA_ARGS ?= --repeat 2
bench-kafka: $(STAMP) $(KAFKA_JARS)/.complete
	nice -n 5 $(BIN)/python bench/vs_kafka.py --append-doc $(BENCH_KAFKA_ARGS)

## Set up and run the whole test suite.
test: test-deps $(JAVA_STAMP) $(SPARK_KAFKA_STAMP) $(KAFKA_JARS)/.complete
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadfile --durations=25 -m "not soak" $(PYTEST_ARGS)

## The long runs kept out of `make test` (marker `soak`, listed in docs/status.md): Spark
## Structured Streaming through a driver SIGKILL, the audit on a standalone Spark cluster.
## SPARK_KAFKA_RECORDS sets the streaming copy's record count (the Must-show run:
## `make soak SPARK_KAFKA_RECORDS=1000000`, docs/spark-kafka.md); SPARK_KAFKA_TIMEOUT bounds
## each Spark job in seconds.
SPARK_KAFKA_RECORDS ?= 20000
SPARK_KAFKA_TIMEOUT ?= 900
soak: test-deps $(JAVA_STAMP) $(SPARK_KAFKA_STAMP)
	SPARK_KAFKA_RECORDS=$(SPARK_KAFKA_RECORDS) SPARK_KAFKA_TIMEOUT=$(SPARK_KAFKA_TIMEOUT) \
		nice -n 5 $(BIN)/python -m pytest -m soak -rP $(PYTEST_ARGS)

## Everything the tests drive that a fresh clone lacks: the venv (trafka and the Python
## clients), kafkajs (npm); the system tools are checked, not installed.
test-deps: $(STAMP) test-tools $(JS_STAMP)

## The system tools the tests drive: Node.js and npm (kafkajs), kcat, Java 17 (Spark).
test-tools:
	$(call require,node,nodejs)
	$(call require,npm,npm)
	$(call require,kcat,kcat)
	$(call require,java,openjdk-17-jdk-headless)
	$(call require,mvn,maven)

$(JS_STAMP): $(JS_DIR)/package.json | test-tools
	cd $(JS_DIR) && npm install --no-audit --no-fund --silent
	touch $(JS_STAMP)

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
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache $(JAVA_DIR)/target $(SPARK_KAFKA_DIR)/target
