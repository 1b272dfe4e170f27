"""The translator on a laptop: the recipe chosen by device, the language guess, and a tiny Multi30k run end to end."""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path
from typing import Any
import pytest
import torch

from benchmarks import multi30k_cpu
from minitransformer import Transformer, TransformerConfig
from minitransformer.cli import main
from minitransformer.data import load_multi30k
from minitransformer.data.language import guess_language
from minitransformer.training import TrainOptions, load_checkpoint, read_log
from minitransformer.training.cpu import ONE_THREAD_BELOW
from minitransformer.training.options import CPU_RECIPES, RECIPES, recipe
from minitransformer.training.run import _length

REPO_ROOT = Path(__file__).resolve().parents[1]
MULTI30K = REPO_ROOT.parent / "shared" / "data" / "multi30k"
needs_multi30k = pytest.mark.skipif(not MULTI30K.is_dir(), reason=f"Multi30k files not found at {MULTI30K}")


def test_off_cuda_multi30k_trains_the_small_model_with_the_laptop_recipe() -> None:
    o = TrainOptions(dataset="multi30k", device="cpu").resolved()
    assert (o.preset, o.minutes, o.epochs, o.lr_schedule, o.warmup, o.lr_factor, o.batch_tokens, o.vocab_size) == \
        ("small", 30, None, "linear_decay", 1600, 0.5, 1024, 4000)
    assert (o.label_smoothing, o.beam_alpha, o.valid_sentences) == (0.2, 2.2, 300)
    assert o.eval_sentences is None  # the test split is scored in full
    config = o.model_config(4000)
    assert (config.d_model, config.n_heads, config.d_ff, config.n_encoder_layers, config.n_decoder_layers,
            config.dropout, config.inner_dropout, config.tie_embeddings) == (256, 4, 1024, 3, 3, 0.1, 0.0, True)
    # above train's threshold for one CPU thread: the budget's trials ran on two
    assert ONE_THREAD_BELOW < Transformer(config).num_parameters() < 7_000_000
    assert TrainOptions(dataset="multi30k", device="mps").resolved().preset == "small"  # any machine without CUDA


def test_on_cuda_multi30k_trains_the_base_model_as_before() -> None:
    o = TrainOptions(dataset="multi30k", device="cuda").resolved()
    assert (o.preset, o.epochs, o.warmup, o.lr_factor, o.valid_sentences) == ("base", 40, 1500, 1.0, None)
    assert (o.minutes, o.label_smoothing, o.beam_alpha) == (None, 0.1, 0.6)  # the paper's
    assert o.model_config(8000) == TransformerConfig.base(8000)
    assert TrainOptions(dataset="multi30k", device="cuda:1").resolved().preset == "base"


def test_auto_follows_whether_cuda_is_there(monkeypatch: pytest.MonkeyPatch) -> None:
    for available, preset in ((True, "base"), (False, "small")):
        monkeypatch.setattr(torch.cuda, "is_available", lambda available=available: available)
        assert TrainOptions(dataset="multi30k").resolved().preset == preset
        assert recipe("multi30k")["preset"] == preset


def test_options_given_override_the_laptop_recipe() -> None:
    base = TrainOptions(dataset="multi30k", device="cpu", preset="base").resolved()
    assert base.model_config(8000) == TransformerConfig.base(8000)  # the preset's own sizes, not the recipe's
    narrow = TrainOptions(dataset="multi30k", device="cpu", d_model=128, epochs=3, warmup=50,
                          valid_sentences=20).resolved()
    assert (narrow.preset, narrow.d_model, narrow.epochs, narrow.warmup, narrow.valid_sentences) == \
        ("small", 128, 3, 50, 20)
    assert narrow.model_config(8000).d_ff == 1024
    assert TrainOptions(dataset="multi30k", device="cpu", max_steps=5).resolved().epochs is None


@pytest.mark.parametrize("length", [dict(epochs=10), dict(max_steps=500), dict(time_budget=600.0)])
def test_a_length_given_replaces_a_recipes_budget(length: dict[str, Any]) -> None:
    assert CPU_RECIPES["multi30k"]["minutes"] == 30  # the laptop recipe is one in a time budget
    assert TrainOptions(dataset="multi30k", device="cpu").resolved().minutes == 30
    assert TrainOptions(dataset="multi30k", device="cpu").resolved().lr_schedule == "linear_decay"
    o = TrainOptions(dataset="multi30k", device="cpu", **length).resolved()
    assert o.minutes is None and o.lr_schedule == "inverse_sqrt"  # the paper's schedule, as without a budget
    assert (o.epochs, o.max_steps, o.time_budget) == (length.get("epochs"), length.get("max_steps"),
                                                      length.get("time_budget"))
    shorter = TrainOptions(dataset="multi30k", device="cpu", minutes=15).resolved()
    assert (shorter.minutes, shorter.epochs, shorter.lr_schedule) == (15, None, "linear_decay")


def test_other_datasets_take_the_same_recipe_everywhere() -> None:
    for dataset in ("dates",):
        on_cpu = TrainOptions(dataset=dataset, device="cpu").resolved()
        assert dataclasses.replace(on_cpu, device="cuda") == TrainOptions(dataset=dataset, device="cuda").resolved()
    assert set(CPU_RECIPES) <= set(RECIPES)
    with pytest.raises(ValueError, match="dataset must be one of"):
        recipe("wmt14", "cpu")


def test_the_small_preset_keeps_the_base_models_proportions() -> None:
    small, base = TransformerConfig.small(8000), TransformerConfig.base(8000)
    assert small.d_ff / small.d_model == base.d_ff / base.d_model == 4
    assert small.d_k == base.d_k == 64
    assert TransformerConfig.small(100, dropout=0.3).dropout == 0.3


@pytest.mark.parametrize(("sentence", "expected"), [
    ("Ein Mann mit einem orangefarbenen Hut, der etwas anstarrt.", "de"),
    ("Eine Gruppe von Menschen steht vor einem Iglu.", "de"),
    ("A man in an orange hat starring at something.", "en"),
    ("The dog is running through the grass with a ball.", "en"),
    ("Zwei Hunde.", None),  # no function word: too little evidence either way
    ("Friday, March 3, 2023", None),
    ("", None),
])
def test_guess_language_says_only_what_the_function_words_show(sentence: str, expected: str | None) -> None:
    assert guess_language(sentence) == expected


def test_guess_language_refuses_what_is_not_text() -> None:
    with pytest.raises(TypeError, match="sentence must be a str, got int"):
        guess_language(3)  # type: ignore[arg-type]


@needs_multi30k
def test_guess_language_never_calls_a_multi30k_sentence_the_other_language() -> None:
    for split in ("validation", "test"):
        pairs = load_multi30k(split, MULTI30K)
        assert [s for s, _ in pairs if guess_language(s) == "en"] == []
        assert [t for _, t in pairs if guess_language(t) == "de"] == []
        # and it speaks for most of them
        assert sum(guess_language(s) == "de" for s, _ in pairs) > 0.85 * len(pairs)


@pytest.fixture(scope="module")
def tiny_translator(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny German -> English model trained for a few steps through the command line, on the CPU."""
    if not MULTI30K.is_dir():
        pytest.skip(f"Multi30k files not found at {MULTI30K}")
    out = tmp_path_factory.mktemp("m30k") / "run"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CACHE_HOME", str(out.parent / "cache"))
        mp.setenv("TQDM_DISABLE", "1")
        stdout = io.StringIO()
        mp.setattr("sys.stdout", stdout)
        assert main(["train", "--dataset", "multi30k", "--data-dir", str(MULTI30K), "--device", "cpu",
                     "--train-size", "300", "--vocab-size", "600", "--d-model", "32", "--n-heads", "2",
                     "--d-ff", "64", "--layers", "1", "--batch-tokens", "1500", "--epochs", "2", "--warmup", "20",
                     "--valid-sentences", "4", "--eval-sentences", "12", "--show", "0", "--test-beam", "1",
                     "--out", str(out)]) == 0
    (out / "stdout.txt").write_text(stdout.getvalue())
    return out


def test_a_tiny_multi30k_run_says_its_recipe_and_records_what_translate_needs(tiny_translator: Path) -> None:
    printed = (tiny_translator / "stdout.txt").read_text()
    assert "recipe: the laptop recipe of multi30k (no CUDA GPU here): 2 epochs, warm-up 20" in printed  # sizes given: no "small model"
    assert "of training estimated from this CPU's speed now" in printed
    setup = next(r for r in read_log(tiny_translator / "log.jsonl") if r["event"] == "setup")
    assert setup["recipe"] == "laptop" and setup["options"]["preset"] == "small"
    assert setup["config"]["embedding_init"] == "normal"
    test = next(r for r in read_log(tiny_translator / "log.jsonl") if r["event"] == "test")
    assert test["n"] == 12  # --eval-sentences; validation took only --valid-sentences
    checkpoint = load_checkpoint(sorted(tiny_translator.glob("checkpoint-*.pt"))[-1])
    assert checkpoint["metrics"]["train_max_tokens"] == setup["max_tokens"]


def test_the_recipe_line_names_the_length_a_run_was_given() -> None:
    def length(**given: Any) -> str:
        return _length(TrainOptions(dataset="multi30k", device="cpu", **given).resolved())

    assert length() == f"{CPU_RECIPES['multi30k']['minutes']:g} minutes"
    assert length(epochs=1) == "1 epoch" and length(max_steps=1200) == "at most 1,200 steps"
    # The GPU profile's rehearsal on a CPU: a time budget in seconds replaces the recipe's plan (once a TypeError)
    assert length(time_budget=78.4) == "at most 78 s (--time-budget)"


def _translate(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    assert main(["translate", *args]) == 0
    captured = capsys.readouterr()
    return captured.out, captured.err


def test_translate_warns_when_the_source_looks_like_the_other_language(
        tiny_translator: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, err = _translate(["--checkpoint", str(tiny_translator), "Ein Hund läuft mit einem Ball."], capsys)
    assert "looks" not in err
    _, err = _translate(["--checkpoint", str(tiny_translator), "A dog is running with a ball."], capsys)
    assert ("sentence 1 ('A dog is running with a ball.') looks English, but this model translates from German: "
            "its translation is a guess") in err


def test_translate_warns_about_input_longer_than_every_training_sentence(
        tiny_translator: Path, capsys: pytest.CaptureFixture[str]) -> None:
    longest = load_checkpoint(sorted(tiny_translator.glob("checkpoint-*.pt"))[-1])["metrics"]["train_max_tokens"]
    long_sentence = " ".join(["Ein Mann mit einem Hut und ein Hund auf einer Wiese."] * 8)
    _, err = _translate(["--checkpoint", str(tiny_translator), long_sentence], capsys)
    assert f"longer than every training sentence (at most {longest})" in err


def test_translate_reads_a_file_and_keeps_its_lines(tiny_translator: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "in.txt"
    source.write_text("Ein Hund.\n\nZwei Männer spielen Fußball.\n", encoding="utf-8")
    out, err = _translate(["--checkpoint", str(tiny_translator), "--input", str(source)], capsys)
    lines = out.split("\n")[:-1]
    assert len(lines) == 3 and lines[1] == ""
    assert f"line(s) 2 of --input {source} are empty" in err
    assert main(["translate", "--checkpoint", str(tiny_translator), "--input", str(source), "Ein Hund."]) == 2
    assert "give sentences as arguments or --input FILE, not both" in capsys.readouterr().err
    assert main(["translate", "--checkpoint", str(tiny_translator), "--input", str(tmp_path / "missing.txt")]) == 2
    assert "missing.txt is not a file: expected a text file of sentences" in capsys.readouterr().err


def test_attention_gives_the_same_warnings(tiny_translator: Path, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["attention", "A dog is running with a ball.", "--checkpoint", str(tiny_translator),
                 "--out", str(tmp_path / "maps"), "--kinds", "cross"]) == 0
    assert "the sentence ('A dog is running with a ball.') looks English" in capsys.readouterr().err


def test_an_old_checkpoint_without_the_stored_length_reads_it_from_its_runs_log(tiny_translator: Path) -> None:
    from minitransformer.evaluation import training_length

    checkpoint = load_checkpoint(sorted(tiny_translator.glob("checkpoint-*.pt"))[-1])
    del checkpoint["metrics"]["train_max_tokens"]
    setup = next(json.loads(line) for line in (tiny_translator / "log.jsonl").read_text().splitlines()
                 if json.loads(line)["event"] == "setup")
    assert training_length(checkpoint, tiny_translator) == setup["max_tokens"]
    assert training_length(checkpoint, tiny_translator.parent / "elsewhere.pt") is None


def test_the_benchmarks_page_states_the_committed_translator_record() -> None:
    record = json.loads((REPO_ROOT / "benchmarks" / "results" / "multi30k-cpu.json").read_text())
    page = (REPO_ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    lines = multi30k_cpu.summary_lines(record)
    assert len(lines) >= 3
    for line in lines:
        assert line in page, (f"docs/benchmarks.md should say, from benchmarks/results/multi30k-cpu.json: {line!r} "
                              "(python -m tools.write_docs writes it)")
    assert all(run["config"]["embedding_init"] == "normal" and run["parameters"] > 6_000_000 for run in record["runs"])
    assert record["summary"]["test_beam4"]["n"] == len(record["seeds"]) == len(record["runs"])


def test_the_summary_lines_follow_the_record() -> None:
    spread = {"mean": 38.04, "min": 37.5, "max": 38.5, "sd": 0.7, "values": [37.5, 38.5], "n": 2}
    runs = [{"seed": s, "wall_seconds": 1800.0 + 60 * s, "load_average": {"start": 0.5, "end": 2.0, "mean": 2.1,
                                                                         "max": 2.6}} for s in (0, 1)]
    record = {"summary": {"test_beam4": spread, "test_greedy": {**spread, "mean": 37.0},
                          "wall_minutes": {**spread, "mean": 30.5, "min": 30.0, "max": 31.0},
                          "averaged_beam4": None}, "runs": runs}
    lines = multi30k_cpu.summary_lines(record)
    assert lines[0] == "test2016 sacreBLEU **38.0** with beam 4 (min 37.5, max 38.5), 37.0 greedy"
    assert lines[1] == "**30 minutes** of wall time from the start, BPE included (min 30.0 min, max 31.0 min)"
    assert lines[2] == "seed 0: 30 min at load average 2.1 on average (at most 2.6)"
    runs[1]["load_average"] = {"start": 1.2, "end": 1.9}  # recorded before the load was sampled
    runs[1]["curve"] = [{"tokens_per_s": v} for v in (1000.0, 5000.0, 4000.0)]
    assert multi30k_cpu.summary_lines(record)[3] == (
        "seed 1: 31 min at load average 1.2 at the start and 1.9 at the end, not sampled in between, "
        "a median of 4,000 tokens per second")
    runs[0]["curve"] = [{"tokens_per_s": 5000.0}]
    record["loaded"] = [{"seed": 0, "busy_processes": 1, "minutes": 30, "steps": 1234, "wall_seconds": 1833.0,
                         "curve": [{"tokens_per_s": 3000.0}], "test": {"beam4": 36.04}}]
    assert multi30k_cpu.summary_lines(record)[-1] == (  # a slower machine: said apart, not averaged in
        "beside 1 process spinning a core (seed 0, a slower machine: a median of 3,000 tokens per second, "
        "0.60 times seed 0's): **30.6 minutes** of wall time, test included, for a 30-minute budget, 1,234 steps, "
        "test2016 sacreBLEU 36.0 with beam 4")
    record["other_budgets"] = [{"seed": 0, "minutes": 60.0, "steps": 9876, "curve": [{"tokens_per_s": 7000.0}],
                                "test": {"beam4": 41.23, "greedy": 40.37}}]
    assert multi30k_cpu.summary_lines(record)[-2] == (  # its speed beside it: another day, maybe another speed
        "the same command in 60 minutes (seed 0, 9,876 steps at a median of 7,000 tokens per second, 1.40 times "
        "seed 0's): test2016 sacreBLEU 41.2 with beam 4, 40.4 greedy")


def test_load_translator_finds_a_finished_multi30k_run_and_says_what_it_is(tiny_translator: Path,
                                                                           tmp_path: Path) -> None:
    from minitransformer.translator import load_translator

    found = load_translator(tiny_translator)
    assert found is not None and not found.full  # --train-size 300, 2 epochs: a short run
    assert found.description.startswith("a SHORT run") and "test2016 BLEU (12 sentences)" in found.description
    assert set(found.test_bleu) == {"greedy"}  # --test-beam 1
    assert found.alpha == CPU_RECIPES["multi30k"]["beam_alpha"]  # the laptop recipe's length penalty, as the run resolved it
    assert load_translator(tmp_path) is None  # no run there


def test_a_run_in_a_time_budget_is_full_when_it_used_its_budget(tiny_translator: Path, tmp_path: Path) -> None:
    import json
    import shutil

    from minitransformer.translator import load_translator

    def as_budget_run(interrupted: bool) -> Path:
        folder = tmp_path / f"budget-{interrupted}"
        shutil.copytree(tiny_translator, folder)
        lines = []
        for line in (folder / "log.jsonl").read_text().splitlines():
            record = json.loads(line)
            if record["event"] == "setup":  # as `train --dataset multi30k --minutes 30` would write it
                record["options"].update(minutes=30.0, epochs=None, train_size=None)
            if record["event"] == "done":
                record["interrupted"] = interrupted
            lines.append(json.dumps(record))
        (folder / "log.jsonl").write_text("\n".join(lines) + "\n")
        return folder

    found = load_translator(as_budget_run(interrupted=False))
    assert found is not None and found.full and found.description.startswith("the full run (a 30-minute budget)")
    stopped = load_translator(as_budget_run(interrupted=True))  # stopped with Ctrl-C, then scored
    assert stopped is not None and not stopped.full


def test_beam_wins_and_log_probs_agree_with_their_definitions(tiny_translator: Path) -> None:
    from minitransformer.translator import beam_wins, corpus_scores, load_translator, sentence_log_probs

    found = load_translator(tiny_translator)
    assert found is not None
    pairs = load_multi30k("test", MULTI30K)[:20]
    lp = sentence_log_probs(found.model, found.tokenizer, [s for s, _ in pairs[:3]], [t for _, t in pairs[:3]])
    assert lp.shape == (3,) and bool((lp < 0).all())
    with pytest.raises(ValueError, match="expected as many outputs as sources, got 1 and 3"):
        sentence_log_probs(found.model, found.tokenizer, [s for s, _ in pairs[:3]], ["x"])
    for win in beam_wins(found.model, found.tokenizer, pairs):
        assert win["log_p_beam"] > win["log_p_greedy"] and win["bleu_beam"] > win["bleu_greedy"]
        again = sentence_log_probs(found.model, found.tokenizer, [win["source"]] * 2, [win["greedy"], win["beam"]])
        assert again.tolist() == pytest.approx([win["log_p_greedy"], win["log_p_beam"]], abs=1e-4)
    scores = corpus_scores(found.model, found.tokenizer, pairs)
    assert 0.0 <= scores["greedy"] <= 100.0 and 0.0 <= scores["beam4"] <= 100.0 and scores["beam4_seconds"] > 0
