"""Every ```python block of the executor and results guide pages runs, as a user would run it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guide"
PAGES = ("executor.md", "results.md")
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)

BLOCKS = [
    pytest.param(code, id=f"{page}-{number}")
    for page in PAGES
    for number, code in enumerate(BLOCK.findall((GUIDE / page).read_text()), 1)
]


@pytest.mark.parametrize("code", BLOCKS)
def test_guide_block_runs(code: str, tmp_path: Path) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    temp = tmp_path / "temp"
    temp.mkdir()
    env = {**os.environ, "TMPDIR": str(temp)}
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=scratch,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
