"""Every ```python block of the user guide (docs/guide/*.md) and the README runs.

The rule (docs/guide/index.md): a page's blocks run in order, in one fresh Python
process per page, so a later block may use what an earlier block of the same page
defined; pages never share state. The current directory is an empty temporary
directory (a scratch workspace). A failure names the file and the line where the
failing block starts, with the traceback pointing at lines of the Markdown file.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [*sorted((ROOT / "docs" / "guide").glob("*.md")), ROOT / "README.md"]

FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.M | re.S)

# Runs in the child: exec each block in one namespace, compiled under the Markdown file's
# name with its real line numbers, so a traceback points into the page.
RUNNER = r"""
import sys, traceback
path = sys.argv[1]
blocks = eval(sys.stdin.read())
namespace = {"__name__": "__main__"}
for line, code in blocks:
    try:
        exec(compile("\n" * (line - 1) + code, path, "exec"), namespace)
    except BaseException:
        sys.stderr.write(f"{path}:{line}: the python block starting on this line failed\n")
        traceback.print_exc()
        sys.exit(1)
"""


def python_blocks(page: Path) -> list[tuple[int, str]]:
    """(first code line, code) of each ```python block of `page`, in order."""
    text = page.read_text(encoding="utf-8")
    return [(text.count("\n", 0, m.start(1)) + 1, m.group(1)) for m in FENCE.finditer(text)]


def test_the_guide_exists() -> None:
    names = {page.name for page in PAGES}
    assert {"index.md", "tools.md", "plugins.md", "cli.md"} <= names


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_page_code_runs(page: Path, tmp_path: Path) -> None:
    blocks = python_blocks(page)
    if not blocks:
        return
    relative = str(page.relative_to(ROOT))
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, relative],
        input=repr(blocks),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        pytest.fail(f"{done.stderr}\n(stdout so far:\n{done.stdout})", pytrace=False)


def test_the_harness_reports_file_and_line(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# t\n\n```python\nx = 1\n```\n\ntext\n\n```python\nassert x == 2\n```\n")
    blocks = python_blocks(page)
    assert blocks == [(4, "x = 1\n"), (10, "assert x == 2\n")]
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, str(page)],
        input=repr(blocks),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert done.stderr.startswith(f"{page}:10: the python block starting on this line failed")
    assert f'File "{page}", line 10' in done.stderr
