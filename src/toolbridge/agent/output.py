"""Structured output: the run's answer validated into a pydantic model (or any type
pydantic validates: a TypedDict, a dataclass, ``list[int]``).

The answer comes one of two ways, validated by the same pydantic adapter:
- natively: the provider constrains the assistant's text to the type's JSON Schema
  (`native`, rendered by each adapter); the text is parsed as JSON and validated
  (`from_text`), and a failure is told to the model in words with the path of each
  problem;
- through a ``final_result`` tool whose parameters are the schema, on every provider.
  The call goes through the registry and executor like any other: the schema is checked
  and cast by the registry, then pydantic validates (`convert_arguments`), and a failure
  goes back as an invalid-arguments error. A plain-text answer is accepted when it is
  JSON that validates; otherwise the model is told to call the tool.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cached_property
from typing import Any

from pydantic import TypeAdapter, ValidationError

from toolbridge.agent.native_output import NativeOutput
from toolbridge.core.calls import ToolCallRequest, decode_arguments
from toolbridge.core.frozen import freeze
from toolbridge.core.tool import Tool

__all__ = ["FINAL_RESULT", "FinalResultTool", "OutputSpec"]

FINAL_RESULT = "final_result"
_WRAP_KEY = "result"


class OutputSpec:
    """The output type, its JSON Schema as tool parameters, and validation both ways."""

    def __init__(self, output_type: Any, *, tool_name: str = FINAL_RESULT) -> None:
        self.output_type = output_type
        self.adapter: TypeAdapter[Any] = TypeAdapter(output_type)
        self.tool_name = tool_name
        schema = self.adapter.json_schema()
        self.wrapped = schema.get("type") != "object"
        if self.wrapped:  # tools take objects: a scalar or list goes under "result"
            defs = schema.pop("$defs", None)
            schema = {"type": "object", "properties": {_WRAP_KEY: schema}, "required": [_WRAP_KEY]}
            if defs:
                schema["$defs"] = defs
        self.parameters = schema

    def validate_arguments(self, arguments: Mapping[str, Any]) -> Any:
        """The typed value from the tool's arguments; pydantic's ValidationError if not."""
        data = arguments[_WRAP_KEY] if self.wrapped else dict(arguments)
        return self.adapter.validate_python(data)

    def from_call(self, call: ToolCallRequest) -> Any:
        """The typed value of an accepted ``final_result`` call (decoded from the call)."""
        arguments = call.arguments
        if isinstance(arguments, str):
            arguments = decode_arguments(arguments)
        return self.validate_arguments(arguments)

    @cached_property
    def native(self) -> NativeOutput:
        """The schema for the providers' native structured output (made once)."""
        return NativeOutput.from_schema(
            self.parameters, description="The final answer, as JSON matching this schema."
        )

    def from_text(self, text: str, *, native: bool = False) -> tuple[Any, str | None]:
        """A plain-text answer as the typed value, or None and what was wrong.

        `native` says the answer was asked for as JSON text (native structured output),
        so the problem tells the model to answer again in JSON, not to call the tool.
        """
        again = (
            "answer again with only a JSON value that matches the schema (no prose, no code fences)"
            if native
            else f"call the {self.tool_name} tool with the answer"
        )
        try:
            data = json.loads(text)
        except ValueError as exc:
            return None, f"the answer is not valid JSON ({exc}); {again}"
        except RecursionError:  # the model's text is hostile input: never crash the run
            return None, f"the answer's JSON is nested too deeply to read; {again}"
        try:
            if self.wrapped and not (isinstance(data, dict) and _WRAP_KEY in data):
                return self.adapter.validate_python(data), None
            return self.validate_arguments(data), None
        except ValidationError as exc:
            return None, f"the answer does not match the schema: {_problems(exc)}; {again}"
        except (KeyError, TypeError) as exc:
            return None, f"the answer does not match the schema ({exc!r}); {again}"

    def dump(self, value: Any) -> Any:
        """The value as JSON data."""
        return self.adapter.dump_python(value, mode="json")

    def tool(self) -> FinalResultTool:
        return FinalResultTool(self)


def _problems(exc: ValidationError) -> str:
    """Each validation error as ``path: message`` (the path from the answer's root)."""
    problems = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(part) for part in error["loc"]) or "(root)"
        problems.append(f"{where}: {error['msg']}")
    return "; ".join(problems)


class FinalResultTool(Tool):
    """The tool the model calls with its final answer; validated by pydantic."""

    read_only = True

    def __init__(self, spec: OutputSpec) -> None:
        self.spec = spec
        self.name = spec.tool_name
        self.description = (
            "Give your final answer by calling this tool with it. Call it once, when you "
            "are done, and only with arguments that match its schema."
        )
        self.parameters = freeze(spec.parameters)

    def convert_arguments(self, args: dict[str, Any]) -> dict[str, Any]:
        self.spec.validate_arguments(args)  # a ValidationError refuses the call
        return {}

    async def execute(self, **kwargs: Any) -> str:
        return "Final result received."
