"""Whether a statement's text can be explained, decided on the text the monitored server keeps, in one pass.

Only one statement of a kind EXPLAIN plans without running it (SELECT, INSERT, UPDATE, DELETE, MERGE from 15,
VALUES, TABLE, WITH) is explained; anything else gets its reason. The text is read token by token as PostgreSQL's
lexer reads it (src/backend/parser/scan.l), under the console's own session settings (standard_conforming_strings
on): names whose characters include `$`, digits and every non-ASCII character; standard, E'', B'', X'', N'' and U&''
strings, with the continuation of a string across a newline in the mode it began; quoted names; dollar quotes
whose tag is a name without `$`; `--` comments ending at a newline or a carriage return; nested `/* */` comments.
Linear in the text's length whatever it holds (query texts are untrusted input), no regular expression. Where the
lexer changed, the server's version decides: `\v` is a blank from PostgreSQL 17.

The server has the last word: explain.py sends the text in one Parse message of the extended protocol, which
refuses a second statement whatever this reading made of it. This reading refuses early, with a DBA's reason: a
text holding a second statement, a text cut inside a literal or a comment, and a text that reads differently with
standard_conforming_strings off (a backslash in a plain string: the server's users may have written it that way,
and the console would then plan another statement than the one that ran).
"""

from __future__ import annotations

from dataclasses import dataclass, field

EXPLAINABLE = frozenset({"select", "insert", "update", "delete", "merge", "values", "table", "with"})
MERGE_FROM = 150000  # EXPLAIN of MERGE, like MERGE itself, from PostgreSQL 15
VERTICAL_TAB_FROM = 170000  # \v is a blank to the lexer from PostgreSQL 17

_NEWLINE = "\n\r"
# A one-letter name right before a quote opens a string of its kind (scan.l's xestart, xbstart, xhstart, xnstart);
# "plain" strings are the ones whose backslashes standard_conforming_strings decides.
_PREFIXES = {"e": "escape", "b": "bits", "x": "bits", "n": "plain"}
_UNTERMINATED = {"'": "a quoted string", '"': "a quoted name", "$": "a dollar-quoted string"}
_OPERATOR_CHARS = "~!@#^&|`?+-*/%<>="
NAMEDATALEN = 64  # a name is cut to 63 bytes


@dataclass(frozen=True)
class Explainable:
    """One explainable statement: its first keyword, its highest parameter ($n), its text without a final
    semicolon, and what it names: every name as PostgreSQL reads it (folded to lower case unless quoted, cut at
    NAMEDATALEN), every run of operator characters, and whether a U&"" name hides one (user_code.py asks)."""

    kind: str
    parameters: int
    text: str
    names: frozenset[str] = frozenset()
    operators: tuple[str, ...] = ()
    unicode_names: bool = False


@dataclass(frozen=True)
class NotExplainable:
    code: str  # empty | several | utility | unterminated | ambiguous | version
    reason: str  # in a DBA's words


def _name_start(c: str) -> bool:
    # Every character from U+0080 on starts and continues a name: the lexer reads bytes, and each byte of a
    # multibyte character is 0x80 or more in every server encoding.
    return c == "_" or not c.isascii() or c.isalpha()


def _name_char(c: str) -> bool:
    return _name_start(c) or c in "0123456789$"


def _digit(c: str) -> bool:
    return c in "0123456789"


@dataclass
class _Lexer:
    text: str
    server_version_num: int
    first_word: str = ""
    parameters: int = 0
    end: int = -1  # where a top-level semicolon is (the statement ends there), or -1
    after_end: bool = False  # something other than blanks and comments follows that semicolon
    unterminated: str = ""  # what the text ends inside of
    ambiguous: bool = False  # a plain string holds a backslash: it reads otherwise with standard strings off
    names: set[str] = field(default_factory=set)
    operators: list[str] = field(default_factory=list)
    unicode_names: bool = False
    last_operator_char: int = -2  # where the last operator character was, to join the runs

    def __post_init__(self) -> None:
        vertical_tab = "\v" if self.server_version_num >= VERTICAL_TAB_FROM else ""
        self.space = " \t\n\r\f" + vertical_tab
        self.horizontal_space = " \t\f" + vertical_tab

    def run(self) -> None:  # noqa: C901 - one lexer, read top to bottom
        text, n, i = self.text, len(self.text), 0
        while i < n:
            c = text[i]
            if c in self.space:
                i += 1
                continue
            if text.startswith("--", i):
                i = self._end_of_line(i)
                continue
            if text.startswith("/*", i):
                i = self._end_of_comment(i)
                if i < 0:
                    self.unterminated = "a comment"
                    return
                continue
            if self.end >= 0:  # anything but blanks, comments and empty statements after a top-level semicolon
                if c == ";":
                    i += 1
                    continue
                self.after_end = True
                return
            start, word = i, ""
            if c == ";":
                self.end, i = i, i + 1
                continue
            if c == "'":
                i = self._end_of_string(i, "plain")
            elif c == '"':
                i = self._end_of_quoted_name(i)
                if i > 0:
                    self._name(text[start + 1 : i - 1].replace('""', '"'))
            elif c == "$":
                i = self._after_dollar(i)
            elif _digit(c) or (c == "." and i + 1 < n and _digit(text[i + 1])):
                i = self._end_of_number(i)
            elif _name_start(c):
                end = self._end_of_name(i)
                prefix = c.lower() if end == i + 1 else ""
                if end < n and text[end] == "'" and prefix in _PREFIXES:
                    i = self._end_of_string(end, _PREFIXES[prefix])
                elif prefix == "u" and text.startswith("&'", end):
                    i = self._end_of_string(end + 1, "unicode")
                elif prefix == "u" and text.startswith('&"', end):
                    i = self._end_of_quoted_name(end + 1)
                    self.unicode_names = True  # its escapes may spell any name
                else:
                    word, i = text[i:end].lower(), end
                    self._name(word)
            else:
                if c in _OPERATOR_CHARS:
                    self._operator_char(i)
                i += 1
                if c == "(":
                    continue  # ((SELECT 1)) is a SELECT
            if i < 0:
                self.unterminated = _UNTERMINATED.get(c, "a quoted string")
                return
            if not self.first_word:
                self.first_word = word or text[start]

    def _name(self, name: str) -> None:
        # Cut as PostgreSQL cuts it (truncate_identifier: whole characters within 63 bytes).
        self.names.add(name.encode()[: NAMEDATALEN - 1].decode(errors="ignore"))

    def _operator_char(self, i: int) -> None:
        if i == self.last_operator_char + 1:
            self.operators[-1] += self.text[i]
        else:
            self.operators.append(self.text[i])
        self.last_operator_char = i

    def _end_of_line(self, i: int) -> int:
        n = len(self.text)
        while i < n and self.text[i] not in _NEWLINE:
            i += 1
        return i

    def _end_of_name(self, i: int) -> int:
        n = len(self.text)
        while i < n and _name_char(self.text[i]):
            i += 1
        return i

    def _end_of_number(self, i: int) -> int:
        """Where the number at i ends: digits, a fraction, an exponent only with its digits (scan.l's realfail
        gives the `e` back: `1e'x'` is 1 then an escape string to PostgreSQL 13 and 14, an error from 15 on)."""
        text, n = self.text, len(self.text)
        while i < n and _digit(text[i]):
            i += 1
        if i < n and text[i] == "." and not text.startswith("..", i):
            i += 1
            while i < n and _digit(text[i]):
                i += 1
        if i < n and text[i] in "eE":
            j = i + 1 + (i + 1 < n and text[i + 1] in "+-")
            if j < n and _digit(text[j]):
                while j < n and _digit(text[j]):
                    j += 1
                return j
        return i

    def _end_of_comment(self, i: int) -> int:
        """Where the `/*` comment at i ends (comments nest), or -1 when the text ends inside it."""
        text, n, depth = self.text, len(self.text), 1
        i += 2
        while i < n:
            if text.startswith("/*", i):
                depth, i = depth + 1, i + 2
            elif text.startswith("*/", i):
                depth, i = depth - 1, i + 2
                if not depth:
                    return i
            else:
                i += 1
        return -1

    def _continuation(self, i: int) -> int:
        """The position of the quote that continues a string closed just before i, or -1: scan.l's
        quotecontinue, blanks and `--` comments holding at least one newline, then a quote."""
        text, n, newline = self.text, len(self.text), False
        while i < n:
            c = text[i]
            if c in _NEWLINE:
                newline, i = True, i + 1
            elif c in self.horizontal_space or (newline and c in self.space):
                i += 1
            elif text.startswith("--", i):
                i = self._end_of_line(i)
            else:
                return i if c == "'" and newline else -1
        return -1

    def _end_of_string(self, i: int, kind: str) -> int:
        """Where the string of `kind` whose opening quote is at i ends, continued strings included, or -1 when the
        text ends inside it. Escape strings take a backslash as an escape; bit strings take no doubled quote (the
        second quote opens a plain string)."""
        text, n = self.text, len(self.text)
        while True:
            i += 1
            while True:
                if i >= n:
                    return -1
                c = text[i]
                if c == "\\" and kind == "escape":
                    i += 2
                    continue
                if c == "'":
                    i += 1
                    if kind != "bits" and i < n and text[i] == "'":  # a doubled quote stands for one
                        i += 1
                        continue
                    break
                if c == "\\" and kind == "plain":
                    self.ambiguous = True
                i += 1
            following = self._continuation(i)
            if following < 0:
                return i
            i = following

    def _end_of_quoted_name(self, i: int) -> int:
        text, n = self.text, len(self.text)
        i += 1
        while i < n:
            if text[i] == '"':
                if i + 1 < n and text[i + 1] == '"':
                    i += 2
                    continue
                return i + 1
            i += 1
        return -1

    def _after_dollar(self, i: int) -> int:
        """Past the dollar quote ($$...$$, $tag$...$tag$: the tag a name without `$`) or the parameter ($n) at i;
        -1 when the text ends inside a dollar quote."""
        text, n, j = self.text, len(self.text), i + 1
        if j < n and _name_start(text[j]):
            j += 1
            while j < n and _name_char(text[j]) and text[j] != "$":
                j += 1
        if j < n and text[j] == "$":
            tag = text[i : j + 1]
            close = text.find(tag, j + 1)
            return -1 if close < 0 else close + len(tag)
        j = i + 1
        while j < n and _digit(text[j]):
            j += 1
        if j > i + 1:
            self.parameters = max(self.parameters, int(text[i + 1 : j]))
        return max(j, i + 1)


def classify(text: str, server_version_num: int) -> Explainable | NotExplainable:
    """The statement the text holds if EXPLAIN can plan it on this server without running it, else why not."""
    scan = _Lexer(text, server_version_num)
    scan.run()
    if scan.unterminated:
        return NotExplainable(
            "unterminated",
            f"the text ends inside {scan.unterminated}: it was cut, so it is not the statement that ran",
        )
    if scan.after_end:
        return NotExplainable("several", "the text holds more than one statement")
    if scan.ambiguous:
        return NotExplainable(
            "ambiguous",
            "a string of the text holds a backslash, whose meaning standard_conforming_strings decides: it may not "
            "be the statement that ran",
        )
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
    return Explainable(
        kind=scan.first_word,
        parameters=scan.parameters,
        text=body.rstrip(),
        names=frozenset(scan.names),
        operators=tuple(scan.operators),
        unicode_names=scan.unicode_names,
    )
