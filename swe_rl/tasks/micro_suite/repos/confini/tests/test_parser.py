import pytest

from confini import Config, DuplicateSectionError, ParseError
from confini.parser import parse, strip_inline_comment, unquote


def test_sections_in_order(sample):
    assert Config.from_string(sample).sections() == ["server", "client"]


def test_keys_are_lowercased_values_keep_case(sample):
    sections, _ = parse(sample)
    assert sections["server"]["host"] == "example.org"


def test_colon_separator(sample):
    assert Config.from_string(sample).get("client", "retries") == "3"


def test_inline_comment_removed(sample):
    assert Config.from_string(sample).get("server", "url", raw=True) == "http://${host}:${port}/"


def test_inline_comment_marker_inside_quotes_is_kept():
    assert strip_inline_comment('"a ; b" ; comment') == '"a ; b"'
    assert strip_inline_comment("'x # y'") == "'x # y'"


def test_quoted_value_keeps_semicolon(sample):
    assert Config.from_string(sample).get("server", "motd") == "Open 9-17 ; closed on Sundays"


def test_marker_without_space_is_not_a_comment():
    assert strip_inline_comment("http://host/#anchor") == "http://host/#anchor"


def test_unquote():
    assert unquote('"a b"') == "a b"
    assert unquote("'a'") == "a"
    assert unquote("\"a'") == "\"a'"


def test_continuation_lines(sample):
    raw = Config.from_string(sample).get("client", "mirrors")
    assert raw == "eu.example.org, us.example.org\nasia.example.org"


def test_duplicate_section():
    with pytest.raises(DuplicateSectionError):
        parse("[a]\nx=1\n[a]\ny=2\n")


def test_option_outside_section():
    with pytest.raises(ParseError, match="line 1"):
        parse("x = 1\n")


def test_garbage_line():
    with pytest.raises(ParseError, match="line 2"):
        parse("[a]\nthis is not an option\n")
