"""One name for one thing: no class of the product is defined under a name another module of it also defines
(a reading's `Collection` is not the stored `Snapshot`; an EXPLAIN `Plan` is not the read tier's `ReadPlan`). Read
from the source (ast). Classes nested in others (a model's `Meta`, its choices) are named by their class, and a
management command's `Command` is the name Django looks for: both aside."""

import ast
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

from tests.test_tree import PRODUCT, ROOT


def _classes(paths: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    """(where, source) -> {class name: [where:line, ...]} of the module-level classes."""
    found: dict[str, list[str]] = defaultdict(list)
    for where, source in paths:
        for node in ast.parse(source).body:
            if isinstance(node, ast.ClassDef):
                found[node.name].append(f"{where}:{node.lineno}")
    return found


def _product() -> Iterable[tuple[str, str]]:
    for package in PRODUCT:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT)
            if "migrations" in rel.parts or "management/commands" in rel.as_posix():
                continue
            yield rel.as_posix(), path.read_text()


def _twice(found: dict[str, list[str]]) -> list[str]:
    return [f"{name}: {', '.join(places)}" for name, places in sorted(found.items()) if len(places) > 1]


def test_no_class_name_is_defined_twice_in_the_product():
    twice = _twice(_classes(_product()))
    assert not twice, "\n".join(twice)


def test_the_check_sees_a_name_defined_twice_and_not_a_nested_one():
    one = "class Plan:\n    class Meta:\n        pass\n"
    other = "class Plan:\n    pass\nclass Meta:\n    pass\n"
    assert _twice(_classes([("a.py", one), ("b.py", other)])) == ["Plan: a.py:1, b.py:1"]


def test_the_product_is_read_whole():
    assert {Path(where).parts[0] for where, _ in _product()} == set(PRODUCT)
