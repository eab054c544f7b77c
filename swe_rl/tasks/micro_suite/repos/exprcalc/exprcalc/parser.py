"""Pratt (precedence-climbing) parser: tokens -> expression tree."""

from exprcalc.ast import Binary, Call, Num, Unary, Var
from exprcalc.errors import ParseError
from exprcalc.tokenizer import COMMA, END, LPAREN, NAME, NUMBER, OP, RPAREN, tokenize

# binding powers: higher binds tighter
_BINARY = {"+": 10, "-": 10, "*": 20, "/": 20, "%": 20, "^": 40}
_RIGHT_ASSOC = {"^"}
_UNARY_POWER = 30  # between * and ^: -2^2 == -(2^2), 2*-3 is fine


class _Parser:
    def __init__(self, tokens):
        self.tokens = tokens
        self.i = 0

    def peek(self):
        return self.tokens[self.i]

    def next(self):
        tok = self.tokens[self.i]
        self.i += 1
        return tok

    def expect(self, kind):
        tok = self.next()
        if tok.kind != kind:
            shown = tok.text or "end of input"
            raise ParseError(f"expected {kind!r} at position {tok.pos}, got {shown!r}")
        return tok

    def expression(self, min_power=0):
        left = self.prefix()
        while True:
            tok = self.peek()
            if tok.kind != OP or tok.text not in _BINARY:
                return left
            power = _BINARY[tok.text]
            if power < min_power or (power == min_power and tok.text not in _RIGHT_ASSOC):
                return left
            self.next()
            next_min = power if tok.text in _RIGHT_ASSOC else power + 1
            left = Binary(tok.text, left, self.expression(next_min))

    def prefix(self):
        tok = self.next()
        if tok.kind == NUMBER:
            return Num(tok.value)
        if tok.kind == NAME:
            if self.peek().kind == LPAREN:
                self.next()
                return Call(tok.text, self.arguments())
            return Var(tok.text)
        if tok.kind == OP and tok.text in "+-":
            return Unary(tok.text, self.expression(_UNARY_POWER))
        if tok.kind == LPAREN:
            inner = self.expression()
            self.expect(RPAREN)
            return inner
        shown = tok.text or "end of input"
        raise ParseError(f"unexpected {shown!r} at position {tok.pos}")

    def arguments(self):
        args = []
        if self.peek().kind == RPAREN:
            self.next()
            return tuple(args)
        while True:
            args.append(self.expression())
            tok = self.next()
            if tok.kind == RPAREN:
                return tuple(args)
            if tok.kind != COMMA:
                raise ParseError(f"expected ',' or ')' at position {tok.pos}")


def parse(text):
    """Parse `text` into an expression tree; trailing tokens are an error."""
    parser = _Parser(tokenize(text))
    tree = parser.expression()
    tok = parser.peek()
    if tok.kind != END:
        raise ParseError(f"unexpected {tok.text!r} at position {tok.pos}")
    return tree
