"""The network policy for monitored servers: what is refused always, what by configuration, through the API
and the console's form at save time, and again at connect time (a name that now resolves elsewhere)."""

from __future__ import annotations

import pytest
from django.db import connection

from collectors import connection as monitored
from collectors.services import server_collect
from console.keys import generate_credentials_key, generate_secret_key
from inventory import network_policy
from inventory.models import Server
from tests.console.test_settings import _python
from tests.world import register

HISTORY_PORT = int(connection.settings_dict["PORT"])
REDIS_PORT = 6379


@pytest.mark.parametrize(
    ("host", "port", "why"),
    [
        ("169.254.169.254", 80, "link-local or cloud metadata"),  # AWS, GCP, Azure's instance metadata
        ("::ffff:169.254.169.254", 80, "link-local or cloud metadata"),  # the same, as IPv4-mapped IPv6
        ("fd00:ec2::254", 80, "link-local or cloud metadata"),
        ("100.100.100.200", 80, "link-local or cloud metadata"),
        ("168.63.129.16", 80, "link-local or cloud metadata"),
        ("fe80::1", 5432, "link-local or cloud metadata"),
        ("0.0.0.0", 5432, "not the address of a server"),
        ("224.0.0.1", 5432, "not the address of a server"),
        ("127.0.0.1", HISTORY_PORT, "the console's own history store or Redis"),
        ("127.0.0.2", HISTORY_PORT, "the console's own history store or Redis"),  # any loopback address
        ("localhost", REDIS_PORT, "the console's own history store or Redis"),
        ("240.0.0.1", 5432, "not the address of a server"),
    ],
)
def test_refused_always(host, port, why, settings):
    settings.MONITOR_ALLOW_LOOPBACK = settings.MONITOR_ALLOW_PRIVATE = True
    with pytest.raises(network_policy.Refused, match=why):
        network_policy.check(host, port)
    with pytest.raises(network_policy.Refused, match=why):
        network_policy.dial_address(host, port)


@pytest.mark.parametrize(
    ("host", "why"),
    [
        ("/var/run/postgresql", "Unix sockets"),
        ("@abstract", "Unix sockets"),
        ("db1,db2", "one host per server"),
        ("db1 host=evil", "not a host name or an IP address"),
        ("", "a host is required"),
    ],
)
def test_hosts_that_are_not_one_host(host, why):
    with pytest.raises(network_policy.Refused, match=why):
        network_policy.check(host, 5432)


def test_loopback_and_private_ranges_follow_the_configuration(settings):
    settings.MONITOR_ALLOW_LOOPBACK = settings.MONITOR_ALLOW_PRIVATE = True
    for host in ("127.0.0.1", "::1", "localhost", "10.1.2.3", "172.20.0.5", "192.168.1.9", "fd12::1"):
        network_policy.check(host, 5433)
    assert network_policy.dial_address("localhost", 5433) in ("127.0.0.1", "::1")
    settings.MONITOR_ALLOW_LOOPBACK = False
    with pytest.raises(network_policy.Refused, match="loopback address, refused .*MONITOR_ALLOW_LOOPBACK"):
        network_policy.check("localhost", 5433)
    network_policy.check("10.1.2.3", 5433)
    settings.MONITOR_ALLOW_PRIVATE = False
    for host in ("10.1.2.3", "172.20.0.5", "192.168.1.9", "100.64.0.1", "fd12::1"):
        with pytest.raises(network_policy.Refused, match="private address, refused .*MONITOR_ALLOW_PRIVATE"):
            network_policy.check(host, 5433)
    network_policy.check("8.8.8.8", 5432)  # a public address is a server's


def test_the_defaults_outside_development():
    """Loopback only in development (DEBUG); private ranges allowed (a team monitors its LAN)."""
    code = "import console.settings as s; print(s.MONITOR_ALLOW_LOOPBACK, s.MONITOR_ALLOW_PRIVATE)"
    production = _python(
        code, DEBUG="false", SECRET_KEY=generate_secret_key(), CREDENTIALS_KEY=generate_credentials_key()
    )
    assert production.stdout.split() == ["False", "True"], production.stderr
    assert _python(code, DEBUG="true").stdout.split() == ["True", "True"]


def test_a_name_that_does_not_resolve_is_saved_and_never_dialled():
    network_policy.check("db1.example", 5432)  # accepted at save time: checked at every connection
    with pytest.raises(network_policy.Unresolvable, match="could not translate host name 'db1.example'"):
        network_policy.dial_address("db1.example", 5432)


@pytest.mark.django_db(transaction=True)
def test_the_policy_holds_again_at_connect_time(pg_clusters, settings):
    """Saved while its name was allowed; when it no longer is (here: loopback turned off, as a name rebound to
    another address would be), the collection is refused before any connection, with the reason on the server."""
    server = register(pg_clusters[17], name="rebound")
    Server.objects.filter(pk=server.pk).update(host="localhost")
    assert server_collect(server_id=server.pk).ok  # dialled at the address checked, the name kept for TLS
    settings.MONITOR_ALLOW_LOOPBACK = False
    monitored.close_all()  # a kept connection stays where it was dialled; the next one is checked again
    result = server_collect(server_id=server.pk)
    server.refresh_from_db()
    assert not result.ok and result.error_code == "refused_by_policy"
    assert server.last_error_class == "refused_by_policy"
    assert (
        "localhost resolves to" in server.last_error_message and "MONITOR_ALLOW_LOOPBACK" in server.last_error_message
    )


def test_an_address_dialled_before_is_checked_again_without_a_lookup(settings, monkeypatch):
    """recheck_address: the address a snapshot's first connection dialled, for its other connections: the policy
    now, and no lookup of the name (which may answer otherwise meanwhile)."""
    settings.MONITOR_ALLOW_LOOPBACK = settings.MONITOR_ALLOW_PRIVATE = True

    resolve = network_policy.resolve

    def no_lookup(host, port):
        assert host != "db1.example", "the server's name looked up"
        return resolve(host, port)  # the console's own services' (their addresses are refused)

    monkeypatch.setattr(network_policy, "resolve", no_lookup)
    assert network_policy.recheck_address("db1.example", "10.1.2.3", 5432) == "10.1.2.3"
    with pytest.raises(network_policy.Refused, match="db1.example resolves to 169.254.169.254: .*link-local"):
        network_policy.recheck_address("db1.example", "169.254.169.254", 5432)
    with pytest.raises(network_policy.Refused, match="not an IP address"):
        network_policy.recheck_address("db1.example", "db2.example", 5432)
    settings.MONITOR_ALLOW_PRIVATE = False
    with pytest.raises(network_policy.Refused, match="MONITOR_ALLOW_PRIVATE"):
        network_policy.recheck_address("db1.example", "10.1.2.3", 5432)
