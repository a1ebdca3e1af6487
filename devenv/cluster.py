"""One private PostgreSQL cluster: initdb, the devenv-managed configuration, start/stop, SQL as
superuser and its DSN.  Data directories live under ``<repo>/.run/<name>``."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from .account import _chown, _is_root, run_as
from .binaries import _lib_env, ensure_binaries
from .errors import ClusterError
from .paths import RUN_DIR
from .ports import PORT_WAIT_S, _wait_for_port
from .tls import devenv_tls

_SOCKET_PATH_MAX = 100  # sun_path is 108 bytes; keep a margin

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

    @property
    def initialized(self) -> bool:
        return (self.datadir / "PG_VERSION").exists()

    # ---- process helpers -----------------------------------------------------

    def _run(
        self,
        args: list[str],
        *,
        check: bool = True,
        timeout: float | None = 120,
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

    def initdb(
        self,
        settings: Mapping[str, Any] | None = None,
        preload: Iterable[str] = (),
        hba: Iterable[str] = (),
        tls: bool = True,
    ) -> None:
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
        self._run(
            [
                str(self.bindir / "initdb"),
                "-D",
                str(self.datadir),
                "-U",
                "postgres",
                "--auth=trust",
                "-E",
                "UTF8",
                "--locale=C",
                "-N",
            ]
        )
        self.configure(settings, preload, hba, tls)

    def configure(
        self,
        settings: Mapping[str, Any] | None = None,
        preload: Iterable[str] = (),
        hba: Iterable[str] = (),
        tls: bool = True,
    ) -> bool:
        """(Re)write the devenv-managed blocks of postgresql.conf and pg_hba.conf; with ``tls`` the server
        offers TLS with devenv's server certificate (devenv.tls; clients choose, pg_hba's host lines take both).

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
        if tls:
            conf.update(ssl=True, ssl_cert_file="server.crt", ssl_key_file="server.key")
            self._install_certificate()
        conf.update(settings or {})
        block = "".join(f"{k} = {_conf_quote(v)}\n" for k, v in conf.items())
        changed = self._write_block(self.datadir / "postgresql.conf", block, top=False)
        hba_block = "".join(f"{line.rstrip()}\n" for line in hba)
        changed |= self._write_block(self.datadir / "pg_hba.conf", hba_block, top=True)
        return changed

    def _install_certificate(self) -> None:
        """devenv's server certificate and key in the data directory, owned by the server's account (PostgreSQL
        refuses a key others may read)."""
        source = devenv_tls()
        for name, mode in (("server.crt", 0o644), ("server.key", 0o600)):
            path = self.datadir / name
            path.write_bytes((source / name).read_bytes())
            path.chmod(mode)
            _chown(path)

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
            [str(self.bindir / "pg_ctl"), "start", "-D", str(self.datadir), "-w", "-t", "60", "-l", str(self.logfile)],
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
            [str(self.bindir / "pg_ctl"), "stop", "-D", str(self.datadir), "-m", mode, "-w", "-t", "60"],
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

    def dsn(self, dbname: str = "postgres", user: str = "postgres", password: str | None = None) -> str:
        auth = quote(user, safe="")
        if password is not None:
            auth += ":" + quote(password, safe="")
        return f"postgresql://{auth}@127.0.0.1:{self.port}/{quote(dbname, safe='')}"

    def connect(self, dbname: str = "postgres", user: str = "postgres", password: str | None = None, **kwargs: Any):
        import psycopg

        kwargs.setdefault("autocommit", True)
        kwargs.setdefault("connect_timeout", 10)
        return psycopg.connect(self.dsn(dbname, user, password), **kwargs)

    def execute(
        self,
        sql: Any,
        dbname: str = "postgres",
        params: Any = None,
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
                    rhs = sql.SQL(", ").join(sql.Literal(str(v)) for v in value) if value else sql.Literal("")
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
                    rows = conn.execute("SELECT name FROM pg_settings WHERE pending_restart").fetchall()
                    return [r[0] for r in rows]
            time.sleep(0.02)


def cluster(name: str, major: int, port: int, base: Path | str = RUN_DIR) -> Cluster:
    """A Cluster handle (binaries installed if needed; nothing started)."""
    return Cluster(name=name, major=major, port=port, datadir=Path(base) / name, bindir=ensure_binaries(major))
