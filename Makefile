# pgconsole: install everything on a fresh Debian machine, run the tests,
# the benchmarks and the demo.
#
#   make install   Debian packages (as root), .venv, PostgreSQL binaries
#   make test      PYTEST_ARGS='tests/test_devenv.py -x' to narrow down
#   make demo
#   make bench
#   make soak      2 hours; SOAK=10m make soak to shorten

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

PYTHON := .venv/bin/python
# WeasyPrint needs Pango (audit PDFs); the tests read PDFs with poppler-utils (pdftotext, pdftoppm).
DEBIAN_PACKAGES := postgresql postgresql-contrib postgresql-15-pg-wait-sampling redis-server chromium fonts-dejavu-core \
	libpango-1.0-0 libpangoft2-1.0-0 libharfbuzz-subset0 poppler-utils
PYTEST_ARGS ?=

.PHONY: install system-packages fetch services lint test demo bench soak

install: system-packages .venv/.installed
	$(PYTHON) -m devenv fetch

# Debian packages; installed only when missing (needs root then).
system-packages:
	@missing=""; \
	for p in $(DEBIAN_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' "$$p" 2>/dev/null | grep -q 'install ok installed' \
	    || missing="$$missing $$p"; \
	done; \
	command -v npm >/dev/null 2>&1 || missing="$$missing nodejs npm"; \
	if [ ! -x .venv/bin/python ]; then \
	  command -v python3 >/dev/null 2>&1 || missing="$$missing python3"; \
	  python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || missing="$$missing python3-venv"; \
	fi; \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(id -u)" != 0 ]; then \
	  echo "missing Debian packages:$$missing" >&2; \
	  echo "install them as root: apt-get install -y$$missing" >&2; \
	  exit 1; \
	fi; \
	echo "installing Debian packages:$$missing"; \
	apt-get update; \
	DEBIAN_FRONTEND=noninteractive apt-get install -y $$missing

.venv/bin/python:
	python3 -m venv .venv

# Re-run pip only when pyproject.toml is newer than the stamp.
.venv/.installed: pyproject.toml | .venv/bin/python
	$(PYTHON) -m pip install -e '.[test]'
	touch $@

fetch: .venv/.installed
	$(PYTHON) -m devenv fetch

# The history store (port 54320, database pgconsole) and Redis.
services: install
	$(PYTHON) -m devenv up-history
	$(PYTHON) -m devenv ensure-redis

lint: .venv/.installed
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .

test: install lint services
	$(PYTHON) -m pytest $(PYTEST_ARGS)

demo: install services
	DEBUG=true $(PYTHON) manage.py demo

# Starts its own history store (with production durability) and monitored cluster.
bench: install
	$(PYTHON) -m bench

# A worker, beat and gunicorn under the demo's workloads for $(SOAK), with a client reading pages and the API:
# memory, snapshot lag, errors, history growth. A run of 2 hours or more writes its section of docs/benchmarks.md.
SOAK ?= 2h
soak: install
	$(PYTHON) -m bench --soak $(SOAK)
