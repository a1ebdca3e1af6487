"""Query texts are untrusted input from monitored servers: secrets out of them, and a size bound."""

import re

# The redaction's version: one more whenever it learns a secret it did not redact. Each stored text records the
# version that redacted it, and beat has those of an older one redacted again (history.store,
# statements_redact_again): 1, the first; 2, Slack webhook paths, Authorization and X-API-Key headers, Azure
# AccountKey, Google and SendGrid keys, sshpass -p and mysql -p.
VERSION = 2

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
# Names that hold a secret: a word ending with one of these before a literal (PASSWORD 'x', OPTIONS (passwd
# 'x'), SET app.api_token = 'x'), or a key=value / key: value inside a literal or a comment (password=x in a
# conninfo, AWS_SECRET_ACCESS_KEY=x in a COPY PROGRAM, /* api_token=x */, {"client_secret": "x"}, an X-API-Key:
# header, Azure's AccountKey=).
_SECRET_NAMES = (
    r"password|passwd|passphrase|pwd|secret_access_key|access_key_id|secret_key|access_key|private_key|api[_-]key"
    r"|apikey|account_?key|auth_token|access_token|refresh_token|client_secret|token|secret|credentials?"
    r"|(?:encryption|signing|master|hmac|jwt|aes)_?key"
)
_SECRET_WORD = re.compile(rf"(?:{_SECRET_NAMES}|\w_key)$")
_VALUE = r"(?!['\"]?<redacted>)(\"[^\"]*+\"|'(?:[^'\\]|\\.)*+'|[^\s,;)}'\"]++)"
_KEY_VALUE = re.compile(rf"((?:{_SECRET_NAMES})[\"']?\s*+[=:]\s*+){_VALUE}", re.IGNORECASE)
# In a comment, prose too: "-- deployed by ci, token abc123".
_KEY_VALUE_LOOSE = re.compile(rf"((?:{_SECRET_NAMES})[\"']?(?:\s*+[=:]\s*+|\s++)){_VALUE}", re.IGNORECASE)
_URI_PASSWORD = re.compile(r"((?<![a-z0-9+.-])[a-z][a-z0-9+.-]*+://[^\s:/@']++:)[^\s@/']++@", re.IGNORECASE)
# curl -u user:secret, and credentials whose shape gives them away wherever they stand: AWS access key ids,
# GitHub, Slack and Stripe tokens, JSON Web Tokens, bearer tokens and PEM private keys.
_USER_COLON = re.compile(r"((?:^|\s)(?:-u|--user)\s++[^\s:]++:)[^\s'\"]++")
_TOKEN_SHAPES = re.compile(
    r"\bAKIA[0-9A-Z]{16}\b|\bgh[pousr]_[A-Za-z0-9]{30,}|\bxox[abprs]-[A-Za-z0-9-]{10,}|\bsk_live_[0-9A-Za-z]{16,}"
    r"|\bAIza[0-9A-Za-z_-]{35}|\bSG\.[\w-]{16,}+\.[\w-]{16,}+"  # Google API keys, SendGrid keys
    r"|(?i:\bbearer\s++)[\w.~+/=-]{8,}"
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)",
    re.DOTALL,
)
# Secrets after what announces them, which stays: a Slack webhook's path, an Authorization header of any scheme,
# sshpass -p x, and the password attached to -p on mysql's command lines (tokens up to the next mysql, so that
# each character is read once however many there are).
_MYSQL = r"(?:mysql|mysqldump|mysqladmin|mysqlimport|mariadb|mariadb-dump)\b"
_ANNOUNCED = re.compile(
    r"(https://hooks\.slack(?:-gov)?\.com/services/)[^\s'\"]++"
    r"|((?i:\bauthorization)\s*+[:=]\s*+(?:[A-Za-z]++\s++)?)[^\s'\",;]++"
    r"|(\bsshpass\s++-p\s*+)[^\s'\";|&]++"
    rf"|(\b{_MYSQL}(?:[ \t]++(?!-p|{_MYSQL})[^\s;|&'\"]++)*+[ \t]++-p)[^\s;|&'\"]++"
)
# JSON Web Tokens (header.payload.signature, the first two base64url JSON, so starting eyJ). As one pattern,
# \beyJ[\w-]{5,}\.eyJ..., a run like eyJ-eyJ-eyJ-... with no dot at its end is scanned again from each eyJ:
# quadratic. Instead a dotted run is read once, from its start (the look-behind keeps every other position
# from starting one), and its segments are looked at in _jwts (only in a text that holds eyJ at all).
_DOTTED_RUN = re.compile(r"(?<![\w.-])[\w.-]++")
_JWT_HEAD = re.compile(r"(?<!\w)eyJ")  # where a JWT may begin in a segment: its start, or after a dash
# Functions whose string arguments are keys or what a key protects (pgcrypto): every literal passed to them.
_KEY_FUNCTIONS = frozenset(
    "pgp_sym_encrypt pgp_sym_encrypt_bytea pgp_sym_decrypt pgp_sym_decrypt_bytea pgp_pub_encrypt "
    "pgp_pub_encrypt_bytea pgp_pub_decrypt pgp_pub_decrypt_bytea hmac encrypt decrypt encrypt_iv decrypt_iv crypt "
    "dearmor".split()
)
# A format string that puts a secret in: format('ALTER ROLE %I PASSWORD %L', r, 'x') passes it as an argument.
_FORMAT_SECRET = re.compile(rf"(?:{_SECRET_NAMES})[\"']?\s*+(?:=\s*+)?'?%(?:\d+\$)?[LsI]", re.IGNORECASE)
# What makes a text worth the scan at all (most are plain SELECTs): a cheap test first.
_MAY_HOLD_SECRET = re.compile(
    rf"{_SECRET_NAMES}|_key|://|pgp_|hmac|crypt|set_config|akia|gh[pousr]_|xox|sk_live_|eyj|bearer|private key"
    r"|\s-u\s|--user|aiza|sg\.|authorization|sshpass|mysql|mariadb",
    re.IGNORECASE,
)
_E_ESCAPE = re.compile(r"\\.|''", re.DOTALL)
_REDACTED = "'<redacted>'"
# SQL inside a literal inside a literal... (a DO block that EXECUTEs 'ALTER ROLE ... PASSWORD ''x''').
_NESTING_MAX = 4


def _may_hold_secret(text: str) -> bool:
    return _MAY_HOLD_SECRET.search(text) is not None


class _Call:
    """A parenthesis being read: the function it calls (if a word stood before it), and what its literal
    arguments hold."""

    __slots__ = ("function", "secret_args", "setting")

    def __init__(self, function: str | None):
        self.function = function
        self.secret_args = function in _KEY_FUNCTIONS
        self.setting: str | None = None  # set_config's first argument, once read


def _redact_sql(text: str, depth: int, strict: bool = False) -> str:
    out = []
    prev = prev2 = prev3 = ""  # the last three significant tokens, lowercased (identifiers unquoted)
    prev_word = False  # the last significant token was a word (a function's name before its parenthesis)
    calls: list[_Call] = []
    for m in _SQL_TOKEN.finditer(text):
        kind, token = m.lastgroup, m.group()
        if kind == "space":
            out.append(token)
            continue
        call = calls[-1] if calls else None
        if kind in ("ebody", "sbody", "dbody"):
            out.append(_literal(m, kind, depth, strict, (prev, prev2, prev3), call))
        elif kind == "comment" and strict:
            out.append("/* <redacted> */" if token.startswith("/*") else "-- <redacted>")
        elif kind == "comment" and _may_hold_secret(token):
            out.append(_redact_literal(m, kind, depth))
        else:
            out.append(token)
            if kind == "other":
                for i, ch in enumerate(token):
                    if ch == "(":
                        calls.append(_Call(prev if i == 0 and prev_word else None))
                    elif ch == ")" and calls:
                        calls.pop()
        if kind != "comment":
            prev_word = kind == "word"
            prev3, prev2, prev = prev2, prev, token.strip('"').lower() if kind in ("word", "qident") else token
    return "".join(out)


def _literal(m: re.Match, kind: str, depth: int, strict: bool, before: tuple[str, str, str], call: _Call | None) -> str:
    """A string literal as shown: redacted whole where what stands before it says it is a secret (PASSWORD 'x',
    SET app.api_key = 'x', an argument of pgp_sym_encrypt, set_config('app.token', 'x')), else with the secrets
    in its content redacted."""
    prev, prev2, prev3 = before
    secret = (
        strict
        or _SECRET_WORD.search(prev) is not None
        or (prev in ("=", ":=", "=>", "to") and _SECRET_WORD.search(prev2) is not None)
        or (prev in (":=", "=") and _SECRET_WORD.search(prev3) is not None)  # DECLARE api_key text := 'x'
        or (call is not None and call.secret_args)
    )
    if not secret and call is not None and call.function == "set_config":
        if call.setting is None:
            call.setting = m.group(kind).lower()
        elif _SECRET_WORD.search(call.setting) is not None:
            secret = True
    if secret:
        return _REDACTED
    token = m.group()
    if not _may_hold_secret(token):
        return token
    if call is not None and _FORMAT_SECRET.search(token):
        call.secret_args = True  # the arguments after this format string
    return _redact_literal(m, kind, depth)


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
    redacted = _redact_content(body, depth, prose=kind == "comment")
    return token if redacted == body else opening + requote(redacted) + closing


def _double_quotes(text: str) -> str:
    return text.replace("'", "''")


def _key_value(m: re.Match) -> str:
    value = m.group(2)
    quote = value[0] if value[0] in "'\"" and len(value) > 1 else ""
    return f"{m.group(1)}{quote}<redacted>{quote}"


def _announced(m: re.Match) -> str:
    return next(g for g in m.groups() if g is not None) + "<redacted>"


def _redact_content(text: str, depth: int, *, prose: bool = False) -> str:
    if depth < _NESTING_MAX:
        text = _redact_sql(text, depth + 1)
    text = (_KEY_VALUE_LOOSE if prose else _KEY_VALUE).sub(_key_value, text)
    text = _URI_PASSWORD.sub(r"\1<redacted>@", text)
    text = _USER_COLON.sub(r"\1<redacted>", text)
    text = _ANNOUNCED.sub(_announced, text)
    text = _TOKEN_SHAPES.sub("<redacted>", text)
    return _DOTTED_RUN.sub(_jwts, text) if "eyJ" in text else text


def _jwts(m: re.Match) -> str:
    """A dotted run (a.b.c...) with each JSON Web Token in it redacted: a segment holding eyJ at a word's start
    and 5 more characters, the next one starting eyJ with 5 more, and one after it."""
    if ".eyJ" not in m.group():
        return m.group()
    segments = m.group().split(".")
    out: list[str] = []
    i = 0
    while i < len(segments):
        head = _JWT_HEAD.search(segments[i]) if i + 2 < len(segments) and segments[i + 2] else None
        payload = segments[i + 1] if head else ""
        if head and len(segments[i]) - head.start() >= 8 and payload.startswith("eyJ") and len(payload) >= 8:
            out.append(segments[i][: head.start()] + "<redacted>")
            i += 3
        else:
            out.append(segments[i])
            i += 1
    return ".".join(out)


def redact(text: str, *, strict: bool = False) -> str:
    """``text`` with the secrets it holds replaced by ``<redacted>``; verbatim otherwise. ``strict``: every
    string literal and comment is replaced, whatever it holds (COLLECTOR_REDACT_STRICT)."""
    if not strict and not _may_hold_secret(text):
        return text
    return _redact_sql(text, 0, strict)


def clip(text: str, max_bytes: int) -> tuple[str, bool]:
    data = text.encode("utf-8")
    if len(data) <= max_bytes:
        return text, False
    return data[:max_bytes].decode("utf-8", errors="ignore"), True
