"""collectors/plans/candidates.py: the columns a plan's filters compare and the keys of the sort above them, from
EXPLAIN's own texts, and nothing from what no single index serves (an OR, a function of a column, a sort in mixed
directions); linear in the filter's length."""

import time

from collectors.plans import candidates


def test_equality_and_range_columns_of_a_filter():
    assert candidates.columns("((customer = $1) AND (status = ANY ($2)))") == (("customer", "status"), ())
    assert candidates.columns("((o.customer = $1) AND (o.created_at >= $2))", "o") == (("customer",), ("created_at",))
    assert candidates.columns("((status)::text = 'new'::text)") == (("status",), ())
    assert candidates.columns('("Order Ref" = $1)') == (("Order Ref",), ())
    assert candidates.columns("((deleted_at IS NULL) AND (total > 100))") == (("deleted_at",), ("total",))
    assert candidates.columns("(a = $1) AND (a = $2)") == (("a",), ())  # once


def test_what_no_single_index_serves_gives_nothing():
    assert candidates.columns("((customer = $1) OR (status = $2))") == ((), ())
    assert candidates.columns("(lower(email) = $1)") == ((), ())
    assert candidates.columns("(a = b)") == ((), ())  # two columns: a join's condition
    assert candidates.columns("(x.customer = $1)", "o") == ((), ())  # another relation's column
    assert candidates.columns("(note ~~ 'abc%'::text)") == ((), ())
    assert candidates.columns("") == ((), ())


def test_scans_of_a_plan_that_filter_a_relation():
    plan = {
        "Plan": {
            "Node Type": "Aggregate",
            "Total Cost": 1200.0,
            "Plans": [
                {
                    "Node Type": "Seq Scan",
                    "Relation Name": "orders",
                    "Alias": "orders",
                    "Total Cost": 1190.0,
                    "Plan Rows": 12,
                    "Filter": "((customer = $1) AND (status = $2))",
                },
                {"Node Type": "Seq Scan", "Relation Name": "small", "Alias": "small", "Total Cost": 1.0},
            ],
        }
    }
    (scan,) = candidates.scans(plan)
    assert (scan.relation, scan.equality, scan.node_type, scan.plan_rows) == (
        "orders",
        ("customer", "status"),
        "Seq Scan",
        12.0,
    )


def test_a_huge_or_hostile_filter_is_read_in_linear_time_or_not_at_all():
    hostile = "(" * 4000 + "'" * 4000  # unbalanced parentheses and quotes
    started = time.perf_counter()
    for _ in range(20):
        candidates.columns(hostile)
        candidates.tokens("'" + "''" * 50_000)
    assert time.perf_counter() - started < 2.0
    assert candidates.columns("(a = $1) AND " * 2000) == ((), ())  # beyond MAX_FILTER: not read


def test_an_index_scan_that_filters_leads_with_its_conditions_columns():
    node = {
        "Node Type": "Index Scan",
        "Relation Name": "orders",
        "Alias": "orders",
        "Index Name": "orders_customer_idx",
        "Total Cost": 40.0,
        "Plan Rows": 3,
        "Index Cond": "(customer = $1)",
        "Filter": "((status = $2) AND (total > $3))",
    }
    (scan,) = candidates.scans({"Plan": node})
    assert (scan.equality, scan.ranges, scan.index) == (("customer", "status"), ("total",), "orders_customer_idx")
    assert scan.indexed == ("customer",)
    unfiltered = {**node, "Filter": None}
    assert candidates.scans({"Plan": unfiltered}) == []  # nothing read beyond its index: nothing to judge
    bitmap = {
        "Node Type": "Bitmap Heap Scan",
        "Relation Name": "orders",
        "Alias": "orders",
        "Total Cost": 9.0,
        "Recheck Cond": "(customer = $1)",
        "Filter": "(status = $2)",
    }
    assert candidates.scans({"Plan": bitmap})[0].equality == ("customer", "status")


def test_the_keys_of_a_sort_right_above_a_scan_are_its_order():
    scan = {
        "Node Type": "Seq Scan",
        "Relation Name": "orders",
        "Alias": "o",
        "Total Cost": 1190.0,
        "Filter": "(customer = $1)",
    }

    def sorted_by(*keys):
        plan = {"Node Type": "Limit", "Plans": [{"Node Type": "Sort", "Sort Key": list(keys), "Plans": [scan]}]}
        (found,) = candidates.scans({"Plan": plan})
        return found.order

    assert sorted_by("o.created_at DESC") == ("created_at",)
    assert sorted_by("created_at DESC", "id DESC") == ("created_at", "id")
    assert sorted_by("created_at", "id NULLS LAST") == ("created_at", "id")  # NULLS LAST: ascending's own
    assert sorted_by("created_at", "id DESC") == ()  # mixed directions: no index read one way serves them
    assert sorted_by("created_at DESC NULLS LAST") == ()  # not a plain B-tree's order either way
    assert sorted_by("(lower(note))") == ()  # an expression
    assert sorted_by("x.created_at") == ()  # another relation's column (a join's sort)
    assert sorted_by('note COLLATE "C"') == ()
    # A sort that is not right above the scan (a join between) orders something else.
    join = {"Node Type": "Hash Join", "Plans": [scan, {"Node Type": "Hash", "Plans": []}]}
    plan = {"Node Type": "Sort", "Sort Key": ["o.created_at"], "Plans": [join]}
    assert candidates.scans({"Plan": plan})[0].order == ()
