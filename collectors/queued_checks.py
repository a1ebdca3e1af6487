"""Test connection, off the web request: a page or the API queues a check (collectors.connection_check.server_check) for
a worker (queue `checks`) and polls its state, kept in the cache for an hour.

The web process never dials a monitored server, and a server that takes its time holds a worker thread (within
the check's deadline), not a web one. The password travels encrypted (inventory.crypto) in the cache entry,
never in the broker's message, and is dropped from the entry as soon as a worker takes the check. A check
belongs to the organization it was made for: who may read it is accounts.access's to say."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Literal

from django.conf import settings
from django.core.cache import cache
from django.views.decorators.debug import sensitive_variables

from collectors.connection_check import CheckReport, server_check
from inventory.crypto import CredentialsError, decrypt_secret, encrypt_secret
from inventory.endpoint import Endpoint

CHECK_TTL_S = 3600  # how long a check's state stays readable
QUEUE_WAIT_S = 30  # a check no worker took by then is given up (its message expires too)
Status = Literal["queued", "running", "done", "lost"]


@dataclass(frozen=True)
class CheckState:
    check_id: str
    status: Status
    organization_id: int
    server_id: int | None  # the stored server checked, None for a form's typed connection
    target: str  # user@host:port/database, never the password
    report: CheckReport | None  # once done
    note: str  # which password was used, when the asker should know
    problem: str  # why a lost check was given up
    waited_s: float  # from queued to taken by a worker (or until now while queued)

    @property
    def pending(self) -> bool:
        return self.status in ("queued", "running")


def _key(check_id: str) -> str:
    return f"connection-check:{check_id}"


def longest_check_s() -> float:
    """The longest a check may run once taken: its connection timeout, its deadline, and a margin."""
    cfg = settings.COLLECTOR
    return cfg["CONNECT_TIMEOUT_S"] + float(cfg["SNAPSHOT_TIMEOUT_S"]) + 10


def check_queue(
    *,
    organization_id: int,
    server_id: int | None,
    endpoint: Endpoint,
    password: str | None,
    note: str = "",
    enqueue: Callable[[str], object],
) -> CheckState:
    """Queue a check of this connection, made for `organization_id` (and its server `server_id` if stored);
    `enqueue(check_id)` sends it to a worker (collectors.tasks.check_enqueue)."""
    check_id = str(uuid.uuid4())
    entry = {
        "organization_id": organization_id,
        "server_id": server_id,
        "status": "queued",
        "queued_at": time.time(),
        "started_at": None,
        "note": note,
        "report": None,
        "connection": asdict(endpoint),
        "password": encrypt_secret(password) if password else None,
    }
    cache.set(_key(check_id), entry, CHECK_TTL_S)
    enqueue(check_id)
    return _state(check_id, entry)


def check_state(*, check_id: str) -> CheckState | None:
    """The check's state; None for an unknown id or one more than an hour old."""
    entry = cache.get(_key(check_id))
    if entry is None:
        return None
    return _state(check_id, entry)


@sensitive_variables("sealed", "password", "entry")
def check_run(check_id: str) -> Status | None:
    """The worker's side: take the check (its password leaves the cache), run it, store the report."""
    key = _key(check_id)
    entry = cache.get(key)
    if entry is None or entry["status"] != "queued":
        return None  # expired, or taken already (a redelivered message)
    sealed = entry.pop("password")
    entry.update(status="running", started_at=time.time())
    cache.set(key, entry, CHECK_TTL_S)
    try:
        password = decrypt_secret(sealed) if sealed else None
    except CredentialsError:
        # The web process and the worker hold different CREDENTIALS_KEYs: a deployment mistake to show.
        problem = (
            "The worker cannot decrypt the check's password: the console's web process and its workers hold "
            "different CREDENTIALS_KEY values."
        )
        entry.update(status="lost", problem=problem)
        cache.set(key, entry, CHECK_TTL_S)
        return "lost"
    report = server_check(endpoint=Endpoint(**entry["connection"]), password=password)
    entry.update(status="done", report=report)
    cache.set(key, entry, CHECK_TTL_S)
    return "done"


def _state(check_id: str, entry: dict) -> CheckState:
    status, problem = entry["status"], entry.get("problem", "")
    now, queued_at, started_at = time.time(), entry["queued_at"], entry["started_at"]
    if status == "queued" and now - queued_at > QUEUE_WAIT_S:
        status, problem = (
            "lost",
            (
                f"No worker took the check within {QUEUE_WAIT_S} s: the collection worker (queue checks) is not "
                "running, or every one of its threads is busy. Try again; if it keeps happening, look at the workers."
            ),
        )
    elif status == "running" and now - started_at > longest_check_s():
        status, problem = "lost", "The worker stopped in the middle of the check (restarted?): try again."
    return CheckState(
        check_id=check_id,
        status=status,
        organization_id=entry["organization_id"],
        server_id=entry["server_id"],
        target=Endpoint(**entry["connection"]).label,
        report=entry["report"],
        note=entry["note"],
        problem=problem,
        waited_s=(started_at or now) - queued_at,
    )
