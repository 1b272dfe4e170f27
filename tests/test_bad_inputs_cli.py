"""Bad input at the command line: one line on stderr naming the option or file, exit 2, no traceback.

The same checks in the Python API (``TrainOptions``) raise ValueError or TypeError.
"""

from __future__ import annotations

import gzip
import io
import re
import sys
from pathlib import Path

import pytest

from minitransformer.cli import main
from minitransformer.training import TrainOptions

SMALL = ["--train-size", "50", "--d-model", "16", "--n-heads", "2", "--d-ff", "32", "--layers", "1",
         "--eval-sentences", "4", "--max-steps", "2"]


def _files(tmp: Path) -> dict[str, str]:
    """Small parallel files, some of them broken, for the ``text`` dataset."""
    good = "ein Haus\nzwei Häuser\n"
    (tmp / "train.de").write_text(good, encoding="utf-8")
    (tmp / "train.en").write_text("a house\ntwo houses\n", encoding="utf-8")
    (tmp / "empty.de").write_text("", encoding="utf-8")
    (tmp / "empty.en").write_text("", encoding="utf-8")
    (tmp / "latin1.de").write_bytes("ein Haus\nzwei Häuser\n".encode("latin-1"))
    (tmp / "fake.de.gz").write_text(good, encoding="utf-8")  # plain text behind a .gz name
    with gzip.open(tmp / "cut.en.gz", "wb") as handle:
        handle.write(b"a house\ntwo houses\n")
    (tmp / "cut.en.gz").write_bytes((tmp / "cut.en.gz").read_bytes()[:-12])  # a truncated gzip file
    return {name: str(tmp / name) for name in ("train.de", "train.en", "empty.de", "empty.en", "latin1.de",
                                               "fake.de.gz", "cut.en.gz")}


def _text(src: str = "train.de", tgt: str = "train.en", vsrc: str = "train.de", vtgt: str = "train.en") -> list[str]:
    return ["train", "--dataset", "text", "--src-file", "{" + src + "}", "--tgt-file", "{" + tgt + "}",
            "--valid-src-file", "{" + vsrc + "}", "--valid-tgt-file", "{" + vtgt + "}", *SMALL]


# (arguments, standard input or None, message the one line must match)
CASES = [
    (["translate", "--checkpoint", "run", "--alpha", "nan", "hello"], None, r"--alpha .*finite.* got nan"),
    (["translate", "--checkpoint", "run", "--alpha", "-1", "hello"], None, r"--alpha .*>= 0, got -1"),
    (["translate", "--checkpoint", "run", "--extra-length", "-5", "hello"], None,
     r"--extra-length .*must be >= 0, got -5"),
    (["translate", "--checkpoint", "run", "--device", "bogus", "hello"], None,
     r"--device must be auto, cpu, cuda, cuda:<index> or mps, got 'bogus'"),
    (["translate", "--checkpoint", "run", "--batch-size", "0", "hello"], None,
     r"--batch-size must be at least 1, got 0"),
    (["translate", "--checkpoint", "run", ""], None, r"sentence 1 is empty: expected text"),
    (["translate", "--checkpoint", "run"], b"Friday, March 3, 2023\n\xff\xfe oops\n", r"standard input is not UTF-8 "
     r"text: byte 0xff on line 2"),
    (["translate", "--checkpoint", "run"], b"", r"nothing to translate: expected sentences"),
    (["translate", "--checkpoint", "run"], b"\n  \n", r"nothing to translate: .* got 2 empty line\(s\)"),
    (["translate", "--checkpoint", "{tmp}/nothing-here.pt", "hello"], None, r"nothing-here\.pt"),
    (["attention", "--checkpoint", "run", "--device", "bogus", "hello"], None, r"--device must be .* got 'bogus'"),
    (["attention", "--checkpoint", "run", "--out", "{tmp}/train.de", "hello"], None,
     r"--out .*train\.de is a file: expected a folder for the PNG files"),
    (["train", "--clip-norm", "nan"], None, r"clip_norm must be a finite number, got nan"),
    (["train", "--dropout", "nan"], None, r"dropout must be a finite number, got nan"),
    (["train", "--lr-factor", "inf"], None, r"lr_factor must be a finite number, got inf"),
    (["train", "--label-smoothing", "1.5"], None, r"label_smoothing must be in \[0, 1\), got 1.5"),
    (["train", "--target", "-1"], None, r"target must be >= 0"),
    (["train", "--target", "50"], None, r"target is a fraction of exact matches for the dates dataset: expected a "
     r"number in \(0, 1\]"),
    (["train", "--dataset", "multi30k", "--target", "500"], None, r"target is a BLEU score .* \(0, 100\]"),
    (["train", "--seed", str(2**64)], None, r"seed must be an integer in \[0, 2\*\*64\) .*got 18446744073709551616"),
    (["train", "--seed", "9" * 40], None, r"seed must be an integer in \[0, 2\*\*64\) .*got a 40-digit number"),
    (["train", "--tgt-locale", ""], None, r"tgt_locale must be a CLDR locale such as 'en_US', 'de_DE' or 'hu_HU', "
     r"got ''"),
    (["train", *SMALL, "--vocab-size", str(10**12), "--out", "{tmp}/run"], None,
     r"vocab_size=1,000,000,000,000 \(the BPE trainer reserves ~72 bytes per entry\) would need"),
    (["train", *SMALL, "--d-model", "65536", "--out", "{tmp}/run"], None,
     r"a Transformer with d_model=65,536, d_ff=32 and 1\+1 layers \(its weights\) would need [\d,.]+ GiB"),
    (["translate", "--checkpoint", "run", "--beam", "0", "hello"], None, r"--beam must be at least 1"),
    (["train", "--show", "-1"], None, r"show must be >= 0 .*got -1"),
    (["train", "--epochs", "0"], None, r"epochs must be at least 1 when given, got 0"),
    (["train", "--threads", "0"], None, r"threads must be at least 1 when given, got 0"),
    (["train", "--resume", "--overwrite", "--out", "{tmp}/run"], None, r"--resume and --overwrite exclude each other"),
    (["train", "--device", "bogus"], None, r"--device must be auto, cpu, cuda, cuda:<index> or mps, got 'bogus'"),
    (["train", "--dataset", "multi30k", "--data-dir", "{tmp}/no-such-folder", "--out", "{tmp}/run"], None,
     r"Multi30k folder .*no-such-folder \(given by --data-dir.*\) does not exist"),
    (["train", *SMALL, "--batch-tokens", "1", "--out", "{tmp}/run"], None,
     r"batch_tokens=1 holds no training pair.* expected a budget of at least"),
    (_text(vsrc="empty.de", vtgt="empty.en") + ["--out", "{tmp}/run"], None,
     r"validation split \(.*empty\.de, .*empty\.en\) is empty"),
    (_text(src="latin1.de") + ["--out", "{tmp}/run"], None, r"latin1\.de is not utf-8 text: byte 0xe4"),
    (_text(src="fake.de.gz") + ["--out", "{tmp}/run"], None, r"fake\.de\.gz ends in \.gz but is not a complete "
     r"gzip file"),
    (_text(tgt="cut.en.gz") + ["--out", "{tmp}/run"], None, r"cut\.en\.gz ends in \.gz but is not a complete gzip"),
    (["average", "--checkpoints", "{tmp}", "--last", "0", "--out", "{tmp}/avg.pt"], None,
     r"--last must be at least 1, got 0"),
]


@pytest.mark.parametrize(("args", "stdin", "message"), CASES, ids=[" ".join(c[0])[:60] for c in CASES])
def test_a_bad_input_gives_one_clear_line(args: list[str], stdin: bytes | None, message: str, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("TQDM_DISABLE", "1")
    names = {"tmp": str(tmp_path), **_files(tmp_path)}
    for name, value in names.items():
        args = [a.replace("{" + name + "}", value) for a in args]
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8"))
    assert main(args) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert re.search(message, lines[0], flags=re.IGNORECASE), lines[0]
    assert lines[0].startswith(f"minitransformer {args[0]}: error: ")
    assert "Traceback" not in err


# (keyword arguments, exception, message)
API_CASES = [
    (dict(clip_norm=float("nan")), ValueError, r"clip_norm must be a finite number"),
    (dict(dropout="0.1"), TypeError, r"dropout must be a number or None, got str '0.1'"),
    (dict(epochs=2.5), TypeError, r"epochs must be int or None, got float 2.5"),
    (dict(epochs=True), TypeError, r"epochs must be int or None, got bool"),
    (dict(show=-1), ValueError, r"show must be >= 0"),
    (dict(resume="runs/dates", overwrite=True), ValueError, r"resume and overwrite exclude each other"),
    (dict(device="bogus"), ValueError, r"device must be auto, cpu, cuda, cuda:<index> or mps, got 'bogus'"),
    (dict(device=0), TypeError, r"device must be str, got int 0"),
    (dict(threads=0), ValueError, r"threads must be at least 1"),
    (dict(target=float("nan")), ValueError, r"target must be a finite number"),
    (dict(dropout=1.0), ValueError, r"dropout must be in \[0, 1\)"),
]


@pytest.mark.parametrize(("kwargs", "error", "message"), API_CASES, ids=[str(c[0])[:50] for c in API_CASES])
def test_train_options_refuse_the_same_inputs(kwargs: dict, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        TrainOptions(**kwargs)
