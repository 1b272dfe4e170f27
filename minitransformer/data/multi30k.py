"""Multi30k task 1 (Elliott et al., 2016), German-English captions: download, verify, load (lessons 08b and 10).

Files are looked for in ``data_dir``, then ``$MINITRANSFORMER_MULTI30K_DIR``, then the user cache; a missing
one is downloaded into that folder and every file must match its SHA-256.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import urllib.error
import urllib.request
from pathlib import Path
from typing import BinaryIO

from ..utils import atomic_write
from .text import load_parallel_text, user_cache_dir

BASE_URL = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw/"
ENV_VAR = "MINITRANSFORMER_MULTI30K_DIR"
LANGUAGES = ("de", "en")
SPLIT_FILES = {"train": "train", "validation": "val", "test": "test_2016_flickr"}
SHA256 = {
    "test_2016_flickr.de.gz": "9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8",
    "test_2016_flickr.en.gz": "611d361c6334bc7246101d48097c13cf5c4413c5befc793cc629934359d532d9",
    "train.de.gz": "726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6",
    "train.en.gz": "d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f",
    "val.de.gz": "f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a",
    "val.en.gz": "14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28",
}


class ChecksumError(ValueError):
    """A data file's SHA-256 differs from the one the project expects."""


def multi30k_dir(data_dir: str | Path | None = None) -> Path:
    """The folder where Multi30k files are looked for and downloaded to."""
    if data_dir is not None:
        return Path(data_dir).expanduser()
    if os.environ.get(ENV_VAR):
        return Path(os.environ[ENV_VAR]).expanduser()
    return user_cache_dir("multi30k")


def sha256_of(path: str | Path) -> str:
    """SHA-256 hex digest of a file, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _check(path: Path) -> None:
    expected = SHA256[path.name]
    actual = sha256_of(path)
    if actual != expected:
        raise ChecksumError(
            f"{path} has the wrong SHA-256 checksum: expected {expected}, got {actual}. "
            "The file is damaged or not the Multi30k release; delete it and run again "
            "to download it afresh."
        )


def _download(name: str, folder: Path) -> None:
    """Download one file into ``folder``: temp file, checksum, then atomic rename."""
    url = BASE_URL + name

    def fetch(out: BinaryIO) -> None:
        with urllib.request.urlopen(url, timeout=60) as response:
            while chunk := response.read(1 << 20):
                out.write(chunk)

    def verify(tmp: Path) -> None:
        actual = sha256_of(tmp)
        if actual != SHA256[name]:
            raise ChecksumError(
                f"downloaded {url} but its SHA-256 checksum is wrong: expected "
                f"{SHA256[name]}, got {actual}; the file was not kept"
            )

    atomic_write(folder / name, fetch, check=verify)


def _all_names() -> list[str]:
    return [f"{stem}.{lang}.gz" for stem in SPLIT_FILES.values() for lang in LANGUAGES]


def _where(data_dir: str | Path | None) -> str:
    """How the folder was chosen, in the user's terms."""
    if data_dir is not None:
        return "given by --data-dir (data_dir= from Python)"
    if os.environ.get(ENV_VAR):
        return f"given by ${ENV_VAR}"
    return "the default cache folder"


def _missing_message(folder: Path, data_dir: str | Path | None, reason: str) -> str:
    missing = [name for name in _all_names() if not (folder / name).is_file()]
    return (
        f"Multi30k files missing from {folder} ({_where(data_dir)}): {', '.join(missing)} "
        f"({len(missing)} of {len(SPLIT_FILES) * len(LANGUAGES)}). Downloading them from {BASE_URL} failed "
        f"({reason}). Download them by hand from {BASE_URL}<file> into {folder}, or put all six files in a "
        f"folder of your choice and pass --data-dir <folder> on the command line (data_dir=<folder> from "
        f"Python) or set the environment variable {ENV_VAR}=<folder>."
    )


def fetch_multi30k(
    splits: tuple[str, ...] = ("train", "validation", "test"),
    data_dir: str | Path | None = None,
    download: bool = True,
) -> Path:
    """Make sure the files of the given splits are present and verified.

    Files already present are checked first (a wrong one is refused, never
    overwritten), then missing ones are downloaded when ``download`` is true.
    """
    for split in splits:
        if split not in SPLIT_FILES:
            raise ValueError(f"split must be one of {tuple(SPLIT_FILES)}, got {split!r}")
    folder = multi30k_dir(data_dir)
    if not folder.is_dir() and (data_dir is not None or os.environ.get(ENV_VAR)):
        # A folder the user named is input: a typo must not become a new, empty folder.
        raise FileNotFoundError(
            f"the Multi30k folder {folder} ({_where(data_dir)}) does not exist; expected an existing folder "
            f"holding {', '.join(_all_names())}"
        )
    names = [f"{SPLIT_FILES[split]}.{lang}.gz" for split in splits for lang in LANGUAGES]
    missing = []
    for name in names:
        if (folder / name).is_file():
            _check(folder / name)
        else:
            missing.append(name)
    if missing and not download:
        raise FileNotFoundError(_missing_message(folder, data_dir, "download=False"))
    for name in missing:
        try:
            _download(name, folder)
        except (urllib.error.URLError, http.client.HTTPException, OSError) as error:
            raise FileNotFoundError(_missing_message(folder, data_dir, str(error))) from error
    return folder


def load_multi30k(
    split: str = "train",
    data_dir: str | Path | None = None,
    src_lang: str = "de",
    tgt_lang: str = "en",
    download: bool = True,
) -> list[tuple[str, str]]:
    """Load one split of Multi30k task 1 as sentence pairs."""
    if {src_lang, tgt_lang} != set(LANGUAGES):
        raise ValueError(
            f"src_lang and tgt_lang must be 'de' and 'en' in either order, got "
            f"src_lang={src_lang!r}, tgt_lang={tgt_lang!r}"
        )
    folder = fetch_multi30k((split,), data_dir, download)
    stem = SPLIT_FILES[split]
    return load_parallel_text(folder / f"{stem}.{src_lang}.gz", folder / f"{stem}.{tgt_lang}.gz")
