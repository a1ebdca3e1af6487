"""inventory.catalog_names: a list of role or schema names is kept as the catalog could hold it (each once, in its
order, blanks and case kept) and refused otherwise, each bad value named."""

import pytest
from django.core.exceptions import ValidationError

from inventory.catalog_names import MAX_NAMES, NAME_MAX_BYTES, clean_names


def refusal(value, kind: str = "role") -> list[str]:
    with pytest.raises(ValidationError) as refused:
        clean_names(value, kind=kind)
    return refused.value.messages


def test_names_are_kept_as_written_each_once_in_their_order():
    assert clean_names(["app_owner", "Reporting", "app_owner", " spaced name ", "reporting"], kind="role") == [
        "app_owner",
        "Reporting",
        " spaced name ",
        "reporting",
    ]
    assert clean_names(None, kind="role") == clean_names([], kind="schema") == []
    assert clean_names(["a,b", 'quo"te'], kind="schema") == ["a,b", 'quo"te']


def test_a_name_is_at_most_63_bytes_in_utf8_not_63_characters():
    assert clean_names(["x" * NAME_MAX_BYTES, "é" * 31 + "x"], kind="role") == ["x" * NAME_MAX_BYTES, "é" * 31 + "x"]
    assert refusal(["é" * 32]) == [
        f"role name {'é' * 32!r} is 64 bytes in UTF-8: PostgreSQL's names have at most 63 (it truncates longer ones)"
    ]
    long = "ß" * 100  # cut in its message
    assert refusal([long], "schema") == [
        f"schema name {'ß' * 64!r}… is 200 bytes in UTF-8: PostgreSQL's names have at most 63 (it truncates longer "
        "ones)"
    ]


@pytest.mark.parametrize(
    "value, message",
    [
        ([""], "a role name cannot be empty"),
        (["ab\x00c"], "role name 'ab\\x00c' holds a NUL character, which no PostgreSQL name can"),
        (["ab\ud800"], "role name 'ab\\ud800' is not valid Unicode text (it holds a lone surrogate)"),
        ([42], "42 is not a role name (a string is expected)"),
        ("app_owner", "a list of role names is expected, not 'app_owner'"),
        ({"app_owner": True}, "a list of role names is expected, not {'app_owner': True}"),
    ],
    ids=["empty", "NUL", "surrogate", "not a string", "a string", "an object"],
)
def test_a_bad_value_is_named(value, message):
    assert refusal(value) == [message]


def test_every_bad_name_is_said_once_up_to_ten():
    assert refusal(["ok", "", "x" * 64, ""]) == [
        "a role name cannot be empty",
        f"role name {'x' * 64!r} is 64 bytes in UTF-8: PostgreSQL's names have at most 63 (it truncates longer ones)",
    ]
    many = refusal([f"{n:02d}" + "x" * 62 for n in range(15)])
    assert len(many) == 11 and many[-1] == "and 5 more bad role names"


def test_at_most_100_names_once_duplicates_are_dropped():
    names = [f"role_{n}" for n in range(MAX_NAMES)]
    assert clean_names(names + names, kind="role") == names
    assert refusal([*names, "one_more"], "schema") == ["at most 100 schema names, not 101"]
