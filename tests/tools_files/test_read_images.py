"""read_file of an image: an image block every provider format sends as an image, within limits."""

from __future__ import annotations

import base64
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

import pytest

from toolbridge import (
    ErrorKind,
    ImageBlock,
    TextBlock,
    ToolCallRequest,
    ToolContext,
    ToolLoader,
    ToolRegistry,
    ToolResult,
)
from toolbridge.formats import anthropic, bedrock, gemini, ollama, openai_chat, openai_responses
from toolbridge.security.workspace import Workspace
from toolbridge.tools.files import ReadFileConfig, ReadFileTool


def png(width: int, height: int) -> bytes:
    """A valid PNG: 8-bit greyscale, every pixel black."""

    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = zlib.crc32(kind + body) & 0xFFFFFFFF
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    pixels = b"".join(b"\x00" + b"\x00" * width for _ in range(height))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(pixels))
        + chunk(b"IEND", b"")
    )


def gif(width: int, height: int) -> bytes:
    """A valid one-colour GIF89a (a 2-entry palette, one image of LZW code size 2)."""
    screen = b"GIF89a" + struct.pack("<HH", width, height) + b"\x80\x00\x00"
    palette = b"\x00\x00\x00\xff\xff\xff"
    image = b"\x2c" + struct.pack("<HHHH", 0, 0, width, height) + b"\x00"
    data = b"\x02\x02\x44\x01\x00"  # clear, pixel 0, end: enough for a 1x1 image
    return screen + palette + image + data + b"\x3b"


def jpeg(width: int, height: int) -> bytes:
    """A JPEG's markers up to its frame header (SOI, APP0 JFIF, SOF0), as a reader sees them."""
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    sof0 = b"\xff\xc0" + struct.pack(">HBHHB", 11, 8, height, width, 1) + b"\x01\x11\x00"
    return b"\xff\xd8" + app0 + sof0 + b"\xff\xd9"


def webp(width: int, height: int) -> bytes:
    """A lossless WebP's header (RIFF, VP8L chunk with the packed size)."""
    bits = (width - 1) | ((height - 1) << 14)
    body = b"\x2f" + struct.pack("<I", bits) + b"\x00" * 8
    chunk = b"VP8L" + struct.pack("<I", len(body)) + body
    return b"RIFF" + struct.pack("<I", 4 + len(chunk)) + b"WEBP" + chunk


def registry_for(workspace: Path, **config: int | bool) -> ToolRegistry:
    tool = ReadFileTool(Workspace(workspace), ReadFileConfig(**config))  # type: ignore[arg-type]
    return ToolRegistry([tool], context=ToolContext(workspace=workspace))


@pytest.mark.parametrize(
    ("make", "media_type", "kind"),
    [(png, "image/png", "PNG"), (gif, "image/gif", "GIF"), (jpeg, "image/jpeg", "JPEG"),
     (webp, "image/webp", "WEBP")],
)  # fmt: skip
async def test_an_image_file_is_an_image_block(
    workspace: Path, make: object, media_type: str, kind: str
) -> None:
    data = make(40, 30)  # type: ignore[operator]
    (workspace / "picture.bin").write_bytes(data)  # the name says nothing: the bytes decide
    result = await registry_for(workspace).execute("read_file", {"path": "picture.bin"})
    assert not result.is_error, result.text
    assert isinstance(result.content, list)
    note, image = result.content
    assert isinstance(note, TextBlock) and isinstance(image, ImageBlock)
    assert note.text.startswith(f"picture.bin: {kind} image, 40 x 30 pixels, ")
    assert image.media_type == media_type and image.data == data
    assert result.metadata == {
        "media_type": media_type,
        "width": 40,
        "height": 30,
        "bytes": len(data),
    }


async def test_a_png_named_txt_is_still_a_png(workspace: Path) -> None:
    (workspace / "notes.txt").write_bytes(png(2, 2))
    result = await registry_for(workspace).execute("read_file", {"path": "notes.txt"})
    assert isinstance(result.content, list)
    assert isinstance(result.content[1], ImageBlock)
    assert result.content[1].media_type == "image/png"


async def test_an_image_past_the_byte_cap_is_an_error_that_says_so(workspace: Path) -> None:
    data = png(300, 300)
    (workspace / "big.png").write_bytes(data)
    result = await registry_for(workspace, max_image_bytes=100).execute(
        "read_file", {"path": "big.png"}
    )
    assert result.is_error and result.error_kind is ErrorKind.EXECUTION_ERROR
    assert "big.png is an image of" in result.text
    assert "(100 B, read_file.max_image_bytes)" in result.text


async def test_an_image_with_too_many_pixels_is_an_error_with_its_size(workspace: Path) -> None:
    (workspace / "wide.png").write_bytes(png(500, 20))
    result = await registry_for(workspace, max_image_pixels=9_999).execute(
        "read_file", {"path": "wide.png"}
    )
    assert result.is_error
    assert "wide.png is a PNG image of 500 x 20 pixels (10,000 pixels)" in result.text
    assert "nothing was scaled down" in result.text
    small = await registry_for(workspace, max_image_pixels=10_000).execute(
        "read_file", {"path": "wide.png"}
    )
    assert not small.is_error


async def test_the_default_limits_are_5_mb_and_64_megapixels(workspace: Path) -> None:
    config = ReadFileConfig()
    assert config.max_image_bytes == 5 * 1024 * 1024
    assert config.max_image_pixels == 64_000_000
    (workspace / "huge.png").write_bytes(png(8001, 8000)[:33])  # header only: 64 MP + 8000
    result = await registry_for(workspace).execute("read_file", {"path": "huge.png"})
    assert "8001 x 8000 pixels" in result.text and result.is_error


async def test_a_truncated_image_is_an_error_not_an_image(workspace: Path) -> None:
    (workspace / "cut.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    result = await registry_for(workspace).execute("read_file", {"path": "cut.png"})
    assert result.is_error
    assert "cut.png starts like an image, but the PNG header is damaged" in result.text


async def test_other_binary_files_stay_refused(workspace: Path) -> None:
    (workspace / "fake.png").write_bytes(b"\x00\x01\x02 not an image")
    (workspace / "real.png").write_bytes(png(4, 4))
    registry = registry_for(workspace)
    fake = await registry.execute("read_file", {"path": "fake.png"})
    assert fake.is_error and "looks like a binary file" in fake.text
    no_images = registry_for(workspace, images=False)
    refused = await no_images.execute("read_file", {"path": "real.png"})
    assert refused.is_error and "looks like a binary file" in refused.text


async def test_the_limits_come_from_the_read_file_config_section(workspace: Path) -> None:
    (workspace / "p.png").write_bytes(png(10, 10))
    context = ToolContext(workspace=workspace, config={"read_file": {"max_image_pixels": 50}})
    registry = ToolLoader().registry(context)
    result = await registry.execute("read_file", {"path": "p.png"})
    assert result.is_error and "10 x 10 pixels" in result.text


@dataclass(frozen=True)
class Outcome:
    call: ToolCallRequest
    result: ToolResult


async def test_every_provider_format_sends_the_image_as_an_image(workspace: Path) -> None:
    data = png(8, 8)
    (workspace / "shot.png").write_bytes(data)
    result = await registry_for(workspace).execute("read_file", {"path": "shot.png"})
    encoded = base64.b64encode(data).decode()
    outcomes = [Outcome(ToolCallRequest("call_1", "read_file", {"path": "shot.png"}), result)]

    chat = openai_chat.result_messages(outcomes)
    assert chat[1]["content"][1]["image_url"]["url"] == f"data:image/png;base64,{encoded}"
    responses = openai_responses.result_messages(outcomes)
    assert responses[0]["output"][1] == {
        "type": "input_image",
        "image_url": f"data:image/png;base64,{encoded}",
    }
    [anthropic_message] = anthropic.result_messages(outcomes)
    image = anthropic_message["content"][0]["content"][1]
    assert image == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": encoded},
    }
    [gemini_message] = gemini.result_messages(outcomes)
    parts = gemini_message["parts"][0]["functionResponse"]["parts"]
    assert parts == [{"inlineData": {"mimeType": "image/png", "data": encoded}}]
    [ollama_message] = ollama.result_messages(outcomes)
    assert ollama_message["images"] == [encoded]
    [bedrock_message] = bedrock.result_messages(outcomes)
    block = bedrock_message["content"][0]["toolResult"]["content"][1]
    assert block == {"image": {"format": "png", "source": {"bytes": data}}}


async def test_gemini_and_ollama_name_a_gif_they_cannot_take_instead_of_failing(
    workspace: Path,
) -> None:
    (workspace / "anim.gif").write_bytes(gif(2, 2))
    result = await registry_for(workspace).execute("read_file", {"path": "anim.gif"})
    outcomes = [Outcome(ToolCallRequest("call_1", "read_file", {"path": "anim.gif"}), result)]
    [message] = gemini.result_messages(outcomes)
    response = message["parts"][0]["functionResponse"]
    assert "parts" not in response
    assert "image/gif, which Gemini does not take" in response["response"]["output"]
    [ollama_message] = ollama.result_messages(outcomes)
    assert "images" not in ollama_message
    assert "image/gif, which Ollama does not take" in ollama_message["content"]
    [anthropic_message] = anthropic.result_messages(outcomes)
    assert anthropic_message["content"][0]["content"][1]["source"]["media_type"] == "image/gif"
    [bedrock_message] = bedrock.result_messages(outcomes)
    assert bedrock_message["content"][0]["toolResult"]["content"][1]["image"]["format"] == "gif"
