"""Unsubscribe links: one per recipient and organization, signed (django.core.signing with its own salt)
so that an address cannot be unsubscribed by guessing a URL, and working without a login."""

from __future__ import annotations

from dataclasses import dataclass

from django.core import signing
from django.urls import reverse

from reports.weekly import console_url

SALT = "reports.unsubscribe"


@dataclass(frozen=True)
class UnsubscribeRequest:
    organization_id: int
    address: str


def unsubscribe_token(*, organization_id: int, address: str) -> str:
    return signing.dumps([organization_id, address.strip().lower()], salt=SALT, compress=True)


def unsubscribe_url(*, organization_id: int, address: str) -> str:
    token = unsubscribe_token(organization_id=organization_id, address=address)
    return console_url(reverse("report-unsubscribe", args=[token]))


def read_token(token: str) -> UnsubscribeRequest | None:
    """The organization and address a token was signed for; None where it was altered or is not one."""
    try:
        organization_id, address = signing.loads(token, salt=SALT)
    except (signing.BadSignature, ValueError, TypeError):
        return None
    if not isinstance(organization_id, int) or not isinstance(address, str):
        return None
    return UnsubscribeRequest(organization_id, address)
