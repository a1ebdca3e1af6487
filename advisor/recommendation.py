"""The advisor's output: one `Recommendation` per (server, rule, subject), plain data."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

Severity = Literal["info", "warning", "critical"]
Apply = Literal["restart", "reload", "none", "client"]
SEVERITY_ORDER = {"info": 0, "warning": 1, "critical": 2}


@dataclass(frozen=True)
class EvidenceSeries:
    """A series for the recommendation's chart."""

    label: str
    unit: str
    points: tuple[tuple[datetime, float | None], ...] = ()


@dataclass(frozen=True)
class Change:
    """The exact change: SQL or a config line, and what applying it needs."""

    text: str
    apply: Apply


@dataclass(frozen=True)
class Recommendation:
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
