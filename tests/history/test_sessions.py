"""history/sessions.py: once a process limits its statements, every session it opens on the history store, in
any of its threads (a thread pool's workers), and the calling thread's open one, stops a statement past the limit;
None leaves the sessions opened after it with the server's own. The workers' and beat's:
tests/console/test_celery.py."""

import threading

import pytest
from django.db import OperationalError, connection, connections

from history.sessions import limit_statements
from history.store import statement_timed_out

pytestmark = pytest.mark.django_db(transaction=True)


def _show() -> str:
    with connection.cursor() as cur:
        cur.execute("SHOW statement_timeout")
        return cur.fetchone()[0]


def _in_a_thread() -> str:
    seen: list[str] = []

    def read() -> None:
        try:
            seen.append(_show())
        finally:
            connections.close_all()  # this thread's own

    thread = threading.Thread(target=read)
    thread.start()
    thread.join(30)
    return seen[0]


@pytest.fixture
def unlimited():
    yield
    limit_statements(None)
    connection.close()  # no later test inherits the limit


def test_every_session_opened_after_the_limit_stops_a_statement_past_it(unlimited):
    server_own = _show()
    limit_statements(300)
    assert _show() == "300ms"  # the session already open
    connection.close()
    assert _show() == "300ms"  # a new one
    assert _in_a_thread() == "300ms"  # another thread's
    with pytest.raises(OperationalError) as stopped, connection.cursor() as cur:
        cur.execute("SELECT pg_sleep(2)")
    assert statement_timed_out(stopped.value)
    assert _show() == "300ms"  # the session stays usable, and limited

    limit_statements(None)
    connection.close()
    assert _show() == server_own and _in_a_thread() == server_own
