"""Query texts are untrusted input from monitored servers: secrets out of them, and bounds on their size and on
the time their redaction takes."""

import heapq
import logging
import re
import time
from collections.abc import Iterator

from django.conf import settings

log = logging.getLogger(__name__)

# The redaction's version: one more whenever it learns a secret it did not redact. Each stored text records the
# version that redacted it, and beat has those of an older one redacted again (history.store,
# statements_redact_again): 1, the first; 2, Slack webhook paths, Authorization and X-API-Key headers, Azure
# AccountKey, Google and SendGrid keys, sshpass -p and mysql -p; 3, those passwords quoted (sshpass -p 'x',
# mysql -p"x") or after a quoted argument (mysql -e 'SELECT 1' -px), curl's --user=user:x and quoted -u / --user
# ('user:x y'), and comments nested as PostgreSQL nests them (a quote in an inner comment hid what followed).
VERSION = 3

# Secrets in query texts (utility statements keep their literals before PostgreSQL 16). The text
# is read as PostgreSQL's lexer reads it, so quoting cannot hide a secret from us nor make us cut
# a statement in the wrong place: standard strings ('it''s'), escape strings (E'it\'s'), dollar
# quoting ($$...$$, $tag$...$tag$), quoted identifiers and comments. An unterminated literal runs
# to the end of the text, as the lexer would read it, so no alternative ever fails after a long
# scan: each character is read once (possessive loops; linear in the text's length). Comments
# nest (/* a /* it's */ b */ is one comment), which no regular expression can count: only their
# opening is a token here, and _comment_end finds the end.
_SQL_TOKEN = re.compile(
    r"""
      (?P<comment>--[^\n]*+)
    | (?P<opener>/\*)
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
# Inside a comment, what opens and closes a nested one (PostgreSQL's lexer reads them so: /*/ opens, */* closes).
_COMMENT_MARK = re.compile(r"/\*|\*/")
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
_SECRET_WORD_TAIL = 64  # characters: more than any name above, so a word's last ones are all _SECRET_WORD reads
_VALUE = r"(?!['\"]?<redacted>)(\"[^\"]*+\"|'(?:[^'\\]|\\.)*+'|[^\s,;)}'\"]++)"
_KEY_VALUE = re.compile(rf"((?:{_SECRET_NAMES})[\"']?\s*+[=:]\s*+){_VALUE}", re.IGNORECASE)
# In a comment, prose too: "-- deployed by ci, token abc123".
_KEY_VALUE_LOOSE = re.compile(rf"((?:{_SECRET_NAMES})[\"']?(?:\s*+[=:]\s*+|\s++)){_VALUE}", re.IGNORECASE)
_URI_PASSWORD = re.compile(r"((?<![a-z0-9+.-])[a-z][a-z0-9+.-]*+://[^\s:/@']++:)[^\s@/']++@", re.IGNORECASE)
# Credentials whose shape gives them away wherever they stand: AWS access key ids, GitHub, Slack and Stripe
# tokens, JSON Web Tokens, bearer tokens and PEM private keys.
_TOKEN_SHAPES = re.compile(
    r"\bAKIA[0-9A-Z]{16}\b|\bgh[pousr]_[A-Za-z0-9]{30,}|\bxox[abprs]-[A-Za-z0-9-]{10,}|\bsk_live_[0-9A-Za-z]{16,}"
    r"|\bAIza[0-9A-Za-z_-]{35}|\bSG\.[\w-]{16,}+\.[\w-]{16,}+"  # Google API keys, SendGrid keys
    r"|(?i:\bbearer\s++)[\w.~+/=-]{8,}"
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)",
    re.DOTALL,
)
# Secrets after what announces them, which stays: a Slack webhook's path, an Authorization header of any scheme.
_ANNOUNCED = re.compile(
    r"(https://hooks\.slack(?:-gov)?\.com/services/)[^\s'\"]++"
    r"|((?i:\bauthorization)\s*+[:=]\s*+(?:[A-Za-z]++\s++)?)[^\s'\",;]++"
)
# Passwords on command lines, after what announces them too. Each is a shell word, its quotes part of it ('x',
# -p"x", 'a'"b"): a quote left open runs to the end, so that no alternative fails after a long scan.
_QUOTED = r"""'[^']*+'?|"(?:[^"\\]++|\\.?)*+"?"""
_SHELL_WORD = rf"""(?:{_QUOTED}|[^\s'";|&]++)++"""
# curl -u user:x, --user user:x, --user=user:x, -u'user:x' ('user:x y', up to the closing quote, which stays).
_CURL_USER = r"(?:^|\s)(?:-u\s*+|--user(?:\s++|=))"
_USER_COLON = re.compile(
    rf"({_CURL_USER}'[^:']*+:)[^']*+"
    rf'|({_CURL_USER}"[^:"]*+:)(?:[^"\\]++|\\.?)*+'
    rf"""|({_CURL_USER}[^\s:]++:)(?:{_QUOTED}|[^\s'"]++)++"""
)
_SSHPASS = re.compile(rf"(\bsshpass\s++-p\s*+){_SHELL_WORD}")
# The password attached to -p on mysql's command lines: its arguments are read up to the next mysql, even one
# inside an argument (/usr/bin/mysql, mysql.user), where a match may start again, so that each character is read
# once however many there are.
_MYSQL = r"(?:mysql|mysqldump|mysqladmin|mysqlimport|mariadb|mariadb-dump)\b"
_MYSQL_ARG = rf"(?:(?!\b{_MYSQL})[^\s;|&])"  # a character of an argument, before the next mysql
_MYSQL_PASSWORD = re.compile(
    rf"(\b{_MYSQL}{_MYSQL_ARG}*+(?:[ \t]++(?!-p[^\s;|&]){_MYSQL_ARG}++)*+[ \t]++-p){_SHELL_WORD}"
)
# Each reads the text as it is, and the secrets all find are redacted together (_redact_announced): a secret
# redacted first could hold what announces another (-p'x'Authorization: Basic y), and what announces one, kept,
# could hold another (mysql -e 'Authorization: Basic y' -px).
_ANNOUNCERS = (_ANNOUNCED, _USER_COLON, _SSHPASS, _MYSQL_PASSWORD)
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
    r"|\s-u|--user|aiza|sg\.|authorization|sshpass|mysql|mariadb",
    re.IGNORECASE,
)
_E_ESCAPE = re.compile(r"\\.|''", re.DOTALL)
_REDACTED = "'<redacted>'"
# SQL inside a literal inside a literal... (a DO block that EXECUTEs 'ALTER ROLE ... PASSWORD ''x''').
_NESTING_MAX = 4
# What ends a text whose redaction took longer than its budget (redact), after the part that was redacted.
_CUT_NOTE = "/* pgconsole: the rest of this text was cut: redacting it took longer than {ms:.0f} ms */"
_TOKENS_PER_LOOK = 64  # tokens read between two looks at the clock (a look costs about as much as a token)
# COLLECTOR_REDACT_BUDGET_MS is for this many characters (the stored size's default), and grows with a longer text:
# linear in the text's length, as the redaction is, it cuts only a redaction that is slower than linear.
_BUDGET_CHARS = 64 * 1024


class _OutOfTime(Exception):
    """The redaction of a text has taken longer than its budget."""


class _Clock:
    """The CPU time left to a text's redaction: this thread's alone, so that the collection threads waiting for
    the interpreter meanwhile do not count. Looked at every _TOKENS_PER_LOOK tokens and before each scan of a
    literal's content."""

    __slots__ = ("deadline", "tokens")

    def __init__(self, budget_s: float):
        self.deadline = time.thread_time() + budget_s
        self.tokens = 0

    def tick(self) -> None:
        if self.tokens % _TOKENS_PER_LOOK == 0:
            self.look()
        self.tokens += 1

    def look(self) -> None:
        if time.thread_time() >= self.deadline:
            raise _OutOfTime


def _may_hold_secret(text: str) -> bool:
    return _MAY_HOLD_SECRET.search(text) is not None


def _names_secret(name: str) -> bool:
    """Whether a word (a setting's name...) ends with a name that holds a secret. Only its end is read, so that
    asking again about a long one costs nothing more: set_config('<32 KB>', 'b'||'b'||...) asks at each 'b'."""
    return _SECRET_WORD.search(name[-_SECRET_WORD_TAIL:].lower()) is not None


class _Call:
    """A parenthesis being read: the function it calls (if a word stood before it), and what its literal
    arguments hold."""

    __slots__ = ("function", "secret_args", "setting_secret")

    def __init__(self, function: str | None):
        self.function = function
        self.secret_args = function in _KEY_FUNCTIONS
        self.setting_secret: bool | None = None  # whether set_config's first argument names a secret, once read


def _comment_end(text: str, start: int) -> tuple[int, bool]:
    """Where the comment opened just before `start` ends, the comments nested in it counted, and whether it is
    closed (one never closed runs to the end of the text, as the lexer reads it)."""
    depth = 1
    for mark in _COMMENT_MARK.finditer(text, start):
        depth += 1 if mark.group() == "/*" else -1
        if depth == 0:
            return mark.end(), True
    return len(text), False


def _redact_sql(text: str, depth: int, clock: _Clock, strict: bool = False) -> str:
    return "".join(_pieces(text, depth, clock, strict))


def _pieces(text: str, depth: int, clock: _Clock, strict: bool) -> Iterator[str]:
    """The text redacted, a token at a time. A piece is final once given (what is read after it never changes
    it): the pieces given so far are the beginning of the text redacted, wherever the reading stops."""
    prev = prev2 = prev3 = ""  # the last three significant tokens, lowercased (identifiers unquoted)
    prev_word = False  # the last significant token was a word (a function's name before its parenthesis)
    calls: list[_Call] = []
    pos = 0
    while pos < len(text):
        clock.tick()
        m = _SQL_TOKEN.match(text, pos)
        kind, start, pos = m.lastgroup, m.start(), m.end()
        if kind == "space":
            yield m.group()
            continue
        if kind in ("comment", "opener"):
            pos, closed = _comment_end(text, pos) if kind == "opener" else (pos, False)
            yield _comment(text[start:pos], closed, depth, clock, strict)
            continue
        token = m.group()
        if kind in ("ebody", "sbody", "dbody"):
            call = calls[-1] if calls else None
            yield _literal(m, kind, depth, clock, strict, (prev, prev2, prev3), call)
        else:
            yield token
            if kind == "other":
                for i, ch in enumerate(token):
                    if ch == "(":
                        calls.append(_Call(prev if i == 0 and prev_word else None))
                    elif ch == ")" and calls:
                        calls.pop()
        prev_word = kind == "word"
        prev3, prev2, prev = prev2, prev, token.strip('"').lower() if kind in ("word", "qident") else token


def _comment(token: str, closed: bool, depth: int, clock: _Clock, strict: bool) -> str:
    """A comment as shown (`closed`: a /* comment with its */): with the secrets in it redacted."""
    if strict:
        return "/* <redacted> */" if token.startswith("/*") else "-- <redacted>"
    if not _may_hold_secret(token):
        return token
    opening, body, closing = token[:2], token[2 : -2 if closed else None], "*/" if closed else ""
    redacted = _redact_content(body, depth, clock, prose=True)
    return token if redacted == body else opening + redacted + closing


def _literal(
    m: re.Match, kind: str, depth: int, clock: _Clock, strict: bool, before: tuple[str, str, str], call: _Call | None
) -> str:
    """A string literal as shown: redacted whole where what stands before it says it is a secret (PASSWORD 'x',
    SET app.api_key = 'x', an argument of pgp_sym_encrypt, set_config('app.token', 'x')), else with the secrets
    in its content redacted."""
    prev, prev2, prev3 = before
    secret = (
        strict
        or _names_secret(prev)
        or (prev in ("=", ":=", "=>", "to") and _names_secret(prev2))
        or (prev in (":=", "=") and _names_secret(prev3))  # DECLARE api_key text := 'x'
        or (call is not None and call.secret_args)
    )
    if not secret and call is not None and call.function == "set_config":
        if call.setting_secret is None:
            call.setting_secret = _names_secret(m.group(kind))
        else:
            secret = call.setting_secret
    if secret:
        return _REDACTED
    token = m.group()
    if not _may_hold_secret(token):
        return token
    if call is not None and _FORMAT_SECRET.search(token):
        call.secret_args = True  # the arguments after this format string
    return _redact_literal(m, kind, depth, clock)


def _redact_literal(m: re.Match, kind: str, depth: int, clock: _Clock) -> str:
    """The literal with the secrets in its content redacted, quoted as it was."""
    token, body = m.group(), m.group(kind)
    requote = str  # how the content is written back between its delimiters
    if kind == "dbody":
        opening = closing = m.group("dtag")
    else:
        opening, closing = (m.group("eprefix") or m.group("sprefix") or "") + "'", "'"
        if kind == "ebody":
            body = _E_ESCAPE.sub(lambda e: "'" if e.group() in ("\\'", "''") else e.group(), body)
        else:
            body = body.replace("''", "'")
        requote = _double_quotes
    closing = closing if m.end() > m.end(kind) else ""
    redacted = _redact_content(body, depth, clock)
    return token if redacted == body else opening + requote(redacted) + closing


def _double_quotes(text: str) -> str:
    return text.replace("'", "''")


def _key_value(m: re.Match) -> str:
    value = m.group(2)
    quote = value[0] if value[0] in "'\"" and len(value) > 1 else ""
    return f"{m.group(1)}{quote}<redacted>{quote}"


def _redact_announced(text: str) -> str:
    """The text with the secrets that any of _ANNOUNCERS finds in it redacted (those that overlap as one)."""
    spans = heapq.merge(*(filter(None, map(_secret_span, pattern.finditer(text))) for pattern in _ANNOUNCERS))
    out: list[str] = []
    written = 0  # the text before this is in out
    for start, end in spans:
        if out and start <= written:  # overlaps the secret redacted last: one redaction for both
            written = max(written, end)
            continue
        out += (text[written:start], "<redacted>")
        written = end
    return "".join(out) + text[written:] if out else text


def _secret_span(m: re.Match) -> tuple[int, int] | None:
    """Where the secret a match found stands: after what announces it (the group that matched), inside its quotes
    when it is one quoted string, so that they stay ('x' is redacted as '<redacted>'). None: redacted already (by
    the SQL in a literal, or an older version)."""
    start, end = m.end(m.lastindex), m.end()
    secret = m.string[start:end]
    if secret.strip("'\"") == "<redacted>":
        return None
    if len(secret) > 1 and secret[0] in "'\"" and secret[-1] == secret[0] and secret[0] not in secret[1:-1]:
        return start + 1, end - 1
    return start, end


def _redact_content(text: str, depth: int, clock: _Clock, *, prose: bool = False) -> str:
    if depth < _NESTING_MAX:
        text = _redact_sql(text, depth + 1, clock)
    clock.look()
    text = (_KEY_VALUE_LOOSE if prose else _KEY_VALUE).sub(_key_value, text)
    text = _URI_PASSWORD.sub(r"\1<redacted>@", text)
    text = _redact_announced(text)
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


def redact(text: str, *, strict: bool = False, budget_s: float | None = None) -> str:
    """``text`` with the secrets it holds replaced by ``<redacted>``; verbatim otherwise. ``strict``: every
    string literal and comment is replaced, whatever it holds (COLLECTOR_REDACT_STRICT).

    The redaction takes about ``budget_s`` of CPU at most (unless given, COLLECTOR_REDACT_BUDGET_MS for each
    64 KiB of the text, at least once): past it the text is cut after the last token it had redacted whole, and a
    note says why. What is returned is then the beginning of the redacted text, as the whole redaction would show
    it, and the note: never a character that was not redacted."""
    if not strict and not _may_hold_secret(text):
        return text
    if budget_s is None:
        budget_s = settings.COLLECTOR["REDACT_BUDGET_MS"] / 1000 * max(1.0, len(text) / _BUDGET_CHARS)
    done: list[str] = []
    try:
        for piece in _pieces(text, 0, _Clock(budget_s), strict):
            done.append(piece)
    except _OutOfTime:
        kept = "".join(done)
        ms = budget_s * 1000
        log.warning(
            "a query text took longer than %.0f ms to redact: cut at %d of its %d characters", ms, len(kept), len(text)
        )
        return kept + ("\n" if kept else "") + _CUT_NOTE.format(ms=ms)
    return "".join(done)


def clip(text: str, max_bytes: int) -> tuple[str, bool]:
    data = text.encode("utf-8")
    if len(data) <= max_bytes:
        return text, False
    return data[:max_bytes].decode("utf-8", errors="ignore"), True
