"""Where devenv keeps its files in the repository: PostgreSQL binaries under ``.cache``, data
directories (and Redis's) under ``.run``."""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
CACHE_DIR = REPO_ROOT / ".cache" / "embedded-postgres"
RUN_DIR = REPO_ROOT / ".run"
