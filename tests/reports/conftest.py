"""Fixtures of the weekly reports' tests (the known history they read is tests/known_history.py's)."""

from __future__ import annotations

import pytest


@pytest.fixture
def readers(known_history):
    """Members of rep-acme by role, with addresses and opt-ins (tests/reports/weekly_world.py)."""
    from tests.reports.weekly_world import make_readers

    return make_readers(known_history)


@pytest.fixture
def smtp(settings):
    """A real SMTP server on loopback (aiosmtpd) that the console's mail settings point at."""
    from tests.reports.weekly_world import running_smtp

    with running_smtp(settings) as server:
        yield server
