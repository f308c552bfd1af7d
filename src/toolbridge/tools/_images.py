"""Image files for multimodal models: the kind from the bytes, the size from the header.

`read_image_header` tells a PNG, JPEG, GIF or WebP file by its magic bytes (never by
its name) and reads its width and height from the header, without decoding pixels,
so that a size limit is checked before an image is sent anywhere.
"""

from __future__ import annotations

from dataclasses import dataclass

from toolbridge.core.results import image_media_type

__all__ = ["ImageHeader", "read_image_header"]


@dataclass(frozen=True, slots=True)
class ImageHeader:
    """What the header of an image file says: its media type and its size in pixels."""

    media_type: str
    width: int
    height: int

    @property
    def pixels(self) -> int:
        return self.width * self.height

    @property
    def kind(self) -> str:
        """The format's short name: PNG, JPEG, GIF or WEBP."""
        return self.media_type.removeprefix("image/").upper()


def read_image_header(data: bytes) -> ImageHeader | None:
    """The header of the image `data` holds, or None when its bytes are no image we know.

    Raises ValueError when the magic bytes name an image but the header that must
    follow them is missing or broken (a truncated or corrupt file).
    """
    media_type = image_media_type(data)
    if media_type is None:
        return None
    size = _SIZE_READERS[media_type](data)
    if size is None or size[0] <= 0 or size[1] <= 0:
        raise ValueError(f"the {media_type.removeprefix('image/').upper()} header is damaged")
    return ImageHeader(media_type, *size)


def _png(data: bytes) -> tuple[int, int] | None:
    # Signature (8), then the IHDR chunk: length (4), "IHDR", width (4), height (4).
    if len(data) < 24 or data[12:16] != b"IHDR":
        return None
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def _gif(data: bytes) -> tuple[int, int] | None:
    if len(data) < 10:
        return None
    return int.from_bytes(data[6:8], "little"), int.from_bytes(data[8:10], "little")


# Start-of-frame markers (baseline, progressive, lossless ...); C4, C8 and CC are not.
_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


def _jpeg(data: bytes) -> tuple[int, int] | None:
    index = 2
    while index + 4 <= len(data):
        if data[index] != 0xFF:
            return None
        marker = data[index + 1]
        if marker == 0xFF:  # fill byte
            index += 1
            continue
        if marker in (0x01, *range(0xD0, 0xD8)):  # markers without a length
            index += 2
            continue
        length = int.from_bytes(data[index + 2 : index + 4], "big")
        if marker in _SOF:
            if index + 9 > len(data):
                return None
            height = int.from_bytes(data[index + 5 : index + 7], "big")
            width = int.from_bytes(data[index + 7 : index + 9], "big")
            return width, height
        if length < 2:
            return None
        index += 2 + length
    return None


def _webp(data: bytes) -> tuple[int, int] | None:
    chunk = data[12:16]
    if chunk == b"VP8 " and len(data) >= 30 and data[23:26] == b"\x9d\x01\x2a":
        width = int.from_bytes(data[26:28], "little") & 0x3FFF
        height = int.from_bytes(data[28:30], "little") & 0x3FFF
        return width, height
    if chunk == b"VP8L" and len(data) >= 25 and data[20] == 0x2F:
        bits = int.from_bytes(data[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8X" and len(data) >= 30:
        return int.from_bytes(data[24:27], "little") + 1, int.from_bytes(data[27:30], "little") + 1
    return None


_SIZE_READERS = {"image/png": _png, "image/gif": _gif, "image/jpeg": _jpeg, "image/webp": _webp}
