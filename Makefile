# One-command set-up on a fresh Debian machine, then the job.
#   make demo   set up everything, run the main job on the embedded default
#   make test   set up everything, run the whole test suite
# Every step is guarded by a stamp, so re-running is fast and idempotent.

SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Debian packages the project drives: a JRE for Spark and Kafka, maven to fetch
# Kafka's jars, sshd + iptables + iproute2 for the namespace cluster, RabbitMQ,
# chromium to test report.html as a person sees it, PostgreSQL for --sink-db postgres.
APT_PACKAGES := default-jre-headless python3-venv openssh-server iptables iproute2 rabbitmq-server maven chromium postgresql
APT_STAMP := $(VENV)/.apt-$(shell echo $(APT_PACKAGES) | md5sum | cut -c1-8)
PIP_STAMP := $(VENV)/.pip-installed

.PHONY: setup kafka-jars demo matrix test unit bench lint clean

setup: $(APT_STAMP) $(PIP_STAMP)

$(APT_STAMP):
	@missing=$$(for p in $(APT_PACKAGES); do \
	    dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	    echo "apt: installing $$missing"; \
	    export DEBIAN_FRONTEND=noninteractive; \
	    apt-get update -qq && apt-get install -y -qq --no-install-recommends $$missing; \
	fi
	@$(PYTHON) -m venv $(VENV)
	@touch $@

$(PIP_STAMP): pyproject.toml $(APT_STAMP)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	@touch $@

demo: setup kafka-jars
	$(BIN)/queuecheck demo

matrix: setup kafka-jars
	$(BIN)/queuecheck matrix

test: setup kafka-jars
	$(BIN)/pytest -q

unit: setup
	$(BIN)/pytest -q -m 'not integration'

bench: setup
	$(BIN)/python -m tests.bench.checker_bench

# Kafka's broker + CLI jars from Maven Central, cached in .state/kafka/<version>/libs
# (a no-op once there).
kafka-jars: setup
	@$(BIN)/python -m workloads.kafka.dist >/dev/null

lint: setup
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) store .state
