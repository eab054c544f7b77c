"""Exceptions raised by exprcalc."""


class CalcError(Exception):
    """Base class of every exprcalc error."""


class TokenizeError(CalcError):
    def __init__(self, text, pos):
        super().__init__(f"unexpected character {text[pos]!r} at position {pos}")
        self.pos = pos


class ParseError(CalcError):
    pass


class EvalError(CalcError):
    pass
