"""Bad inputs of training runs, checkpoints, caches and averaging: each gives one clear error.

Each row of the table: a name, the call (command-line arguments, or a Python function of the
prepared files), what must happen (an exit status for the command line, an exception type for
Python) and a regular expression the message must match. Command-line errors must be one
line on standard error, never a traceback.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from minitransformer import Transformer, TransformerConfig
from minitransformer.__main__ import main
from minitransformer.data import SharedTokenizer, load_dates
from minitransformer.training import CheckpointError, load_checkpoint, save_checkpoint
from minitransformer.training.runlock import LOCK_NAME, RunFolderLocked, RunLock
from minitransformer.utils import OutputError, atomic_write, writable_folder


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Checkpoints good and bad, a run folder, a regular file, a locked folder, a broken tokenizer file."""
    root = tmp_path_factory.mktemp("bad_inputs")
    tokenizer = SharedTokenizer.train(load_dates("train", n_train=200, n_validation=0, n_test=0), vocab_size=300)
    model = Transformer(TransformerConfig.tiny(tokenizer.vocab_size, d_model=16, n_heads=2, d_ff=32,
                                               n_encoder_layers=1, n_decoder_layers=1))
    optimizer = torch.optim.Adam(model.parameters())
    for step in (1, 2):
        save_checkpoint(root / "run" / f"checkpoint-{step:08d}.pt", model, tokenizer, optimizer=optimizer, step=step)
    shutil.copy(root / "run" / "checkpoint-00000002.pt", root / "renamed-training.pt")
    save_checkpoint(root / "averaged.pt", model, tokenizer)
    damaged = {"bad-tokenizer": {"tokenizer": "{ not json"}, "huge-d-model": {"config": {"d_model": 65536}},
               "huge-max-len": {"config": {"max_len": 10**9}}, "many-layers": {"config": {"n_decoder_layers": 10**6}}}
    for name, changes in damaged.items():
        raw = torch.load(root / "averaged.pt", weights_only=True)
        for key, value in changes.items():
            raw[key] = {**raw[key], **value} if isinstance(value, dict) else value
        torch.save(raw, root / f"{name}.pt")
    (root / "a-file").write_text("not a folder")
    (root / "locked").mkdir()
    (root / "locked" / LOCK_NAME).write_text(json.dumps({"pid": os.getppid(), "host": socket.gethostname()}))
    (root / "tokenizer.json").write_text(tokenizer.to_str()[:300], encoding="utf-8")
    return root


def _read_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pretend every folder is on a read-only file system (the tests may run as root, which chmod cannot stop)."""
    def mkdir(self: Path, *args: Any, **kwargs: Any) -> None:
        if not self.is_dir():
            raise OSError(errno.EROFS, "Read-only file system", str(self))

    monkeypatch.setattr(Path, "mkdir", mkdir)
    monkeypatch.setattr(os, "access", lambda *args, **kwargs: False)
    monkeypatch.setattr(os, "statvfs", lambda path: type("S", (), {"f_flag": os.ST_RDONLY})())


def _disk_full(f: Path) -> None:
    def write(handle: Any) -> None:
        handle.write(b"some bytes")
        raise OSError(errno.ENOSPC, "No space left on device")

    atomic_write(f / "full.bin", write)


TRAIN = ["--train-size", "60", "--max-steps", "1"]
ROWS: list[tuple[str, Any, Any, str, Callable[[pytest.MonkeyPatch], None] | None]] = [
    # command line: (name, arguments with {f} for the prepared folder, exit status, message, patch)
    ("average --out a folder", ["average", "--checkpoints", "{f}/run", "--out", "{f}/run"], 2,
     r"--out .*run is a folder; give a file name, e.g. .*averaged\.pt", None),
    ("average --out a run's checkpoint", ["average", "--checkpoints", "{f}/run", "--out",
                                          "{f}/run/checkpoint-00000002.pt"], 2,
     r"is named like a training checkpoint of a run \(checkpoint-00000002\.pt\)", None),
    ("average --out best.pt", ["average", "--checkpoints", "{f}/run", "--out", "{f}/run/best.pt", "--force"], 2,
     r"is named like a training checkpoint", None),
    ("average --out an existing file", ["average", "--checkpoints", "{f}/run", "--out", "{f}/averaged.pt"], 2,
     r"--out .*averaged\.pt exists; pass --force to replace it", None),
    ("average --out a renamed training checkpoint", ["average", "--checkpoints", "{f}/run", "--out",
                                                     "{f}/renamed-training.pt", "--force"], 2,
     r"is a training checkpoint \(it holds optimizer state\)", None),
    ("average --out under a file", ["average", "--checkpoints", "{f}/run", "--out", "{f}/a-file/avg.pt"], 2,
     r"cannot use the folder of --out .*a-file: .*a-file is a file, not a folder", None),
    ("average --out on a read-only disk", ["average", "--checkpoints", "{f}/run", "--out", "{f}/ro/avg.pt"], 2,
     r"cannot use the folder of --out .*ro: .*ro is on a read-only file system", _read_only),
    ("average a checkpoint with bad tokenizer JSON", ["average", "--checkpoints", "{f}/bad-tokenizer.pt",
                                                      "{f}/averaged.pt", "--out", "{f}/new.pt"], 2,
     r"checkpoint .*bad-tokenizer\.pt holds a tokenizer that cannot be read", None),
    ("translate with bad tokenizer JSON", ["translate", "--checkpoint", "{f}/bad-tokenizer.pt", "hello"], 2,
     r"checkpoint .*bad-tokenizer\.pt holds a tokenizer that cannot be read: tokenizer JSON is not a valid", None),
    ("translate with a huge d_model", ["translate", "--checkpoint", "{f}/huge-d-model.pt", "hello"], 2,
     r"huge-d-model\.pt does not agree with its own config \(.*d_model=65536.*\): .* is \(\d+, 16\) "
     r"\(expected \(\d+, 65536\)\)", None),
    ("translate with a huge max_len", ["translate", "--checkpoint", "{f}/huge-max-len.pt", "hello"], 2,
     r"claims max_len=1000000000 and d_model=16: its positional table alone would take 59\.6 GiB", None),
    ("attention with a million layers", ["attention", "--checkpoint", "{f}/many-layers.pt", "hello"], 2,
     r"claims 1000000 decoder layers but holds the weights of 1", None),
    ("train --resume with bad tokenizer JSON", ["train", "--resume", "{f}/bad-tokenizer.pt", "--out", "{f}/r"], 2,
     r"holds a tokenizer that cannot be read", None),
    ("train --out under a file", ["train", *TRAIN, "--out", "{f}/a-file/run"], 2,
     r"cannot use run folder .*a-file/run: .*a-file is a file, not a folder", None),
    ("train --out on a read-only disk", ["train", *TRAIN, "--out", "{f}/ro-run"], 2,
     r"cannot use run folder .*ro-run: .*ro-run is on a read-only file system", _read_only),
    ("train into a folder in use", ["train", *TRAIN, "--out", "{f}/locked"], 2,
     rf"the run folder .*locked is in use by process {os.getppid()} on [^ ]+: wait for it to finish, stop it, or "
     r"choose another --out \(if no run is using it, delete .*locked/\.lock\)", None),
    # Python: (name, function of the folder, exception type, message, patch)
    ("load a truncated tokenizer file", lambda f: SharedTokenizer.load(f / "tokenizer.json"), ValueError,
     r"^tokenizer file .*tokenizer\.json is not a valid tokenizer", None),
    ("load a checkpoint claiming a million layers", lambda f: load_checkpoint(f / "many-layers.pt"), CheckpointError,
     r"claims 1000000 decoder layers", None),
    ("disk full while writing", _disk_full, OutputError,
     r"^disk full while writing .*full\.bin \(No space left on device\): the partial file \.full\.bin\..*\.part "
     r"was removed; free some space", None),
    ("a folder under a regular file", lambda f: writable_folder(f / "a-file" / "x", "--out folder"), OutputError,
     r"^cannot use --out folder .*a-file/x: .*a-file is a file, not a folder$", None),
    ("a second lock on a locked folder", lambda f: RunLock(f / "locked").acquire(), RunFolderLocked,
     rf"is in use by process {os.getppid()}", None),
]


@pytest.mark.parametrize("name, call, expected, message, patch", ROWS, ids=[row[0] for row in ROWS])
def test_bad_input(name: str, call: Any, expected: Any, message: str, patch: Any, files: Path,
                   monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(files / "cache"))
    monkeypatch.setenv("TQDM_DISABLE", "1")
    if patch is not None:
        patch(monkeypatch)
    if isinstance(call, list):
        status = main([a.format(f=files) for a in call])
        err = capsys.readouterr().err
        assert status == expected, err
        assert err.startswith(f"minitransformer {call[0]}: error: ") and err.count("\n") == 1, err
        assert "Traceback" not in err
        assert re.search(message, err), err
    else:
        with pytest.raises(expected, match=message):
            call(files)
    assert not list(files.rglob("*.part")) and not (files / "locked" / "checkpoint-00000001.pt").exists()


def test_the_table_is_long_enough() -> None:
    assert len(ROWS) >= 10
