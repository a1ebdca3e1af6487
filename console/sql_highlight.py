"""SQL highlighting for query texts, which come from monitored servers and are untrusted: the text is
cut into tokens (keywords, strings, numbers, $n parameters, comments, the rest), every piece is
escaped, and only the spans built here are marked safe. Anything not understood is plain escaped text,
so a text that is not SQL at all (or is cut off mid-string) still reads as it was sent."""

from __future__ import annotations

import re
from collections.abc import Iterator

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

# The words a reader scans a statement by (not PostgreSQL's whole keyword list: a column named
# "name" or "value" stays plain).
KEYWORDS = frozenset(
    """
    abort add all alter analyze and any array as asc begin between by call case cast check checkpoint
    close cluster collate column comment commit concurrently constraint copy create cross current_date
    current_time current_timestamp current_user cursor deallocate declare default delete desc distinct
    do drop else end except execute exists explain false fetch filter first for foreign from full function
    grant group having if ilike in index inner insert intersect interval into is join key last lateral
    leading left like limit listen lock materialized move natural not nothing notify null nulls of offset
    on only or order outer over partition prepare primary procedure recursive references refresh reindex
    release rename replace reset returning revoke right rollback row rows savepoint schema select sequence
    session_user set show similar some start table tablesample temp temporary then to trailing transaction
    trigger true truncate union unique unlisten update user using vacuum values view when where window with
    within
    """.split()
)

# One alternative per token kind, tried in this order at each position. Strings and dollar quotes
# that never close run to the end of the text (a text cut at pg_stat_statements' track size). Possessive
# loops: a long literal is read once, without a backtracking stack as long as itself.
_TOKEN = re.compile(
    r"""
    (?P<line_comment>--[^\n]*)
    | (?P<block_comment>/\*)
    | (?P<dollar>\$(?P<tag>(?:[A-Za-z_\x80-\U0010ffff][A-Za-z0-9_\x80-\U0010ffff]*)?)\$)
    | (?P<param>\$[0-9]+)
    | (?P<string>[Ee]'(?:[^'\\]++|''|\\.)*+(?:'|\Z)|(?:[BbXxNn]|[Uu]&)?'(?:[^']++|'')*+(?:'|\Z))
    | (?P<quoted>(?:[Uu]&)?"(?:[^"]++|"")*+(?:"|\Z))
    | (?P<number>(?:0[xX][0-9A-Fa-f_]+|0[oO][0-7_]+|0[bB][01_]+
                  |(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9][0-9_]*)(?:[eE][+-]?[0-9]+)?)
                 (?![A-Za-z_\x80-\U0010ffff]))
    | (?P<word>[A-Za-z_\x80-\U0010ffff][A-Za-z0-9_$\x80-\U0010ffff]*)
    | (?P<space>\s+)
    | (?P<other>.)
    """,
    re.VERBOSE | re.DOTALL,
)
_COMMENT_EDGE = re.compile(r"/\*|\*/")

# token kind -> CSS class (static/console/console.css: pre.sql .kw .str .num .param .cmt)
CLASSES = {"keyword": "kw", "string": "str", "dollar": "str", "number": "num", "param": "param", "comment": "cmt"}


def _block_comment_end(text: str, start: int) -> int:
    """Where the block comment opening at `start` ends: PostgreSQL nests them; unclosed, the text's end."""
    depth, pos = 0, start
    while True:
        m = _COMMENT_EDGE.search(text, pos)
        if m is None:
            return len(text)
        depth += 1 if m.group() == "/*" else -1
        pos = m.end()
        if depth == 0:
            return pos


def tokens(text: str) -> Iterator[tuple[str, str]]:
    """(kind, piece) for the whole text, in order: the pieces join back to the text exactly. Kinds:
    keyword, string, dollar (a dollar-quoted body with its delimiters), number, param, comment,
    identifier, space, other."""
    pos, n = 0, len(text)
    while pos < n:
        m = _TOKEN.match(text, pos)
        kind = m.lastgroup
        if kind == "block_comment":
            end = _block_comment_end(text, pos)
            yield "comment", text[pos:end]
        elif kind == "dollar":
            close = text.find(m.group(), m.end())
            end = n if close < 0 else close + len(m.group())
            yield "dollar", text[pos:end]
        elif kind == "line_comment":
            end = m.end()
            yield "comment", text[pos:end]
        elif kind == "word":
            end = m.end()
            yield ("keyword" if m.group().lower() in KEYWORDS else "identifier"), m.group()
        elif kind == "quoted":
            end = m.end()
            yield "identifier", m.group()
        else:
            end = m.end()
            yield kind, m.group()
        pos = end


def highlight(text: str) -> SafeString:
    """The text as HTML for a <pre class="sql">: every piece escaped, the highlighted ones in a span."""
    out = []
    for kind, piece in tokens(text):
        css = CLASSES.get(kind)
        out.append(f'<span class="{css}">{escape(piece)}</span>' if css else escape(piece))
    return mark_safe("".join(out))  # built here: escaped pieces in fixed markup
