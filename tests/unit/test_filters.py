"""The filter language's parser (``kbctl.search.filters``): quoted values, the empty value, the
tests for a key that has a value or none, and ``str(Filter)`` reading back as the same filter."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kbctl.errors import UsageError
from kbctl.search import parse_filter
from kbctl.search.filters import quote_value
from kbctl.types import Filter


@pytest.mark.parametrize(
    "text, expected",
    [
        # one pair of the same quote around a value is its quoting, not part of it
        ('author="Priya Raman"', Filter("author", "=", "Priya Raman")),
        ("author='Priya Raman'", Filter("author", "=", "Priya Raman")),
        ('author = "Priya Raman" ', Filter("author", "=", "Priya Raman")),
        ('author!="Priya Raman"', Filter("author", "!=", "Priya Raman")),
        ('title~"SSO "', Filter("title", "~", "SSO ")),  # quotes keep the spaces at the ends
        ('title=" padded "', Filter("title", "=", " padded ")),
        ('year>="2024"', Filter("year", ">=", "2024")),  # quotes delimit; the value is read as before
        # a quote inside a quoted value is doubled; the other kind needs nothing
        ('title="say ""hi"""', Filter("title", "=", 'say "hi"')),
        ("title='\"quoted\"'", Filter("title", "=", '"quoted"')),
        ('title="""quoted"""', Filter("title", "=", '"quoted"')),
        ("author='O''Brien'", Filter("author", "=", "O'Brien")),
        # quotes that do not open the value are text, as they always were
        ("author=O'Brien", Filter("author", "=", "O'Brien")),
        ("height=5'10\"", Filter("height", "=", "5'10\"")),
        # the empty value, quoted
        ('author=""', Filter("author", "=", "")),
        ("author=''", Filter("author", "=", "")),
        ('author!=""', Filter("author", "!=", "")),
        # in: each item may be quoted, and a quoted item may hold a comma
        ('author in "Raman, Priya",Bob', Filter("author", "in", ("Raman, Priya", "Bob"))),
        ("author in 'a', \"b\" , c", Filter("author", "in", ("a", "b", "c"))),
        ('author in "",Bob', Filter("author", "in", ("", "Bob"))),
        ('author in "a,b"', Filter("author", "in", ("a,b",))),
        # has a value / has none
        ("author", Filter("author", "exists", "")),
        (" author ", Filter("author", "exists", "")),
        ("!author", Filter("author", "!exists", "")),
        ("! author", Filter("author", "!exists", "")),
        ("page=null", Filter("page", "=", "null")),
    ],
)
def test_a_filter_reads_as(text, expected):
    assert parse_filter(text) == expected


@pytest.mark.parametrize(
    "text, hint",
    [
        ("author=", 'author=""'),  # "$NAME" unset: refused, never a filter for the empty value
        ("author!=", 'author!=""'),
        ("author~", 'author~""'),
        ('title="say "hi""', "doubled"),  # a lone quote inside a quoted value
        ('author="Priya', "doubled"),  # a quote that opens a value and never closes
        ('author="Priya" Raman', "doubled"),
        ('author in "a"b,c', "doubled"),
        ('author in "a,b', "doubled"),
        ("!author=Bob", "key=value"),
        ("!!author", "key=value"),
        ("author name", "key=value"),
    ],
)
def test_a_malformed_filter_says_how_to_write_it(text, hint):
    with pytest.raises(UsageError) as e:
        parse_filter(text)
    assert hint in (e.value.hint or ""), (text, e.value.message, e.value.hint)


@pytest.mark.parametrize("text", ["1st=x", "1st", "!9lives", "a" * 65 + "=x", "título=x", "-x>=1"])
def test_a_key_refused_says_what_a_key_is(text):
    """``-f 1st=x`` was refused with the hint "keys are letters, digits, _ . -", which ``1st`` is:
    a key also starts with a letter or ``_`` and holds 64 characters at most, and the hint says so."""
    with pytest.raises(UsageError) as e:
        parse_filter(text)
    assert e.value.message.startswith("invalid filter key"), e.value.message
    assert "starts with a letter or _" in (e.value.hint or "") and "64" in (e.value.hint or ""), e.value.hint


@pytest.mark.parametrize(
    "text, meant",
    [
        ("title==Refunds", "="),  # read as title = "=Refunds": no hit, no word why
        ("title<>Refunds", "!="),  # read as title < "> Refunds", compared as text
        ("year=>2024", ">="),
        ("year=<2024", "<="),
        ("year>=>2024", ">="),
        ("title!==Refunds", "!="),
        ("title <> Refunds", "!="),
    ],
)
def test_an_operator_of_another_language_is_a_usage_error_not_a_value(text, meant):
    with pytest.raises(UsageError) as e:
        parse_filter(text)
    assert "quote" in (e.value.hint or "") and meant in (e.value.hint or ""), (e.value.message, e.value.hint)


@pytest.mark.parametrize(
    "text, expected",
    [
        ('title="=Refunds"', Filter("title", "=", "=Refunds")),  # quoted, a value may begin with one
        ("title='<> x'", Filter("title", "=", "<> x")),
        ('expr in "=a",b', Filter("expr", "in", ("=a", "b"))),
        ("title=a=b", Filter("title", "=", "a=b")),  # inside a value, as before
    ],
)
def test_a_value_that_begins_with_an_operator_character_is_written_quoted(text, expected):
    assert parse_filter(text) == expected
    assert parse_filter(str(expected)) == expected


def test_str_of_a_filter_is_how_it_is_written():
    assert str(parse_filter('author="Priya Raman"')) == "author=Priya Raman"
    assert str(parse_filter('author=""')) == 'author=""'
    assert str(parse_filter('author in "Raman, Priya",Bob')) == 'author in "Raman, Priya",Bob'
    assert str(parse_filter("!author")) == "!author"
    assert str(parse_filter("author")) == "author"


# No newline (a filter is one line) and no NUL or lone surrogate (check_text refuses them).
_TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\x00"), max_size=20)


@given(_TEXT, st.sampled_from(["=", "!=", "~"]))
def test_a_quoted_value_reads_back_as_itself(value, op):
    assert parse_filter(f"key{op}{quote_value(value)}").value == value


@given(st.lists(_TEXT, min_size=1, max_size=4))
def test_quoted_items_of_an_in_list_read_back_as_themselves(items):
    assert parse_filter("key in " + ",".join(quote_value(v, in_list=True) for v in items)).value == tuple(items)


@given(_TEXT, st.sampled_from(["=", "!=", "~", "in"]))
def test_a_filter_written_by_str_reads_back_as_the_same_filter(value, op):
    f = Filter("k.e-y_1", op, (value, value) if op == "in" else value)
    assert parse_filter(str(f)) == f
