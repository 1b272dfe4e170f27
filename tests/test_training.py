"""The training run: resuming, Ctrl-C, several processes, and real data (all on the CPU, small)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch

from minitransformer.training import TrainOptions, load_checkpoint, load_model, read_log, train

REPO_ROOT = Path(__file__).resolve().parents[1]
MULTI30K = REPO_ROOT.parent / "shared" / "data" / "multi30k"

TINY = dict(dataset="dates", train_size=60, vocab_size=1000, d_model=16, n_heads=2, d_ff=32, layers=1,
            dropout=0.1, batch_tokens=200, warmup=10, lr_factor=1.0, eval_sentences=16, log_every=1, show=0,
            target=None)


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tokenizer caches go to a temporary folder, not the user's."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.getbasetemp() / "cache"))
    monkeypatch.setenv("TQDM_DISABLE", "1")


def _options(out: Path, **changes: Any) -> TrainOptions:
    return TrainOptions(**{**TINY, "out": str(out), **changes})


def _losses(out: Path) -> dict[int, float]:
    return {r["step"]: r["loss"] for r in read_log(out / "log.jsonl") if r["event"] == "train"}


def test_resuming_gives_the_losses_of_an_uninterrupted_run(tmp_path: Path) -> None:
    whole = train(_options(tmp_path / "whole", max_steps=7))
    first = train(_options(tmp_path / "parts", max_steps=3))
    assert first.step == 3 and load_checkpoint(first.checkpoint)["batches_done"] > 0  # stopped mid-epoch
    rest = train(_options(tmp_path / "parts", max_steps=7, resume="auto"))
    assert rest.step == 7
    setup = [r for r in read_log(tmp_path / "whole" / "log.jsonl") if r["event"] == "setup"][0]
    assert setup["batches_per_epoch"] < 7  # the run crossed an epoch end (validation, checkpoint)
    a, b = _losses(tmp_path / "whole"), _losses(tmp_path / "parts")
    assert sorted(a) == sorted(b) == list(range(1, 8))
    assert [a[s] for s in a] == [b[s] for s in a]  # bit for bit on a CPU
    wa = load_checkpoint(whole.checkpoint)["model"]
    wb = load_checkpoint(rest.checkpoint)["model"]
    for name in wa:
        torch.testing.assert_close(wa[name], wb[name], rtol=0, atol=0, msg=name)


def test_train_gives_the_losses_of_a_plain_loop(tmp_path: Path) -> None:
    # Lesson 07 writes this loop out: train() must draw its random numbers in the same order (seed, initial
    # weights, then dropout masks step by step), so that the two agree bit for bit on a CPU.
    from minitransformer import Transformer, set_seed, transformer_scheduler
    from minitransformer.data import SharedTokenizer, TokenBatchSampler, collate_pairs, load_dates
    from minitransformer.training import label_smoothed_nll

    o = _options(tmp_path, device="cpu", max_steps=3).resolved()
    result = train(o)
    pairs = load_dates("train", n_train=o.train_size, n_validation=1000, n_test=1000, seed=0)
    tok = SharedTokenizer.cached(pairs, o.vocab_size)
    ids = list(zip(tok.encode_batch([s for s, _ in pairs]), tok.encode_batch([t for _, t in pairs])))
    set_seed(o.seed)
    model = Transformer(o.model_config(tok.vocab_size, tok.pad_id))
    adam = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9, foreach=True)
    schedule = transformer_scheduler(adam, model.config.d_model, o.warmup, o.lr_factor)
    sampler = TokenBatchSampler([len(s) for s, _ in ids], [len(t) for _, t in ids], o.batch_tokens, seed=o.seed)
    losses = []
    for indices in list(sampler)[:3]:
        batch = collate_pairs([ids[i] for i in indices], tok.pad_id, tok.bos_id, tok.eos_id)
        loss_sum, _, n = label_smoothed_nll(model(batch.src, batch.tgt_in), batch.tgt_out, o.label_smoothing,
                                            tok.pad_id)
        (loss_sum / n).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), o.clip_norm)
        adam.step()
        schedule.step()
        adam.zero_grad(set_to_none=True)
        losses.append(loss_sum.item() / int(n))
    assert len(sampler) >= 3 and o.dropout > 0
    assert losses == list(_losses(tmp_path).values())  # bit for bit


def test_timing_the_cpu_leaves_the_random_draws_alone() -> None:
    from minitransformer.training.cpu import matmul_flops

    before = torch.random.get_rng_state()
    assert matmul_flops(trials=1, seconds=0.001) > 0
    assert torch.equal(torch.random.get_rng_state(), before)


def test_a_fresh_run_refuses_to_overwrite_an_earlier_one(tmp_path: Path) -> None:
    train(_options(tmp_path, max_steps=1))
    with pytest.raises(FileExistsError, match="holds checkpoints of an earlier run.*--resume.*--overwrite"):
        train(_options(tmp_path, max_steps=1))
    again = train(_options(tmp_path, max_steps=2, overwrite=True))
    assert [p.name for p in tmp_path.glob("checkpoint-*.pt")] == [again.checkpoint.name]


def test_resuming_with_another_model_size_is_a_clear_error(tmp_path: Path) -> None:
    train(_options(tmp_path, max_steps=1))
    with pytest.raises(ValueError, match=r"was written for a model with d_model=16, n_heads=2, .*but this model "
                                         r"has d_model=32, n_heads=4"):
        train(_options(tmp_path, max_steps=2, resume="auto", d_model=32, n_heads=4))


def _env() -> dict[str, str]:
    env = dict(os.environ, TQDM_DISABLE="1", OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _cli_args(out: Path, **changes: Any) -> list[str]:
    values = {**TINY, **changes}
    values.pop("target")
    values.pop("dataset")
    args = []
    for key, value in values.items():
        args += [f"--{key.replace('_', '-')}", str(value)]
    return args + ["--out", str(out)]


def test_ctrl_c_writes_a_checkpoint_that_loads(tmp_path: Path) -> None:
    out = tmp_path / "run"
    args = [sys.executable, "-m", "minitransformer", "train", *_cli_args(out, train_size=2000, epochs=1000)]
    process = subprocess.Popen(args, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    log = out / "log.jsonl"
    deadline = time.monotonic() + 60
    while not (log.exists() and '"event": "train"' in log.read_text()):
        assert process.poll() is None, process.communicate()[0]
        assert time.monotonic() < deadline, "training did not start within 60 s"
        time.sleep(0.1)
    process.send_signal(signal.SIGINT)
    output, _ = process.communicate(timeout=60)
    assert process.returncode == 130, output
    assert "interrupted by SIGINT" in output
    checkpoint = load_checkpoint(out)
    assert checkpoint["step"] >= 1 and "optimizer" in checkpoint
    model, tokenizer, _ = load_model(out)
    assert model.config.d_model == 16 and tokenizer.vocab_size == model.config.tgt_vocab_size
    assert any(r["event"] == "interrupted" for r in read_log(log))


@pytest.mark.skipif(not torch.distributed.is_available(), reason="this PyTorch build has no torch.distributed")
def test_torchrun_two_cpu_processes_keep_identical_weights(tmp_path: Path) -> None:
    out = tmp_path / "ddp"
    args = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
            "-m", "minitransformer", "train", *_cli_args(out, train_size=120, max_steps=4, dropout=0.1)]
    result = subprocess.run(args, env=_env(), capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    records = read_log(out / "log.jsonl")
    setup = [r for r in records if r["event"] == "setup"][0]
    assert setup["world_size"] == 2
    done = [r for r in records if r["event"] == "done"][0]
    checksums = done["replica_checksums"]
    assert len(checksums) == 2 and checksums[0] == checksums[1]
    assert load_checkpoint(out)["step"] == 4
    assert len(load_checkpoint(out)["rng"]) == 2  # one random state per process
    assert result.stdout.count("data: dates") == 1  # only rank 0 prints


@pytest.mark.skipif(not MULTI30K.is_dir(), reason=f"Multi30k reference files not found at {MULTI30K}")
def test_a_short_multi30k_run_lowers_the_validation_loss(tmp_path: Path) -> None:
    result = train(TrainOptions(dataset="multi30k", data_dir=str(MULTI30K), train_size=300, preset="tiny",
                                d_model=32, n_heads=2, d_ff=64, layers=1, vocab_size=600, batch_tokens=1500,
                                max_steps=40, warmup=20, lr_factor=2.0, eval_sentences=8, log_every=10,
                                show=0, out=str(tmp_path)))
    records = read_log(tmp_path / "log.jsonl")
    before = [r["val_loss"] for r in records if r["event"] == "validation"][0]
    after = [r["val_loss"] for r in records if r["event"] == "epoch"][-1]
    assert after < before - 0.5, (before, after)
    assert 0.0 <= result.metrics["test_bleu"] <= 100.0
    assert (tmp_path / "loss.png").stat().st_size > 1000


def _trainer(tmp_path: Path, **changes: Any) -> Any:
    """A Trainer on a handful of dates with plain SGD (so gradient scale errors show)."""
    from minitransformer import Transformer
    from minitransformer.data import SharedTokenizer, load_dates
    from minitransformer.training.corpus import encode_pairs
    from minitransformer.training.distributed import DistInfo
    from minitransformer.training.runlog import RunLog
    from minitransformer.training.trainer import Trainer

    pairs = load_dates("train", n_train=12, n_validation=0, n_test=0)
    tokenizer = SharedTokenizer.train(pairs, vocab_size=300)
    options = _options(tmp_path, dropout=0.0, clip_norm=0.0, **changes).resolved()
    torch.manual_seed(0)
    model = Transformer(options.model_config(tokenizer.vocab_size))
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)
    ids = encode_pairs(tokenizer, pairs)
    return Trainer(model, model, tokenizer, optimizer, scheduler, ids, ids, pairs, "exact_match", options,
                   torch.device("cpu"), DistInfo(), RunLog(tmp_path / "log.jsonl", enabled=False))


def test_accumulated_batches_give_the_gradient_of_one_big_batch(tmp_path: Path) -> None:
    one, split = _trainer(tmp_path), _trainer(tmp_path)
    everything = list(range(12))
    tokens = sum(len(one.train_ids[i][1]) for i in everything)
    loss_one, _, n_one, _ = one.train_step([everything], tokens)
    loss_split, _, n_split, _ = split.train_step([everything[:5], everything[5:]], tokens)
    assert n_one == n_split == tokens
    torch.testing.assert_close(loss_split, loss_one)
    for (name, a), b in zip(one.model.named_parameters(), split.model.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, msg=name)


def test_bf16_autocast_runs_on_the_cpu(tmp_path: Path) -> None:
    result = train(_options(tmp_path, max_steps=2, precision="bf16"))
    setup = [r for r in read_log(tmp_path / "log.jsonl") if r["event"] == "setup"][0]
    assert setup["bf16"] is True and result.step == 2
    assert all(torch.isfinite(torch.tensor(loss)) for loss in _losses(tmp_path).values())


def test_text_files_are_a_dataset(tmp_path: Path) -> None:
    from minitransformer.data import load_dates
    from minitransformer.training.corpus import load_corpus

    for split, n in (("train", 30), ("valid", 5)):
        pairs = load_dates("train", n_train=n, n_validation=0, n_test=0, seed=len(split))
        (tmp_path / f"{split}.src").write_text("\n".join(s for s, _ in pairs) + "\n", encoding="utf-8")
        (tmp_path / f"{split}.tgt").write_text("\n".join(t for _, t in pairs) + "\n", encoding="utf-8")
    options = TrainOptions(dataset="text", src_file=str(tmp_path / "train.src"), tgt_file=str(tmp_path / "train.tgt"),
                           valid_src_file=str(tmp_path / "valid.src"), valid_tgt_file=str(tmp_path / "valid.tgt"))
    corpus = load_corpus(options.resolved())
    assert len(corpus.train) == 30 and len(corpus.validation) == 5
    assert corpus.test is None and corpus.metric == "bleu"
    with pytest.raises(ValueError, match="needs training and validation files; missing --valid-src-file"):
        TrainOptions(dataset="text", src_file="a", tgt_file="b", valid_tgt_file="c")


def test_resuming_into_a_new_folder_after_a_better_epoch(tmp_path: Path) -> None:
    # The checkpoint remembers a best epoch whose best.pt lives in the old folder: the new
    # folder's run must finish (and test its own weights) instead of looking for it.
    first = train(_options(tmp_path / "old", max_steps=3))
    checkpoint = load_checkpoint(first.checkpoint)
    checkpoint["metrics"].update({"best_val_exact_match": 2.0, "best_step": 1})
    torch.save(checkpoint, first.checkpoint)
    resumed = train(_options(tmp_path / "new", max_steps=5, resume=str(first.checkpoint)))
    assert resumed.step == 5 and not (tmp_path / "new" / "best.pt").exists()


@pytest.mark.parametrize("checks", [1, 3])
def test_the_target_is_checked_inside_epochs_so_a_run_stops_soon_after_reaching_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, checks: int) -> None:
    from minitransformer.training.trainer import Trainer

    seen: list[int] = []

    def quality(self: Trainer) -> float:  # the target is reached from the second check on
        seen.append(self.step)
        return 1.0 if len(seen) >= 2 else 0.5

    monkeypatch.setattr(Trainer, "validation_quality", quality)
    result = train(_options(tmp_path, target=1.0, checks_per_epoch=checks, epochs=4))
    per_epoch = [r for r in read_log(tmp_path / "log.jsonl") if r["event"] == "setup"][0]["batches_per_epoch"]
    assert per_epoch >= 3
    # Evenly spaced checks: with 3 per epoch the second falls inside the first epoch; with 1, at its end.
    expected = [round(per_epoch / 3), round(2 * per_epoch / 3)] if checks == 3 else [per_epoch, 2 * per_epoch]
    assert seen[:2] == expected and result.step == expected[1]
    assert load_checkpoint(result.checkpoint)["step"] == expected[1]


def test_checks_per_epoch_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="checks_per_epoch must be at least 1"):
        _options(tmp_path, checks_per_epoch=0)


@pytest.mark.parametrize("in_notebook", [True, False])
def test_lines_printed_inside_an_epoch_stay_off_the_progress_bar(tmp_path: Path, monkeypatch, capsys,
                                                                 in_notebook: bool) -> None:
    # The bar ends its text with a carriage return, not a newline: a plain print of a validation line
    # while the bar is drawn lands on the bar's line ("  40%|####  | 2/5 [...]epoch 0.4 step 2 ...").
    import minitransformer.training.trainer as trainer_module
    from minitransformer.training.trainer import Trainer

    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    monkeypatch.setattr(trainer_module, "_in_jupyter_kernel", lambda: in_notebook)  # the bar on stdout or stderr
    monkeypatch.setattr(Trainer, "validation_quality", lambda self: 0.5)  # never reaches the target
    train(_options(tmp_path, target=1.0, checks_per_epoch=3, epochs=1))
    captured = capsys.readouterr()
    out = captured.out + (captured.err if in_notebook else "")
    results = [line for line in out.split("\n") if "val loss" in line]
    assert len(results) == 3, out  # two checks inside the epoch, one at its end
    # What a notebook or a terminal shows of each line: the text after its last carriage return.
    assert all(re.fullmatch(r"epoch +[\d.]+ +step .*", line.split("\r")[-1]) for line in results), results
    assert "%|" in out or "%|" in captured.err, "the bar should have been drawn for this test to mean something"
