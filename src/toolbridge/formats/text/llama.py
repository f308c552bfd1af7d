"""Llama 3.x tool calls, in the three shapes Meta's prompt formats define.

- JSON: ``{"name": …, "parameters": {…}}`` (note ``parameters``), the whole reply or
  after ``<|python_tag|>``, several separated by ``;``.
- Llama 3.1 custom tools: ``<function=NAME>{…}</function>``, anywhere in the reply.
- After ``<|python_tag|>``: a built-in tool in Python form,
  ``brave_search.call(query="…")`` (also ``wolfram_alpha``, ``photogen``), read like a
  pythonic call (literals only, never evaluated); any other code is a call of the
  built-in ``code_interpreter`` tool with the code as its ``code`` argument.

A python-tag call runs to ``<|eom_id|>``/``<|eot_id|>`` or the end of the reply.
"""

from __future__ import annotations

import ast
import re

from toolbridge.formats.text._common import (
    Reader,
    arguments_until,
    first_of,
    scan_json,
    skip_space,
)
from toolbridge.formats.text.pythonic import NotACall, parse_python, python_call

__all__ = ["BUILTIN_TOOLS", "CODE_INTERPRETER", "FUNCTION_OPEN", "PYTHON_TAG", "read_llama"]

PYTHON_TAG = "<|python_tag|>"
FUNCTION_OPEN = "<function="
FUNCTION_CLOSE = "</function>"
END_TOKENS = ("<|eom_id|>", "<|eot_id|>", "<|end_of_text|>")
BUILTIN_TOOLS = frozenset({"brave_search", "wolfram_alpha", "photogen"})
CODE_INTERPRETER = "code_interpreter"
_FUNCTION_NAME = re.compile(r"<function=([^>\n]*)>")


def read_llama(reader: Reader) -> None:
    """A reply that is JSON calls, then python-tag and ``<function=…>`` calls in order."""
    source = reader.source
    start = skip_space(source, reader.pos)
    if source.startswith("{", start):
        _json_calls(reader, start, len(source), tagged=False)
    while True:
        found_at, marker = first_of(source, (PYTHON_TAG, FUNCTION_OPEN), reader.pos)
        if not marker:
            break
        reader.text(found_at, orphans=(FUNCTION_CLOSE,))
        if marker == PYTHON_TAG:
            _python_tag(reader, found_at)
        else:
            _function_block(reader, found_at)
    reader.text(len(source), orphans=(FUNCTION_CLOSE,))


def _looks_like_call(json_text: str) -> bool:
    return (
        json_text.startswith("{")
        and '"name"' in json_text
        and ('"parameters"' in json_text or '"arguments"' in json_text)
    )


def _json_calls(reader: Reader, start: int, end: int, *, tagged: bool) -> None:
    """``{call}; {call}`` from `start`; stops at the first value that is not a call.

    Untagged, a reply that is not call-shaped JSON is left as text. A call that starts
    but cannot be read (cut off, broken) is a problem.
    """
    source = reader.source
    pos = start
    while True:
        value_start = skip_space(source, pos)
        found = scan_json(source[:end], value_start)
        if found is None:
            fragment = source[value_start:end]
            if source.startswith("{", value_start) and '"name"' in fragment:
                reader.markup(value_start)
                reader.unreadable(end, "the JSON call is not complete (was the output cut off?)")
            return
        if not _looks_like_call(found[0]):
            if tagged:
                reader.markup(value_start)
                reader.unreadable(found[1], 'expected a call {"name": …, "parameters": …}')
            return
        reader.markup(value_start)
        reader.call_object(found[1], found[0], f"JSON call at position {value_start}")
        pos = skip_space(source, found[1])
        if not source.startswith(";", pos):
            return
        pos += 1


def _python_tag(reader: Reader, tag_at: int) -> None:
    source = reader.source
    reader.markup(tag_at + len(PYTHON_TAG))
    body_start = skip_space(source, reader.pos)
    where = f"{PYTHON_TAG} at position {tag_at}"
    if source.startswith("{", body_start):
        # JSON is read string-aware: an end token inside a string belongs to the call.
        _json_calls(reader, body_start, len(source), tagged=True)
        end, _ = first_of(source, END_TOKENS, reader.pos)
        end = len(source) if end == -1 else end
        body_end = len(source[:end].rstrip())
        if reader.pos < body_end:
            reader.unreadable(body_end, f"{where}: text after the JSON calls")
        return
    end, _ = first_of(source, END_TOKENS, tag_at)
    end = len(source) if end == -1 else end
    body = source[body_start:end].rstrip()
    if not body:
        reader.unreadable(end, f"{where}: nothing follows the tag")
        return
    reader.markup(body_start)
    builtin = _builtin_call(body)
    if isinstance(builtin, str):
        reader.unreadable(body_start + len(body), f"{where}: {builtin}")
    elif builtin is not None:
        reader.call(body_start + len(body), builtin[0], builtin[1], where=where)
    else:
        # Meta's prompt format: plain code after the tag is a code_interpreter call.
        reader.call(body_start + len(body), CODE_INTERPRETER, {"code": body}, where=where)


def _builtin_call(body: str) -> tuple[str, dict[str, object]] | str | None:
    """``brave_search.call(…)`` as (name, arguments), a reason when it is such a call
    that cannot be read, or None when the body is other code."""
    tree = parse_python(body, "eval")
    if not isinstance(tree, ast.Expression):
        return None
    node = tree.body
    if not (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "call"
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id in BUILTIN_TOOLS
    ):
        return None
    try:
        _, arguments = python_call(ast.Call(node.func.value, node.args, node.keywords))
    except NotACall as exc:
        return f"{node.func.value.id}.call: {exc}"
    return node.func.value.id, arguments


def _function_block(reader: Reader, start: int) -> None:
    """``<function=NAME>{…}</function>``; cut off at the end of the reply, the raw
    arguments still reach the registry, which reports them as incomplete."""
    source = reader.source
    where = f"<function= at position {start}"
    named = _FUNCTION_NAME.match(source, start)
    if named is None:
        stop = source.find("\n", start)
        stop = len(source) if stop == -1 else stop
        reader.unreadable(stop, f"{where}: expected <function=NAME> with the name closed by '>'")
        return
    arguments, pos = arguments_until(source, named.end(), (FUNCTION_CLOSE, *END_TOKENS))
    pos = skip_space(source, pos)
    if source.startswith(FUNCTION_CLOSE, pos):
        pos += len(FUNCTION_CLOSE)
    elif pos != len(source) and not source.startswith(END_TOKENS, pos):
        reader.unreadable(pos, f"{where}: expected {FUNCTION_CLOSE} after the arguments")
        return
    reader.call(pos, named.group(1).strip(), arguments, where=where)
