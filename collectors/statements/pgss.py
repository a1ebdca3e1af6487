"""SQL against monitored servers for pg_stat_statements: what is installed, the counters, the texts.

Cost on the monitored server matters (this runs every minute on production): counters are read
with showtext := false, and only the entries that changed since the previous snapshot travel
(the server compares against the previous state sent as array parameters); texts (which make the
server read its whole query text file) in one call, only for keys never seen before and a bounded
number of known keys still without a text.
"""

import functools
import json
from dataclasses import dataclass, field

import numpy as np
import psycopg
from psycopg import sql

from collectors.errors import (
    CollectionError,
    ExtensionMissing,
    from_query_error,
)
from collectors.settings.instance import ServerMeta
from collectors.statements.columns import ROW_COLUMNS, ColumnMap, build_column_map
from collectors.statements.deltas import match_keys, merge_changed
from collectors.texts.texts import TextRead, bounded
from history.public import (
    COUNTER_NAMES,
    GAUGE_NAMES,
    KEY_NAMES,
    PG_EPOCH_US,
    ArrayFormatError,
    Entries,
    array_param,
    parse_array,
    register_arrays,
)

COLUMNS_SQL = """
SELECT a.name
FROM pg_proc p
JOIN pg_namespace n ON n.oid = p.pronamespace,
     unnest(p.proargnames, p.proargmodes) WITH ORDINALITY AS a(name, mode, ord)
WHERE n.nspname = %s AND p.proname = 'pg_stat_statements' AND p.pronargs = 1 AND a.mode = 'o'
ORDER BY a.ord
"""


_column_maps: dict[tuple[int, str, str], ColumnMap] = {}


def column_map(conn: psycopg.Connection, server_id: int, meta: ServerMeta) -> ColumnMap:
    """The columns of the installed extension version, discovered once per version per process."""
    cache_key = (server_id, meta.extension_version, meta.extension_schema)
    found = _column_maps.get(cache_key)
    if found is None:
        try:
            names = [r[0] for r in conn.execute(COLUMNS_SQL, (meta.extension_schema,))]
        except psycopg.Error as exc:
            raise from_query_error(exc, "discovering pg_stat_statements columns") from exc
        if not names:
            raise ExtensionMissing(
                f"function {meta.extension_schema}.pg_stat_statements(boolean) not found "
                f"(extension version {meta.extension_version})"
            )
        found = build_column_map(meta.extension_version, names)
        _column_maps[cache_key] = found
    return found


@functools.cache
def _info_sql(schema: str) -> str:
    return (
        sql.SQL("SELECT dealloc, (extract(epoch FROM stats_reset) * 1000000)::int8 FROM {}.pg_stat_statements_info")
        .format(sql.Identifier(schema))
        .as_string()
    )


def read_info(conn: psycopg.Connection, meta: ServerMeta) -> tuple[int | None, int | None]:
    """(dealloc, stats_reset in epoch µs) from pg_stat_statements_info, or (None, None) before 1.9."""
    if not meta.has_info_view:
        return None, None
    try:
        dealloc, reset_us = conn.execute(_info_sql(meta.extension_schema)).fetchone()
    except psycopg.Error as exc:
        raise from_query_error(exc, "reading pg_stat_statements_info") from exc
    return dealloc, reset_us


@dataclass
class PgssReading:
    entries: Entries  # every visible entry, current
    prev_index: np.ndarray  # for each entry its row in the previous state, or -1
    hidden: int  # entries of other users whose queryid this role cannot see
    total: int  # all entries in pg_stat_statements, visible or not
    sent: int  # entries the server sent (new or changed); the others were unchanged
    texts: dict[tuple[int, int, int, int], TextRead] = field(default_factory=dict)  # read in the same scan

    @property
    def sent_rows(self) -> np.ndarray:
        """Which entries the server sent: certainly present now (merge_changed puts them last)."""
        mask = np.zeros(len(self.entries), bool)
        mask[len(self.entries) - self.sent :] = True
        return mask


@dataclass(frozen=True)
class _PrevColumn:
    """One column of the previous state sent to the monitored server as an array parameter."""

    name: str  # column name of the unnest() alias
    kind: str  # binary_array kind
    sql_type: str
    condition: str  # the join condition (keys) or the "changed" test (others), over pg_stat_statements' columns


def _prev_columns(cmap: ColumnMap) -> tuple[tuple[_PrevColumn, ...], tuple[_PrevColumn, ...]]:
    """(key columns, compared columns) for the installed extension version.

    An entry is sent back when its key is new or one of these differs from the previous state:
    calls and plans move with every execution and planning (pg_stat_statements updates all counters
    of an entry in the same call that counts it), stats_since and minmax_stats_since (17+) move when
    the entry or its min/max were reset, and total execution time tells a re-created entry from the
    old one before 17 (same calls, different time). Every other entry is present and unchanged.
    Blind spot, before 17 only: an entry evicted and re-created inside one interval with calls, plans
    and execution time (to the microsecond) all equal to the old one's is taken as unchanged."""
    keys = [
        _PrevColumn("prev_userid", "oid", "oid[]", "userid = prev_userid"),
        _PrevColumn("prev_dbid", "oid", "oid[]", "dbid = prev_dbid"),
        _PrevColumn("prev_queryid", "int8", "int8[]", "queryid = prev_queryid"),
    ]
    if cmap.has_toplevel:
        keys.append(_PrevColumn("prev_toplevel", "bool", "bool[]", "toplevel = prev_toplevel"))
    compared = [_PrevColumn("prev_calls", "int8", "int8[]", "calls <> prev_calls")]
    if "plans" in cmap.source_columns:
        compared.append(_PrevColumn("prev_plans", "int8", "int8[]", "plans <> prev_plans"))
    compared.append(
        _PrevColumn("prev_total_exec_us", "int8", "int8[]", f"{cmap.expr('total_exec_us')} <> prev_total_exec_us")
    )
    for column in ("stats_since", "minmax_stats_since"):
        if column in cmap.source_columns:
            compared.append(
                _PrevColumn(
                    f"prev_{column}", "timestamptz", "timestamptz[]", f"{column} IS DISTINCT FROM prev_{column}"
                )
            )
    return tuple(keys), tuple(compared)


# With the texts in the scan: whether each previous entry's statement still wants its text (evicted before it
# could be read, or not visible then): its text comes in the scan too when the server sends its entry.
_WANTS_TEXT = _PrevColumn("prev_wants_text", "bool", "bool[]", "")


def _prev_values(prev: Entries, column: _PrevColumn) -> np.ndarray:
    name = column.name.removeprefix("prev_")
    if name in KEY_NAMES:
        values = prev.keys[:, KEY_NAMES.index(name)]
        return values != 0 if column.kind == "bool" else values
    if name in ("stats_since", "minmax_stats_since"):
        return getattr(prev, f"{name}_us") - PG_EPOCH_US
    return prev.counters[:, COUNTER_NAMES.index(name)]


_ARRAY_KIND = {"i8": "int8", "f8": "float8"}


def _entries_query(meta: ServerMeta, cmap: ColumnMap, with_texts: bool = False) -> str:
    return entries_sql(meta.extension_schema, cmap, with_texts)


@functools.cache
def entries_sql(schema: str, cmap: ColumnMap, with_texts: bool) -> str:
    """Composed once per (schema, extension's columns): composing it again cost each snapshot ~1 ms of CPU.

    `with_texts`: the texts of the first few new keys come in the same scan (pg_stat_statements(true)), as one
    JSON array of [userid, dbid, queryid, toplevel, text cut to a length, whether it was cut]; its three
    parameters (cut, cut, how many) come before the previous state's."""
    keys, compared = _prev_columns(cmap)
    columns = keys + compared + ((_WANTS_TEXT,) if with_texts else ())
    aggregates = ",\n       ".join(
        f"array_agg({cmap.expr(name)}) FILTER (WHERE changed_since_prev)" for name, _ in ROW_COLUMNS
    )
    toplevel = "toplevel::int::int8" if cmap.has_toplevel else "1::int8"
    texts = rank = ""
    if with_texts:
        texts = (
            f",\n       json_agg(json_build_array(userid::int8, dbid::int8, queryid, {toplevel}, left(query, %s), "
            "length(query) > %s)) FILTER (WHERE new_rank <= %s)"
        )
        # New keys, and changed ones whose statement still wants its text, numbered in scan order without a
        # sort: the first ones within the count get their text.
        wanted = (
            f"s.queryid IS NOT NULL AND (p.prev_ord IS NULL OR (p.{_WANTS_TEXT.name} AND "
            f"({' OR '.join(c.condition for c in compared)})))"
        )
        rank = (
            f",\n             CASE WHEN {wanted} THEN count(*) FILTER (WHERE {wanted}) "
            "OVER (ROWS UNBOUNDED PRECEDING) END AS new_rank"
        )
    # The previous state enters through InitPlans ((SELECT $n)): the planner then takes it for a
    # few rows and hashes it, instead of sorting both sides (it cannot know how many entries
    # pg_stat_statements() returns either); ~40% less time on the monitored server at 5,000 entries.
    # Only new or changed entries, gone ones and hidden ones reach the aggregates.
    text = f"""
SELECT count(*) FILTER (WHERE queryid IS NULL AND userid IS NOT NULL),
       array_agg(prev_ord) FILTER (WHERE userid IS NULL),
       array_agg(coalesce(prev_ord, 0)) FILTER (WHERE changed_since_prev),
       {aggregates}{texts}
FROM (SELECT s.*, p.*,
             s.queryid IS NOT NULL AND (p.prev_ord IS NULL OR {" OR ".join(c.condition for c in compared)})
               AS changed_since_prev{rank}
      FROM {{schema}}.pg_stat_statements({"true" if with_texts else "false"}) s
      FULL JOIN unnest({", ".join(f"(SELECT %s::{c.sql_type})" for c in columns)}) WITH ORDINALITY
                AS p({", ".join(c.name for c in columns)}, prev_ord)
             ON {" AND ".join(c.condition for c in keys)}
      OFFSET 0) j
WHERE changed_since_prev OR userid IS NULL OR queryid IS NULL
"""
    return sql.SQL(text).format(schema=sql.Identifier(schema)).as_string()


def read_entries(
    conn: psycopg.Connection,
    meta: ServerMeta,
    cmap: ColumnMap,
    prev: Entries,
    *,
    send_all: bool = False,
    texts_of_new: tuple[int, int] | None = None,
    wanting_text: np.ndarray | None = None,
) -> PgssReading:
    """The current entries, with only the new and changed ones sent by the server.

    The previous state goes to the server as array parameters; one FULL JOIN there finds the
    entries that are new, changed or gone, and the reply is one row of arrays. With send_all (after
    a full reset, when every entry counts from zero) an empty state is sent, so every entry comes
    back; prev_index still refers to prev.

    `texts_of_new` = (max_chars, count): the texts of the first `count` new keys come in the same scan, cut
    to `max_chars` (Reading.texts). While a server churns its query text file is read at every snapshot
    anyway, and an entry seen by the counters can no longer be evicted before its text is read. The count
    takes in the changed entries of the rows of `prev` that `wanting_text` marks (their statements still
    want their text), in scan order with the new keys."""
    sent_state = Entries.empty() if send_all else prev
    keys, compared = _prev_columns(cmap)
    params = [array_param(_prev_values(sent_state, c), c.kind) for c in keys + compared]
    if texts_of_new is not None:
        max_chars, count = texts_of_new
        wants = np.zeros(len(sent_state), bool) if wanting_text is None or send_all else wanting_text
        params = [max_chars, max_chars, count, *params, array_param(wants, _WANTS_TEXT.kind)]
    try:
        with conn.cursor() as cur:
            register_arrays(cur.adapters)
            cur.execute(_entries_query(meta, cmap, texts_of_new is not None), params, binary=True, prepare=False)
            result = cur.pgresult
            values = [result.get_value(0, i) for i in range(result.nfields)]
    except psycopg.Error as exc:
        raise from_query_error(exc, "reading pg_stat_statements") from exc
    try:
        hidden = int.from_bytes(values[0], "big", signed=True)
        gone = parse_array(values[1], "int8") - 1
        changed_prev_index = parse_array(values[2], "int8") - 1
        cols = {
            name: parse_array(v, _ARRAY_KIND[kind])
            for (name, kind), v in zip(ROW_COLUMNS, values[3 : 3 + len(ROW_COLUMNS)], strict=True)
        }
        texts = {}
        if texts_of_new is not None and values[-1] is not None:
            max_chars, count = texts_of_new
            # As much as asked for at most (a character is at most 6 bytes as JSON writes it), before it is parsed.
            if len(values[-1]) > count * (6 * max_chars + 128):
                raise CollectionError(
                    f"unexpected reply from pg_stat_statements: {len(values[-1]):,} bytes of texts, more than asked"
                )
            for u, d, q, t, text, cut in json.loads(values[-1])[:count]:
                read = TextRead(present=True, visible=True, text=text, cut=bool(cut))
                texts[(u, d, q, t)] = bounded(read, max_chars)
    except ArrayFormatError as exc:
        raise CollectionError(f"unexpected reply from pg_stat_statements: {exc}") from exc
    n = len(changed_prev_index)
    changed = Entries(
        keys=np.column_stack([cols[k] for k in KEY_NAMES]).reshape(n, len(KEY_NAMES)),
        counters=np.column_stack([cols[c] for c in COUNTER_NAMES]).reshape(n, len(COUNTER_NAMES)),
        gauges=np.column_stack([cols[g] for g in GAUGE_NAMES]).reshape(n, len(GAUGE_NAMES)),
        stats_since_us=cols["stats_since_us"],
        minmax_stats_since_us=cols["minmax_stats_since_us"],
    )
    entries, prev_index = merge_changed(sent_state, changed, changed_prev_index, gone)
    if send_all:
        prev_index = match_keys(prev.keys, entries.keys)
    return PgssReading(
        entries=entries, prev_index=prev_index, hidden=hidden, total=len(entries) + hidden, sent=n, texts=texts
    )
