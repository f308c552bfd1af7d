"""The agent names at the top level load on first use: `import toolbridge` stays light."""

from __future__ import annotations

import subprocess
import sys

import pytest


def test_import_toolbridge_does_not_load_the_agent_loop() -> None:
    code = (
        "import sys, toolbridge\n"
        "assert 'toolbridge.agent' not in sys.modules\n"
        "assert 'toolbridge.formats.gemini' not in sys.modules\n"
        "from toolbridge import AgentRunner, StopReason\n"
        "import toolbridge.agent as agent\n"
        "assert AgentRunner is agent.AgentRunner and StopReason is agent.StopReason\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_unknown_names_are_still_attribute_errors() -> None:
    import toolbridge

    with pytest.raises(AttributeError, match="no attribute 'AgentRunnr'"):
        toolbridge.AgentRunnr  # noqa: B018
    assert {"AgentRunner", "RunState", "StopReason"} <= set(toolbridge.__all__)
