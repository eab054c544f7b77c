import pytest

from textkit import indent, truncate, wrap


def test_wrap_basic():
    assert wrap("the quick brown fox jumps", width=10) == ["the quick", "brown fox", "jumps"]


def test_wrap_line_of_exact_width_is_kept():
    assert wrap("abcde fghij", width=11) == ["abcde fghij"]


def test_wrap_long_word_stays_whole():
    assert wrap("a supercalifragilistic word", width=5) == ["a", "supercalifragilistic", "word"]


def test_wrap_keeps_paragraphs():
    assert wrap("one two\n\nthree", width=20) == ["one two", "", "three"]


def test_wrap_rejects_zero_width():
    with pytest.raises(ValueError):
        wrap("x", width=0)


def test_truncate_short_text_untouched():
    assert truncate("short", 10) == "short"


def test_truncate_exact_length_untouched():
    assert truncate("exactly10!", 10) == "exactly10!"


def test_truncate_adds_suffix_within_length():
    out = truncate("The quick brown fox", 10)
    assert out == "The qui..."
    assert len(out) == 10


def test_truncate_custom_suffix():
    assert truncate("abcdefghij", 6, suffix="~") == "abcde~"


def test_truncate_suffix_longer_than_length():
    assert truncate("abcdefghij", 2) == ".."


def test_indent():
    assert indent("a\n\nb\n") == "    a\n\n    b\n"
    assert indent("a\n\nb", prefix="> ", skip_blank=False) == "> a\n> \n> b"
