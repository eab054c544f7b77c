import pytest

from textkit import levenshtein, similarity


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [("kitten", "sitting", 3), ("flaw", "lawn", 2), ("", "abc", 3), ("abc", "", 3), ("same", "same", 0)],
)
def test_levenshtein(a, b, expected):
    assert levenshtein(a, b) == expected


def test_levenshtein_is_symmetric():
    assert levenshtein("sunday", "saturday") == levenshtein("saturday", "sunday") == 3


def test_similarity_bounds():
    assert similarity("", "") == 1.0
    assert similarity("abc", "abc") == 1.0
    assert similarity("abc", "xyz") == 0.0


def test_similarity_partial():
    assert similarity("kitten", "sitting") == pytest.approx(1 - 3 / 7)
