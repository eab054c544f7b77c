"""Turn an expression string into tokens."""

import re
from dataclasses import dataclass

from exprcalc.errors import TokenizeError

NUMBER, NAME, OP, LPAREN, RPAREN, COMMA, END = "NUMBER", "NAME", "OP", "(", ")", ",", "END"

_NUMBER = re.compile(r"(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_NAME = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")
_OPERATORS = "+-*/%^"


@dataclass(frozen=True)
class Token:
    kind: str
    text: str
    pos: int

    @property
    def value(self):
        return float(self.text) if self.kind == NUMBER else self.text


def tokenize(text):
    """Tokens of `text`, ending with an END token. Whitespace separates tokens and is otherwise ignored."""
    tokens = []
    pos = 0
    while pos < len(text):
        ch = text[pos]
        if ch.isspace():
            pos += 1
            continue
        match = _NUMBER.match(text, pos)
        if match:
            tokens.append(Token(NUMBER, match.group(), pos))
            pos = match.end()
            continue
        match = _NAME.match(text, pos)
        if match:
            tokens.append(Token(NAME, match.group(), pos))
            pos = match.end()
            continue
        if ch in _OPERATORS:
            tokens.append(Token(OP, ch, pos))
        elif ch == "(":
            tokens.append(Token(LPAREN, ch, pos))
        elif ch == ")":
            tokens.append(Token(RPAREN, ch, pos))
        elif ch == ",":
            tokens.append(Token(COMMA, ch, pos))
        else:
            raise TokenizeError(text, pos)
        pos += 1
    tokens.append(Token(END, "", len(text)))
    return tokens
