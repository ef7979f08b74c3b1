# Two commands for a fresh machine:
#   make run    create .venv, install, run the main job (`ackorder run`: TLC, the twin, a fuzz campaign, the proofs)
#   make test   the same set-up, then the whole test suite
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: run test java chromium etcd setup jvm-archive clean

setup: $(STAMP) java jvm-archive

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
	  { echo "Python >= 3.11 is required (found $$($(PYTHON) --version 2>&1)); set PYTHON=python3.11"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	@echo "installing ackorder and its dependencies into $(VENV) (a few minutes on a fresh machine)"
	$(PY) -m pip install -qq --disable-pip-version-check --upgrade pip
	$(PY) -m pip install -qq --disable-pip-version-check -e .
	@touch $(STAMP)

# TLC needs a Java runtime; install Debian's default one when we can.
java:
	@if command -v java >/dev/null 2>&1; then exit 0; fi; \
	if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	  echo "java not found: installing default-jre-headless with apt-get"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq default-jre-headless >/dev/null; \
	elif command -v apt-get >/dev/null 2>&1 && command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then \
	  echo "java not found: installing default-jre-headless with sudo apt-get"; \
	  sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq default-jre-headless >/dev/null; \
	else \
	  echo "java not found. Install a Java 17 runtime, e.g. 'apt-get install default-jre-headless' (Debian/Ubuntu)"; \
	  echo "or 'brew install openjdk@17' (macOS), then run make again."; exit 1; \
	fi; \
	command -v java >/dev/null 2>&1 || { echo "java is still missing after the install"; exit 1; }

# The Spark driver's JVM maps its classes from an archive that one session of its own writes
# (spark_fuzz/jvmcds.py): made once, in about 17 s; every session after starts in about half the time.
# Without it sessions still work, so a failure here is reported and set-up goes on.
jvm-archive: $(STAMP) java
	@$(PY) -m spark_fuzz.jvmcds || echo "(Spark sessions start without a class-data archive)"

# The fuzz report is opened in a real headless browser by the tests; Debian's chromium.
chromium:
	@if command -v chromium >/dev/null 2>&1; then exit 0; fi; \
	if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	  echo "chromium not found: installing Debian's chromium with apt-get (for the report's browser test)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	elif command -v apt-get >/dev/null 2>&1 && command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then \
	  echo "chromium not found: installing Debian's chromium with sudo apt-get"; \
	  sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	else \
	  echo "chromium not found. Install it (Debian/Ubuntu: 'apt-get install chromium'), then run make again."; exit 1; \
	fi; \
	command -v chromium >/dev/null 2>&1 || { echo "chromium is still missing after the install"; exit 1; }

# The etcd-backed controller store is tested against a real 3-member etcd; Debian's etcd-server.
etcd:
	@if command -v etcd >/dev/null 2>&1; then exit 0; fi; \
	if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	  echo "etcd not found: installing Debian's etcd-server with apt-get (for the controller's etcd store tests)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server >/dev/null; \
	elif command -v apt-get >/dev/null 2>&1 && command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then \
	  echo "etcd not found: installing Debian's etcd-server with sudo apt-get"; \
	  sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server >/dev/null; \
	else \
	  echo "etcd not found. Install it (Debian/Ubuntu: 'apt-get install etcd-server'), then run make again."; exit 1; \
	fi; \
	command -v etcd >/dev/null 2>&1 || { echo "etcd is still missing after the install"; exit 1; }

run: setup
	$(VENV)/bin/ackorder run

# pytest-xdist workers; tests that must share a process or not run at once carry an xdist_group.
# One more worker than this 2-core machine's cores: about a quarter of the suite's time is spent
# waiting (real sockets, sleeps, other processes), which a third worker fills (measured side by
# side on the idle machine, 2026-11-25: 560 s with 2 workers, 517 s with 3, the same CPU time).
TEST_WORKERS ?= 3
test: setup chromium etcd
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup

clean:
	rm -rf $(VENV) .ackorder .pytest_cache .hypothesis *.egg-info
