"""The selectors' modules read the synthetic histories (synthetic.py, configured.py), each module its own: some
tests run the periodic rollup, which would move what the next module reads."""

from datetime import timedelta

import pytest
from django.utils import timezone

from console.services import server_delete
from inventory.models import Server
from tests.history_world import build
from tests.readtier.configured import STEP, build_configured, minute, schedule_for
from tests.readtier.synthetic import synthetic_history


@pytest.fixture(scope="module")
def history(django_db_setup, django_db_blocker):
    """A synthetic server with 60 statements, a snapshot every 10 minutes, an outage of 3.5 hours."""
    with django_db_blocker.unblock(), synthetic_history("selectors-synthetic") as server:
        yield server


@pytest.fixture(scope="module")
def configured_history(django_db_setup, django_db_blocker):
    """A Configured server over the last 26 hours (ending now), in organization h2-acme."""
    now = minute(timezone.now())
    with django_db_blocker.unblock():
        server, synth = build_configured(
            "h2-configured",
            organization="h2-acme",
            start=now - timedelta(hours=26),
            end=now,
            schedule=schedule_for(now),
            late_from=now - timedelta(hours=3),
        )
        yield server, synth, now
        server_delete(server=server)


@pytest.fixture(scope="module")
def second_server(configured_history, django_db_blocker):
    """A plain synthetic server over the same hours, in the same organization."""
    configured, _, now = configured_history
    with django_db_blocker.unblock():
        server = build("h2-second", n=25, start=now - timedelta(hours=26), end=now, step=STEP, seed=3)
        Server.objects.filter(pk=server.pk).update(organization=configured.organization)
        yield server
        server_delete(server=server)
