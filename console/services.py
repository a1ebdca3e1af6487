"""Writes on organizations and servers."""
from django.core.exceptions import ValidationError
from django.db import transaction
from psycopg import ProgrammingError
from psycopg.conninfo import conninfo_to_dict

from console.models import Organization, Server

DEFAULT_ORGANIZATION = "default"


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


def server_delete(*, server: Server) -> None:
    """Remove a server with its whole history (facts live in partitioned tables without FKs)."""
    from django.db import connection

    with transaction.atomic(), connection.cursor() as cur:
        for table in (
            "collectors_snapshot",
            "collectors_wait_event",
            "collectors_statement_hourly",
            "collectors_statement_daily",
            "collectors_wait_event_hourly",
            "collectors_wait_event_daily",
            "collectors_statement_state",
        ):
            cur.execute(f"DELETE FROM {table} WHERE server_id = %s", [server.pk])
        server.delete()
