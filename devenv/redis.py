"""A private Redis (the celery broker) for the tests, the benchmarks and the demo."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path
from urllib.parse import urlparse

import redis as redis_py

from .paths import RUN_DIR
from .ports import DEFAULT_REDIS_URL

__all__ = ["DEFAULT_REDIS_URL", "RedisError", "ensure_redis", "ping", "redis_dir", "stop_redis"]

_LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1", ""}


class RedisError(RuntimeError):
    pass


def redis_dir(port: int) -> Path:
    return RUN_DIR / f"redis-{port}"


def ping(url: str, timeout: float = 1.0) -> bool:
    """True if a Redis answers PING on ``url``; False if nothing listens there."""
    client = redis_py.Redis.from_url(url, socket_connect_timeout=timeout, socket_timeout=timeout)
    try:
        return bool(client.ping())
    except (redis_py.ConnectionError, redis_py.TimeoutError):
        return False
    except redis_py.RedisError as exc:
        raise RedisError(f"something answers on {url} but not as a usable Redis: {type(exc).__name__}: {exc}") from exc
    finally:
        client.close()


def ensure_redis(url: str = DEFAULT_REDIS_URL, timeout: float = 20.0) -> str:
    """Make sure a Redis answers on ``url``, starting a private one if needed.

    Returns "running" when one already answered, "started" when we started it.
    """
    if ping(url):
        return "running"
    parsed = urlparse(url)
    host = parsed.hostname or "127.0.0.1"
    port = parsed.port or 6379
    if parsed.scheme not in ("redis", "") or host not in _LOCAL_HOSTS:
        raise RedisError(f"no Redis answers on {url} and it is not a local redis:// URL")
    server = shutil.which("redis-server")
    if server is None:
        raise RedisError("redis-server not found; run `make install` (Debian package redis-server)")
    d = redis_dir(port)
    d.mkdir(parents=True, exist_ok=True)
    log = d / "redis.log"
    cmd = [
        server,
        "--daemonize",
        "yes",
        "--bind",
        "127.0.0.1",
        "--port",
        str(port),
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        str(d),
        "--logfile",
        str(log),
        "--pidfile",
        str(d / "redis.pid"),
    ]
    if parsed.password:
        cmd += ["--requirepass", parsed.password]
    proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RedisError(
            f"redis-server failed to start ({proc.returncode}): {(proc.stderr or proc.stdout).strip()}\n{_tail(log)}"
        )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ping(url, timeout=0.5):
            return "started"
        time.sleep(0.1)
    raise RedisError(
        f"redis-server on port {port} did not answer PING within {timeout:.0f}s\n--- tail of {log} ---\n{_tail(log)}"
    )


def stop_redis(url_or_port: str | int, timeout: float = 10.0) -> bool:
    """SHUTDOWN NOSAVE the Redis on a port/URL; True if one was running."""
    url = url_or_port if isinstance(url_or_port, str) else f"redis://127.0.0.1:{url_or_port}/0"
    if not ping(url):
        return False
    client = redis_py.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=2)
    try:
        client.shutdown(nosave=True)
    except (redis_py.ConnectionError, redis_py.TimeoutError):
        pass  # the server closes the connection when it exits
    finally:
        client.close()
    deadline = time.monotonic() + timeout
    while ping(url, timeout=0.3):
        if time.monotonic() > deadline:
            raise RedisError(f"Redis on {url} did not shut down within {timeout:.0f}s")
        time.sleep(0.05)
    return True


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
