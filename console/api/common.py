"""What every endpoint shares: paging that refuses oversized pages, CSV for tables, the caller's scope."""

from __future__ import annotations

import csv
import io
import math

from rest_framework import exceptions, renderers
from rest_framework.request import Request
from rest_framework.response import Response

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 500


def page_params(request: Request, *, default: int = DEFAULT_PAGE_SIZE) -> tuple[int, int]:
    """(page, page_size) from ?page=&page_size=; a 400 that says what to fix otherwise (never clamped silently)."""
    errors = {}
    values = {}
    for name, fallback, top in (("page", 1, None), ("page_size", default, MAX_PAGE_SIZE)):
        raw = request.query_params.get(name)
        if raw is None or raw == "":
            values[name] = fallback
            continue
        try:
            value = int(raw)
        except ValueError:
            errors[name] = [f"{raw!r} is not a whole number"]
            continue
        if value < 1 or (top is not None and value > top):
            errors[name] = [f"must be between 1 and {top}" if top else "must be 1 or more"]
            continue
        values[name] = value
    if errors:
        raise exceptions.ValidationError(errors)
    return values["page"], values["page_size"]


def paged(results: list, *, count: int, page: int, page_size: int) -> dict:
    return {"count": count, "page": page, "page_size": page_size, "pages": max(1, math.ceil(count / page_size)),
            "results": results}  # fmt: skip


def page_of(items: list, request: Request, *, default: int = DEFAULT_PAGE_SIZE) -> Response:
    """A page of an in-memory list (small lists: organizations, servers, recommendations)."""
    page, size = page_params(request, default=default)
    start = (page - 1) * size
    return Response(paged(items[start : start + size], count=len(items), page=page, page_size=size))


def _flat(row: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in row.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flat(value, f"{name}."))
        elif isinstance(value, list):
            out[name] = "; ".join(str(v) for v in value)
        else:
            out[name] = "" if value is None else value
    return out


class CSVRenderer(renderers.BaseRenderer):
    """The rows of a tabular response as CSV (`Accept: text/csv` or `?format=csv`): a paged response's
    `results`, or the list itself; nested objects become dotted columns. Errors stay JSON-shaped."""

    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        if isinstance(data, dict) and "results" in data:
            rows = data["results"]
        elif isinstance(data, list):
            rows = data
        else:
            rows = [data] if isinstance(data, dict) else []
        flat = [_flat(r) for r in rows]
        columns: list[str] = []
        for r in flat:
            columns += [c for c in r if c not in columns]
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        for r in flat:
            # A cell starting with = + - @ is text, not a formula, in a spreadsheet (query texts are untrusted).
            writer.writerow({k: f"'{v}" if isinstance(v, str) and v[:1] in "=+-@" else v for k, v in r.items()})
        return out.getvalue().encode(self.charset)


TABLE_RENDERERS = [renderers.JSONRenderer, renderers.BrowsableAPIRenderer, CSVRenderer]
