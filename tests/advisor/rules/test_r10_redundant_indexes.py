"""Rule 10 (duplicate and redundant indexes) on evidence built by hand."""

from datetime import UTC, datetime, timedelta

from advisor.evidence import IndexFact
from advisor.rules import r10_redundant_indexes as rule
from tests.advisor.rules.evidence import TH, assert_sane, ev

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
COLUMNS = {2: "customer", 3: "status", 4: "code"}


def _index(name, keys, **kw) -> IndexFact:
    fields = {
        "database": "app",
        "schema_name": "public",
        "name": name,
        "table_name": "orders",
        "table_relid": 16384,
        "definition": f"CREATE INDEX {name} ON public.orders USING btree (...)",
        "key_attnums": tuple(keys),
        "key_columns": tuple(COLUMNS.get(k) for k in keys),
        "opclasses": tuple(1978 for _ in keys),
        "size_bytes": 8 * 2**20,
        "watched_since": NOW - timedelta(days=2),
        "table_writes_per_day": 5000.0,
    }
    return IndexFact(**(fields | kw))


def _check(*indexes):
    return rule.check(ev(schema_read_at=NOW, indexes=indexes), TH)


def test_a_leading_prefix_of_a_btree_is_redundant():
    (rec,) = _check(_index("by_customer", [2], scans_since=40), _index("by_customer_status", [2, 3]))
    assert_sane([rec])
    assert rec.subject == "index:app/public.by_customer" and "duplicates by_customer_status" in rec.title
    assert "a leading prefix of the keys of by_customer_status (customer, status)" in rec.explanation
    assert "scanned 40 times" in rec.explanation and rec.change.text.endswith(
        "DROP INDEX CONCURRENTLY public.by_customer;"
    )


def test_of_two_equal_indexes_the_constraints_is_kept_else_the_one_scanned_more():
    (rec,) = _check(_index("a_copy", [4]), _index("orders_code_key", [4], is_unique=True, constraint="orders_code_key"))
    assert rec.subject.endswith(".a_copy") and "the same keys as orders_code_key" in rec.explanation
    (rec,) = _check(_index("x_used", [2], scans_since=9), _index("y_idle", [2], scans_since=0))
    assert rec.subject.endswith(".y_idle")
    (rec,) = _check(_index("x_one", [2]), _index("y_two", [2]))  # nothing tells them apart: one, by name
    assert rec.subject.endswith(".y_two")
    assert _check(_index("u1", [4], is_unique=True), _index("u2", [4], constraint="c2")) == []


def test_what_is_not_redundant():
    longer = _index("by_customer_status", [2, 3])
    assert _check(_index("by_status", [3]), longer) == []  # not a leading prefix
    assert _check(_index("partial", [2], predicate_md5="ab"), longer) == []  # another predicate
    assert _check(_index("other_ops", [2], opclasses=(3128,)), longer) == []  # another operator class
    assert _check(_index("hashed", [2], method="hash"), _index("hashed_pair", [2, 3], method="hash")) == []
    assert _check(_index("covering", [2], include_count=1), longer) == []  # its INCLUDE serves index-only scans
    assert _check(_index("by_customer", [2]), _index("invalid", [2, 3], is_valid=False)) == []
    assert _check(_index("unique_customer", [2], is_unique=True), longer) == []  # it enforces uniqueness
    other_table = _index("by_customer", [2], table_relid=99)
    assert _check(other_table, longer) == []


def test_a_chain_proposes_each_shorter_one_once():
    recs = _check(_index("a", [2]), _index("ab", [2, 3]), _index("abc", [2, 3, 4]))
    assert sorted(r.subject for r in recs) == ["index:app/public.a", "index:app/public.ab"]
