"""collectors/texts/reading.py: a snapshot reads texts within its budget and says what it put off."""

import pytest

from collectors.texts.reading import READING
from history.models import TextStatus
from tests.world import collect, register, run

pytestmark = pytest.mark.django_db(transaction=True)


def test_texts_past_the_budget_are_put_off_and_said(pg_clusters, settings):
    c = pg_clusters[15]
    run(c, "DROP TABLE IF EXISTS tx_reading; CREATE TABLE tx_reading (id int, v int, w int)")
    server = register(c)
    collect(server)
    settings.COLLECTOR = {**settings.COLLECTOR, READING.budget.rows: 1}
    for column in ("id", "v", "w"):
        run(c, f"SELECT count(*) FROM tx_reading WHERE {column} > 7")
    result = collect(server)
    pending = server.statements.filter(query__isnull=True, text_status=TextStatus.PENDING).count()
    assert pending >= 2
    note = next(n for n in result.notes if "put off" in n)
    assert note.startswith(f"{pending} query texts put off to the next snapshots") and "1 texts" in note
    settings.COLLECTOR = {**settings.COLLECTOR, READING.budget.rows: 2000}
    collect(server)
    assert not server.statements.filter(text_status=TextStatus.PENDING).exists()
