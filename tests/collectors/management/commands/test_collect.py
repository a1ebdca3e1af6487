"""manage.py collect --all: every enabled server collected once, a failing one reported without stopping the others."""

import pytest
from django.core.management import call_command

from tests.world import history_counts, register

pytestmark = pytest.mark.django_db(transaction=True)


def test_one_failing_server_does_not_stop_the_others(pg_clusters, capsys):
    good = register(pg_clusters[14], name="good")
    bad = register(pg_clusters[14], name="bad", password="wrong")
    call_command("collect", "--all")
    out = capsys.readouterr().out
    assert "good: baseline of" in out
    assert "bad: FAILED [auth_failed]" in out
    good.refresh_from_db()
    assert good.last_success_at is not None and good.consecutive_failures == 0
    assert history_counts(good)["collectors_snapshot"] == 1
    assert history_counts(bad)["collectors_snapshot"] == 0
