"""history.admin: the collected history is shown read-only in the admin, even to a superuser: no statement or
snapshot is added, changed or deleted there (a statement goes only with its server), and a statement without a
text says why. Shown through the admin site's own classes and pages, as a superuser (pytest-django's
admin_client)."""

import pytest
from django.contrib import admin
from django.utils import timezone

from history.admin import SnapshotAdmin, StatementAdmin
from history.models import Snapshot, Statement, TextStatus
from inventory.connection import parse_dsn
from inventory.services import server_create

pytestmark = pytest.mark.django_db

LONG = "SELECT id, name FROM items WHERE name LIKE $1 /* " + "padding " * 20 + "the end */"


def statement(query: str | None = LONG, status: str = TextStatus.STORED) -> Statement:
    server = server_create(name="db1", connection=parse_dsn("postgresql://mon:pw@db1.example:5432/app"))
    return Statement.objects.create(
        server=server, userid=10, dbid=5, queryid=42, query=query, text_status=status, first_seen_at=timezone.now()
    )


def test_both_models_are_registered_with_these_classes():
    assert isinstance(admin.site._registry[Statement], StatementAdmin)
    assert isinstance(admin.site._registry[Snapshot], SnapshotAdmin)


def test_a_long_text_is_cut_to_120_characters_and_a_missing_one_says_why():
    short_query = admin.site._registry[Statement].short_query
    assert len(LONG) > 120 and short_query(statement()) == LONG[:120]
    for status in (TextStatus.NOT_VISIBLE, TextStatus.EVICTED):
        assert short_query(Statement(query=None, text_status=status)) == f"<{status.label}>"


def test_the_statement_list_shows_the_cut_text_and_offers_no_delete(admin_client):
    statement()
    response = admin_client.get("/admin/collectors/statement/")
    page = response.content.decode()
    assert response.status_code == 200 and LONG[:120] in page and "the end" not in page
    assert "delete_selected" not in page


def test_a_statement_is_never_added_changed_or_deleted_here(admin_client):
    s = statement()
    assert admin_client.get("/admin/collectors/statement/add/").status_code == 403
    assert admin_client.post(f"/admin/collectors/statement/{s.pk}/delete/", {"post": "yes"}).status_code == 403
    form = admin_client.get(f"/admin/collectors/statement/{s.pk}/change/")
    assert form.status_code == 200 and 'name="query"' not in form.content.decode()
    admin_client.post(f"/admin/collectors/statement/{s.pk}/change/", {"query": "changed", "queryid": 7})
    assert Statement.objects.filter(pk=s.pk).values_list("query", "queryid").get() == (LONG, 42)
    assert set(StatementAdmin.readonly_fields) == {f.name for f in Statement._meta.fields}


def test_snapshots_are_only_viewed_and_their_encoded_block_is_not_shown(admin_client, rf):
    model_admin = admin.site._registry[Snapshot]
    request = rf.get("/admin/collectors/snapshot/")
    assert not (model_admin.has_add_permission(request) or model_admin.has_change_permission(request))
    assert not model_admin.has_delete_permission(request)
    fields = {f.name for f in Snapshot._meta.fields}
    assert set(model_admin.get_readonly_fields(request)) == fields - {"statements"} and "statements" in fields
    assert admin_client.get("/admin/collectors/snapshot/").status_code == 200
    assert admin_client.get("/admin/collectors/snapshot/add/").status_code == 403
