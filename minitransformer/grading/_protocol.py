"""The messages between the grader and a submission's process (:mod:`._runner`), both ways.

A message is a frame: 8 bytes (the lengths of a JSON header and of a payload, little-endian
uint32), the header, the payload. The grader sends the runner pickles (the runner trusts the
grader); the runner sends the grader only ``torch.save`` payloads of plain data (tensors, numbers,
strings, lists, tuples, dicts), which the grader reads with ``torch.load(weights_only=True)``: a
submission cannot make the grader run code by what it sends.

This module is copied into the submission's sandbox; it holds no check and no answer.
"""

from __future__ import annotations

import io
import json
import os
import select
import struct
import time
from typing import Any

__all__ = ["Closed", "TooLarge", "read_frame", "write_frame"]

MAX_HEADER = 1 << 20  # bytes of JSON in one frame
MAX_PAYLOAD = 256 << 20  # bytes of tensors in one frame
STALL = 60.0  # seconds a frame may pause half-way


class Closed(Exception):
    """The other side closed its end, or its deadline passed."""


class TooLarge(Exception):
    """A frame larger than the grader accepts."""


def write_frame(fd: int, header: dict[str, Any], payload: bytes = b"") -> None:
    """Write one frame to the file descriptor ``fd`` (blocking)."""
    head = json.dumps(header).encode()
    data = memoryview(struct.pack("<II", len(head), len(payload)) + head + payload)
    while data:
        written = os.write(fd, data)
        data = data[written:]


def _read_exact(fd: int, size: int, deadline: float | None) -> bytes:
    parts, left = [], size
    while left:
        if deadline is not None:
            wait = deadline - time.monotonic()
            if wait <= 0 or not select.select([fd], [], [], wait)[0]:
                raise TimeoutError
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            raise Closed("the other side closed the channel")
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def read_frame(fd: int, deadline: float | None = None, *, max_payload: int = MAX_PAYLOAD) -> tuple[dict[str, Any], bytes]:
    """Read one frame; ``TimeoutError`` when ``deadline`` (``time.monotonic()``) passes before it starts.

    Once its first byte is there, the rest of the frame is read whole (a frame cut in two would leave
    the channel out of step); a frame that stalls half-way for ``STALL`` seconds closes the channel.
    """
    if deadline is not None:
        wait = deadline - time.monotonic()
        if wait <= 0 or not select.select([fd], [], [], wait)[0]:
            raise TimeoutError
    else:
        select.select([fd], [], [])
    try:
        sizes = _read_exact(fd, 8, time.monotonic() + STALL)
        head_size, payload_size = struct.unpack("<II", sizes)
        if head_size > MAX_HEADER or payload_size > max_payload:
            raise TooLarge(f"a message of {head_size + payload_size:,} bytes (at most {max_payload:,})")
        header = json.loads(_read_exact(fd, head_size, time.monotonic() + STALL))
        if not isinstance(header, dict):
            raise TooLarge("a message that is not a JSON object")
        return header, _read_exact(fd, payload_size, time.monotonic() + STALL) if payload_size else b""
    except TimeoutError:
        raise Closed("a message stalled half-way") from None


def save_plain(obj: Any) -> bytes:
    """``torch.save`` to bytes (the runner's side)."""
    import torch

    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


def load_plain(data: bytes) -> Any:
    """Read what :func:`save_plain` wrote, allowing only plain data (the grader's side)."""
    import torch

    return torch.load(io.BytesIO(data), weights_only=True, map_location="cpu")
