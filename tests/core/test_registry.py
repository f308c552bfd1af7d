"""ToolRegistry: registration rules, definitions, prepare_call order and errors, execute."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

import pytest

from toolbridge import (
    ErrorKind,
    PolicyViolation,
    Tool,
    ToolDefinitionError,
    ToolExecutionError,
    ToolRegistry,
    ToolResult,
    WorkspaceViolation,
    tool,
    tool_parameters,
)
from toolbridge.core.errors import RETRY_HINT
from toolbridge.core.frozen import FrozenDict


class Recorder(Tool):
    """A tool that records every execution, so tests can prove nothing ran."""

    name = "record"
    description = "records its calls"
    parameters = {
        "type": "object",
        "properties": {"n": {"type": "integer"}, "tags": {"type": "array"}},
        "required": ["n"],
    }

    def __init__(self, name: str = "record") -> None:
        self.name = name
        self.calls: list[dict[str, Any]] = []

    async def execute(self, **kwargs: Any) -> Any:
        self.calls.append(kwargs)
        return {"got": kwargs}


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def registry(recorder: Recorder) -> ToolRegistry:
    return ToolRegistry([recorder])


# --- registration -------------------------------------------------------------------


@pytest.mark.parametrize("name", ["", "has space", "dots.not.allowed", "x" * 65, "ünï", None, 5])
def test_invalid_tool_names_are_refused(name: Any) -> None:
    bad = Recorder()
    bad.name = name
    with pytest.raises(ToolDefinitionError, match="invalid"):
        ToolRegistry([bad])


def test_duplicate_name_needs_replace() -> None:
    registry = ToolRegistry([Recorder()])
    with pytest.raises(ToolDefinitionError, match="already registered"):
        registry.register(Recorder())
    replacement = Recorder()
    registry.register(replacement, replace=True)
    assert registry.get("record") is replacement


@pytest.mark.parametrize(
    ("schema", "match"),
    [
        ({"type": "array"}, '"type": "object"'),
        ({"properties": {}}, '"type": "object"'),
        ({"type": "object", "properties": {"a": {"type": "integr"}}}, "not a valid JSON Schema"),
        (
            {"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}},
            "cannot be compiled",
        ),
        ([], "must be a JSON Schema object"),
    ],
)
def test_bad_schemas_are_refused_at_registration(schema: Any, match: str) -> None:
    bad = Recorder()
    bad.parameters = schema
    with pytest.raises(ToolDefinitionError, match=match):
        ToolRegistry([bad])


def test_tool_parameters_freezes_once() -> None:
    @tool_parameters({"type": "object", "properties": {"a": {"type": "integer"}}})
    class Frozen(Tool):
        name = "frozen"

    assert isinstance(Frozen.parameters, FrozenDict)
    assert Frozen().parameters is Frozen().parameters  # shared, never copied per access
    with pytest.raises(TypeError, match="frozen"):
        Frozen.parameters["properties"]["a"]["type"] = "string"  # type: ignore[index]
    with pytest.raises(ToolDefinitionError):
        tool_parameters({"type": "string"})


def test_container_protocol(registry: ToolRegistry) -> None:
    assert "record" in registry and registry.has("record") and len(registry) == 1
    assert registry.get("missing") is None
    assert registry.unregister("record").name == "record"
    assert len(registry) == 0
    with pytest.raises(KeyError):
        registry.unregister("record")


# --- definitions --------------------------------------------------------------------


def test_definitions_are_sorted_builtins_then_mcp_and_cached() -> None:
    names = ["zeta", "mcp_b_tool", "alpha", "mcp_a_tool", "beta"]
    registry = ToolRegistry([Recorder(n) for n in names])
    defs = registry.get_definitions()
    assert [d["function"]["name"] for d in defs] == [
        "alpha",
        "beta",
        "zeta",
        "mcp_a_tool",
        "mcp_b_tool",
    ]
    assert registry.get_definitions() is defs  # cached
    assert registry.tool_names == ["alpha", "beta", "zeta", "mcp_a_tool", "mcp_b_tool"]
    registry.register(Recorder("gamma"))
    assert registry.get_definitions() is not defs  # invalidated by a change


def test_callers_cannot_corrupt_the_cache(registry: ToolRegistry) -> None:
    defs = registry.get_definitions()
    before = json.dumps(defs)
    with pytest.raises(TypeError):
        defs.append({})
    with pytest.raises(TypeError):
        defs[0]["function"]["name"] = "evil"
    with pytest.raises(TypeError):
        defs[0]["function"]["parameters"]["properties"].clear()
    assert json.dumps(registry.get_definitions()) == before


def test_definitions_hash_is_stable_and_tracks_changes() -> None:
    a = ToolRegistry([Recorder("x"), Recorder("y")])
    b = ToolRegistry([Recorder("y"), Recorder("x")])
    assert a.definitions_hash == b.definitions_hash  # registration order does not matter
    before = a.definitions_hash
    a.register(Recorder("z"))
    assert a.definitions_hash != before
    a.unregister("z")
    assert a.definitions_hash == before


# --- prepare_call -----------------------------------------------------------------------


def test_prepare_casts_and_logs(registry: ToolRegistry) -> None:
    prepared = registry.prepare_call("record", '{"n": "60", "tags": "[\\"a\\"]"}')
    tool_, args, error = prepared
    assert error is None and tool_ is not None
    assert args == {"n": 60, "tags": ["a"]}
    assert [(r.path, r.action, r.before, r.after) for r in prepared.repairs] == [
        ("$.n", "cast", "60", 60),
        ("$.tags", "decode_json", '["a"]', ["a"]),
    ]


@pytest.mark.parametrize("raw", [None, "", "   "])
def test_empty_arguments_are_an_empty_object(raw: Any) -> None:
    registry = ToolRegistry([Recorder()])
    prepared = registry.prepare_call("record", raw)
    assert prepared.error is not None
    assert prepared.error.kind is ErrorKind.INVALID_ARGUMENTS  # n is required
    assert "- at $: missing required key 'n'" in prepared.error.render()


def test_arguments_envelope_is_unwrapped_and_logged(registry: ToolRegistry) -> None:
    prepared = registry.prepare_call("record", {"arguments": '{"n": 1}'})
    assert prepared.arguments == {"n": 1}
    assert prepared.repairs[0].action == "unwrap_arguments"
    prepared = registry.prepare_call("record", '{"arguments": {"n": "2"}}')
    assert prepared.arguments == {"n": 2}
    assert [r.action for r in prepared.repairs] == ["unwrap_arguments", "cast"]


def test_real_arguments_parameter_is_not_unwrapped() -> None:
    @tool
    async def takes_arguments(arguments: str) -> str:
        return arguments

    registry = ToolRegistry([takes_arguments])
    prepared = registry.prepare_call("takes_arguments", {"arguments": "x"})
    assert prepared.arguments == {"arguments": "x"}
    assert prepared.repairs == ()


def test_envelope_with_other_keys_is_not_unwrapped(registry: ToolRegistry) -> None:
    prepared = registry.prepare_call("record", {"arguments": {"n": 1}, "n": 2})
    assert prepared.error is not None
    assert "unknown key 'arguments'" in prepared.error.render()


def test_all_validation_errors_with_paths_one_per_line() -> None:
    @tool_parameters(
        {
            "type": "object",
            "properties": {
                "email": {"type": "string", "format": "email"},
                "age": {"type": "integer", "minimum": 0},
                "tags": {"type": "array", "items": {"type": "string", "pattern": "^[a-z]+$"}},
                "mode": {"enum": ["fast", "slow"]},
            },
            "required": ["email", "age"],
            "additionalProperties": False,
        }
    )
    class Strict(Tool):
        name = "strict"

    registry = ToolRegistry([Strict()])
    prepared = registry.prepare_call(
        "strict", {"email": "not-an-email", "tags": ["ok", "BAD"], "mode": "medium", "agee": 3}
    )
    assert prepared.error is not None
    text = prepared.error.render()
    lines = text.splitlines()
    assert lines[0] == "Error: invalid arguments for 'strict':"
    assert "- at $: unknown key 'agee'; allowed keys: email, age, tags, mode" in text
    assert "did you mean 'age'?" in text
    assert any(line.startswith("- at $.email:") and "email" in line for line in lines)
    assert any(line.startswith("- at $.tags[1]:") and "BAD" in line for line in lines)
    assert any(line.startswith("- at $.mode:") for line in lines)
    assert "- at $: missing required key 'age'" in lines
    assert "Additional properties" not in text  # reported once, with the allowed keys
    assert lines[-1] == "Fix the arguments listed above and call the tool again."


def test_unknown_keys_rejected_unless_schema_allows_extras() -> None:
    closed = Recorder("closed")
    open_ = Recorder("open")
    open_.parameters = {**Recorder.parameters, "additionalProperties": True}
    registry = ToolRegistry([closed, open_])
    assert registry.prepare_call("closed", {"n": 1, "x": 2}).error is not None
    assert registry.prepare_call("open", {"n": 1, "x": 2}).arguments == {"n": 1, "x": 2}


def test_exact_name_only_suggestions_in_text() -> None:
    registry = ToolRegistry([Recorder("read_file"), Recorder("write_file")])
    cases = {
        "Read-File": "read_file",
        "READ_FILE": "read_file",
        "functions.read_file": "read_file",
        "default_api:read_file": "read_file",
        "readfile": "read_file",
        "read_fil": "read_file",
        "wirte_file": "write_file",
    }
    for wrong, right in cases.items():
        prepared = registry.prepare_call(wrong, {"n": 1})
        assert prepared.tool is None and prepared.arguments is None
        assert prepared.error is not None and prepared.error.kind is ErrorKind.UNKNOWN_TOOL
        assert f"Did you mean {right!r}" in prepared.error.render(), wrong
    far = registry.prepare_call("launch_rockets", {}).error
    assert far is not None and "Did you mean" not in far.render()
    assert "read_file, write_file" in far.render()


# --- bad input: each a clear error, nothing runs ------------------------------------------

BAD_ARGUMENTS: list[tuple[Any, ErrorKind, str]] = [
    ("null", ErrorKind.ARGUMENTS_NOT_OBJECT, "got null"),
    ("[]", ErrorKind.ARGUMENTS_NOT_OBJECT, "got an array"),
    ("42", ErrorKind.ARGUMENTS_NOT_OBJECT, "got a number"),
    ('"text"', ErrorKind.ARGUMENTS_NOT_OBJECT, "got a string"),
    ([1, 2], ErrorKind.ARGUMENTS_NOT_OBJECT, "got an array"),
    (42, ErrorKind.ARGUMENTS_NOT_OBJECT, "got a number"),
    ("not json", ErrorKind.ARGUMENTS_NOT_JSON, "not valid JSON"),
    ('{"n": 1} trailing', ErrorKind.ARGUMENTS_NOT_JSON, "extra text after the JSON value"),
    ('{"n": 1}{"n": 2}', ErrorKind.ARGUMENTS_NOT_JSON, "extra text after the JSON value"),
    ('{"n": 1', ErrorKind.ARGUMENTS_NOT_JSON, "cut off"),
    ('{"n": 1, "n": 2}', ErrorKind.ARGUMENTS_NOT_JSON, "duplicate key 'n'"),
    ('{"n": NaN}', ErrorKind.ARGUMENTS_NOT_JSON, "NaN is not valid JSON"),
    ('{"n": Infinity}', ErrorKind.ARGUMENTS_NOT_JSON, "Infinity is not valid JSON"),
    ('{"n": 1e400}', ErrorKind.INVALID_ARGUMENTS, "$.n: the number 1e400 is too large"),
    ('{"n": ' + "1" * 5000 + "}", ErrorKind.ARGUMENTS_NOT_JSON, "not valid JSON"),
    ("[" * 10_000 + "]" * 10_000, ErrorKind.ARGUMENTS_NOT_JSON, "nested too deeply"),
    ('{"n": 1.5}', ErrorKind.INVALID_ARGUMENTS, "$.n"),
    ('{"n": "1.5"}', ErrorKind.INVALID_ARGUMENTS, "$.n"),
    ('{"n": true}', ErrorKind.INVALID_ARGUMENTS, "$.n"),
    ('{"n": "x' + "y" * 10_000_000 + '"}', ErrorKind.INVALID_ARGUMENTS, "characters cut"),
    ({"n": 1, "self": 1}, ErrorKind.INVALID_ARGUMENTS, "unknown key 'self'"),
    ({"n": 1, "kwargs": {}}, ErrorKind.INVALID_ARGUMENTS, "unknown key 'kwargs'"),
    ({"n": 1, "": 1}, ErrorKind.INVALID_ARGUMENTS, "unknown key ''"),
    ({"n": 1, "a-b": 1}, ErrorKind.INVALID_ARGUMENTS, "unknown key 'a-b'"),
    ({"arguments": "[1]"}, ErrorKind.ARGUMENTS_NOT_OBJECT, "got an array"),
    ({"arguments": "{bad"}, ErrorKind.ARGUMENTS_NOT_JSON, "not valid JSON"),
]


@pytest.mark.parametrize(("raw", "kind", "fragment"), BAD_ARGUMENTS)
async def test_bad_arguments_get_a_clear_error_and_nothing_runs(
    registry: ToolRegistry, recorder: Recorder, raw: Any, kind: ErrorKind, fragment: str
) -> None:
    prepared = registry.prepare_call("record", raw)
    assert prepared.error is not None and prepared.arguments is None
    assert prepared.error.kind is kind
    result = await registry.execute("record", raw)
    assert result.is_error and result.error_kind is kind
    assert result.text.startswith("Error")
    assert fragment in result.text
    assert len(result.text) < 2_000  # a 10 MB input never comes back whole
    assert recorder.calls == []


def test_big_integer_value_is_exact_not_a_float(registry: ToolRegistry) -> None:
    prepared = registry.prepare_call("record", {"n": 10**400})
    assert prepared.arguments == {"n": 10**400}
    assert isinstance(prepared.arguments["n"], int)


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        (None, "must be a string, got NoneType"),
        (5, "must be a string, got int"),
        ("x" * 10_240, "(10240 characters)"),
        ("", "unknown tool ''"),
    ],
)
async def test_bad_names(
    registry: ToolRegistry, recorder: Recorder, name: Any, fragment: str
) -> None:
    result = await registry.execute(name, {"n": 1})
    assert result.is_error and result.error_kind is ErrorKind.UNKNOWN_TOOL
    assert result.text.startswith("Error") and fragment in result.text
    assert len(result.text) < 1_000
    assert recorder.calls == []


# --- execute --------------------------------------------------------------------------


async def test_execute_returns_json_for_data(registry: ToolRegistry, recorder: Recorder) -> None:
    result = await registry.execute("record", '{"n": "7"}', call_id="c1")
    assert not result.is_error
    assert json.loads(result.text) == {"got": {"n": 7}}
    assert recorder.calls == [{"n": 7}]


async def test_execution_errors_become_results_with_the_retry_hint() -> None:
    @tool
    async def boom() -> None:
        raise RuntimeError("disk on fire")

    @tool
    async def polite() -> None:
        raise ToolExecutionError("file is locked", hint="Wait and try again.")

    @tool
    async def escape() -> None:
        raise WorkspaceViolation("/etc/passwd is outside the workspace", target="/etc/passwd")

    registry = ToolRegistry([boom, polite, escape])
    result = await registry.execute("boom", {})
    assert result.is_error and result.error_kind is ErrorKind.EXECUTION_ERROR
    assert result.text.startswith("Error: tool 'boom' failed: RuntimeError: disk on fire")
    assert result.text.endswith(RETRY_HINT)
    assert "Traceback" not in result.text

    result = await registry.execute("polite", {})
    assert result.text == "Error: file is locked\nWait and try again."

    result = await registry.execute("escape", {})
    assert result.error_kind is ErrorKind.WORKSPACE_VIOLATION
    assert "hard boundary" in result.text and RETRY_HINT not in result.text
    assert issubclass(WorkspaceViolation, PolicyViolation)


async def test_cancelled_error_propagates() -> None:
    started = asyncio.Event()

    @tool
    async def slow() -> None:
        started.set()
        await asyncio.sleep(30)

    registry = ToolRegistry([slow])
    task = asyncio.create_task(registry.execute("slow", {}))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_hooks_run_around_execute_and_after_hook_failures_are_isolated(
    caplog: pytest.LogCaptureFixture,
) -> None:
    events: list[str] = []

    class Hooked(Tool):
        name = "hooked"

        async def before_execute(self, args: Mapping[str, Any]) -> None:
            events.append(f"before {dict(args)}")

        async def execute(self, **kwargs: Any) -> str:
            events.append("execute")
            return "done"

        async def after_execute(self, args: Mapping[str, Any], result: ToolResult) -> None:
            events.append(f"after {result.text}")
            raise RuntimeError("cleanup failed")

    registry = ToolRegistry([Hooked()])
    result = await registry.execute("hooked", {})
    assert result.text == "done" and not result.is_error
    assert events == ["before {}", "execute", "after done"]
    assert "after_execute hook of tool 'hooked' failed" in caplog.text


async def test_before_hook_can_refuse_the_call() -> None:
    class Guarded(Tool):
        name = "guarded"
        ran = False

        async def before_execute(self, args: Mapping[str, Any]) -> None:
            raise ToolExecutionError("not now")

        async def execute(self, **kwargs: Any) -> str:
            self.ran = True
            return "ran"

    guarded = Guarded()
    result = await ToolRegistry([guarded]).execute("guarded", {})
    assert result.is_error and result.text.startswith("Error: not now")
    assert not guarded.ran


async def test_empty_results_are_explicit() -> None:
    @tool
    async def nothing() -> None:
        return None

    @tool
    async def blank() -> str:
        return "  "

    registry = ToolRegistry([nothing, blank])
    assert (await registry.execute("nothing", {})).text == "(tool completed with no output)"
    assert (await registry.execute("blank", {})).text == "(tool completed with no output)"


async def test_two_registries_share_no_state() -> None:
    a, b = ToolRegistry([Recorder()]), ToolRegistry()
    assert "record" not in b
    b.register(Recorder("other"))
    assert "other" not in a
    assert a.get_definitions() is not b.get_definitions()


def test_nested_objects_refuse_unknown_keys_unless_open() -> None:
    class People(Tool):
        name = "people"
        parameters = {
            "type": "object",
            "$defs": {"Person": {"type": "object", "properties": {"name": {"type": "string"}}}},
            "properties": {
                "lead": {"$ref": "#/$defs/Person"},
                "tags": {"type": "object", "additionalProperties": True},
                "mixed": {"allOf": [{"$ref": "#/$defs/Person"}, {"required": ["name"]}]},
            },
        }

    registry = ToolRegistry([People()])
    error = registry.prepare_call("people", {"lead": {"name": "a", "nmae": "b"}}).error
    assert error is not None
    assert "- at $.lead: unknown key 'nmae'; allowed keys: name (did you mean 'name'?)" in (
        error.render()
    )
    assert registry.prepare_call("people", {"tags": {"anything": 1}}).error is None
    # a definition also reached through allOf stays open there, as JSON Schema says
    assert registry.prepare_call("people", {"mixed": {"name": "a", "x": 1}}).error is None


def test_valid_arguments_pass_through_without_a_copy(registry: ToolRegistry) -> None:
    args = {"n": 3, "tags": ["x"]}
    prepared = registry.prepare_call("record", args)
    assert prepared.arguments is args and prepared.repairs == ()


def test_settled_schemas_take_the_short_error_path_only_when_no_cast_could_help() -> None:
    class Settled(Tool):
        name = "settled"
        parameters = {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "size": {"type": "number"},
                "kind": {"enum": ["a", "b"]},
                "level": {"enum": [1, 2]},
            },
            "required": ["name"],
        }

    registry = ToolRegistry([Settled()])
    assert registry._entries["settled"].schema.settled
    # nothing a cast could fix: reported straight from the validator
    error = registry.prepare_call("settled", {"kind": "c"}).error
    assert error is not None
    assert sorted(issue.path for issue in error.issues) == ["$", "$.kind"]
    # castable: a number as text, an enum value as text, an unknown key named nicely
    prepared = registry.prepare_call("settled", {"name": "x", "size": "1.5", "level": "2"})
    assert prepared.arguments == {"name": "x", "size": 1.5, "level": 2}
    error = registry.prepare_call("settled", {"name": "x", "nmae": "y"}).error
    assert error is not None
    assert "unknown key 'nmae'; allowed keys: name, size, kind, level" in error.render()
