"""Datasets: dates, Multi30k, plain parallel text, the word-level vocabulary."""

from __future__ import annotations

import datetime
import gzip
import io
import re
import urllib.error
from pathlib import Path

import pytest

from minitransformer.data import (
    ChecksumError,
    Vocabulary,
    date_pair,
    fetch_multi30k,
    load_dates,
    load_multi30k,
    load_parallel_text,
    read_lines,
    multi30k_dir,
)
from minitransformer.data import multi30k as m30k

MULTI30K = Path(__file__).resolve().parents[2] / "shared" / "data" / "multi30k"
needs_multi30k = pytest.mark.skipif(
    not (MULTI30K / "train.de.gz").is_file(),
    reason=f"Multi30k files not found in {MULTI30K} (tests never download them)",
)


# --- dates ---------------------------------------------------------------------
SMALL = dict(n_train=500, n_validation=100, n_test=100)


def test_dates_sizes_and_default_pair() -> None:
    splits = {s: load_dates(s, **SMALL) for s in ("train", "validation", "test")}
    assert [len(splits[s]) for s in ("train", "validation", "test")] == [500, 100, 100]
    assert date_pair(datetime.date(2026, 11, 21)) == ("Saturday, November 21, 2026", "Samstag, 21. November 2026")


def test_dates_splits_are_disjoint() -> None:
    sources = [{src for src, _ in load_dates(s, **SMALL)} for s in ("train", "validation", "test")]
    assert sum(map(len, sources)) == 700  # no date repeats, inside a split or across
    assert not (sources[0] & sources[1] or sources[0] & sources[2] or sources[1] & sources[2])


def test_dates_are_deterministic() -> None:
    assert load_dates("train", **SMALL, seed=3) == load_dates("train", **SMALL, seed=3)
    assert load_dates("train", **SMALL, seed=3) != load_dates("train", **SMALL, seed=4)
    # The test split does not move when the training set grows.
    assert load_dates("test", n_train=10, n_test=50) == load_dates("test", n_train=5000, n_test=50)


def test_dates_other_locale_pair_reorders() -> None:
    pairs = load_dates("test", tgt_locale="hu_HU", **SMALL)
    for src, tgt in pairs:
        year = src[-4:]  # "Saturday, November 21, 2026"
        assert tgt.startswith(year + ".")  # "2026. november 21., szombat"
    assert date_pair(datetime.date(2026, 11, 21), "en_US", "hu_HU")[1] == "2026. november 21., szombat"


def test_dates_errors_are_clear() -> None:
    with pytest.raises(ValueError, match="tgt_locale='xx_YY' is not a CLDR locale"):
        load_dates("test", tgt_locale="xx_YY")
    with pytest.raises(ValueError, match="split must be one of"):
        load_dates("valid")
    with pytest.raises(ValueError, match="distinct dates"):
        load_dates("train", n_train=400, start_year=2000, end_year=2000)


# --- Multi30k --------------------------------------------------------------------
@needs_multi30k
def test_multi30k_loads_the_three_splits() -> None:
    sizes = {s: len(load_multi30k(s, data_dir=MULTI30K, download=False)) for s in ("train", "validation", "test")}
    assert sizes == {"train": 29000, "validation": 1014, "test": 1000}
    de_en = load_multi30k("test", data_dir=MULTI30K, download=False)
    en_de = load_multi30k("test", data_dir=MULTI30K, src_lang="en", tgt_lang="de", download=False)
    assert en_de == [(en, de) for de, en in de_en]
    assert all(de and en for de, en in de_en)


@needs_multi30k
def test_multi30k_folder_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MINITRANSFORMER_MULTI30K_DIR", str(MULTI30K))
    assert multi30k_dir() == MULTI30K
    assert len(load_multi30k("validation", download=False)) == 1014


def test_multi30k_default_folder_is_the_user_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("MINITRANSFORMER_MULTI30K_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert multi30k_dir() == tmp_path / "minitransformer" / "multi30k"
    assert multi30k_dir(tmp_path / "x") == tmp_path / "x"


def test_multi30k_wrong_checksum_is_refused(tmp_path: Path) -> None:
    bogus = tmp_path / "val.de.gz"
    content = gzip.compress(b"Kein echter Satz.\n", mtime=0)  # mtime fixed: the same bytes on every call
    bogus.write_bytes(content)
    actual = m30k.sha256_of(bogus)
    with pytest.raises(ChecksumError) as info:
        load_multi30k("validation", data_dir=tmp_path, download=False)
    message = str(info.value)
    assert "val.de.gz" in message
    assert m30k.SHA256["val.de.gz"] in message and actual in message
    assert bogus.read_bytes() == content  # refused, not replaced


def test_multi30k_missing_files_are_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(FileNotFoundError) as info:
        load_multi30k("test", data_dir=tmp_path, download=False)
    message = str(info.value)
    for part in ("test_2016_flickr.de.gz", "test_2016_flickr.en.gz", m30k.BASE_URL, str(tmp_path), m30k.ENV_VAR):
        assert part in message

    def offline(*args: object, **kwargs: object) -> None:
        raise urllib.error.URLError("no network")

    monkeypatch.setattr(m30k.urllib.request, "urlopen", offline)
    with pytest.raises(FileNotFoundError, match=re.escape(m30k.BASE_URL)) as info:
        load_multi30k("validation", data_dir=tmp_path)
    assert "val.de.gz" in str(info.value) and "no network" in str(info.value)
    assert list(tmp_path.iterdir()) == []  # no partial file left behind


def test_multi30k_missing_message_lists_every_file_and_both_ways_to_name_a_folder(tmp_path: Path) -> None:
    (tmp_path / "val.de.gz").write_bytes(b"")  # present (refused later by its checksum), so not listed
    with pytest.raises(FileNotFoundError) as info:
        m30k.fetch_multi30k(("train",), data_dir=tmp_path, download=False)
    message = str(info.value)
    for name in ("train.de.gz", "train.en.gz", "val.en.gz", "test_2016_flickr.de.gz", "test_2016_flickr.en.gz"):
        assert name in message
    assert "val.de.gz," not in message and "(5 of 6)" in message
    assert "--data-dir <folder> on the command line (data_dir=<folder> from Python)" in message
    assert f"{tmp_path} (given by --data-dir" in message


def test_a_multi30k_folder_named_by_the_user_is_never_created(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    typo = tmp_path / "multi3k"
    with pytest.raises(FileNotFoundError, match=r"multi3k \(given by --data-dir.*\) does not exist"):
        load_multi30k("train", data_dir=typo)
    monkeypatch.setenv(m30k.ENV_VAR, str(typo))
    with pytest.raises(FileNotFoundError, match=r"given by \$MINITRANSFORMER_MULTI30K_DIR"):
        load_multi30k("train")
    assert not typo.exists()


def test_unreadable_text_files_are_named(tmp_path: Path) -> None:
    latin1 = tmp_path / "a.de"
    latin1.write_bytes("Häuser\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"a\.de is not utf-8 text: byte 0xe4 at offset 1"):
        read_lines(latin1)
    fake = tmp_path / "b.de.gz"
    fake.write_text("Häuser\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"b\.de\.gz ends in \.gz but is not a complete gzip file"):
        read_lines(fake)
    packed = tmp_path / "c.de.gz"
    packed.write_bytes(gzip.compress("Häuser\n".encode("latin-1")))
    with pytest.raises(ValueError, match=r"c\.de\.gz is not utf-8 text: .* of its unpacked text"):
        read_lines(packed)


def test_multi30k_download_is_verified(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(m30k.urllib.request, "urlopen", lambda url, timeout: io.BytesIO(b"not the data"))
    with pytest.raises(ChecksumError, match="val.de.gz"):
        fetch_multi30k(("validation",), data_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []


@needs_multi30k
def test_multi30k_download_writes_verified_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def serve(url: str, timeout: float) -> io.BytesIO:
        return io.BytesIO((MULTI30K / url.rsplit("/", 1)[1]).read_bytes())

    monkeypatch.setattr(m30k.urllib.request, "urlopen", serve)
    assert len(load_multi30k("test", data_dir=tmp_path)) == 1000
    assert sorted(p.name for p in tmp_path.iterdir()) == ["test_2016_flickr.de.gz", "test_2016_flickr.en.gz"]


# --- plain parallel text ---------------------------------------------------------
def test_parallel_text_files(tmp_path: Path) -> None:
    (tmp_path / "a.de").write_text("Ein Hund läuft.\nZwei Katzen\u2028schlafen.\n", encoding="utf-8")
    with gzip.open(tmp_path / "a.en.gz", "wt", encoding="utf-8") as out:
        out.write("A dog runs.\r\nTwo cats sleep.\r\n")
    pairs = load_parallel_text(tmp_path / "a.de", tmp_path / "a.en.gz")
    assert pairs == [("Ein Hund läuft.", "A dog runs."), ("Zwei Katzen\u2028schlafen.", "Two cats sleep.")]


def test_parallel_text_line_count_mismatch(tmp_path: Path) -> None:
    (tmp_path / "src.txt").write_text("eins\nzwei\ndrei\n", encoding="utf-8")
    (tmp_path / "tgt.txt").write_text("one\ntwo\n", encoding="utf-8")
    with pytest.raises(ValueError) as info:
        load_parallel_text(tmp_path / "src.txt", tmp_path / "tgt.txt")
    message = str(info.value)
    assert "src.txt has 3" in message and "tgt.txt has 2" in message
    with pytest.raises(FileNotFoundError, match="nope.txt"):
        load_parallel_text(tmp_path / "nope.txt", tmp_path / "tgt.txt")


# --- word-level vocabulary -------------------------------------------------------
def test_vocabulary_round_trip() -> None:
    vocab = Vocabulary.build(["I love music", "i love cats", "Music is life"])
    assert vocab.id_to_token[:4] == ["<pad>", "<bos>", "<eos>", "<unk>"]
    assert [vocab.token_to_id[t] for t in ("<pad>", "<bos>", "<eos>", "<unk>")] == [0, 1, 2, 3]
    assert len(vocab) == 4 + len({"i", "love", "music", "cats", "is", "life"})
    ids = vocab.encode("I love music", add_bos=True, add_eos=True)
    assert ids[0] == vocab.bos_id and ids[-1] == vocab.eos_id
    assert vocab.decode(ids) == "i love music"
    assert vocab.encode("i love jazz")[-1] == vocab.unk_id
    assert vocab.decode([*vocab.encode("love is"), vocab.eos_id, vocab.token_to_id["cats"]]) == "love is"
    with pytest.raises(IndexError, match="outside the vocabulary"):
        vocab.decode([len(vocab)])


def test_parse_long_date_recognises_only_what_the_dataset_writes() -> None:
    from minitransformer.data.dates import parse_long_date

    day = datetime.date(2026, 11, 21)
    for locale in ("en_US", "de_DE", "hu_HU"):
        assert parse_long_date(date_pair(day, locale, "de_DE")[0], locale) == day
    assert parse_long_date("Monday, November 21, 2026") is None  # the wrong weekday
    assert parse_long_date("2026-11-21") is None and parse_long_date("") is None and parse_long_date("中文") is None
    assert parse_long_date(date_pair(datetime.date(1066, 10, 14), "en_US")[0]) == datetime.date(1066, 10, 14)


def test_wrong_weekday_finds_the_date_whose_day_name_is_wrong() -> None:
    from minitransformer.data.dates import wrong_weekday

    assert wrong_weekday("Saturday, March 3, 2023") == datetime.date(2023, 3, 3)  # a Friday
    assert wrong_weekday("Friday, March 3, 2023") is None  # right: nothing wrong to report
    assert wrong_weekday("2023-03-03") is None and wrong_weekday("Saturday, March 3") is None
    day = datetime.date(2026, 11, 21)  # a Saturday: szombat, samedi
    assert wrong_weekday(date_pair(day, "hu_HU")[0].replace("szombat", "vasárnap"), "hu_HU") == day
    assert wrong_weekday(date_pair(day, "fr_FR")[0].replace("samedi", "lundi"), "fr_FR") == day


def test_read_lines_drops_a_utf8_byte_order_mark(tmp_path: Path) -> None:
    path = tmp_path / "bom.de"
    path.write_bytes("\ufeffein Haus\nzwei Häuser\n".encode("utf-8"))
    assert read_lines(path) == ["ein Haus", "zwei Häuser"]
