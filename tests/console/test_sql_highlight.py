"""console/sql_highlight.py: query texts are untrusted; every piece is escaped, only our spans are markup,
and the highlighted HTML reads back as exactly the text that came in."""

from __future__ import annotations

import html
import re

from django.utils.safestring import SafeString
from hypothesis import given, settings
from hypothesis import strategies as st

from console.sql_highlight import highlight, tokens

SPAN = re.compile(r'<span class="(kw|str|num|param|cmt)">|</span>')


def text_of(out: str) -> str:
    """The text a browser shows for the highlighted HTML."""
    return html.unescape(SPAN.sub("", out))


def markup_of(out: str) -> list[str]:
    """Every tag in the output (there must be none but ours)."""
    return re.findall(r"<[^>]*>", out)


def spans(out: str, css: str) -> list[str]:
    return [html.unescape(m) for m in re.findall(rf'<span class="{css}">(.*?)</span>', out, re.S)]


def assert_only_our_markup(out: str) -> None:
    assert all(SPAN.fullmatch(tag) for tag in markup_of(out)), markup_of(out)


def test_script_in_a_string_literal_is_text():
    text = "SELECT * FROM t WHERE name = '<script>alert(1)</script>' AND id = $1"
    out = highlight(text)
    assert isinstance(out, SafeString)
    assert "<script" not in out and "&lt;script&gt;alert(1)&lt;/script&gt;" in out
    assert spans(out, "str") == ["'<script>alert(1)</script>'"]
    assert spans(out, "param") == ["$1"]
    assert spans(out, "kw") == ["SELECT", "FROM", "WHERE", "AND"]
    assert_only_our_markup(out)
    assert text_of(out) == text


def test_script_in_comments_is_text():
    text = "/* <script>alert(1)</script> */ SELECT 1 -- </span><script>alert(2)</script>\nFROM t"
    out = highlight(text)
    assert "<script" not in out and "</span><script" not in out
    assert spans(out, "cmt") == ["/* <script>alert(1)</script> */", "-- </span><script>alert(2)</script>"]
    assert spans(out, "num") == ["1"]
    assert_only_our_markup(out)
    assert text_of(out) == text


def test_quotes_and_ampersands_are_escaped_everywhere():
    text = 'SELECT "a""<b>" & 1, e\'\\\'<i>\' FROM "t&amp;"'
    out = highlight(text)
    assert '"' not in SPAN.sub("", out) and "<b>" not in out and "<i>" not in out
    assert "&amp;amp;" in out  # an entity in the text stays text
    assert_only_our_markup(out)
    assert text_of(out) == text


def test_dollar_quoted_bodies_are_strings():
    text = "DO $$ BEGIN RAISE NOTICE '<script>x</script>'; END $$; SELECT $fn$ it's $$ inside $fn$, $1"
    out = highlight(text)
    assert spans(out, "str") == ["$$ BEGIN RAISE NOTICE '<script>x</script>'; END $$", "$fn$ it's $$ inside $fn$"]
    assert spans(out, "param") == ["$1"]
    assert "<script" not in out
    assert_only_our_markup(out)
    assert text_of(out) == text


def test_unterminated_string_dollar_quote_and_comment_run_to_the_end():
    for text, css, opening in (
        ("SELECT 'never closed <script>alert(1)</script>", "str", "'"),
        ("SELECT $body$ never closed <img src=x onerror=alert(1)>", "str", "$body$"),
        ("SELECT 1 /* never closed /* nested */ <script>", "cmt", "/*"),
    ):
        out = highlight(text)
        assert "<script" not in out and "<img" not in out
        assert spans(out, css)[-1] == text[text.index(opening) :]  # from its opening to the end of the text
        assert_only_our_markup(out)
        assert text_of(out) == text


def test_nested_block_comments_close_where_postgresql_closes_them():
    text = "/* a /* b */ still comment */ SELECT"
    assert list(tokens(text)) == [("comment", "/* a /* b */ still comment */"), ("space", " "), ("keyword", "SELECT")]


def test_numbers_parameters_and_identifiers():
    kinds = [(k, p) for k, p in tokens('SELECT 1.5e3, .5, 0x1F, $12, t1, a$b, "Select" FROM x') if k != "space"]
    assert kinds == [
        ("keyword", "SELECT"),
        ("number", "1.5e3"),
        ("other", ","),
        ("number", ".5"),
        ("other", ","),
        ("number", "0x1F"),
        ("other", ","),
        ("param", "$12"),
        ("other", ","),
        ("identifier", "t1"),
        ("other", ","),
        ("identifier", "a$b"),
        ("other", ","),
        ("identifier", '"Select"'),
        ("keyword", "FROM"),
        ("identifier", "x"),
    ]


def test_standard_strings_take_backslashes_literally():
    # standard_conforming_strings: 'C:\' is a whole string; in an E'' string \' escapes the quote.
    assert [p for k, p in tokens(r"SELECT 'C:\', E'it\'s'") if k == "string"] == [r"'C:\'", r"E'it\'s'"]


@settings(max_examples=300, deadline=None)
@given(
    st.text(alphabet=st.sampled_from(list("SELECTfromwhere $1'\"-/*<>&;\\e\n 0.9_xq")) | st.characters(), max_size=120)
)
def test_any_text_reads_back_exactly_and_carries_no_markup_of_its_own(text):
    out = highlight(text)
    assert "".join(p for _, p in tokens(text)) == text
    assert_only_our_markup(out)
    assert text_of(out) == text
