"""The advisor's citations: references stored by earlier versions read as public citations, and links only to web
addresses."""

from __future__ import annotations

from advisor import sources
from tests.advisor.rules.evidence import INTERNAL


def test_stored_references_of_earlier_versions_read_as_public_citations() -> None:
    stored = ["seeds/003_e849de0dc9fc603e.txt", sources.TANTOR_URL, "reference/pg_stat_statements.md"]
    assert sources.public(stored) == [sources.TANTOR_SAMPLE_RATE, sources.PGSS_DOCS]
    assert sources.public(["seeds/000_619f50110a6dd62f.txt"]) == [sources.DALIBO_SLOW_COMMIT]
    assert sources.public(["Someone's notes"]) == ["Someone's notes"]  # unknown: kept as it is, never dropped


def test_a_reference_links_only_to_a_web_address() -> None:
    title = 'PostgreSQL documentation, "pg_stat_statements — track statistics of SQL planning and execution"'
    assert sources.link(sources.PGSS_DOCS) == (title, sources.PGSS_DOCS_URL)
    assert sources.link(sources.DALIBO_SLOW_COMMIT) == (sources.DALIBO_SLOW_COMMIT, "")
    assert sources.link("https://example.org/a") == ("https://example.org/a", "https://example.org/a")
    assert sources.link("javascript:alert(1)") == ("javascript:alert(1)", "")
    assert sources.link("see javascript:alert(1)") == ("see javascript:alert(1)", "")
    for citation in sources.CITATIONS:
        text, url = sources.link(citation)
        assert text and not INTERNAL.search(citation), citation
        assert url == "" or url.startswith("https://www.postgresql.org/") or url == sources.TANTOR_URL
