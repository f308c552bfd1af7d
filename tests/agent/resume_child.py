"""Run in a child process: resume a paused run from a JSON state file with decisions.

Usage: python -m tests.agent.resume_child PROVIDER SERVER_URL WORKSPACE STATE DECISIONS OUT
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.agent import sample_tools

from toolbridge.agent import ApprovalDecision, ModelAdapter, RunState, message_to_json


def model(provider: str, url: str) -> ModelAdapter:
    if provider == "openai_chat":
        import openai

        from toolbridge.agent.adapters import OpenAIChatModel

        client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="test-key", max_retries=0)
        return OpenAIChatModel("gpt-test", client=client)
    import anthropic

    from toolbridge.agent.adapters import AnthropicModel

    aclient = anthropic.AsyncAnthropic(base_url=url, api_key="test-key", max_retries=0)
    return AnthropicModel("claude-test", client=aclient)


def main(argv: list[str]) -> None:
    provider, url, workspace, state_path, decisions_path, out_path = argv
    state = RunState.from_json(Path(state_path).read_text())
    decisions = [
        ApprovalDecision.from_json(item) for item in json.loads(Path(decisions_path).read_text())
    ]
    runner = sample_tools.runner(model(provider, url), Path(workspace))
    result = runner.run_sync(state, decisions=decisions)
    Path(out_path).write_text(
        json.dumps(
            {
                "stop_reason": result.stop_reason.value,
                "output": result.output,
                "turns": result.turns,
                "conversation": [message_to_json(m) for m in result.conversation],
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1:])
