"""``mcp serve --servers``: a server that cannot start is reported once, with or without
``-v`` (the gateway's warning, which says it retries; the command printed the same
problem again in its own words)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.parametrize("verbose", [(), ("-v",)])
def test_a_server_that_cannot_start_is_reported_once(
    tmp_path: Path, verbose: tuple[str, ...]
) -> None:
    missing = tmp_path / "no-such-server"
    config = tmp_path / "servers.json"
    config.write_text(json.dumps({"mcpServers": {"gone": {"command": str(missing)}}}))
    done = subprocess.run(
        [sys.executable, "-m", "toolbridge", "mcp", "serve", "--servers", str(config), *verbose],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,  # the stdio server ends once the gateway started
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    told = [line for line in done.stderr.splitlines() if str(missing) in line]
    assert len(told) == 1, done.stderr
    assert "'gone'" in told[0] and "retrying" in told[0], told
