"""history/store.py, delete_server_history: it waits for a collection under way, and refuses to run
where it could not (outside a transaction)."""

import threading

import pytest
from django.db import connection, transaction

from history.store import LOCK_NAMESPACE, delete_server_history
from inventory.connection import parse_dsn
from inventory.models import Server
from inventory.services import server_create

pytestmark = pytest.mark.django_db(transaction=True)


def _server() -> Server:
    return server_create(
        name="db1", connection=parse_dsn("postgresql://mon@db1.example:5432/app")
    )  # never connected to


def test_waits_for_the_collection_under_way():
    server = _server()
    errors: list[BaseException] = []
    done = threading.Event()

    def delete() -> None:  # another thread: its own connection, like a web request
        try:
            with transaction.atomic():
                delete_server_history(server.pk)
                Server.objects.filter(pk=server.pk).delete()
        except BaseException as exc:  # reported by the test below
            errors.append(exc)
        finally:
            connection.close()
            done.set()

    with connection.cursor() as cur:  # what server_collect holds while it collects
        cur.execute("SELECT pg_advisory_lock(%s, %s)", [LOCK_NAMESPACE, server.pk])
    threading.Thread(target=delete, daemon=True).start()
    try:
        assert not done.wait(1), "the delete did not wait for the collection"
    finally:
        with connection.cursor() as cur:
            cur.execute("SELECT pg_advisory_unlock(%s, %s)", [LOCK_NAMESPACE, server.pk])
    assert done.wait(30) and not errors, errors
    assert not Server.objects.filter(pk=server.pk).exists()


def test_refuses_to_run_outside_a_transaction():
    with pytest.raises(RuntimeError):
        delete_server_history(_server().pk)
