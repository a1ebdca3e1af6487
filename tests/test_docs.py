"""README.md and docs/ stay true to the repository: every relative link and image resolves, every anchor names a
heading of its file (GitHub's slugs), and every `make` target and `manage.py` command they name exists (read
from code spans and code blocks). Links to the web are not fetched."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Iterator
from pathlib import Path
from urllib.parse import unquote

from django.core.management import get_commands

ROOT = Path(__file__).resolve().parent.parent

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
CODE_SPAN = re.compile(r"(`+)(.+?)(?<!`)\1(?!`)", re.S)
HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
# [text](target "title") and ![alt](target); the text may hold one level of brackets.
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)")
REFERENCE = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)", re.M)
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
MAKE_OPTIONS_WITH_VALUE = {"-C", "-f", "-I", "-o", "-W", "--directory", "--file"}
MANAGE_PY = re.compile(r"(?:^|[\s/;&|(])manage\.py[ \t]+([A-Za-z_][\w-]*)")
RULE = re.compile(r"^([^\s:=#][^:=#]*?)[ \t]*::?(?!=)")


def documents(root: Path = ROOT) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


def _split(text: str) -> tuple[str, list[str]]:
    """The text with its fenced code blocks blanked (lines kept, so line numbers hold), and those blocks."""
    prose, blocks, block = [], [], None
    fence = ""
    for line in text.splitlines():
        opened = FENCE.match(line)
        if block is None and opened:
            block, fence = [], opened.group(1)
            prose.append("")
        elif block is not None and line.strip().startswith(fence[0] * len(fence)) and not line.strip(fence[0]):
            blocks.append("\n".join(block))
            block = None
            prose.append("")
        elif block is not None:
            block.append(line)
            prose.append("")
        else:
            prose.append(line)
    if block is not None:
        blocks.append("\n".join(block))
    return "\n".join(prose), blocks


def code(text: str) -> list[str]:
    """Every code block and code span of a Markdown text: where commands are written."""
    prose, blocks = _split(text)
    return blocks + [m.group(2) for m in CODE_SPAN.finditer(prose)]


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: its text (a link's text, no markup) lowercased, every character but letters,
    digits, underscores, hyphens and spaces dropped, each space a hyphen."""
    text = re.sub(r"!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"<[^>]+>", "", text).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """The anchors of a Markdown text's headings; a repeated slug gets -1, -2... as on GitHub."""
    prose, _ = _split(text)
    seen: dict[str, int] = {}
    out = set()
    for line in prose.splitlines():
        found = HEADING.match(line)
        if not found:
            continue
        base = slug(found.group(1))
        if base in seen:
            seen[base] += 1
            out.add(f"{base}-{seen[base]}")
        else:
            seen[base] = 0
            out.add(base)
    return out


def links(text: str) -> list[str]:
    """The targets of the links, images and reference definitions outside code."""
    prose, _ = _split(text)
    prose = CODE_SPAN.sub(lambda m: " " * len(m.group(0)), prose)
    return [m.group(1) for m in LINK.finditer(prose)] + [m.group(1) for m in REFERENCE.finditer(prose)]


def link_problems(document: Path, root: Path = ROOT) -> list[str]:
    """Each relative link of `document` whose file, or whose anchor in that file, does not exist."""
    name = document.relative_to(root).as_posix()
    problems = []
    for target in links(document.read_text()):
        if not target or SCHEME.match(target):
            continue  # the web, mail: not fetched
        path, _, anchor = target.partition("#")
        linked = (document.parent / unquote(path)).resolve() if path else document
        if not linked.is_relative_to(root.resolve()):
            problems.append(f"{name}: {target}: outside the repository")
        elif not linked.exists():
            problems.append(f"{name}: {target}: no such file")
        elif anchor and (linked.suffix != ".md" or unquote(anchor) not in anchors(linked.read_text())):
            problems.append(f"{name}: {target}: no heading with that anchor in {linked.relative_to(root.resolve())}")
    return problems


def _commands(piece: str) -> Iterator[list[str]]:
    """The simple commands of a code piece, each as its words: comments dropped, split at ; && || | and lines."""
    for line in piece.splitlines():
        line = re.sub(r"(?:^|\s)#.*", "", line)
        for command in re.split(r"&&|\|\||[;|()]", line):
            try:
                words = shlex.split(command)
            except ValueError:  # an unbalanced quote: a fragment of a longer line
                words = command.split()
            if words:
                yield words


def make_targets_named(text: str) -> set[str]:
    """The targets of every `make` command in the code of a Markdown text (`SOAK=10m make soak`,
    `make test PYTEST_ARGS=...`: assignments and options are not targets)."""
    named = set()
    for piece in code(text):
        for words in _commands(piece):
            while words and ASSIGNMENT.match(words[0]):
                words = words[1:]
            if not words or words[0] != "make":
                continue
            skip = False
            for word in words[1:]:
                if skip:
                    skip = False
                elif word in MAKE_OPTIONS_WITH_VALUE:
                    skip = True
                elif not word.startswith("-") and not ASSIGNMENT.match(word):
                    named.add(word)
    return named


def makefile_targets(makefile: str) -> set[str]:
    """The targets of a Makefile's rules (`a b: prerequisites`; variables `X := ...` and recipes are not)."""
    targets = set()
    for line in makefile.splitlines():
        found = RULE.match(line)
        if found:
            targets |= set(found.group(1).split())
    return targets


def commands_named(text: str) -> set[str]:
    """The command after every `manage.py` in the code of a Markdown text."""
    return {m.group(1) for piece in code(text) for m in MANAGE_PY.finditer(piece)}


def unknown(named: Iterable[tuple[str, set[str]]], known: set[str]) -> list[str]:
    return [f"{name}: {word}" for name, words in named for word in sorted(words - known)]


def _texts() -> list[tuple[str, str]]:
    return [(d.relative_to(ROOT).as_posix(), d.read_text()) for d in documents()]


def test_every_relative_link_and_anchor_resolves():
    problems = [p for document in documents() for p in link_problems(document)]
    assert not problems, "\n".join(problems)


def test_every_make_target_named_exists():
    known = makefile_targets((ROOT / "Makefile").read_text())
    wrong = unknown(((name, make_targets_named(text)) for name, text in _texts()), known)
    assert not wrong, "\n".join(wrong)


def test_every_manage_py_command_named_exists():
    wrong = unknown(((name, commands_named(text)) for name, text in _texts()), set(get_commands()))
    assert not wrong, "\n".join(wrong)


def test_the_readme_and_docs_name_commands():
    """The checks above read something: the README's quick start is found."""
    readme = (ROOT / "README.md").read_text()
    assert {"demo", "test", "check"} <= make_targets_named(readme)
    assert {"servers", "top"} <= commands_named(readme)
    assert any("docs/" in target for target in links(readme))


# --- each check can fail ------------------------------------------------------------------------------------------


def test_slugs_are_githubs():
    assert slug("pgconsole — query analysis") == "pgconsole--query-analysis"
    assert slug("The `pg_stat_statements` settings") == "the-pg_stat_statements-settings"
    assert slug("2. History footprint (5,000 entries)") == "2-history-footprint-5000-entries"
    assert slug("See [the API](api.md)") == "see-the-api"
    text = "# Title\n## Notes\n```sh\n# not a heading\n```\n## Notes\n### Notes\n"
    assert anchors(text) == {"title", "notes", "notes-1", "notes-2"}


def test_a_broken_link_anchor_or_image_is_reported(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "b.md").write_text("# B\n\n## Two words\n")
    (tmp_path / "README.md").write_text(
        "# Top\n\n"
        "[ok](docs/b.md) [ok](docs/b.md#two-words) [ok](#top) [web](https://example.com/nope) ![ok](docs/b.md)\n"
        "[gone](docs/missing.md) [bad anchor](docs/b.md#three) [bad here](#nowhere) ![gone](docs/x.png)\n"
        "[out](../elsewhere.md)\n\n"
        "`[in code](docs/also-missing.md)`\n\n"
        "```md\n[in a block](docs/missing-too.md)\n```\n\n"
        "[ref]: docs/missing-ref.md\n"
    )
    problems = link_problems(tmp_path / "README.md", tmp_path)
    assert problems == [
        "README.md: docs/missing.md: no such file",
        "README.md: docs/b.md#three: no heading with that anchor in docs/b.md",
        "README.md: #nowhere: no heading with that anchor in README.md",
        "README.md: docs/x.png: no such file",
        "README.md: ../elsewhere.md: outside the repository",
        "README.md: docs/missing-ref.md: no such file",
    ]
    assert documents(tmp_path) == [tmp_path / "README.md", tmp_path / "docs" / "b.md"]


def test_an_unknown_make_target_is_reported():
    makefile = (
        "SHELL := /bin/bash\nPYTEST_ARGS ?=\n.PHONY: test soak\n"
        "test: install lint\n\t$(PYTEST) $(PYTEST_ARGS)\nsoak: install\n.venv/.installed: x | y\n\techo a: b\n"
    )
    assert makefile_targets(makefile) == {".PHONY", "test", "soak", ".venv/.installed"}
    text = (
        "Run `make test PYTEST_ARGS='tests/x -x'`, `SOAK=10m make soak`, `make -C . test` or `make testt`.\n\n"
        "```sh\nmake soak   # a comment: make nothing\ncd x && make deploy\n```\n"
    )
    named = make_targets_named(text)
    assert named == {"test", "soak", "testt", "deploy"}
    assert unknown([("a.md", named)], makefile_targets(makefile)) == ["a.md: deploy", "a.md: testt"]


def test_an_unknown_manage_py_command_is_reported():
    text = (
        "`manage.py migrate`, `.venv/bin/python manage.py top --since 1h`, `manage.py nosuch`; not in code: "
        "manage.py other.\n\n```sh\npython manage.py collect --all\n```\n"
    )
    named = commands_named(text)
    assert named == {"migrate", "top", "nosuch", "collect"}
    assert unknown([("a.md", named)], set(get_commands())) == ["a.md: nosuch"]
