"""Rule 11 (missing indexes) on evidence built by hand."""

from advisor.evidence import HelpedStatement, MissingIndexFact
from advisor.rules import r11_missing_indexes as rule
from tests.advisor.rules.evidence import TH, assert_sane, ev


def _fact(**kw) -> MissingIndexFact:
    fields = {
        "database": "app",
        "schema_name": "public",
        "table_name": "orders",
        "columns": ("customer", "status"),
        "method": "cost-verified",
        "size_bytes": 3 * 2**20,
        "reltuples": 60_000.0,
        "selectivity": 0.0002,
        "statements": (
            HelpedStatement(11, "SELECT * FROM orders WHERE customer = $1 AND status = $2", 600_000.0, 1200.0, 12.0),
            HelpedStatement(
                12, "SELECT count(*) FROM orders WHERE customer = $1 AND status = $2", 60_000.0, 1100.0, 110.0
            ),
        ),
        "table_writes_per_day": 5000.0,
        "table_indexes": 2,
    }
    return MissingIndexFact(**(fields | kw))


def test_one_recommendation_per_index_with_the_time_it_saves_summed_over_its_statements():
    (rec,) = rule.check(ev(missing_indexes=(_fact(),)), TH)
    assert_sane([rec])
    saved = 600_000 * (1 - 12 / 1200) + 60_000 * (1 - 110 / 1100)  # ms a day
    assert rec.title == f"Index on orders (customer, status) would save about {saved / 60_000:,.1f} min a day"
    assert rec.severity == "warning" and "2 statement(s)" in rec.explanation and "cost-verified" in rec.explanation
    assert rec.change.text.endswith(
        "CREATE INDEX CONCURRENTLY orders_customer_status_idx ON public.orders (customer, status);"
    )
    assert "3.0 MB" in rec.cost and "5,000 inserts" in rec.cost and "2 index(es)" in rec.cost


def test_estimated_is_said_and_a_negligible_saving_is_not_advised():
    (rec,) = rule.check(ev(missing_indexes=(_fact(method="estimated"),)), TH)
    assert "estimated from pg_stats" in rec.explanation
    tiny = _fact(statements=(HelpedStatement(11, "SELECT 1", 900.0, 100.0, 1.0),))
    assert rule.check(ev(missing_indexes=(tiny,)), TH) == []
    assert rule.check(ev(missing_indexes=(_fact(),), sees_all_statements=False), TH) == []


def test_names_from_the_server_are_escaped_in_the_comments_and_quoted_in_the_statements():
    """A line break in a name would end its comment and run what follows: in a comment it is written out, in a
    statement the name is quoted (tests/advisor/test_hostile_names_in_scripts.py runs such scripts in psql)."""
    plain = rule.ddl(_fact(database="app\r\nDROP DATABASE app;--", columns=("customer",)))
    assert plain.startswith(r'-- in database "app\r\nDROP DATABASE app;--" (CREATE INDEX CONCURRENTLY runs outside')
    assert plain.endswith("CREATE INDEX CONCURRENTLY orders_customer_idx ON public.orders (customer);")
    tree = (
        ("public", "ev\nx", None, None, "p"),
        ("public", "ev 1", "public", "ev\nx", "r"),
        ("s*/", "ev\rf", "public", "ev\nx", "f"),
    )
    partitioned = rule.ddl(_fact(table_name="ev\nx", columns=("customer",), partition_tree=tree, partitions_read=1))
    assert partitioned.startswith(r'-- in database app: public."ev\nx" is partitioned, and CREATE INDEX CONCURRENTLY')
    assert partitioned.endswith(
        '-- "s*\\/"."ev\\rf" is a foreign table: it takes no index, and the partitioned table\'s stays invalid'
    )
    assert 'CREATE INDEX "ev\nx_customer_idx" ON ONLY public."ev\nx" (customer);\n' in partitioned
    assert 'ALTER INDEX public."ev\nx_customer_idx" ATTACH PARTITION public."ev 1_customer_idx";' in partitioned
