"""What a failed collection says to whom: libpq's own words, the addresses it tried and its timings map the
console's network (here: an address of the console's Redis answering a TLS request), so console staff read them,
and every other reader reads the console's own sentence for the failure's class: a member on the fleet, the
server page and the servers page, through the API, in the weekly mail, an alert to a channel and an audit bundle."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from alerts.evidence import conditions_now
from alerts.models import Rule
from collectors.errors import summary
from exports.audit import audit_content
from exports.audit_data import audit_json
from history.models import FailedCollection
from inventory.models import Membership, Server
from readtier import Window
from reports.digest import organization_digest
from reports.selectors import report_week
from tests.api_world import build_api_world

pytestmark = pytest.mark.django_db
LIBPQ = (
    'TLS to monitor@db1:5432/app failed: connection to server at "10.20.30.40", port 6379 failed: received invalid '
    "response to SSL negotiation: - (after 0.012 s)"
)
SECRETS = ("10.20.30.40", "6379", "SSL negotiation", "0.012")
#: A secret as libpq writes it, not as digits inside another number (an id or a timestamp of the bundle may hold
#: "6379": it failed so once).
FOUND = [re.compile(rf"(?<![\d.]){re.escape(secret)}(?!\d)") for secret in SECRETS]
SENTENCE = summary("tls")


@pytest.fixture
def failing():
    world = build_api_world()
    now = timezone.now()
    server = Server.objects.create(organization=world.acme, name="db1", host="db1", user="monitor")
    Server.objects.filter(pk=server.pk).update(
        consecutive_failures=3,
        last_error_class="tls",
        last_error_message=LIBPQ,
        last_attempt_at=now,
        last_success_at=now - timedelta(hours=2),
        created_at=now - timedelta(days=30),
    )
    FailedCollection.objects.create(server_id=server.pk, at=now, error_class="tls", message=LIBPQ)
    staff = get_user_model().objects.create_user("operator", password="x", is_staff=True)
    Membership.objects.create(organization=world.acme, user=staff, role="viewer")
    return world, Server.objects.get(pk=server.pk), staff


def _page(user, path: str) -> str:
    client = Client()
    client.force_login(user)
    response = client.get(path)
    assert response.status_code == 200, path
    return response.content.decode()


def _hides(text: str, where: str) -> None:
    for secret, found in zip(SECRETS, FOUND, strict=True):
        assert not found.search(text), (where, secret)


@pytest.mark.parametrize("path", ["/fleet/", "/servers/{id}/", "/manage/servers/"])
def test_a_member_reads_the_consoles_sentence_and_staff_read_libpq(failing, path):
    world, server, staff = failing
    member = world.users["admin"]  # an admin of the organization is no console staff
    url = path.format(id=server.pk)
    page = _page(member, url)
    _hides(page, url)
    assert SENTENCE.replace("'", "&#x27;") in page, url
    assert "10.20.30.40" in _page(staff, url), url


def test_the_api_answers_each_reader_as_the_pages_do(failing):
    world, server, staff = failing
    member = world.client("viewer")
    one = member.get(f"/api/v1/servers/{server.pk}/").json()
    assert (one["last_error_class"], one["last_error_message"]) == ("tls", SENTENCE)
    fleet = member.get("/api/v1/fleet/").json()["results"]
    assert [r["error_message"] for r in fleet if r["server_id"] == server.pk] == [SENTENCE]
    _hides(member.get("/api/v1/servers/").content.decode(), "servers list")
    client = Client()
    client.force_login(staff)
    assert client.get(f"/api/v1/servers/{server.pk}/").json()["last_error_message"] == LIBPQ


def test_mail_alerts_and_bundles_carry_only_the_sentence(failing):
    world, server, _ = failing
    now = timezone.now()
    digest = organization_digest(
        organization_id=world.acme.pk, week=report_week(organization_id=world.acme.pk, now=now)
    )
    assert [s.error_message for s in digest.servers] == [SENTENCE]
    rule = Rule.objects.create(organization=world.acme, name="down", kind="server_down", down_minutes=5)
    (condition,) = conditions_now(rule=rule, servers=[server], now=now)[server.pk]
    _hides(str(condition), "alert")
    assert SENTENCE in str(condition)
    content = audit_content(
        organization_id=world.acme.pk, server_ids=[server.pk], window=Window(now - timedelta(hours=1), now), now=now
    )
    bundle = str(audit_json(content))
    _hides(bundle, "audit bundle")
    assert SENTENCE in bundle
