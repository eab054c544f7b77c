"""The probe's own assertion observer (issue 45): the selected test functions' plain `assert L op R` seen operand
by operand under every runner (sympy's bin/test, pytest 3.x-9.x), with whether the test itself wrote each side.
Shipped beside the observers as `swe_rl_ta_<nonce>.py`; runs on the image's Python (3.6+), standard library only.

- `Rewriter`: the test file compiled by the probe itself, each single comparison `assert L op R` turned into
  `assert <observer>(L, R, (op, written L, written R, line))`: L, then R, then `L op R` are evaluated exactly as
  the assert would, the assert then takes the truth of the same result; the observer shows the operands to the
  value checks in between. `swap_code` puts the rewritten code into the selected test functions (in place:
  decorators and closures keep their function objects).
- `Written`: whether the test wrote a side, decided from the test's own code, never from the value's class: a
  literal, a name the test binds only to such (locally or at module level), a name imported from outside the
  repository or from an untouched test file (`mock.ANY`), a class the test module defines, and calls, attributes,
  items and arithmetic of those. A function's argument (a fixture), a call of a repository function or of a
  function of the test module, a name imported from the repository: code under test produced it.
"""

import ast
import builtins
import contextlib
import os
import sys
import types

_OPS = {
    "Eq": "==", "NotEq": "!=", "Lt": "<", "LtE": "<=", "Gt": ">", "GtE": ">=",
    "In": "in", "NotIn": "not in", "Is": "is", "IsNot": "is not",
}  # fmt: skip
_LITERALS = ("Constant", "Num", "Str", "Bytes", "NameConstant", "Ellipsis", "JoinedStr")
_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_TESTISH = ("tests", "testing", "test")


def apply(op, left, right):
    """`left op right` as the assert statement evaluates it."""
    import operator

    if op == "in":
        return left in right
    if op == "not in":
        return left not in right
    if op == "is":
        return left is right
    if op == "is not":
        return left is not right
    fns = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt}
    return fns.get(op, operator.ge)(left, right)


def _const(value):
    """An AST node for a constant (ast.Constant's spelling differs between 3.6 and 3.8+)."""
    return ast.parse(repr(value), mode="eval").body


def is_test_file(rel):
    """A repository path of the test suite's own code (test modules, conftest, the tests/testing folders)."""
    base = os.path.basename(rel)
    parts = rel.replace(os.sep, "/").split("/")[:-1]
    return (
        base.startswith("test_")
        or base.endswith("_test.py")
        or base == "conftest.py"
        or any(p in _TESTISH for p in parts)
    )


def _bound_in(body):
    """name -> the statements binding it at this level (not inside nested functions or classes)."""
    out = {}  # type: dict
    stack = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.setdefault(node.name, []).append(node)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                name = alias.asname or alias.name.split(".")[0]
                out.setdefault(name, []).append((node, alias))
            continue
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    out.setdefault(target.id, []).append(node.value)
                else:  # unpacking: the values are not the test's to read one by one
                    for n in ast.walk(target):
                        if isinstance(n, ast.Name):
                            out.setdefault(n.id, []).append(None)
            continue
        for field in ("target", "targets", "optional_vars", "name"):  # for/with/augassign/except/annassign
            val = getattr(node, field, None)
            for n in ast.walk(val) if isinstance(val, ast.AST) else ():
                if isinstance(n, ast.Name):
                    out.setdefault(n.id, []).append(None)
            if isinstance(val, str) and isinstance(node, ast.ExceptHandler):
                out.setdefault(val, []).append(None)
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.stmt, ast.ExceptHandler)):
                stack.append(child)
            elif not isinstance(child, _FUNCS):
                for n in ast.walk(child):  # walrus, comprehension targets
                    bound = getattr(n, "target", None) if type(n).__name__ == "NamedExpr" else None
                    if isinstance(bound, ast.Name):
                        out.setdefault(bound.id, []).append(None)
    return out


class _Param:
    """An argument a `parametrize` decorator of the test gives its values (the values' expression)."""

    def __init__(self, values):
        self.values = values


def _parametrized(func):
    """argument name -> _Param for the arguments a `@pytest.mark.parametrize("a, b", [...])` of func names."""
    out = {}  # type: dict
    for deco in getattr(func, "decorator_list", []):
        target = deco.func if isinstance(deco, ast.Call) else None
        if not (isinstance(target, ast.Attribute) and target.attr == "parametrize" and len(deco.args) >= 2):
            continue
        names = deco.args[0]
        if _text(names) is not None:
            listed = [n.strip() for n in _text(names).split(",")]
        elif isinstance(names, (ast.List, ast.Tuple)):
            listed = [_text(e) for e in names.elts]
        else:
            continue
        out.update((n, _Param(deco.args[1])) for n in listed if n)
    return out


def _text(node):
    """A string constant's text (ast.Str before Python 3.8), else None."""
    kind = type(node).__name__
    value = (
        getattr(node, "value", None)
        if kind == "Constant"
        else getattr(node, "s", None)
        if kind == "Str"
        else None
    )
    return value if isinstance(value, str) else None


class Written:
    """Whether the test wrote an expression of its own code (see the module's docstring)."""

    def __init__(self, tree, module_globals, scope):
        self.module = _bound_in(tree.body)
        self.globals = module_globals or {}
        self.scope = scope
        self._locals = {}

    def _local(self, func):
        key = id(func)
        if key not in self._locals:
            body = func.body if isinstance(func.body, list) else [ast.Expr(func.body)]
            bound = _bound_in(body)
            args = func.args
            for a in [
                *getattr(args, "posonlyargs", []),
                *args.args,
                *args.kwonlyargs,
                args.vararg,
                args.kwarg,
            ]:
                if a is not None:
                    bound.setdefault(a.arg, []).append(_parametrized(func).get(a.arg))
            self._locals[key] = (func, bound)
        return self._locals[key][1]

    def expr(self, node, funcs=(), depth=0):
        if depth > 20 or node is None:
            return False
        kind = type(node).__name__
        sub = lambda n: self.expr(n, funcs, depth + 1)  # noqa: E731
        if kind in _LITERALS:
            return True
        if kind in ("List", "Tuple", "Set"):
            return all(sub(e) for e in node.elts)
        if kind == "Dict":
            return all(k is not None and sub(k) for k in node.keys) and all(sub(v) for v in node.values)
        if kind == "UnaryOp":
            return sub(node.operand)
        if kind == "BinOp":
            return sub(node.left) and sub(node.right)
        if kind in ("Attribute", "Index"):
            return sub(node.value)
        if kind == "Subscript":
            return sub(node.value) and sub(node.slice)
        if kind == "Slice":
            return all(p is None or sub(p) for p in (node.lower, node.upper, node.step))
        if kind == "Call":
            args = [*node.args, *[k.value for k in node.keywords]]
            if any(type(a).__name__ == "Starred" for a in node.args) or any(
                k.arg is None for k in node.keywords
            ):
                return False
            return self._callee(node.func, funcs, depth) and all(sub(a) for a in args)
        if kind == "Name":
            return self.name(node.id, funcs, depth)
        return False

    def _callee(self, node, funcs, depth):
        """A call's function: one the test may call and still have written the result (not its own functions,
        which may hand back what the repository produced)."""
        if isinstance(node, ast.Name) and not any(node.id in self._local(f) for f in funcs):
            defs = self.module.get(node.id, [])
            if any(isinstance(d, _FUNCS[:2]) for d in defs):
                return False
        return self.expr(node, funcs, depth + 1)

    def name(self, name, funcs, depth):
        for i, func in enumerate(funcs):  # innermost first
            bound = self._local(func).get(name)
            if bound:
                return all(self._binding(b, funcs[i:], depth) for b in bound)
        bound = self.module.get(name)
        if bound:
            return all(self._binding(b, (), depth) for b in bound)
        return name in vars(builtins)

    def _binding(self, b, funcs, depth):
        if b is None or isinstance(b, _FUNCS[:2]):
            return False
        if isinstance(b, _Param):  # decorators run in the scope around the function
            return self.expr(b.values, funcs[1:], depth + 1)
        if isinstance(b, ast.ClassDef):
            return True
        if isinstance(b, tuple):
            return self._import(*b)
        return self.expr(b, funcs, depth + 1)

    def _import(self, node, alias):
        if isinstance(node, ast.Import):
            return self._module_ok(alias.name.split(".")[0] if not alias.asname else alias.name)
        mod = node.module or ""
        if node.level:
            pkg = (self.globals.get("__package__") or "").split(".")
            pkg = pkg[: len(pkg) - node.level + 1] if node.level > 1 else pkg
            mod = ".".join([p for p in pkg if p] + ([mod] if mod else []))
        sub = f"{mod}.{alias.name}"
        return self._module_ok(sub if sub in sys.modules else mod)

    def _module_ok(self, name):
        """A module the test may take expected values from: outside the repository, or an untouched test file."""
        mod = sys.modules.get(name)
        if mod is None:
            return False
        path = getattr(mod, "__file__", None)
        if not path:
            return True  # a builtin module
        rel = self.scope.rel(path)
        return rel is None or (rel not in self.scope.touched and is_test_file(rel))


class Rewriter(ast.NodeTransformer):
    """Single comparisons in assert statements turned into observed calls (see the module's docstring)."""

    def __init__(self, observer_name, written):
        self.name, self.written, self.funcs = observer_name, written, []

    def _scoped(self, node):
        self.funcs.insert(0, node)
        try:
            return self.generic_visit(node)
        finally:
            self.funcs.pop(0)

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _scoped

    def visit_Assert(self, node):
        self.generic_visit(node)
        test = node.test
        call = test.operand if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) else test
        if isinstance(
            call, ast.Call
        ):  # a bare truth test (`assert isinstance(x, T)`): its arguments observed
            call.args = [self._arg(a, node.lineno) for a in call.args]
            return ast.fix_missing_locations(node)
        if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and type(test.ops[0]).__name__ in _OPS):
            return node
        left, right = test.left, test.comparators[0]
        funcs = tuple(self.funcs)
        info = (_OPS[type(test.ops[0]).__name__], self.written.expr(left, funcs), self.written.expr(right, funcs),
                node.lineno)  # fmt: skip
        call = ast.Call(
            func=ast.Name(id=self.name, ctx=ast.Load()), args=[left, right, _const(info)], keywords=[]
        )
        node.test = ast.copy_location(call, test)
        return ast.fix_missing_locations(node)

    def _arg(self, arg, line):
        """`observer(arg, None, ("arg", written, True, line))`: the argument's value shown to the value checks."""
        if type(arg).__name__ == "Starred":
            return arg
        info = ("arg", self.written.expr(arg, tuple(self.funcs)), True, line)
        call = ast.Call(func=ast.Name(id=self.name, ctx=ast.Load()), args=[arg, _const(None), _const(info)],
                        keywords=[])  # fmt: skip
        return ast.copy_location(call, arg)


def observed_module(path, module_globals, scope, observer_name):
    """The code object of `path` compiled with every single-comparison assert observed (None: unreadable)."""
    with open(path, "rb") as f:
        source = f.read()
    tree = ast.parse(source, path)
    tree = Rewriter(observer_name, Written(tree, module_globals, scope)).visit(tree)
    return compile(tree, path, "exec", dont_inherit=True)


def _codes(code):
    stack, out = [code], {}  # type: list, dict
    while stack:
        c = stack.pop()
        out.setdefault((c.co_name, c.co_firstlineno), c)
        stack.extend(x for x in c.co_consts if isinstance(x, types.CodeType))
    return out


def functions_of(func, path):
    """The function objects behind a test (bound methods, decorators' `__wrapped__`) whose code is from path."""
    out, seen = [], 0
    while func is not None and seen < 20:
        seen += 1
        inner = getattr(func, "__func__", func)
        if isinstance(inner, types.FunctionType) and inner.__code__.co_filename == path:
            out.append(inner)
        func = getattr(inner, "__wrapped__", None)
    return out


def swap_code(funcs, module_code):
    """Give each function the observed code compiled from its file (same name and first line, same free
    variables); the functions swapped."""
    codes = _codes(module_code)
    done = []
    for f in funcs:
        new = codes.get((f.__code__.co_name, f.__code__.co_firstlineno))
        if new is not None and new.co_freevars == f.__code__.co_freevars and new is not f.__code__:
            f.__code__ = new
            done.append(f)
    return done


def observer_replaced(installed):
    """[(module globals, name, observer)] installed -> the names no longer holding their observer (code under
    test that found the observer by name and put a quieter one in its place)."""
    return sorted({name for glob, name, obs in installed if glob.get(name) is not obs})


def make_observer(check):
    """The function the rewritten asserts call: evaluates the comparison, shows it to `check(op, left, right,
    written_left, written_right, line)` (whose errors are its own), and returns the comparison's result."""

    def observe(left, right, info):
        if info[0] == "arg":  # an argument of a bare truth test: shown, handed back unchanged
            with contextlib.suppress(Exception):
                check(*info[:1], left, right, *info[1:])
            return left
        result = apply(info[0], left, right)
        with contextlib.suppress(Exception):  # the observer's failure never changes the test
            check(info[0], left, right, info[1], info[2], info[3])
        return result

    return observe


def written_at_call(frame, method, nargs, scope):
    """For an assert method's call (`self.assertEqual(a, b)`) made from `frame`: whether the test wrote each of
    its first `nargs` arguments, from the calling file's code; None when the call cannot be found."""
    code = frame.f_code
    rel = scope.rel(code.co_filename)
    # the runner's own helpers (django/test/'s assertQuerysetEqual) pass on what a test handed them: older rule
    if rel is None or not is_test_file(rel) or rel in scope.touched or scope.is_runner(rel):
        return None
    try:
        with open(code.co_filename, "rb") as f:
            tree = ast.parse(f.read(), code.co_filename)
    except (OSError, SyntaxError, ValueError):
        return None
    line = frame.f_lineno
    found = []
    written = Written(tree, frame.f_globals, scope)

    def visit(node, funcs):
        for child in ast.iter_child_nodes(node):
            inner = (child, *funcs) if isinstance(child, _FUNCS) else funcs
            if (
                isinstance(child, ast.Call)
                and isinstance(child.func, ast.Attribute)
                and child.func.attr == method
                and child.lineno <= line <= getattr(child, "end_lineno", child.lineno)
                and len(child.args) >= nargs
            ):
                found.append([written.expr(a, funcs) for a in child.args[:nargs]])
            visit(child, inner)

    visit(tree, ())
    return found[0] if len(found) == 1 else None
