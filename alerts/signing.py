"""The generic webhook's signature: HMAC-SHA256, keyed by the channel's signing secret, over the timestamp,
a dot and the body as sent, so a receiver can tell the console sent it and refuse a replay of an old one.

Headers: `X-Pgconsole-Timestamp` (Unix seconds) and `X-Pgconsole-Signature` (`v1=` and the hex digest). A
receiver recomputes the digest over the raw body it read, compares in constant time and refuses a timestamp
further than its tolerance (five minutes is this module's default) from its own clock."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time

TIMESTAMP_HEADER = "X-Pgconsole-Timestamp"
SIGNATURE_HEADER = "X-Pgconsole-Signature"
TOLERANCE_S = 300


def new_secret() -> str:
    """A signing secret for a new channel (shown once, stored encrypted)."""
    return "whsec_" + secrets.token_urlsafe(32)


def signature(secret: str, timestamp: int, body: bytes) -> str:
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"v1={digest}"


def signed_headers(secret: str, body: bytes, *, now: float | None = None) -> dict[str, str]:
    timestamp = int(now if now is not None else time.time())
    return {TIMESTAMP_HEADER: str(timestamp), SIGNATURE_HEADER: signature(secret, timestamp, body)}


def verify(secret: str, headers: dict[str, str], body: bytes, *, now: float | None = None) -> bool:
    """What a receiver does: the signature matches and the timestamp is recent (the tests' receiver uses it)."""
    try:
        timestamp = int(headers[TIMESTAMP_HEADER])
    except (KeyError, ValueError):
        return False
    if abs((now if now is not None else time.time()) - timestamp) > TOLERANCE_S:
        return False
    return hmac.compare_digest(signature(secret, timestamp, body), headers.get(SIGNATURE_HEADER, ""))
