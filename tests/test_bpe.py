"""BPE written out (minitransformer.data.bpe) learns and applies the same merges as `tokenizers`."""

from __future__ import annotations

import json
import random

import pytest
from tokenizers import trainers

from minitransformer.data import SharedTokenizer, load_dates
from minitransformer.data.bpe import apply_bpe, bpe_tokens, count_pairs, learn_bpe, merge_pair, pre_tokenize, word_counts
from minitransformer.data.tokenizer import SPECIAL_TOKENS, empty_tokenizer


def _random_corpus(seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join("".join(rng.choice("abcd") for _ in range(rng.randint(1, 7))) for _ in range(8))
            for _ in range(40)]


CORPORA = {
    "repeated letters": ["a aa aaa aaaa aaaaa", "aaa aaa b ab ba aba"],
    "English and German": [
        "a man in a warm jacket", "ein Mann in einer warmen Jacke", "two men play football in the street!",
        "zwei Männer spielen Fußball auf der Straße!", "the size of the apples, says Jürgen.",
        "die Größe der Äpfel, sagt Jürgen.", "a woman carries 3 bags and 1 umbrella.",
    ] * 3,
    "dates": [s for pair in load_dates("train", n_train=200, n_validation=0, n_test=0) for s in pair],
    "random letters, seed 0": _random_corpus(0),
    "random letters, seed 1": _random_corpus(1),
}


def _library_bpe(texts: list[str], min_frequency: int):
    tok = empty_tokenizer()  # the package's normalizer and pre-tokenizer
    trainer = trainers.BpeTrainer(vocab_size=100_000, min_frequency=min_frequency,
                                  special_tokens=list(SPECIAL_TOKENS), show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m)
              for m in json.loads(tok.to_str())["model"]["merges"]]
    return tok, merges


@pytest.mark.parametrize("min_frequency", [1, 2, 3])
@pytest.mark.parametrize("name", list(CORPORA))
def test_learn_bpe_equals_the_tokenizers_trainer(name: str, min_frequency: int) -> None:
    texts = CORPORA[name]
    tok, expected = _library_bpe(texts, min_frequency)
    merges = learn_bpe(word_counts(texts), min_frequency=min_frequency)
    assert len(merges) > 2
    assert merges == expected  # same merges, same order: ties broken the same way
    alphabet = {t for t in tok.get_vocab() if len(t) == 1}
    for text in texts[:6] + ["the unseen word Zebraß, and a 9 and é"]:
        assert bpe_tokens(text, merges, alphabet) == tok.encode(text).tokens, text


def test_learn_bpe_equals_the_shared_tokenizer() -> None:
    pairs = load_dates("train", n_train=200, n_validation=0, n_test=0)
    shared = SharedTokenizer.train(pairs, vocab_size=5000, min_frequency=2)
    expected = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m)
                for m in json.loads(shared.to_str())["model"]["merges"]]
    assert learn_bpe(word_counts(s for pair in pairs for s in pair), min_frequency=2) == expected


def test_overlapping_pairs_count_twice_and_merge_left_to_right() -> None:
    assert count_pairs({("a", "a", "a"): 5}) == {("a", "a"): 10}
    assert merge_pair(("a", "a", "a"), ("a", "a")) == ("aa", "a")
    assert merge_pair(("a", "a", "a", "a"), ("a", "a")) == ("aa", "aa")
    assert merge_pair(("a", "ab", "a", "b"), ("a", "b")) == ("a", "ab", "ab")  # symbols, not characters


def test_ties_go_to_the_smallest_ranks() -> None:
    # (b, a) is seen first but (a, b) has the smaller ranks; then "ab" ranks after every character.
    assert learn_bpe({"ba": 2, "ab": 2}, num_merges=1) == [("a", "b")]
    assert learn_bpe({"abz": 3, "yz": 3}, num_merges=2, min_frequency=1) == [("a", "b"), ("y", "z")]


def test_num_merges_and_min_frequency_stop() -> None:
    counts = word_counts(CORPORA["English and German"])
    assert learn_bpe(counts, num_merges=4) == learn_bpe(counts)[:4]
    assert learn_bpe({"ab": 1}) == []
    assert learn_bpe({"ab": 1}, min_frequency=1) == [("a", "b")]


def test_pre_tokenize_marks_word_starts_and_splits_punctuation() -> None:
    assert pre_tokenize("a cat, 12") == ["▁a", "▁cat", ",", "▁1", "2"]
    assert apply_bpe("▁cat", [("a", "t"), ("▁c", "at")]) == ["▁", "c", "at"]  # no ("▁", "c"): no "▁c"
    assert apply_bpe("▁cat", [("a", "t"), ("▁", "c"), ("▁c", "at")]) == ["▁cat"]
    assert apply_bpe("▁cät", [("a", "t")], alphabet=set("▁cat")) == ["▁", "c", "<unk>", "t"]


@pytest.mark.parametrize("counts, message", [
    ({"ab": 0}, "positive int count"), ({"": 2}, "non-empty words"), ({"ab": 1.5}, "positive int count"),
])
def test_bad_counts_are_refused(counts: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        learn_bpe(counts)
