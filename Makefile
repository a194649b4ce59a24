# One-command set-up on a fresh Debian machine, then the job.
#   make demo   set up everything, run the main job on the embedded default
#   make test   set up everything, run the whole test suite
# Every step is guarded by a stamp, so re-running is fast and idempotent.
# Set-up prints one line per step; what apt, pip and Maven print goes to
# .state/logs/<step>.log, shown (its tail) only when the step fails.

SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
LOGS := .state/logs
# Debian packages the project drives: a JRE for Spark and Kafka, a JDK to build
# the Java client engine (--client java), maven to fetch Kafka's jars, sshd +
# iptables + iproute2 for the namespace cluster, RabbitMQ,
# chromium to test report.html as a person sees it, PostgreSQL for --sink-db postgres,
# fuse3 for lazyfs (the power-loss fault's file system), libfaketime for the clock fault,
# docker.io (dockerd, containerd, runc, tini as docker-init) and mmdebstrap for
# --driver docker: the tests run a private daemon on their own socket, and the node
# image is built from Debian's mirror with mmdebstrap, no registry needed. On a
# machine with systemd the package's own daemon is masked before it installs: it
# would set the host's iptables FORWARD policy to DROP and cut the namespace cluster.
APT_PACKAGES := default-jre-headless openjdk-17-jdk-headless python3-venv openssh-server iptables iproute2 rabbitmq-server maven chromium postgresql docker.io mmdebstrap fuse3 libfaketime nats-server
APT_STAMP := $(VENV)/.apt-$(shell echo $(APT_PACKAGES) | md5sum | cut -c1-8)
PIP_STAMP := $(VENV)/.pip-installed

# $(call step,what it does,log name,command): one line, the output in the log.
define step
	@mkdir -p $(LOGS); printf 'set-up: %s ... ' "$(1)"; \
	if ( $(3) ) > $(LOGS)/$(2).log 2>&1; then echo ok; \
	else echo "FAILED (whole output: $(LOGS)/$(2).log)"; tail -n 30 $(LOGS)/$(2).log; exit 1; fi
endef

APT_INSTALL = missing=$$(for p in $(APT_PACKAGES); do \
	    dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	    echo "installing $$missing"; \
	    export DEBIAN_FRONTEND=noninteractive; \
	    if echo "$$missing" | grep -qw docker.io && [ -d /run/systemd/system ]; then \
	        systemctl mask docker.service docker.socket; \
	    fi; \
	    if echo "$$missing" | grep -qw nats-server && [ -d /run/systemd/system ]; then \
	        systemctl mask nats-server.service; \
	    fi; \
	    apt-get update && apt-get install -y --no-install-recommends $$missing; \
	fi

.PHONY: setup kafka-jars nats-server demo matrix findings detection test docs reference unit bench fuzz lint clean

setup: $(APT_STAMP) $(PIP_STAMP)
	$(call step,Spark's class archive (a faster JVM start),spark-class-archive,$(BIN)/python -m checkers.class_archive)
	$(call step,the native history converter (go build),qc-convert,$(BIN)/python -m checkers.native)
	$(call step,the packet delayer of the slow-network faults (go build),qc-delay,$(BIN)/python -m nemesis.delayer)

$(APT_STAMP):
	$(call step,Debian packages,apt,$(APT_INSTALL))
	$(call step,virtualenv,venv,$(PYTHON) -m venv $(VENV))
	@touch $@

$(PIP_STAMP): pyproject.toml $(APT_STAMP)
	$(call step,Python packages (pip install -e .[dev]),pip,$(BIN)/pip install --upgrade pip && $(BIN)/pip install -e '.[dev]')
	@touch $@

# Kafka's broker + CLI jars from Maven Central, cached in .state/kafka/<version>/libs
# (a no-op once there), and the Java client engine built against them.
kafka-jars: setup
	$(call step,Kafka jars from Maven Central,kafka-jars,$(BIN)/python -m workloads.kafka.dist)
	$(call step,the Java client engine (javac),java-client,$(BIN)/python -m workloads.kafka.jvm)

# NATS's server built from its Go module at the pinned version, cached in
# .state/nats/<version>/bin (a no-op once there).
nats-server: setup
	$(call step,the NATS server and its clocked build (go install),nats-server,$(BIN)/python -m workloads.nats.dist)

demo: setup kafka-jars
	$(BIN)/queuecheck demo

matrix: setup kafka-jars
	$(BIN)/queuecheck matrix

# Every known-bad setup caught, every control clean: each row once (~15 min).
findings: setup kafka-jars
	$(BIN)/queuecheck findings

# The detection rate: each row ten times (about two and a half hours).
detection: setup kafka-jars
	$(BIN)/queuecheck findings --runs 10

# Two workers: the cluster tests' modules in one, in order; the rest beside
# them, niced (tests/conftest.py).
test: setup kafka-jars nats-server docs
	$(BIN)/pytest -q --durations=12 -n 3

# The docs site (docs/, mkdocs.yml) into site/; a broken link or anchor fails
# the build. Its reference pages are made from the code by `make reference`
# (a test fails while a committed one differs from what the code makes).
docs: setup
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

reference: setup
	$(BIN)/python -m harness.commands.reference

unit: setup
	$(BIN)/pytest -q -m 'not integration'

# Every shape at 100k, 1M and 10M, then the 100M Kafka-shaped history as
# another tool's (converted, then checked) beside the in-memory baseline.
bench: setup
	$(BIN)/python -m tests.bench.checker_bench
	$(BIN)/python -m tests.bench.checker_bench --sizes 100m --shapes kafka --checkers spark-converted,inmemory

# Generated histories: the Spark checker against the independent reference.
fuzz: setup
	$(BIN)/python -m tests.fuzz --n 10000

lint: setup
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) store .state
