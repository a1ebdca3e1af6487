"""Names in SQL written for a person to run (the fixes that a connection check and the advisor show): quoted
as PostgreSQL's quote_ident() quotes them, so that a role or database named `user`, `Sales` or `a"b` gives a
statement that runs as it reads; and shown inside a comment so that no name can end the comment and have the rest
of it run (a monitored server's users choose the names of what they create)."""

import re

# PostgreSQL's key words that quote_ident() quotes (every one but the unreserved: pg_get_keywords() where
# catcode <> 'U', PostgreSQL 17; a newer version's new key words come quoted by a server, bare from here).
RESERVED = frozenset(
    """
    all analyse analyze and any array as asc asymmetric authorization between bigint binary bit boolean both
    case cast char character check coalesce collate collation column concurrently constraint create cross
    current_catalog current_date current_role current_schema current_time current_timestamp current_user dec
    decimal default deferrable desc distinct do else end except exists extract false fetch float for foreign
    freeze from full grant greatest group grouping having ilike in initially inner inout int integer intersect
    interval into is isnull join json json_array json_arrayagg json_exists json_object json_objectagg json_query
    json_scalar json_serialize json_table json_value lateral leading least left like limit localtime
    localtimestamp merge_action national natural nchar none normalize not notnull null nullif numeric offset on
    only or order out outer overlaps overlay placing position precision primary real references returning right
    row select session_user setof similar smallint some substring symmetric system_user table tablesample then
    time timestamp to trailing treat trim true union unique user using values varchar variadic verbose when
    where window with xmlattributes xmlconcat xmlelement xmlexists xmlforest xmlnamespaces xmlparse xmlpi
    xmlroot xmlserialize xmltable
    """.split()
)


def quote_ident(name: str) -> str:
    """The name bare where PostgreSQL reads it back unchanged (lower case, digits and _, not a key word
    that quote_ident() quotes), else in double quotes with its own doubled."""
    if re.fullmatch(r"[a-z_][a-z0-9_]*", name) and name not in RESERVED:
        return name
    return '"' + name.replace('"', '""') + '"'


# Where a comment ends or opens, in PostgreSQL's lexer and psql's: a -- comment at a line feed or a carriage
# return; a /* comment at */, where /* nests another; and a slash that ends the text makes /* of the star of the
# */ that closes its comment. A backslash between them keeps the two characters apart.
_TOUCHING = re.compile(r"(?<=/)(?=\*)|(?<=\*)(?=/)|(?<=/)\Z")


def _escape(char: str) -> str:
    return "\\\\" if char == "\\" else char.encode("unicode_escape").decode("ascii")


def in_comment(text: str) -> str:
    r"""`text` as an SQL comment (-- or /* */) may hold it: every character that does not print written as Python
    writes it (\n, \r, \x1b, \u2028: the DBA still sees which object is meant, and no line break, bidi override or
    terminal escape hides anything), a backslash doubled so that those read one way, and a backslash between a star
    and a slash that touch and after a slash that ends the text (*\/, /\*, a/\)."""
    shown = "".join(char if char.isprintable() and char != "\\" else _escape(char) for char in text)
    return _TOUCHING.sub(r"\\", shown)
