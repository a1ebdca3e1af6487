"""Rule 12 (what a made index did) on evidence built by hand."""

from datetime import UTC, datetime

from advisor.evidence import IndexFact, MadeIndexFact, StatementEffect
from advisor.rules import r12_index_effects as rule
from tests.advisor.rules.evidence import TH, assert_sane, ev

MADE = datetime(2026, 11, 27, 14, 2, tzinfo=UTC)
INDEX = IndexFact(
    database="app",
    schema_name="public",
    name="orders_customer_idx",
    table_name="orders",
    table_relid=1,
    definition="CREATE INDEX orders_customer_idx ON public.orders USING btree (customer)",
    size_bytes=2 * 2**20,
    watched_since=MADE,
    table_writes_per_day=4000.0,
)


def test_the_statements_mean_before_and_since_the_index_was_made():
    made = MadeIndexFact(INDEX, MADE, (StatementEffect(7, "SELECT * FROM orders WHERE customer = $1", 38.0, 0.4, 900),))
    (rec,) = rule.check(ev(made_indexes=(made,)), TH)
    assert_sane([rec])
    assert (
        rec.title
        == "Index orders_customer_idx (made 2026-11-27 14:02 UTC): statement 7's mean fell from 38 ms to 0.40 ms"
    )
    assert rec.change is None and rec.severity == "info" and "4,000 inserts" in rec.explanation


def test_a_made_index_never_used_says_so_and_one_in_plans_not_yet_measured_too():
    (unused,) = rule.check(ev(made_indexes=(MadeIndexFact(INDEX, MADE, ()),)), TH)
    assert unused.title == "Index orders_customer_idx (made 2026-11-27 14:02 UTC) has not been used since"
    pending = MadeIndexFact(INDEX, MADE, (StatementEffect(7, "q", None, 0.4, 3),))
    (rec,) = rule.check(ev(made_indexes=(pending,)), TH)
    assert "not measured yet" in rec.title
    scanned = MadeIndexFact(IndexFact(**{**INDEX.__dict__, "scans_since": 5}), MADE, ())
    assert rule.check(ev(made_indexes=(scanned,)), TH) == []  # scanned by something this console did not plan
