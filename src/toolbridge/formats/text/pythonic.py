"""Pythonic tool calls (Llama 3.2/4, vLLM's ``pythonic``): ``[f(a=1), g(b="x")]``.

The text is parsed with `ast` and only literals are accepted (strings, numbers,
booleans, None, lists, tuples, dicts with string keys); nothing is ever evaluated.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Callable
from typing import Any

from toolbridge.formats.text._common import Reader, skip_space

__all__ = ["NotACall", "parse_python", "python_call", "read_pythonic", "source_locator"]

PYTHON_START = "<|python_start|>"
PYTHON_END = "<|python_end|>"
END_TOKENS = ("<|eot|>", "<|eom|>", "<|eot_id|>", "<|eom_id|>")
_CALL_SHAPED = re.compile(r"\[\s*[A-Za-z_][\w.]*\s*\(")
_LINE_END = re.compile(r"\r\n|\r|\n")


class NotACall(ValueError):
    """A Python expression that is not a call with literal keyword arguments; says why."""


def read_pythonic(reader: Reader) -> None:
    """A whole reply that is a list of keyword-argument calls; anything else is text.

    A reply that starts like a call list (``[name(``) but does not parse is a problem.
    """
    source = reader.source
    start = skip_space(source, reader.pos)
    reply_end = end = _body_end(source, start)
    body_start = start
    if source.startswith(PYTHON_START, start):
        body_start = skip_space(source, start + len(PYTHON_START))
        if source.endswith(PYTHON_END, body_start, end):
            end = len(source[:end].removesuffix(PYTHON_END).rstrip())
    body = source[body_start:end]
    call_shaped = _CALL_SHAPED.match(body) is not None
    tree = parse_python(body, "eval") if body.startswith("[") and body.endswith("]") else None
    if not (isinstance(tree, ast.Expression) and isinstance(tree.body, ast.List)):
        if call_shaped:
            reader.unreadable(end, "the call list is not valid Python (was the output cut off?)")
        return
    elements = tree.body.elts
    if not elements or not all(isinstance(element, ast.Call) for element in elements):
        if call_shaped:
            reader.unreadable(end, "the list holds something other than calls")
        return
    read: list[tuple[str, dict[str, Any]] | str] = []
    for number, element in enumerate(elements, 1):
        try:
            read.append(python_call(element))
        except NotACall as exc:
            read.append(f"call {number} of the list: {exc}")
    if all(isinstance(item, str) for item in read):
        reader.markup(body_start)
        for why in read[:-1]:
            reader.problem(str(why))
        reader.unreadable(end, str(read[-1]))
        reader.markup(reply_end)
        return
    locate = source_locator(body, body_start)
    reader.markup(body_start + 1)
    for number, (element, item) in enumerate(zip(elements, read, strict=True), 1):
        reader.markup(locate(element.lineno, element.col_offset))
        element_end = locate(element.end_lineno or 0, element.end_col_offset or 0)
        if isinstance(item, str):
            reader.unreadable(element_end, item)
        else:
            reader.call(element_end, *item, where=f"call {number} of the list")
    reader.markup(reply_end)


def _body_end(source: str, start: int) -> int:
    """Where the reply's body ends: before trailing whitespace and end-of-turn tokens."""
    end = len(source)
    while True:
        trimmed = source[start:end].rstrip()
        for token in END_TOKENS:
            trimmed = trimmed.removesuffix(token)
        if start + len(trimmed) == end:
            return end
        end = start + len(trimmed)


def parse_python(code: str, mode: str) -> ast.AST | None:
    """The syntax tree of `code`, or None when it is not Python (or too deep to parse)."""
    try:
        return ast.parse(code, mode=mode)
    except (SyntaxError, RecursionError, MemoryError, ValueError):
        return None


def source_locator(code: str, offset: int) -> Callable[[int, int], int]:
    """Map an `ast` position (line, UTF-8 byte column) in `code` to an index in the
    text `code` starts at `offset` of."""
    starts = [0] + [match.end() for match in _LINE_END.finditer(code)]

    def locate(line: int, column: int) -> int:
        if not 1 <= line <= len(starts):
            return offset + len(code)
        start = starts[line - 1]
        stop = starts[line] if line < len(starts) else len(code)
        head = code[start:stop].encode("utf-8", "surrogatepass")[:column]
        return offset + start + len(head.decode("utf-8", "ignore"))

    return locate


def python_call(node: ast.expr) -> tuple[str, dict[str, Any]]:
    """``name(key=literal, …)`` as its name and arguments; `NotACall` says what else it is."""
    if not isinstance(node, ast.Call):
        raise NotACall(f"{ast.unparse(node)[:80]} is not a function call")
    name = _dotted_name(node.func)
    if name is None:
        raise NotACall("the called thing is not a plain tool name")
    if node.args:
        raise NotACall("positional arguments cannot be matched to parameters; name each")
    arguments: dict[str, Any] = {}
    for keyword in node.keywords:
        if keyword.arg is None:
            raise NotACall("**kwargs is not allowed; name each argument")
        try:
            arguments[keyword.arg] = _literal(keyword.value)
        except NotACall as exc:
            raise NotACall(f"argument {keyword.arg!r} {exc}") from None
    return name, arguments


def _dotted_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted_name(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


def _literal(node: ast.expr) -> Any:
    """The JSON value of a literal node; raises `NotACall` saying what it is instead."""
    if isinstance(node, ast.Constant):
        value = node.value
        if value is None or isinstance(value, bool | int | str):
            return value
        if isinstance(value, float) and math.isfinite(value):
            return value
        raise NotACall(f"is {ast.unparse(node)[:40]}, which has no JSON form")
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        operand = _literal(node.operand)
        if isinstance(operand, int | float) and not isinstance(operand, bool):
            return -operand if isinstance(node.op, ast.USub) else operand
    if isinstance(node, ast.List | ast.Tuple):
        return [_literal(element) for element in node.elts]
    if isinstance(node, ast.Dict):
        result: dict[str, Any] = {}
        for key, item in zip(node.keys, node.values, strict=True):
            if key is None:
                raise NotACall("unpacks a dict with **; write the keys out")
            name = _literal(key)
            if not isinstance(name, str):
                raise NotACall("has a dict key that is not a string")
            result[name] = _literal(item)
        return result
    raise NotACall(f"is {ast.unparse(node)[:40]!r}, not a literal; only literal values")
