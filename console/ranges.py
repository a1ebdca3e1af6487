"""The time range of a page, kept in the URL: ?range=1h|6h|24h|7d|30d, or ?range=custom&start=&end=
(local times in the user's time zone, as an <input type="datetime-local"> sends them)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, tzinfo

from django.utils import timezone

from collectors.selectors import Window

PRESETS: dict[str, timedelta] = {
    "1h": timedelta(hours=1),
    "6h": timedelta(hours=6),
    "24h": timedelta(hours=24),
    "7d": timedelta(days=7),
    "30d": timedelta(days=30),
}
DEFAULT = "24h"
LONGEST = timedelta(days=400)
_LOCAL_FORMATS = ("%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%d")


@dataclass(frozen=True)
class TimeRange:
    key: str  # a preset, or "custom"
    window: Window
    error: str = ""  # why the range asked for was not used (the default was)

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


def parse_range(params, *, now: datetime | None = None) -> TimeRange:
    """The range of the request's parameters; an invalid one gives the default with the reason in `error`."""
    now = now or timezone.now()
    key = params.get("range") or DEFAULT
    if key in PRESETS:
        return TimeRange(key, Window.last(PRESETS[key], now=now))
    default = TimeRange(DEFAULT, Window.last(PRESETS[DEFAULT], now=now))
    if key != "custom":
        return TimeRange(default.key, default.window, f"unknown range {key!r}: one of {', '.join(PRESETS)} or custom")
    tz = timezone.get_current_timezone()
    try:
        start = _parse_local(params.get("start", ""), tz)
        end = _parse_local(params.get("end", ""), tz) if params.get("end") else now
    except ValueError as exc:
        return TimeRange(default.key, default.window, f"custom range: {exc}")
    if start >= end:
        return TimeRange(default.key, default.window, "custom range: the start must be before the end")
    if end - start > LONGEST:
        return TimeRange(default.key, default.window, f"custom range: at most {LONGEST.days} days")
    return TimeRange("custom", Window(start, end))
