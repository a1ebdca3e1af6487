"""Where and how the console connects to a monitored server, its password aside: one value that a stored
server gives (Server.endpoint), a connection check is asked for, and a collection connects with."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any


@dataclass(frozen=True)
class Endpoint:
    host: str
    port: int
    database: str
    user: str
    sslmode: str
    ssl_root_cert: str = ""  # the CA to verify the server with (inventory.tls)
    require_scram: bool = False  # a password only through SCRAM-SHA-256

    @classmethod
    def of(cls, values: Mapping[str, Any]) -> Endpoint:
        """The endpoint named by a mapping that holds these fields among others (a form's cleaned data)."""
        return cls(**{name: values[name] for name in ENDPOINT_FIELDS if name in values})

    @property
    def label(self) -> str:
        return f"{self.user}@{self.host}:{self.port}/{self.database}"


ENDPOINT_FIELDS = tuple(f.name for f in fields(Endpoint))
