"""Query texts are untrusted input from monitored servers: secrets out of them, and a size bound."""

import re

# Secrets in query texts (utility statements keep their literals before PostgreSQL 16). The text
# is read as PostgreSQL's lexer reads it, so quoting cannot hide a secret from us nor make us cut
# a statement in the wrong place: standard strings ('it''s'), escape strings (E'it\'s'), dollar
# quoting ($$...$$, $tag$...$tag$), quoted identifiers and comments. An unterminated literal runs
# to the end of the text, as the lexer would read it, so no alternative ever fails after a long
# scan: each character is read once (possessive loops; linear in the text's length).
_SQL_TOKEN = re.compile(
    r"""
      (?P<comment>--[^\n]*+|/\*.*?(?:\*/|\Z))
    | (?P<eprefix>[eE])'(?P<ebody>(?:[^'\\]++|\\.?|'')*+)(?:'|\Z)
    | (?P<sprefix>[uU]&|[nNbBxX])?'(?P<sbody>(?:[^']++|'')*+)(?:'|\Z)
    | (?P<dtag>\$(?:[^\W\d]\w*+)?\$)(?P<dbody>.*?)(?:(?P=dtag)|\Z)
    | (?P<qident>(?:[uU]&)?"(?:[^"]++|"")*+(?:"|\Z))
    | (?P<word>[^\W\d][\w$]*+)
    | (?P<space>\s++)
    | (?P<other>\d++|[^\w\s'"$/-]++|.)
    """,
    re.VERBOSE | re.DOTALL,
)
# Inside a literal or a comment: conninfo values (password=secret, password='my secret') and the
# password of a URI (postgresql://user:secret@host). A value already redacted is left alone.
_CONNINFO_PASSWORD = re.compile(r"(password\s*=\s*)(?!'?<redacted>)('(?:[^'\\]|\\.)*+'|\S+)", re.IGNORECASE)
_URI_PASSWORD = re.compile(r"((?<![a-z0-9+.-])[a-z][a-z0-9+.-]*+://[^\s:/@']++:)[^\s@/']++@", re.IGNORECASE)
_E_ESCAPE = re.compile(r"\\.|''", re.DOTALL)
_REDACTED = "'<redacted>'"
# SQL inside a literal inside a literal... (a DO block that EXECUTEs 'ALTER ROLE ... PASSWORD ''x''').
_NESTING_MAX = 4


def _may_hold_secret(text: str) -> bool:
    return "password" in text.lower() or "://" in text


def _redact_sql(text: str, depth: int) -> str:
    out = []
    prev = prev2 = ""  # the last two significant tokens, lowercased (identifiers unquoted)
    for m in _SQL_TOKEN.finditer(text):
        kind, token = m.lastgroup, m.group()
        if kind == "space":
            out.append(token)
            continue
        if kind in ("ebody", "sbody", "dbody") and (
            prev.endswith("password") or (prev in ("=", ":=", "=>", "to") and prev2.endswith("password"))
        ):
            out.append(_REDACTED)  # PASSWORD 'x', ENCRYPTED PASSWORD E'x', OPTIONS (password $$x$$)
        elif kind in ("ebody", "sbody", "dbody", "comment") and _may_hold_secret(token):
            out.append(_redact_literal(m, kind, depth))
        else:
            out.append(token)
        if kind != "comment":
            prev2, prev = prev, token.strip('"').lower() if kind in ("word", "qident") else token
    return "".join(out)


def _redact_literal(m: re.Match, kind: str, depth: int) -> str:
    """The literal (or comment) with the secrets in its content redacted, quoted as it was."""
    token = m.group()
    requote = str  # how the content is written back between its delimiters
    if kind == "comment":
        closed = token.startswith("/*") and len(token) >= 4 and token.endswith("*/")
        opening, body, closing = token[:2], token[2 : -2 if closed else None], "*/" if closed else ""
    else:
        closed = m.end() > m.end(kind)
        body = m.group(kind)
        if kind == "dbody":
            opening = closing = m.group("dtag")
        else:
            opening, closing = (m.group("eprefix") or m.group("sprefix") or "") + "'", "'"
            if kind == "ebody":
                body = _E_ESCAPE.sub(lambda e: "'" if e.group() in ("\\'", "''") else e.group(), body)
            else:
                body = body.replace("''", "'")
            requote = _double_quotes
        closing = closing if closed else ""
    redacted = _redact_content(body, depth)
    return token if redacted == body else opening + requote(redacted) + closing


def _double_quotes(text: str) -> str:
    return text.replace("'", "''")


def _redact_content(text: str, depth: int) -> str:
    if depth < _NESTING_MAX:
        text = _redact_sql(text, depth + 1)
    text = _CONNINFO_PASSWORD.sub(r"\1<redacted>", text)
    return _URI_PASSWORD.sub(r"\1<redacted>@", text)


def redact(text: str) -> str:
    """``text`` with the passwords it holds replaced by ``<redacted>``; verbatim otherwise."""
    if not _may_hold_secret(text):
        return text
    return _redact_sql(text, 0)


def clip(text: str, max_bytes: int) -> tuple[str, bool]:
    data = text.encode("utf-8")
    if len(data) <= max_bytes:
        return text, False
    return data[:max_bytes].decode("utf-8", errors="ignore"), True
