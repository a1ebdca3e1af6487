"""Dependencies run one way: console (renders) -> collectors (collection, history, selectors) -> inventory
(organizations and servers). Read from the source (ast), so an import inside a function counts too."""

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# A history table's name (collectors.tables): only collectors spells them out.
HISTORY_TABLE = re.compile(r"\bcollectors_[a-z]")


def _modules(package: str) -> Iterator[tuple[Path, ast.Module]]:
    for path in sorted((ROOT / package).rglob("*.py")):
        yield path, ast.parse(path.read_text(), filename=str(path))


def _history_tables(tree: ast.Module) -> Iterator[ast.Constant]:
    """Every string (f-strings' parts too) that spells a history table's name."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and HISTORY_TABLE.search(node.value):
            yield node


def _imports(tree: ast.Module) -> Iterator[tuple[int, str]]:
    """(line, imported top-level package) of every absolute import."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module.split(".")[0]


@pytest.mark.parametrize("package, forbidden", [("collectors", {"console"}),
                                                ("inventory", {"collectors", "console"})])  # fmt: skip
def test_imports_run_one_way(package, forbidden):
    wrong = [f"{path.relative_to(ROOT)}:{line} imports {name}"
             for path, tree in _modules(package) for line, name in _imports(tree) if name in forbidden]  # fmt: skip
    assert not wrong, "\n".join(wrong)


def test_console_names_no_history_table():
    """console reaches the history through collectors (selectors, services), never by table name."""
    wrong = [f"{path.relative_to(ROOT)}:{node.lineno} {node.value[:60]!r}"
             for path, tree in _modules("console") if "migrations" not in path.relative_to(ROOT).parts
             for node in _history_tables(tree)]  # fmt: skip
    assert not wrong, "\n".join(wrong)


def test_the_checks_see_what_they_look_for():
    """The walkers find a forbidden import inside a function and a table name inside an f-string."""
    tree = ast.parse(
        'def f(n):\n    from console.models import Server\n    return f"SELECT 1 FROM collectors_snapshot {n}"'
    )
    assert (2, "console") in set(_imports(tree))
    assert [node.lineno for node in _history_tables(tree)] == [3]
