"""Where the time of a snapshot goes: wall time accumulated per function, by wrapping the
functions server_collect calls (in this process, for one pass; the timed passes run unwrapped).
Times are exclusive: a wrapped function called inside another (codec.encode inside
store.insert_snapshot) counts once, under its own label."""

from __future__ import annotations

import contextlib
import functools
import time
from collections import defaultdict


def _targets():
    from collectors import services
    from collectors.settings import instance
    from collectors.statements import lineage, pgss
    from collectors.statements import reading as statements
    from collectors.texts import texts
    from history import codec, store, writer

    # (label, module, attribute): wrap the name where the caller looks it up.
    return [
        ("read: meta + settings", instance, "read_meta"),
        ("read: lineage (system identifier, timeline)", lineage, "read_identity"),
        ("read: pg_stat_statements_info", pgss, "read_info"),
        ("read: new and changed entries (+ merge)", pgss, "read_entries"),
        ("read: texts of new keys", texts, "read_texts"),
        ("history: find keys back after an eviction", statements, "lookup_returning"),
        ("history: texts missing (previous state)", services, "texts_missing"),
        ("history: load statement state", services, "load_statement_state"),
        ("deltas.compute", statements, "compute_deltas"),
        ("codec.encode", codec, "encode"),
        ("history: insert new statements", store, "statement_ids"),
        ("history: insert snapshot row", store, "insert_snapshot"),
        ("history: insert waits", writer.SnapshotWriter, "append"),
        ("history: write statement state", store, "write_statement_state"),
    ]


@contextlib.contextmanager
def timed_phases(targets=None):
    """Yields a dict label -> list of ms (one entry per call). `targets`: (label, module, attribute) rows to wrap
    instead of a snapshot's."""
    acc: dict[str, list[float]] = defaultdict(list)
    saved = []
    inner: list[float] = []  # per open wrapped call: ms spent in wrapped calls inside it
    for label, module, attr in targets or _targets():
        fn = getattr(module, attr)
        saved.append((module, attr, fn))

        def wrapper(*a, __fn=fn, __label=label, **kw):
            inner.append(0.0)
            t0 = time.perf_counter()
            try:
                return __fn(*a, **kw)
            finally:
                ms = (time.perf_counter() - t0) * 1000
                acc[__label].append(ms - inner.pop())
                if inner:
                    inner[-1] += ms

        functools.update_wrapper(wrapper, fn)
        setattr(module, attr, wrapper)
    try:
        yield acc
    finally:
        for module, attr, fn in saved:
            setattr(module, attr, fn)


def per_snapshot(acc: dict[str, list[float]], totals_ms: list[float]) -> list[tuple[str, float, float]]:
    """(label, mean ms per snapshot, share of the mean total) rows, plus the unattributed rest
    (Django ORM status updates, advisory lock, transaction, Python glue)."""
    n = max(len(totals_ms), 1)
    total = sum(totals_ms) / n
    rows = []
    for label, _, _ in _targets():
        ms = sum(acc.get(label, [])) / n
        rows.append((label, ms, ms / total if total else 0.0))
    rest = total - sum(r[1] for r in rows)
    rows.append(("rest (ORM status rows, advisory lock, commit, glue)", rest, rest / total if total else 0.0))
    rows.append(("total", total, 1.0))
    return rows
