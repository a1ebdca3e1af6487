"""The public texts the advisor's rules come from, cited the way their readers would look them up.

The team reads copies of them (../shared/seeds/, whose README says how each is cited) and a digest of the
extension's internals per version (../shared/reference/pg_stat_statements.md); a user of the console can open
neither, so a recommendation never names them. A reference is one line of text: the citation, followed by
", <address>" when the text has a public web address (the console turns that address into a link).
"""

from __future__ import annotations

import re

PGSS_DOCS_URL = "https://www.postgresql.org/docs/current/pgstatstatements.html"
PG17_RELEASE_URL = "https://www.postgresql.org/docs/release/17.0/"
PG18_RELEASE_URL = "https://www.postgresql.org/docs/release/18.0/"
TANTOR_URL = "https://habr.com/en/companies/tantor/articles/928588"

DALIBO_SLOW_COMMIT = (
    '"What are these slow COMMIT in my PostgreSQL logs?", blog post of a Dalibo consultant, 2021-09-30 (CC BY-SA 4.0)'
)
HACKERS_COMMIT_PREPARED = (
    '"Speed up COMMIT PREPARED", pgsql-hackers mailing-list thread started by Ryohei Takahashi (Fujitsu)'
)
POSTGRES_FM_TRACK_PLANNING = (
    "Postgres.FM podcast (Michael Christofides and Nikolay Samokhvalov), episode on "
    "pg_stat_statements.track_planning and performance cliffs"
)
TANTOR_SAMPLE_RATE = (
    'Tantor Labs, "Когда может быть полезно сэмплирование в pg_stat_statements?" ("When is sampling in '
    'pg_stat_statements useful?"), on pg_stat_statements.sample_rate in Tantor Postgres 17.5, ' + TANTOR_URL
)
PGSS_DOCS = (
    'PostgreSQL documentation, "pg_stat_statements — track statistics of SQL planning and execution", ' + PGSS_DOCS_URL
)
PG17_RELEASE_NOTES = (
    "PostgreSQL 17 release notes (pg_stat_statements: savepoint names and two-phase commit identifiers become "
    "placeholders), " + PG17_RELEASE_URL
)
PG18_RELEASE_NOTES = (
    "PostgreSQL 18 release notes (pg_stat_statements: lists of constants squashed, tables jumbled by name), "
    + PG18_RELEASE_URL
)
PG_DOCS_INDEX_USAGE = (
    'PostgreSQL documentation, "Examining Index Usage", https://www.postgresql.org/docs/current/indexes-examine.html'
)
PG_DOCS_INDEX_STATS = (
    'PostgreSQL documentation, "The Cumulative Statistics System" (pg_stat_all_indexes), '
    "https://www.postgresql.org/docs/current/monitoring-stats.html"
)
PG_DOCS_MULTICOLUMN = (
    'PostgreSQL documentation, "Multicolumn Indexes", https://www.postgresql.org/docs/current/indexes-multicolumn.html'
)
PG_DOCS_CREATE_INDEX = (
    'PostgreSQL documentation, "CREATE INDEX" (Building Indexes Concurrently), '
    "https://www.postgresql.org/docs/current/sql-createindex.html"
)
PG_DOCS_DROP_INDEX = (
    'PostgreSQL documentation, "DROP INDEX", https://www.postgresql.org/docs/current/sql-dropindex.html'
)
CITATIONS = (
    DALIBO_SLOW_COMMIT,
    HACKERS_COMMIT_PREPARED,
    POSTGRES_FM_TRACK_PLANNING,
    TANTOR_SAMPLE_RATE,
    PGSS_DOCS,
    PG17_RELEASE_NOTES,
    PG18_RELEASE_NOTES,
    PG_DOCS_INDEX_USAGE,
    PG_DOCS_INDEX_STATS,
    PG_DOCS_MULTICOLUMN,
    PG_DOCS_CREATE_INDEX,
    PG_DOCS_DROP_INDEX,
)

# What stored recommendations of earlier versions named, and what they cite now.
_LEGACY = {
    "seeds/000_619f50110a6dd62f.txt": DALIBO_SLOW_COMMIT,
    "seeds/001_31242232215ad13d.txt": HACKERS_COMMIT_PREPARED,
    "seeds/002_94d8f46cac7372a9.txt": POSTGRES_FM_TRACK_PLANNING,
    "seeds/003_e849de0dc9fc603e.txt": TANTOR_SAMPLE_RATE,
    "reference/pg_stat_statements.md": PGSS_DOCS,
    PGSS_DOCS_URL: PGSS_DOCS,
    TANTOR_URL: TANTOR_SAMPLE_RATE,
}
_ADDRESS = re.compile(r"^(?P<text>.*?),? (?P<url>https?://\S+)$")


def public(references: list[str] | tuple[str, ...]) -> list[str]:
    """References as users can follow them: earlier versions' file names replaced by their public citations,
    each cited once, in order."""
    out: list[str] = []
    for ref in references:
        cited = _LEGACY.get(ref, ref)
        if cited not in out:
            out.append(cited)
    return out


def link(reference: str) -> tuple[str, str]:
    """(text, web address or "") of one reference. Only http(s) addresses come back: a reference is data,
    never a javascript: URL."""
    if reference.startswith(("https://", "http://")):
        return reference, reference
    found = _ADDRESS.match(reference)
    return (found["text"], found["url"]) if found else (reference, "")
