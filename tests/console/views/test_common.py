"""console.views.common: what every page shares — an htmx swap is told apart from a whole page (a history restore
or a boosted link needs the whole page), a bad ?page= falls back to 1 and says why, and the range picker's links
keep the rest of the page's state."""

from datetime import UTC, datetime
from urllib.parse import parse_qs, urlsplit

import pytest
from django.http import QueryDict
from django.test import RequestFactory
from django_htmx.middleware import HtmxDetails

from console.ranges import PRESETS, parse_range
from console.views.common import is_fragment_request, page_number, range_links

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def _request(**headers):
    request = RequestFactory().get("/servers/1/", headers=headers)
    request.htmx = HtmxDetails(request)
    return request


@pytest.mark.parametrize(
    "headers, fragment",
    [
        ({}, False),
        ({"HX-Request": "true"}, True),
        ({"HX-Request": "false"}, False),
        ({"HX-Request": "true", "HX-History-Restore-Request": "true"}, False),
        ({"HX-Request": "true", "HX-Boosted": "true"}, False),
    ],
)
def test_only_an_htmx_swap_is_a_fragment_request(headers, fragment):
    assert is_fragment_request(_request(**headers)) is fragment


def test_a_request_the_htmx_middleware_did_not_see_is_a_whole_page():
    assert is_fragment_request(RequestFactory().get("/", headers={"HX-Request": "true"})) is False


@pytest.mark.parametrize("query, page", [("", 1), ("page=", 1), ("page=1", 1), ("page=7", 7), ("page=%207", 7)])
def test_page_number_of_good_input(query, page):
    errors: list[str] = []
    assert page_number(QueryDict(query), errors) == page and errors == []


@pytest.mark.parametrize("raw", ["0", "-3", "two", "1.5", "9" * 5000])
def test_a_bad_page_is_the_first_with_the_reason(raw):
    errors = ["an earlier error"]
    assert page_number(QueryDict(mutable=True) | {"page": raw}, errors) == 1
    assert errors == ["an earlier error", f"page {raw!r} is not a page number"]


def test_range_links_one_per_preset_with_the_active_one_marked():
    tr = parse_range({"range": "7d"}, now=NOW)
    links = range_links("/servers/1/", tr, {"statement": "42", "sort": "total time"})
    assert [label for label, _, _ in links] == list(PRESETS)
    assert [label for label, _, active in links if active] == ["7d"]
    for label, url, _ in links:
        parts = urlsplit(url)
        assert parts.path == "/servers/1/"
        assert parse_qs(parts.query) == {"range": [label], "statement": ["42"], "sort": ["total time"]}


def test_a_custom_range_marks_no_preset_and_links_carry_only_the_range():
    tr = parse_range({"range": "custom", "start": "2026-11-20T08:00", "end": "2026-11-21T08:00"}, now=NOW)
    links = range_links("/fleet/", tr, {})
    assert not any(active for _, _, active in links)
    assert [url for _, url, _ in links] == [f"/fleet/?range={key}" for key in PRESETS]
