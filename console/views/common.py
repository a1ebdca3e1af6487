"""What every page view shares: rendering a page or, for an htmx request, one of its fragments; the range
picker's links; the head of a server's pages."""

from __future__ import annotations

from urllib.parse import urlencode

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from console.ranges import PRESETS, TimeRange
from readtier import server_status, version_text


def is_fragment_request(request: HttpRequest) -> bool:
    """An htmx request that swaps part of the page (not a history restore, which needs the whole page)."""
    htmx = getattr(request, "htmx", None)
    return bool(htmx) and not htmx.history_restore_request and not htmx.boosted


def render_page(
    request: HttpRequest, template: str, context: dict, *, fragment: str | None = None, status: int = 200
) -> HttpResponse:
    """The whole page, or for an htmx request its named fragment (template.html#fragment)."""
    name = f"{template}#{fragment}" if fragment and is_fragment_request(request) else template
    response = render(request, name, context, status=status)
    # The same URL answers with a fragment or a page: caches must keep them apart.
    response.headers["Vary"] = "HX-Request"
    return response


def page_number(params, errors: list[str]) -> int:
    """The ?page= of a paged table (1 when absent); a bad one is 1, with the reason added to `errors`."""
    try:
        page = int(params.get("page") or 1)
        if page < 1:
            raise ValueError
    except ValueError:
        errors.append(f"page {params.get('page')!r} is not a page number")
        page = 1
    return page


def range_links(base: str, tr: TimeRange, extra: dict[str, str]) -> list[tuple[str, str, bool]]:
    """(label, URL, active) of the range picker's presets, keeping the rest of the page's state."""
    return [(key, base + "?" + urlencode({"range": key, **extra}), tr.key == key) for key in PRESETS]


def server_header(server, now=None) -> dict:
    """What the head of a server's pages says about it (from the inventory row)."""
    return {
        "server": server,
        "status": server_status(server, now or timezone.now()),
        "version": version_text(server.server_version_num),
    }
