"""The shared BPE tokenizer: round trips, special ids, storing, caching."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from minitransformer.data import SharedTokenizer, load_dates, load_multi30k, tokenization_report

MULTI30K = Path(__file__).resolve().parents[2] / "shared" / "data" / "multi30k"

GERMAN_ENGLISH = [
    ("Ein kleines Mädchen klettert über die Brücke.", "A little girl climbs over the bridge."),
    ("Zwei Männer spielen Fußball auf der Straße!", "Two men play football in the street!"),
    ("Die Größe der Äpfel: „sehr groß“, sagt Jürgen.", "The size of the apples: \"very big\", says Jürgen."),
    ("Öffnet ihr die Tür? Nein – sie ist zu.", "Do you open the door? No - it is closed."),
    ("Eine Frau trägt 3 Taschen, 2 Hüte und 1 Schirm.", "A woman carries 3 bags, 2 hats and 1 umbrella."),
]


@pytest.fixture(scope="module")
def pairs() -> list[tuple[str, str]]:
    return load_dates("train", n_train=1500, n_validation=0, n_test=0) + GERMAN_ENGLISH * 20


@pytest.fixture(scope="module")
def tokenizer(pairs: list[tuple[str, str]]) -> SharedTokenizer:
    return SharedTokenizer.train(pairs, vocab_size=600, min_frequency=2)


def test_special_ids(tokenizer: SharedTokenizer) -> None:
    assert (tokenizer.pad_id, tokenizer.bos_id, tokenizer.eos_id, tokenizer.unk_id) == (0, 1, 2, 3)
    assert [tokenizer.id_to_token(i) for i in range(4)] == ["<pad>", "<bos>", "<eos>", "<unk>"]
    assert 150 < tokenizer.vocab_size <= 600 and len(tokenizer) == tokenizer.vocab_size


def test_round_trip_german_and_punctuation(tokenizer: SharedTokenizer, pairs: list[tuple[str, str]]) -> None:
    texts = [s for p in pairs[:200] + GERMAN_ENGLISH for s in p]
    texts += ["Süße Ölbäume, größer als ÄÖÜ…", "zwei  Leerzeichen", "€ 5,00 — 10 % «billig»"]
    for text in texts:
        ids = tokenizer.encode(text)
        assert ids[-1] == tokenizer.eos_id and tokenizer.unk_id not in ids
        assert tokenizer.decode(ids) == text


def test_encode_options_and_decode_stops(tokenizer: SharedTokenizer) -> None:
    ids = tokenizer.encode("Samstag, 21. November 2026", add_bos=True, add_eos=True)
    assert ids[0] == tokenizer.bos_id and ids[-1] == tokenizer.eos_id
    assert tokenizer.encode("Samstag", add_eos=False)[-1] != tokenizer.eos_id
    padded = torch.tensor(ids + [tokenizer.pad_id] * 3 + tokenizer.encode("Montag"))
    assert tokenizer.decode(padded) == "Samstag, 21. November 2026"  # tensors work, stops at eos
    assert tokenizer.decode_batch([ids, tokenizer.encode("Montag")]) == ["Samstag, 21. November 2026", "Montag"]
    assert tokenizer.encode_batch(["Montag", "Dienstag"]) == [tokenizer.encode("Montag"), tokenizer.encode("Dienstag")]
    assert "".join(tokenizer.tokens("Holz.")).replace("▁", "") == "Holz."
    assert tokenizer.tokens("Holz.")[-1] == "."  # punctuation is its own token


def test_unknown_characters_become_unk(tokenizer: SharedTokenizer) -> None:
    ids = tokenizer.encode("Katze 猫", add_eos=False)
    assert tokenizer.unk_id in ids
    assert tokenizer.decode(ids) == "Katze <unk>"


def test_to_str_from_str_and_save_load(tokenizer: SharedTokenizer, tmp_path: Path) -> None:
    text = "Größe: 21. März 1999!"
    copy = SharedTokenizer.from_str(tokenizer.to_str())
    assert copy.vocab_size == tokenizer.vocab_size and copy.encode(text) == tokenizer.encode(text)
    tokenizer.save(tmp_path / "sub" / "tok.json")
    loaded = SharedTokenizer.load(tmp_path / "sub" / "tok.json")
    assert loaded.encode(text) == tokenizer.encode(text) and loaded.decode(loaded.encode(text)) == text
    assert [p.name for p in (tmp_path / "sub").iterdir()] == ["tok.json"]  # no temp file left


def test_cache_trains_once(pairs: list[tuple[str, str]], tmp_path: Path) -> None:
    first = SharedTokenizer.cached(pairs[:300], vocab_size=300, cache_dir=tmp_path)
    files = list(tmp_path.glob("*.json"))
    assert len(files) == 1
    again = SharedTokenizer.cached(pairs[:300], vocab_size=300, cache_dir=tmp_path)
    assert again.to_str() == first.to_str() and list(tmp_path.glob("*.json")) == files
    SharedTokenizer.cached(pairs[:300], vocab_size=320, cache_dir=tmp_path)  # other settings, other file
    SharedTokenizer.cached(pairs[:301], vocab_size=300, cache_dir=tmp_path)  # other data, other file
    assert len(list(tmp_path.glob("*.json"))) == 3


def test_errors_are_clear() -> None:
    with pytest.raises(ValueError, match="vocab_size must be at least"):
        SharedTokenizer.train([("a", "b")], vocab_size=10)
    with pytest.raises(TypeError, match=r"expected \(source, target\) pairs"):
        SharedTokenizer.train(["just a string"], vocab_size=500)


def test_report(tokenizer: SharedTokenizer) -> None:
    report = tokenization_report(tokenizer, ["Samstag, 21. November 2026", "Montag"])
    assert report.n_sentences == 2 and report.vocab_size == tokenizer.vocab_size
    assert report.mean_tokens == (len(tokenizer.encode("Samstag, 21. November 2026")) + len(tokenizer.encode("Montag")) - 2) / 2
    assert report.unk_fraction == 0.0


@pytest.mark.skipif(not (MULTI30K / "train.de.gz").is_file(), reason=f"Multi30k files not found in {MULTI30K}")
def test_multi30k_round_trips_exactly() -> None:
    train = load_multi30k("train", data_dir=MULTI30K, download=False)[:2000]
    tokenizer = SharedTokenizer.train(train, vocab_size=2000)
    test = load_multi30k("test", data_dir=MULTI30K, download=False)
    texts = [s for p in test for s in p]
    ids = tokenizer.encode_batch(texts)
    mismatched = [t for t, i in zip(texts, ids) if tokenizer.decode(i) != t and tokenizer.unk_id not in i]
    assert mismatched == []
    report = tokenization_report(tokenizer, texts)
    assert report.unk_fraction < 1e-3 and 10 < report.mean_tokens < 30


def test_a_damaged_or_replaced_cache_is_trained_again_with_a_warning(pairs: list[tuple[str, str]],
                                                                     tmp_path: Path) -> None:
    import json
    import re
    import warnings

    from minitransformer.data.tokenizer import CacheWarning

    first = SharedTokenizer.cached(pairs[:300], vocab_size=300, cache_dir=tmp_path)
    [path] = tmp_path.glob("*.json")
    good = path.read_text(encoding="utf-8")
    other = SharedTokenizer.cached(pairs[:200], vocab_size=300, cache_dir=tmp_path)
    [other_path] = set(tmp_path.glob("*.json")) - {path}
    tampered = json.loads(good)
    tampered["tokenizer"] = other.to_str()  # a valid tokenizer, but not the one the checksum describes
    cases = [
        (good[: len(good) // 2], "it is truncated or corrupted"),
        (other_path.read_text(encoding="utf-8"), r"it was made from other training text or settings"),
        (other.to_str(), "it is not a minitransformer tokenizer cache file"),
        (json.dumps(tampered), "its tokenizer does not match its checksum"),
    ]
    for content, reason in cases:
        path.write_text(content, encoding="utf-8")
        with pytest.warns(CacheWarning, match=rf"tokenizer cache {re.escape(str(path))} cannot be used: {reason}"):
            again = SharedTokenizer.cached(pairs[:300], vocab_size=300, cache_dir=tmp_path)
        assert again.to_str() == first.to_str()
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # rewritten: the next call reads it without a word
            assert SharedTokenizer.cached(pairs[:300], vocab_size=300, cache_dir=tmp_path).to_str() == first.to_str()


def test_unreadable_tokenizer_json_names_its_source(tokenizer: SharedTokenizer, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"^tokenizer JSON is not a valid tokenizer: "):
        SharedTokenizer.from_str("{ not json")
    path = tmp_path / "tokenizer.json"
    path.write_text(tokenizer.to_str()[:500], encoding="utf-8")
    with pytest.raises(ValueError, match=rf"^tokenizer file {path} is not a valid tokenizer"):
        SharedTokenizer.load(path)
    path.write_bytes(b"\xff\xfe garbage")
    with pytest.raises(ValueError, match=rf"^tokenizer file {path} is not UTF-8 text"):
        SharedTokenizer.load(path)
    from tokenizers import Tokenizer, models

    with pytest.raises(ValueError, match=r"^tokenizer JSON is not a minitransformer tokenizer: expected special"):
        SharedTokenizer.from_str(Tokenizer(models.BPE()).to_str())


def test_decode_refuses_an_id_outside_the_vocabulary(tokenizer: SharedTokenizer) -> None:
    ids = tokenizer.encode("Montag")
    with pytest.raises(ValueError, match=rf"token id {tokenizer.vocab_size} is outside the vocabulary \(ids 0 to "
                                         rf"{tokenizer.vocab_size - 1}\): it has no text"):
        tokenizer.decode([*ids[:-1], tokenizer.vocab_size])
    with pytest.raises(ValueError, match=r"token id -1 is outside the vocabulary"):
        tokenizer.decode([-1])


def test_a_huge_vocabulary_is_refused_before_the_trainer_allocates_it() -> None:
    with pytest.raises(MemoryError, match=r"vocab_size=1,000,000,000,000 .* would need [\d,.]+ GiB"):
        SharedTokenizer.train([("a", "b")], vocab_size=10**12)
