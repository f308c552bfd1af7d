"""read_file says where a read ends (a whole file as a range does); list_dir says how many
entries it left out."""

from __future__ import annotations

from pathlib import Path

from toolbridge import ToolRegistry


async def test_a_range_that_reaches_the_end_says_so(
    registry: ToolRegistry, workspace: Path
) -> None:
    (workspace / "f.txt").write_text("".join(f"line {n}\n" for n in range(1, 6)))
    middle = await registry.execute("read_file", {"path": "f.txt", "offset": 2, "limit": 2})
    assert middle.text.splitlines()[-1] == (
        "… lines 2-3 shown; f.txt continues: read on with offset=4"
    )
    last = await registry.execute("read_file", {"path": "f.txt", "offset": 4, "limit": 2})
    assert last.text.splitlines() == [
        "     4\tline 4",
        "     5\tline 5",
        "… lines 4-5 shown; end of file (f.txt has 5 lines)",
    ]
    past = await registry.execute("read_file", {"path": "f.txt", "offset": 3})
    assert past.text.splitlines()[-1] == "… lines 3-5 shown; end of file (f.txt has 5 lines)"


async def test_a_whole_file_read_says_where_it_ends_as_a_range_does(
    registry: ToolRegistry, workspace: Path
) -> None:
    (workspace / "f.txt").write_text("a\nb\n")
    whole = await registry.execute("read_file", {"path": "f.txt"})
    ranged = await registry.execute("read_file", {"path": "f.txt", "offset": 1, "limit": 5})
    assert (
        whole.text
        == ranged.text
        == ("     1\ta\n     2\tb\n… lines 1-2 shown; end of file (f.txt has 2 lines)")
    )
    (workspace / "one.txt").write_text("only")
    one = await registry.execute("read_file", {"path": "one.txt"})
    assert one.text == "     1\tonly\n… line 1 shown; end of file (one.txt has 1 line)"


async def test_list_dir_says_how_many_entries_it_left_out(
    registry: ToolRegistry, workspace: Path
) -> None:
    for n in range(7):
        (workspace / f"f{n}.txt").write_text("x")
    listed = await registry.execute("list_dir", {"max_entries": 3})
    assert listed.text.splitlines() == [
        "f0.txt  (1 B)",
        "f1.txt  (1 B)",
        "f2.txt  (1 B)",
        "… stopped at 3 of 7 entries; list a subdirectory, or raise max_entries (at most 5000)",
    ]
    everything = await registry.execute("list_dir", {"max_entries": 7})
    assert "stopped" not in everything.text
