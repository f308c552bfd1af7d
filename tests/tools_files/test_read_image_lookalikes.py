"""A text file that starts with an image's magic bytes ('GIF89a is the format ...') is text:
read_file refused it as a GIF of 26912 x 8307 pixels. A real image still is an image."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from tests.tools_files.test_read_images import gif, jpeg, png, webp

from toolbridge import ImageBlock, TextBlock, ToolContext, ToolLoader, ToolRegistry


@pytest.fixture
def tools(workspace: Path) -> ToolRegistry:
    return ToolLoader().registry(ToolContext(workspace=workspace))


@pytest.mark.parametrize(
    "text",
    [
        "GIF89a is the format we use for the logo.\nSecond line\n",
        "GIF87a\n",
        "RIFF1234WEBP notes: the container of a WebP file\n",
        "GIF89a — ünïcode after the magic\n",
    ],
)
async def test_a_text_file_starting_like_an_image_is_read_as_text(
    tools: ToolRegistry, workspace: Path, text: str
) -> None:
    (workspace / "notes.txt").write_text(text)
    result = await tools.execute("read_file", {"path": "notes.txt"})
    assert not result.is_error, result.text
    lines = text.splitlines()
    assert result.text.splitlines()[: len(lines)] == [
        f"{n:>6}\t{line}" for n, line in enumerate(lines, 1)
    ]


@pytest.mark.parametrize("make", [png, gif, jpeg, webp])
async def test_real_images_are_still_images(
    tools: ToolRegistry, workspace: Path, make: Callable[[int, int], bytes]
) -> None:
    (workspace / "pic.txt").write_bytes(make(300, 300))  # the name says text: the bytes win
    result = await tools.execute("read_file", {"path": "pic.txt"})
    assert not result.is_error, result.text
    assert not isinstance(result.content, str)
    assert [type(block) for block in result.content] == [TextBlock, ImageBlock]
