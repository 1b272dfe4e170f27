"""Tiny Shakespeare (karpathy/char-rnn's ``input.txt``) for the decoder-only language model of lesson 09.

Looked for in ``data_dir``, ``$MINITRANSFORMER_DATA_DIR``, then the user cache, and checked against its SHA-256;
downloaded when missing, else a built-in excerpt, so the lessons and tests also run offline.
"""

from __future__ import annotations

import http.client
import os
import urllib.error
import urllib.request
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import BinaryIO

import torch
from torch import Tensor

from ..utils import atomic_write
from .multi30k import ChecksumError, sha256_of
from .text import user_cache_dir

URL = "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt"
SHA256 = "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"
ENV_VAR = "MINITRANSFORMER_DATA_DIR"
FILE_NAME = "input.txt"
#: The fallback: a few famous speeches (public domain), about 5 KB, enough to learn spelling and verse.
EXCERPT = "shakespeare_excerpt.txt"


@dataclass(frozen=True)
class Corpus:
    """A text and where it came from."""

    text: str
    source: str

    @property
    def is_excerpt(self) -> bool:
        """True when the full file was unavailable and the built-in excerpt stands in."""
        return self.source == "built-in excerpt"


def _candidates(data_dir: str | Path | None) -> list[Path]:
    folders: list[Path] = []
    if data_dir is not None:
        folders.append(Path(data_dir).expanduser())
    elif os.environ.get(ENV_VAR):
        folders.append(Path(os.environ[ENV_VAR]).expanduser())
    else:
        folders.append(user_cache_dir())
    return [p for folder in folders for p in (folder / "tinyshakespeare" / FILE_NAME, folder / FILE_NAME)]


def _verify(path: Path) -> None:
    actual = sha256_of(path)
    if actual != SHA256:
        raise ChecksumError(f"{path} has the wrong SHA-256 checksum: expected {SHA256}, got {actual}. It is not "
                            f"Tiny Shakespeare's input.txt; delete it, or download it again from {URL}")


def _download(target: Path) -> None:
    def fetch(out: BinaryIO) -> None:
        with urllib.request.urlopen(URL, timeout=60) as response:
            while chunk := response.read(1 << 20):
                out.write(chunk)

    atomic_write(target, fetch, check=_verify)


def load_tiny_shakespeare(data_dir: str | Path | None = None, download: bool = True,
                          fallback: bool = True) -> Corpus:
    """Tiny Shakespeare as one string, or the built-in excerpt when it cannot be had."""
    candidates = _candidates(data_dir)
    for path in candidates:
        if path.is_file():
            _verify(path)
            return Corpus(path.read_text(encoding="utf-8"), str(path))
    reason = "download=False"
    if download:
        base = Path(data_dir).expanduser() if data_dir is not None else (
            Path(os.environ[ENV_VAR]).expanduser() if os.environ.get(ENV_VAR) else user_cache_dir())
        target = base / "tinyshakespeare" / FILE_NAME
        try:
            _download(target)
            return Corpus(target.read_text(encoding="utf-8"), str(target))
        except (urllib.error.URLError, http.client.HTTPException, OSError) as error:
            reason = f"download from {URL} failed: {error}"
    if fallback:
        return Corpus(files(__package__).joinpath(EXCERPT).read_text(encoding="utf-8"), "built-in excerpt")
    raise FileNotFoundError(
        f"Tiny Shakespeare not found (looked for {', '.join(str(p) for p in candidates)}; {reason}). Download "
        f"{URL} and pass data_dir=<its folder> or set {ENV_VAR}=<its folder>"
    )


class CharTokenizer:
    """One token per character: the vocabulary is the sorted set of characters of a text."""

    def __init__(self, text: str) -> None:
        if not text:
            raise ValueError("text is empty: expected at least one character to build a vocabulary from")
        self.chars: list[str] = sorted(set(text))
        self.char_to_id: dict[str, int] = {c: i for i, c in enumerate(self.chars)}

    def __len__(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> Tensor:
        """int64 ids (len(text),); a character outside the vocabulary is an error that names it."""
        unknown = sorted(set(text) - self.char_to_id.keys())
        if unknown:
            raise ValueError(f"characters {unknown} are not in the vocabulary of {len(self)} characters")
        return torch.tensor([self.char_to_id[c] for c in text], dtype=torch.long)

    def decode(self, ids: Tensor | list[int]) -> str:
        """The characters of some ids."""
        return "".join(self.chars[int(i)] for i in ids)

    def __repr__(self) -> str:
        return f"CharTokenizer({len(self)} characters)"


def split_ids(ids: Tensor, validation_fraction: float = 0.1) -> tuple[Tensor, Tensor]:
    """Cut a stream of ids into a training part and a validation part (the last ``validation_fraction``).

    A contiguous cut, not a random one: neighbouring characters are nearly copies of each other,
    so scattering validation positions through the text would leak it into training.
    """
    if not 0 < validation_fraction < 1:
        raise ValueError(f"validation_fraction must be between 0 and 1, got {validation_fraction}")
    cut = int(len(ids) * (1 - validation_fraction))
    return ids[:cut], ids[cut:]


def lm_batch(ids: Tensor, block_size: int, batch_size: int,
             generator: torch.Generator | None = None) -> tuple[Tensor, Tensor]:
    """Random windows of a token stream and the same windows shifted by one: inputs and next-token targets."""
    if len(ids) <= block_size:
        raise ValueError(f"the stream has {len(ids)} tokens: expected more than block_size={block_size}")
    starts = torch.randint(0, len(ids) - block_size, (batch_size,), generator=generator)  # (B,)
    offsets = torch.arange(block_size)  # (T,)
    x = ids[starts[:, None] + offsets]  # (B, T)
    y = ids[starts[:, None] + offsets + 1]  # (B, T)
    return x, y
