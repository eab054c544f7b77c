import pytest

from textkit import slugify


def test_basic():
    assert slugify("Hello World") == "hello-world"


def test_accents_are_stripped():
    assert slugify("Héllo, Wörld!") == "hello-world"


def test_runs_of_punctuation_collapse():
    assert slugify("a -- b ... c") == "a-b-c"


def test_custom_separator():
    assert slugify("Hello World", sep="_") == "hello_world"


def test_keep_case():
    assert slugify("Hello World", lowercase=False) == "Hello-World"


def test_leading_and_trailing_junk():
    assert slugify("  --Hello--  ") == "hello"


def test_max_length_cuts():
    assert slugify("abcdefghij", max_length=4) == "abcd"


def test_max_length_never_ends_with_separator():
    assert slugify("hello world again", max_length=6) == "hello"
    assert slugify("hello world again", max_length=12) == "hello-world"


def test_max_length_with_custom_separator():
    assert slugify("one two three", sep="__", max_length=5) == "one"


def test_rejects_non_string():
    with pytest.raises(TypeError):
        slugify(42)


def test_rejects_bad_max_length():
    with pytest.raises(ValueError):
        slugify("abc", max_length=0)
