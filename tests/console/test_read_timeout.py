"""What a web request runs on the history store stops after WEB_STATEMENT_TIMEOUT_MS, and the request answers
503 with what to do, as a page and in the API's error shape: here the servers' table is held by a lock another
session keeps, so the fleet's read would wait for as long as the lock is held."""

from __future__ import annotations

import time

import psycopg
import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client

from inventory.models import Membership, Organization, Server
from tests.api_world import assert_error
from tests.processes import database_url

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def reader(settings):
    settings.WEB_STATEMENT_TIMEOUT_MS = 500
    org = Organization.objects.create(name="slow-reads")
    Server.objects.create(organization=org, name="db1", host="192.0.2.1", user="monitor")
    user = User.objects.create_user("reader", password="x")
    Membership.objects.create(organization=org, user=user, role="viewer")
    client = Client()
    client.force_login(user)
    assert client.get("/fleet/").status_code == 200  # the middleware loaded (as a web process does at start) ...
    connection.close()  # ... before its connections: the next one is made under the limit
    yield client
    connection.close()  # no later test inherits the limit


def test_a_read_past_the_limit_is_stopped_and_said(reader):
    table = Server._meta.db_table
    with psycopg.connect(database_url().replace("postgres://", "postgresql://", 1)) as holder:
        holder.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")  # held until the block ends
        started = time.monotonic()
        page = reader.get("/fleet/")
        took = time.monotonic() - started
        api = reader.get("/api/v1/servers/")
    assert page.status_code == 503 and took < 5, took
    assert "ran past their limit (0.5 s)" in page.content.decode() and "shorter range" in page.content.decode()
    body = assert_error(api, 503, "read_timeout")
    assert "narrower filters" in body["message"]
    assert reader.get("/fleet/").status_code == 200  # the lock gone, the same session reads again
