"""``OLLAMA_HOST`` is checked as the other base-URL variables are: one ``Error:`` line
naming it, exit 2, before the SDK loads (it was the SDK's own words without the
variable's name, 'Error: Invalid IPv6 URL', or exit 1 'cannot reach Ollama' for an
``ftp://`` URL). Ollama's own forms stay accepted: a bare ``host:port``, ``:port``
and an empty value (the default), as its client completes them."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.agent.scripted_server import ScriptedServer, ollama_stream, serve


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    yield from serve()


def agent(workspace: Path, host: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OLLAMA_")}
    command = [sys.executable, "-m", "toolbridge", "agent", "hi", "--no-skills"]
    return subprocess.run(
        [*command, "--model", "ollama:qwen3", "--workspace", str(workspace), *args],
        capture_output=True,
        text=True,
        env={**env, "OLLAMA_HOST": host},
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    ("host", "reason"),
    [
        ("http://[::1", "Invalid IPv6 URL"),
        ("127.0.0.1:99999", "Port out of range"),
        ("localhost:abc", "is not a valid URL"),
        ("ftp://127.0.0.1:11434", "not an http:// or https:// URL"),
        ("127.0.0.1:11434/a b", "space or control character"),
    ],
)
def test_a_bad_ollama_host_is_one_line_naming_the_variable(
    tmp_path: Path, host: str, reason: str
) -> None:
    done = agent(tmp_path, host)
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith(f"Error: OLLAMA_HOST {host!r} (from the environment)"), line
    assert reason in line, line
    assert "set OLLAMA_HOST to a host and port such as 127.0.0.1:11434" in line, line
    assert "unset it" in line, line


@pytest.mark.parametrize("form", ["{host}:{port}", "http://{host}:{port}", ":{port}"])
def test_ollamas_own_forms_of_the_host_reach_the_server(
    server: ScriptedServer, tmp_path: Path, form: str
) -> None:
    server.add(ollama_stream(text="hello there"))
    host, port = server.url.removeprefix("http://").split(":")
    done = agent(tmp_path, form.format(host=host, port=port))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "hello there", done.stdout
    assert [request.path for request in server.requests] == ["/api/chat"]


def test_the_flag_is_used_and_the_variable_still_checked(
    server: ScriptedServer, tmp_path: Path
) -> None:
    """Ollama's module reads the variable when it is imported (a default client): a bad
    one failed the run with the SDK's words even with --base-url, so it is checked."""
    done = agent(tmp_path, "http://[::1", "--base-url", server.url)
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith("Error: OLLAMA_HOST 'http://[::1' (from the environment)"), line
    server.add(ollama_stream(text="from the flag"))
    done = agent(tmp_path, "127.0.0.1:9", "--base-url", server.url)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "from the flag"


def test_an_empty_ollama_host_is_the_default_not_an_error(
    server: ScriptedServer, tmp_path: Path
) -> None:
    server.add(ollama_stream(text="empty is unset"))
    done = agent(tmp_path, "", "--base-url", server.url)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "empty is unset"
