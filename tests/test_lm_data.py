"""Data of lessons 09 and 09b: Tiny Shakespeare (found, checked, or the built-in excerpt), characters, word order."""

from __future__ import annotations

import os
import urllib.error
from pathlib import Path

import pytest
import torch

from minitransformer.data import (ChecksumError, CharTokenizer, lm_batch, load_tiny_shakespeare, load_word_order,
                                  pad_sequences, plain_words, shuffle_word_order, split_ids)
from minitransformer.data import shakespeare

# Reference data beside the checkout (never committed), as in conftest.py; MINITRANSFORMER_DATA_DIR names another.
SHARED_DATA = Path(os.environ.get("MINITRANSFORMER_DATA_DIR")
                   or Path(__file__).resolve().parents[2] / "shared" / "data")
SHAKESPEARE = SHARED_DATA / "tinyshakespeare" / "input.txt"


def _no_network(target: Path) -> None:
    raise urllib.error.URLError("no network in this test")


def test_excerpt_when_the_folder_is_empty(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("MINITRANSFORMER_DATA_DIR", str(tmp_path))
    monkeypatch.setattr(shakespeare, "_download", _no_network)
    corpus = load_tiny_shakespeare()
    assert corpus.is_excerpt and corpus.source == "built-in excerpt"
    assert 4_000 < len(corpus.text) < 10_000 and "To be, or not to be" in corpus.text
    assert load_tiny_shakespeare(download=False).is_excerpt


def test_the_excerpt_ships_as_package_data() -> None:
    """pyproject.toml's package-data names the excerpt, so a wheel holds it (pip wheel . and look inside)."""
    import fnmatch

    tomllib = pytest.importorskip("tomllib")  # Python 3.11 on
    pyproject = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = pyproject["tool"]["setuptools"]["package-data"]["minitransformer.data"]
    assert any(fnmatch.fnmatch(shakespeare.EXCERPT, p) for p in patterns)


def test_no_fallback_raises_with_the_places_looked_at(tmp_path: Path):
    with pytest.raises(FileNotFoundError, match="MINITRANSFORMER_DATA_DIR") as info:
        load_tiny_shakespeare(tmp_path, download=False, fallback=False)
    assert str(tmp_path) in str(info.value) and "download=False" in str(info.value)


def test_a_wrong_file_is_refused(tmp_path: Path):
    (tmp_path / "input.txt").write_text("not Shakespeare\n")
    with pytest.raises(ChecksumError, match="expected 86c4e6aa"):
        load_tiny_shakespeare(tmp_path, download=False)


def test_a_download_lands_in_the_named_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    def fake_download(target: Path) -> None:
        target.parent.mkdir(parents=True)
        target.write_text("ROMEO:\nHi.\n")

    monkeypatch.setattr(shakespeare, "_download", fake_download)
    corpus = load_tiny_shakespeare(tmp_path)
    assert corpus.source == str(tmp_path / "tinyshakespeare" / "input.txt") and corpus.text.startswith("ROMEO")


@pytest.mark.skipif(not SHAKESPEARE.is_file(), reason=f"reference copy absent: {SHAKESPEARE}")
def test_the_real_file_is_found_and_checked():
    corpus = load_tiny_shakespeare(SHARED_DATA, download=False)
    assert not corpus.is_excerpt
    assert len(corpus.text) == 1_115_394 and len(CharTokenizer(corpus.text)) == 65


def test_char_tokenizer_round_trip_and_unknown_characters():
    tokenizer = CharTokenizer("hello world")
    assert len(tokenizer) == 8 and tokenizer.chars[0] == " "
    ids = tokenizer.encode("low")
    assert ids.dtype == torch.long and tokenizer.decode(ids) == "low"
    with pytest.raises(ValueError, match=r"\['z'\] are not in the vocabulary"):
        tokenizer.encode("lolz")
    with pytest.raises(ValueError, match="text is empty"):
        CharTokenizer("")


def test_split_and_batches():
    ids = torch.arange(100)
    train, validation = split_ids(ids, 0.1)
    assert torch.equal(train, torch.arange(90)) and torch.equal(validation, torch.arange(90, 100))
    x, y = lm_batch(train, 8, 4, torch.Generator().manual_seed(0))
    assert x.shape == y.shape == (4, 8)
    assert torch.equal(y[:, :-1], x[:, 1:]) and torch.equal(y[:, -1], x[:, -1] + 1)
    with pytest.raises(ValueError, match="block_size=8"):
        lm_batch(torch.arange(8), 8, 2)
    with pytest.raises(ValueError, match="validation_fraction"):
        split_ids(ids, 1.5)


def test_plain_words_drop_case_and_the_punctuation_around_words():
    assert plain_words("A man, in a \"red\" T-shirt, waves .") == ["a", "man", "in", "a", "red", "t-shirt", "waves"]
    assert plain_words("...") == []


def test_shuffled_sentences_hold_the_same_words_in_another_order():
    sentences = [f"A dog, number {i}, runs on grass." for i in range(200)] + ["too short", "a a a"]
    texts, labels = shuffle_word_order(sentences, seed=1)
    assert len(texts) == 200 and 70 < sum(labels) < 130
    for original, text, label in zip(sentences, texts, labels):
        assert sorted(text.split()) == sorted(plain_words(original))
        assert (text == " ".join(plain_words(original))) == (label == 1)
    assert shuffle_word_order(sentences, seed=1) == (texts, labels)


def _last_word_has_a_full_stop(texts: list[str], labels: list[int]) -> float:
    """Accuracy of the shortcut "original iff the last word ends with '.'"."""
    return sum((t.split()[-1].endswith(".")) == (label == 1) for t, label in zip(texts, labels)) / len(texts)


def test_no_punctuation_or_capital_marks_the_original_order():
    """Every original ends with '.' and starts with a capital: neither may survive into either class."""
    sentences = [f"The {c}at number {i} sleeps on a mat." for i in range(300) for c in "bcr"][:600]
    texts, labels = shuffle_word_order(sentences, seed=3)
    assert all(t == t.lower() and not any(ch in t for ch in ".,;:!?") for t in texts)
    assert 0.4 < _last_word_has_a_full_stop(texts, labels) < 0.6  # the shortcut is at chance
    first_is_the = sum((t.split()[0] == "the") == (label == 1) for t, label in zip(texts, labels)) / len(texts)
    assert first_is_the > 0.8  # an order signal that remains, as it should: "the" usually comes first


def test_word_order_falls_back_to_dates(tmp_path: Path):
    data = load_word_order("validation", data_dir=tmp_path, limit=100)
    assert data.source == "dates" and len(data.sentences) == len(data.labels) == 100
    assert set(data.labels) == {0, 1}


@pytest.mark.skipif(not (SHARED_DATA / "multi30k").is_dir(), reason="reference Multi30k absent")
def test_word_order_uses_multi30k_captions():
    data = load_word_order("validation", data_dir=SHARED_DATA / "multi30k")
    assert data.source == "multi30k" and len(data.sentences) > 1_000
    # The raw captions end in "." (95% of them): the rule that exploited it is now at chance.
    assert abs(_last_word_has_a_full_stop(data.sentences, data.labels) - 0.5) < 0.05


def test_pad_sequences():
    out = pad_sequences([[5, 6, 7], [8]], pad_id=0)
    assert torch.equal(out, torch.tensor([[5, 6, 7], [8, 0, 0]]))
    assert pad_sequences([[5, 6, 7], [8]], max_len=2).shape == (2, 2)
    with pytest.raises(ValueError, match="sequences is empty"):
        pad_sequences([])
