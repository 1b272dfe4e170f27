"""Plain parallel text: one sentence per line, a source file and a target file.

Line i of the source file translates line i of the target file. Files ending in
``.gz`` are read through gzip. Also home of the user cache folder shared by the
downloaders and the tokenizer cache.
"""

from __future__ import annotations

import gzip
import os
import zlib
from pathlib import Path
from typing import IO


def user_cache_dir(*parts: str) -> Path:
    """The package's cache folder: ``$XDG_CACHE_HOME`` or ``~/.cache``, then ``minitransformer``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser().joinpath("minitransformer", *parts)


def open_text(path: str | Path, encoding: str = "utf-8") -> IO[str]:
    """Open a text file for reading, through gzip when its name ends in ``.gz``."""
    path = Path(path)
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding=encoding, newline="")
    return open(path, encoding=encoding, newline="")


def read_lines(path: str | Path, encoding: str = "utf-8") -> list[str]:
    """Read a file as a list of sentences, one per line, without line endings.

    Surrounding whitespace and a leading byte-order mark are stripped; empty lines are
    kept so that line numbers of two parallel files stay aligned.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such text file: {path}")
    try:
        with open_text(path, encoding) as handle:
            text = handle.read()
    except UnicodeDecodeError as error:
        raise ValueError(f"{path} is not {encoding} text: byte 0x{error.object[error.start]:02x} at offset "
                         f"{error.start}{' of its unpacked text' if path.suffix == '.gz' else ''} cannot be "
                         f"decoded; expected {encoding} text, one sentence per line") from None
    except (gzip.BadGzipFile, EOFError, zlib.error) as error:
        raise ValueError(f"{path} ends in .gz but is not a complete gzip file ({error}); expected gzip-compressed "
                         "text, or rename it without .gz if it is plain text") from None
    text = text.removeprefix("\ufeff")  # a byte-order mark (Windows editors write one) is not text
    # Split on "\n" only: str.splitlines() would also break at characters such as
    # U+2028 or form feeds inside a sentence and shift every later line.
    if text.endswith("\n"):
        text = text[:-1]
    return [line.strip() for line in text.split("\n")] if text else []


def load_parallel_text(
    src_path: str | Path, tgt_path: str | Path, encoding: str = "utf-8"
) -> list[tuple[str, str]]:
    """Read two line-aligned files into sentence pairs."""
    src_lines = read_lines(src_path, encoding)
    tgt_lines = read_lines(tgt_path, encoding)
    if len(src_lines) != len(tgt_lines):
        raise ValueError(
            f"parallel files must have the same number of lines, but {src_path} has "
            f"{len(src_lines)} and {tgt_path} has {len(tgt_lines)}"
        )
    return list(zip(src_lines, tgt_lines))
