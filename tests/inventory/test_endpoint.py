"""Endpoint: where and how to connect to a monitored server, its password aside, as one immutable value. It must
be taken whole from any mapping that holds its fields among others (a form's cleaned data, a stored server) and
name itself for people; this file shows both, and that it can key a cache of connections."""

import dataclasses

import pytest

from inventory.endpoint import ENDPOINT_FIELDS, Endpoint
from inventory.models import Server

GIVEN = {"host": "db1.example", "port": 6432, "database": "app", "user": "monitor", "sslmode": "verify-full"}


def test_an_endpoint_takes_its_fields_from_a_mapping_and_leaves_the_rest():
    cleaned = {**GIVEN, "ssl_root_cert": "system", "require_scram": True, "password": "secret", "interval_s": 30}
    endpoint = Endpoint.of(cleaned)
    assert dataclasses.asdict(endpoint) == {name: cleaned[name] for name in ENDPOINT_FIELDS}
    assert "password" not in ENDPOINT_FIELDS and not hasattr(endpoint, "password")


def test_fields_a_mapping_lacks_take_their_defaults_but_the_destination_is_required():
    endpoint = Endpoint.of(GIVEN)
    assert (endpoint.ssl_root_cert, endpoint.require_scram) == ("", False)
    for name in GIVEN:
        with pytest.raises(TypeError, match=f"missing 1 required positional argument: '{name}'"):
            Endpoint.of({k: v for k, v in GIVEN.items() if k != name})


def test_a_stored_server_gives_the_endpoint_of_its_own_fields():
    server = Server(**GIVEN, name="db1", ssl_root_cert="system", require_scram=True, interval_s=30)
    assert server.endpoint == Endpoint(**GIVEN, ssl_root_cert="system", require_scram=True)


def test_the_label_names_user_host_port_and_database():
    endpoint = Endpoint.of(GIVEN)
    assert endpoint.label == f"{GIVEN['user']}@{GIVEN['host']}:{GIVEN['port']}/{GIVEN['database']}"
    assert endpoint.label == "monitor@db1.example:6432/app"


def test_an_endpoint_is_a_value_that_cannot_change_under_a_kept_connection():
    a, b = Endpoint.of(GIVEN), Endpoint.of(dict(GIVEN))
    assert a == b and len({a: 1, b: 2}) == 1
    assert a != dataclasses.replace(a, sslmode="require") and a != dataclasses.replace(a, require_scram=True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.host = "elsewhere"
