"""A model server that cannot be reached is named with what set its URL: the provider's
variable when it came from the environment (``OLLAMA_HOST``), not ``--base-url``, which
the user did not give; and the SDK's words end in a full stop before the question.
Before: 'cannot reach Ollama: All connection attempts failed Is it running at
http://127.0.0.1:9? Check --base-url and --model.'"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def agent(workspace: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OLLAMA_")}
    command = [sys.executable, "-m", "toolbridge", "agent", "hi", "--no-skills"]
    return subprocess.run(
        [*command, "--model", "ollama:qwen3", "--workspace", str(workspace), *args],
        capture_output=True,
        text=True,
        env={**clean, **env},
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    ("env", "args", "setting"),
    [
        ({"OLLAMA_HOST": "127.0.0.1:9"}, (), "OLLAMA_HOST"),
        ({}, ("--base-url", "http://127.0.0.1:9"), "--base-url"),
    ],
)
def test_an_unreached_server_names_what_set_its_url(
    workspace: Path, env: dict[str, str], args: tuple[str, ...], setting: str
) -> None:
    done = agent(workspace, env, *args)
    assert done.returncode == 1, done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith("Error: cannot reach Ollama: "), line
    assert line.endswith(f". Is it running at http://127.0.0.1:9? Check {setting} and --model."), (
        line
    )
