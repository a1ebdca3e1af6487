"""collectors/plans/shape.py: the same shape whatever the estimates, another for another plan."""

import copy

from collectors.plans.shape import access_paths, fingerprint, node_count, tree_lines

INDEX_PLAN = {
    "Plan": {
        "Node Type": "Nested Loop",
        "Join Type": "Inner",
        "Total Cost": 42.5,
        "Plan Rows": 10,
        "Plans": [
            {
                "Node Type": "Index Scan",
                "Parent Relationship": "Outer",
                "Relation Name": "orders",
                "Alias": "o",
                "Index Name": "orders_customer_idx",
                "Index Cond": "(customer = $1)",
                "Total Cost": 8.3,
                "Plan Rows": 10,
            },
            {
                "Node Type": "Index Scan",
                "Parent Relationship": "Inner",
                "Relation Name": "customers",
                "Alias": "c",
                "Index Name": "customers_pkey",
                "Total Cost": 0.3,
                "Plan Rows": 1,
            },
        ],
    }
}


def test_estimates_and_conditions_do_not_change_the_shape():
    replanned = copy.deepcopy(INDEX_PLAN)
    replanned["Plan"]["Total Cost"] = 9000.0
    replanned["Plan"]["Plans"][0]["Plan Rows"] = 123456
    replanned["Plan"]["Plans"][0]["Index Cond"] = "(customer = 42)"
    assert fingerprint(replanned) == fingerprint(INDEX_PLAN) and len(fingerprint(INDEX_PLAN)) == 32


def test_another_access_path_join_or_order_is_another_shape():
    seq = copy.deepcopy(INDEX_PLAN)
    outer = seq["Plan"]["Plans"][0]
    outer["Node Type"] = "Seq Scan"
    del outer["Index Name"]
    hashed = copy.deepcopy(INDEX_PLAN)
    hashed["Plan"]["Node Type"] = "Hash Join"
    swapped = copy.deepcopy(INDEX_PLAN)
    swapped["Plan"]["Plans"].reverse()
    prints = {fingerprint(p) for p in (INDEX_PLAN, seq, hashed, swapped)}
    assert len(prints) == 4
    assert access_paths(seq) == ["Seq Scan on orders", "Index Scan using customers_pkey on customers"]
    assert access_paths(INDEX_PLAN)[0] == "Index Scan using orders_customer_idx on orders"
    assert node_count(INDEX_PLAN) == 3
    bitmap = {
        "Plan": {
            "Node Type": "Bitmap Heap Scan",
            "Relation Name": "orders",
            "Plans": [{"Node Type": "Bitmap Index Scan", "Index Name": "orders_customer_idx"}],
        }
    }
    assert access_paths(bitmap) == ["Bitmap Heap Scan on orders", "Bitmap Index Scan on orders_customer_idx"]


def test_the_tree_reads_as_explains_text_with_estimates():
    assert tree_lines(INDEX_PLAN) == [
        "Nested Loop (Inner)  (cost 42.50, rows 10)",
        "-> Index Scan using orders_customer_idx on orders  (cost 8.30, rows 10)",
        "-> Index Scan using customers_pkey on customers  (cost 0.30, rows 1)",
    ]
