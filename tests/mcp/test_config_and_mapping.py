"""The mcpServers config, tool names, schemas and annotations: checked before any server runs."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import mcp_types as mt
import pytest

from toolbridge import ErrorKind, ImageBlock, JsonBlock, TextBlock, ToolConfigError, ToolResult
from toolbridge.core.errors import ToolDefinitionError
from toolbridge.execution.result_store import cap_result
from toolbridge.mcp import MCPServerConfig, load_mcp_config
from toolbridge.mcp.content import CONTENT_KEY, STRUCTURED_KEY, from_mcp_result, to_mcp_content
from toolbridge.mcp.names import local_names
from toolbridge.mcp.schemas import input_schema, tool_policy

VALID = re.compile(r"[a-zA-Z0-9_-]{1,64}\Z")

# --- config -------------------------------------------------------------------------------


def test_claude_desktop_config_file(tmp_path: Path) -> None:
    path = tmp_path / "claude_desktop_config.json"
    path.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "files": {"command": "npx", "args": ["-y", "server"], "env": {"A": "1"}},
                    "remote": {"url": "http://127.0.0.1:9/mcp", "headers": {"X-Key": "k"}},
                    "old": {"type": "sse", "url": "http://127.0.0.1:9/sse"},
                    "off": {"command": "x", "disabled": True},
                }
            }
        )
    )
    files, remote, old = load_mcp_config(path)
    assert (files.transport, files.command, files.args, dict(files.env)) == (
        "stdio",
        "npx",
        ("-y", "server"),
        {"A": "1"},
    )
    assert (remote.transport, remote.url, dict(remote.headers)) == (
        "http",
        "http://127.0.0.1:9/mcp",
        {"X-Key": "k"},
    )
    assert old.transport == "sse"


def test_vs_code_servers_key_and_bare_mapping() -> None:
    assert [c.name for c in load_mcp_config({"servers": {"a": {"command": "x"}}})] == ["a"]
    assert [c.name for c in load_mcp_config({"b": {"command": "x"}})] == ["b"]


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"comand": "x"}, "unknown key(s) 'comand'"),
        ({}, 'needs "command"'),
        ({"command": "x", "url": "http://h/mcp"}, "either"),
        ({"url": "ftp://h"}, "starting with http"),
        ({"command": "x", "type": "websocket"}, "unknown transport 'websocket'"),
        ({"command": "x", "args": "-v"}, "'args' must be a list of strings"),
        ({"command": "x", "env": {"A": 1}}, "'env' must map names to string values"),
        ({"command": "x", "timeout": 0}, "'timeout' must be a positive number"),
        ({"command": "x", "trusted": "yes"}, "'trusted' must be true or false"),
    ],
)
def test_bad_entries_are_refused_with_the_server_name(entry: dict, message: str) -> None:
    with pytest.raises(ToolConfigError) as info:
        MCPServerConfig.from_dict("srv", entry)
    assert "MCP server 'srv'" in str(info.value)
    assert message in str(info.value)


def test_bad_server_name_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ToolConfigError, match="server name"):
        MCPServerConfig.from_dict("my server", {"command": "x"})
    with pytest.raises(ToolConfigError, match="does not exist"):
        load_mcp_config(tmp_path / "nope.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ToolConfigError, match="not valid JSON"):
        load_mcp_config(tmp_path / "bad.json")


def test_env_and_headers_expand_only_named_variables() -> None:
    config = MCPServerConfig.from_dict(
        "s",
        {"url": "http://h/mcp", "headers": {"Authorization": "Bearer ${env:TOKEN}"}},
        environ={"TOKEN": "t0k"},
    )
    assert config.headers["Authorization"] == "Bearer t0k"
    with pytest.raises(ToolConfigError, match=r"\$\{MISSING\} is not set"):
        MCPServerConfig.from_dict("s", {"command": "x", "env": {"A": "${MISSING}"}}, environ={})


def test_include_and_exclude_filters() -> None:
    config = MCPServerConfig.from_dict(
        "s", {"command": "x", "include": ["git_*", "echo"], "exclude": ["git_reset"]}
    )
    assert [n for n in ("git_status", "git_reset", "echo", "other") if config.wants(n)] == [
        "git_status",
        "echo",
    ]


# --- names --------------------------------------------------------------------------------


def test_names_are_prefixed_and_sanitised() -> None:
    names = local_names("github", ["create_issue", "search.code", "list-prs"])
    assert names == {
        "create_issue": "mcp_github_create_issue",
        "search.code": "mcp_github_search_code",
        "list-prs": "mcp_github_list-prs",
    }


def test_long_names_get_a_stable_hash_and_stay_valid() -> None:
    long = "a" * 80
    first = local_names("server", [long, long + "b"])
    again = local_names("server", [long + "b", long])
    assert first == again  # stable, whatever the order
    assert len(set(first.values())) == 2
    assert all(VALID.match(name) and len(name) == 64 for name in first.values())


def test_names_that_collide_after_sanitising_never_collide() -> None:
    names = local_names("s", ["a.b", "a_b", "a b", "ünï"])
    assert names["a_b"] == "mcp_s_a_b"  # a valid name keeps its plain form
    assert len(set(names.values())) == 4
    assert all(VALID.match(name) for name in names.values())


# --- schemas and annotations ----------------------------------------------------------


def test_a_schema_without_type_object_is_normalised() -> None:
    assert input_schema({}, owner="t") == {"type": "object", "properties": {}}
    schema = input_schema({"properties": {"a": {"type": "number"}}}, owner="t")
    assert schema["type"] == "object"


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ({"type": "string"}, 'must describe an object ("type": "object"), got type \'string\''),
        ({"type": "object", "$schema": "http://example.com/s"}, "unknown JSON Schema dialect"),
        (
            {"type": "object", "properties": {"a": {"$ref": "http://example.com/a.json"}}},
            "refers to another document",
        ),
        ([], "must be a JSON object"),
    ],
)
def test_bad_schemas_are_refused(schema: object, message: str) -> None:
    with pytest.raises(ToolDefinitionError) as info:
        input_schema(schema, owner="MCP server 's', tool 't'")
    assert message in str(info.value)
    assert "MCP server 's', tool 't'" in str(info.value)


def test_annotations_drive_policy_and_untrusted_hints_only_tighten() -> None:
    read_only = mt.ToolAnnotations(read_only_hint=True, idempotent_hint=True)
    destructive = mt.ToolAnnotations(read_only_hint=False, destructive_hint=True)
    trusted_ro = tool_policy(read_only, trusted=True, require_approval=False)
    assert (trusted_ro.read_only, trusted_ro.requires_approval, trusted_ro.idempotent) == (
        True,
        False,
        True,
    )
    untrusted_ro = tool_policy(read_only, trusted=False, require_approval=False)
    assert untrusted_ro.read_only is False  # a hint from an untrusted server cannot loosen
    assert tool_policy(destructive, trusted=True, require_approval=False).requires_approval
    assert tool_policy(destructive, trusted=False, require_approval=False).requires_approval
    # a contradictory "read-only and destructive" from an untrusted server: approval wins
    both = mt.ToolAnnotations(read_only_hint=True, destructive_hint=True)
    assert tool_policy(both, trusted=False, require_approval=False).requires_approval
    assert tool_policy(None, trusted=False, require_approval=True).requires_approval


# --- results --------------------------------------------------------------------------


def _result(**fields: object) -> mt.CallToolResult:
    return mt.CallToolResult.model_validate(fields)


def test_mcp_content_becomes_blocks_and_keeps_the_original() -> None:
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 16).decode()
    result = from_mcp_result(
        _result(
            content=[
                {"type": "text", "text": "hi"},
                {"type": "image", "data": png, "mimeType": "image/png"},
                {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"},
                {"type": "resource_link", "uri": "file:///a.txt", "name": "a.txt"},
                {"type": "resource", "resource": {"uri": "mem://x", "text": "inside"}},
            ]
        ),
        server="s",
        tool="t",
    )
    blocks = list(result.content)
    assert blocks[0] == TextBlock("hi")
    assert isinstance(blocks[1], ImageBlock) and blocks[1].data.startswith(b"\x89PNG")
    assert blocks[2] == TextBlock("[audio: audio/wav, 3 bytes]")
    assert blocks[3] == TextBlock("[resource link: a.txt <file:///a.txt>]")
    assert blocks[4] == TextBlock("[resource mem://x]\ninside")
    served = to_mcp_content(result)  # served on: exactly what the server sent
    assert [item.type for item in served] == ["text", "image", "audio", "resource_link", "resource"]
    assert len(result.metadata[CONTENT_KEY]) == 5


def test_a_lone_surrogate_in_a_key_of_lossy_content_is_kept_as_text() -> None:
    # A server in this process can hand one over; dumped as JSON it became U+FFFD.
    link = {"type": "resource_link", "uri": "file:///a", "name": "a", "_meta": {"k\udc80": 1}}
    result = from_mcp_result(_result(content=[link]), server="s", tool="t")
    assert result.metadata[CONTENT_KEY][0]["_meta"] == {"k\\udc80": 1}
    assert to_mcp_content(result)[0].meta == {"k\\udc80": 1}  # served on as sent


def test_structured_content_is_kept_as_json_once() -> None:
    value = {"temperature": 21}
    result = from_mcp_result(
        _result(content=[{"type": "text", "text": json.dumps(value)}], structuredContent=value),
        server="s",
        tool="t",
    )
    assert result.content == [JsonBlock(value)]
    assert result.metadata[STRUCTURED_KEY] == value


def test_is_error_becomes_an_error_result_with_the_kind_it_carries() -> None:
    plain = from_mcp_result(
        _result(content=[{"type": "text", "text": "Error: boom"}], isError=True),
        server="s",
        tool="t",
    )
    assert plain.is_error and plain.error_kind is ErrorKind.EXECUTION_ERROR
    assert plain.text == "Error: MCP server 's' reported that tool 't' failed: boom"
    kinded = from_mcp_result(
        _result(
            content=[{"type": "text", "text": "outside"}],
            isError=True,
            _meta={"toolbridge/error_kind": "workspace_violation"},
        ),
        server="s",
        tool="t",
    )
    assert kinded.error_kind is ErrorKind.WORKSPACE_VIOLATION


def test_toolbridge_results_become_mcp_content() -> None:
    content = to_mcp_content(ToolResult([TextBlock("a"), JsonBlock({"b": 1}), ImageBlock(b"x")]))
    assert [(c.type, getattr(c, "text", None)) for c in content] == [
        ("text", "a"),
        ("text", '{"b": 1}'),
        ("image", None),
    ]


def test_original_content_is_served_on_only_while_the_result_is_unchanged() -> None:
    result = from_mcp_result(
        _result(content=[{"type": "resource_link", "uri": "file:///a", "name": "a"}]),
        server="s",
        tool="t",
    )
    assert [item.type for item in to_mcp_content(result)] == ["resource_link"]
    capped = cap_result(result, call_id="c", max_chars=100, store=None)
    assert capped is result  # short: not capped
    long = from_mcp_result(
        _result(
            content=[
                {"type": "text", "text": "x" * 500},
                {"type": "resource_link", "uri": "file:///a", "name": "a"},
            ]
        ),
        server="s",
        tool="t",
    )
    capped = cap_result(long, call_id="c", max_chars=100, store=None)
    assert [item.type for item in to_mcp_content(capped)] == ["text"]  # what the model saw
