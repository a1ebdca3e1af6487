"""Query texts are written by whoever runs SQL on a monitored server: every regular expression that reads one (the
redaction, the advisor's family rule, the highlighter) and each of their entry points runs in linear time on
adversarial input. Each is fed inputs built to defeat it (runs of eyJ-, tmp111…1a, comments that never close,
literals that never end, secret names before long blanks...) at a size and at 16 times that size: the time may
grow ×16 and a little more, never ×256 as a quadratic scan's does. A ratio in one run, not an absolute time. The
redaction is timed without its budget (collectors.redact.redact's budget_s), which would cut a slow one short.

A module of the product that compiles a regular expression is either one of these readers or named below as
one that reads no query text, so that a new pattern cannot escape the check."""

from __future__ import annotations

import ast
import gc
import math
import re
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from advisor.rules import r5_families
from collectors import redact
from collectors.plans import statement
from console import sql_highlight
from tests.test_tree import PRODUCT

ROOT = Path(__file__).resolve().parent.parent
READERS = (redact, r5_families, sql_highlight)
# Modules with regular expressions that never see a query text, and what they read instead.
NOT_QUERY_TEXTS = {
    "advisor/sources.py": "the seeds' citations",
    "advisor/advice.py": "the advisor's own ALTER SYSTEM lines",
    "alerts/channels.py": "a PagerDuty routing key (32 characters, fullmatch)",
    "collectors/connection_check.py": "libpq's error messages",
    "collectors/plans/explain.py": "the server's message naming a parameter ($2)",
    "history/partitions.py": "partition names of the history store",
    "console/management/commands/top.py": "a command-line duration",
    "collectors/sql_names.py": "catalog names (quote_ident's fullmatch, in_comment's one-character look-arounds)",
    "collectors/settings/instance.py": "the server's version string",
    "console/api/common.py": "a query-string duration",
    "inventory/network_policy.py": "host names",
    "reports/weeks.py": "ISO week labels",
}
SIZE = 1_000  # characters of the smaller input; the larger is 16 times as long
GROWTH = 16
LIMIT = 64  # a linear scan grows ×16 (a little more with caches), a quadratic one ×256

# (head, unit repeated, tail): the shapes that make a backtracking pattern scan again from each start.
SHAPES = [
    ("", "eyJ-", "x"),
    ("", "eyJab-", "."),
    ("eyJabcdef.", "eyJ-", ""),
    ("", "tmp1", "a"),
    ("tmp", "1", "a"),
    ("pg_temp", "_", "x"),
    ("", "/*", ""),
    ("", "/* ", ""),
    ("/*", " ", ""),
    ("", "--", ""),
    ("", "in (1,", ""),
    ("in (", "1,", ""),
    ("in (", "'a',", ""),
    ("", "in ('", ""),
    ("", "'", ""),
    ("'", "a", ""),
    ("", "''", "x"),
    ("e'", "\\'", ""),
    ("", '"', ""),
    ("", "$a$", ""),
    ("$abc$", "$ab", ""),
    ("", "password ", ""),
    ("password", " ", "x"),
    ("token", "=", ""),
    ("", "a://b:", ""),
    ("a://", "b", ":c"),
    ("", " -u a:", ""),
    ("", "-----BEGIN A", ""),
    ("-----BEGIN ", "A", ""),
    ("", "-----END A", ""),
    ("", "ghp_", ""),
    ("", "xoxb-", ""),
    ("", "bearer ", ""),
    ("", "AKIA", ""),
    ("", "1", "a"),
    ("", "1.", "e"),
    ("", "1e", ""),
    ("", "set a", ""),
    ("set ", "a", ""),
    ("", "savepoint ", ""),
    ("", "pgp_sym_encrypt(", ""),
    ("", "format('password %L', ", ""),
    ("", "(", ""),
    ("", "é", "1"),
    ("", "mysql ", "-"),
    ("mysql", " a", " -"),
    ("", "sshpass -p", ""),
    ("", "https://hooks.slack.com/services/", ""),
    ("", "authorization: basic ", ""),
    ("", "x-api-key: ", ""),
    ("", "SG.", ""),
    ("SG.", "a", "."),
    ("", "AIza", ""),
    # Finding H4 and what was looked at with it: set_config's arguments, chains of ||, nested comments, quoted
    # passwords on command lines left open, mysql again and again inside arguments.
    ("", "set_config(", ""),
    ("set_config(", "'a', ", ""),
    ("", "'b'||", ""),
    ("", "/* /* ", ""),
    ("/*", " /* */", ""),
    ("", "*/ /*", ""),
    ("", "mysql a/mysql ", ""),
    ("mysql", " a/mysql", " -p"),
    ("mysql", " -p'", ""),
    ("", "sshpass -p '", ""),
    ("", 'sshpass -p "', ""),
    ("", " -u '", ""),
    ("", " -u 'a:", ""),
    ("", '--user="a:', ""),
    ("--user=a:", "'", ""),
]


def _text(shape: tuple[str, str, str], size: int) -> str:
    head, unit, tail = shape
    return head + unit * max(1, (size - len(head) - len(tail)) // len(unit)) + tail


def _seconds(work: Callable[[str], object], text: str, loops: int) -> float:
    """CPU seconds of this thread per call, over `loops` calls in a row, the collector paused (as timeit does):
    the other tests' processes taking the cores meanwhile do not count."""
    gc.disable()
    try:
        started = time.thread_time()
        for _ in range(loops):
            work(text)
        return (time.thread_time() - started) / loops
    finally:
        gc.enable()


def _growth(work: Callable[[str], object], shape: tuple[str, str, str] | Callable[[int], str]) -> float:
    """How much longer `work` takes on the larger input than on the smaller (a shape, or what makes a text of a
    size). Each is timed over calls enough for half a millisecond at least (a single call on the smaller input can
    take microseconds: the timer's and the call's own cost would count), the two taken in turn three times and the
    best of each kept, so that a busy machine's pauses count for neither."""
    make = shape if callable(shape) else lambda size: _text(shape, size)
    small, large = make(SIZE), make(SIZE * GROWTH)
    loops = max(1, int(0.0005 / max(_seconds(work, small, 1), 1e-7)))
    best_small = best_large = float("inf")
    for _ in range(3):
        best_small = min(best_small, _seconds(work, small, loops))
        best_large = min(best_large, _seconds(work, large, max(1, loops // GROWTH)))
    return best_large / best_small


def _patterns() -> list[tuple[str, re.Pattern]]:
    return [
        (f"{module.__name__}.{name}", value)
        for module in READERS
        for name, value in vars(module).items()
        if isinstance(value, re.Pattern)
    ]


def _scan_all(pattern: re.Pattern) -> Callable[[str], object]:
    return lambda text: sum(1 for _ in pattern.finditer(text))


@pytest.mark.parametrize(("name", "pattern"), _patterns(), ids=[n for n, _ in _patterns()])
def test_each_pattern_that_reads_query_texts_is_linear_on_adversarial_input(name, pattern):
    worst = max((_growth(_scan_all(pattern), shape), shape) for shape in SHAPES)
    assert worst[0] < LIMIT, f"{name} grows ×{worst[0]:.0f} on {worst[1]} made ×{GROWTH} longer"


ENTRY_POINTS = {
    "redact": lambda text: redact.redact(text, budget_s=math.inf),
    "redact strict": lambda text: redact.redact(text, strict=True, budget_s=math.inf),
    "the family rule's normalize": r5_families.normalize,
    "highlight": sql_highlight.highlight,
    "the plan reading's classify": lambda text: statement.classify(text, 160000),
}


# The readers look into literals and comments with patterns of their own: each shape also inside one.
WRAPPED = [
    *SHAPES,
    *((f"SELECT 1 /* {h}", u, f"{t} */") for h, u, t in SHAPES),
    *((f"SELECT '{h}", u, f"{t}'") for h, u, t in SHAPES),
]


@pytest.mark.parametrize("name", list(ENTRY_POINTS))
def test_each_reader_of_query_texts_is_linear_on_adversarial_input(name):
    work = ENTRY_POINTS[name]
    worst = max((_growth(work, shape), shape) for shape in WRAPPED)
    assert worst[0] < LIMIT, f"{name} grows ×{worst[0]:.0f} on {worst[1]} made ×{GROWTH} longer"


def test_the_texts_of_the_issue_are_read_in_linear_time():
    """The three found from outside: a comment of eyJ- repeated (the redaction's JSON Web Token pattern), an alias
    tmp111…1a and nested comments (the family rule), each 16 KB against 1 KB."""
    cases = {
        "jwt": (ENTRY_POINTS["redact"], ("SELECT 1 /* token ", "eyJ-", " */")),
        "alias": (r5_families.normalize, ("SELECT 1 AS tmp", "1", "a")),
        "nested comments": (r5_families.normalize, ("SELECT 1 ", "/* /* ", "")),
    }
    for name, (work, shape) in cases.items():
        assert _growth(work, shape) < LIMIT, name


def _set_config(size: int) -> str:
    """set_config with a first argument of half the size and a chain 'b'||'b'||... of the other half: the first
    argument was searched again at each 'b'."""
    chain = "||".join(["'b'"] * (size // 10))
    return f"set_config('{'a' * (size // 2)}', {chain})"


def _do_set_config(size: int) -> str:
    """Finding H4's text: _set_config in a DO body, which pg_stat_statements never normalizes (54 s at 64 KB, paid
    again when the stored texts are redacted again)."""
    return f"DO $$ BEGIN IF false THEN PERFORM {_set_config(size)}; END IF; END $$"


# Texts whose parts all grow with them (a shape repeats one unit): the cost of one part read again at each of the
# other's tokens.
GROWING = {
    "finding H4": _do_set_config,
    "finding H4 outside a DO body": lambda size: f"SELECT {_set_config(size)}",
    "finding H4 in a literal": lambda size: "SELECT dblink_exec('" + _do_set_config(size).replace("'", "''") + "')",
    "a long setting's name, then set_config called again and again": lambda size: (
        f"SELECT set_config('{'a' * (size // 2)}', 'b', false)" + ", set_config('a', 'b', false)" * (size // 60)
    ),
    "a long word before literals": lambda size: "SELECT " + "a" * (size // 2) + " 'b'" * (size // 8),
    "a long identifier before := literals": lambda size: '"' + "a" * (size // 2) + '" := ' + "'b' " * (size // 8),
    "comments nested deep, a quote in the deepest": lambda size: (
        "ALTER ROLE r " + "/* " * (size // 6) + "it's " + "*/ " * (size // 6) + "PASSWORD 'x'"
    ),
    "unterminated literals in literals": lambda size: "SELECT 'password " + "E''$$/*\\\"" * (size // 9),
}


@pytest.mark.parametrize("name", list(GROWING))
def test_the_texts_of_finding_h4_and_alike_are_redacted_in_linear_time(name):
    for entry in ("redact", "redact strict"):
        growth = _growth(ENTRY_POINTS[entry], GROWING[name])
        assert growth < LIMIT, f"{entry} grows ×{growth:.0f} on {name} made ×{GROWTH} longer"


def test_the_plan_readings_scan_of_quotes_and_comments_is_linear():
    """collectors/plans/statement.py scans by hand, no regular expression: each of its quotings opened many times
    over, or once and never closed."""
    shapes = [
        ("SELECT ", "$a", ""),
        ("SELECT ", "$1", ""),
        ("SELECT $x$", "$y", ""),
        ("SELECT ", "/*", ""),
        ("SELECT ", "''", ""),
        ("SELECT E'", "\\'", ""),
        ("SELECT ", '""', ""),
        ("SELECT 1", ";", ""),
        ("SELECT ", "a$1", ""),
    ]
    for shape in shapes:
        assert _growth(ENTRY_POINTS["the plan reading's classify"], shape) < LIMIT, shape


def _compiles_patterns(tree: ast.Module) -> bool:
    return any(
        isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "re"
        for node in ast.walk(tree)
    )


def test_every_module_with_a_regular_expression_is_checked_here_or_reads_no_query_text():
    readers = {str(Path(m.__file__).relative_to(ROOT)) for m in READERS}
    found = {
        str(path.relative_to(ROOT))
        for package in PRODUCT
        for path in (ROOT / package).rglob("*.py")
        if "migrations" not in path.parts and _compiles_patterns(ast.parse(path.read_text()))
    }
    assert found - readers == set(NOT_QUERY_TEXTS), "a new module with regular expressions: is it a reader?"
