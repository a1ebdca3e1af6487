# pgconsole: install everything on a fresh Debian machine, run the tests,
# the benchmarks and the demo.
#
#   make install   Debian packages (as root), .venv (from requirements/dev.txt), PostgreSQL binaries
#   make lock      requirements/*.txt again from pyproject.toml (UPGRADE=1: newest versions allowed)
#   make audit     the locked versions against PyPI's vulnerability data
#   make licenses  every locked and vendored dependency's licence; fails on one that could not ship with ours
#   make test      PYTEST_ARGS='tests/test_devenv.py -x' to narrow down (PYTEST_WORKERS=0: in this process, for pdb)
#   make check     lint and the tests but the browser's, production's and image's: the inner loop
#   make demo
#   make bench
#   make soak      2 hours; SOAK=10m make soak to shorten

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

PYTHON := .venv/bin/python
# WeasyPrint needs Pango (audit PDFs); the tests read PDFs with poppler-utils (pdftotext, pdftoppm).
DEBIAN_PACKAGES := postgresql postgresql-contrib postgresql-15-pg-wait-sampling postgresql-15-hypopg prometheus redis-server chromium fonts-dejavu-core \
	libpango-1.0-0 libpangoft2-1.0-0 libharfbuzz-subset0 poppler-utils
PYTEST_ARGS ?=

.PHONY: install system-packages fetch services lint test check demo bench soak lock audit licenses

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

# The lock, exactly as written and from nothing else, whatever the registry published since: first the installer,
# pip, pinned with its hashes (requirements/installer.txt), in place of whatever pip `python3 -m venv` gave; then
# every locked package with its hashes and --no-deps, so no dependency is ever resolved against the registry (an
# older pip resolved `fonttools[woff]>=4.59.2` to a release newer than the lock's, then refused it for having no
# pin: issue 51); then the project itself, editable, with nothing more (no isolated build environment either:
# setuptools, its build backend, is in the lock); then pip check, since --no-deps trusts the lock to be complete.
# Re-run only when a lock file or pyproject.toml is newer than the stamp.
INSTALLER := requirements/installer.txt
LOCKS := $(INSTALLER) requirements/runtime.txt requirements/dev.txt
.venv/.installed: $(LOCKS) pyproject.toml | .venv/bin/python
	$(PYTHON) -m pip install --require-hashes --no-deps -r $(INSTALLER)
	$(PYTHON) -m pip install --require-hashes --no-deps -r requirements/dev.txt
	$(PYTHON) -m pip install --no-deps --no-build-isolation --check-build-dependencies -e .
	$(PYTHON) -m pip check
	touch $@

# The lock files, for the image's platform: Linux x86_64, CPython 3.11 (3.11.0 up, so Debian 12's 3.11.2 too).
# installer.txt is pip alone, which installs the other two (above, and in the Dockerfile). runtime.txt is what
# the image installs: pyproject.toml's dependencies and the build backend (build.in). dev.txt adds the test extra,
# constrained to the other two's versions so the three agree. Every package, transitive ones too, is pinned with
# the sha256 of each of its files on PyPI; extras are not written (`fonttools`, not `fonttools[woff]`): what an
# extra brings is locked as a package of its own, and --no-deps installs read no requirement but the lock's lines.
# The pins already in the files are kept unless pyproject.toml asks for others; UPGRADE=1 takes the newest
# versions pyproject.toml allows. uv comes from the lock, alone: the rest of .venv may not match a pyproject.toml
# that was just changed (the point of locking again).
LOCK_COMPILE := .venv/bin/uv pip compile --quiet --no-config --generate-hashes --python-version 3.11 \
	--python-platform x86_64-manylinux_2_28 --custom-compile-command 'make lock' $(if $(UPGRADE),--upgrade)
lock: | .venv/bin/python
	$(PYTHON) -m pip install --quiet --require-hashes --no-deps -r <(awk '/^uv==/,!/\\$$/' requirements/dev.txt)
	$(LOCK_COMPILE) requirements/installer.in -o $(INSTALLER)
	$(LOCK_COMPILE) pyproject.toml requirements/build.in -o requirements/runtime.txt
	$(LOCK_COMPILE) pyproject.toml requirements/build.in --extra test -c requirements/runtime.txt -c $(INSTALLER) \
	  -o requirements/dev.txt

# Known vulnerabilities of the locked versions (PyPI's advisories, by name and version: nothing is installed).
audit: .venv/.installed
	.venv/bin/pip-audit --strict --progress-spinner off --vulnerability-service pypi --disable-pip \
	  --require-hashes -r requirements/runtime.txt
	.venv/bin/pip-audit --strict --progress-spinner off --vulnerability-service pypi --disable-pip \
	  --require-hashes -r requirements/dev.txt

# The image's dependencies must let pgconsole keep its PostgreSQL Licence (devenv/licenses.py says the rule).
licenses: .venv/.installed
	$(PYTHON) -m devenv licenses

fetch: .venv/.installed
	$(PYTHON) -m devenv fetch

# The history store (port 54320, database pgconsole) and Redis.
services: install
	$(PYTHON) -m devenv up-history
	$(PYTHON) -m devenv ensure-redis

lint: .venv/.installed
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .

# Three pytest workers (pytest-xdist) on two cores: the suite waits on processes, clocks and the network as much
# as it computes (docs/benchmarks.md, "Test suite"). Each has its own clusters, databases and Redis database
# (tests/slots.py) and is handed whole files in collection order, the slow ones first (tests/conftest.py,
# tests/distribution.py); the 30 slowest tests and the time per folder at the end.
PYTEST_WORKERS ?= 3
PYTEST := $(PYTHON) -m pytest -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=30
test: install lint services
	$(PYTEST) $(PYTEST_ARGS)

# The inner loop: lint and every test but the browser's, the production paths' and the image's.
CHECK_IGNORE := --ignore=tests/browser --ignore=tests/production --ignore=tests/test_image.py
check: install lint services
	$(PYTEST) $(CHECK_IGNORE) $(PYTEST_ARGS)

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
