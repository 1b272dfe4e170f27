"""Nothing lost during training: the run folder's lock, --overwrite, resumed logs, kills, Ctrl-C, a full disk."""

from __future__ import annotations

import errno
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch

from minitransformer.__main__ import main
from minitransformer.training import TrainOptions, load_checkpoint, read_log, train
from minitransformer.training.runlock import LOCK_NAME, RunFolderLocked, RunLock
from minitransformer.training.trainer import Trainer
from minitransformer.utils import OutputError

from test_training import REPO_ROOT
from test_training import TINY as TRAINING_TINY
from test_training import _private_cache  # noqa: F401 (autouse: tokenizer caches in a temporary folder)

TINY = {**TRAINING_TINY, "eval_sentences": 8, "test_beam": 1}
TIMING = {"time", "tokens_per_s", "tgt_tokens_per_s", "eval_seconds", "seconds"}


def _options(out: Path, **changes: Any) -> TrainOptions:
    return TrainOptions(**{**TINY, "out": str(out), **changes})


def _records(out: Path) -> list[dict[str, Any]]:
    """The log without the setup records (a resume adds one) and without clock readings."""
    return [{k: v for k, v in r.items() if k not in TIMING and k != "path"}
            for r in read_log(out / "log.jsonl") if r["event"] != "setup"]


def _same_weights(a: Path, b: Path) -> None:
    wa, wb = load_checkpoint(a)["model"], load_checkpoint(b)["model"]
    assert wa.keys() == wb.keys()
    for name in wa:
        torch.testing.assert_close(wa[name], wb[name], rtol=0, atol=0, msg=name)


def _crash_at(monkeypatch: pytest.MonkeyPatch, step: int) -> None:
    """Make the training step that would reach ``step`` die, as a killed process would."""
    real = Trainer.train_step

    def train_step(self: Trainer, *args: Any) -> Any:
        if self.step + 1 == step:
            raise RuntimeError("simulated crash")
        return real(self, *args)

    monkeypatch.setattr(Trainer, "train_step", train_step)


# --- resuming --------------------------------------------------------------------
def test_a_crashed_run_resumes_to_the_same_losses_weights_and_log(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # log_every=2 and save_every=3: the checkpoint of step 3 falls inside a logging window and
    # inside an epoch, so the sums behind the next loss record and the epoch's train_loss must
    # come back from the checkpoint for the records to match.
    changes = dict(max_steps=14, log_every=2, save_every=3)
    whole = train(_options(tmp_path / "whole", **changes))
    with monkeypatch.context() as patch:
        _crash_at(patch, 11)
        with pytest.raises(RuntimeError, match="simulated crash"):
            train(_options(tmp_path / "parts", **changes))
    log = tmp_path / "parts" / "log.jsonl"
    assert any(r.get("step") == 10 for r in read_log(log))  # work after the checkpoint of step 9 ...
    with open(log, "ab") as handle:
        handle.write(b'{"event": "train", "step": 11, "lo')  # ... and a line cut off by the crash
    resumed = train(_options(tmp_path / "parts", resume="auto", **changes))
    assert resumed.step == whole.step == 14
    a, b = _records(tmp_path / "whole"), _records(tmp_path / "parts")
    assert [r for r in a if r["event"] == "epoch"]  # the run crossed epoch ends
    assert a == b
    _same_weights(whole.checkpoint, resumed.checkpoint)


def test_the_epoch_train_loss_survives_a_stop_inside_the_epoch(tmp_path: Path) -> None:
    whole = train(_options(tmp_path / "whole", max_steps=8))
    train(_options(tmp_path / "parts", max_steps=2))
    train(_options(tmp_path / "parts", max_steps=8, resume="auto"))
    epochs = [{k: v for k, v in r.items() if k not in TIMING} for r in read_log(tmp_path / "whole" / "log.jsonl")
              if r["event"] == "epoch"]
    resumed = [{k: v for k, v in r.items() if k not in TIMING} for r in read_log(tmp_path / "parts" / "log.jsonl")
               if r["event"] == "epoch"]
    # The validation checks inside the epochs (checks_per_epoch) fall before and after the stop at step 2: the
    # records of both invocations together equal the uninterrupted run's, train_loss included, bit for bit.
    assert len(epochs) > 2 and epochs == resumed
    assert whole.metrics["train_loss"] == load_checkpoint(tmp_path / "parts")["metrics"]["train_loss"]


def test_a_kill_during_the_best_copy_leaves_a_best_pt_after_the_resume(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    first = train(_options(tmp_path, max_steps=3))
    checkpoint = load_checkpoint(first.checkpoint)
    assert checkpoint["metrics"]["best_step"] == 3
    (tmp_path / "best.pt").unlink()  # killed while copying: only the unfinished temporary file is left
    (tmp_path / ".best.pt.x1y2.part").write_bytes(b"PK half")
    resumed = train(_options(tmp_path, max_steps=3, resume="auto"))
    out = capsys.readouterr().out
    assert "best.pt did not hold the best checkpoint (step 3): copied it again" in out
    assert "removed 1 unfinished file" in out
    assert load_checkpoint(tmp_path / "best.pt")["step"] == 3 and resumed.step == 3
    assert not list(tmp_path.glob("*.part")) and not list(tmp_path.glob(".*.part"))


def test_resuming_from_an_earlier_checkpoint_moves_the_later_ones_aside(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    train(_options(tmp_path, max_steps=6, save_every=2))
    capsys.readouterr()
    again = train(_options(tmp_path, max_steps=6, save_every=2, resume=str(tmp_path / "checkpoint-00000004.pt")))
    aside = tmp_path / ".after-step-00000004"
    assert (f"resuming from step 4: moved 1 file(s) of later steps and a copy of log.jsonl and loss.png (with the "
            f"records of later steps) to {aside}") in capsys.readouterr().out
    _same_weights(aside / "checkpoint-00000006.pt", again.checkpoint)  # kept, and the same run again
    assert sorted(p.name for p in tmp_path.glob("checkpoint-*.pt")) == [
        "checkpoint-00000002.pt", "checkpoint-00000004.pt", "checkpoint-00000006.pt"]
    assert load_checkpoint(tmp_path / "best.pt")["step"] == load_checkpoint(again.checkpoint)["metrics"]["best_step"]


def test_kill_9_loses_only_the_work_since_the_last_checkpoint(tmp_path: Path) -> None:
    # A real SIGKILL in a child process, once the checkpoint of step 4 and its log record are
    # written; the child sleeps 2 s in each later step so that the kill finds it training.
    out, reference = tmp_path / "killed", tmp_path / "whole"
    changes = dict(max_steps=8, save_every=2)
    script = (
        "import sys, time, torch\n"
        "from minitransformer.training import TrainOptions, train\n"
        "from minitransformer.training.trainer import Trainer\n"
        f"torch.set_num_threads({torch.get_num_threads()})\n"
        "real = Trainer.train_step\n"
        "def slow(self, *a):\n"
        "    if self.step >= 4:\n"
        "        time.sleep(2.0)\n"
        "    return real(self, *a)\n"
        "Trainer.train_step = slow\n"
        f"train(TrainOptions(**{_options(out, **changes).to_dict()!r}))\n"
    )
    env = dict(os.environ, TQDM_DISABLE="1", PYTHONPATH=str(REPO_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    child = subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 120
        log = out / "log.jsonl"
        while not (log.is_file() and "checkpoint-00000004.pt" in log.read_text()):
            assert child.poll() is None, child.communicate()[0]
            assert time.monotonic() < deadline, "no checkpoint of step 4 within 120 s"
            time.sleep(0.05)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert (out / LOCK_NAME).is_file()  # left behind by the killed process
    whole = train(_options(reference, **changes))
    resumed = train(_options(out, resume="auto", **changes))
    assert resumed.step == 8
    assert _records(reference) == _records(out)
    _same_weights(whole.checkpoint, resumed.checkpoint)


# --- --overwrite -------------------------------------------------------------------
def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file() and p.name != LOCK_NAME}


@pytest.mark.parametrize("bad", [dict(n_heads=3), dict(tgt_locale="xx_XX"), dict(dataset="text", src_file="missing.txt",
                                 tgt_file="missing.txt", valid_src_file="missing.txt", valid_tgt_file="missing.txt")])
def test_overwrite_keeps_the_earlier_run_when_the_new_one_fails(tmp_path: Path, bad: dict[str, Any]) -> None:
    train(_options(tmp_path, max_steps=2))
    before = _snapshot(tmp_path)
    assert {"checkpoint-00000002.pt", "best.pt", "log.jsonl"} <= set(before)
    with pytest.raises(Exception):  # which error is the options' business; here: nothing is lost
        train(_options(tmp_path, max_steps=2, overwrite=True, **bad))
    assert _snapshot(tmp_path) == before
    assert not (tmp_path / LOCK_NAME).exists()


def test_overwrite_restores_the_earlier_run_if_training_dies_before_a_checkpoint(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    train(_options(tmp_path, max_steps=2))
    before = _snapshot(tmp_path)
    _crash_at(monkeypatch, 2)
    with pytest.raises(RuntimeError, match="simulated crash"):
        train(_options(tmp_path, max_steps=4, overwrite=True, seed=1))
    assert "the earlier run's 5 files are back" in capsys.readouterr().out
    now = _snapshot(tmp_path)
    assert {k: now[k] for k in before} == before and not (tmp_path / ".replaced-run").exists()


def test_overwrite_replaces_the_earlier_run_after_the_first_checkpoint(tmp_path: Path) -> None:
    train(_options(tmp_path, max_steps=3))
    again = train(_options(tmp_path, max_steps=2, overwrite=True))
    assert sorted(p.name for p in tmp_path.glob("checkpoint-*.pt")) == [again.checkpoint.name]
    assert not (tmp_path / ".replaced-run").exists()
    assert load_checkpoint(tmp_path / "best.pt")["step"] == 2


def test_files_set_aside_by_a_killed_overwrite_come_back(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    train(_options(tmp_path, max_steps=2))
    aside = tmp_path / ".replaced-run"
    aside.mkdir()
    for path in [*tmp_path.glob("checkpoint-*.pt"), tmp_path / "best.pt", tmp_path / "log.jsonl"]:
        path.rename(aside / path.name)  # what a kill -9 right after setting them aside leaves
    resumed = train(_options(tmp_path, max_steps=3, resume="auto"))
    assert "put back 3 files of an earlier run" in capsys.readouterr().out
    assert resumed.step == 3 and not aside.exists()


# --- the lock ----------------------------------------------------------------------
def test_a_second_writer_is_refused_and_a_stale_lock_taken_over(tmp_path: Path) -> None:
    holder = ("import time\nfrom minitransformer.training.runlock import RunLock\n"
              f"RunLock({str(tmp_path)!r}).acquire()\nprint('locked', flush=True)\ntime.sleep(120)\n")
    child = subprocess.Popen([sys.executable, "-c", holder], stdout=subprocess.PIPE, text=True, cwd=REPO_ROOT)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "locked"
        with pytest.raises(RunFolderLocked, match=rf"run folder {tmp_path} is in use by process {child.pid} on "):
            train(_options(tmp_path, max_steps=1))
    finally:
        child.kill()
        child.wait()
    assert not list(tmp_path.glob("checkpoint-*"))  # the refused run wrote nothing
    lock = RunLock(tmp_path)
    assert f"left by process {child.pid}" in (lock.acquire() or "")  # the killed holder's lock is stale
    lock.release()
    assert not (tmp_path / LOCK_NAME).exists()


def test_a_lock_naming_a_live_process_is_respected(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / LOCK_NAME).write_text(json.dumps({"pid": os.getppid(), "host": socket.gethostname()}))
    args = ["train", "--train-size", "60", "--max-steps", "1", "--out", str(tmp_path)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"is in use by process {os.getppid()}" in err
    (tmp_path / LOCK_NAME).write_text(json.dumps({"pid": 2**22 + 12345, "host": socket.gethostname()}))
    lock = RunLock(tmp_path)
    assert "which is no longer running" in (lock.acquire() or "")
    with pytest.raises(RunFolderLocked):  # a second lock in the same process is refused too
        RunLock(tmp_path).acquire()
    lock.release()


# --- interrupts and full disks ------------------------------------------------------
def test_a_second_ctrl_c_during_the_save_waits_for_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    import minitransformer.training.trainer as trainer_module

    real_step, real_save = Trainer.train_step, trainer_module.save_checkpoint

    def step(self: Trainer, *args: Any) -> Any:
        if self.step == 2:
            os.kill(os.getpid(), signal.SIGINT)  # the first Ctrl-C: stop after this step
        return real_step(self, *args)

    def save(*args: Any, **kwargs: Any) -> Path:
        os.kill(os.getpid(), signal.SIGINT)  # the second one, while the checkpoint is being written
        return real_save(*args, **kwargs)

    monkeypatch.setattr(Trainer, "train_step", step)
    monkeypatch.setattr(trainer_module, "save_checkpoint", save)
    args = ["train", "--train-size", "60", "--d-model", "16", "--n-heads", "2", "--d-ff", "32", "--layers", "1",
            "--batch-tokens", "200", "--eval-sentences", "8", "--max-steps", "50", "--out", str(tmp_path)]
    assert main(args) == 130
    out = capsys.readouterr().out
    assert f"interrupted at step 3: the newest checkpoint is {tmp_path / 'checkpoint-00000003.pt'} (step 3)" in out
    assert load_checkpoint(tmp_path)["step"] == 3 and not list(tmp_path.glob(".*.part"))


def test_a_second_ctrl_c_during_a_step_says_what_is_lost(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    real_step = Trainer.train_step

    def step(self: Trainer, *args: Any) -> Any:
        if self.step == 3:
            os.kill(os.getpid(), signal.SIGINT)
            os.kill(os.getpid(), signal.SIGINT)
        return real_step(self, *args)

    monkeypatch.setattr(Trainer, "train_step", step)
    with pytest.raises(KeyboardInterrupt):
        train(_options(tmp_path, max_steps=50, save_every=2))
    newest = tmp_path / "checkpoint-00000002.pt"
    assert (f"interrupted at step 3: the newest checkpoint is {newest} (step 2); the 1 step after it was not saved"
            in capsys.readouterr().out)
    assert load_checkpoint(tmp_path)["step"] == 2


def test_a_full_disk_during_a_checkpoint_keeps_the_previous_one(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    import minitransformer.training.checkpoint as checkpoint_module

    real_save = torch.save
    calls = []

    def save(obj: Any, handle: Any) -> None:
        calls.append(obj["step"])
        if obj["step"] == 4:
            handle.write(b"PK\x03\x04 the first bytes")
            raise OSError(errno.ENOSPC, "No space left on device")
        real_save(obj, handle)

    monkeypatch.setattr(checkpoint_module.torch, "save", save)
    with pytest.raises(OutputError, match=r"disk full while writing .*checkpoint-00000004\.pt .*the partial file "
                                          r"\.checkpoint-00000004\.pt\..*\.part was removed"):
        train(_options(tmp_path, max_steps=6, save_every=2))
    assert load_checkpoint(tmp_path)["step"] == 2
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".part")]


# --- the folder a run writes into (issue 19) ------------------------------------------
def test_a_folder_that_is_not_a_run_is_refused_without_overwrite(tmp_path: Path) -> None:
    mine = {"tokenizer.json": b"my own tokenizer", "log.jsonl": b"my own notes\n", "loss.png": b"my figure"}
    for name, data in mine.items():
        (tmp_path / name).write_bytes(data)
    with pytest.raises(FileExistsError, match=r"is not empty \(log\.jsonl, loss\.png, tokenizer\.json\) and holds no "
                                              r"run .* pass --overwrite"):
        train(_options(tmp_path, max_steps=1))
    assert _snapshot(tmp_path) == mine  # untouched, and no lock left
    train(_options(tmp_path, max_steps=1, overwrite=True))  # asked for: the files are replaced
    assert (tmp_path / "log.jsonl").read_bytes() != mine["log.jsonl"]


def test_a_resume_writes_only_into_its_own_run(tmp_path: Path) -> None:
    run_a, run_b = tmp_path / "a", tmp_path / "b"
    train(_options(run_a, max_steps=2))
    train(_options(run_b, max_steps=2, seed=1))
    before = _snapshot(run_b)
    with pytest.raises(FileExistsError, match=r"belongs to the run in .*a, but --out .*b holds other files.* a resume "
                                              r"writes only into the run it resumes"):
        train(_options(run_b, max_steps=4, resume=str(run_a / "checkpoint-00000002.pt")))
    assert _snapshot(run_b) == before
    # Into a new folder it is a new run that continues from the checkpoint; run A is left alone.
    a_before = _snapshot(run_a)
    branch = train(_options(tmp_path / "branch", max_steps=3, resume=str(run_a / "checkpoint-00000002.pt")))
    assert branch.step == 3 and _snapshot(run_a) == a_before


def test_a_renamed_run_folder_resumes_in_its_new_place(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old, new = tmp_path / "old", tmp_path / "new"
    assert main(["train", *_cli(max_steps=2), "--out", str(old)]) == 0
    old.rename(new)
    old.mkdir()  # a new run took the old name meanwhile
    (old / "notes.txt").write_text("another run's files")
    assert main(["train", "--resume", str(new / "checkpoint-00000002.pt"), "--max-steps", "3"]) == 0
    assert [p.name for p in old.iterdir()] == ["notes.txt"]
    assert load_checkpoint(new)["step"] == 3 and (new / "checkpoint-00000003.pt").is_file()
    assert main(["train", "--resume", str(new), "--max-steps", "4"]) == 0  # the folder itself
    assert load_checkpoint(new)["step"] == 4


def _cli(**changes: Any) -> list[str]:
    values = {**TINY, **changes}
    values.pop("target")
    values.pop("dataset")
    return [a for key, value in values.items() for a in (f"--{key.replace('_', '-')}", str(value))]


def test_resuming_an_older_checkpoint_moves_the_later_log_aside(tmp_path: Path) -> None:
    train(_options(tmp_path, max_steps=6, save_every=2))
    log_before = (tmp_path / "log.jsonl").read_bytes()
    assert any(r["event"] == "test" for r in read_log(tmp_path / "log.jsonl"))
    train(_options(tmp_path, max_steps=6, save_every=2, resume=str(tmp_path / "checkpoint-00000002.pt")))
    aside = tmp_path / ".after-step-00000002"
    assert (aside / "log.jsonl").read_bytes() == log_before  # the test score of the first end included
    assert (aside / "loss.png").is_file() and (aside / "checkpoint-00000006.pt").is_file()
    # A second resume from the same step keeps the first folder as it was.
    train(_options(tmp_path, max_steps=6, save_every=2, resume=str(tmp_path / "checkpoint-00000002.pt")))
    assert (aside / "log.jsonl").read_bytes() == log_before and (tmp_path / ".after-step-00000002-2").is_dir()


def test_an_averaged_checkpoint_is_refused_before_anything_moves(tmp_path: Path) -> None:
    from minitransformer.training import CheckpointError, atomic_torch_save, average_checkpoints

    train(_options(tmp_path, max_steps=4, save_every=2))
    atomic_torch_save(average_checkpoints([tmp_path / "checkpoint-00000002.pt"]), tmp_path / "averaged.pt")
    before = _snapshot(tmp_path)
    with pytest.raises(CheckpointError, match=r"averaged\.pt \(an averaged checkpoint\) holds no optimizer or "
                                              r"scheduler state: it can translate but not resume"):
        train(_options(tmp_path, max_steps=6, resume=str(tmp_path / "averaged.pt")))
    assert _snapshot(tmp_path) == before and not list(tmp_path.glob(".after-step-*"))


def test_resume_finds_the_run_that_an_interrupted_overwrite_set_aside(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", *_cli(max_steps=2), "--out", str(tmp_path)]) == 0
    aside = tmp_path / ".replaced-run"
    aside.mkdir()
    for path in [*tmp_path.glob("checkpoint-*.pt"), tmp_path / "best.pt", tmp_path / "log.jsonl"]:
        path.rename(aside / path.name)  # a kill -9 of an --overwrite run before its first checkpoint
    with pytest.raises(FileNotFoundError, match=r"are in .*\.replaced-run, set aside by an --overwrite run"):
        load_checkpoint(tmp_path)  # the API says where they are
    assert main(["train", "--resume", "--out", str(tmp_path), "--max-steps", "3"]) == 0
    assert "put back 3 files of an earlier run" in capsys.readouterr().out
    assert load_checkpoint(tmp_path)["step"] == 3 and not aside.exists()


# --- failed starts leave nothing --------------------------------------------------------
def test_a_refused_start_leaves_no_folder_and_no_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    import minitransformer.training.cpu as cpu

    monkeypatch.chdir(tmp_path)
    assert main(["train", "--dataset", "multi30k", "--data-dir", str(tmp_path / "nothing")]) == 2
    assert not (tmp_path / "runs").exists()  # the default --out, runs/multi30k, was not left behind
    monkeypatch.setattr(cpu, "matmul_flops", lambda: 1e3)  # a CPU so slow that the run is refused
    assert main(["train", *_cli(max_steps=2), "--out", "deep/run"]) == 2
    assert "--allow-slow" in capsys.readouterr().err
    assert not (tmp_path / "deep").exists()
    (tmp_path / "existing").mkdir()
    assert main(["train", *_cli(max_steps=2), "--out", "existing"]) == 2
    assert list((tmp_path / "existing").iterdir()) == []  # no empty log.jsonl, no lock


# --- divergence ---------------------------------------------------------------------------
def test_a_diverging_run_stops_at_the_first_non_finite_loss(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    import minitransformer.training.step as step_module  # the training step's loss (Trainer.train_step calls it)

    real = step_module.label_smoothed_nll

    def loss(logits: torch.Tensor, *args: Any) -> Any:
        loss_sum, nll_sum, n = real(logits, *args)
        if torch.is_grad_enabled() and getattr(loss, "step", 0) >= 3:  # the fourth step's loss is NaN
            loss_sum = loss_sum * float("nan")
        loss.step = getattr(loss, "step", 0) + torch.is_grad_enabled()
        return loss_sum, nll_sum, n

    monkeypatch.setattr(step_module, "label_smoothed_nll", loss)
    assert main(["train", *_cli(max_steps=8, save_every=2), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "training diverged: the loss of step 4 is nan" in err
    assert f"the newest checkpoint, {tmp_path / 'checkpoint-00000002.pt'}, holds the last finite weights" in err
    assert [p.name for p in sorted(tmp_path.glob("checkpoint-*.pt"))] == ["checkpoint-00000002.pt"]
    assert read_log(tmp_path / "log.jsonl")[-1]["event"] == "diverged"
    assert load_checkpoint(tmp_path)["step"] == 2  # finite, so it loads


def test_the_real_divergence_of_a_huge_learning_rate_is_caught(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    args = _cli(max_steps=30, lr_factor=1e9, warmup=1, log_every=1, label_smoothing=0.0, clip_norm=0.0)
    code = main(["train", *args, "--out", str(tmp_path)])
    for path in tmp_path.glob("checkpoint-*.pt"):
        load_checkpoint(path)  # every checkpoint written holds finite weights
    if code == 2:
        assert "training diverged" in capsys.readouterr().err
    losses = [r["loss"] for r in read_log(tmp_path / "log.jsonl") if r["event"] == "train"]
    assert all(isinstance(x, float) and x == x and abs(x) != float("inf") for x in losses)


def test_a_checkpoint_with_non_finite_weights_is_refused(tmp_path: Path) -> None:
    from minitransformer.training import CheckpointError

    train(_options(tmp_path, max_steps=1))
    raw = torch.load(tmp_path / "checkpoint-00000001.pt", weights_only=True)
    name = next(k for k, v in raw["model"].items() if v.is_floating_point())
    raw["model"][name][0] = float("inf")
    torch.save(raw, tmp_path / "checkpoint-00000002.pt")
    with pytest.raises(CheckpointError, match=rf"holds non-finite weights \(NaN or infinity\) in 1 tensor\(s\) "
                                              rf"\({name}\): the run had diverged"):
        load_checkpoint(tmp_path)
    assert main(["translate", "--checkpoint", str(tmp_path / "checkpoint-00000002.pt"), "hello"]) == 2


# --- disk full inside PyTorch's serializer, and file modes ------------------------------
def test_a_full_disk_inside_torch_save_gives_the_documented_message(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    import minitransformer.utils as utils

    real_fdopen = os.fdopen

    class FullDisk:
        """A file whose disk fills up after 1,000 bytes: torch.save's own writer sees the OSError."""

        def __init__(self, handle: Any) -> None:
            self.handle, self.written = handle, 0

        def write(self, data: Any) -> int:
            self.written += len(data)
            if self.written > 1000:
                raise OSError(errno.ENOSPC, "No space left on device")
            return self.handle.write(data)

        def __getattr__(self, name: str) -> Any:
            return getattr(self.handle, name)

        def __enter__(self) -> FullDisk:
            return self

        def __exit__(self, *exc: Any) -> None:
            self.handle.close()

    train(_options(tmp_path, max_steps=2))
    monkeypatch.setattr(utils.os, "fdopen", lambda fd, mode: FullDisk(real_fdopen(fd, mode)))
    model = torch.nn.Linear(64, 64)
    with pytest.raises(OutputError, match=r"disk full while writing .*checkpoint-00000002\.pt \(No space left on "
                                          r"device\).* the previous checkpoint-00000002\.pt is unchanged"):
        utils.atomic_write(tmp_path / "checkpoint-00000002.pt",
                           lambda handle: torch.save({"w": model.state_dict()}, handle))
    assert load_checkpoint(tmp_path)["step"] == 2
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".part")]


def test_files_keep_ordinary_modes_after_a_resume(tmp_path: Path) -> None:
    mask = os.umask(0o022)
    os.umask(mask)
    train(_options(tmp_path, max_steps=2, save_every=1))
    train(_options(tmp_path, max_steps=3, save_every=1, resume=str(tmp_path / "checkpoint-00000001.pt")))
    expected = 0o666 & ~mask
    for name in ("checkpoint-00000003.pt", "best.pt", "log.jsonl", "tokenizer.json", "loss.png"):
        assert (tmp_path / name).stat().st_mode & 0o777 == expected, name


# --- issue 29: Ctrl-C at the lock, a start without a checkpoint, a foreign checkpoint ------
def test_ctrl_c_while_the_lock_is_written_leaves_no_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = RunLock._write

    def write(fd: int) -> None:
        real(fd)
        raise KeyboardInterrupt  # after our process id is in the file, before acquire() returns

    monkeypatch.setattr(RunLock, "_write", staticmethod(write))
    with pytest.raises(KeyboardInterrupt):
        RunLock(tmp_path).acquire()
    assert not (tmp_path / LOCK_NAME).exists()


def _killed_before_its_first_checkpoint(out: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a run killed in its first step leaves: its log and tokenizer, and a lock naming a dead process."""
    with monkeypatch.context() as patch:
        _crash_at(patch, 1)
        with pytest.raises(RuntimeError, match="simulated crash"):
            train(_options(out, max_steps=2))
    (out / LOCK_NAME).write_text(json.dumps({"pid": 2**22 + 12345, "host": socket.gethostname()}))
    assert sorted(p.name for p in out.iterdir()) == [LOCK_NAME, "log.jsonl", "tokenizer.json"]


def test_a_folder_without_a_checkpoint_does_not_block_a_new_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    _killed_before_its_first_checkpoint(tmp_path, monkeypatch)
    capsys.readouterr()
    result = train(_options(tmp_path, max_steps=2))  # no --overwrite needed: there was nothing to lose
    assert result.step == 2
    out = capsys.readouterr().out
    assert (f"note: {tmp_path} holds only the log.jsonl and tokenizer.json of a run that stopped before its first "
            "checkpoint") in out
    records = read_log(tmp_path / "log.jsonl")
    assert [r["event"] for r in records].count("setup") == 1  # a fresh log, not the old one continued
    assert not (tmp_path / LOCK_NAME).exists()


def test_a_folder_without_a_checkpoint_but_with_other_files_is_still_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _killed_before_its_first_checkpoint(tmp_path, monkeypatch)
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match=r"is not empty \(log\.jsonl, notes\.txt, tokenizer\.json\)"):
        train(_options(tmp_path, max_steps=1))
    (tmp_path / "notes.txt").unlink()
    # A log that records checkpoints (deleted since) is a finished run's record: not taken over either.
    with open(tmp_path / "log.jsonl", "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"event": "checkpoint", "step": 2, "path": "checkpoint-00000002.pt"}) + "\n")
    with pytest.raises(FileExistsError, match=r"is not empty \(log\.jsonl, tokenizer\.json\)"):
        train(_options(tmp_path, max_steps=1))


def test_a_checkpoint_of_another_model_size_is_not_resumed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from minitransformer.training import CheckpointError

    run, other = tmp_path / "run", tmp_path / "other"
    train(_options(run, max_steps=2))
    train(_options(other, max_steps=3, d_model=24, d_ff=48))
    foreign = run / "checkpoint-00000003.pt"
    foreign.write_bytes((other / "checkpoint-00000003.pt").read_bytes())  # the newest file of the folder now
    before = _snapshot(run)
    assert main(["train", "--resume", "--out", str(run), "--max-steps", "4"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert (f"checkpoint {foreign} does not belong to the run in {run}: it was written for d_model=24, d_ff=48, "
            "but that run (its log.jsonl) has d_model=16, d_ff=32") in err
    with pytest.raises(CheckpointError, match=r"written for d_model=24, d_ff=48, but that run .* has d_model=16"):
        train(_options(run, max_steps=4, resume="auto"))
    assert _snapshot(run) == before and not list(run.glob(".after-step-*"))
    # Its own run's checkpoints still resume; so does the foreign one, from a folder of its own.
    foreign.unlink()
    assert train(_options(run, max_steps=3, resume="auto")).step == 3
