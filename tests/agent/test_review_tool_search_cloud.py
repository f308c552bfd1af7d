"""Review: Claude on Vertex AI (and Bedrock) took the first-party tool-search beta header.

The model id ``claude-sonnet-4-5@20250929`` picks the provider's own search, and the
request went out with ``anthropic-beta: advanced-tool-use-2025-11-20``; Vertex AI and
Bedrock take ``tool-search-tool-2025-10-19`` for the same server tool, so they refused
every request of the run.
"""

from __future__ import annotations

from pathlib import Path

import anthropic
from tests.agent.scripted_server import ScriptedServer, anthropic_stream
from tests.agent.test_tool_search_native import BETA, registry, runner

from toolbridge.agent.adapters import AnthropicModel

CLOUD_BETA = "tool-search-tool-2025-10-19"


async def test_claude_on_vertex_sends_the_cloud_tool_search_beta(
    server: ScriptedServer, workspace: Path
) -> None:
    client = anthropic.AsyncAnthropicVertex(
        region="us-east5",
        project_id="project",
        access_token="token",
        base_url=f"{server.url}/v1",
        max_retries=0,
    )
    server.add(anthropic_stream([{"type": "text", "text": "Hi."}]))
    model = AnthropicModel("claude-sonnet-4-5@20250929", client=client)
    await runner(model, registry(workspace)).run("Hello.")

    (request,) = server.requests
    assert request.path.endswith("claude-sonnet-4-5@20250929:streamRawPredict")
    assert request.body["tools"][0]["type"] == "tool_search_tool_bm25_20251119"
    betas = request.headers["anthropic-beta"].split(",")
    assert CLOUD_BETA in betas and BETA not in betas


async def test_claude_on_the_anthropic_api_keeps_its_own_beta(
    server: ScriptedServer, workspace: Path
) -> None:
    client = anthropic.AsyncAnthropic(base_url=server.url, api_key="test-key", max_retries=0)
    server.add(anthropic_stream([{"type": "text", "text": "Hi."}]))
    await runner(AnthropicModel("claude-sonnet-4-5", client=client), registry(workspace)).run("Hi")
    (request,) = server.requests
    betas = request.headers["anthropic-beta"].split(",")
    assert BETA in betas and CLOUD_BETA not in betas
