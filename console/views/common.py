"""What every page view shares: rendering a page or, for an htmx request, one of its fragments."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


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
