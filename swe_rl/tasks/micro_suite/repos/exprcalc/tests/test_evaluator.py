import math

import pytest

from exprcalc import EvalError, Evaluator, evaluate


def test_arithmetic():
    assert evaluate("2 * (3 + 4) ^ 2") == 98.0
    assert evaluate("7 % 4") == 3.0
    assert evaluate("10 / 4") == 2.5


def test_power_chain():
    assert evaluate("2 ^ 3 ^ 2") == 512.0


def test_unary_minus_and_power():
    assert evaluate("-2 ^ 2") == -4.0
    assert evaluate("2 * -3") == -6.0


def test_variables_and_constants():
    assert evaluate("a * b", {"a": 3, "b": 4}) == 12.0
    assert evaluate("pi") == pytest.approx(math.pi)


def test_scientific_notation_values():
    assert evaluate("1.5e-3 * 2") == pytest.approx(0.003)


def test_functions():
    assert evaluate("max(a, b) / 2", {"a": 3, "b": 10}) == 5.0
    assert evaluate("min(4, 2, 8)") == 2.0
    assert evaluate("round(2.567, 2)") == 2.57
    assert evaluate("sqrt(16) + abs(-1)") == 5.0


def test_unknown_names():
    with pytest.raises(EvalError, match="unknown variable"):
        evaluate("x + 1")
    with pytest.raises(EvalError, match="unknown function"):
        evaluate("nope(1)")


def test_wrong_arity():
    with pytest.raises(EvalError, match="takes 1 argument"):
        evaluate("sqrt(1, 2)")


def test_division_by_zero():
    with pytest.raises(EvalError, match="division by zero"):
        evaluate("1 / 0")
    with pytest.raises(EvalError, match="division by zero"):
        evaluate("1 % 0")


def test_domain_errors_are_eval_errors():
    with pytest.raises(EvalError):
        evaluate("sqrt(-1)")


def test_custom_functions():
    ev = Evaluator(functions={"double": (lambda x: 2 * x, 1, 1)})
    assert ev.evaluate("double(21)") == 42.0
