"""Texts stored before the redaction learned a secret are redacted again: a statement collected from a real server
records the redaction's version; one stored by an older version (its secret kept, as that version kept it) is
redacted by beat's task, in batches, and once only."""

from __future__ import annotations

import pytest

from history import redact
from history.models import Statement
from readings.tasks import redact_texts_again
from tests.world import collect, register, run

pytestmark = pytest.mark.django_db
SECRET = "Qz7slackpath0000"
OLD_TEXT = f"SELECT 1 /* notify https://hooks.slack.com/services/T00/B00/{SECRET} */"


def test_texts_of_an_older_redaction_are_redacted_again_once(pg_clusters):
    c = pg_clusters[15]
    run(c, "SELECT pg_stat_statements_reset()")
    run(c, "SELECT 'redact-again' /* plain */")
    server = register(c)
    collect(server)
    fresh = Statement.objects.filter(server=server, query__contains="plain").get()
    assert fresh.redacted_with == redact.VERSION  # what the collector stores records the version
    # As a version that did not know Slack's webhooks stored one: the secret kept, version 1.
    old = Statement.objects.filter(server=server).exclude(pk=fresh.pk).first()
    Statement.objects.filter(pk=old.pk).update(query=OLD_TEXT, redacted_with=1)

    assert redact_texts_again() >= 1
    old.refresh_from_db()
    assert SECRET not in old.query and "hooks.slack.com/services/<redacted>" in old.query
    assert old.redacted_with == redact.VERSION
    assert redact_texts_again() == 0  # done: the next run finds nothing
    fresh.refresh_from_db()
    assert fresh.query == "SELECT $1 /* plain */" and fresh.redacted_with == redact.VERSION
