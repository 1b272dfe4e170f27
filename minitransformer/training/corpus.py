"""The sentence pairs of a run, read for the chosen dataset and turned into token ids."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..data import SharedTokenizer, load_dates, load_multi30k, load_parallel_text
from .options import TrainOptions

Pairs = list[tuple[str, str]]
IdPairs = list[tuple[list[int], list[int]]]

#: The dates' validation and test splits (fixed, so every run is scored on the same dates).
DATES_VALIDATION, DATES_TEST, DATES_SEED = 1000, 1000, 0


@dataclass
class Corpus:
    """Training, validation and (optional) test pairs, and how translations are scored."""

    train: Pairs
    validation: Pairs
    test: Pairs | None
    metric: str


def load_corpus(options: TrainOptions) -> Corpus:
    """Read or generate the pairs of ``options.dataset`` (options already resolved)."""
    o = options
    if o.dataset == "dates":
        kwargs = dict(src_locale=o.src_locale, tgt_locale=o.tgt_locale, n_train=o.train_size or 20_000,
                      n_validation=DATES_VALIDATION, n_test=DATES_TEST, seed=DATES_SEED)
        return Corpus(load_dates("train", **kwargs), load_dates("validation", **kwargs),
                      load_dates("test", **kwargs), "exact_match")
    if o.dataset == "multi30k":
        kwargs = dict(data_dir=o.data_dir, src_lang=o.src_lang, tgt_lang=o.tgt_lang)
        train = load_multi30k("train", **kwargs)
        corpus = Corpus(train, load_multi30k("validation", **kwargs), load_multi30k("test", **kwargs), "bleu")
    else:
        assert o.src_file and o.tgt_file and o.valid_src_file and o.valid_tgt_file
        test = None
        if o.test_src_file and o.test_tgt_file:
            test = load_parallel_text(o.test_src_file, o.test_tgt_file)
        corpus = Corpus(load_parallel_text(o.src_file, o.tgt_file),
                        load_parallel_text(o.valid_src_file, o.valid_tgt_file), test, "bleu")
    corpus.train = [(s, t) for s, t in corpus.train if s and t]
    if o.train_size is not None:
        corpus.train = corpus.train[: o.train_size]
    if not corpus.train:
        raise ValueError(f"dataset {o.dataset!r} gave no training pairs with text on both sides")
    return corpus


def encode_pairs(tokenizer: SharedTokenizer, pairs: Sequence[tuple[str, str]]) -> IdPairs:
    """Token ids of each pair, both sides ending with ``eos`` (the form ``collate_pairs`` expects)."""
    src = tokenizer.encode_batch([s for s, _ in pairs])
    tgt = tokenizer.encode_batch([t for _, t in pairs])
    return list(zip(src, tgt))


def drop_long(pairs: IdPairs, longest: int) -> tuple[IdPairs, int]:
    """Leave out pairs with a side longer than ``longest`` tokens."""
    kept = [p for p in pairs if len(p[0]) <= longest and len(p[1]) <= longest]
    return kept, len(pairs) - len(kept)
