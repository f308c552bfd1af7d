"""read_file and write_file through `ToolRegistry.execute`: cast, validate, run, error text."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from toolbridge import ErrorKind, ToolContext, ToolLoader, ToolRegistry
from toolbridge.tools._fs import BINARY_SNIFF_BYTES
from toolbridge.tools.files import ReadFileTool


async def test_read_file_numbers_lines(registry: ToolRegistry, workspace: Path) -> None:
    (workspace / "a.txt").write_text("one\ntwo\r\nthree")
    result = await registry.execute("read_file", {"path": "a.txt"})
    assert not result.is_error
    assert result.text.splitlines() == [
        "     1\tone",
        "     2\ttwo",
        "     3\tthree",
        "… lines 1-3 shown; end of file (a.txt has 3 lines)",
    ]


async def test_read_file_range_with_string_numbers(registry: ToolRegistry, workspace: Path) -> None:
    (workspace / "a.txt").write_text("".join(f"line {n}\n" for n in range(1, 11)))
    result = await registry.execute("read_file", '{"path": "a.txt", "offset": "4", "limit": "2"}')
    assert result.text.splitlines() == [
        "     4\tline 4",
        "     5\tline 5",
        "… lines 4-5 shown; a.txt continues: read on with offset=6",
    ]
    tail = await registry.execute("read_file", {"path": "a.txt", "offset": 9, "limit": 5})
    assert tail.text.splitlines() == [
        "     9\tline 9",
        "    10\tline 10",
        "… lines 9-10 shown; end of file (a.txt has 10 lines)",
    ]


async def test_read_file_offset_past_the_end(registry: ToolRegistry, workspace: Path) -> None:
    (workspace / "a.txt").write_text("x\ny\n")
    result = await registry.execute("read_file", {"path": "a.txt", "offset": 5})
    assert result.is_error and result.error_kind is ErrorKind.EXECUTION_ERROR
    assert "offset 5 is past the end of a.txt, which has 2 lines" in result.text
    assert "between 1 and 2" in result.text


async def test_read_file_empty_and_bom(registry: ToolRegistry, workspace: Path) -> None:
    (workspace / "empty.txt").write_bytes(b"")
    (workspace / "bom.txt").write_bytes(b"\xef\xbb\xbfhello\n")
    assert (
        await registry.execute("read_file", {"path": "empty.txt"})
    ).text == "(empty.txt is empty)"
    assert (await registry.execute("read_file", {"path": "bom.txt"})).text == (
        "     1\thello\n… line 1 shown; end of file (bom.txt has 1 line)"
    )


async def test_read_file_size_cap_says_how_to_read_a_range(
    registry: ToolRegistry, workspace: Path
) -> None:
    (workspace / "big.txt").write_text("0123456789\n" * 30_000)  # 330 KB
    result = await registry.execute("read_file", {"path": "big.txt"})
    assert result.is_error
    assert "more than read_file returns at once" in result.text
    assert "offset=1 and limit=" in result.text
    ranged = await registry.execute("read_file", {"path": "big.txt", "offset": 29_999})
    assert ranged.text.splitlines() == [
        " 29999\t0123456789",
        " 30000\t0123456789",
        "… lines 29999-30000 shown; end of file (big.txt has 30000 lines)",
    ]


async def test_read_file_stops_at_the_output_cap(workspace: Path) -> None:
    from toolbridge.security.workspace import Workspace

    tool = ReadFileTool(Workspace(workspace))
    tool.max_bytes = 100
    (workspace / "a.txt").write_text("x" * 30 + "\n" + "y" * 30 + "\n" + "z" * 30 + "\n" + "w\n")
    text = await tool.execute(path="a.txt", offset=1)
    assert text.splitlines()[-1] == (
        "… lines 1-2 shown (size limit reached); a.txt continues: read on with offset=3"
    )


async def test_read_file_cuts_over_long_lines(registry: ToolRegistry, workspace: Path) -> None:
    (workspace / "min.js").write_text("é" * 50_000 + "\nnext\n")
    result = await registry.execute("read_file", {"path": "min.js"})
    first, second, end = result.text.splitlines()
    assert first.startswith("     1\té") and first.endswith("… [line cut: too long]")
    assert len(first) < 2100
    assert second == "     2\tnext"
    assert end == "… lines 1-2 shown; end of file (min.js has 2 lines)"


async def test_read_file_refuses_binary_and_non_utf8(
    registry: ToolRegistry, workspace: Path
) -> None:
    (workspace / "img.bin").write_bytes(
        b"\x7fELF\x02\x01\x01\x00\x00\x00"
    )  # a program, not an image
    (workspace / "latin.txt").write_bytes("café\n".encode("latin-1"))
    binary = await registry.execute("read_file", {"path": "img.bin"})
    assert binary.is_error and "looks like a binary file" in binary.text
    latin = await registry.execute("read_file", {"path": "latin.txt"})
    assert latin.is_error and "is not UTF-8 text (line 1" in latin.text


async def test_read_file_refuses_nul_bytes_past_the_sniffed_head(
    registry: ToolRegistry, workspace: Path
) -> None:
    """Only the first 8 KB are sniffed for NUL bytes; the lines returned are checked too."""
    lines = [f"line {n}" for n in range(1, 2001)] + ["bad\x00byte", "after"]
    (workspace / "late.txt").write_text("\n".join(lines) + "\n")
    assert (workspace / "late.txt").read_bytes().index(b"\x00") > BINARY_SNIFF_BYTES
    for arguments in ({"offset": 2001}, {"offset": 1990, "limit": 20}):
        result = await registry.execute("read_file", {"path": "late.txt", **arguments})
        assert result.is_error, arguments
        assert "late.txt looks like a binary file (line 2001 contains a NUL byte)" in result.text
        assert "\x00" not in result.text
    # lines around it that hold no NUL are still readable
    before = await registry.execute("read_file", {"path": "late.txt"})
    assert not before.is_error and "\x00" not in before.text
    assert before.text.splitlines()[-1].endswith("read on with offset=2001")
    after = await registry.execute("read_file", {"path": "late.txt", "offset": 2002})
    assert after.text == "  2002\tafter\n… line 2002 shown; end of file (late.txt has 2002 lines)"


async def test_read_file_ordinary_errors(registry: ToolRegistry, workspace: Path) -> None:
    (workspace / "dir").mkdir()
    missing = await registry.execute("read_file", {"path": "nope.txt"})
    assert missing.error_kind is ErrorKind.EXECUTION_ERROR
    assert missing.text.startswith("Error: nope.txt does not exist")
    assert "list_dir" in missing.text
    directory = await registry.execute("read_file", {"path": "dir"})
    assert "dir is a directory, not a file" in directory.text


async def test_read_file_violations(registry: ToolRegistry, workspace: Path, outside: Path) -> None:
    (workspace / "escape").symlink_to(outside)
    for path in ("../outside/secret.txt", "escape/secret.txt", str(outside / "secret.txt")):
        result = await registry.execute("read_file", {"path": path})
        assert result.is_error and result.error_kind is ErrorKind.WORKSPACE_VIOLATION, path
        assert "OUTSIDE-SECRET" not in result.text
        assert "hard boundary" in result.text


@pytest.mark.parametrize(
    ("tool", "arguments", "message"),
    [
        ("read_file", {"path": "pipe"}, "pipe is a FIFO (named pipe)"),
        ("write_file", {"path": "pipe", "content": "x"}, "pipe is a FIFO (named pipe)"),
        ("edit_file", {"path": "pipe", "old_string": "a", "new_string": "b"}, "FIFO"),
        ("read_file", {"path": "notes\x00.txt"}, "contains a NUL byte"),
        ("write_file", {"path": "a/" * 2048, "content": "x"}, "paths are at most 4095 bytes"),
        ("list_dir", {"path": "n" * 300}, "file names are at most 255 bytes"),
        ("glob", {"pattern": "*", "path": "d\x00"}, "contains a NUL byte"),
        ("grep", {"pattern": "x", "path": "d\x00"}, "contains a NUL byte"),
    ],
)
async def test_input_wrong_in_any_workspace_is_invalid_arguments(
    registry: ToolRegistry, workspace: Path, tool: str, arguments: dict[str, str], message: str
) -> None:
    """Not a workspace violation ("hard boundary, do not retry"): the model can fix it."""
    os.mkfifo(workspace / "pipe")
    result = await registry.execute(tool, arguments)
    assert result.is_error and result.error_kind is ErrorKind.INVALID_ARGUMENTS, result.text
    assert message in result.text
    assert "hard boundary" not in result.text


async def test_a_unc_looking_name_is_an_ordinary_file(
    registry: ToolRegistry, workspace: Path
) -> None:
    name = "\\\\server\\share\\x"
    written = await registry.execute("write_file", {"path": name, "content": "unc\n"})
    assert not written.is_error, written.text
    assert (workspace / name).read_text() == "unc\n"
    read = await registry.execute("read_file", {"path": name})
    assert read.text.splitlines()[0] == "     1\tunc"


async def test_read_file_invalid_arguments(registry: ToolRegistry) -> None:
    for args in ({"path": "a", "offset": 0}, {}, {"path": "a", "limit": "1.5"}, {"path": ""}):
        result = await registry.execute("read_file", args)
        assert result.error_kind is ErrorKind.INVALID_ARGUMENTS, args


async def test_write_file_creates_parents_atomically(
    registry: ToolRegistry, workspace: Path
) -> None:
    result = await registry.execute(
        "write_file", {"path": "src/pkg/mod.py", "content": "print('hi')\nx = 1\n"}
    )
    assert result.text == "Created src/pkg/mod.py: 18 bytes, 2 lines."
    assert (workspace / "src" / "pkg" / "mod.py").read_text() == "print('hi')\nx = 1\n"
    again = await registry.execute("write_file", {"path": "src/pkg/mod.py", "content": "ü"})
    assert again.text == "Replaced src/pkg/mod.py: 2 bytes, 1 line."
    assert sorted(p.name for p in (workspace / "src" / "pkg").iterdir()) == ["mod.py"]


async def test_write_file_keeps_the_mode(registry: ToolRegistry, workspace: Path) -> None:
    script = workspace / "run.sh"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o700)
    await registry.execute("write_file", {"path": "run.sh", "content": "#!/bin/sh\necho\n"})
    assert stat.S_IMODE(script.stat().st_mode) == 0o700


async def test_write_file_outside_is_refused_and_creates_nothing(
    registry: ToolRegistry, workspace: Path, outside: Path
) -> None:
    (workspace / "escape").symlink_to(outside)
    (workspace / "dangling").symlink_to(outside / "planted.txt")
    for path in ("../outside/planted.txt", "escape/planted.txt", "dangling", "escape/sub/x"):
        result = await registry.execute("write_file", {"path": path, "content": "x"})
        assert result.error_kind is ErrorKind.WORKSPACE_VIOLATION, path
    assert os.listdir(outside) == ["secret.txt"]


async def test_write_file_errors(registry: ToolRegistry, workspace: Path) -> None:
    (workspace / "dir").mkdir()
    directory = await registry.execute("write_file", {"path": "dir", "content": "x"})
    assert "dir is a directory" in directory.text
    surrogate = await registry.execute("write_file", '{"path": "a.txt", "content": "\\ud800"}')
    assert surrogate.is_error and "lone surrogate" in surrogate.text
    assert not (workspace / "a.txt").exists()


async def test_the_loader_finds_the_tools_with_truthful_flags(workspace: Path) -> None:
    loader = ToolLoader()
    tools = {t.name: t for t in loader.load(ToolContext(workspace=workspace))}
    flags = {
        name: (tools[name].read_only, tools[name].exclusive)
        for name in ("read_file", "write_file", "edit_file", "list_dir", "glob", "grep")
    }
    assert flags == {
        "read_file": (True, False),
        "write_file": (False, False),
        "edit_file": (False, False),
        "list_dir": (True, False),
        "glob": (True, False),
        "grep": (True, False),
    }
    (workspace / "x.txt").write_text("loaded\n")
    registry = ToolRegistry(tools.values(), context=ToolContext(workspace=workspace))
    read = await registry.execute("read_file", {"path": "x.txt"})
    assert read.text.splitlines()[0] == "     1\tloaded"


async def test_tools_over_a_workspace_configured_through_a_symlink(
    tmp_path: Path, workspace: Path, outside: Path
) -> None:
    """Both spellings of the root work end to end (macOS /tmp -> /private/tmp)."""
    (tmp_path / "alias").symlink_to(workspace)
    configured = tmp_path / "alias"
    tools = ToolLoader().registry(ToolContext(workspace=configured))
    written = await tools.execute("write_file", {"path": f"{configured}/a.txt", "content": "x\n"})
    assert not written.is_error, written.text
    for path in (f"{configured}/a.txt", f"{workspace}/a.txt", "a.txt"):
        assert (await tools.execute("read_file", {"path": path})).text.startswith("     1\tx\n")
    found = await tools.execute("glob", {"pattern": f"{configured}/*.txt"})
    assert found.text == "a.txt"
    escape = await tools.execute("read_file", {"path": f"{configured}/../outside/secret.txt"})
    assert escape.error_kind is ErrorKind.WORKSPACE_VIOLATION


@pytest.mark.parametrize("given", [Path, str])
async def test_a_file_tool_built_on_a_plain_path_is_guarded_like_on_a_workspace(
    workspace: Path, outside: Path, given: type
) -> None:
    # `ReadFileTool(Path(...))` was accepted, then every call failed with an
    # AttributeError ('PosixPath' object has no attribute 'relative').
    from toolbridge import ToolCallRequest, ToolExecutor
    from toolbridge.tools.files import WriteFileTool
    from toolbridge.tools.search import GrepTool

    (workspace / "a.txt").write_text("hello\n")
    root = given(workspace)
    registry = ToolRegistry([ReadFileTool(root), WriteFileTool(root), GrepTool(root)])
    read, escape, write, grep = await ToolExecutor(registry).run(
        [
            ToolCallRequest("1", "read_file", {"path": "a.txt"}),
            ToolCallRequest("2", "read_file", {"path": str(outside / "secret.txt")}),
            ToolCallRequest("3", "write_file", {"path": "b.txt", "content": "x"}),
            ToolCallRequest("4", "grep", {"pattern": "hello"}),
        ]
    )
    assert read.result.text.splitlines()[0] == "     1\thello"
    assert escape.error is not None and escape.error.kind is ErrorKind.WORKSPACE_VIOLATION
    assert write.error is None and (workspace / "b.txt").read_text() == "x"
    assert grep.error is None and "a.txt" in grep.result.text
