"""The advisor's scripts run by psql as the superuser, on a real server whose tables, indexes, schema and database
carry names its ordinary users chose to break out of a comment or a quoted name: line feeds, carriage returns,
quotes, */ and /*, --, semicolons, backslashes (a psql meta-command: \\! runs a shell command), non-ASCII. Every
script the index rules give (a missing index on a plain table and on a partitioned one with a foreign partition;
an unused and a redundant index dropped) makes exactly the indexes it says and drops exactly the ones it says:
no role, schema, table, function or file appears (finding H5: a partitioned table named
`ev\\nCREATE ROLE injected SUPERUSER;--` made a superuser)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from psycopg import sql

from advisor.evidence import HelpedStatement, IndexFact, MissingIndexFact
from advisor.rules import evaluate, r9_unused_indexes, r10_redundant_indexes, r11_missing_indexes
from devenv.cluster import Cluster
from devenv.fleet import ClusterSpec, start_many, stop_many
from devenv.ports import TEST_SCRIPTS_PORT
from tests import slots
from tests.advisor.rules.evidence import TH, ev

# Debian's 15: nothing to download. Its own port (devenv.ports).
MAJOR = 15
PORT = slots.port(TEST_SCRIPTS_PORT)
NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
INDEX_RULES = {r9_unused_indexes.CODE, r10_redundant_indexes.CODE, r11_missing_indexes.CODE}

DATABASE = "shop\nCREATE ROLE from_database SUPERUSER;--"
SCHEMA = "sales'\"\\\rCREATE SCHEMA from_schema;--*/ é"
TABLE = "orders\n\\! touch pwned-by-table #/*"
ROOT = "ev\nCREATE ROLE from_table SUPERUSER;--"
LEAF = "ev 1 '; DROP TABLE x; --\t\u2028"
MIDDLE = "ev 2 */ \\ 日本"
LEAF_A = "ev 2a\r\n;"
LEAF_B = "ev 2b /* --"
FOREIGN = "ev f\n\\! touch pwned #"
UNUSED = "unused\r\n\\! touch pwned-by-index #"
REDUNDANT = "by customer'\"*/"
KEPT = "by customer and state"
CUSTOMER = 'cust"omer\r'
STATE = "state/* é"
# [schema, table, parent schema, parent table, relkind], parents first: two levels, the second in another schema.
TREE = (
    (SCHEMA, ROOT, None, None, "p"),
    (SCHEMA, LEAF, SCHEMA, ROOT, "r"),
    (SCHEMA, MIDDLE, SCHEMA, ROOT, "p"),
    ("public", LEAF_A, SCHEMA, MIDDLE, "r"),
    ("public", LEAF_B, SCHEMA, MIDDLE, "r"),
    (SCHEMA, FOREIGN, SCHEMA, ROOT, "f"),
)


# How each partition is bounded in its parent.
BOUNDS = {
    LEAF: "FOR VALUES IN (1)",
    MIDDLE: "FOR VALUES IN (2) PARTITION BY RANGE (id)",
    LEAF_A: "FOR VALUES FROM (MINVALUE) TO (1000)",
    LEAF_B: "FOR VALUES FROM (1000) TO (MAXVALUE)",
    FOREIGN: "FOR VALUES IN (3) SERVER nowhere",
}


def _schema(c: Cluster) -> None:
    """The tables and indexes the names belong to, made as their owners made them."""
    c.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DATABASE)))
    table, customer, state = sql.Identifier(SCHEMA, TABLE), sql.Identifier(CUSTOMER), sql.Identifier(STATE)
    statements = [
        sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(SCHEMA)),
        sql.SQL("CREATE TABLE {} (id int, {} int, {} text, note text)").format(table, customer, state),
        sql.SQL("CREATE INDEX {} ON {} (note)").format(sql.Identifier(UNUSED), table),
        sql.SQL("CREATE INDEX {} ON {} ({})").format(sql.Identifier(REDUNDANT), table, customer),
        sql.SQL("CREATE INDEX {} ON {} ({}, {})").format(sql.Identifier(KEPT), table, customer, state),
        sql.SQL("CREATE TABLE {} (id int, region int, {} int, {} text) PARTITION BY LIST (region)").format(
            sql.Identifier(SCHEMA, ROOT), customer, state
        ),
        sql.SQL("CREATE FOREIGN DATA WRAPPER nowhere"),
        sql.SQL("CREATE SERVER nowhere FOREIGN DATA WRAPPER nowhere"),
    ]
    for schema, name, parent_schema, parent, relkind in TREE[1:]:
        kind = "FOREIGN TABLE" if relkind == "f" else "TABLE"
        statements.append(
            sql.SQL(f"CREATE {kind} {{}} PARTITION OF {{}} {BOUNDS[name]}").format(
                sql.Identifier(schema, name), sql.Identifier(parent_schema, parent)
            )
        )
    with c.connect(DATABASE) as conn:
        for statement in statements:
            conn.execute(statement)


@pytest.fixture(scope="module")
def server(cluster_lock) -> Iterator[Cluster]:
    """One throwaway cluster of this module's own, holding the hostile names."""
    spec = ClusterSpec(
        name="test-hostile-names", major=MAJOR, port=PORT, base=slots.cluster_dir(), fresh=True, tls=False
    )
    c = start_many([spec])[spec.name]
    try:
        _schema(c)
        yield c
    finally:
        stop_many([c])


def _evidence():
    helped = (HelpedStatement(1, "SELECT * FROM orders WHERE customer = $1", 600_000.0, 1000.0, 10.0),)
    plain = MissingIndexFact(
        database=DATABASE,
        schema_name=SCHEMA,
        table_name=TABLE,
        columns=(CUSTOMER, STATE),
        method="estimated",
        size_bytes=2**20,
        reltuples=60_000.0,
        selectivity=0.001,
        statements=helped,
    )
    partitioned = replace(plain, table_name=ROOT, partition_tree=TREE, partitions_read=3)
    index = {"database": DATABASE, "schema_name": SCHEMA, "table_name": TABLE, "table_relid": 16384}
    indexes = (
        IndexFact(
            **index,
            name=UNUSED,
            definition="CREATE INDEX ... (note)",
            key_attnums=(4,),
            key_columns=("note",),
            opclasses=(3126,),
            watched_since=NOW - timedelta(days=30),
        ),
        IndexFact(
            **index,
            name=REDUNDANT,
            definition="CREATE INDEX ... (customer)",
            key_attnums=(2,),
            key_columns=(CUSTOMER,),
            opclasses=(1978,),
            watched_since=NOW - timedelta(days=30),
            scans_since=5,
        ),
        IndexFact(
            **index,
            name=KEPT,
            definition="CREATE INDEX ... (customer, state)",
            key_attnums=(2, 3),
            key_columns=(CUSTOMER, STATE),
            opclasses=(1978, 3126),
            watched_since=NOW - timedelta(days=30),
            scans_since=50,
        ),
    )
    return ev(schema_read_at=NOW, indexes=indexes, missing_indexes=(plain, partitioned)), plain, partitioned


def _catalog(c: Cluster) -> dict[str, set[tuple]]:
    """What a statement that got out of its comment would have made: roles, databases, and in the database its
    schemas, relations and functions."""
    found = {
        "roles": set(c.execute("SELECT rolname FROM pg_roles")),
        "databases": set(c.execute("SELECT datname FROM pg_database")),
    }
    for what, query in {
        "schemas": "SELECT nspname FROM pg_namespace",
        "relations": "SELECT nspname, relname, relkind::text FROM pg_class JOIN pg_namespace n ON n.oid = relnamespace",
        "functions": "SELECT oid::regprocedure::text FROM pg_proc",
    }.items():
        found[what] = set(c.execute(query, dbname=DATABASE))
    return found


def _indexes_asked(c: Cluster, plain: MissingIndexFact, partitioned: MissingIndexFact) -> dict[tuple, str]:
    """(schema, table) -> the index the scripts make on it, named as PostgreSQL names it (cut at 63 bytes)."""
    asked = {(SCHEMA, TABLE): r11_missing_indexes.index_name(plain)} | {
        (schema, table): r11_missing_indexes.index_name(partitioned, table)
        for schema, table, *_, relkind in TREE
        if relkind != "f"
    }
    cut = c.execute(
        "SELECT n::name::text FROM unnest(%s::text[]) WITH ORDINALITY n ORDER BY ordinality",
        params=[list(asked.values())],
    )
    return dict(zip(asked, (name for (name,) in cut), strict=True))


def _psql(c: Cluster, script: Path) -> subprocess.CompletedProcess:
    """The script as a DBA runs it: psql, connected as the superuser to the database its first comment names."""
    env = {
        **os.environ,
        "PGHOST": "127.0.0.1",
        "PGPORT": str(c.port),
        "PGUSER": "postgres",
        "PGDATABASE": DATABASE,
        "PGCLIENTENCODING": "UTF8",
    }
    argv = [str(c.bindir / "psql"), "-X", "-v", "ON_ERROR_STOP=0", "-f", str(script)]
    return subprocess.run(argv, env=env, cwd=script.parent, capture_output=True, text=True, timeout=60)


def test_every_index_script_makes_and_drops_exactly_what_it_says_whatever_the_names(server, tmp_path):
    evidence, plain, partitioned = _evidence()
    advice = [a for a in evaluate(evidence, TH) if a.rule in INDEX_RULES]
    assert sorted(a.rule for a in advice) == ["missing_index", "missing_index", "redundant_index", "unused_index"]
    before = _catalog(server)
    scripts = [tmp_path / f"{n}-{a.rule}.sql" for n, a in enumerate(advice)]
    for script, a in zip(scripts, advice, strict=True):
        script.write_bytes(a.change.text.encode())  # as shown: a \r stays a \r
    ran = [_psql(server, script) for script in scripts]
    after = _catalog(server)

    asked = _indexes_asked(server, plain, partitioned)
    kinds = {(schema, table): relkind for schema, table, *_, relkind in TREE}
    made = {
        (schema, name, "I" if kinds.get((schema, table)) == "p" else "i") for (schema, table), name in asked.items()
    }
    assert after["roles"] == before["roles"]
    assert after["databases"] == before["databases"] and after["schemas"] == before["schemas"]
    assert after["functions"] == before["functions"]
    assert after["relations"] - before["relations"] == made
    assert before["relations"] - after["relations"] == {(SCHEMA, UNUSED, "i"), (SCHEMA, REDUNDANT, "i")}
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(s.name for s in scripts)  # no shell command ran
    for script, done in zip(scripts, ran, strict=True):
        assert done.returncode == 0 and "ERROR" not in done.stderr, (script.name, done.stderr)

    # Each partition's index is attached to its parent's: the middle one's is valid, the root's is not (a foreign
    # partition takes no index, as its script says), every other one is.
    attached = server.execute(
        "SELECT child.relname::text, parent.relname::text FROM pg_inherits "
        "JOIN pg_class child ON child.oid = inhrelid JOIN pg_class parent ON parent.oid = inhparent "
        "WHERE child.relkind IN ('i', 'I')",
        dbname=DATABASE,
    )
    assert set(attached) == {
        (asked[(schema, table)], asked[(parent_schema, parent)])
        for schema, table, parent_schema, parent, relkind in TREE
        if parent is not None and relkind != "f"
    }
    valid = server.execute(
        "SELECT relname::text, indisvalid FROM pg_index JOIN pg_class ON pg_class.oid = indexrelid "
        "WHERE relname = ANY(%s)",
        dbname=DATABASE,
        params=[list(asked.values())],
    )
    assert {name for name, ok in valid if not ok} == {asked[(SCHEMA, ROOT)]} and len(valid) == len(asked)
