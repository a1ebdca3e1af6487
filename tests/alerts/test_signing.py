"""The webhook's signature (alerts/signing.py): HMAC-SHA256 over the timestamp, a dot and the body as sent, which a
receiver recomputes with nothing but the standard library; a changed byte, another secret, a missing or stale
timestamp and another scheme are refused."""

from __future__ import annotations

import hashlib
import hmac

from alerts import signing

SECRET = "whsec_test"
BODY = b'{"schema":"pgconsole.alert/1"}'
NOW = 1_790_000_000.0


def test_a_receiver_recomputes_the_signature_from_the_documented_recipe():
    headers = signing.signed_headers(SECRET, BODY, now=NOW)
    assert headers[signing.TIMESTAMP_HEADER] == str(int(NOW))
    expected = hmac.new(SECRET.encode(), f"{int(NOW)}.".encode() + BODY, hashlib.sha256).hexdigest()
    assert headers[signing.SIGNATURE_HEADER] == f"v1={expected}"
    assert signing.verify(SECRET, headers, BODY, now=NOW)


def test_a_changed_body_another_secret_or_a_forged_timestamp_is_refused():
    headers = signing.signed_headers(SECRET, BODY, now=NOW)
    assert not signing.verify(SECRET, headers, BODY.replace(b"1", b"2"), now=NOW)
    assert not signing.verify("whsec_other", headers, BODY, now=NOW)
    moved = {**headers, signing.TIMESTAMP_HEADER: str(int(NOW) + 1)}  # the signature covers the timestamp
    assert not signing.verify(SECRET, moved, BODY, now=NOW)
    v0 = {**headers, signing.SIGNATURE_HEADER: headers[signing.SIGNATURE_HEADER].replace("v1=", "v0=")}
    assert not signing.verify(SECRET, v0, BODY, now=NOW)


def test_a_replay_is_refused_past_the_tolerance_either_way():
    headers = signing.signed_headers(SECRET, BODY, now=NOW)
    assert signing.verify(SECRET, headers, BODY, now=NOW + signing.TOLERANCE_S)
    assert not signing.verify(SECRET, headers, BODY, now=NOW + signing.TOLERANCE_S + 1)
    assert not signing.verify(SECRET, headers, BODY, now=NOW - signing.TOLERANCE_S - 1)  # a clock ahead


def test_missing_or_malformed_headers_are_refused_not_raised():
    signature = signing.signed_headers(SECRET, BODY, now=NOW)[signing.SIGNATURE_HEADER]
    assert not signing.verify(SECRET, {signing.SIGNATURE_HEADER: signature}, BODY, now=NOW)
    assert not signing.verify(SECRET, {signing.TIMESTAMP_HEADER: "soon"}, BODY, now=NOW)
    assert not signing.verify(SECRET, {signing.TIMESTAMP_HEADER: str(int(NOW))}, BODY, now=NOW)


def test_every_new_secret_is_different_and_long_enough():
    secrets = {signing.new_secret() for _ in range(50)}
    assert len(secrets) == 50
    assert all(s.startswith("whsec_") and len(s) >= 6 + 43 for s in secrets)  # 32 random bytes, base64
