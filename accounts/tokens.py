"""Personal API tokens: `pgc_<prefix>_<secret>`; the database keeps the prefix and a sha256 of the token. A metrics
token is scoped to one organization: /metrics of its servers, nothing else."""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime, timedelta

from django.contrib.auth.models import AbstractBaseUser
from django.utils import timezone

from accounts.access import visible_organizations
from accounts.models import ApiToken
from inventory.models import Organization

SCHEME = "pgc"
MAX_EXPIRY_DAYS = 3650
LAST_USED_EVERY = timedelta(minutes=1)  # last_used_at is written at most this often per token


class TokenError(ValueError):
    """A token that cannot be created (bad name or expiry) or found."""


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def token_create(
    *,
    user: AbstractBaseUser,
    name: str,
    read_only: bool = False,
    expires_days: int | None = None,
    organization: Organization | None = None,
) -> tuple[ApiToken, str]:
    """A new token and its secret (returned once; only its hash is stored). With `organization`, a metrics
    token: read-only, /metrics of that organization's servers only (one the user sees), never the API."""
    name = name.strip()
    if not name:
        raise TokenError("a token needs a name (what it is for, e.g. 'ci-checks')")
    if organization is not None and not visible_organizations(user).filter(pk=organization.pk).exists():
        raise TokenError(f"{user} is not a member of {organization.name}: a metrics token sees one of your own")
    if expires_days is not None and not 1 <= expires_days <= MAX_EXPIRY_DAYS:
        raise TokenError(f"expiry in days must be between 1 and {MAX_EXPIRY_DAYS}")
    prefix = secrets.token_hex(4)
    token = f"{SCHEME}_{prefix}_{secrets.token_urlsafe(32)}"
    expires_at = timezone.now() + timedelta(days=expires_days) if expires_days else None
    row = ApiToken.objects.create(
        user=user,
        name=name[:100],
        prefix=prefix,
        secret_hash=token_hash(token),
        read_only=read_only or organization is not None,
        expires_at=expires_at,
        organization=organization,
    )
    return row, token


def token_revoke(*, user: AbstractBaseUser, prefix: str) -> ApiToken:
    row = ApiToken.objects.filter(user=user, prefix=prefix, revoked_at__isnull=True).first()
    if row is None:
        raise TokenError(f"{user} has no active token {prefix!r}")
    row.revoked_at = timezone.now()
    row.save(update_fields=["revoked_at"])
    return row


def token_check(token: str, *, now: datetime | None = None) -> ApiToken | None:
    """The active token matching `token` (not revoked, not expired), with its user; None otherwise."""
    parts = token.split("_")
    if len(parts) < 3 or parts[0] != SCHEME:
        return None
    row = ApiToken.objects.select_related("user").filter(prefix=parts[1]).first()
    if row is None or not secrets.compare_digest(row.secret_hash, token_hash(token)):
        return None
    now = now or timezone.now()
    if row.revoked_at is not None or (row.expires_at is not None and row.expires_at <= now):
        return None
    if not row.user.is_active:
        return None
    return row


def token_used(row: ApiToken, *, now: datetime | None = None) -> None:
    """Notes the token's use (its list shows when it was last used), at most once every LAST_USED_EVERY."""
    now = now or timezone.now()
    if row.last_used_at is None or now - row.last_used_at > LAST_USED_EVERY:
        ApiToken.objects.filter(pk=row.pk).update(last_used_at=now)
