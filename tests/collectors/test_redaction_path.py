"""The redaction corpus through the whole path: every statement run on a real PostgreSQL 15 (which keeps every
literal of a utility statement), kept there with its secret, collected, then read back from the history store,
the console's pages (the server's statements and each statement's page), the API (JSON and CSV), the weekly mail
and an audit bundle in every format: no secret anywhere. Strict mode: no literal and no comment at all."""

from __future__ import annotations

import html
import re
import subprocess
import zipfile
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from accounts.tokens import token_create
from exports.formats.bundle import FORMATS
from exports.services import audit_export_write, export_window
from history.models import Statement
from inventory.models import Membership, Server
from reports.selectors import preview_week
from reports.services import report_send_test
from tests.collectors.redaction_corpus import CORPUS, DATABASE, SETUP, TEARDOWN
from tests.conftest import APP_DB
from tests.reports.weekly_world import running_smtp
from tests.world import collect, register, run

pytestmark = pytest.mark.django_db(transaction=True)
MAJOR = 15


@pytest.fixture
def corpus_run(pg_clusters):
    """The corpus run once on the cluster, in a database of its own; the cluster's texts as it keeps them."""
    c = pg_clusters[MAJOR]
    run(c, f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)", dbname="postgres")
    run(c, f"CREATE DATABASE {DATABASE}", dbname="postgres")
    for statement in SETUP:
        run(c, statement, dbname=DATABASE)
    server = register(c, name="redaction")
    collect(server)  # the baseline: the corpus is new at the next snapshot
    for statement, _ in CORPUS:
        run(c, statement, dbname=DATABASE)
    with psycopg.connect(c.dsn(APP_DB), autocommit=True) as conn:  # where the extension is created
        kept = [r[0] for r in conn.execute("SELECT query FROM pg_stat_statements")]
    yield c, server, kept
    for statement in TEARDOWN:
        run(c, statement, dbname=DATABASE)
    run(c, f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)", dbname="postgres")


def _leaks(text: str) -> list[str]:
    return [secret for _, secret in CORPUS if secret in text]


def test_no_secret_of_the_corpus_reaches_a_reader(corpus_run):
    c, server, kept = corpus_run
    # The server keeps every secret: the test sees what a reader would see without redaction.
    assert all(any(secret in q for q in kept) for _, secret in CORPUS), [
        s for _, s in CORPUS if not any(s in q for q in kept)
    ]
    collect(server)
    stored = list(Statement.objects.filter(server=server).exclude(query=None).values_list("pk", "query"))
    texts = "\n".join(q for _, q in stored)
    assert _leaks(texts) == []
    assert texts.count("<redacted>") >= len(CORPUS)

    user = User.objects.create_user("reader")
    Membership.objects.create(user=user, organization=server.organization, role=Membership.Role.VIEWER)
    _, secret = token_create(user=user, name="redaction")
    api = Client(HTTP_AUTHORIZATION=f"Bearer {secret}")
    url = f"/api/v1/servers/{server.pk}/statements/"
    as_json = api.get(url, {"page_size": 500})
    as_csv = api.get(url, {"page_size": 500, "format": "csv"})
    assert as_json.status_code == as_csv.status_code == 200, as_json.content[:500]
    listed = as_json.json()["results"]
    assert len(listed) >= len(CORPUS)
    assert _leaks(as_json.content.decode()) == [] and _leaks(as_csv.content.decode()) == []
    assert as_csv.content.decode().count("<redacted>") >= len(CORPUS)

    page = Client()
    page.force_login(user)
    statements_page = page.get(f"/servers/{server.pk}/statements/")
    assert statements_page.status_code == 200 and _leaks(statements_page.content.decode()) == []
    for statement_id, _ in stored:
        response = page.get(f"/statements/{statement_id}/")
        assert response.status_code == 200 and _leaks(response.content.decode()) == [], statement_id
        assert _leaks(api.get(f"/api/v1/statements/{statement_id}/").content.decode()) == [], statement_id


def test_strict_mode_stores_no_literal_and_no_comment(corpus_run, settings):
    c, _, _ = corpus_run
    settings.COLLECTOR = {**settings.COLLECTOR, "REDACT_STRICT": True}
    strict = register(c, name="redaction-strict")
    collect(strict)  # a baseline reads the texts of every entry
    texts = [q for q in Statement.objects.filter(server=strict).exclude(query=None).values_list("query", flat=True)]
    corpus_texts = [t for t in texts if "redaction" in t]
    assert len(corpus_texts) >= len(CORPUS)
    for text in texts:
        assert _leaks(text) == []
        bare = text.replace("'<redacted>'", "").replace("/* <redacted> */", "").replace("-- <redacted>", "")
        assert not re.search(r"'|\$\$|\$[a-z]+\$|/\*|--", bare), text
    assert Server.objects.get(pk=strict.pk).consecutive_failures == 0


def _bundle_texts(folder: Path) -> dict[str, str]:
    """Each file of an audit bundle as a reader opens it: PDF through pdftotext, a workbook's XML unzipped."""
    texts = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        if path.suffix == ".pdf":
            texts[str(path.relative_to(folder))] = subprocess.run(
                ["pdftotext", "-layout", str(path), "-"], capture_output=True, text=True, check=True
            ).stdout
        elif path.suffix in (".xlsx", ".zip"):
            with zipfile.ZipFile(path) as z:
                texts[str(path.relative_to(folder))] = "\n".join(
                    html.unescape(z.read(n).decode(errors="replace")) for n in z.namelist() if not n.endswith(".pdf")
                )
        else:
            texts[str(path.relative_to(folder))] = path.read_text()
    return texts


def test_no_secret_reaches_the_weekly_mail_nor_an_audit_bundle(corpus_run, settings, tmp_path):
    """What leaves the console for people outside it: the weekly mail (to an extra recipient, through a real SMTP
    server) and an audit bundle (every format, the zip too)."""
    _, server, _ = corpus_run
    collect(server)
    now = timezone.now()
    organization_id = server.organization_id
    with running_smtp(settings) as smtp:
        week = preview_week(organization_id=organization_id, now=now)
        report_send_test(organization_id=organization_id, week=week, address="auditor@client.example")
        (message,) = smtp.inbox.to("auditor@client.example")
    parts = {p.get_content_type(): p.get_content() for p in message.walk() if p.get_content_maintype() == "text"}
    assert set(parts) == {"text/plain", "text/html"}
    assert _leaks(message.as_string()) == [] and _leaks(parts["text/plain"]) == [] and _leaks(parts["text/html"]) == []
    assert "<redacted>" in parts["text/plain"], "the corpus's statements are the week's top: the mail shows some"

    written = audit_export_write(
        organization_id=organization_id,
        server_ids=[server.pk],
        formats=list(FORMATS),
        window=export_window(start=now - timedelta(hours=1), end=timezone.now()),
        out_dir=tmp_path,
    )
    texts = _bundle_texts(tmp_path)
    assert {Path(w.name).suffix for w in written} >= {".csv", ".json", ".xlsx", ".pdf", ".zip"}
    assert {name: _leaks(text) for name, text in texts.items() if _leaks(text)} == {}
    statements = [name for name, text in texts.items() if text.count("<redacted>") >= len(CORPUS)]
    assert statements, "a bundle file lists the corpus's statements, redacted"
