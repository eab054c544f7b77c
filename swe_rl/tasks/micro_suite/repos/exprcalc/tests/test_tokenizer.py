import pytest

from exprcalc import TokenizeError, tokenize


def kinds(text):
    return [(t.kind, t.text) for t in tokenize(text)][:-1]


def test_simple():
    assert kinds("1 + x") == [("NUMBER", "1"), ("OP", "+"), ("NAME", "x")]


def test_decimal_numbers():
    assert kinds("3.25 .5 7.") == [("NUMBER", "3.25"), ("NUMBER", ".5"), ("NUMBER", "7.")]


def test_scientific_notation():
    assert kinds("1.5e-3") == [("NUMBER", "1.5e-3")]
    assert kinds("2E10") == [("NUMBER", "2E10")]


def test_name_after_number_is_separate():
    assert kinds("2x") == [("NUMBER", "2"), ("NAME", "x")]


def test_end_token():
    assert tokenize("")[-1].kind == "END"


def test_positions():
    assert [t.pos for t in tokenize("a + 10")] == [0, 2, 4, 6]


def test_bad_character():
    with pytest.raises(TokenizeError, match="position 2"):
        tokenize("1 $ 2")
