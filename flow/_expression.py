"""Translation, sandbox check and compilation of condition and task-script text.

Text is translated on tokens (solon-flow/SnEL operators → Python), parsed with :mod:`ast`, checked
against a whitelist and compiled once into a tree of closures, cached per text. The sandbox policy
— operators with size limits, forbidden attribute prefixes/methods/functions, literal size — is
:mod:`simpleeval`'s; only the tree walk is ours, because ``SimpleEval.eval`` keeps per-call state
on the evaluator (names, expression, counters) and costs several times more per evaluation.
Neither :func:`compile` nor :func:`eval` is ever applied to the text.
"""

from __future__ import annotations

import ast
import io
import operator as op
import textwrap
import tokenize
import types
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from typing import Any, Protocol, TypeVar

import simpleeval as se

from flow.context import FlowContext
from flow.errors import ExpressionError

Code = Callable[[Mapping[str, Any]], Any]
"""A compiled expression: reads the context data, returns the value."""


class ScriptContext(Protocol):
    """What a task script needs from its context: the data and ``put``."""

    @property
    def data(self) -> dict[str, Any]: ...

    def put(self, key: str, value: Any) -> Any: ...


Statement = Callable[[ScriptContext], None]
_T = TypeVar("_T")

_NAME_WORDS = {
    "AND": " and ",
    "OR": " or ",
    "NOT": " not ",
    "null": "None",
    "true": "True",
    "false": "False",
}
_DOUBLED = {"&": " and ", "|": " or "}
_MAX_TEXT = se.MAX_STRING_LENGTH
_EXTRA_DISALLOWED = frozenset(
    {"f_globals", "f_locals", "f_builtins", "f_back", "f_code", "gi_code", "cr_code", "ag_code"}
)
_CONTEXT_ATTRS = frozenset(
    {
        "put",
        "put_if_absent",
        "put_all",
        "get",
        "remove",
        "stop",
        "interrupt",
        "is_stopped",
        "instance_id",
        "data",
        "last_node_id",
        "last_record",
    }
)
_MAX_BITS = 100_000
_PRIMITIVES = frozenset({int, float, complex, str, bytes, bool, type(None)})
_IMMUTABLE = (int, float, complex, str, bytes, bool, type(None))
_SIZED = (str, bytes, list, tuple, dict, set, frozenset)
_PADDING = frozenset({"center", "ljust", "rjust", "zfill", "expandtabs"})

FUNCTIONS: Mapping[str, Callable[..., Any]] = types.MappingProxyType(
    {
        "len": len,
        "min": min,
        "max": max,
        "abs": abs,
        "round": round,
        "str": str,
        "int": int,
        "float": float,
        "bool": bool,
    }
)


# -- translation ---------------------------------------------------------------------------
def translate(text: str, *, original: str | None = None) -> str:
    """Rewrite ``&&  ||  !x  AND OR NOT  null true false`` into Python; strings are untouched.

    ``!`` becomes ``~`` (same precedence as Java's ``!``) and the compiler reads ``~`` as logical
    not, which is why a ``~`` written by the user is rejected. Raises :class:`ExpressionError`
    naming ``original`` (default ``text``).
    """
    original = text if original is None else original
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError) as exc:
        raise ExpressionError(f"Incomplete expression: {exc}", expression=original) from None
    edits: list[tuple[tuple[int, int], tuple[int, int], str]] = []
    previous: tokenize.TokenInfo | None = None
    for index, token in enumerate(tokens):
        edit = _replacement(tokens, index, previous, original)
        if edit is not None:
            edits.append((token.start, *edit))
        if token.type not in (tokenize.ERRORTOKEN, tokenize.NL, tokenize.COMMENT):
            previous = token
    return _apply(text, edits)


def _replacement(
    tokens: Sequence[tokenize.TokenInfo],
    index: int,
    previous: tokenize.TokenInfo | None,
    text: str,
) -> tuple[tuple[int, int], str] | None:
    """The end of the replaced span and its new text, for a token that needs translating."""
    token = tokens[index]
    string = token.string
    if token.type == tokenize.NAME:
        after_dot = previous is not None and previous.string == "."
        word = None if after_dot else _NAME_WORDS.get(string)
        return None if word is None else (token.end, word)
    if token.type == tokenize.ERRORTOKEN and string == "!":
        return token.end, "~"
    if token.type == tokenize.OP and string == "~":
        raise ExpressionError("Operator '~' is not supported (use '!' or 'not')", expression=text)
    if token.type == tokenize.OP and string in _DOUBLED:
        follower = tokens[index + 1]
        if follower.string == string and follower.start == token.end:
            return follower.end, _DOUBLED[string]
    return None


def _apply(text: str, edits: list[tuple[tuple[int, int], tuple[int, int], str]]) -> str:
    lines = text.splitlines(keepends=True)
    skip_until: tuple[int, int] = (0, 0)
    kept = []
    for edit in edits:
        if edit[0] >= skip_until:
            kept.append(edit)
            skip_until = edit[1]
    for (row, start), (_, end), replacement in reversed(kept):
        line = lines[row - 1]
        lines[row - 1] = line[:start] + replacement + line[end:]
    return "".join(lines)


# -- parsing -------------------------------------------------------------------------------
def _parse(text: str, mode: str) -> ast.AST:
    if not text.strip():
        raise ExpressionError("Empty expression", expression=text)
    if len(text) > _MAX_TEXT:
        raise ExpressionError(f"Expression longer than {_MAX_TEXT} characters", expression=text)
    source = translate(_unindent(text), original=text).strip()
    if mode == "eval" and "\n" in source:
        source = f"(\n{source}\n)"
    try:
        return ast.parse(source, mode=mode)
    except SyntaxError as exc:
        where = f" at line {exc.lineno} column {exc.offset}" if exc.lineno else ""
        raise ExpressionError(f"Syntax error{where}: {exc.msg}", expression=text) from None
    except (RecursionError, MemoryError, ValueError) as exc:
        raise ExpressionError(f"Unparseable expression: {exc}", expression=text) from None


def _unindent(text: str) -> str:
    """Drop line indentation, which carries no meaning here (there are no blocks)."""
    if '"""' in text or "'''" in text:
        return textwrap.dedent(text)
    return "\n".join(line.lstrip() for line in text.splitlines())


# -- runtime helpers -----------------------------------------------------------------------
def _null_safe(compare: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    def run(left: Any, right: Any) -> Any:
        if left is None or right is None:
            return False
        return compare(left, right)

    return run


def _contains(item: Any, container: Any) -> bool:
    return False if container is None else item in container


def _not_contains(item: Any, container: Any) -> bool:
    return True if container is None else item not in container


def _weight(value: Any, budget: int = se.MAX_STRING_LENGTH) -> int:
    """Items in ``value`` counted through nested containers, stopping once over ``budget``.

    simpleeval bounds ``len``; shared references (``[[0] * n] * n``) need the deep count.
    """
    if isinstance(value, str | bytes):
        return len(value)
    if not isinstance(value, list | tuple | set | frozenset | dict):
        return 1
    total = len(value)
    for item in value.values() if isinstance(value, dict) else value:
        if total > budget:
            break
        if isinstance(item, list | tuple | set | frozenset | dict):
            total += _weight(item, budget - total)
    return total


def _too_long() -> se.IterableTooLong:
    return se.IterableTooLong("Sorry, I will not evaluate something that long.")


def _safe_mult(left: Any, right: Any) -> Any:
    if isinstance(left, int) and isinstance(right, int):
        if left.bit_length() + right.bit_length() > _MAX_BITS:
            raise se.NumberTooHigh(f"Sorry! I don't want to evaluate a {_MAX_BITS}-bit product")
        return left * right
    for count, items in ((left, right), (right, left)):
        is_repeat = isinstance(count, int) and hasattr(items, "__len__")
        if is_repeat and count * _weight(items) > se.MAX_STRING_LENGTH:
            raise _too_long()
    return left * right


def _safe_add(left: Any, right: Any) -> Any:
    sized = hasattr(left, "__len__") and hasattr(right, "__len__")
    if sized and _weight(left) + _weight(right) > se.MAX_STRING_LENGTH:
        raise _too_long()
    return left + right


def _safe_power(base: Any, exponent: Any) -> Any:
    integers = isinstance(base, int) and isinstance(exponent, int) and exponent > 0
    if integers and exponent * max(abs(base).bit_length() - 1, 0) > _MAX_BITS:
        raise se.NumberTooHigh(f"Sorry! I don't want to evaluate {base} ** {exponent}")
    return se.safe_power(base, exponent)


def _safe_mod(left: Any, right: Any) -> Any:
    if isinstance(left, str | bytes):
        raise se.FeatureNotAvailable("String formatting with '%' is not allowed")
    return left % right


_COMPARE: dict[type[ast.cmpop], Callable[[Any, Any], Any]] = {
    ast.Eq: op.eq,
    ast.NotEq: op.ne,
    ast.Lt: _null_safe(op.lt),
    ast.LtE: _null_safe(op.le),
    ast.Gt: _null_safe(op.gt),
    ast.GtE: _null_safe(op.ge),
    ast.In: _contains,
    ast.NotIn: _not_contains,
    ast.Is: op.is_,
    ast.IsNot: op.is_not,
}
_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    kind: se.DEFAULT_OPERATORS[kind]
    for kind in (
        ast.Add,
        ast.Sub,
        ast.Mult,
        ast.Div,
        ast.FloorDiv,
        ast.Pow,
        ast.LShift,
        ast.RShift,
        ast.BitOr,
        ast.BitXor,
        ast.BitAnd,
    )
}
_BINARY.update({ast.Mod: _safe_mod, ast.Mult: _safe_mult, ast.Add: _safe_add, ast.Pow: _safe_power})
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.Not: op.not_,
    ast.Invert: op.not_,
    ast.USub: se.DEFAULT_OPERATORS[ast.USub],
    ast.UAdd: se.DEFAULT_OPERATORS[ast.UAdd],
}


def _check_attr_name(name: str, text: str) -> None:
    if (
        name.startswith(tuple(se.DISALLOW_PREFIXES))
        or name in se.DISALLOW_METHODS
        or name in _EXTRA_DISALLOWED
    ):
        raise ExpressionError(f"Access to attribute {name!r} is not allowed", expression=text)


def _check_value(value: Any) -> Any:
    """Stop modules, classes and simpleeval's forbidden functions from reaching the script."""
    if type(value) in _PRIMITIVES:
        return value
    if isinstance(value, types.ModuleType | type):
        raise se.FeatureNotAvailable("Modules and classes are not available in expressions")
    if callable(value) and _is_forbidden(value):
        raise se.FeatureNotAvailable("This function is forbidden")
    return value


def _is_forbidden(function: Any) -> bool:
    try:
        return function in se.DISALLOW_FUNCTIONS
    except TypeError:
        return False


def _read_attr(obj: Any, name: str) -> Any:
    """Null-safe attribute read: a Mapping gives its key, anything missing gives ``None``."""
    if obj is None:
        return None
    if type(obj) is dict or isinstance(obj, Mapping):
        return obj.get(name)
    _check_receiver(obj, name)
    return _check_value(getattr(obj, name, None))


def _check_receiver(obj: Any, name: str) -> None:
    """Only the context's public surface, and nothing of modules or classes, is reachable."""
    if isinstance(obj, FlowContext):
        if name not in _CONTEXT_ATTRS:
            raise se.FeatureNotAvailable(f"context.{name} is not available in expressions")
        return
    _check_value(obj)


def _check_size(value: Any) -> None:
    if isinstance(value, _SIZED) and len(value) > se.MAX_STRING_LENGTH:
        raise _too_long()


def _check_method_args(obj: Any, name: str, args: Sequence[Any]) -> None:
    """Refuse the str methods whose arguments, not their receiver, set the result size."""
    if not args:
        return
    first = args[0]
    if name == "to_bytes" and isinstance(first, int) and first > se.MAX_STRING_LENGTH:
        raise _too_long()
    if not isinstance(obj, str | bytes):
        return
    if name in _PADDING and isinstance(first, int) and first > se.MAX_STRING_LENGTH:
        raise _too_long()
    if name == "replace" and len(args) >= 2 and isinstance(args[1], str | bytes):
        estimate = len(obj) + (len(obj) + 1) * len(args[1])
        if estimate > se.MAX_STRING_LENGTH:
            raise _too_long()
    if name == "join" and isinstance(first, Sequence) and len(obj) * len(first) > _MAX_TEXT:
        raise _too_long()


def _call_method(obj: Any, name: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
    if obj is None:
        return None
    _check_receiver(obj, name)
    method = getattr(obj, name, None)
    if method is None:
        return _bean_property(obj, name) if not args and not kwargs else None
    _check_value(method)
    _check_arguments(args, kwargs)
    _check_method_args(obj, name, args)
    result = _check_value(method(*args, **kwargs))
    _check_size(result)
    _check_size(obj)
    return result


def _check_arguments(args: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
    """The language has no functions as values; one taken from the data is never called."""
    for value in (*args, *kwargs.values()):
        if callable(value):
            raise se.FeatureNotAvailable("Functions cannot be passed as arguments")


def _bean_property(obj: Any, name: str) -> Any:
    """``x.getAmount()`` / ``x.isDone()`` of Java graphs read ``amount`` / ``done`` (or snake)."""
    for prefix in ("get", "is"):
        rest = name[len(prefix) :]
        if name.startswith(prefix) and rest[:1].isupper():
            camel = rest[0].lower() + rest[1:]
            snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in camel)
            value = _read_attr(obj, camel)
            return value if value is not None or snake == camel else _read_attr(obj, snake)
    return None


def _subscript(container: Any, key: Any) -> Any:
    if container is None:
        return None
    if type(container) is dict or isinstance(container, Mapping):
        return container.get(key)
    return _check_value(container[key])


def _equals(left: Any, right: Any) -> Any:
    return None if left is None else left == right


def truth(value: Any) -> bool:
    """Condition truthiness of the reference: ``None`` → false, a bool → itself, else true."""
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    return True


# -- compilation ---------------------------------------------------------------------------
class _Compiler:
    """Turns a whitelisted AST into closures; anything not handled raises ExpressionError."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.constants: dict[Code, Any] = {}
        self.pure: set[Code] = set()

    def fail(self, message: str) -> ExpressionError:
        return ExpressionError(message, expression=self.text)

    def const(self, value: Any) -> Code:
        def run(data: Mapping[str, Any]) -> Any:
            return value

        self.constants[run] = value
        return run

    def fold(self, code: Code, parts: Sequence[Code]) -> Code:
        """Run data-free arithmetic now, so ``9**9**9`` or ``[0] * 10**9`` fail when checked.

        Only immutable results become constants; a mutable one is rebuilt on every run.
        """
        if not all(part in self.constants or part in self.pure for part in parts):
            return code
        try:
            value = code({})
        except se.InvalidExpression as exc:
            raise self.fail(str(exc)) from None
        except Exception:
            return code
        if isinstance(value, _IMMUTABLE):
            return self.const(value)
        self.pure.add(code)
        return code

    def expr(self, node: ast.expr) -> Code:
        handler = _HANDLERS.get(type(node))
        if handler is None:
            raise self.fail(f"{type(node).__name__} is not allowed in expressions")
        return handler(self, node)

    def constant(self, node: ast.Constant) -> Code:
        value = node.value
        if not isinstance(value, int | float | complex | str | bytes | type(None)):
            raise self.fail(f"Literal {value!r} is not allowed")
        if isinstance(value, str | bytes) and len(value) > se.MAX_STRING_LENGTH:
            raise self.fail("String literal is too long")
        return self.const(value)

    def name(self, node: ast.Name) -> Code:
        key = self.checked_name(node.id)

        def run(data: Mapping[str, Any]) -> Any:
            return data.get(key)

        return run

    def checked_name(self, name: str) -> str:
        if name.startswith("__"):
            raise self.fail(f"Name {name!r} is not allowed")
        return name

    def unary(self, node: ast.UnaryOp) -> Code:
        function = _UNARY.get(type(node.op))
        if function is None:
            raise self.fail(f"Operator {type(node.op).__name__} is not allowed")
        operand = self.expr(node.operand)

        def run(data: Mapping[str, Any]) -> Any:
            return function(operand(data))

        return self.fold(run, [operand])

    def binary(self, node: ast.BinOp) -> Code:
        function = _BINARY.get(type(node.op))
        if function is None:
            raise self.fail(f"Operator {type(node.op).__name__} is not allowed")
        left, right = self.expr(node.left), self.expr(node.right)

        def run(data: Mapping[str, Any]) -> Any:
            return function(left(data), right(data))

        return self.fold(run, [left, right])

    def boolean(self, node: ast.BoolOp) -> Code:
        values = tuple(self.expr(value) for value in node.values)
        if isinstance(node.op, ast.And):
            if len(values) == 2:
                first, second = values

                def run_and2(data: Mapping[str, Any]) -> Any:
                    return first(data) and second(data)

                return run_and2

            def run_and(data: Mapping[str, Any]) -> Any:
                result: Any = True
                for value in values:
                    result = value(data)
                    if not result:
                        return result
                return result

            return run_and

        def run_or(data: Mapping[str, Any]) -> Any:
            result: Any = False
            for value in values:
                result = value(data)
                if result:
                    return result
            return result

        return run_or

    def compare(self, node: ast.Compare) -> Code:
        left = self.expr(node.left)
        pairs = tuple(
            (_COMPARE[type(o)], self.expr(c))
            for o, c in zip(node.ops, node.comparators, strict=True)
        )
        if len(pairs) == 1:
            function, right = pairs[0]
            if right in self.constants:
                fixed = self.constants[right]

                def run_const(data: Mapping[str, Any]) -> Any:
                    return function(left(data), fixed)

                return self.fold(run_const, [left])

            def run_one(data: Mapping[str, Any]) -> Any:
                return function(left(data), right(data))

            return self.fold(run_one, [left, right])

        def run_chain(data: Mapping[str, Any]) -> Any:
            current = left(data)
            for function, code in pairs:
                following = code(data)
                if not function(current, following):
                    return False
                current = following
            return True

        return run_chain

    def if_exp(self, node: ast.IfExp) -> Code:
        test, body, orelse = self.expr(node.test), self.expr(node.body), self.expr(node.orelse)

        def run(data: Mapping[str, Any]) -> Any:
            return body(data) if test(data) else orelse(data)

        return run

    def attribute(self, node: ast.Attribute) -> Code:
        _check_attr_name(node.attr, self.text)
        value, name = self.expr(node.value), node.attr

        def run(data: Mapping[str, Any]) -> Any:
            return _read_attr(value(data), name)

        return run

    def subscript(self, node: ast.Subscript) -> Code:
        value, key = self.expr(node.value), self.expr(node.slice)

        def run(data: Mapping[str, Any]) -> Any:
            return _subscript(value(data), key(data))

        return run

    def slice(self, node: ast.Slice) -> Code:
        none = self.const(None)
        parts = [
            self.expr(p) if p is not None else none for p in (node.lower, node.upper, node.step)
        ]
        lower, upper, step = parts

        def run(data: Mapping[str, Any]) -> Any:
            return slice(lower(data), upper(data), step(data))

        return run

    def sequence(self, node: ast.List | ast.Tuple | ast.Set) -> Code:
        items = tuple(self.expr(item) for item in node.elts)
        build: Callable[[Any], Any] = {ast.List: list, ast.Tuple: tuple, ast.Set: set}[type(node)]

        def run(data: Mapping[str, Any]) -> Any:
            return build([item(data) for item in items])

        return self.fold(run, items)

    def mapping(self, node: ast.Dict) -> Code:
        if any(key is None for key in node.keys):
            raise self.fail("'**' unpacking is not allowed")
        pairs = tuple(
            (self.expr(k), self.expr(v)) for k, v in zip(node.keys, node.values, strict=True) if k
        )

        def run(data: Mapping[str, Any]) -> Any:
            return {key(data): value(data) for key, value in pairs}

        return self.fold(run, [code for pair in pairs for code in pair])

    def call(self, node: ast.Call) -> Code:
        args = tuple(self.expr(arg) for arg in node.args)
        if any(keyword.arg is None for keyword in node.keywords):
            raise self.fail("'**' unpacking is not allowed")
        kwargs = tuple((str(k.arg), self.expr(k.value)) for k in node.keywords)
        func = node.func
        if isinstance(func, ast.Name):
            return self.function_call(func.id, args, kwargs)
        if not isinstance(func, ast.Attribute):
            raise self.fail("Only functions and methods can be called")
        _check_attr_name(func.attr, self.text)
        receiver, name = self.expr(func.value), func.attr
        if name == "equals" and len(args) == 1 and not kwargs:
            other = args[0]

            def run_equals(data: Mapping[str, Any]) -> Any:
                return _equals(receiver(data), other(data))

            return run_equals

        def run_method(data: Mapping[str, Any]) -> Any:
            values = [arg(data) for arg in args]
            named = {key: value(data) for key, value in kwargs}
            return _call_method(receiver(data), name, values, named)

        return run_method

    def function_call(
        self, name: str, args: tuple[Code, ...], kwargs: tuple[tuple[str, Code], ...]
    ) -> Code:
        function = FUNCTIONS.get(name)
        if function is None:
            raise self.fail(f"Function {name!r} is not available")

        def run(data: Mapping[str, Any]) -> Any:
            values = [arg(data) for arg in args]
            named = {key: value(data) for key, value in kwargs}
            _check_arguments(values, named)
            return function(*values, **named)

        return run

    def statement(self, node: ast.stmt) -> Statement:
        if isinstance(node, ast.Expr):
            code = self.expr(node.value)

            def run_expr(ctx: ScriptContext) -> None:
                code(ctx.data)

            return run_expr
        if isinstance(node, ast.Assign):
            targets = tuple(self.target(t) for t in node.targets)
            code = self.expr(node.value)

            def run_assign(ctx: ScriptContext) -> None:
                value = code(ctx.data)
                for target in targets:
                    ctx.put(target, value)

            return run_assign
        if isinstance(node, ast.AugAssign) and type(node.op) in _BINARY:
            return self.aug_assign(node)
        raise self.fail(f"Statement {type(node).__name__} is not allowed in task scripts")

    def aug_assign(self, node: ast.AugAssign) -> Statement:
        target, function = self.target(node.target), _BINARY[type(node.op)]
        code = self.expr(node.value)

        def run(ctx: ScriptContext) -> None:
            ctx.put(target, function(ctx.data.get(target), code(ctx.data)))

        return run

    def target(self, node: ast.expr) -> str:
        if not isinstance(node, ast.Name):
            raise self.fail("Only plain names can be assigned")
        return self.checked_name(node.id)


_HANDLERS: dict[type[ast.expr], Callable[[_Compiler, Any], Code]] = {
    ast.Constant: _Compiler.constant,
    ast.Name: _Compiler.name,
    ast.UnaryOp: _Compiler.unary,
    ast.BinOp: _Compiler.binary,
    ast.BoolOp: _Compiler.boolean,
    ast.Compare: _Compiler.compare,
    ast.IfExp: _Compiler.if_exp,
    ast.Attribute: _Compiler.attribute,
    ast.Subscript: _Compiler.subscript,
    ast.Slice: _Compiler.slice,
    ast.List: _Compiler.sequence,
    ast.Tuple: _Compiler.sequence,
    ast.Set: _Compiler.sequence,
    ast.Dict: _Compiler.mapping,
    ast.Call: _Compiler.call,
}


# -- public entry points -------------------------------------------------------------------
def _guard(text: str, exc: BaseException) -> ExpressionError:
    return ExpressionError(f"Sandbox limit: {exc}", expression=text)


@lru_cache(maxsize=4096)
def compile_condition(text: str) -> Callable[[Mapping[str, Any]], bool]:
    """Compile a condition into ``(data) -> bool``; cached per text. Raises ExpressionError."""
    tree = _parse(text, "eval")
    assert isinstance(tree, ast.Expression)
    root = _compile(text, lambda compiler: compiler.expr(tree.body))

    def condition(data: Mapping[str, Any]) -> bool:
        try:
            return truth(root(data))
        except (se.InvalidExpression, RecursionError) as exc:
            raise _guard(text, exc) from None

    return condition


@lru_cache(maxsize=4096)
def compile_script(text: str) -> Callable[[ScriptContext], None]:
    """Compile a task script into ``(ctx) -> None``; cached per text. Raises ExpressionError."""
    tree = _parse(text, "exec")
    assert isinstance(tree, ast.Module)
    statements = _compile(text, lambda c: tuple(c.statement(s) for s in tree.body))

    def script(ctx: ScriptContext) -> None:
        try:
            for statement in statements:
                statement(ctx)
        except (se.InvalidExpression, RecursionError) as exc:
            raise _guard(text, exc) from None

    return script


def _compile(text: str, build: Callable[[_Compiler], _T]) -> _T:
    try:
        return build(_Compiler(text))
    except RecursionError:
        raise ExpressionError("Expression is nested too deeply", expression=text) from None
