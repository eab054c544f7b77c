"""Evaluate expression trees with variables and a table of functions."""

import math

from exprcalc.ast import Binary, Call, Num, Unary, Var
from exprcalc.errors import EvalError
from exprcalc.parser import parse

CONSTANTS = {"pi": math.pi, "e": math.e}


def _round(x, ndigits=0):
    return float(round(x, int(ndigits)))


FUNCTIONS = {
    "abs": (abs, 1, 1),
    "min": (min, 1, None),
    "max": (max, 1, None),
    "sqrt": (math.sqrt, 1, 1),
    "round": (_round, 1, 2),
    "floor": (math.floor, 1, 1),
    "ceil": (math.ceil, 1, 1),
}


class Evaluator:
    def __init__(self, variables=None, functions=None):
        self.variables = {**CONSTANTS, **(variables or {})}
        self.functions = {**FUNCTIONS, **(functions or {})}

    def evaluate(self, text):
        return float(self.visit(parse(text)))

    def visit(self, node):
        if isinstance(node, Num):
            return node.value
        if isinstance(node, Var):
            if node.name not in self.variables:
                raise EvalError(f"unknown variable {node.name!r}")
            return self.variables[node.name]
        if isinstance(node, Unary):
            value = self.visit(node.operand)
            return -value if node.op == "-" else value
        if isinstance(node, Binary):
            return self.binary(node.op, self.visit(node.left), self.visit(node.right))
        if isinstance(node, Call):
            return self.call(node.name, [self.visit(arg) for arg in node.args])
        raise EvalError(f"cannot evaluate {node!r}")

    def binary(self, op, left, right):
        if op == "+":
            return left + right
        if op == "-":
            return left - right
        if op == "*":
            return left * right
        if op in "/%":
            if right == 0:
                raise EvalError("division by zero")
            return left / right if op == "/" else math.fmod(left, right)
        if op == "^":
            try:
                return math.pow(left, right)
            except (OverflowError, ValueError) as e:
                raise EvalError(f"{left} ^ {right}: {e}") from None
        raise EvalError(f"unknown operator {op!r}")

    def call(self, name, args):
        if name not in self.functions:
            raise EvalError(f"unknown function {name!r}")
        func, lo, hi = self.functions[name]
        if len(args) < lo or (hi is not None and len(args) > hi):
            expected = str(lo) if lo == hi else f"{lo}..{hi if hi is not None else 'n'}"
            raise EvalError(f"{name}() takes {expected} argument(s), got {len(args)}")
        try:
            return func(*args)
        except ValueError as e:
            raise EvalError(f"{name}(): {e}") from None


def evaluate(text, variables=None):
    """Evaluate `text` with optional variables; always returns a float."""
    return Evaluator(variables).evaluate(text)
