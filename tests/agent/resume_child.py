"""Run in a child process: resume a paused run from a JSON state file with decisions.

Usage: python -m tests.agent.resume_child PROVIDER SERVER_URL WORKSPACE STATE DECISIONS OUT
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.agent import sample_tools

from toolbridge.agent import ApprovalDecision, ModelAdapter, RunState, message_to_json

REPO = Path(__file__).resolve().parents[2]


def resume_in_subprocess(
    provider: str,
    url: str,
    workspace: Path,
    scratch: Path,
    state: RunState,
    decisions: list[ApprovalDecision],
) -> dict[str, Any]:
    """Save `state` and `decisions` as JSON, resume them in a new Python process, and
    return what that process wrote about the result."""
    state_file, decisions_file, out_file = (
        scratch / "state.json",
        scratch / "decisions.json",
        scratch / "out.json",
    )
    state_file.write_text(json.dumps(state.to_json()))
    decisions_file.write_text(json.dumps([decision.to_json() for decision in decisions]))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), *sys.path])}
    command = [sys.executable, "-m", "tests.agent.resume_child", provider, url]
    command += [str(workspace), str(state_file), str(decisions_file), str(out_file)]
    subprocess.run(command, check=True, cwd=REPO, env=env, timeout=120)
    result: dict[str, Any] = json.loads(out_file.read_text())
    return result


def model(provider: str, url: str) -> ModelAdapter:
    if provider in ("openai_chat", "openai_responses"):
        import openai

        from toolbridge.agent.adapters import OpenAIChatModel, OpenAIResponsesModel

        client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key="test-key", max_retries=0)
        if provider == "openai_responses":
            return OpenAIResponsesModel("gpt-test", client=client)
        return OpenAIChatModel("gpt-test", client=client)
    if provider == "bedrock":
        from tests.agent.test_bedrock import model as bedrock_model

        return bedrock_model(url)
    if provider == "gemini":
        from tests.agent.test_gemini import model as gemini_model

        return gemini_model(url)
    if provider == "ollama":
        import ollama

        from toolbridge.agent.adapters import OllamaModel

        return OllamaModel("qwen3", client=ollama.AsyncClient(host=url))
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
