"""Small statistics helpers (milliseconds in, figures out)."""

from __future__ import annotations

import numpy as np


def median(xs) -> float:
    return float(np.median(np.asarray(xs, float))) if len(xs) else float("nan")


def pct(xs, q: float) -> float:
    """Percentile with linear interpolation (numpy's default)."""
    return float(np.percentile(np.asarray(xs, float), q)) if len(xs) else float("nan")


def summary(xs) -> dict:
    a = np.asarray(xs, float)
    if not a.size:
        return {"n": 0}
    return {
        "n": int(a.size),
        "median": float(np.median(a)),
        "p90": float(np.percentile(a, 90)),
        "p99": float(np.percentile(a, 99)),
        "min": float(a.min()),
        "max": float(a.max()),
        "mean": float(a.mean()),
    }
