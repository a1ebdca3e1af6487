"""Fixtures the collectors' tests share."""

import pytest

from collectors import services
from collectors.unit import Reading, registered


@pytest.fixture
def with_reading(monkeypatch):
    """with_reading(reading): the collections of the test run `reading` too, after the registered ones."""

    def add(reading: Reading) -> None:
        monkeypatch.setattr(services, "registered", lambda: (*registered(), reading))

    return add
