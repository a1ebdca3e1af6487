"""The selectors' modules read the synthetic history (synthetic.py), each its own: some tests run the periodic
rollup, which would move what the next module reads."""

import pytest

from tests.collectors.selectors.synthetic import synthetic_history


@pytest.fixture(scope="module")
def history(django_db_setup, django_db_blocker):
    """A synthetic server with 60 statements, a snapshot every 10 minutes, an outage of 3.5 hours."""
    with django_db_blocker.unblock(), synthetic_history("selectors-synthetic") as server:
        yield server
