"""The private clusters and Redis of devenv, exercised for real (no mocks)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import time
import urllib.error
import urllib.request
from pathlib import Path

import psycopg
import pytest

from devenv import ports
from devenv.binaries import MAJORS, NPM_VERSIONS, debian_available, ensure_binaries
from devenv.demo import port_open
from devenv.fleet import ClusterSpec, start_many
from devenv.ports import PORTS, _port_in_use, _wait_for_port, port_for_extra_test
from devenv.redis import ensure_redis, ping, redis_dir, stop_redis
from tests import slots

MONITORED = (13, 14, 15, 16, 17, 18)


def test_port_map_has_no_collisions():
    ports = [
        PORTS["history"],
        *PORTS["test"].values(),
        *PORTS["test-extra"].values(),
        *PORTS["demo"].values(),
        *PORTS["test-faults"],
        PORTS["redis"],
    ]
    assert len(ports) == len(set(ports))
    assert PORTS["history"] == 54320
    assert PORTS["test"][13] == 55413
    assert PORTS["test-evict"] == PORTS["test-extra"][14]


def test_a_port_is_waited_for_until_its_holder_lets_go():
    """A cluster start waits for its port (a closed client socket may hold it in TIME_WAIT for up to
    60 s) instead of failing, and gives up only on a holder that stays."""
    import threading

    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    port = holder.getsockname()[1]
    assert _port_in_use(port)
    assert not _wait_for_port(port, timeout_s=1.5)
    threading.Timer(1.5, holder.close).start()
    started = time.monotonic()
    assert _wait_for_port(port, timeout_s=10)
    assert 1.0 < time.monotonic() - started < 10
    assert not _port_in_use(port)


@pytest.mark.parametrize("major", MAJORS)
def test_binaries_installed_and_runnable(major):
    bindir = ensure_binaries(major)
    for prog in ("initdb", "pg_ctl", "postgres"):
        assert (bindir / prog).exists(), f"{bindir / prog} missing"
    if major == 15 and debian_available(15):
        assert bindir == Path("/usr/lib/postgresql/15/bin")
        return
    pkg = bindir.parent.parent
    assert f'"version": "{NPM_VERSIONS[major]}"' in (pkg / "package.json").read_text()
    # the symlinks of pg-symlinks.json that postgres needs at load time
    for lib in ("libicuuc.so.60", "libicui18n.so.60", "libicudata.so.60"):
        link = bindir.parent / "lib" / lib
        assert link.is_symlink() and link.exists(), link


@pytest.mark.parametrize("major", MONITORED)
def test_cluster_version_and_preload(pg_clusters, major):
    c = pg_clusters[major]
    assert c.major == major
    assert c.is_running()
    [(num,)] = c.execute("SELECT current_setting('server_version_num')::int")
    assert num // 10000 == major
    [(preload,)] = c.execute("SELECT current_setting('shared_preload_libraries')")
    assert "pg_stat_statements" in [p.strip() for p in preload.split(",")]
    [(track,)] = c.execute("SELECT current_setting('pg_stat_statements.track')")
    assert track == "all"
    exts = {r[0] for r in c.execute("SELECT extname FROM pg_extension", dbname="app")}
    assert "pg_stat_statements" in exts
    if major == 15:
        assert "pg_wait_sampling" in preload, "install postgresql-15-pg-wait-sampling"
        assert "pg_wait_sampling" in exts
        assert "hypopg" in exts, "install postgresql-15-hypopg (index advice costed by the planner)"


@pytest.mark.parametrize("major", MONITORED)
def test_monitor_role_password_auth(pg_clusters, monitor_dsn, major):
    c = pg_clusters[major]
    with psycopg.connect(monitor_dsn(c), connect_timeout=10) as conn:
        user, member, super_ = conn.execute(
            "SELECT current_user, pg_has_role(current_user, 'pg_monitor', 'member'),"
            " rolsuper FROM pg_roles WHERE rolname = current_user"
        ).fetchone()
        assert (user, member, super_) == ("monitor", True, False)
        # pg_monitor may read every backend's statements
        conn.execute("SELECT count(*) FROM pg_stat_statements").fetchone()
    [(stored,)] = c.execute("SELECT rolpassword FROM pg_authid WHERE rolname = 'monitor'")
    assert stored.startswith("SCRAM-SHA-256$")
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(c.dsn("app", "monitor", "wrong-pw"), connect_timeout=10).close()
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(c.dsn("app", "monitor"), connect_timeout=10).close()
    # everyone else is trusted
    with psycopg.connect(c.dsn("app"), connect_timeout=10) as conn:
        assert conn.execute("SELECT current_user").fetchone() == ("postgres",)


def test_restart_set_config_and_destroy(cluster_lock):
    c = start_many(
        [
            ClusterSpec(
                "test-scratch-pg16",
                16,
                slots.port(port_for_extra_test(16)),
                fresh=True,
                settings={"max_connections": "40"},
                base=slots.cluster_dir(),
            )
        ]
    )["test-scratch-pg16"]
    try:
        assert c.execute("SHOW max_connections") == [("40",)]
        [(started_before,)] = c.execute("SELECT pg_postmaster_start_time()")
        pid_before = c.postmaster_pid()
        c.restart()
        assert c.is_running()
        assert c.postmaster_pid() != pid_before
        [(started_after,)] = c.execute("SELECT pg_postmaster_start_time()")
        assert started_after > started_before

        assert c.set_config({"work_mem": "7MB"}) == []
        assert c.execute("SHOW work_mem") == [("7MB",)]
        assert c.set_config({"max_connections": 50}) == ["max_connections"]
        c.set_config({"shared_preload_libraries": "pg_stat_statements, auto_explain"}, restart=True)
        assert c.execute("SHOW max_connections") == [("50",)]
        [(preload,)] = c.execute("SHOW shared_preload_libraries")
        assert [p.strip() for p in preload.split(",")] == ["pg_stat_statements", "auto_explain"]

        c.stop()
        assert not c.is_running()
        c.start()
        assert c.execute("SELECT 1") == [(1,)]
    finally:
        c.destroy()
    assert not c.is_running()
    assert not c.datadir.exists()


def _unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_ensure_redis_starts_private_server():
    port = _unused_port()
    url = f"redis://127.0.0.1:{port}/0"
    assert not ping(url)
    try:
        t0 = time.monotonic()
        assert ensure_redis(url) == "started"
        assert time.monotonic() - t0 < 20
        assert ping(url)
        assert (redis_dir(port) / "redis.log").exists()
        assert ensure_redis(url) == "running"
    finally:
        stop_redis(port)
        shutil.rmtree(redis_dir(port), ignore_errors=True)
    assert not ping(url)


def test_pg12_cluster(pg12_cluster, monitor_dsn):
    c = pg12_cluster
    [(num,)] = c.execute("SELECT current_setting('server_version_num')::int")
    assert num // 10000 == 12
    with psycopg.connect(monitor_dsn(c), connect_timeout=10) as conn:
        conn.execute("SELECT count(*) FROM pg_stat_statements").fetchone()


def test_evict_cluster(evict_cluster, monitor_dsn):
    c = evict_cluster
    [(num, pgss_max)] = c.execute(
        "SELECT current_setting('server_version_num')::int, current_setting('pg_stat_statements.max')::int"
    )
    assert (num // 10000, pgss_max) == (14, 100)
    assert c.port == slots.port(PORTS["test-evict"])
    with psycopg.connect(monitor_dsn(c), connect_timeout=10) as conn:
        conn.execute("SELECT count(*) FROM pg_stat_statements").fetchone()


def test_reserved_ports_are_merged_not_replaced(tmp_path):
    # Each pytest worker's test clusters (tests/slots.py) have a range of their own.
    tests = "55400-55799,57400-57799,59400-59799"
    assert ports.merge_reserved("\n") == f"54320,{tests},56400-56499,57000-57199"
    assert ports.merge_reserved("8080,55400-55799\n").split(",") == [
        "8080",
        "55400-55799",
        "54320",
        "57400-57799",
        "59400-59799",
        "56400-56499",
        "57000-57199",
    ]
    f = tmp_path / "reserved"
    f.write_text("9000\n")
    assert ports.reserve_ports(str(f))
    assert f.read_text() == f"9000,54320,{tests},56400-56499,57000-57199"
    assert not ports.reserve_ports(str(tmp_path / "missing" / "file"))


def test_the_kernel_keeps_our_ports_out_of_its_ephemeral_choice():
    """`make services` (devenv up-history) ran before the tests; where it may (root), the kernel has our ranges."""
    path = ports.RESERVED_PORTS_FILE
    if os.geteuid() != 0 or not os.access(path, os.W_OK):
        pytest.skip("not root here: the reservation is best effort")
    ports.reserve_ports()
    with open(path) as f:
        reserved = f.read().strip().split(",")
    assert set(ports.merge_reserved("").split(",")) <= set(reserved), reserved


def test_webhook_sink_writes_each_post_with_its_signature_checked(tmp_path):
    """The demo's webhook receiver (devenv/webhooksink.py): every POST a JSON file with its headers, its parsed body
    and whether its signature verifies with the channel's secret; a bad signature is refused (401) but kept."""
    from alerts import signing
    from alerts.signing import new_secret, signed_headers
    from devenv.webhooksink import WebhookSink

    secret = new_secret()
    sink = WebhookSink(folder=tmp_path / "webhooks", secret=secret, verify=signing.verify).start()
    try:
        assert sink.port and sink.url == f"http://127.0.0.1:{sink.port}/alerts"
        body = json.dumps({"schema": "pgconsole.alert/1", "event": "open", "alert": {"title": "x"}}).encode()

        def post(headers: dict[str, str]) -> int:
            request = urllib.request.Request(
                sink.url, data=body, headers={"Content-Type": "application/json", **headers}, method="POST"
            )
            try:
                with urllib.request.urlopen(request, timeout=10) as response:
                    return response.status
            except urllib.error.HTTPError as exc:
                return exc.code

        assert post(signed_headers(secret, body)) == 204
        assert post(signed_headers(new_secret(), body)) == 401
        assert (sink.received, sink.verified) == (2, 1)
    finally:
        sink.stop()
    files = sorted((tmp_path / "webhooks").glob("*.json"))
    assert [f.name.endswith("-open.json") for f in files] == [True, True]
    records = [json.loads(f.read_text()) for f in files]
    assert [r["signature_verified"] for r in records] == [True, False]
    assert records[0]["body"]["alert"] == {"title": "x"} and records[0]["path"] == "/alerts"
    assert records[0]["headers"]["X-Pgconsole-Signature"].startswith("v1=")
    assert not list((tmp_path / "webhooks").glob("*.part"))
    assert not port_open(sink.port)  # stopped: nothing listens any more
