"""Lists of PostgreSQL names a DBA types in for a server (the roles and schemas whose code the console may let the
planner run: Server.plans_trusted_roles, plans_trusted_schemas), checked as the catalog could hold them."""

from __future__ import annotations

from django.core.exceptions import ValidationError

NAME_MAX_BYTES = 63  # NAMEDATALEN - 1: PostgreSQL truncates a longer identifier, so it could never match one
MAX_NAMES = 100
SHOWN_CHARS = 64  # of a refused name, in its message
MAX_MESSAGES = 10


def clean_names(value: object, *, kind: str) -> list[str]:
    """`value` (a list of `kind` names, exactly as the catalog spells them: case-sensitive, not quoted) without its
    duplicates, in its order; None is no names. A ValidationError names each bad value: not a string, empty, with a
    NUL character or a lone surrogate, longer than 63 bytes in UTF-8, or more than 100 names."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValidationError(f"a list of {kind} names is expected, not {_shown(value)}")
    names: dict[str, None] = {}
    messages: list[str] = []
    for item in value:
        problem = _problem(item, kind)
        if problem is None:
            names[item] = None
        elif problem not in messages:
            messages.append(problem)
    if len(messages) > MAX_MESSAGES:
        messages[MAX_MESSAGES:] = [f"and {len(messages) - MAX_MESSAGES} more bad {kind} names"]
    if messages:
        raise ValidationError(messages)
    if len(names) > MAX_NAMES:
        raise ValidationError(f"at most {MAX_NAMES} {kind} names, not {len(names)}")
    return list(names)


def _problem(item: object, kind: str) -> str | None:
    if not isinstance(item, str):
        return f"{_shown(item)} is not a {kind} name (a string is expected)"
    if not item:
        return f"a {kind} name cannot be empty"
    if "\x00" in item:
        return f"{kind} name {_shown(item)} holds a NUL character, which no PostgreSQL name can"
    try:
        size = len(item.encode("utf-8"))
    except UnicodeEncodeError:
        return f"{kind} name {_shown(item)} is not valid Unicode text (it holds a lone surrogate)"
    if size > NAME_MAX_BYTES:
        return (
            f"{kind} name {_shown(item)} is {size} bytes in UTF-8: PostgreSQL's names have at most {NAME_MAX_BYTES} "
            "(it truncates longer ones)"
        )
    return None


def _shown(item: object) -> str:
    """The value as Python writes it (a NUL or a blank stays visible), cut when long."""
    if isinstance(item, str) and len(item) > SHOWN_CHARS:
        return f"{item[:SHOWN_CHARS]!r}…"
    text = repr(item)
    return text if len(text) <= SHOWN_CHARS + 2 else f"{text[:SHOWN_CHARS]}…"
