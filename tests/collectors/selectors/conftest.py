"""The selectors' modules read one synthetic history (synthetic.py), built once for the package."""

import pytest

from tests.collectors.selectors.synthetic import synthetic_history


@pytest.fixture(scope="package")
def history(django_db_setup, django_db_blocker):
    """A synthetic server with 60 statements, a snapshot every 10 minutes, an outage of 3.5 hours."""
    with django_db_blocker.unblock(), synthetic_history("selectors-synthetic") as server:
        yield server
