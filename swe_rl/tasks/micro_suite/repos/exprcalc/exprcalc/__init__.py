"""exprcalc: safe arithmetic expression evaluation."""

from exprcalc.errors import CalcError, EvalError, ParseError, TokenizeError
from exprcalc.evaluator import Evaluator, evaluate
from exprcalc.parser import parse
from exprcalc.tokenizer import tokenize

__version__ = "0.9.1"

__all__ = ["CalcError", "EvalError", "Evaluator", "ParseError", "TokenizeError", "evaluate", "parse", "tokenize"]
