"""How `make test` hands the suite to its pytest workers (pytest-xdist): whole files, in collection order (the
slow ones first, tests/conftest.py), except that the files reading a world built once per session and committed
(the known history of the reports and the exports) go together as one unit, run in a row on one worker. A
transactional test flushes the database after it runs; between two readers of such a world it would remove what
the second reads, which a serial run avoided by running every transactional test after the others."""

from __future__ import annotations

import pytest
from xdist.scheduler import LoadScopeScheduling

#: Session fixtures whose world is committed to the test database and read by many files.
SHARED_WORLDS = ("known_history",)


def tag_shared_worlds(items: list[pytest.Item]) -> None:
    """In a worker: every test of a file that reads a shared world gets '@<world>' after its id (as xdist's own
    loadgroup does), which the controller's scheduler reads."""
    world_of: dict[str, str] = {}
    for item in items:
        for world in SHARED_WORLDS:
            if world in getattr(item, "fixturenames", ()):
                world_of.setdefault(item.nodeid.split("::", 1)[0], world)
    for item in items:
        world = world_of.get(item.nodeid.split("::", 1)[0])
        if world is not None:
            item._id = type(item._id).parse(f"{item.nodeid}@{world}")


class FilesAndWorlds(LoadScopeScheduling):
    """xdist's scheduling by scope, a scope being a file or a shared world."""

    def _split_scope(self, nodeid: str) -> str:
        if "@" in nodeid:
            return nodeid.rsplit("@", 1)[1]
        return nodeid.split("::", 1)[0]
