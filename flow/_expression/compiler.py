"""Compilation of a parsed, translated syntax tree into a tree of closures.

Only whitelisted node types compile; anything else raises :class:`ExpressionError` naming the
text, so a forbidden construct fails when a graph is checked, not when it runs. The closures do
the work simpleeval's tree walk would do per evaluation (``SimpleEval.eval`` keeps per-call state
on the evaluator and costs several times more), and data-free arithmetic is folded at compile
time so that ``9**9**9`` is refused before anything runs. The compiler also bounds the nesting of
the syntax tree and notes whether the expression contains an operation that charges the work
meter (``metered``): expressions made only of names, attributes, constants and comparisons with
a constant do a bounded amount of work per node and run without a meter.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import simpleeval as se

from flow._expression import limits
from flow._expression.access import call_method, check_attr_name, read_attr, read_item
from flow._expression.functions import FUNCTIONS, refuse_functions
from flow._expression.limits import charge_key, charge_keys, check_built
from flow._expression.operators import (
    BINARY,
    COMPARE,
    PLAIN_BINARY,
    UNARY,
    charged,
    equals,
)
from flow.errors import ExpressionError

Code = Callable[[Mapping[str, Any]], Any]
"""A compiled expression: reads the context data, returns the value."""


class ScriptContext(Protocol):
    """What a task script needs from its context: the data and ``put``."""

    @property
    def data(self) -> dict[str, Any]: ...

    def put(self, key: str, value: Any) -> Any: ...


Statement = Callable[[ScriptContext], None]
_IMMUTABLE = (int, float, complex, str, bytes, bool, type(None))
_SCALAR_CONSTANT = (int, float, complex, str, bytes, bool, type(None))
_NUMBER_CONSTANT = frozenset({int, float, complex, bool, type(None)})


class Compiler:
    """Turns a whitelisted AST into closures; anything not handled raises ExpressionError."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.constants: dict[Code, Any] = {}
        self.pure: set[Code] = set()
        self.metered = False
        #: ``[metered]`` once the whole text is compiled, for closures built before that.
        self.runs_metered = [False]
        self.depth = 0
        self.max_nesting = limits.LIMITS.max_nesting

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

    def display(self, code: Code, parts: Sequence[Code]) -> Code:
        """A list, set or dict display: data-free when its parts are, but not run now. Its
        value is mutable (rebuilt on every run), so running it here would only be repeated by
        every enclosing display — the whole subtree again at each level of nesting, minutes
        for a page of ``[[[...]]]`` — and a display's own size is bounded by its text. An
        operation on it (``[0] * 10**9``) still runs it when checked (:meth:`fold`)."""
        if all(part in self.constants or part in self.pure for part in parts):
            self.pure.add(code)
        return code

    def expr(self, node: ast.expr) -> Code:
        handler = _HANDLERS.get(type(node))
        if handler is None:
            raise self.fail(f"{type(node).__name__} is not allowed in expressions")
        self.depth += 1
        if self.depth > self.max_nesting:
            raise self.fail(f"Expression is nested more than {self.max_nesting} levels deep")
        try:
            return handler(self, node)
        finally:
            self.depth -= 1

    def constant(self, node: ast.Constant) -> Code:
        value = node.value
        if not isinstance(value, int | float | complex | str | bytes | type(None)):
            raise self.fail(f"Literal {value!r} is not allowed")
        if isinstance(value, str | bytes) and len(value) > limits.LIMITS.max_length:
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
        function = UNARY.get(type(node.op))
        if function is None:
            raise self.fail(f"Operator {type(node.op).__name__} is not allowed")
        operand = self.expr(node.operand)

        def run(data: Mapping[str, Any]) -> Any:
            return function(operand(data))

        return self.fold(run, [operand])

    def binary(self, node: ast.BinOp) -> Code:
        function = BINARY.get(type(node.op))
        if function is None:
            raise self.fail(f"Operator {type(node.op).__name__} is not allowed")
        left, right = self.expr(node.left), self.expr(node.right)
        self.metered = True
        plain = PLAIN_BINARY.get(type(node.op))
        if plain is not None and (self.is_number(left) or self.is_number(right)):
            function = plain  # no set or dict operation can follow: a number is an operand
        elif plain is not None:
            checked, fast = function, plain

            def run_set_operator(data: Mapping[str, Any]) -> Any:
                value = left(data)
                if type(value) in _NUMBER_CONSTANT:  # numbers skip the set operator's checks
                    return fast(value, right(data))
                return checked(value, right(data))

            return self.fold(run_set_operator, [left, right])

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
        operands = [left, *(self.expr(c) for c in node.comparators)]
        pairs = tuple(
            (self.comparison(type(o), operands[i], operands[i + 1]), operands[i + 1])
            for i, o in enumerate(node.ops)
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

    def comparison(self, kind: type[ast.cmpop], left: Code, right: Code) -> Any:
        """The operator; one that may walk two large values charges the meter."""
        function = COMPARE[kind]
        if self.is_scalar(right) or (self.is_scalar(left) and kind not in (ast.In, ast.NotIn)):
            return function
        self.metered = True
        return charged(kind)

    def is_number(self, code: Code) -> bool:
        return code in self.constants and type(self.constants[code]) in _NUMBER_CONSTANT

    def is_scalar(self, code: Code) -> bool:
        return code in self.constants and isinstance(self.constants[code], _SCALAR_CONSTANT)

    def if_exp(self, node: ast.IfExp) -> Code:
        test, body, orelse = self.expr(node.test), self.expr(node.body), self.expr(node.orelse)

        def run(data: Mapping[str, Any]) -> Any:
            return body(data) if test(data) else orelse(data)

        return run

    def attribute(self, node: ast.Attribute) -> Code:
        check_attr_name(node.attr, self.text)
        value, name = self.expr(node.value), node.attr

        def run(data: Mapping[str, Any]) -> Any:
            return read_attr(value(data), name)

        return run

    def subscript(self, node: ast.Subscript) -> Code:
        value, key = self.expr(node.value), self.expr(node.slice)

        if isinstance(node.slice, ast.Slice):
            self.metered = True
        elif key not in self.constants:
            # A tuple key hashes every item at each look-up: charged when the expression runs
            # with the meter (a tuple it builds: a display, a call or an operator start it); in
            # one without, the tuple is the data's, which is taken as it is.
            runs_metered = self.runs_metered

            def run_key(data: Mapping[str, Any]) -> Any:
                found = key(data)
                if type(found) is tuple and runs_metered[0]:
                    charge_key(found)
                return read_item(value(data), found)

            return run_key

        def run(data: Mapping[str, Any]) -> Any:
            return read_item(value(data), key(data))

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
        self.metered = True
        if isinstance(node, ast.Set):

            def run_set(data: Mapping[str, Any]) -> Any:
                values = [item(data) for item in items]
                charge_keys(values)  # a tuple hashes every item, a huge integer its digits
                return check_built(set(values))

            # Run now: its items are hashable, so no list or dict display nests in it, and
            # hashing them may be the costly part ({huge_tuple}) the check should catch.
            return self.fold(run_set, items)

        def run(data: Mapping[str, Any]) -> Any:
            return check_built(build([item(data) for item in items]))

        if isinstance(node, ast.Tuple):
            return self.fold(run, items)  # immutable: becomes a constant
        return self.display(run, items)

    def mapping(self, node: ast.Dict) -> Code:
        if any(key is None for key in node.keys):
            raise self.fail("'**' unpacking is not allowed")
        pairs = tuple(
            (self.expr(k), self.expr(v)) for k, v in zip(node.keys, node.values, strict=True) if k
        )
        self.metered = True

        parts = [code for pair in pairs for code in pair]
        if all(key in self.constants for key, _ in pairs):  # scalars: each hashes at once

            def run(data: Mapping[str, Any]) -> Any:
                return check_built({key(data): value(data) for key, value in pairs})

            return self.display(run, parts)

        def run_keyed(data: Mapping[str, Any]) -> Any:
            built = [(key(data), value(data)) for key, value in pairs]
            charge_keys([key for key, _ in built])  # a tuple key hashes every item
            return check_built(dict(built))

        return self.display(run_keyed, parts)

    def call(self, node: ast.Call) -> Code:
        args = tuple(self.expr(arg) for arg in node.args)
        if any(keyword.arg is None for keyword in node.keywords):
            raise self.fail("'**' unpacking is not allowed")
        kwargs = tuple((str(k.arg), self.expr(k.value)) for k in node.keywords)
        self.metered = True
        func = node.func
        if isinstance(func, ast.Name):
            return self.function_call(func.id, args, kwargs)
        if not isinstance(func, ast.Attribute):
            raise self.fail("Only functions and methods can be called")
        check_attr_name(func.attr, self.text)
        receiver, name = self.expr(func.value), func.attr
        if name == "equals" and len(args) == 1 and not kwargs:
            other = args[0]

            def run_equals(data: Mapping[str, Any]) -> Any:
                return equals(receiver(data), other(data))

            return run_equals

        def run_method(data: Mapping[str, Any]) -> Any:
            values = [arg(data) for arg in args]
            named = {key: value(data) for key, value in kwargs}
            return call_method(receiver(data), name, values, named)

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
            refuse_functions(values)
            refuse_functions(tuple(named.values()))
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
        if isinstance(node, ast.AugAssign) and type(node.op) in BINARY:
            return self.aug_assign(node)
        raise self.fail(f"Statement {type(node).__name__} is not allowed in task scripts")

    def aug_assign(self, node: ast.AugAssign) -> Statement:
        target, function = self.target(node.target), BINARY[type(node.op)]
        code = self.expr(node.value)
        self.metered = True

        def run(ctx: ScriptContext) -> None:
            ctx.put(target, function(ctx.data.get(target), code(ctx.data)))

        return run

    def target(self, node: ast.expr) -> str:
        if not isinstance(node, ast.Name):
            raise self.fail("Only plain names can be assigned")
        return self.checked_name(node.id)


_HANDLERS: dict[type[ast.expr], Callable[[Compiler, Any], Code]] = {
    ast.Constant: Compiler.constant,
    ast.Name: Compiler.name,
    ast.UnaryOp: Compiler.unary,
    ast.BinOp: Compiler.binary,
    ast.BoolOp: Compiler.boolean,
    ast.Compare: Compiler.compare,
    ast.IfExp: Compiler.if_exp,
    ast.Attribute: Compiler.attribute,
    ast.Subscript: Compiler.subscript,
    ast.Slice: Compiler.slice,
    ast.List: Compiler.sequence,
    ast.Tuple: Compiler.sequence,
    ast.Set: Compiler.sequence,
    ast.Dict: Compiler.mapping,
    ast.Call: Compiler.call,
}
