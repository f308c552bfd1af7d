"""`make run` (examples/demo.sh) shows each step it promises: the cast, the did-you-mean,
the refusal, and says which example files are hand-written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_demo_shows_every_step() -> None:
    toolbridge = Path(sys.executable).parent / "toolbridge"
    assert toolbridge.exists(), "the toolbridge console script is installed with the package"
    done = subprocess.run(
        ["sh", "examples/demo.sh", str(toolbridge)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    steps = [line for line in done.stdout.splitlines() if line.startswith("== ")]
    assert [step[:5] for step in steps] == ["== 1.", "== 2.", "== 3.", "== 4.", "== Do"]
    assert "repaired $.limit: cast '5' -> 5" in done.stderr
    assert "ok: read_file [call_readme]  repaired: $.limit '5' -> 5" in done.stderr
    assert "Did you mean 'grep'?" in done.stderr
    assert "error (workspace_violation): read_file [call_escape]" in done.stderr
    assert "hand-written" in done.stdout
    assert "hand-written" in (ROOT / "examples" / "README.md").read_text()
