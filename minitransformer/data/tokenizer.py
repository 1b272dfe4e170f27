"""A byte-pair-encoding vocabulary shared by the source and the target language (paper, section 5.1; lesson 07).

One vocabulary for both sides lets the model tie its two embeddings and the output projection (section 3.4).
Text is NFC-normalised, spaces become "▁" (so decoding restores them), then cut into letter runs, digits and
single symbols before the BPE merges; characters never seen and outside :data:`ALPHABET` become ``<unk>``.
"""

from __future__ import annotations

import hashlib
import json
import statistics
import string
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import tokenizers
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

from ..utils import atomic_write, check_memory
from .text import user_cache_dir

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"
SPECIAL_TOKENS = (PAD, BOS, EOS, UNK)  # ids 0, 1, 2, 3, in this order
SPACE = "▁"  # U+2581, shown in place of a space inside tokens
# One pre-token is: letters (with combining marks), or one digit, or one other
# symbol, each optionally preceded by "▁"; or a lone "▁" for repeated spaces.
PRE_TOKEN_PATTERN = r"▁?[\p{L}\p{M}]+|▁?\p{N}|▁?[^\p{L}\p{M}\p{N}▁]|▁"
# Characters that always get a token even when the training text lacks them.
ALPHABET = tuple(
    sorted(set(string.ascii_letters + string.digits + string.punctuation) | set("äöüÄÖÜß„“”‚‘’«»–—…€°"))
)
CACHE_FORMAT = "minitransformer-bpe-cache"


class CacheWarning(UserWarning):
    """A cache file could not be used and is being rebuilt."""


def empty_tokenizer() -> Tokenizer:
    """An untrained BPE tokenizer with the package's normalizer, pre-tokenizer and decoder."""
    tok = Tokenizer(models.BPE(unk_token=UNK))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Metaspace(replacement=SPACE, prepend_scheme="always", split=False),
            pre_tokenizers.Split(Regex(PRE_TOKEN_PATTERN), behavior="isolated"),
        ]
    )
    tok.decoder = decoders.Metaspace(replacement=SPACE, prepend_scheme="always", split=False)
    return tok


def _pair_texts(pairs: Iterable[tuple[str, str]]) -> list[str]:
    texts = []
    for k, pair in enumerate(pairs):
        if len(pair) != 2 or not all(isinstance(s, str) for s in pair):
            raise TypeError(f"expected (source, target) pairs of strings, item {k} is {pair!r}")
        texts.extend(pair)
    return texts


class SharedTokenizer:
    """BPE tokenizer with one vocabulary for both languages and fixed special ids.

    ``pad_id=0``, ``bos_id=1``, ``eos_id=2``, ``unk_id=3``. Build one with
    :meth:`train` (or :meth:`cached`, which trains once and reuses the result),
    :meth:`from_str` or :meth:`load`.
    """

    pad_id, bos_id, eos_id, unk_id = 0, 1, 2, 3

    def __init__(self, tokenizer: Tokenizer) -> None:
        found = [tokenizer.token_to_id(t) for t in SPECIAL_TOKENS]
        if found != [0, 1, 2, 3]:
            raise ValueError(
                f"expected special tokens {list(SPECIAL_TOKENS)} at ids [0, 1, 2, 3], got ids {found}"
            )
        self.tokenizer = tokenizer

    # --- building -------------------------------------------------------------
    @classmethod
    def train(
        cls, pairs: Iterable[tuple[str, str]], vocab_size: int = 8000, min_frequency: int = 2
    ) -> SharedTokenizer:
        """Learn BPE merges on the source and target sentences together."""
        return cls._train_texts(_pair_texts(pairs), vocab_size, min_frequency)

    @classmethod
    def _train_texts(cls, texts: list[str], vocab_size: int, min_frequency: int) -> SharedTokenizer:
        if vocab_size < len(SPECIAL_TOKENS) + len(ALPHABET):
            raise ValueError(
                f"vocab_size must be at least {len(SPECIAL_TOKENS) + len(ALPHABET)} "
                f"(4 special tokens + the {len(ALPHABET)}-character base alphabet), got {vocab_size}"
            )
        if not texts:
            raise ValueError("expected at least one sentence pair to train on, got none")
        # The trainer reserves about 72 bytes per vocabulary entry up front (a Rust panic if that fails).
        check_memory(72 * vocab_size, f"vocab_size={vocab_size:,} (the BPE trainer reserves ~72 bytes per entry)")
        tok = empty_tokenizer()
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            min_frequency=min_frequency,
            special_tokens=list(SPECIAL_TOKENS),
            initial_alphabet=list(ALPHABET),
            show_progress=False,
        )
        tok.train_from_iterator(texts, trainer=trainer, length=len(texts))
        return cls(tok)

    @classmethod
    def cached(
        cls,
        pairs: Iterable[tuple[str, str]],
        vocab_size: int = 8000,
        min_frequency: int = 2,
        cache_dir: str | Path | None = None,
    ) -> SharedTokenizer:
        """Like :meth:`train`, but stored in a cache file and reused next time."""
        texts = _pair_texts(pairs)
        digest = hashlib.sha256()
        settings = {
            "vocab_size": vocab_size,
            "min_frequency": min_frequency,
            "pattern": PRE_TOKEN_PATTERN,
            "alphabet": "".join(ALPHABET),
            "tokenizers": tokenizers.__version__,
        }
        digest.update(json.dumps(settings, sort_keys=True).encode())
        for text in texts:
            digest.update(text.encode("utf-8") + b"\n")
        key = digest.hexdigest()
        folder = Path(cache_dir) if cache_dir is not None else user_cache_dir("tokenizers")
        path = folder / f"bpe-{key[:16]}.cache.json"
        if path.is_file():
            found = _read_cache(path, key)
            if found is not None:
                return found
        tok = cls._train_texts(texts, vocab_size, min_frequency)
        body = tok.to_str()
        record = {"format": CACHE_FORMAT, "key": key, "settings": settings, "n_texts": len(texts),
                  "sha256": hashlib.sha256(body.encode("utf-8")).hexdigest(), "tokenizer": body}
        atomic_write(path, lambda handle: handle.write(json.dumps(record, ensure_ascii=False).encode("utf-8")))
        return tok

    # --- storing --------------------------------------------------------------
    def to_str(self) -> str:
        """The whole tokenizer as a JSON string (to store inside a checkpoint)."""
        return self.tokenizer.to_str()

    @classmethod
    def from_str(cls, text: str, source: str = "tokenizer JSON") -> SharedTokenizer:
        """Rebuild a tokenizer from :meth:`to_str`'s JSON string."""
        try:
            tokenizer = Tokenizer.from_str(text)
        except Exception as error:  # the Rust library raises a bare Exception
            reason = str(error).splitlines()[0] if str(error) else type(error).__name__
            raise ValueError(f"{source} is not a valid tokenizer: {reason}") from error
        try:
            return cls(tokenizer)
        except ValueError as error:
            raise ValueError(f"{source} is not a minitransformer tokenizer: {error}") from error

    def save(self, path: str | Path) -> None:
        """Write the tokenizer to a JSON file (atomically: temp file, then rename)."""
        atomic_write(path, lambda handle: handle.write(self.to_str().encode("utf-8")))

    @classmethod
    def load(cls, path: str | Path) -> SharedTokenizer:
        """Read a tokenizer written by :meth:`save`."""
        try:
            text = Path(path).read_text(encoding="utf-8")
        except UnicodeDecodeError as error:
            where = f"{error.reason} at byte {error.start}"
            raise ValueError(f"tokenizer file {path} is not UTF-8 text ({where})") from error
        return cls.from_str(text, f"tokenizer file {path}")

    # --- using ----------------------------------------------------------------
    @property
    def vocab_size(self) -> int:
        """Number of tokens, special tokens included (the V of the embedding table)."""
        return self.tokenizer.get_vocab_size()

    def __len__(self) -> int:
        return self.vocab_size

    def encode(self, text: str, add_bos: bool = False, add_eos: bool = True) -> list[int]:
        """Token ids of one sentence."""
        return self._wrap(self.tokenizer.encode(text, add_special_tokens=False).ids, add_bos, add_eos)

    def encode_batch(self, texts: Sequence[str], add_bos: bool = False, add_eos: bool = True) -> list[list[int]]:
        """:meth:`encode` for many sentences at once (in parallel, much faster)."""
        encodings = self.tokenizer.encode_batch(list(texts), add_special_tokens=False)
        return [self._wrap(e.ids, add_bos, add_eos) for e in encodings]

    def _wrap(self, ids: list[int], add_bos: bool, add_eos: bool) -> list[int]:
        return [self.bos_id] * add_bos + ids + [self.eos_id] * add_eos

    def decode(self, ids: Iterable[int]) -> str:
        """Text of a sequence of ids: stops at the first ``eos``, drops ``pad`` and ``bos``.

        ``<unk>`` stays visible in the text, so a reader sees what was unknown.
        """
        kept = []
        for i in ids:
            i = int(i)
            if not 0 <= i < self.vocab_size:
                raise ValueError(f"token id {i} is outside the vocabulary (ids 0 to {self.vocab_size - 1}): "
                                 "it has no text; were the ids made with another tokenizer?")
            if i == self.eos_id:
                break
            if i not in (self.pad_id, self.bos_id):
                kept.append(i)
        return self.tokenizer.decode(kept, skip_special_tokens=False)

    def decode_batch(self, rows: Iterable[Iterable[int]]) -> list[str]:
        """:meth:`decode` for each row (e.g. of a (B, T) tensor)."""
        return [self.decode(row) for row in rows]

    def tokens(self, text: str) -> list[str]:
        """The token strings of a sentence, for display (no specials)."""
        return self.tokenizer.encode(text, add_special_tokens=False).tokens

    def id_to_token(self, i: int) -> str:
        """Token string of one id."""
        token = self.tokenizer.id_to_token(int(i))
        if token is None:
            raise IndexError(f"token id {i} is outside the vocabulary of size {self.vocab_size}")
        return token

    def token_to_id(self, token: str) -> int:
        """Id of one token string; ``unk_id`` when it is not in the vocabulary."""
        i = self.tokenizer.token_to_id(token)
        return self.unk_id if i is None else i

    def __repr__(self) -> str:
        return f"SharedTokenizer(vocab_size={self.vocab_size})"


def _read_cache(path: Path, key: str) -> SharedTokenizer | None:
    """The cached tokenizer if ``path`` is intact and made for ``key``; else None, with a warning."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        reason = f"it is truncated or corrupted ({error})"
    else:
        body = record.get("tokenizer") if isinstance(record, dict) else None
        if not isinstance(record, dict) or record.get("format") != CACHE_FORMAT or not isinstance(body, str):
            reason = "it is not a minitransformer tokenizer cache file"
        elif record.get("key") != key:
            reason = "it was made from other training text or settings (its key does not match)"
        elif hashlib.sha256(body.encode("utf-8")).hexdigest() != record.get("sha256"):
            reason = "its tokenizer does not match its checksum"
        else:
            try:
                return SharedTokenizer.from_str(body, f"tokenizer cache {path}")
            except ValueError as error:
                reason = str(error)
    warnings.warn(f"tokenizer cache {path} cannot be used: {reason}; training the tokenizer again and replacing "
                  "the file", CacheWarning, stacklevel=3)
    return None


@dataclass(frozen=True)
class TokenizationReport:
    """Numbers that describe how a tokenizer cuts a corpus."""

    vocab_size: int
    n_sentences: int
    mean_tokens: float
    max_tokens: int
    unk_fraction: float


def tokenization_report(tokenizer: SharedTokenizer, sentences: Sequence[str]) -> TokenizationReport:
    """Vocabulary size and tokens per sentence (without specials) over a corpus."""
    if not sentences:
        raise ValueError("expected at least one sentence, got an empty corpus")
    rows = tokenizer.encode_batch(sentences, add_eos=False)
    lengths = [len(r) for r in rows]
    n_unk = sum(r.count(tokenizer.unk_id) for r in rows)
    return TokenizationReport(
        vocab_size=tokenizer.vocab_size,
        n_sentences=len(rows),
        mean_tokens=statistics.fmean(lengths),
        max_tokens=max(lengths),
        unk_fraction=n_unk / max(1, sum(lengths)),
    )
