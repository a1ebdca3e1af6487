"""Rule 5: churn families — entries whose texts differ only by IN-list length, temp table names,
savepoint names, 2PC GIDs, SET values or comments. Kinds the server's version already normalizes are skipped
(reference §4: 17 normalizes savepoint names and GIDs; 18 squashes IN lists and merges temp tables)."""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass

from advisor import sources
from advisor.advice import Advice, Change, EvidenceSeries
from advisor.evidence import Evidence, StatementFact
from advisor.thresholds import Thresholds

CODE = "churn_family"

# kind -> (first version that normalizes it, or None; the fix to give before that version)
KINDS: dict[str, tuple[int | None, str, str]] = {
    "gid": (17, "PostgreSQL 17 normalizes 2PC GIDs; until then set track_utility off", "track_utility"),
    "savepoint": (17, "PostgreSQL 17 normalizes savepoint names; until then set track_utility off", "track_utility"),
    "in_list": (18, "PostgreSQL 18 squashes IN lists; until then send = ANY($1) with one array parameter", "client"),
    "temp_table": (18, "PostgreSQL 18 merges temp tables by name; until then reuse one temp table name", "client"),
    "set": (
        None,
        "SET with literal values is hashed by text; set track_utility off or use set_config($1, ...)",
        "track_utility",
    ),
    "comment": (
        None,
        "Comments with varying content (trace ids) split utility statements; strip them at the client",
        "client",
    ),
}

# Where a reader checks what each kind costs and which version normalizes it.
REFERENCES: dict[str, tuple[str, ...]] = {
    "gid": (sources.HACKERS_COMMIT_PREPARED, sources.PG17_RELEASE_NOTES, sources.PGSS_DOCS),
    "savepoint": (sources.PG17_RELEASE_NOTES, sources.PGSS_DOCS),
    "in_list": (sources.PG18_RELEASE_NOTES, sources.PGSS_DOCS),
    "temp_table": (sources.PG18_RELEASE_NOTES, sources.PGSS_DOCS),
    "set": (sources.PGSS_DOCS,),
    "comment": (sources.PGSS_DOCS,),
}
LABELS = {
    "gid": "two-phase commit GID",
    "savepoint": "savepoint name",
    "in_list": "IN-list length",
    "temp_table": "temp table name",
    "set": "SET value",
    "comment": "comment",
}
GID_FAMILY = "PREPARE TRANSACTION / COMMIT PREPARED / ROLLBACK PREPARED '?'"
# Query texts are untrusted: each pattern reads a text in linear time, whatever it holds (tried from one place
# only, or with possessive loops, an unclosed comment running to the end as PostgreSQL reads it;
# tests/test_linear_time.py feeds each inputs growing ×16).
_COMMENT = re.compile(r"/\*.*?(?:\*/|\Z)|--[^\n]*+", re.S)
_GID = re.compile(r"^\s*(prepare\s+transaction|commit\s+prepared|rollback\s+prepared)\s+'(?:[^']|'')*'", re.I)
_SAVEPOINT = re.compile(
    r"^\s*+(savepoint|release(?:\s+savepoint)?|rollback\s+to(?:\s+savepoint)?)\s++\"?[\w$]++\"?", re.I
)
_SET = re.compile(r"^\s*set\s+(session\s+|local\s+)?([\w.]+)\s*(=|to)\s*.+$", re.I | re.S)
_ITEM = r"(?:\$\d++|'(?:[^']++|'')*+'|-?\d++(?:\.\d++)?+)"
_IN = re.compile(rf"\bin\s*+\(\s*+{_ITEM}(?:\s*+,\s*+{_ITEM})*+\s*+\)", re.I)
# A word that begins tmp or temp and ends with a digit (tmp_123, temp_orders_42), schema-qualified or not.
_TEMP = re.compile(r"\b(pg_temp\w*+\.)?(?:tmp|temp)\w*+(?<=\d)", re.I)


@dataclass(frozen=True)
class Family:
    """A normalized key, its kind and its member statements."""

    kind: str
    key: str
    members: tuple[StatementFact, ...]


def normalize(text: str) -> list[tuple[str, str]]:
    """Return (kind, normalized text) for every kind of variation found in `text`."""
    found: list[tuple[str, str]] = []
    stripped = _COMMENT.sub("", text).strip()
    if stripped != text.strip():
        found.append(("comment", stripped))
    t = " ".join(stripped.split())
    if _GID.match(t):
        # One family for the three verbs: the same GIDs make all of them distinct (sources.HACKERS_COMMIT_PREPARED).
        found.append(("gid", GID_FAMILY))
    elif _SAVEPOINT.match(t):
        found.append(("savepoint", _SAVEPOINT.sub(lambda m: f"{m.group(1).upper()} ?", t)))
    elif _SET.match(t):
        m = _SET.match(t)
        assert m
        found.append(("set", f"SET {m.group(2).lower()} = ?"))
    if _IN.search(t):
        found.append(("in_list", _IN.sub("IN (...)", t)))
    if _TEMP.search(t):
        found.append(("temp_table", _TEMP.sub("<temp>", t)))
    return found


def families(statements: tuple[StatementFact, ...], version: int) -> list[Family]:
    """Group statements by normalized text, per kind, leaving out kinds `version` already normalizes."""
    groups: dict[tuple[str, str], dict[int, StatementFact]] = defaultdict(dict)
    for st in statements:
        for kind, key in normalize(st.query):
            since = KINDS[kind][0]
            if since is not None and version >= since:
                continue
            groups[(kind, key)][st.queryid] = st
    return [Family(kind, key, tuple(m.values())) for (kind, key), m in sorted(groups.items())]


def _entries(evidence: Evidence) -> tuple[EvidenceSeries, ...]:
    return (EvidenceSeries.of("entries", "entries", evidence.entries_series),) if evidence.entries_series else ()


def check(evidence: Evidence, thresholds: Thresholds) -> list[Advice]:
    """Rule 5; withheld when the role cannot see every statement (its evidence would be partial)."""
    if not evidence.sees_all_statements:
        return []
    out = []
    for fam in families(evidence.statements, evidence.version):
        n = len(fam.members)
        if n < thresholds.family_min_entries:
            continue
        _, fix, how = KINDS[fam.kind]
        share = f" ({n / evidence.settings.max:.0%} of max {evidence.settings.max:,})"
        change = (
            Change("ALTER SYSTEM SET pg_stat_statements.track_utility = off;", "reload")
            if how == "track_utility"
            else Change("-- client-side change: " + fix, "client")
        )
        out.append(
            Advice(
                rule=CODE,
                severity="warning" if n >= evidence.settings.max * 0.1 else "info",
                server=evidence.server,
                subject=f"family:{fam.kind}:{fam.key}",
                title=f"{n:,} entries differ only by {LABELS[fam.kind]}",
                explanation=(
                    f"{n:,} entries{share} normalize to `{fam.key[:120]}` on PostgreSQL {evidence.version}; "
                    f"{sum(m.calls for m in fam.members):,} calls. {fix}."
                ),
                change=change,
                effect="One entry instead of many: less entry creation under the exclusive lock, fewer evictions.",
                cost="track_utility off hides every utility statement." if how == "track_utility" else "",
                evidence=_entries(evidence),
                references=REFERENCES[fam.kind],
            )
        )
    return out
