"""A tiny word-level vocabulary for the examples of lessons 01-03.

Words are the lowercase, whitespace-separated pieces of a sentence. Real
training uses the BPE :class:`~minitransformer.data.tokenizer.SharedTokenizer`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

SPECIALS = ("<pad>", "<bos>", "<eos>", "<unk>")  # ids 0, 1, 2, 3


def words(sentence: str) -> list[str]:
    """Split a sentence into lowercase words at whitespace."""
    return sentence.lower().split()


class Vocabulary:
    """Word <-> id table: ``<pad>``=0, ``<bos>``=1, ``<eos>``=2, ``<unk>``=3, then words."""

    pad_id, bos_id, eos_id, unk_id = 0, 1, 2, 3

    def __init__(self, tokens: Iterable[str]) -> None:
        self.id_to_token: list[str] = list(SPECIALS) + [t for t in tokens if t not in SPECIALS]
        self.token_to_id: dict[str, int] = {t: i for i, t in enumerate(self.id_to_token)}
        if len(self.token_to_id) != len(self.id_to_token):
            raise ValueError("expected distinct tokens, got duplicates")

    @classmethod
    def build(cls, sentences: Iterable[str], min_count: int = 1) -> Vocabulary:
        """Collect the words of some sentences, most frequent first (ties alphabetical)."""
        counts = Counter(w for s in sentences for w in words(s))
        kept = sorted((w for w, c in counts.items() if c >= min_count), key=lambda w: (-counts[w], w))
        return cls(kept)

    def __len__(self) -> int:
        return len(self.id_to_token)

    def encode(self, sentence: str, add_bos: bool = False, add_eos: bool = False) -> list[int]:
        """Ids of the words of a sentence; unknown words get ``unk_id``."""
        ids = [self.token_to_id.get(w, self.unk_id) for w in words(sentence)]
        return [self.bos_id] * add_bos + ids + [self.eos_id] * add_eos

    def decode(self, ids: Iterable[int]) -> str:
        """Words of some ids joined by spaces; stops at ``eos``, drops ``pad`` and ``bos``."""
        out = []
        for i in ids:
            i = int(i)
            if i == self.eos_id:
                break
            if not 0 <= i < len(self):
                raise IndexError(f"id {i} is outside the vocabulary of size {len(self)}")
            if i not in (self.pad_id, self.bos_id):
                out.append(self.id_to_token[i])
        return " ".join(out)

    def __repr__(self) -> str:
        return f"Vocabulary({len(self)} tokens: {self.id_to_token[4:10]}...)"
