"""What every endpoint shares: paging that refuses oversized pages, CSV for tables, the caller's scope."""

from __future__ import annotations

import csv
import functools
import io
import math
import re
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import orjson
from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter
from rest_framework import exceptions, renderers, serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils.encoders import JSONEncoder

from exports.formats.csvfiles import formula_safe
from readtier import MAX_PAGE_SIZE

DEFAULT_PAGE_SIZE = 50
DEFAULT_SINCE = timedelta(hours=1)
LONGEST_WINDOW = timedelta(days=31)  # the console's longest range too
_SINCE = re.compile(r"^(\d+)\s*(m|min|h|d)$")
_UNITS = {"m": "minutes", "min": "minutes", "h": "hours", "d": "days"}


def api(view):
    """An API view: it authenticates itself (token or session), so the console's login redirect is off."""
    return login_not_required(view)


WINDOW_PARAMETERS = [
    OpenApiParameter("from", OpenApiTypes.DATETIME, description="window start (ISO 8601 with a UTC offset)"),
    OpenApiParameter("to", OpenApiTypes.DATETIME, description="window end (default: now)"),
    OpenApiParameter(
        "since",
        OpenApiTypes.STR,
        description="instead of from/to: the last 15m, 6h, 7d... (default 1h)",
        pattern=r"^\d+\s*(m|min|h|d)$",
    ),
]
PAGE_PARAMETERS = [
    OpenApiParameter("page", {"type": "integer", "minimum": 1}, description="1 and up (default 1)"),
    OpenApiParameter(
        "page_size",
        {"type": "integer", "minimum": 1, "maximum": MAX_PAGE_SIZE},
        description=f"1 to {MAX_PAGE_SIZE} (default {DEFAULT_PAGE_SIZE})",
    ),
]


def _time(name: str, raw: str) -> datetime:
    try:
        value = datetime.fromisoformat(raw.strip().replace("Z", "+00:00").replace(" ", "+"))
    except ValueError:
        raise exceptions.ValidationError(
            {name: [f"{raw!r} is not an ISO 8601 time (e.g. 2026-11-23T10:00:00Z)"]}
        ) from None
    if value.tzinfo is None:
        raise exceptions.ValidationError({name: [f"{raw!r} has no UTC offset (add Z or +01:00)"]})
    return value


def window_params(request: Request, *, now: datetime | None = None):
    """The window of ?from=&to= or ?since= (default: the last hour); a 400 saying what to fix otherwise."""
    from readtier import Window

    now = now or timezone.now()
    q = request.query_params
    if q.get("since") and (q.get("from") or q.get("to")):
        raise exceptions.ValidationError({"since": ["give either since or from/to, not both"]})
    if q.get("from") or q.get("to"):
        if not q.get("from"):
            raise exceptions.ValidationError({"from": ["to needs from"]})
        start = _time("from", q["from"])
        end = _time("to", q["to"]) if q.get("to") else now
        if start >= end:
            raise exceptions.ValidationError({"from": ["from must be before to"]})
    else:
        raw = q.get("since") or ""
        m = _SINCE.match(raw.strip()) if raw else None
        if raw and (m is None or int(m.group(1)) < 1):
            raise exceptions.ValidationError({"since": [f"{raw!r}: a length such as 15m, 6h or 7d"]})
        try:
            length = timedelta(**{_UNITS[m.group(2)]: int(m.group(1))}) if m else DEFAULT_SINCE
        except OverflowError:  # more days than a timedelta holds: far over the longest window anyway
            length = timedelta.max
        if length > LONGEST_WINDOW:
            raise exceptions.ValidationError({"since": [f"at most {LONGEST_WINDOW.days}d"]})
        start, end = now - length, now
    if end - start > LONGEST_WINDOW:
        raise exceptions.ValidationError({"from": [f"a window is at most {LONGEST_WINDOW.days} days"]})
    retention = timedelta(days=settings.HISTORY["DAILY_RETENTION_DAYS"])
    if start < now - retention:
        raise exceptions.ValidationError({"from": [f"before the history's retention ({retention.days} days)"]})
    return Window(start, end)


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


@functools.cache
def field_names(serializer: type) -> tuple[str, ...]:
    """The names of a serializer's fields, in order, built once per class: the views fill plain dicts with them
    (the serializer describes the shape in the schema); building a serializer's fields costs a deep copy each time,
    too much to do per row."""
    return tuple(serializer().fields)


def paged(results: list, *, count: int, page: int, page_size: int) -> dict:
    """A page's envelope, as every paged endpoint answers (page_schema describes it)."""
    return {
        "count": count,
        "page": page,
        "page_size": page_size,
        "pages": max(1, math.ceil(count / page_size)),
        "results": results,
    }


def page_schema(item: type[serializers.Serializer], name: str, **about: serializers.Field) -> type:
    """The schema of paged()'s envelope around `item` (count, page, page_size, pages, then what the page says `about`
    itself: its window, its order, then results), named `name` in the API's schema."""
    fields = {field: serializers.IntegerField() for field in ("count", "page", "page_size", "pages")}
    return type(name, (serializers.Serializer,), {**fields, **about, "results": item(many=True)})


def page_of(
    items: list, request: Request, *, default: int = DEFAULT_PAGE_SIZE, out: Callable[[Any], Any] | None = None
) -> Response:
    """A page of an in-memory list (small lists: organizations, servers, recommendations), each of its items made
    into its output by `out` (the page's only, not the whole list's)."""
    page, size = page_params(request, default=default)
    start = (page - 1) * size
    chosen = items[start : start + size]
    return Response(
        paged(chosen if out is None else [out(i) for i in chosen], count=len(items), page=page, page_size=size)
    )


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
            # Text, never a formula, in a spreadsheet (query texts are untrusted); an empty cell stays empty.
            writer.writerow({k: formula_safe(v) if isinstance(v, str) else v for k, v in r.items()})
        return out.getvalue().encode(self.charset)


class JSONRenderer(renderers.JSONRenderer):
    """DRF's JSON, encoded by orjson: the same text for what the API returns (datetimes in ISO 8601 with Z for
    UTC, everything else through DRF's encoder; a float's notation may differ, 1e-7 for 1e-07 and 0.00001 for
    1e-05, never its value). The json module's encoder calls back into Python for every datetime: the 1,442
    of a 30-day series took 8-17 ms a request on the benchmark's machine, orjson about 1 ms. Indented output
    (the browsable API, `; indent=`) and what orjson refuses (an integer beyond 64 bits) go to DRF's renderer.
    NaN and infinities, which DRF's strict JSON refuses with an error, come out as null (no figure)."""

    _default = staticmethod(JSONEncoder().default)

    def render(self, data, accepted_media_type=None, renderer_context=None):
        if data is None:
            return b""
        if self.get_indent(accepted_media_type, renderer_context or {}) is None:
            try:
                out = orjson.dumps(data, default=self._default, option=orjson.OPT_UTC_Z)
            except orjson.JSONEncodeError:
                pass
            else:  # as DRF: U+2028 and U+2029 escaped, so that the JSON is also JavaScript
                return out.replace(b"\xe2\x80\xa8", b"\\u2028").replace(b"\xe2\x80\xa9", b"\\u2029")
        return super().render(data, accepted_media_type, renderer_context)


TABLE_RENDERERS = [JSONRenderer, renderers.BrowsableAPIRenderer, CSVRenderer]
