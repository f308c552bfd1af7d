"""Pythonic tool calls (Llama 3.2/4, vLLM's ``pythonic``): ``[f(a=1), g(b="x")]``.

The text is parsed with `ast` and only literals are accepted (strings, numbers,
booleans, None, lists, tuples, dicts with string keys); nothing is ever evaluated.
"""

from __future__ import annotations

import ast
import math
from typing import Any

from toolbridge.formats.text._common import CallCollector, TextCalls

__all__ = ["parse_pythonic", "read_python_call"]

_WRAPPERS = (("<|python_start|>", "<|python_end|>"),)


class _NotLiteral(ValueError):
    pass


def parse_pythonic(text: str, *, id_salt: str = "") -> TextCalls:
    """A whole reply that is a list of keyword-argument calls; anything else is text."""
    body = text.strip()
    for start, end in _WRAPPERS:
        if body.startswith(start):
            body = body.removeprefix(start).removesuffix(end).strip()
    calls = CallCollector(id_salt)
    if not (body.startswith("[") and body.endswith("]")):
        return calls.result(text)
    try:
        tree = ast.parse(body, mode="eval").body
    except (SyntaxError, RecursionError, ValueError):
        return calls.result(text)
    if not isinstance(tree, ast.List) or not all(isinstance(e, ast.Call) for e in tree.elts):
        return calls.result(text)
    unread = [call for call in tree.elts if not read_python_call(call, calls)]
    return calls.result(text if unread else "")


def read_python_call(node: ast.expr, calls: CallCollector) -> bool:
    """Add ``name(key=literal, …)`` to `calls`; on anything else record why and return False."""
    if not isinstance(node, ast.Call):
        calls.problem(f"{ast.unparse(node)[:80]} is not a function call")
        return False
    name = _dotted_name(node.func)
    shown = ast.unparse(node)[:80]
    if name is None:
        calls.problem(f"{shown}: the called thing is not a plain tool name")
        return False
    if node.args:
        calls.problem(f"{shown}: positional arguments cannot be matched to parameters; name each")
        return False
    arguments: dict[str, Any] = {}
    for keyword in node.keywords:
        if keyword.arg is None:
            calls.problem(f"{shown}: **kwargs is not allowed; name each argument")
            return False
        try:
            arguments[keyword.arg] = _literal(keyword.value)
        except _NotLiteral as exc:
            calls.problem(f"{shown}: argument {keyword.arg!r} {exc}")
            return False
    calls.add(name, arguments)
    return True


def _dotted_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted_name(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


def _literal(node: ast.expr) -> Any:
    """The JSON value of a literal node; raises `_NotLiteral` saying what it is instead."""
    if isinstance(node, ast.Constant):
        value = node.value
        if value is None or isinstance(value, bool | int | str):
            return value
        if isinstance(value, float) and math.isfinite(value):
            return value
        raise _NotLiteral(f"is {ast.unparse(node)[:40]}, which has no JSON form")
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
                raise _NotLiteral("unpacks a dict with **; write the keys out")
            name = _literal(key)
            if not isinstance(name, str):
                raise _NotLiteral("has a dict key that is not a string")
            result[name] = _literal(item)
        return result
    raise _NotLiteral(f"is {ast.unparse(node)[:40]!r}, not a literal; only literal values")
