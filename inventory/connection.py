"""A monitored server's connection as it is given: typed in a form's or the API's fields, or written as a libpq
DSN on the command line. One checked value that inventory.services.server_create takes whichever way it came."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from django.core.exceptions import ValidationError
from psycopg import ProgrammingError
from psycopg.conninfo import conninfo_to_dict

from inventory.models import Server

# A DSN's parameters, each with the Connection field it gives (any other one is refused); an empty dbname, user
# or password leaves the field to its default.
DSN_PARAMETERS = {
    "host": "host",
    "port": "port",
    "dbname": "database",
    "user": "user",
    "password": "password",
    "sslmode": "sslmode",
}
EMPTY_IS_DEFAULT = frozenset({"dbname", "user", "password"})
HOST_EXAMPLE = " (e.g. postgresql://monitor@db1:5432/postgres)"


@dataclass(frozen=True)
class Connection:
    """Where the console connects, as whom and over what TLS mode, with the password (never in its repr): checked
    when it is made, so that no Connection holds a host-less, out-of-range or unknown value."""

    host: str
    port: int = 5432
    database: str = "postgres"
    user: str = "postgres"
    password: str = field(default="", repr=False)
    sslmode: str = Server.SslMode.REQUIRE  # new servers require TLS

    def __post_init__(self) -> None:
        if not self.host:
            raise ValidationError("a host is required", code="host")
        if not 0 < self.port < 65536:
            raise ValidationError(f"invalid port '{self.port}'", code="port")
        if self.sslmode not in Server.SslMode.values:
            raise ValidationError(f"invalid sslmode {self.sslmode!r}", code="sslmode")

    @classmethod
    def of(cls, values: Mapping[str, Any]) -> Connection:
        """The connection named by a mapping that holds its fields among others (a form's cleaned data, an API
        request's validated data); a field it lacks takes its default."""
        return cls(**{f.name: values[f.name] for f in fields(cls) if f.name in values})

    def server_fields(self) -> dict[str, Any]:
        """The Server fields it sets: all but the password, which is stored encrypted (Server.set_password)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "password"}


def parse_dsn(dsn: str) -> Connection:
    """The connection a libpq DSN or URI names (a parameter it leaves out takes the Connection's default); a
    ValidationError saying "malformed DSN" and why."""
    try:
        params = conninfo_to_dict(dsn)
    except ProgrammingError as exc:
        raise ValidationError(f"malformed DSN: {str(exc).strip()}") from exc
    port = params.get("port", "5432")
    # isdecimal, not isdigit: int() refuses a superscript digit.
    if not port.isdecimal():
        raise ValidationError(f"malformed DSN: invalid port {port!r}")
    given = {
        DSN_PARAMETERS[key]: value
        for key, value in params.items()
        if key in DSN_PARAMETERS and (value or key not in EMPTY_IS_DEFAULT)
    }
    try:
        connection = Connection(**(given | {"host": params.get("host", ""), "port": int(port)}))
    except ValidationError as exc:
        raise ValidationError(f"malformed DSN: {exc.message}{HOST_EXAMPLE if exc.code == 'host' else ''}") from exc
    unknown = set(params) - set(DSN_PARAMETERS)
    if unknown:
        raise ValidationError(f"malformed DSN: unsupported parameters {sorted(unknown)}")
    return connection
