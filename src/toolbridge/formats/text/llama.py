"""Llama 3.x JSON tool calls: ``{"name": …, "parameters": {…}}`` (note ``parameters``,
not ``arguments``), optionally after ``<|python_tag|>`` and separated by ``;``.

After ``<|python_tag|>`` Llama 3.1 may also call a built-in tool in Python form,
``brave_search.call(query="…")``; that is read like a pythonic call named
``brave_search`` (literals only, never evaluated).
"""

from __future__ import annotations

import ast

from toolbridge.formats.text._common import CallCollector, TextCalls, scan_json, skip_space
from toolbridge.formats.text.pythonic import read_python_call

__all__ = ["parse_llama3_json"]

PYTHON_TAG = "<|python_tag|>"
_END_TOKENS = ("<|eom_id|>", "<|eot_id|>")


def parse_llama3_json(text: str, *, id_salt: str = "") -> TextCalls:
    """Calls when the reply starts with ``<|python_tag|>`` or a call-shaped JSON object."""
    body = text.strip()
    for token in _END_TOKENS:
        body = body.removesuffix(token).rstrip()
    tagged = body.startswith(PYTHON_TAG)
    body = body.removeprefix(PYTHON_TAG).lstrip()
    calls = CallCollector(id_salt)
    if body.startswith("{"):
        pos = 0
        while (found := scan_json(body, pos)) is not None and _looks_like_call(found[0]):
            if not calls.add_object(found[0], f"JSON call {len(calls.calls) + 1}"):
                break
            pos = skip_space(body, found[1])
            if body.startswith(";", pos):
                pos += 1
        if calls.calls:
            return calls.result(body[pos:])
    elif tagged:
        return _builtin_call(body, text, calls)
    return calls.result(text)


def _looks_like_call(json_text: str) -> bool:
    return (
        json_text.startswith("{")
        and '"name"' in json_text
        and ('"parameters"' in json_text or '"arguments"' in json_text)
    )


def _builtin_call(body: str, text: str, calls: CallCollector) -> TextCalls:
    """``tool.call(key=literal)`` after the python tag; other code stays text."""
    try:
        node = ast.parse(body, mode="eval").body
    except (SyntaxError, RecursionError, ValueError):
        return calls.result(text)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "call"
    ):
        node.func = node.func.value
        if read_python_call(node, calls):
            return calls.result("")
    return calls.result(text)
