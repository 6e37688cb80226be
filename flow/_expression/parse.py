"""From graph text to a Python syntax tree, or an :class:`ExpressionError` naming the text.

Graph text is indented as its YAML/JSON host likes and may span lines; this module bounds its
length, drops the meaningless indentation, translates the solon-flow operators and parses the
result, so that every parse failure reaches the user as one typed error.
"""

from __future__ import annotations

import ast
import textwrap

from flow._expression import limits
from flow._expression.translate import translate
from flow.errors import ExpressionError


def parse_text(text: str, mode: str) -> ast.AST:
    """Parse ``text`` in ``mode`` (``"eval"`` or ``"exec"``); raises :class:`ExpressionError`."""
    if not text.strip():
        raise ExpressionError("Empty expression", expression=text)
    max_text = limits.LIMITS.max_text
    if len(text) > max_text:
        raise ExpressionError(f"Expression longer than {max_text} characters", expression=text)
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
