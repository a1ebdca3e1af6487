"""Whether a statement's text can be explained, decided on the text the monitored server keeps, in one pass.

Only one statement of a kind EXPLAIN plans without running it (SELECT, INSERT, UPDATE, DELETE, MERGE from 15,
VALUES, TABLE, WITH) is explained; anything else gets its reason. The text is scanned once, character by
character, with its strings, quoted names, dollar quotes and comments skipped as PostgreSQL's lexer skips them:
linear in its length whatever it holds (query texts are untrusted input), no regular expression. A semicolon
outside them followed by anything but blanks and comments is a second statement: refused, so that nothing after
it could ever run on the monitored server.
"""

from __future__ import annotations

from dataclasses import dataclass

EXPLAINABLE = frozenset({"select", "insert", "update", "delete", "merge", "values", "table", "with"})
MERGE_FROM = 150000  # EXPLAIN of MERGE, like MERGE itself, from PostgreSQL 15


@dataclass(frozen=True)
class Statement:
    """One explainable statement: its first keyword, its highest parameter ($n), and its text without a final
    semicolon."""

    kind: str
    parameters: int
    text: str


@dataclass(frozen=True)
class NotExplainable:
    code: str  # empty | several | utility | unterminated | version
    reason: str  # in a DBA's words


@dataclass
class _Scan:
    first_word: str = ""
    parameters: int = 0
    end: int = -1  # where a top-level semicolon is (the statement ends there), or -1
    after_end: bool = False  # something other than blanks and comments follows that semicolon
    unterminated: str = ""  # what the text ends inside of


def _name_char(c: str) -> bool:
    return c.isalnum() or c == "_"


def _word_at(text: str, i: int) -> str:
    j = i
    while j < len(text) and _name_char(text[j]):
        j += 1
    return text[i:j]


def _dollar_tag(text: str, i: int) -> str | None:
    """The dollar-quote opening tag at i ("$$" or "$tag$"), or None ($1 is a parameter, not a quote)."""
    j = i + 1
    if j < len(text) and (text[j].isalpha() or text[j] == "_"):
        j += len(_word_at(text, j))
    if j < len(text) and text[j] == "$":
        return text[i : j + 1]
    return None


def _scan(text: str) -> _Scan:  # noqa: C901 - one state machine, read top to bottom
    out = _Scan()
    n, i = len(text), 0
    while i < n:
        c = text[i]
        if c == "-" and text.startswith("--", i):
            newline = text.find("\n", i)
            i = n if newline < 0 else newline + 1
            continue
        if c == "/" and text.startswith("/*", i):
            depth, i = 1, i + 2  # comments nest in PostgreSQL
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
            if depth:
                out.unterminated = "a comment"
            continue
        if c.isspace():
            i += 1
            continue
        if out.end >= 0:  # anything but blanks and comments after a top-level semicolon
            out.after_end = True
            return out
        if c == ";":
            out.end = i
            i += 1
            continue
        if c in "'\"":
            escapes = c == "'" and i > 0 and text[i - 1] in "eE" and not (i >= 2 and _name_char(text[i - 2]))
            i += 1
            while True:
                if i >= n:
                    out.unterminated = "a quoted string" if c == "'" else "a quoted name"
                    return out
                if escapes and text[i] == "\\":
                    i += 2
                    continue
                if text[i] == c:
                    if i + 1 < n and text[i + 1] == c:  # a doubled quote stands for one
                        i += 2
                        continue
                    i += 1
                    break
                i += 1
            continue
        if c == "$":
            if i > 0 and _name_char(text[i - 1]):  # inside a name: a$1 is one identifier
                i += 1
                continue
            tag = _dollar_tag(text, i)
            if tag is not None:
                close = text.find(tag, i + len(tag))
                if close < 0:
                    out.unterminated = "a dollar-quoted string"
                    return out
                i = close + len(tag)
                continue
            j = i + 1
            while j < n and text[j].isdigit():
                j += 1
            if j > i + 1:
                out.parameters = max(out.parameters, int(text[i + 1 : j]))
            i = max(j, i + 1)
            continue
        if not out.first_word:
            if c == "(":
                i += 1
                continue
            word = _word_at(text, i)
            if word:
                out.first_word = word.lower()
                i += len(word)
                continue
            out.first_word = c
        i += 1
    return out


def classify(text: str, server_version_num: int) -> Statement | NotExplainable:
    """The statement the text holds if EXPLAIN can plan it on this server without running it, else why not."""
    scan = _scan(text)
    if scan.unterminated:
        return NotExplainable(
            "unterminated",
            f"the text ends inside {scan.unterminated}: it was cut, so it is not the statement that ran",
        )
    if scan.after_end:
        return NotExplainable("several", "the text holds more than one statement")
    if not scan.first_word:
        return NotExplainable("empty", "the text holds no statement")
    if scan.first_word not in EXPLAINABLE:
        return NotExplainable(
            "utility",
            f"a {scan.first_word.upper()} statement: EXPLAIN plans only SELECT, INSERT, UPDATE, DELETE, MERGE, "
            "VALUES, TABLE and WITH",
        )
    if scan.first_word == "merge" and server_version_num < MERGE_FROM:
        return NotExplainable("version", "MERGE is explained from PostgreSQL 15")
    body = text if scan.end < 0 else text[: scan.end]
    return Statement(kind=scan.first_word, parameters=scan.parameters, text=body.rstrip())
