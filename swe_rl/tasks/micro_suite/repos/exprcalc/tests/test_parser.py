import pytest

from exprcalc import ParseError, parse
from exprcalc.ast import Binary, Call, Num, Unary, Var


def test_precedence():
    assert parse("1 + 2 * 3") == Binary("+", Num(1.0), Binary("*", Num(2.0), Num(3.0)))


def test_left_associative_subtraction():
    assert parse("8 - 3 - 2") == Binary("-", Binary("-", Num(8.0), Num(3.0)), Num(2.0))


def test_power_is_right_associative():
    assert parse("2 ^ 3 ^ 2") == Binary("^", Num(2.0), Binary("^", Num(3.0), Num(2.0)))


def test_unary_minus_binds_looser_than_power():
    assert parse("-2 ^ 2") == Unary("-", Binary("^", Num(2.0), Num(2.0)))


def test_call_with_arguments():
    assert parse("max(a, 2)") == Call("max", (Var("a"), Num(2.0)))
    assert parse("f()") == Call("f", ())


def test_parentheses():
    assert parse("(1 + 2) * 3") == Binary("*", Binary("+", Num(1.0), Num(2.0)), Num(3.0))


@pytest.mark.parametrize(
    "bad",
    ["1 +", "(1 + 2", "1 2", "max(1,", ")"],
    ids=["dangling-operator", "unclosed-paren", "two-numbers", "unclosed-call", "stray-paren"],
)
def test_errors(bad):
    with pytest.raises(ParseError):
        parse(bad)
