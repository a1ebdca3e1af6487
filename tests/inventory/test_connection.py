"""Connection: a server's host, port, database, user, password and sslmode as one checked value, whether typed in
fields or read from a libpq DSN (parse_dsn); a DSN's faults are said with "malformed DSN" and what is wrong."""

import dataclasses

import pytest
from django.core.exceptions import ValidationError

from inventory.connection import Connection, parse_dsn
from inventory.models import Server

TYPED = {"host": "db1.example", "port": 6432, "database": "app", "user": "monitor", "password": "s3cret"}


def test_a_connection_needs_only_a_host_and_takes_the_consoles_defaults():
    connection = Connection(host="db1.example")
    assert dataclasses.astuple(connection) == ("db1.example", 5432, "postgres", "postgres", "", "require")
    assert connection.sslmode == Server.SslMode.REQUIRE  # new servers require TLS


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"host": ""}, "a host is required"),
        ({"port": 0}, "invalid port '0'"),
        ({"port": 65536}, "invalid port '65536'"),
        ({"sslmode": "sometimes"}, "invalid sslmode 'sometimes'"),
    ],
)
def test_a_connection_refuses_what_no_server_can_be_reached_at(changes, message):
    with pytest.raises(ValidationError) as refused:
        Connection(**TYPED | changes)
    assert refused.value.messages == [message]


def test_the_ports_bounds_and_every_sslmode_are_accepted():
    assert [Connection(host="h", port=port).port for port in (1, 65535)] == [1, 65535]
    assert [Connection(host="h", sslmode=mode).sslmode for mode in Server.SslMode.values] == Server.SslMode.values


def test_a_connection_takes_its_fields_from_a_mapping_and_leaves_the_rest():
    cleaned = {**TYPED, "sslmode": "verify-full", "name": "db1", "ssl_root_cert": "system", "interval_s": 30}
    assert Connection.of(cleaned) == Connection(**TYPED, sslmode="verify-full")
    assert Connection.of({"host": "db1.example"}) == Connection(host="db1.example")  # an API request without them


def test_the_server_fields_leave_the_password_out_and_the_repr_never_shows_it():
    connection = Connection(**TYPED)
    assert connection.server_fields() == {
        "host": "db1.example",
        "port": 6432,
        "database": "app",
        "user": "monitor",
        "sslmode": "require",
    }
    assert "s3cret" not in repr(connection) and "db1.example" in repr(connection)


def test_a_connection_is_a_value():
    a, b = Connection(**TYPED), Connection(**dict(TYPED))
    assert a == b and a != dataclasses.replace(a, password="other")
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.host = "elsewhere"


@pytest.mark.parametrize(
    "dsn",
    [
        "postgresql://monitor:s3cret@db1.example:6432/app",
        "host=db1.example port=6432 dbname=app user=monitor password=s3cret sslmode=require",
    ],
)
def test_a_dsn_or_a_uri_gives_the_connection_its_fields_would(dsn):
    assert parse_dsn(dsn) == Connection(**TYPED)


def test_what_a_dsn_leaves_out_or_empty_takes_the_defaults():
    assert parse_dsn("host=db1.example") == Connection(host="db1.example")
    assert parse_dsn("postgresql://@db1.example/?sslmode=verify-full") == Connection(
        host="db1.example", sslmode="verify-full"
    )
    assert parse_dsn("host=db1.example dbname='' user='' password=''") == Connection(host="db1.example")


@pytest.mark.parametrize(
    "dsn, message",
    [
        ("dbname=app", "malformed DSN: a host is required (e.g. postgresql://monitor@db1:5432/postgres)"),
        ("host=db1 port=notaport", "malformed DSN: invalid port 'notaport'"),
        ("host=db1 port=''", "malformed DSN: invalid port ''"),
        ("host=db1 port=²", "malformed DSN: invalid port '²'"),
        ("host=db1 port=70000", "malformed DSN: invalid port '70000'"),
        ("postgresql://mon@db1:5432/x?sslmode=sometimes", "malformed DSN: invalid sslmode 'sometimes'"),
        ("host=db1 sslmode=''", "malformed DSN: invalid sslmode ''"),
        (
            "host=db1 sslrootcert=/etc/ca.pem passfile=/x",
            "malformed DSN: unsupported parameters ['passfile', 'sslrootcert']",
        ),
    ],
)
def test_a_malformed_dsn_is_refused_with_what_is_wrong(dsn, message):
    with pytest.raises(ValidationError) as refused:
        parse_dsn(dsn)
    assert refused.value.messages == [message]


def test_a_dsn_libpq_cannot_read_is_refused_with_libpqs_words():
    with pytest.raises(ValidationError, match=r"^\['malformed DSN: missing \"=\" after \"this\"") as refused:
        parse_dsn("this is not a dsn")
    assert "\n" not in refused.value.messages[0]
