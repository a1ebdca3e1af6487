"""The history store's beat tasks, called as a worker calls them. Texts stored before the redaction learned a
secret are redacted again: a statement collected from a real server records the redaction's version; one stored by
an older version (its secret kept, as that version kept it) is redacted by beat's task, in batches, and once only.
The partitions are kept ahead, and the rollups run until nothing is stale. (Through a real worker and beat:
tests/production/test_beat_flows.py.)"""

from __future__ import annotations

from dataclasses import fields
from datetime import UTC, datetime

import pytest
from django.db import connection

from history import partitions, redact, rollups, tables
from history.models import Statement
from history.tasks import maintain_partitions, redact_texts_again, roll_up_history
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


def test_maintain_partitions_creates_todays_and_the_next_ones_and_prunes(pg_clusters):
    partitions.forget_cache()  # as a worker that just started: every partition ahead is looked at (and created
    # if missing; those it creates are remembered once committed, which this test's transaction never is)
    out = maintain_partitions()
    assert set(out) == {"created", "dropped", "pruned", "busy", "plan_spend_pruned"}
    today = partitions.partition_name(tables.SNAPSHOT.name, datetime.now(UTC))
    assert today in out["created"]
    with connection.cursor() as cur:
        cur.execute("SELECT 1 FROM pg_class WHERE relname = %s", [today])
        assert cur.fetchone() is not None


def test_roll_up_history_rolls_what_is_stale_once(pg_clusters):
    c = pg_clusters[15]
    server = register(c)
    collect(server)
    run(c, "SELECT 'roll-up' /* tasks */")
    collect(server)
    first = roll_up_history()
    assert set(first) == {f.name for f in fields(rollups.RollupResult)} and first["failed"] == []
    assert roll_up_history() == {"hours": 0, "days": 0, "failed": []}  # nothing stale any more
