"""The OS account that owns the data directories and runs the server programs.

PostgreSQL refuses to run as root, so when we are root every server program runs as the system
user ``pgconsole`` (created on demand) and the data directories belong to it.
"""

from __future__ import annotations

import os
import pwd
import subprocess
import threading
from pathlib import Path

from .errors import ClusterError

PG_USER = "pgconsole"

_user_lock = threading.Lock()


def _is_root() -> bool:
    return os.geteuid() == 0


def run_as() -> pwd.struct_passwd:
    """The account that owns data directories and runs the server programs.

    When we are root this is the system user ``pgconsole`` (created when
    missing); otherwise it is the current user.
    """
    if not _is_root():
        return pwd.getpwuid(os.geteuid())
    with _user_lock:
        try:
            return pwd.getpwnam(PG_USER)
        except KeyError:
            pass
        proc = subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", PG_USER],
            capture_output=True,
            text=True,
        )
        # exit status 9: the user was created concurrently by someone else
        if proc.returncode not in (0, 9):
            raise ClusterError(f"useradd {PG_USER} failed: {proc.stderr.strip()}")
        return pwd.getpwnam(PG_USER)


def _chown(path: Path) -> None:
    if _is_root():
        pw = run_as()
        os.chown(path, pw.pw_uid, pw.pw_gid)
