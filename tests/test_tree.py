"""The test tree mirrors the product: a module with behaviour of its own, `app/sub/module.py`, has its tests in
`tests/app/sub/test_module.py`, so that whoever changes a module finds its tests without searching. Flows that
cross modules (a real worker and beat, a browser, the image, faults) live beside the mirror, in files named by
what they show (tests/production/, tests/browser/, end-to-end files).

A module not mirrored yet is named in TESTED_IN with the file that holds its tests (which must name it), and a
module that only declares (fields, a URL table, numbers) in DECLARATIONS. Both lists only shrink: a module that
gains its own test file must leave them, and a new module cannot join them without a line here."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = (
    "accounts",
    "advisor",
    "alerts",
    "collectors",
    "console",
    "exports",
    "history",
    "inventory",
    "presentation",
    "readtier",
    "reports",
)
MIN_LINES = 30  # below it a module is a few names (an app config, a URL list, a thin task): tested where used

# Declarations: no behaviour of their own to test (a model's fields are tested through the services that use
# them and the migration tests; settings, numbers and a URL table through every page and endpoint).
DECLARATIONS = {
    "advisor/models.py",
    "advisor/thresholds.py",
    "alerts/models.py",
    "history/tables.py",
    "console/settings.py",
    "console/urls.py",
    "console/api/urls.py",
    "collectors/public.py",  # an app's entry: names handed on, tested where they are used
    "history/public.py",  # the same: the history store's one door (tests/test_layering.py holds the apps to it)
    "exports/models.py",
    "inventory/models.py",
    "reports/models.py",
}

# Not mirrored yet: module -> the test file that holds its tests today, which names it; or (that file, how it
# reaches the module) where it does so without naming it (a page's form, an endpoint's refusal).
TESTED_IN: dict[str, str | tuple[str, str]] = {}


def _modules() -> dict[str, Path]:
    """Every product module of MIN_LINES lines or more (migrations and packages' __init__ aside)."""
    out = {}
    for package in PRODUCT:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT)
            if "migrations" in rel.parts or path.name == "__init__.py":
                continue
            if len(path.read_text().splitlines()) >= MIN_LINES:
                out[rel.as_posix()] = path
    return out


def _mirror(module: str) -> Path:
    rel = Path(module)
    return ROOT / "tests" / rel.parent / f"test_{rel.name}"


def _names(path: Path) -> set[str]:
    """How a test file can name a module: its dotted path, its file's path, or one of its public top-level names."""
    tree = ast.parse(path.read_text())
    names = {
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and not node.name.startswith("_")
    }
    for node in tree.body:
        if isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name) and not t.id.startswith("_")}
    return names


def test_every_module_has_its_test_file():
    missing = [
        f"{module}: no {_mirror(module).relative_to(ROOT)}"
        for module in _modules()
        if not _mirror(module).exists() and module not in TESTED_IN and module not in DECLARATIONS
    ]
    assert not missing, "\n".join(missing)


def test_the_lists_of_exceptions_only_shrink():
    modules = _modules()
    for held in TESTED_IN.values():
        assert (ROOT / (held[0] if isinstance(held, tuple) else held)).exists(), held
    stale = [f"{m}: gone or under {MIN_LINES} lines" for m in (*TESTED_IN, *DECLARATIONS) if m not in modules]
    mirrored = [f"{m}: has {_mirror(m).relative_to(ROOT)} now" for m in TESTED_IN if _mirror(m).exists()]
    assert not stale + mirrored, "\n".join(stale + mirrored)


def test_a_module_tested_elsewhere_is_named_there():
    wrong = []
    for module, held in TESTED_IN.items():
        if isinstance(held, tuple):
            continue  # reached without being named: the reason is in the list
        test_file = held
        text = (ROOT / test_file).read_text()
        dotted = module.removesuffix(".py").replace("/", ".")
        command = Path(module).stem if "/management/commands/" in module else None
        named = dotted in text or module in text or (command and f'"{command}"' in text)
        if not named and not any(name in text for name in _names(ROOT / module)):
            wrong.append(f"{test_file} names nothing of {module}")
    assert not wrong, "\n".join(wrong)


def test_a_declaration_declares():
    """A module listed as declarations defines no function of its own (methods of its classes aside)."""
    wrong = [
        f"{module}:{node.lineno} def {node.name}"
        for module in DECLARATIONS
        for node in ast.parse((ROOT / module).read_text()).body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    ]
    assert not wrong, "\n".join(wrong)


LONG_LINES = 400
WHY_LONG = "One module over 400 lines:"


def test_a_module_over_400_lines_says_why_at_its_top():
    """A long module is split by what it does, or its docstring says why it is one ("One module over 400 lines:
    ..."): a module that grew past it without a reason is found here."""
    wrong = []
    for package in PRODUCT:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT)
            text = path.read_text()
            if "migrations" in rel.parts or len(text.splitlines()) <= LONG_LINES:
                continue
            if WHY_LONG not in (ast.get_docstring(ast.parse(text)) or ""):
                wrong.append(f"{rel.as_posix()}: {len(text.splitlines())} lines, no {WHY_LONG!r} at its top")
    assert not wrong, "\n".join(wrong)
