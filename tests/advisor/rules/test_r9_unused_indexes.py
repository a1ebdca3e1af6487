"""Rule 9 (unused and invalid indexes) on evidence built by hand."""

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from advisor.evidence import IndexFact
from advisor.rules import r9_unused_indexes as rule
from tests.advisor.rules.evidence import TH, assert_sane, ev

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)


def _index(**kw) -> IndexFact:
    fields = {
        "database": "app",
        "schema_name": "public",
        "name": "orders_note",
        "table_name": "orders",
        "table_relid": 16384,
        "definition": "CREATE INDEX orders_note ON public.orders USING btree (note)",
        "key_attnums": (5,),
        "key_columns": ("note",),
        "opclasses": (1978,),
        "size_bytes": 48 * 2**20,
        "watched_since": NOW - timedelta(days=9),
        "scans_since": 0,
        "table_writes_per_day": 120_000.0,
    }
    return IndexFact(**(fields | kw))


def _check(*indexes, **kw):
    return rule.check(ev(schema_read_at=NOW, indexes=indexes, **kw), TH)


def test_an_index_never_scanned_over_a_week_is_proposed_for_removal_with_its_size_and_write_cost():
    (rec,) = _check(_index())
    assert_sane([rec])
    assert rec.change.text.endswith("DROP INDEX CONCURRENTLY public.orders_note;")
    assert rec.change.text.startswith("-- in database app ")
    assert "9 days" in rec.title and "48.0 MB" in rec.explanation and "120,000 inserts" in rec.explanation
    assert rec.subject == "index:app/public.orders_note" and rec.severity == "warning"


def test_a_scan_a_short_watch_or_a_constraint_keeps_an_index():
    assert _check(_index(scans_since=1)) == []
    assert _check(_index(watched_since=NOW - timedelta(days=6, hours=23))) == []
    assert _check(_index(is_unique=True), _index(is_primary=True), _index(constraint="orders_excl")) == []
    assert rule.check(ev(indexes=(_index(),)), TH) == []  # no schema reading yet


def test_standbys_and_a_standby_are_said():
    (rec,) = _check(_index(), standbys=2)
    assert "2 standby(s)" in rec.explanation and "each standby" in rec.explanation
    (rec,) = _check(_index(), in_recovery=True)
    assert "This server is a standby" in rec.explanation


def test_an_invalid_index_is_proposed_at_once_unless_primary_or_a_constraints():
    (rec,) = _check(_index(is_valid=False, watched_since=NOW - timedelta(minutes=10), scans_since=0))
    assert_sane([rec])
    assert "invalid" in rec.title and "DROP INDEX CONCURRENTLY public.orders_note;" in rec.change.text
    (rec,) = _check(_index(is_valid=False, is_unique=True))  # a failed unique build
    assert "remove them before building it again" in rec.explanation
    assert _check(_index(is_valid=False, constraint="orders_key"), _index(is_valid=False, is_primary=True)) == []


def test_names_that_need_quotes_are_quoted_in_the_ddl():
    (rec,) = _check(_index(name="Order Notes", schema_name="user", database="my-app"))
    assert_sane([rec])
    assert rec.change.text.endswith('DROP INDEX CONCURRENTLY "user"."Order Notes";')
    assert '-- in database "my-app"' in rec.change.text


def test_unknown_writes_are_said_as_unknown():
    (rec,) = _check(replace(_index(), table_writes_per_day=None))
    assert "not measured yet" in rec.explanation
