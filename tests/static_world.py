"""The image's static files, collected once per test run: the Dockerfile's own collectstatic step (hashed and
compressed names, the product's settings outside DEBUG, throwaway keys as the build uses), 10 s of two cores
each time. The tests that serve them (the settings' check, gunicorn with HTTPS, compose's services in production
mode) read the one folder; pytest's workers take turns to build it (a lock in the run's own temporary folder).

* ``collected_static``  the folder (STATIC_ROOT) and what the step printed, for a session"""

from __future__ import annotations

import fcntl
import os
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.dockerfile import dockerfile
from tests.processes import BIN, ROOT

#: What the settings read that the tests' own process (or a developer's shell) may have set.
CLEARED = ("DEBUG", "SECRET_KEY", "CREDENTIALS_KEY", "STATIC_ROOT", "ALLOWED_HOSTS", "DJANGO_SETTINGS_MODULE")


@dataclass(frozen=True)
class CollectedStatic:
    root: Path
    output: str


def build_step() -> list[str]:
    """The Dockerfile's collectstatic command (`python manage.py collectstatic ...`), this virtualenv's python."""
    run = next(i.args for i in dockerfile() if i.keyword == "RUN" and "collectstatic" in i.args)
    words = shlex.split(next(part for part in run.split("&&") if "collectstatic" in part))
    return [str(BIN / "python"), *words[1:]]


def collect(root: Path) -> str:
    from console.keys import generate_credentials_key, generate_secret_key

    env = {k: v for k, v in os.environ.items() if k not in CLEARED}
    env.update(
        DEBUG="false",
        SECRET_KEY=generate_secret_key(),
        CREDENTIALS_KEY=generate_credentials_key(),
        STATIC_ROOT=str(root),
    )
    done = subprocess.run(build_step(), cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"collectstatic exited with {done.returncode}:\n{done.stdout}{done.stderr}"
    return done.stdout + done.stderr


@pytest.fixture(scope="session")
def collected_static(tmp_path_factory) -> CollectedStatic:
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if "PYTEST_XDIST_WORKER" in os.environ else base  # the run's, above each worker's
    root, done = shared / "collected-static", shared / "collected-static.done"
    with open(shared / "collected-static.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            done.write_text(collect(root))
    return CollectedStatic(root, done.read_text())
