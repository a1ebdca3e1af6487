"""What the weekly report's tests share: a real SMTP server on loopback (aiosmtpd) that keeps what it receives
and can refuse an address, Django's SMTP backend pointed at it, Celery running tasks in this process, and
the known history's organization with members who opted in.

Test modules make their fixtures from these (a fixture imported into a module would shadow its own name)."""

from __future__ import annotations

import email
import email.policy
import re
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from email.message import EmailMessage

import pytest
from aiosmtpd.controller import Controller
from django.contrib.auth.models import User

from inventory.models import Membership
from reports.models import ReportOptIn, ReportSchedule
from reports.weeks import ReportWeek, parse_week

CONSOLE = "https://console.example"
PNG = b"\x89PNG\r\n\x1a\n"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Inbox:
    """The SMTP server's handler: every message accepted, per recipient; `refuse` answers an address with a
    reply (e.g. "550 5.1.1 no such user") the next `times` times (None: always)."""

    messages: list[tuple[list[str], bytes]] = field(default_factory=list)
    refuse: dict[str, tuple[str, int | None]] = field(default_factory=dict)
    refused: list[str] = field(default_factory=list)

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        rule = self.refuse.get(address.lower())
        if rule is not None:
            reply, times = rule
            if times is None or times > 0:
                self.refuse[address.lower()] = (reply, None if times is None else times - 1)
                self.refused.append(address.lower())
                return reply
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        self.messages.append((list(envelope.rcpt_tos), envelope.content))
        return "250 Message accepted for delivery"

    def to(self, address: str) -> list[EmailMessage]:
        return [parse(raw) for rcpt, raw in self.messages if address in [r.lower() for r in rcpt]]

    def count(self, address: str | None = None) -> int:
        return len(self.messages) if address is None else len(self.to(address))


@dataclass
class SmtpServer:
    inbox: Inbox
    port: int
    controller: Controller | None = None

    def start(self) -> None:
        self.controller = Controller(self.inbox, hostname="127.0.0.1", port=self.port)
        self.controller.start()

    def stop(self) -> None:
        if self.controller is not None:
            self.controller.stop()
            self.controller = None


def parse(raw: bytes) -> EmailMessage:
    return email.message_from_bytes(raw, policy=email.policy.default)


@dataclass(frozen=True)
class MailParts:
    text: str
    html: str
    images: dict[str, bytes]  # Content-ID (without brackets) -> PNG


def mail_parts(message: EmailMessage) -> MailParts:
    """The parts of a weekly mail, checking its structure: alternative[text, related[html, png...]]."""
    assert message.get_content_type() == "multipart/alternative"
    text_part, related = message.get_payload()
    assert text_part.get_content_type() == "text/plain"
    assert related.get_content_type() == "multipart/related"
    html_part, *pngs = related.get_payload()
    assert html_part.get_content_type() == "text/html"
    images = {}
    for part in pngs:
        assert part.get_content_type() == "image/png"
        images[part["Content-ID"].strip("<>")] = part.get_payload(decode=True)
    return MailParts(text_part.get_content(), html_part.get_content(), images)


def cids(html: str) -> set[str]:
    return set(re.findall(r'src="cid:([^"]+)"', html))


@contextmanager
def running_smtp(settings) -> Iterator[SmtpServer]:
    """A running SMTP server on loopback, and Django's SMTP backend sending to it (`settings`: pytest-django's)."""
    server = SmtpServer(Inbox(), free_port())
    server.start()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", server.port
    settings.EMAIL_HOST_USER = settings.EMAIL_HOST_PASSWORD = ""
    settings.EMAIL_USE_TLS = settings.EMAIL_USE_SSL = False
    settings.EMAIL_TIMEOUT = 5
    settings.DEFAULT_FROM_EMAIL = "pgconsole <reports@console.example>"
    settings.CONSOLE_URL = CONSOLE
    try:
        yield server
    finally:
        server.stop()


@contextmanager
def eager_tasks() -> Iterator[None]:
    """Tasks queued by a task run at once, in this process (retries too, without their waits). An eager task's
    exception stays in its result (a retry is one, too): the tests look at what it recorded."""
    from console.celery import app

    saved = app.conf.task_always_eager, app.conf.task_eager_propagates
    app.conf.task_always_eager, app.conf.task_eager_propagates = True, False
    try:
        yield
    finally:
        app.conf.task_always_eager, app.conf.task_eager_propagates = saved


@dataclass(frozen=True)
class Readers:
    alice: User  # viewer, opted in
    bob: User  # dba, opted in
    carol: User  # admin, not opted in
    client: str  # an extra address (a client stakeholder without an account)


def make_readers(known_history) -> Readers:
    """Three members of the known history's organization (two opted in) and an extra address."""
    org = known_history.organization
    users = {}
    for name, role in (
        ("alice", Membership.Role.VIEWER),
        ("bob", Membership.Role.DBA),
        ("carol", Membership.Role.ADMIN),
    ):
        # No password: the console's tests log in with force_login (hashing one costs a third of a second).
        users[name] = User.objects.create_user(f"wk-{name}", email=f"{name}@acme.example")
        Membership.objects.create(user=users[name], organization=org, role=role)
    for name in ("alice", "bob"):
        ReportOptIn.objects.create(organization=org, user=users[name])
    ReportSchedule.objects.create(organization=org, extra_recipients=["cto@client.example"])
    return Readers(**users, client="cto@client.example")


def monday_after(known_history, hours: float = 8) -> str:
    """An ISO time `hours` into the Monday after the report's week (UTC): its report is due at 07:00."""
    return (known_history.week.window.end + timedelta(hours=hours)).isoformat()


def week_after(week: ReportWeek, n: int) -> ReportWeek:
    """The ISO week `n` weeks after `week`, in its time zone."""
    return parse_week((week.window.start + timedelta(days=7 * n)).strftime("%G-W%V"), time_zone=week.time_zone)


# Fixtures of the weekly report's tests, in tests/reports/ and the console's report page (registered in
# tests/conftest.py).
@pytest.fixture
def readers(known_history):
    """Members of rep-acme by role, with addresses and opt-ins."""
    return make_readers(known_history)


@pytest.fixture
def smtp(settings):
    """A real SMTP server on loopback (aiosmtpd) that the console's mail settings point at."""
    with running_smtp(settings) as server:
        yield server
