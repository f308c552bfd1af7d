"""Every ```python block of the user guide (docs/guide/*.md) and the README runs.

The rule (docs/guide/index.md): a page's blocks run in order, in one fresh Python
process per page, so a later block may use what an earlier block of the same page
defined; pages never share state. The current directory is an empty temporary
directory (a scratch workspace). A failure names the file and the line where the
failing block starts, with the traceback pointing at lines of the Markdown file.

An example checks what it shows: every block runs at least one ``assert`` (counted as
it runs, so an assert in a function nobody calls does not count), and a page without
code fails unless it is listed in NO_CODE with the reason.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [*sorted((ROOT / "docs" / "guide").glob("*.md")), ROOT / "README.md"]

NO_CODE = {"docs/guide/index.md": "the guide's table of contents and its rules"}

FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.M | re.S)

# Runs in the child: exec each block in one namespace, compiled under the Markdown file's
# name with its real line numbers, so a traceback points into the page. Each assert
# statement first counts itself, so a block whose asserts never ran is reported.
RUNNER = r"""
import ast, sys, traceback
path = sys.argv[1]
blocks = eval(sys.stdin.read())
checks = []
namespace = {"__name__": "__main__", "__guide_checks__": checks}

class Count(ast.NodeTransformer):
    def visit_Assert(self, node):
        count = ast.parse("__guide_checks__.append(1)").body[0]
        return [ast.copy_location(count, node), node]

for line, code in blocks:
    before = len(checks)
    try:
        tree = Count().visit(ast.parse("\n" * (line - 1) + code, path))
        exec(compile(ast.fix_missing_locations(tree), path, "exec"), namespace)
    except BaseException:
        sys.stderr.write(f"{path}:{line}: the python block starting on this line failed\n")
        traceback.print_exc()
        sys.exit(1)
    if len(checks) == before:
        sys.stderr.write(
            f"{path}:{line}: the python block starting on this line ran no assert: an "
            "example checks what it shows (assert the result it prints or describes)\n"
        )
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
    relative = str(page.relative_to(ROOT))
    if relative in NO_CODE:
        assert not blocks, f"{relative} has code now: take it off NO_CODE"
        return
    assert blocks, f"{relative} has no ```python block: show the page's subject in code"
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
    page.write_text(
        "# t\n\n```python\nx = 1\nassert x\n```\n\ntext\n\n```python\nassert x == 2\n```\n"
    )
    blocks = python_blocks(page)
    assert blocks == [(4, "x = 1\nassert x\n"), (11, "assert x == 2\n")]
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
    assert done.stderr.startswith(f"{page}:11: the python block starting on this line failed")
    assert f'File "{page}", line 11' in done.stderr


def test_the_harness_refuses_a_block_whose_asserts_never_run(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "```python\nassert 1 + 1 == 2\n```\n\n"
        "```python\ndef check():\n    assert False\nprint('shown, never checked')\n```\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, str(page)],
        input=repr(python_blocks(page)),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert done.stderr.startswith(f"{page}:6: the python block starting on this line ran no")
