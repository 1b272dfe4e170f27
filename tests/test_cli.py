"""``python -m minitransformer``: help texts, train, translate, average, clear errors."""

from __future__ import annotations

import argparse
import io
import os
import re
import runpy
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from minitransformer.__main__ import main
from minitransformer.cli import build_parser
from minitransformer.training import load_checkpoint, read_log
from minitransformer.training.checkpoint import checkpoint_tokenizer

REPO_ROOT = Path(__file__).resolve().parents[1]
TINY = ["--train-size", "200", "--d-model", "16", "--n-heads", "2", "--d-ff", "32", "--layers", "1",
        "--batch-tokens", "400", "--warmup", "10", "--eval-sentences", "8", "--show", "2", "--target", "0"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny model trained for 30 steps through the command line, with checkpoints every 10."""
    out = tmp_path_factory.mktemp("cli") / "run"
    old = {k: os.environ.get(k) for k in ("XDG_CACHE_HOME", "TQDM_DISABLE")}
    os.environ["XDG_CACHE_HOME"] = str(out.parent / "cache")
    os.environ["TQDM_DISABLE"] = "1"
    try:
        # Xavier-started: after 30 steps this tiny model ends its outputs, which the warning tests need.
        assert main(["train", *TINY, "--embedding-init", "xavier", "--max-steps", "30", "--save-every", "10",
                     "--out", str(out)]) == 0
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return out


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


@pytest.mark.parametrize("command", ["train", "translate", "attention", "average"])
def test_help_of_every_subcommand_describes_every_option(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main([command, "--help"])
    assert stop.value.code == 0
    text = capsys.readouterr().out
    sub = _subparsers()[command]
    for action in sub._actions:
        assert action.help, f"{command} option {action.option_strings or action.dest} has no help text"
        for flag in action.option_strings:
            assert flag in text


def test_train_has_the_options_of_the_issue() -> None:
    flags = {f for a in _subparsers()["train"]._actions for f in a.option_strings}
    wanted = ("--dataset --src-file --tgt-file --valid-src-file --valid-tgt-file --preset --d-model --n-heads "
              "--d-ff --layers --norm-first --device --precision --compile --batch-tokens --accumulate --epochs "
              "--max-steps --warmup --lr-factor --label-smoothing --out --resume --seed --src-locale --tgt-locale "
              "--src-lang --tgt-lang --data-dir --vocab-size").split()
    assert set(wanted) <= flags, set(wanted) - flags


def test_the_module_runs_as_a_program() -> None:
    result = subprocess.run([sys.executable, "-m", "minitransformer", "--help"], capture_output=True, text=True,
                            env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)), timeout=120)
    assert result.returncode == 0 and "train" in result.stdout and "translate" in result.stdout


def test_training_writes_checkpoints_log_curve_and_tokenizer(run_dir: Path) -> None:
    names = {p.name for p in run_dir.iterdir()}
    assert {"log.jsonl", "loss.png", "tokenizer.json", "checkpoint-00000030.pt"} <= names
    setup = [r for r in read_log(run_dir / "log.jsonl") if r["event"] == "setup"][0]
    for key in ("vocab_size", "mean_tokens", "padding_fraction", "parameters"):
        assert key in setup


def test_translate_arguments_and_standard_input(run_dir: Path, capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    last = str(run_dir / "checkpoint-00000030.pt")
    assert main(["translate", "--checkpoint", last, "Friday, January 14, 1944", "Monday, May 1, 2000"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2
    monkeypatch.setattr(sys, "stdin", io.StringIO("Friday, January 14, 1944\nMonday, May 1, 2000\n"))
    assert main(["translate", "--checkpoint", last]) == 0
    assert capsys.readouterr().out.splitlines() == lines


def test_a_run_folder_translates_with_its_best_checkpoint(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    best = load_checkpoint(run_dir / "best.pt")
    assert best["step"] == best["metrics"]["best_step"]
    assert main(["translate", "--checkpoint", str(run_dir / "best.pt"), "Monday, May 1, 2000"]) == 0
    from_best = capsys.readouterr().out
    assert main(["translate", "--checkpoint", str(run_dir), "Monday, May 1, 2000"]) == 0
    assert capsys.readouterr().out == from_best


def test_average_the_last_checkpoints(run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "avg.pt"
    assert main(["average", "--checkpoints", str(run_dir), "--last", "2", "--out", str(out)]) == 0
    averaged = load_checkpoint(out)
    assert len(averaged["averaged_from"]) == 2 and "optimizer" not in averaged
    assert main(["translate", "--checkpoint", str(out), "Friday, January 14, 1944"]) == 0


def test_resume_takes_the_options_of_the_run(run_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("TQDM_DISABLE", "1")
    copy = tmp_path / "run"
    copy.mkdir()
    last = run_dir / "checkpoint-00000030.pt"
    (copy / last.name).write_bytes(last.read_bytes())
    assert main(["train", "--resume", "--out", str(copy), "--max-steps", "32"]) == 0
    checkpoint = load_checkpoint(copy)
    assert checkpoint["step"] == 32 and checkpoint["config"]["d_model"] == 16


def test_errors_are_one_clear_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"garbage")
    assert main(["translate", "--checkpoint", str(bad), "hello"]) == 2
    assert "error: checkpoint" in capsys.readouterr().err
    assert main(["train", "--dataset", "text", "--src-file", "a.txt"]) == 2
    assert "missing --tgt-file, --valid-src-file, --valid-tgt-file" in capsys.readouterr().err


def test_translate_with_beam_search(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    last = str(run_dir / "checkpoint-00000030.pt")
    sentences = ["Friday, January 14, 1944", "Monday, May 1, 2000"]
    assert main(["translate", "--checkpoint", last, "--beam", "1", *sentences]) == 0
    greedy = capsys.readouterr().out
    assert main(["translate", "--checkpoint", last, *sentences]) == 0
    assert capsys.readouterr().out == greedy  # --beam 1 is greedy decoding
    assert main(["translate", "--checkpoint", last, "--beam", "4", *sentences]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 2
    assert main(["translate", "--checkpoint", last, "--beam", "0", *sentences]) == 2
    assert "--beam must be at least 1 (1 is greedy decoding), got 0" in capsys.readouterr().err


def test_test_split_is_scored_greedy_and_with_beam_4(run_dir: Path) -> None:
    events = {r["event"]: r for r in read_log(run_dir / "log.jsonl")}
    assert "exact_match" in events["test"] and events["test_beam"]["beam"] == 4
    assert 0.0 <= events["test_beam"]["exact_match"] <= 1.0


def test_attention_command_writes_every_map(run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "maps"
    assert main(["attention", "--checkpoint", str(run_dir), "Monday, May 1, 2000", "--out", str(out)]) == 0
    names = sorted(p.name for p in out.glob("*.png"))
    assert names == ["cross_layer1.png", "decoder_self_layer1.png", "encoder_layer1.png"]  # TINY has 1 layer
    assert "wrote 3 figures" in capsys.readouterr().out
    assert main(["attention", "--checkpoint", str(run_dir), "Monday, May 1, 2000", "--target", "Montag, 1. Mai 2000",
                 "--kinds", "cross", "--out", str(out / "given")]) == 0
    assert [p.name for p in (out / "given").glob("*.png")] == ["cross_layer1.png"]


def test_grade_without_the_grader_says_in_one_line_how_to_install_it(capsys: pytest.CaptureFixture[str],
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # The grader is its own distribution, found through its entry point (its tests: grader/tests); here none is.
    import importlib.metadata

    monkeypatch.setattr(importlib.metadata, "entry_points", lambda **selection: importlib.metadata.EntryPoints(()))
    assert main(["grade", "submissions/"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1, captured
    assert "grader is not installed" in captured.err and "pip install -e grader" in captured.err


def test_a_dates_run_logs_its_locales_languages_and_its_threads(run_dir: Path) -> None:
    setup = [r for r in read_log(run_dir / "log.jsonl") if r["event"] == "setup"][0]
    assert (setup["options"]["src_lang"], setup["options"]["tgt_lang"]) == ("en", "de")  # en_US -> de_DE
    # A 0.01M model on a CPU gets one thread; the test command's OMP_NUM_THREADS=1 is honoured first.
    expected_reason = "OMP_NUM_THREADS" if os.environ.get("OMP_NUM_THREADS") else "parameters"
    assert setup["threads"] == 1 and expected_reason in setup["threads_reason"]


def test_resuming_a_finished_run_says_there_is_nothing_left(run_dir: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    copy = tmp_path / "run"
    copy.mkdir()
    last = run_dir / "checkpoint-00000030.pt"
    (copy / last.name).write_bytes(last.read_bytes())
    assert main(["train", "--resume", "--out", str(copy)]) == 0
    out = capsys.readouterr().out
    assert "nothing left to train" in out and "--max-steps 30" in out
    assert [p.name for p in copy.iterdir()] == [last.name]  # nothing trained, scored or written


def test_average_last_more_than_kept_averages_all_with_a_note(run_dir: Path, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "avg.pt"
    kept = len(list(run_dir.glob("checkpoint-*.pt")))
    assert main(["average", "--checkpoints", str(run_dir), "--last", "9", "--out", str(out)]) == 0
    assert f"--last 9, but only {kept} checkpoints were given: averaging all {kept}" in capsys.readouterr().err
    assert len(load_checkpoint(out)["averaged_from"]) == kept


def test_translate_takes_the_length_penalty_its_run_chose(run_dir: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    import minitransformer.evaluation as evaluation

    alphas: list[float] = []
    real = evaluation.translate_with_notes

    def spy(*args: Any, **kwargs: Any) -> Any:
        alphas.append(kwargs["alpha"])
        return real(*args, **kwargs)

    monkeypatch.setattr(evaluation, "translate_with_notes", spy)
    checkpoint = load_checkpoint(run_dir / "checkpoint-00000030.pt")
    assert checkpoint["options"]["beam_alpha"] == 0.6  # the paper's, where the recipe chooses none
    beam = next(r for r in read_log(run_dir / "log.jsonl") if r["event"] == "test_beam")
    assert beam["alpha"] == 0.6  # the run's own test used it too
    chosen, older = tmp_path / "chosen.pt", tmp_path / "older.pt"
    torch.save({**checkpoint, "options": {**checkpoint["options"], "beam_alpha": 1.0}}, chosen)
    torch.save({**checkpoint, "options": {k: v for k, v in checkpoint["options"].items() if k != "beam_alpha"}},
               older)  # written before the option existed
    for path, flags, expected in ((chosen, [], 1.0), (chosen, ["--alpha", "0.3"], 0.3), (older, [], 0.6)):
        assert main(["translate", "--checkpoint", str(path), "--beam", "2", *flags, "Monday, May 1, 2000"]) == 0
        assert alphas[-1] == expected


def test_translate_warns_about_input_unlike_the_training_data(run_dir: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["translate", "--checkpoint", str(run_dir), "Friday, March 3, 2023"]) == 0
    assert capsys.readouterr().err == ""
    import datetime

    from babel.dates import format_date

    sentences = ["2023-03-03", "中文", format_date(datetime.date(1066, 10, 14), format="full", locale="en_US")]
    assert main(["translate", "--checkpoint", str(run_dir), *sentences]) == 0
    captured = capsys.readouterr()
    assert len(captured.out.splitlines()) == 3  # still translated: a warning, not a refusal
    err = captured.err
    assert "sentence 1 ('2023-03-03') is not a full en_US date such as 'Friday, March 3, 2023'" in err
    assert "sentence 2 has characters the model's vocabulary never saw ('中' '文')" in err
    assert "sentence 3 names the year 1066, outside the years this model was trained on (1900-2099)" in err


def test_a_cpu_run_estimated_to_take_hours_is_refused_without_allow_slow(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import minitransformer.training.cpu as cpu

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("TQDM_DISABLE", "1")
    monkeypatch.setattr(cpu, "matmul_flops", lambda: 1e3)  # a very slow CPU: no base model is trained here
    args = ["train", *TINY, "--max-steps", "2", "--device", "cpu", "--out", str(tmp_path / "run")]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "per step" in err and "per epoch" in err and "GB of disk" in err and "--allow-slow" in err
    assert "--preset small" in err  # the CPU-sized model (the laptop recipe's) is suggested
    assert not list((tmp_path / "run").glob("checkpoint-*.pt"))
    assert main([*args, "--allow-slow", "--overwrite"]) == 0
    assert "warning: this run would train" in capsys.readouterr().err
    # A time budget bounds the run, as --minutes does: nothing to refuse or warn of, however slow the CPU
    assert main(["train", *TINY, "--time-budget", "1", "--device", "cpu", "--overwrite", "--out",
                 str(tmp_path / "run")]) == 0
    assert "would train" not in capsys.readouterr().err


def test_cpu_estimate_of_the_base_model_on_multi30k() -> None:
    from minitransformer.training.cpu import SLOW_RUN_SECONDS, estimate_cpu_run

    # The base model with an 8,000-token vocabulary (48.3M parameters), 4,096 tokens a step, ~120 steps an
    # epoch, 40 epochs, at 40 GFLOP/s: about half a minute a step (the issue measured 33-62 s), days in all.
    e = estimate_cpu_run(48_300_000, 4096, 120, 40, None, keep=5, flops=40e9)
    assert 25 < e.step_seconds < 35 and e.steps == 4800 and e.run_seconds > SLOW_RUN_SECONDS
    assert abs(e.checkpoint_bytes / 1e6 - 579.6) < 1  # the issue measured 579 MB per checkpoint
    assert e.disk_bytes == 6 * e.checkpoint_bytes  # --keep 5 and best.pt
    # The CPU-sized run of lesson 07 (2.4M parameters, 952 steps) passes at the same speed.
    assert estimate_cpu_run(2_400_000, 4096, 119, 8, None, keep=5, flops=40e9).run_seconds < SLOW_RUN_SECONDS


def test_progress_is_text_per_epoch_and_names_the_stop_rule(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             capfd: pytest.CaptureFixture[str]) -> None:
    import torch

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    threads = torch.get_num_threads()
    assert main(["train", *TINY, "--epochs", "2", "--target", "0.001", "--out", str(tmp_path / "run")]) == 0
    assert torch.get_num_threads() == threads  # the run's choice does not outlive it
    captured = capfd.readouterr()
    assert ("training for at most 2 epochs (12 steps); it stops earlier once the validation set reaches 0.1% "
            "exact match") in captured.out
    assert "epoch 1/2" in captured.err  # the text bar's title: this epoch out of the limit
    assert "\x1b[" not in captured.err  # plain text, no colours


def test_the_setup_line_shows_the_thread_choice(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("TQDM_DISABLE", "1")
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert main(["train", *TINY, "--max-steps", "1", "--threads", "2", "--out", str(tmp_path / "run")]) == 0
    assert "2 CPU threads (--threads)" in capsys.readouterr().out


def test_choose_threads() -> None:
    import torch

    from minitransformer.training.cpu import ONE_THREAD_BELOW, choose_threads

    cpu = torch.device("cpu")
    assert choose_threads(3, cpu, 10)[0] == 3
    env = dict(os.environ)
    try:
        os.environ.pop("OMP_NUM_THREADS", None)
        assert choose_threads(None, cpu, 250_000)[0] == 1
        assert choose_threads(None, cpu, ONE_THREAD_BELOW)[0] == torch.get_num_threads()
        os.environ["OMP_NUM_THREADS"] = "2"
        assert choose_threads(None, cpu, 250_000) == (torch.get_num_threads(), "OMP_NUM_THREADS")
    finally:
        os.environ.clear()
        os.environ.update(env)


def test_languages_recorded_for_each_dataset() -> None:
    from minitransformer.training import TrainOptions

    assert (TrainOptions().resolved().src_lang, TrainOptions().resolved().tgt_lang) == ("en", "de")
    hungarian = TrainOptions(src_locale="de_DE", tgt_locale="hu_HU").resolved()
    assert (hungarian.src_lang, hungarian.tgt_lang) == ("de", "hu")
    multi30k = TrainOptions(dataset="multi30k")
    assert (multi30k.resolved().src_lang, multi30k.resolved().tgt_lang) == ("de", "en")  # the paper's direction
    assert TrainOptions(dataset="multi30k", tgt_lang="de").resolved().src_lang == "en"
    assert "threads" not in TrainOptions(threads=2).to_dict()  # per invocation: not inherited by --resume


def test_a_blank_line_on_standard_input_is_skipped_with_a_note(run_dir: Path, capsys: pytest.CaptureFixture[str],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    last = str(run_dir / "checkpoint-00000030.pt")
    assert main(["translate", "--checkpoint", last, "Friday, January 14, 1944", "Monday, May 1, 2000"]) == 0
    first, second = capsys.readouterr().out.splitlines()
    monkeypatch.setattr(sys, "stdin", io.StringIO("Friday, January 14, 1944\n\nMonday, May 1, 2000\n"))
    assert main(["translate", "--checkpoint", last]) == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines() == [first, "", second]  # output lines stay aligned with input lines
    assert "line(s) 2 of standard input are empty: skipped" in captured.err


def test_attention_and_translate_accept_the_same_long_sentence(run_dir: Path, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    table = load_checkpoint(run_dir)["config"]["max_len"]
    words = "Friday, March 3, 2023 " * 40
    assert main(["translate", "--checkpoint", str(run_dir), words]) == 0
    capsys.readouterr()
    assert main(["attention", "--checkpoint", str(run_dir), words, "--out", str(tmp_path / "maps"),
                 "--kinds", "encoder"]) == 0
    err = capsys.readouterr().err
    assert "max_len" not in err  # no talk of a length the user never gave
    too_long = "Friday, March 3, 2023 " * table
    for command in (["translate", "--checkpoint", str(run_dir), too_long],
                    ["attention", "--checkpoint", str(run_dir), too_long, "--out", str(tmp_path / "maps")]):
        assert main(command) == 2
        assert re.search(rf"has \d+ tokens but the model reads at most max_len={table} \(the length of its "
                         r"positional table\)", capsys.readouterr().err)


def test_an_output_that_never_ends_is_cut_and_called_unreliable(run_dir: Path, capsys: pytest.CaptureFixture[str],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    import minitransformer.evaluation as evaluation

    real = evaluation.greedy_decode

    def looping(model: Any, src: torch.Tensor, max_len: int, bos_id: int, eos_id: int, **kwargs: Any) -> Any:
        # A model stuck on a two-token group ("Friday ,"), as a 450-token input made one do.
        out = real(model, src, max_len, bos_id, eos_id, **kwargs)
        group = torch.tensor([5, 6]).repeat(max_len)[:max_len]
        return torch.cat([out[:, :1], group.expand(src.size(0), -1)], dim=1)

    monkeypatch.setattr(evaluation, "greedy_decode", looping)
    assert main(["translate", "--checkpoint", str(run_dir), "Friday, March 3, 3023"]) == 0
    captured = capsys.readouterr()
    assert "no end token within its limit of" in captured.err and "repeated a group of 2 token(s)" in captured.err
    assert "its translation is unreliable" in captured.err
    tokenizer = checkpoint_tokenizer(load_checkpoint(run_dir))
    assert captured.out.strip() == tokenizer.decode([5, 6]).strip()  # the loop cut after its first group


def test_cut_loop_keeps_ended_outputs_and_cuts_loops() -> None:
    from minitransformer.evaluation import cut_loop

    assert cut_loop([7, 8, 9, 2, 0], eos_id=2, limit=5) == ([7, 8, 9, 2], None)
    assert cut_loop([7, 1, 1, 1, 1], eos_id=2, limit=5)[0] == [7, 1]
    ids, note = cut_loop([7, 8, 9, 4], eos_id=2, limit=4)
    assert ids == [7, 8, 9, 4] and note == "no end token within its limit of 4 tokens"


def test_a_huge_beam_is_capped_at_the_vocabulary(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    vocab = load_checkpoint(run_dir)["config"]["tgt_vocab_size"]
    assert main(["translate", "--checkpoint", str(run_dir), "--beam", "100000", "--batch-size", "1",
                 "Friday, March 3, 2023"]) == 0
    assert f"--beam 100000 is more than the {vocab} tokens of the vocabulary: using --beam {vocab}" in \
        capsys.readouterr().err


def test_the_cpu_estimate_uses_the_real_batch_not_the_budget(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("TQDM_DISABLE", "1")
    # 200 dates fit in one batch of a few thousand tokens, whatever the budget: the run is small.
    assert main(["train", *TINY, "--batch-tokens", str(10**12), "--max-steps", "1", "--device", "cpu",
                 "--test-beam", "1", "--out", str(tmp_path / "run")]) == 0
    assert "per step" not in capsys.readouterr().err


# --- issue 29: the first hour ----------------------------------------------------------
def _warnings(err: str, command: str) -> list[str]:
    prefix = f"minitransformer {command}: warning: "
    return [line[len(prefix):] for line in err.splitlines() if line.startswith(prefix)]


@pytest.mark.parametrize("sentence", ["Saturday, March 3, 2023", "2023-03-03", "Friday, March 3, 2023 " * 40,
                                      "Sunday, October 14, 1066"], ids=["weekday", "not-a-date", "long", "year"])
def test_attention_gives_the_warnings_of_translate(run_dir: Path, tmp_path: Path, sentence: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    # Unlike the training data: a wrong weekday, not a date, longer than every training sentence, a far year.
    assert main(["translate", "--checkpoint", str(run_dir), sentence]) == 0
    translate = [w for w in _warnings(capsys.readouterr().err, "translate") if "unreliable" not in w]
    assert translate, "translate should warn about this sentence"
    assert main(["attention", "--checkpoint", str(run_dir), sentence, "--kinds", "encoder",
                 "--out", str(tmp_path / "maps")]) == 0
    attention = [w for w in _warnings(capsys.readouterr().err, "attention") if "unreliable" not in w]
    assert attention == [w.replace("sentence 1 ", "the sentence ", 1) for w in translate]


def test_a_wrong_weekday_is_named_as_such(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["translate", "--checkpoint", str(run_dir), "Saturday, March 3, 2023",
                 "Saturday, October 14, 1066"]) == 0
    err = capsys.readouterr().err
    assert ("sentence 1 ('Saturday, March 3, 2023'): the weekday does not match the date, which is "
            "'Friday, March 3, 2023'; this model saw only real dates") in err
    assert "not a full en_US date" not in err  # it is one, with the wrong day's name
    assert "sentence 2 ('Saturday, October 14, 1066'): the weekday does not match the date, which is 'Sunday" in err
    assert "sentence 2 names the year 1066, outside the years this model was trained on" in err


def test_errors_and_warnings_number_sentences_as_lines(run_dir: Path, capsys: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    table = load_checkpoint(run_dir)["config"]["max_len"]
    too_long = "Friday, March 3, 2023 " * table
    # Arguments: the second sentence is the one too long for the model (was "sentence 1", counted from 0).
    assert main(["translate", "--checkpoint", str(run_dir), "Friday, March 3, 2023", too_long]) == 2
    assert re.search(r"error: sentence 2 has \d+ tokens but the model reads at most", capsys.readouterr().err)
    # Standard input with an empty line: numbers are line numbers, for the warning and for the error.
    monkeypatch.setattr(sys, "stdin", io.StringIO("Friday, March 3, 2023\n\n2023-03-03\n"))
    assert main(["translate", "--checkpoint", str(run_dir)]) == 0
    err = capsys.readouterr().err
    assert "sentence 3 ('2023-03-03') is not a full en_US date" in err and "sentence 2 " not in err
    monkeypatch.setattr(sys, "stdin", io.StringIO(f"Friday, March 3, 2023\n\n{too_long}\n"))
    assert main(["translate", "--checkpoint", str(run_dir)]) == 2
    assert re.search(r"error: sentence 3 has \d+ tokens", capsys.readouterr().err)


def test_ctrl_c_while_setting_up_says_so_and_leaves_no_lock(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    import minitransformer.training.run as run

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))

    def interrupted(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt  # Ctrl-C while the data is being made

    monkeypatch.setattr(run, "load_corpus", interrupted)
    existing = tmp_path / "existing"
    existing.mkdir()
    for out in (tmp_path / "new", existing):
        assert main(["train", *TINY, "--max-steps", "1", "--out", str(out)]) == 130
        assert capsys.readouterr().err.strip() == "minitransformer train: interrupted (Ctrl-C)"
    assert not (tmp_path / "new").exists()  # the folder the run made is gone again
    assert list(existing.iterdir()) == []  # no .lock left


def test_dates_of_the_training_distribution_raise_no_length_warning(run_dir: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    from minitransformer.evaluation import training_length
    from minitransformer.data.dates import load_dates

    checkpoint = load_checkpoint(run_dir)
    tokenizer = checkpoint_tokenizer(checkpoint, run_dir)
    longest = training_length(checkpoint, run_dir)
    # The run's own training sentences and 50 held-out dates: none is longer than training saw.
    dates = [s for s, _ in load_dates("train", n_train=200)] + [s for s, _ in load_dates("test", n_test=50)]
    assert main(["translate", "--checkpoint", str(run_dir), *dates]) == 0
    assert not [w for w in _warnings(capsys.readouterr().err, "translate") if "tokens long" in w]
    # A sentence of exactly `longest` tokens is fine; one token more is not.
    exact = "Friday, March 3, 2023"
    while len(tokenizer.encode(exact, add_eos=False)) < longest:
        exact += ","  # one token each
    assert len(tokenizer.encode(exact, add_eos=False)) == longest
    longer = exact + ","
    assert main(["translate", "--checkpoint", str(run_dir), exact, longer]) == 0
    length_warnings = [w for w in _warnings(capsys.readouterr().err, "translate") if "tokens long" in w]
    n = len(tokenizer.encode(longer, add_eos=False))
    assert length_warnings == [f"sentence 2 is {n} tokens long, longer than every training sentence (at most "
                               f"{longest}): the model never learned positions this far, so expect its "
                               "translation to lose or repeat parts; split it into shorter sentences"]


# --- issue 40: the learner's own copy --------------------------------------------------
def test_workspace_copies_lessons_and_exercises_with_working_links(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    import json

    out = tmp_path / "my-course"
    assert main(["workspace", str(out), "--course", str(REPO_ROOT)]) == 0
    lessons = sorted((REPO_ROOT / "notebooks").glob("*.ipynb"))
    count = len(lessons) + len(list((REPO_ROOT / "exercises").glob("*.ipynb")))
    assert f"copied {count} notebooks" in capsys.readouterr().out
    assert [p.name for p in sorted((out / "notebooks").glob("*.ipynb"))] == [p.name for p in lessons]
    for lesson in lessons:
        stored = json.loads(lesson.read_text(encoding="utf-8"))
        copy = json.loads((out / "notebooks" / lesson.name).read_text(encoding="utf-8"))
        notes = [k for k, cell in enumerate(stored["cells"]) if "".join(cell["source"]).startswith(
            "> **Run your own copy.**")]
        assert notes and notes[0] <= 1, lesson.name  # every stored lesson says where to work, at its start
        assert "".join(copy["cells"][notes[0]]["source"]).startswith("> **Your copy.**"), lesson.name
        del stored["cells"][notes[0]], copy["cells"][notes[0]]
        assert copy["cells"] == stored["cells"], lesson.name  # all else as stored: outputs kept for reading
        # The Practice link of the copy opens the copy of its exercise, not the course's.
        practice = next("".join(c["source"]) for c in copy["cells"] if "## Practice" in "".join(c["source"]))
        links = re.findall(r"\]\((\.\./exercises/[^)]+\.ipynb)\)", practice)
        exercise = runpy.run_path(str(REPO_ROOT / "tools" / "build_site.py"))["exercise_of"](lesson).name  # the site's rule: a second half (NNb_name) links its first half's
        assert links[0] == f"../exercises/{exercise}", (lesson.name, links)  # lesson 08 also links the capstone
        for link in links:
            target = (out / "notebooks" / link).resolve()
            assert target == (out / "exercises" / Path(link).name).resolve() and target.is_file()
    # The records the lessons read are found from the copy as from the stored lesson.
    assert (out / "notebooks" / ".." / "benchmarks" / "results" / "ablations-cpu.json").is_file()
    # A second run keeps the learner's work.
    mine = out / "exercises" / "03_self_attention.ipynb"
    mine.write_text("my answers", encoding="utf-8")
    assert main(["workspace", str(out), "--course", str(REPO_ROOT)]) == 0
    assert f"kept your {count} notebooks" in capsys.readouterr().out and mine.read_text(encoding="utf-8") == "my answers"


def test_workspace_refuses_the_course_itself_and_a_folder_without_lessons(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["workspace", str(REPO_ROOT / "exercises"), "--course", str(REPO_ROOT)]) == 2
    assert "is a folder of the course itself" in capsys.readouterr().err
    assert main(["workspace", str(tmp_path / "out"), "--course", str(tmp_path)]) == 2
    assert "run this from the course repository's root, or name that folder with --course" in capsys.readouterr().err
