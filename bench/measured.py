"""A measured call of the benchmarks that time the console's reads (the read tier's selectors, the pages, the
REST API): what was called, its timed runs, and the windows they are timed over."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta

import numpy as np

from bench.stats import pct

# (label, length, p95 target ms)
WINDOWS = (
    ("1 h", timedelta(hours=1), 50),
    ("6 h", timedelta(hours=6), 50),
    ("24 h", timedelta(days=1), 50),
    ("7 d", timedelta(days=7), 100),
    ("30 d", timedelta(days=30), 100),
)


@dataclass
class Measured:
    selector: str
    label: str
    target_ms: float | None
    window: str | None = None
    order: str | None = None
    text: bool = False
    page: int = 1
    ms: list[float] = field(default_factory=list)
    queries: int | None = None
    missing: str = ""  # why it was not measured
    info: str = ""
    bytes: int = 0  # a page's size

    @property
    def median(self) -> float:
        return float(np.median(self.ms)) if self.ms else float("nan")

    @property
    def p95(self) -> float:
        return pct(self.ms, 95)

    @property
    def passed(self) -> bool | None:
        if self.target_ms is None or not self.ms:
            return None
        return self.p95 <= self.target_ms


def measure(m: Measured, fn: Callable[[], object], *, warmup: int, runs: int, counting) -> Measured:
    try:
        for i in range(warmup):
            if i == warmup - 1 and counting is not None:
                with counting() as c:
                    result = fn()
                m.queries = c.queries
            else:
                result = fn()
        for _ in range(runs):
            t0 = time.perf_counter()
            fn()
            m.ms.append((time.perf_counter() - t0) * 1000)
    except Exception as exc:  # a selector that breaks is a finding: report it, measure the rest
        m.missing = f"raised {type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:200]}"
        return m
    m.info = _describe(result)
    return m


def _describe(result) -> str:
    for attr in ("total_count", "points", "changes", "rows"):
        value = getattr(result, attr, None)
        if value is not None:
            return f"{attr} {value if isinstance(value, int) else len(value)}"
    return f"{len(result)} rows" if isinstance(result, list) else ""
