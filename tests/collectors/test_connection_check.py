"""collectors/connection_check.py, the "test connection" check, against real clusters: a server with everything,
one where the extension is missing in the database asked for, a role that sees only its own statements,
PostgreSQL 13 (no pg_stat_statements_info), and the ways a connection fails (authentication, a closed
port, a silent port, DNS; TLS and SCRAM in test_tls.py). The password never appears in a report."""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from collectors.connection_check import MONITORING_ROLE_SQL, CheckReport, server_check
from inventory.endpoint import Endpoint
from tests.conftest import APP_DB, MONITOR_PASSWORD, MONITOR_USER
from tests.world import run

MONITORING_ROLE_DOC = Path(__file__).resolve().parents[2] / "docs" / "monitoring-role.md"
PLAIN_ROLE = "check_plain"
PLAIN_PASSWORD = "Plain-pw-93f1"  # distinctive: a report must never contain it


def check(
    cluster,
    *,
    database: str = APP_DB,
    user: str = MONITOR_USER,
    password: str | None = MONITOR_PASSWORD,
    sslmode: str = "prefer",
    port: int | None = None,
    host: str = "127.0.0.1",
) -> CheckReport:
    return server_check(
        endpoint=Endpoint(host=host, port=port or cluster.port, database=database, user=user, sslmode=sslmode),
        password=password,
    )


def topics(report: CheckReport, level: str) -> list[str]:
    return [f.topic for f in report.findings if f.level == level]


def fixes(report: CheckReport) -> str:
    return "\n".join(f.fix for f in report.missing)


def assert_never_echoed(report: CheckReport, password: str) -> None:
    assert password not in repr(report)


def test_a_server_with_everything_is_ready(pg_clusters):
    report = check(pg_clusters[17])
    assert report.connected and report.ready, report.findings
    assert report.failure == "" and report.problems == []
    assert report.server_version.startswith("17.") and report.server_version_num // 10000 == 17
    assert report.preloaded is True and "pg_stat_statements" in report.shared_preload_libraries
    assert report.extension_version == "1.11" and report.extension_default_version == "1.11"
    assert report.reads_all_stats is True and report.superuser is False
    # The settings, with the ones a version or a fork lacks said to be missing.
    assert [s.name.removeprefix("pg_stat_statements.") for s in report.settings] == [
        "max",
        "track",
        "track_utility",
        "track_planning",
        "save",
        "sample_rate",
    ]
    assert report.setting("max") == "5000" and report.setting("track") == "all"
    assert report.setting("track_planning") == "off" and report.setting("save") == "on"
    assert report.setting("sample_rate") is None
    # pg_stat_statements_info (14+) and the entries, all visible to a member of pg_monitor.
    assert report.dealloc == 0 and report.stats_reset is not None
    assert report.entries > 0 and report.hidden_entries == 0
    assert set(topics(report, "ok")) >= {
        "Connection",
        "PostgreSQL version",
        "shared_preload_libraries",
        "Extension",
        "Privileges",
        "pg_stat_statements.max",
    }
    # Only plans (pg_monitor reads no table) and track_planning are left to suggest, each with its exact SQL.
    assert [f.topic for f in report.missing] == ["Plans", "pg_stat_statements.track_planning"]
    assert report.missing[0].fix == f"GRANT pg_read_all_data TO {MONITOR_USER};   -- read, never write"
    assert "contend" in report.missing[1].text
    assert report.missing[1].fix == "ALTER SYSTEM SET pg_stat_statements.track_planning = on;\nSELECT pg_reload_conf();"
    assert_never_echoed(report, MONITOR_PASSWORD)


def test_the_extension_missing_in_the_database_asked_for(pg_clusters):
    # The cluster preloads pg_stat_statements, but the extension exists only in database app.
    report = check(pg_clusters[17], database="postgres")
    assert report.connected and not report.ready
    assert report.preloaded is True and report.extension_version is None
    assert report.extension_default_version == "1.11"
    assert topics(report, "problem") == ["Extension"]
    problem = report.problems[0]
    assert "not created in database 'postgres'" in problem.text
    assert problem.fix == "-- in database postgres, as a superuser:\nCREATE EXTENSION IF NOT EXISTS pg_stat_statements;"
    # The settings are still reported (they come with the preload, not the extension); the view is not read.
    assert report.setting("max") == "5000" and report.entries is None and report.dealloc is None


def test_a_database_name_cannot_inject_a_statement_into_the_fix(pg_clusters):
    """The fix names the database in a comment: a name with a newline must not end it and start a statement in
    what a superuser copies."""
    c = pg_clusters[17]
    name = "evil\nDROP ROLE monitor; --"
    run(c, f'DROP DATABASE IF EXISTS "{name}"', dbname="postgres")
    run(c, f'CREATE DATABASE "{name}"', dbname="postgres")
    try:
        report = check(c, database=name)
    finally:
        run(c, f'DROP DATABASE "{name}"', dbname="postgres")
    fix = report.problems[0].fix
    first_line = '-- in database "evil\\nDROP ROLE monitor; --", as a superuser:'
    assert fix == first_line + "\nCREATE EXTENSION IF NOT EXISTS pg_stat_statements;"
    assert fix.splitlines()[0].startswith("-- ") and len(fix.splitlines()) == 2


def test_postgresql_13_has_no_info_view(pg_clusters):
    report = check(pg_clusters[13])
    assert report.ready, report.findings
    assert report.server_version_num // 10000 == 13 and report.extension_version == "1.8"
    assert report.setting("track_planning") == "off"  # exists since 13
    assert report.dealloc is None and report.stats_reset is None
    ok = next(f for f in report.findings if f.topic == "pg_stat_statements.max")
    assert "evictions are counted from PostgreSQL 14" in ok.text
    # No pg_read_all_data before 14: the plans need SELECT on the tables.
    plans = next(f for f in report.findings if f.topic == "Plans")
    assert report.reads_all_data is None and plans.level == "info" and "PostgreSQL 13 has no" in plans.text
    assert (
        plans.fix == f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {MONITOR_USER};   -- in each database and schema"
    )


def test_plans_say_whether_the_role_may_read_every_table(pg_clusters, plain_role):
    c = pg_clusters[17]
    report = check(c, user=plain_role, password=PLAIN_PASSWORD)
    plans = next(f for f in report.findings if f.topic == "Plans")
    assert report.reads_all_data is False and plans.level == "info" and '"permission"' in plans.text
    assert plans.fix == f"GRANT pg_read_all_data TO {plain_role};   -- read, never write"
    c.execute(f"GRANT pg_read_all_data TO {plain_role}")
    report = check(c, user=plain_role, password=PLAIN_PASSWORD)
    plans = next(f for f in report.findings if f.topic == "Plans")
    assert report.reads_all_data is True and plans.level == "ok" and plans.fix == ""


@pytest.fixture
def plain_role(pg_clusters) -> Iterator[str]:
    """A login role outside pg_monitor, whose sessions track nothing and compute no query id."""
    c = pg_clusters[17]
    c.execute(f"DROP ROLE IF EXISTS {PLAIN_ROLE}")
    c.execute(f"CREATE ROLE {PLAIN_ROLE} LOGIN PASSWORD '{PLAIN_PASSWORD}'")
    c.execute(f"ALTER ROLE {PLAIN_ROLE} SET pg_stat_statements.track = 'none'")
    c.execute(f"ALTER ROLE {PLAIN_ROLE} SET compute_query_id = 'off'")
    try:
        yield PLAIN_ROLE
    finally:
        c.execute(f"DROP ROLE IF EXISTS {PLAIN_ROLE}")


def test_a_role_without_privileges_sees_only_its_own_statements(pg_clusters, plain_role):
    c = pg_clusters[17]
    c.execute("SELECT 1", dbname=APP_DB)  # an entry of the superuser: hidden from the plain role
    report = check(c, user=plain_role, password=PLAIN_PASSWORD)
    assert report.connected and not report.ready
    assert report.reads_all_stats is False and report.superuser is False
    # shared_preload_libraries is superuser-only: unreadable, yet the preload is known from the settings.
    assert report.shared_preload_libraries is None and report.preloaded is True
    privileges = [f for f in report.findings if f.topic == "Privileges"]
    assert privileges[0].level == "warning" and "sees only its own statements" in privileges[0].text
    assert privileges[0].fix == "GRANT pg_monitor TO check_plain;   -- includes pg_read_all_stats"
    assert report.hidden_entries > 0 and report.hidden_entries == report.entries  # it ran nothing counted itself
    assert f"{report.hidden_entries} of {report.entries} entries" in privileges[1].text
    # What this role's sessions run with is what its collections would see.
    assert set(topics(report, "problem")) == {"compute_query_id", "pg_stat_statements.track"}
    assert "ALTER SYSTEM SET compute_query_id = 'auto';" in fixes(report)
    assert "ALTER SYSTEM SET pg_stat_statements.track = 'top';" in fixes(report)
    assert_never_echoed(report, PLAIN_PASSWORD)


def test_wrong_password(pg_clusters):
    wrong = "Wrong-pw-5521"
    report = check(pg_clusters[17], password=wrong)
    assert not report.connected and report.failure == "authentication"
    assert report.server_version == "" and report.settings == ()
    (finding,) = report.findings
    assert finding.level == "problem" and "refused the password of role 'monitor'" in finding.text
    assert "password authentication failed" in finding.detail and "authentication failed for" not in finding.text
    assert finding.fix == "ALTER ROLE monitor PASSWORD 'choose-one';"
    assert_never_echoed(report, wrong)


def test_no_password_for_a_role_that_needs_one(pg_clusters):
    report = check(pg_clusters[17], password=None)
    assert report.failure == "authentication" and "asks role 'monitor' for a password" in report.findings[0].text


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_closed_port_is_refused():
    port = _free_port()
    report = server_check(
        endpoint=Endpoint(host="127.0.0.1", port=port, database="app", user="monitor", sslmode="prefer"),
        password="secret-7",
    )
    assert not report.connected and report.failure == "refused"
    assert f"Nothing accepts connections at 127.0.0.1:{port}" in report.findings[0].text
    assert report.target == f"monitor@127.0.0.1:{port}/app"


def test_a_silent_port_times_out(settings):
    """A socket that accepts connections and never answers: the collector's connect timeout ends the wait."""
    settings.COLLECTOR = {**settings.COLLECTOR, "CONNECT_TIMEOUT_S": 2}
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        port = listener.getsockname()[1]
        report = server_check(
            endpoint=Endpoint(host="127.0.0.1", port=port, database="app", user="monitor", sslmode="prefer"),
            password=None,
        )
    assert not report.connected and report.failure == "timeout"
    assert "No answer from" in report.findings[0].text
    assert 1500 <= report.elapsed_ms < 10_000
    # What a reader who is not console staff gets: the class and the console's words, no libpq text nor timing.
    seen = report.seen_by(staff=False)
    assert seen.failure == "timeout" and seen.elapsed_ms is None and seen.findings[0].detail == ""
    assert seen.findings[0].text == report.findings[0].text and report.findings[0].detail


def test_a_host_name_that_does_not_resolve():
    report = server_check(
        endpoint=Endpoint(host="no-such-host.invalid", port=5432, database="app", user="monitor", sslmode="prefer"),
        password="pw-1",
    )
    assert report.failure == "dns" and "'no-such-host.invalid' does not resolve" in report.findings[0].text


def test_an_address_the_network_policy_refuses_is_never_dialled():
    """The metadata address: said so at once, with no connection tried (no timeout, no libpq text)."""
    report = server_check(
        endpoint=Endpoint(host="169.254.169.254", port=80, database="app", user="monitor", sslmode="prefer"),
        password="pw-1",
    )
    assert not report.connected and report.failure == "policy"
    assert report.findings[0].text == (
        "Not allowed: monitor@169.254.169.254:80/app: the console does not connect there: 169.254.169.254 is a "
        "link-local or cloud metadata address"
    )
    assert report.elapsed_ms < 1000


def test_a_database_that_does_not_exist(pg_clusters):
    report = check(pg_clusters[17], database="no_such_db")
    assert report.failure == "database" and "There is no database 'no_such_db'" in report.findings[0].text


def test_the_monitoring_role_sql_is_the_documented_one():
    block = re.search(r"## Monitoring role.*?```sql\n(.*?)```", MONITORING_ROLE_DOC.read_text(), re.S)
    assert block is not None and block.group(1).strip() == MONITORING_ROLE_SQL.strip()
