"""The messages between the grader and a submission's process (:mod:`.runner`), both ways.

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
STALL = 20.0  # seconds a frame may pause half-way
MAX_ELEMENTS = 32 << 20  # tensor elements in one answer from the sandbox (a stride-0 view may claim far more than it sends)
WRITE_WAIT = 10.0  # seconds the grader waits for the runner to read what it sends


class Closed(Exception):
    """The other side closed its end, or its deadline passed."""


class TooLarge(Exception):
    """A frame larger than the grader accepts."""


def write_frame(fd: int, header: dict[str, Any], payload: bytes = b"", deadline: float | None = None) -> None:
    """Write one frame to the file descriptor ``fd``.

    With a ``deadline`` (``time.monotonic()``) the grader never blocks past it: ``fd`` is switched to
    non-blocking writes and ``TimeoutError`` is raised when the other side stops reading (a
    submission that asks for something and never reads the answer must not hang the grader).
    Without one (the runner's side) the write blocks.
    """
    head = json.dumps(header).encode()
    data = memoryview(struct.pack("<II", len(head), len(payload)) + head + payload)
    if deadline is not None:
        os.set_blocking(fd, False)
    while data:
        if deadline is not None:
            wait = deadline - time.monotonic()
            if wait <= 0 or not select.select([], [fd], [], wait)[1]:
                raise TimeoutError("the other side stopped reading")
        try:
            written = os.write(fd, data)
        except BlockingIOError:
            continue
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


def read_frame(fd: int, deadline: float | None = None, *, max_payload: int = MAX_PAYLOAD,
               limit: float | None = None) -> tuple[dict[str, Any], bytes]:
    """Read one frame; ``TimeoutError`` when ``deadline`` (``time.monotonic()``) passes before it starts.

    Once its first byte is there, the rest of the frame is read whole (a frame cut in two would leave
    the channel out of step); a frame that stalls half-way for ``STALL`` seconds, or is not whole by
    ``limit``, closes the channel.
    """
    def stall() -> float:
        return min(time.monotonic() + STALL, limit) if limit is not None else time.monotonic() + STALL

    if deadline is not None:
        wait = deadline - time.monotonic()
        if wait <= 0 or not select.select([fd], [], [], wait)[0]:
            raise TimeoutError
    else:
        select.select([fd], [], [])
    try:
        sizes = _read_exact(fd, 8, stall())
        head_size, payload_size = struct.unpack("<II", sizes)
        if head_size > MAX_HEADER or payload_size > max_payload:
            raise TooLarge(f"a message of {head_size + payload_size:,} bytes (at most {max_payload:,})")
        header = json.loads(_read_exact(fd, head_size, stall()))
        if not isinstance(header, dict):
            raise TooLarge("a message that is not a JSON object")
        return header, _read_exact(fd, payload_size, stall()) if payload_size else b""
    except TimeoutError:
        raise Closed("a message stalled half-way") from None


def save_plain(obj: Any) -> bytes:
    """``torch.save`` to bytes (the runner's side)."""
    import torch

    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


def load_plain(data: bytes, max_elements: int = MAX_ELEMENTS) -> Any:
    """Read what :func:`save_plain` wrote, allowing only plain data (the grader's side).

    Only dense tensors of at most ``max_elements`` elements in all are accepted: a view with zero
    strides can claim billions of elements on a few bytes of storage, and the checks copy what they
    compare (``.double()``), so such an answer would otherwise make the grader allocate without bound.

    Raises:
        TooLarge: a tensor that is not dense, or too many elements.
    """
    import torch

    value = torch.load(io.BytesIO(data), weights_only=True, map_location="cpu")
    total = 0
    for tensor in _tensors_in(value, 0):
        if tensor.layout != torch.strided or tensor.is_meta or tensor.is_quantized:
            raise TooLarge(f"a {tensor.layout} tensor: the grader accepts only dense tensors")
        total += tensor.numel()
        if total > max_elements:
            raise TooLarge(f"tensors of more than {max_elements:,} elements in one answer")
    return value


def _tensors_in(value: Any, depth: int) -> Any:
    import torch

    if depth > 50:
        raise TooLarge("an answer nested more than 50 levels deep")
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _tensors_in(item, depth + 1)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _tensors_in(item, depth + 1)
