"""Where a plan reads a table to keep few of its rows, and on which columns: the places an index may help.

From a stored plan (EXPLAIN (FORMAT JSON), generic: `$n` for the statement's parameters), each scan of a relation
that filters what it reads: a sequential scan's filter, or an index scan's (a bitmap heap scan's) filter beside its
index condition, whose columns then come first. The columns are those compared to a parameter or a constant, by
equality (`=`, `= ANY (...)`, `IS NULL`) or by range (`<`, `<=`, `>`, `>=`), among the top-level AND; an OR at the
top, or a function of a column, gives none. A Sort right above the scan gives its keys (ORDER BY) when they are
plain columns of the relation in one direction, as one B-tree read forwards or backwards serves them; keys in
mixed directions, other NULLS placements, collations or expressions give none. The conditions are text from a
monitored server: they are read by a scanner that looks at each character once (no regular expression that could
backtrack), and one longer than MAX_FILTER is not read at all.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_FILTER = 8_192
SCANS = ("Seq Scan", "Index Scan", "Index Only Scan", "Bitmap Heap Scan")
# Where an index scan's own condition is in EXPLAIN's JSON (a bitmap heap scan rechecks its bitmap's).
CONDITIONS = ("Index Cond", "Recheck Cond")
EQUALITY, RANGE = ("=",), ("<", "<=", ">", ">=")
_OPERATOR_CHARS = set("=<>!~*+-/%^&|#@")
_WORD_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_$")


@dataclass(frozen=True)
class Scan:
    """One scan of a relation that filters what it reads."""

    schema: str
    relation: str
    node_type: str
    index: str | None  # the index an index scan already uses (None: a sequential scan)
    plan_rows: float  # the rows it keeps, as estimated
    total_cost: float
    equality: tuple[str, ...]  # columns compared by equality, in the filter's order
    ranges: tuple[str, ...]  # columns compared by a range
    indexed: tuple[str, ...] = ()  # those of them the index scan's own condition compares
    order: tuple[str, ...] = ()  # the keys of a Sort right above the scan, in order


def tokens(text: str) -> list[str]:
    """The filter's tokens: words (identifiers, keywords, numbers, $n), "quoted" identifiers (unquoted),
    'literals' (kept with their quotes), operators, parentheses, commas, "::" and "."; one pass."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch.isspace():
            i += 1
        elif ch in _WORD_CHARS:
            start = i
            while i < n and text[i] in _WORD_CHARS:
                i += 1
            out.append(text[start:i])
        elif ch in "'\"":
            quote, i, chunk = ch, i + 1, []
            while i < n:
                if text[i] == quote:
                    if i + 1 < n and text[i + 1] == quote:  # a doubled quote stands for itself
                        chunk.append(quote)
                        i += 2
                        continue
                    break
                chunk.append(text[i])
                i += 1
            i += 1  # the closing quote (or the end)
            body = "".join(chunk)
            out.append(f"'{body}'" if quote == "'" else f'"{body}')
        elif ch == ":" and text.startswith("::", i):
            out.append("::")
            i += 2
        elif ch in _OPERATOR_CHARS:
            start = i
            while i < n and text[i] in _OPERATOR_CHARS:
                i += 1
            out.append(text[start:i])
        else:
            out.append(ch)
            i += 1
    return out


def _unwrap(part: list[str]) -> list[str]:
    """The tokens without the parentheses that enclose all of them."""
    while len(part) >= 2 and part[0] == "(" and part[-1] == ")":
        depth = 0
        for k, tok in enumerate(part):
            depth += tok == "("
            depth -= tok == ")"
            if depth == 0 and k < len(part) - 1:
                return part  # the first parenthesis closes before the end: it encloses a part only
        part = part[1:-1]
    return part


def conjuncts(text: str) -> list[list[str]] | None:
    """The filter's top-level AND parts as tokens; None for an OR at the top (no single index serves it)."""
    parts, current, depth = [], [], 0
    for tok in _unwrap(tokens(text)):
        depth += tok == "("
        depth -= tok == ")"
        if depth == 0 and tok.upper() == "OR":
            return None
        if depth == 0 and tok.upper() == "AND":
            parts.append(current)
            current = []
        else:
            current.append(tok)
    parts.append(current)
    return [_unwrap(p) for p in parts if p]


def _column(part: list[str], alias: str | None) -> tuple[str | None, list[str]]:
    """A plain column at the start of `part` (name, alias.name, or (name)::type), and what follows it."""
    if len(part) >= 4 and part[0] == "(" and part[2] == ")" and part[3] == "::":  # (status)::text
        name, rest = part[1], part[4:]
        rest = rest[1:] if rest else rest  # the type's name
    elif len(part) >= 3 and part[1] == ".":
        if alias is not None and part[0].lstrip('"') != alias:
            return None, part
        name, rest = part[2], part[3:]
    else:
        name, rest = part[0], part[1:]
    if not name or name[0] == "'" or name[0] == "$" or name[0].isdigit() or name.upper() in ("NOT", "NULL"):
        return None, part
    if rest and rest[0] == "(":  # a function call: lower(email)
        return None, part
    return name.lstrip('"'), rest


def _value(rest: list[str]) -> bool:
    """Whether `rest` is a parameter or a constant (with its cast), or ANY of one."""
    if not rest:
        return False
    head = rest[0]
    if head.upper() == "ANY" and len(rest) >= 2 and rest[1] == "(":
        return _value(_unwrap(rest[1:]))
    constant = head[0] in "'$" or head[0].isdigit() or head.upper() in ("TRUE", "FALSE")
    return constant and (len(rest) == 1 or rest[1] == "::")


def columns(text: str, alias: str | None = None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(equality columns, range columns) of a filter, each once, in the filter's order."""
    if not text or len(text) > MAX_FILTER:
        return (), ()
    parts = conjuncts(text)
    if parts is None:
        return (), ()
    equality: list[str] = []
    ranges: list[str] = []
    for part in parts:
        name, rest = _column(part, alias)
        if name is None or not rest:
            continue
        op, value = rest[0], rest[1:]
        if op.upper() == "IS" and [v.upper() for v in value] == ["NULL"]:
            found = equality
        elif op in EQUALITY and _value(value):
            found = equality
        elif op in RANGE and _value(value):
            found = ranges
        else:
            continue
        if name not in equality and name not in ranges:
            found.append(name)
    return tuple(equality), tuple(ranges)


# A sort key's tail that one B-tree serves (with its columns ascending, read forwards or backwards).
_ORDER_TAILS = {(): "asc", ("DESC",): "desc", ("NULLS", "LAST"): "asc", ("DESC", "NULLS", "FIRST"): "desc"}


def order_columns(keys: list[str], alias: str | None = None) -> tuple[str, ...]:
    """A Sort's keys as columns, when each is a plain column and all go one way; () otherwise."""
    found: list[str] = []
    directions = set()
    for key in keys:
        if not isinstance(key, str) or len(key) > MAX_FILTER:
            return ()
        name, rest = _column(_unwrap(tokens(key)), alias)
        direction = _ORDER_TAILS.get(tuple(t.upper() for t in rest))
        if name is None or direction is None:
            return ()
        directions.add(direction)
        if name not in found:
            found.append(name)
    return tuple(found) if len(directions) == 1 else ()


def _nodes(node: dict, parent: dict | None = None):
    yield node, parent
    for child in node.get("Plans", ()):
        yield from _nodes(child, node)


def _bitmap_index(node: dict) -> str | None:
    """The index a bitmap heap scan's bitmap comes from (its child's), when there is one."""
    child = next(iter(node.get("Plans", ())), {})
    return child.get("Index Name")


def scans(plan: dict) -> list[Scan]:
    """Every scan of the plan that filters a relation's rows on plain columns."""
    found = []
    for node, parent in _nodes(plan["Plan"]):
        if node.get("Node Type") not in SCANS or "Relation Name" not in node or not node.get("Filter"):
            continue
        alias = node.get("Alias")
        condition = next((node[key] for key in CONDITIONS if node.get(key)), "")
        cond_equality, cond_ranges = columns(condition, alias)
        equality, ranges = columns(node["Filter"], alias)
        if node["Node Type"] != "Seq Scan" and not (equality or ranges):
            continue  # nothing filtered beyond the index
        equality = tuple(dict.fromkeys(cond_equality + equality))
        ranges = tuple(c for c in dict.fromkeys(cond_ranges + ranges) if c not in equality)
        order = ()
        if parent is not None and parent.get("Node Type") == "Sort":
            order = order_columns(parent.get("Sort Key") or [], alias)
        if equality or ranges:
            found.append(
                Scan(
                    schema=node.get("Schema", "public"),
                    relation=node["Relation Name"],
                    node_type=node["Node Type"],
                    index=node.get("Index Name") or _bitmap_index(node),
                    plan_rows=float(node.get("Plan Rows", 0.0)),
                    total_cost=float(node.get("Total Cost", 0.0)),
                    equality=equality,
                    ranges=ranges,
                    indexed=tuple(dict.fromkeys(cond_equality + cond_ranges)),
                    order=order,
                )
            )
    return found
