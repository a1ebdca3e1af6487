"""The time range of a page, kept in the URL: ?range=1h|6h|24h|7d|30d, or ?range=custom&start=&end=
(local times in the user's time zone, as an <input type="datetime-local"> sends them). A page opened without one
shows the shortest of 1 h, 6 h and 24 h that holds its whole history (a new installation opens on its first
minutes, not on a day of nothing), and a range that reaches back before the history says where it begins."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta, tzinfo

from django.utils import timezone

from readtier import Window

PRESETS: dict[str, timedelta] = {
    "1h": timedelta(hours=1),
    "6h": timedelta(hours=6),
    "24h": timedelta(hours=24),
    "7d": timedelta(days=7),
    "30d": timedelta(days=30),
}
DEFAULT = "24h"  # once the history is older than 6 hours, or where a page does not know its history
OPENING = ("1h", "6h")  # the shorter ranges a page opens on while its history fits in them
UNKNOWN = object()  # a page that does not read where its history begins
LONGEST = timedelta(days=400)
_LOCAL_FORMATS = ("%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%d")


@dataclass(frozen=True)
class TimeRange:
    key: str  # a preset, or "custom"
    window: Window
    error: str = ""  # why the range asked for was not used (the default was)
    history_from: datetime | None = None  # where the page's history begins, where the page read it

    @property
    def begins_inside(self) -> bool:
        """The history begins after the range's start: the page says where (nothing before it is a gap)."""
        return self.history_from is not None and self.history_from > self.window.start

    @property
    def params(self) -> dict[str, str]:
        """The URL parameters that give this range back."""
        if self.key != "custom":
            return {"range": self.key}
        tz = timezone.get_current_timezone()
        return {"range": "custom", "start": _local(self.window.start, tz), "end": _local(self.window.end, tz)}

    @property
    def start_local(self) -> str:
        return _local(self.window.start, timezone.get_current_timezone())

    @property
    def end_local(self) -> str:
        return _local(self.window.end, timezone.get_current_timezone())


def _local(at: datetime, tz: tzinfo) -> str:
    return at.astimezone(tz).strftime("%Y-%m-%dT%H:%M")


def _parse_local(value: str, tz: tzinfo) -> datetime:
    """A time in the reader's zone; one written with its UTC offset (a link from a mail, made in the report's
    zone) is taken as written, whoever reads it."""
    try:
        at = datetime.fromisoformat(value.strip())
    except ValueError:
        at = None
    if at is not None and at.tzinfo is not None:
        return at
    for fmt in _LOCAL_FORMATS:
        try:
            return timezone.make_aware(datetime.strptime(value.strip(), fmt), tz)
        except ValueError:
            continue
    raise ValueError(f"{value!r} is not a date and time (YYYY-MM-DDTHH:MM)")


def opening_key(history_from: datetime | None, now: datetime) -> str:
    """The range a page opens on: the shortest of 1 h and 6 h that holds the whole history (no history yet: 1 h),
    else 24 h."""
    for key in OPENING:
        if history_from is None or now - history_from <= PRESETS[key]:
            return key
    return DEFAULT


def opening_key_of(older: list[bool]) -> str:
    """The opening range from whether the history is older than each of OPENING (history_older_than)."""
    return next((key for key, beyond in zip(OPENING, older, strict=True) if not beyond), DEFAULT)


def parse_range(params, *, now: datetime | None = None, history_from=UNKNOWN, opening: str = "") -> TimeRange:
    """The range of the request's parameters; none: the opening range for `history_from` (where the page's history
    begins, None: none yet), or `opening` as the page found it (opening_key_of), else 24 h; an invalid one gives
    that with the reason in `error`."""
    now = now or timezone.now()
    known = history_from is not UNKNOWN
    fallback = opening_key(history_from, now) if known else (opening if opening else DEFAULT)
    begins = history_from if known else None
    key = params.get("range") or fallback
    if key in PRESETS:
        return TimeRange(key, Window.last(PRESETS[key], now=now), history_from=begins)
    default = TimeRange(fallback, Window.last(PRESETS[fallback], now=now), history_from=begins)
    if key != "custom":
        return replace(default, error=f"unknown range {key!r}: one of {', '.join(PRESETS)} or custom")
    tz = timezone.get_current_timezone()
    try:
        start = _parse_local(params.get("start", ""), tz)
        end = _parse_local(params.get("end", ""), tz) if params.get("end") else now
    except ValueError as exc:
        return replace(default, error=f"custom range: {exc}")
    if start >= end:
        return replace(default, error="custom range: the start must be before the end")
    if end - start > LONGEST:
        return replace(default, error=f"custom range: at most {LONGEST.days} days")
    return TimeRange("custom", Window(start, end), history_from=begins)
