"""What the Dockerfile and .dockerignore say, read as Docker reads them (no Docker engine here): the
instructions, the packages apt-get installs, and whether a path is kept out of the build context."""

from __future__ import annotations

import functools
import posixpath
import re
import shlex
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


# --- Dockerfile ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Instruction:
    keyword: str  # upper case: FROM, RUN, COPY...
    args: str  # continuation lines joined


def dockerfile_instructions(text: str) -> list[Instruction]:
    """The Dockerfile's instructions as Docker reads them: `\\` continues a line, comment and empty lines go
    (inside a continued instruction too)."""
    out, pending = [], ""
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        keyword, _, args = (pending + line).strip().partition(" ")
        out.append(Instruction(keyword.upper(), " ".join(args.split())))
        pending = ""
    return out


def _shell_words(command: str) -> list[str]:
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    return list(lexer)


def apt_installed(instructions: list[Instruction]) -> list[str]:
    """Every package an `apt-get install` of a RUN names (options aside)."""
    packages = []
    for ins in instructions:
        if ins.keyword != "RUN":
            continue
        words = _shell_words(ins.args)
        for i, word in enumerate(words):
            if word == "install" and "apt-get" in words[:i]:
                for arg in words[i + 1 :]:
                    if arg in ("&&", "||", ";", "|"):
                        break
                    if not arg.startswith("-"):
                        packages.append(arg)
    return packages


def pip_installs(command: str) -> list[list[str]]:
    """The arguments of every `pip install` a shell command runs (`pip`, `pip3`, `python -m pip`, a path to
    pip), each up to the end of its simple command."""
    words = _shell_words(command)
    out = []
    for i, word in enumerate(words):
        if word == "install" and i > 0 and posixpath.basename(words[i - 1]) in ("pip", "pip3"):
            args = []
            for arg in words[i + 1 :]:
                if arg in ("&&", "||", ";", "|"):
                    break
                args.append(arg)
            out.append(args)
    return out


def copy_paths(instructions: list[Instruction], copy: Instruction) -> tuple[list[str], str]:
    """A COPY's sources (in the build context) and its destination made absolute with the WORKDIR in effect
    (a relative WORKDIR is from the one before); a destination ending in / keeps it."""
    *sources, dest = [word for word in shlex.split(copy.args) if not word.startswith("--")]
    workdir = "/"
    for ins in instructions[: instructions.index(copy)]:
        if ins.keyword == "WORKDIR":
            workdir = posixpath.join(workdir, ins.args)
    absolute = posixpath.normpath(posixpath.join(workdir, dest))
    return sources, (absolute + "/" if dest.endswith("/") and absolute != "/" else absolute)


@functools.cache
def dockerfile() -> list[Instruction]:
    return dockerfile_instructions((ROOT / "Dockerfile").read_text())


def dockerfile_env(instructions: list[Instruction]) -> dict[str, str]:
    """The Dockerfile's ENV, as NAME -> value (the `NAME=value` form)."""
    return dict(pair.split("=", 1) for i in instructions if i.keyword == "ENV" for pair in shlex.split(i.args))


# --- .dockerignore: Docker's matching (github.com/moby/patternmatcher, ignorefile.ReadAll and
# PatternMatcher.MatchesOrParentMatches), which is not .gitignore's: `*.pyc` is only the context's root, a
# pattern that matches a folder excludes everything in it, `!` takes a path back, and the last match wins.


def ignore_patterns(text: str) -> list[str]:
    """The patterns of a .dockerignore, cleaned as Docker cleans them ("/x/" is "x"); `!` kept in front."""
    patterns = []
    for line in text.lstrip("\ufeff").splitlines():
        if line.startswith("#") or not line.strip():
            continue
        pattern = line.strip()
        invert = pattern.startswith("!")
        if invert:
            pattern = pattern[1:].strip()
        if pattern:
            pattern = posixpath.normpath(pattern)
            if len(pattern) > 1 and pattern.startswith("/"):
                pattern = pattern.lstrip("/")
        patterns.append("!" + pattern if invert else pattern)
    return patterns


@dataclass(frozen=True)
class _Pattern:
    exclusion: bool
    match: Callable[[str], bool]


def _compile(pattern: str) -> _Pattern:
    """One pattern as patternmatcher compiles it: Go filepath.Match's `*`, `?` and `[...]` within a folder,
    `**` across any number of folders (with the same exact, prefix and suffix shortcuts, which differ from the
    regular expression in corner cases such as `**file`)."""
    exclusion = pattern.startswith("!")
    if exclusion:
        pattern = pattern[1:]
    if not pattern:
        raise ValueError('illegal exclusion pattern: "!"')
    pattern = posixpath.normpath(pattern)
    regex, kind, i = "^", "exact", 0
    while i < len(pattern):
        ch = pattern[i]
        if pattern.startswith("**", i):
            start = i
            i += 2
            if pattern.startswith("/", i):
                i += 1
            if i == len(pattern):
                if kind == "exact":
                    kind = "prefix"
                else:
                    regex, kind = regex + ".*", "regex"
            else:
                regex, kind = regex + "(.*/)?", "regex"
            if start == 0:
                kind = "suffix"
            continue
        if ch == "*":
            regex, kind = regex + "[^/]*", "regex"
        elif ch == "?":
            regex, kind = regex + "[^/]", "regex"
        elif ch in ".+()|{}$":
            regex += "\\" + ch
        elif ch == "\\":
            if i + 1 < len(pattern):
                i += 1
                regex, kind = regex + "\\" + pattern[i], "regex"
            else:
                regex += "\\\\"
        elif ch in "[]":
            regex, kind = regex + ch, "regex"
        else:
            regex += ch
        i += 1
    if kind == "exact":
        return _Pattern(exclusion, lambda path: path == pattern)
    if kind == "prefix":
        return _Pattern(exclusion, lambda path: path.startswith(pattern[:-2]))
    if kind == "suffix":
        suffix = pattern[2:]
        return _Pattern(exclusion, lambda path: path.endswith(suffix) or (suffix[:1] == "/" and path == suffix[1:]))
    compiled = re.compile(regex + "$")
    return _Pattern(exclusion, lambda path: compiled.match(path) is not None)


def excluded(path: str, patterns: list[str]) -> bool:
    """Whether .dockerignore's `patterns` keep `path` (relative to the context, with /) out of the build context."""
    path = posixpath.normpath(path)
    if path == ".":
        return False
    parts = path.split("/")[:-1]
    parents = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    matched = False
    for pattern in map(_compile, patterns):
        if pattern.exclusion != matched:
            continue  # only an exception can change an excluded path, only an exclusion an included one
        if pattern.match(path) or any(pattern.match(parent) for parent in parents):
            matched = not pattern.exclusion
    return matched


def context_misses(paths: Iterable[str], patterns: list[str]) -> list[str]:
    """Which of `paths` .dockerignore keeps out of the build context."""
    return [path for path in paths if excluded(path, patterns)]


@functools.cache
def dockerignore() -> list[str]:
    return ignore_patterns((ROOT / ".dockerignore").read_text())
