"""What the session sandbox shows of the Python that runs its supervisor server: the
interpreter's own files, never the rest of the folder (a home directory) it lies in."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from toolbridge.security.sandbox import HIDDEN_PATHS, interpreter_files
from toolbridge.tools.shell import ExecConfig, ExecTool

ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}
PREFIX = Path(os.path.realpath(sys.base_prefix))
EXECUTABLE = Path(os.path.realpath(sys.executable))
PREFIX_ENTRIES = {p.name for p in PREFIX.iterdir()}


async def test_only_the_interpreters_files_are_shown_of_a_hidden_prefix(workspace: Path) -> None:
    prefix, executable = PREFIX, EXECUTABLE
    needed = interpreter_files()
    assert executable in needed
    assert prefix not in needed and all(p != Path(h) for p in needed for h in HIDDEN_PATHS)
    tool = ExecTool(workspace, ExecConfig(sandbox="bwrap"), environ=ENV)
    try:

        async def listing(folder: Path) -> set[str]:
            shown = await tool.execute(command=f"ls -A {folder}")
            assert shown.metadata["exit_code"] == 0, shown.text
            return set(shown.text.rpartition("\nExit code:")[0].split())

        if any(prefix.is_relative_to(h) for h in HIDDEN_PATHS):  # a pyenv under /root, say
            assert await listing(prefix) <= {"bin", "lib"}
            assert await listing(executable.parent) == {executable.name}
            assert await listing(prefix.parent) == {prefix.name}
        else:  # shown anyway, as the rest of the host
            assert await listing(prefix) == PREFIX_ENTRIES
    finally:
        tool.close()
