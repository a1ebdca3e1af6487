"""Writes on organizations and servers: registering a server and changing it. Deletes take the
history with them, which this layer does not know about: they are in console/services.py."""

from collections.abc import Mapping
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from psycopg import ProgrammingError
from psycopg.conninfo import conninfo_to_dict

from inventory.models import Organization, Server

DEFAULT_ORGANIZATION = "default"
# What server_update may change (the collection status belongs to the collectors).
UPDATABLE_FIELDS = frozenset({"organization", "name", "host", "port", "database", "user", "sslmode", "enabled",
                              "interval_s", "cpu_count", "tags"})  # fmt: skip
# Where the password is sent: a change to any of these without a new password clears the stored one.
CONNECTION_FIELDS = ("host", "port", "database", "user")


def parse_dsn(dsn: str) -> dict[str, str]:
    """Connection fields from a libpq DSN or URI; a clear ValidationError when malformed."""
    try:
        params = conninfo_to_dict(dsn)
    except ProgrammingError as exc:
        raise ValidationError(f"malformed DSN: {str(exc).strip()}") from exc
    if not params.get("host"):
        raise ValidationError("malformed DSN: a host is required (e.g. postgresql://monitor@db1:5432/postgres)")
    port = params.get("port", "5432")
    if not str(port).isdigit() or not 0 < int(port) < 65536:
        raise ValidationError(f"malformed DSN: invalid port {port!r}")
    sslmode = params.get("sslmode", Server.SslMode.PREFER)
    if sslmode not in Server.SslMode.values:
        raise ValidationError(f"malformed DSN: invalid sslmode {sslmode!r}")
    unknown = set(params) - {"host", "port", "dbname", "user", "password", "sslmode"}
    if unknown:
        raise ValidationError(f"malformed DSN: unsupported parameters {sorted(unknown)}")
    return {
        "host": params["host"],
        "port": int(port),
        "database": params.get("dbname") or "postgres",
        "user": params.get("user") or "postgres",
        "password": params.get("password") or "",
        "sslmode": sslmode,
    }


@transaction.atomic
def server_create(
    *,
    name: str,
    dsn: str,
    organization_name: str = DEFAULT_ORGANIZATION,
    interval_s: int = 60,
    cpu_count: int | None = None,
    tags: list[str] | None = None,
) -> Server:
    fields = parse_dsn(dsn)
    organization, _ = Organization.objects.get_or_create(name=organization_name)
    if Server.objects.filter(organization=organization, name=name).exists():
        raise ValidationError(f"a server named {name!r} already exists in organization {organization_name!r}")
    password = fields.pop("password")
    server = Server(organization=organization, name=name, interval_s=interval_s, cpu_count=cpu_count,
                    tags=tags or [], **fields)  # fmt: skip
    server.set_password(password)
    server.full_clean()
    server.save()
    return server


@transaction.atomic
def server_update(
    *,
    server: Server,
    data: Mapping[str, Any],
    password: str | None = None,
    clear_password: bool = False,
) -> Server:
    """Change the fields in ``data`` (names from UPDATABLE_FIELDS); a non-empty ``password`` replaces
    the stored one.

    The stored password goes only where its owner sent it: when host, port, database or user change
    and no new password comes with the change, it is cleared, never sent to the new destination.
    """
    unknown = set(data) - UPDATABLE_FIELDS
    if unknown:
        raise ValidationError(f"cannot update {sorted(unknown)}")
    moved = any(field in data and data[field] != getattr(server, field) for field in CONNECTION_FIELDS)
    for field, value in data.items():
        setattr(server, field, value)
    if password:
        server.set_password(password)
    elif clear_password or moved:
        server.set_password(None)
    server.full_clean()
    server.save()
    return server
