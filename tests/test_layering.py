"""Dependencies run one way. From the top: console (pages, API, commands), then the renderers beneath it
(reports: the weekly mail; exports: the audit exports; alerts: rules, evaluation and deliveries), presentation
(the number and text formatting the renderers share), accounts (who may see what, preferences, API tokens), the
advisor, the collectors of monitored servers (collectors: the collection, and the plans of the statements the
read tier ranks first), the read tier (readtier: the selectors), both on the history store (history), and inventory
(organizations and servers) at the ground.
devenv (development clusters, workloads, the demo command) is imported by no package of the product: only by the
benchmarks and the tests. The advisor's rules are pure: they read evidence, never the ORM. Read from the source
(ast), so an import inside a function counts too."""

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# A history table's name (history.tables): the console never spells one out.
HISTORY_TABLE = re.compile(r"\bcollectors_[a-z]")


def _modules(package: str) -> Iterator[tuple[Path, ast.Module]]:
    for path in sorted((ROOT / package).rglob("*.py")):
        yield path, ast.parse(path.read_text(), filename=str(path))


def _history_tables(tree: ast.Module) -> Iterator[ast.Constant]:
    """Every string (f-strings' parts too) that spells a history table's name."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and HISTORY_TABLE.search(node.value):
            yield node


def _imports(tree: ast.Module, *, whole: bool = False) -> Iterator[tuple[int, str]]:
    """(line, imported top-level package, or the whole module's name) of every absolute import."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name if whole else alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module if whole else node.module.split(".")[0]


# Reading, storing and serving: the collectors of monitored servers, the history store and the read tier.
STORE = {"history", "collectors", "readtier"}
# What each package of the product may import of the others (nothing else of them).
MAY_IMPORT = {
    "inventory": set(),
    "history": {"inventory"},
    "collectors": {"history", "inventory", "readtier"},  # the read tier's top statements: which ones to plan
    "readtier": {"history", "inventory"},
    "advisor": {*STORE, "inventory"},
    "accounts": {*STORE, "inventory"},
    "presentation": STORE,
    "reports": {"accounts", "advisor", *STORE, "inventory", "presentation"},
    "exports": {"accounts", "advisor", *STORE, "inventory", "presentation"},
    "alerts": {"accounts", "advisor", *STORE, "inventory", "presentation"},
    "console": {"accounts", "advisor", "alerts", *STORE, "exports", "inventory", "presentation", "reports"},
    "devenv": set(),
}
# devenv's Django commands (manage.py demo, installed in DEBUG only) drive the product: they may import it.
DEVELOPMENT_ENTRIES = "devenv/management/"


def _allowed(package: str, path: Path) -> set[str]:
    if path.relative_to(ROOT).as_posix().startswith(DEVELOPMENT_ENTRIES):
        return set(MAY_IMPORT)
    return MAY_IMPORT[package] | {package}


@pytest.mark.parametrize("package", sorted(MAY_IMPORT))
def test_imports_run_one_way(package):
    wrong = [
        f"{path.relative_to(ROOT)}:{line} imports {name}"
        for path, tree in _modules(package)
        for line, name in _imports(tree)
        if name in MAY_IMPORT and name not in _allowed(package, path)
    ]
    assert not wrong, "\n".join(wrong)


# What the advisor's rules may take from the other apps: modules of pure functions, which import nothing of
# Django nor of the product (the test below holds them to it).
PURE_FOR_RULES = {"collectors.sql_names"}


# Each app of the store is imported by the other apps only through its public entries, never a module inside: the
# collectors, the history store and the read tier are three rooms, and each goes into another by its door alone
# (the collectors hand the history store's writer their rows, the read tier reads its tables by TABLES).
ENTRIES = {
    "readtier": ("readtier",),  # not a Django app: its package is its entry
    "history": ("history.public",),
    # sql_names: pure, for the advisor's rules; config: pure, the readings' settings for console/settings.py
    "collectors": ("collectors.public", "collectors.sql_names", "collectors.config"),
}


def _insides(package: str, tree: ast.Module) -> Iterator[tuple[int, str]]:
    """(line, module) of every import of a module of ENTRIES' apps, other than their entries, from outside."""
    for line, name in _imports(tree, whole=True):
        top = name.split(".")[0]
        if top in ENTRIES and top != package and name not in ENTRIES[top]:
            yield line, name


def test_other_apps_import_the_stores_apps_only_through_their_entries():
    wrong = [
        f"{path.relative_to(ROOT)}:{line} imports {name}"
        for package in MAY_IMPORT
        for path, tree in _modules(package)
        if not path.relative_to(ROOT).as_posix().startswith(DEVELOPMENT_ENTRIES)
        for line, name in _insides(package, tree)
    ]
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("entry", ["readtier/__init__.py", "history/public.py", "collectors/public.py"])
def test_an_entry_hands_on_each_name_once_and_none_hides_a_module(entry):
    tree = ast.parse((ROOT / entry).read_text())
    names = [
        alias.asname or alias.name for node in tree.body if isinstance(node, ast.ImportFrom) for alias in node.names
    ]
    package = ROOT / entry.split("/")[0]
    modules = {path.stem for path in package.glob("*.py")} | {path.name for path in package.iterdir() if path.is_dir()}
    assert len(names) == len(set(names)) and not set(names) & modules, sorted(set(names) & modules)
    exported = next(node for node in tree.body if isinstance(node, ast.Assign)).value
    assert sorted(ast.literal_eval(exported)) == sorted(names)


def test_the_entry_check_sees_an_inner_import():
    tree = ast.parse(
        "from readtier.windows import Window\nfrom readtier import Window\nimport readtier.db\n"
        "from history.store import redact\nfrom history.public import redact\nfrom collectors.sql_names import q\n"
    )
    assert list(_insides("console", tree)) == [(1, "readtier.windows"), (3, "readtier.db"), (4, "history.store")]
    assert list(_insides("collectors", tree)) == [(1, "readtier.windows"), (3, "readtier.db"), (4, "history.store")]
    assert list(_insides("advisor", tree)) == [(1, "readtier.windows"), (3, "readtier.db"), (4, "history.store")]


def test_the_rules_of_the_advisor_read_no_orm():
    """advisor/rules/: pure functions of the evidence (advisor.gather reads the history for them)."""
    wrong = [
        f"{path.relative_to(ROOT)}:{line} imports {name}"
        for path, tree in _modules("advisor/rules")
        for line, name in _imports(tree, whole=True)
        if name.startswith("django")
        or name.split(".")[-1] in ("models", "selectors", "gather")
        or (name.split(".")[0] in (*STORE, "inventory") and name not in PURE_FOR_RULES)
    ]
    assert not wrong, "\n".join(wrong)
    for module in PURE_FOR_RULES:
        path = ROOT / (module.replace(".", "/") + ".py")
        imported = [name for _, name in _imports(ast.parse(path.read_text()))]
        assert not [name for name in imported if name == "django" or name in MAY_IMPORT], (module, imported)


def test_console_names_no_history_table():
    """console reaches the history through the read tier and the services, never by table name."""
    wrong = [
        f"{path.relative_to(ROOT)}:{node.lineno} {node.value[:60]!r}"
        for path, tree in _modules("console")
        if "migrations" not in path.relative_to(ROOT).parts
        for node in _history_tables(tree)
    ]
    assert not wrong, "\n".join(wrong)


def test_the_checks_see_what_they_look_for():
    """The walkers find a forbidden import inside a function and a table name inside an f-string."""
    tree = ast.parse(
        'def f(n):\n    from console.models import Server\n    return f"SELECT 1 FROM collectors_snapshot {n}"'
    )
    assert (2, "console") in set(_imports(tree))
    assert [node.lineno for node in _history_tables(tree)] == [3]


def _module_imports() -> dict[str, set[str]]:
    """module -> the product's modules it imports (a name imported from a package counts when it is a module)."""
    modules = {}
    for package in MAY_IMPORT:
        for path, tree in _modules(package):
            if "migrations" in path.parts:
                continue
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
            modules[name] = tree
    out = {}
    for name, tree in modules.items():
        found = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found |= {a.name for a in node.names if a.name in modules}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found |= {node.module} & modules.keys()
                found |= {f"{node.module}.{a.name}" for a in node.names} & modules.keys()
        out[name] = found - {name}
    return out


def test_no_two_modules_import_each_other():
    imports = _module_imports()
    # (a package and its own modules aside: its __init__ names what they define, they take its siblings)
    circles = {
        frozenset({a, b})
        for a, targets in imports.items()
        for b in targets
        if a in imports.get(b, ()) and not b.startswith(f"{a}.") and not a.startswith(f"{b}.")
    }
    assert not circles, sorted(sorted(c) for c in circles)
