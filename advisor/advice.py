"""The advisor's rules' output: one `Advice` per (server, rule, subject), plain data (advisor.services keeps
each as a Recommendation row with its lifecycle)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

Severity = Literal["info", "warning", "critical"]
Apply = Literal["restart", "reload", "none", "client"]
SEVERITY_ORDER = {"info": 0, "warning": 1, "critical": 2}


@dataclass(frozen=True)
class EvidenceSeries:
    """A series for the recommendation's chart. `ends`: where each point's span ends (its time is where it
    starts), so that the chart draws each value flat across what it covers; empty when unknown."""

    label: str
    unit: str
    points: tuple[tuple[datetime, float | None], ...] = ()
    ends: tuple[datetime, ...] = ()

    @classmethod
    def of(cls, label: str, unit: str, points) -> EvidenceSeries:
        """From (start, value) pairs, or (start, value, end) triples: the ends kept when every point has one."""
        ends = tuple(p[2] for p in points) if points and all(len(p) == 3 for p in points) else ()
        return cls(label, unit, tuple((p[0], p[1]) for p in points), ends)


@dataclass(frozen=True)
class Change:
    """The exact change: SQL or a config line, and what applying it needs."""

    text: str
    apply: Apply


_SETS = re.compile(r"^\s*ALTER\s+SYSTEM\s+SET\s+([\w.]+)\s*(=|TO)", re.I)


def change_target(text: str) -> str:
    """What a change changes: the setting of an ALTER SYSTEM line (whatever value it gives), else the text."""
    found = _SETS.match(text)
    return f"setting {found[1].lower()}" if found else text.strip()


@dataclass(frozen=True)
class Advice:
    """One piece of advice with the numbers behind it."""

    rule: str
    severity: Severity
    server: str
    subject: str
    title: str
    explanation: str
    change: Change | None = None
    effect: str = ""
    cost: str = ""
    evidence: tuple[EvidenceSeries, ...] = ()
    references: tuple[str, ...] = field(default_factory=tuple)

    @property
    def key(self) -> tuple[str, str, str]:
        """Deterministic dedup key (server, rule, subject)."""
        return (self.server, self.rule, self.subject)
