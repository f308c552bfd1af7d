"""From a Python function to a tool's parameters: JSON Schema, docs, and converters.

The schema comes from the type hints through pydantic (so Field descriptions,
defaults, unions, Literal, Enum, nested models, TypedDict, dataclasses and the
usual formats all work); parameter descriptions come from the docstring (Google,
NumPy or Sphinx style). Parameters whose validated JSON value is already the
Python value the function wants pass through untouched; the others (datetime,
Enum, models, tuples, ...) are converted together by one pydantic validator,
compiled once.
"""

from __future__ import annotations

import enum
import inspect
import math
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from toolbridge.core.errors import ToolDefinitionError

__all__ = ["FunctionSignature", "function_signature"]

Converter = Callable[[dict[str, Any]], dict[str, Any]]

_NATIVE = (str, int, bool, type(None))
_SCHEMA_KEYS = ("properties", "$defs", "definitions", "patternProperties", "dependentSchemas")
_LITERAL_KEYS = ("default", "enum", "const", "examples")


@dataclass(frozen=True, slots=True)
class FunctionSignature:
    """What a function tool needs from its function, computed once."""

    description: str
    schema: dict[str, Any]
    converter: Converter | None
    context_param: str | None


def function_signature(fn: Callable[..., Any], *, context_type: type) -> FunctionSignature:
    """Build the schema, description and converter of `fn`; errors name the parameter."""
    owner = getattr(fn, "__qualname__", repr(fn))
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:
        raise ToolDefinitionError(f"{owner}: cannot resolve type hints: {exc}") from exc
    docs = _parse_docstring(fn)
    params: list[tuple[str, Any, Any]] = []  # name, annotation, default (... when none)
    context_param: str | None = None

    for param in inspect.signature(fn).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
            raise ToolDefinitionError(
                f"{owner}: parameter {param.name!r} is {param.kind.description}; a tool "
                "function takes named parameters only"
            )
        annotation = hints.get(param.name, Any)
        if _is_context(annotation, context_type):
            context_param = param.name
            continue
        default = ... if param.default is param.empty else param.default
        params.append((param.name, annotation, default))

    simple = _simple_signature(fn, params, docs, context_param)
    if simple is not None:
        return simple
    return _pydantic_signature(fn, owner, params, docs, context_param)


def _pydantic_signature(
    fn: Callable[..., Any],
    owner: str,
    params: list[tuple[str, Any, Any]],
    docs: _Docs,
    context_param: str | None,
) -> FunctionSignature:
    """The general path: pydantic builds the schema and, where needed, the converter."""
    from pydantic import ConfigDict, Field, TypeAdapter, create_model

    fields: dict[str, Any] = {}
    to_convert: dict[str, Any] = {}
    for name, annotation, default in params:
        description = docs.params.get(name)
        field_info = Field(default, description=description) if description else Field(default)
        fields[name] = (annotation, field_info)
        if not _is_native(annotation):
            to_convert[name] = annotation

    try:
        model = create_model(
            f"{getattr(fn, '__name__', 'tool')}_arguments",
            __config__=ConfigDict(extra="forbid"),
            **fields,
        )
        schema = _strip_titles(model.model_json_schema())
    except Exception as exc:
        raise ToolDefinitionError(f"{owner}: cannot build a JSON Schema: {exc}") from exc
    schema.setdefault("properties", {})
    converter = None
    if to_convert:
        from typing_extensions import TypedDict

        # One TypedDict of the parameters to convert: one pydantic call per tool call.
        make_typed_dict: Any = TypedDict
        typed = make_typed_dict(f"{model.__name__}_typed", to_convert, total=False)
        adapter: TypeAdapter[dict[str, Any]] = TypeAdapter(typed)
        converter = _validate_python(adapter)
    return FunctionSignature(docs.description, schema, converter, context_param)


# The plain types whose JSON Schema is written here exactly as pydantic writes it, so
# that a function using only them never imports pydantic (about 8 MiB of memory).
_SIMPLE_TYPES: dict[Any, dict[str, Any]] = {
    str: {"type": "string"},
    int: {"type": "integer"},
    float: {"type": "number"},
    bool: {"type": "boolean"},
}
_SIMPLE_DEFAULTS = (str, int, float, bool, type(None))


def _simple_schema(annotation: Any) -> tuple[dict[str, Any], bool] | None:
    """The schema of a plain annotation and whether its JSON value needs converting
    (a float parameter takes 3.0 for 3); None for anything else."""
    if annotation in _SIMPLE_TYPES:
        return dict(_SIMPLE_TYPES[annotation]), annotation is float
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType) and len(args) == 2 and args[1] is type(None):
        inner = _simple_schema(args[0])
        if inner is None or "anyOf" in inner[0]:
            return None
        return {"anyOf": [inner[0], {"type": "null"}]}, inner[1]
    if origin is list and len(args) == 1 and args[0] in _SIMPLE_TYPES:
        return {"items": dict(_SIMPLE_TYPES[args[0]]), "type": "array"}, args[0] is float
    if origin is dict and len(args) == 2 and args[0] is str and args[1] in _SIMPLE_TYPES:
        item = dict(_SIMPLE_TYPES[args[1]])
        return {"additionalProperties": item, "type": "object"}, args[1] is float
    return None


def _simple_signature(
    fn: Callable[..., Any],
    params: list[tuple[str, Any, Any]],
    docs: _Docs,
    context_param: str | None,
) -> FunctionSignature | None:
    """The schema pydantic would write, for parameters of plain types only (str, int,
    float, bool, their lists, dicts and optionals, with plain defaults); None otherwise.

    tests/core/test_signature_simple.py checks it against pydantic's own output.
    """
    properties: dict[str, Any] = {}
    required: list[str] = []
    to_convert: dict[str, Any] = {}
    for name, annotation, default in params:
        found = _simple_schema(annotation)
        if found is None or name.startswith(("_", "model_")):
            return None
        node, converts = found
        if default is ...:
            required.append(name)
        elif type(default) not in _SIMPLE_DEFAULTS or (
            type(default) is float and not math.isfinite(default)
        ):
            return None
        else:
            node["default"] = default
        if description := docs.params.get(name):
            node["description"] = description
        properties[name] = dict(sorted(node.items()))
        if converts:
            to_convert[name] = annotation
    schema: dict[str, Any] = {"additionalProperties": False, "properties": properties}
    if required:
        schema["required"] = required
    schema["type"] = "object"
    name = f"{getattr(fn, '__name__', 'tool')}_arguments_typed"
    converter = _LazyConverter(name, to_convert) if to_convert else None
    return FunctionSignature(docs.description, schema, converter, context_param)


def _validate_python(adapter: Any) -> Converter:
    """The adapter's compiled validator, called directly: `TypeAdapter.validate_python`
    adds a Python frame and its keyword defaults around the same call on every use."""
    validator = getattr(adapter, "validator", None)
    validate = getattr(validator, "validate_python", None)
    if callable(validate) and type(validator).__module__.startswith("pydantic_core"):
        converter: Converter = validate
        return converter
    fallback: Converter = adapter.validate_python
    return fallback


class _LazyConverter:
    """pydantic's conversion of the parameters that need one, compiled on the first call:
    a tool that is registered but never called never imports pydantic."""

    __slots__ = ("_fields", "_name", "_validate")

    def __init__(self, name: str, fields: dict[str, Any]) -> None:
        self._name = name
        self._fields = fields
        self._validate: Converter | None = None

    def __call__(self, args: dict[str, Any]) -> dict[str, Any]:
        if self._validate is None:
            from pydantic import TypeAdapter
            from typing_extensions import TypedDict

            make_typed_dict: Any = TypedDict
            typed = make_typed_dict(self._name, self._fields, total=False)
            adapter: TypeAdapter[dict[str, Any]] = TypeAdapter(typed)
            self._validate = _validate_python(adapter)
        return self._validate(args)


@dataclass(frozen=True, slots=True)
class _Docs:
    description: str
    params: dict[str, str]


def _parse_docstring(fn: Callable[..., Any]) -> _Docs:
    doc = inspect.getdoc(fn)
    if not doc:
        return _Docs("", {})
    import docstring_parser

    parsed = docstring_parser.parse(doc)
    parts = [p for p in (parsed.short_description, parsed.long_description) if p]
    params = {p.arg_name: p.description for p in parsed.params if p.description}
    return _Docs("\n\n".join(parts).strip(), params)


def _unwrap_annotated(annotation: Any) -> tuple[Any, tuple[Any, ...]]:
    if typing.get_origin(annotation) is typing.Annotated:
        base, *metadata = typing.get_args(annotation)
        return base, tuple(metadata)
    return annotation, ()


def _is_context(annotation: Any, context_type: type) -> bool:
    base, _ = _unwrap_annotated(annotation)
    if typing.get_origin(base) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(base) if a is not type(None)]
        base = args[0] if len(args) == 1 else None
    # a subclass is a context too: it must never become a parameter the model can fill
    return isinstance(base, type) and issubclass(base, context_type)


def _is_native(annotation: Any) -> bool:
    """True when a schema-valid JSON value already is the Python value `annotation` wants."""
    from pydantic.fields import FieldInfo

    base, metadata = _unwrap_annotated(annotation)
    for item in metadata:
        if isinstance(item, FieldInfo):
            if any(not _is_constraint(m) for m in item.metadata):
                return False
        elif not (isinstance(item, str) or _is_constraint(item)):
            return False
    if base is Any or base in _NATIVE:
        return True
    origin = typing.get_origin(base)
    args = typing.get_args(base)
    if origin is typing.Literal:
        return all(isinstance(a, _NATIVE) and not isinstance(a, enum.Enum) for a in args)
    if origin in (typing.Union, types.UnionType):
        return all(_is_native(a) for a in args)
    if origin is list:
        return all(_is_native(a) for a in args)
    if origin is dict:
        return not args or (args[0] is str and _is_native(args[1]))
    if typing.is_typeddict(base):
        return all(_is_native(h) for h in typing.get_type_hints(base, include_extras=True).values())
    return base in (list, dict)


def _is_constraint(item: Any) -> bool:
    import annotated_types

    return isinstance(item, annotated_types.BaseMetadata)


def _strip_titles(node: Any) -> Any:
    """Drop pydantic's generated ``title`` keys: tokens for the model, no meaning."""
    if isinstance(node, dict):
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key == "title" and isinstance(value, str):
                continue
            if key in _SCHEMA_KEYS and isinstance(value, dict):
                out[key] = {name: _strip_titles(sub) for name, sub in value.items()}
            elif key in _LITERAL_KEYS:
                out[key] = value
            else:
                out[key] = _strip_titles(value)
        return out
    if isinstance(node, list):
        return [_strip_titles(item) for item in node]
    return node
