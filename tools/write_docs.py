"""Write every measured figure of the README and of docs/ from the committed data.

    python -m tools.write_docs            # rewrite every generated block from the data
    python -m tools.write_docs --check    # exit 1 if a block is out of date (tests/test_docs_pages.py)
    python -m tools.write_docs --list     # which block is written from what

A generated block is everything between the two lines

    <!-- generated: NAME (python -m tools.write_docs) -->
    <!-- /generated: NAME -->

in README.md or a page of docs/, and the ablation results of docs/ablations.md between
:data:`PAGE_START` and :data:`PAGE_END` (``python -m benchmarks.ablations --page`` writes the same text,
:func:`minitransformer.ablation_report.page_section`).
Only the text between the markers is rewritten: the prose around a block is written by hand and
holds no measured figure, the figures inside it are never edited by hand. The sources are the
committed records in ``benchmarks/results/`` (each written by the benchmark named beside its
table) and the stored outputs of the lessons in ``notebooks/`` (their timing cells, and the
training runs of lessons 07 and 08). After re-running a benchmark or re-executing a lesson, run
this script and commit the pages with the data.

One exception keeps the hand-written part of a table: the README's lesson table takes its
"what you build" cells from the page as it is (edit them there), and writes the other columns.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, cached_property
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"^<!-- generated: (?P<name>[\w-]+)\b[^\n]*-->\n(?P<body>.*?)^<!-- /generated: (?P=name) -->$",
                   re.MULTILINE | re.DOTALL)
OPENING = re.compile(r"^<!-- generated: ([\w-]+)\b", re.MULTILINE)
ORDINALS = {1: "first", 2: "second", 3: "third", 4: "fourth", 5: "fifth", 6: "sixth", 7: "seventh", 8: "eighth",
            9: "ninth", 10: "tenth"}


# --------------------------------------------------------------------------------------------
# The data: committed records and stored lesson outputs, read once
# --------------------------------------------------------------------------------------------

class Data:
    """The committed records under ``root/benchmarks/results`` and the lessons under ``root/notebooks``."""

    def __init__(self, root: Path = ROOT) -> None:
        self.root = root
        self.results = root / "benchmarks" / "results"

    def json(self, name: str) -> Any:
        return json.loads((self.results / name).read_text(encoding="utf-8"))

    @cached_property
    def compare(self) -> dict[str, Any]:
        return self.json("compare-cpu.json")

    @cached_property
    def threads(self) -> list[dict[str, Any]]:
        return self.json("train-threads-cpu.json")

    @cached_property
    def step_ideas(self) -> dict[str, Any]:
        return self.json("cpu-step-ideas.json")

    @cached_property
    def translator(self) -> dict[str, Any]:
        return self.json("multi30k-cpu.json")

    @cached_property
    def recipe_trials(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in
                (self.results / "multi30k-recipes.jsonl").read_text(encoding="utf-8").splitlines()]

    @cached_property
    def padding(self) -> dict[str, Any]:
        return self.json("multi30k_padding.json")

    @cached_property
    def ablations(self) -> dict[str, Any]:
        from minitransformer.ablation_report import load_results

        return load_results(self.results / "ablations-cpu.json")

    @cached_property
    def gpu_results(self) -> list[tuple[str, dict[str, Any]]]:
        from minitransformer.profile_results import find_results, load_result

        return [(path.name, load_result(path)) for path in find_results(self.results)]

    def lessons(self) -> list[Path]:
        from tools import lesson_plan

        return sorted(p for p in (self.root / "notebooks").glob("*.ipynb") if lesson_plan.LESSON_NAME.match(p.name))

    def outputs(self, lesson: str) -> list[str]:
        """The text of each code cell's outputs (streams and text/plain), one string per code cell."""
        notebook = json.loads((self.root / "notebooks" / f"{lesson}.ipynb").read_text(encoding="utf-8"))
        return ["".join("".join(o.get("text", "")) + "".join(o.get("data", {}).get("text/plain", ""))
                        for o in cell.get("outputs", []))
                for cell in notebook["cells"] if cell["cell_type"] == "code"]

    def stored(self, lesson: str, pattern: str) -> re.Match | None:
        return re.search(pattern, "\n".join(self.outputs(lesson)), flags=re.MULTILINE)


def _spread(values: list[float], digits: int = 1, unit: str = "") -> str:
    low, high = min(values), max(values)
    return f"{low:.{digits}f}{unit}" if f"{low:.{digits}f}" == f"{high:.{digits}f}" else \
        f"{low:.{digits}f}-{high:.{digits}f}{unit}"


def _ratio(value: float) -> str:
    return f"{value:.2f}x"


def _command(record: dict[str, Any]) -> str:
    """The command a record was written by, as it is typed today (records made before ``benchmarks`` was a
    package name the script's file: ``python benchmarks/x.py`` is ``python -m benchmarks.x``)."""
    return re.sub(r"^python benchmarks/(\w+)\.py\b", r"python -m benchmarks.\1", record["command"])


# --------------------------------------------------------------------------------------------
# The blocks
# --------------------------------------------------------------------------------------------

_LESSON_ROW = re.compile(r"^\| `(\d{2}b?_\w+)` \| ([^|\n]*?) \|", re.MULTILINE)
#: The stored outputs that give the dates model's training time in lessons 07 and 08.
DATES_TIME = {"07_training": r"wall-clock time of train\(\)\s+(\d+) s",
              "08_decoding_and_gpu": r"trained in (\d+) s on this machine"}


def lessons_block(data: Data, old: str) -> str:
    """README: the lesson table (the main path's estimated minutes and the stored run time, tools/lesson_plan.py)."""
    from tools import lesson_plan

    described = dict(_LESSON_ROW.findall(old))
    rows = ["| lesson | what you build | in class | last ran in (CPU) |", "| --- | --- | --- | --- |"]
    for path in data.lessons():
        plan = lesson_plan.plan(path)
        ran = "—" if plan.ran_seconds is None else f"{plan.ran_seconds} s"
        rows.append(f"| `{path.stem}` | {described.get(path.stem, '(what the lesson builds)')} "
                    f"| about {plan.class_minutes} min | {ran} |")
    times = []
    for lesson, pattern in DATES_TIME.items():
        found = data.stored(lesson, pattern) if (data.root / "notebooks" / f"{lesson}.ipynb").is_file() else None
        times.append(f"{found.group(1)} s" if found else "no time")
    return "\n".join(rows) + (
        f"\n\n*In class*: the main path's length estimated from what its slides show (`tools/lesson_plan.py`): a "
        f"minute a slide or figure, {lesson_plan.WORDS_PER_MINUTE} words of prose, {lesson_plan.CODE_LINES_PER_MINUTE} "
        f"lines of code or {lesson_plan.OUTPUT_LINES_PER_MINUTE} lines of output a minute; going-further sections and "
        "speaker notes left out. *Last ran in*: what the stored notebook's code took when it was last executed top to "
        "bottom (by nbclient, the engine of `jupyter nbconvert --execute`) on a 2-core CPU, as its timing cell printed it (— where none is stored). "
        "Lessons 07, 08 and 08b spend much of it training the small dates model, whose cell prints its time "
        f"(as stored, lesson 07's cell printed {times[0]} and lesson 08's {times[1]}).")


def _record_length(record: dict[str, Any]) -> str:
    """How the translator's record was trained: its budget, or the fixed epochs of the recipe before the budget."""
    settings = record["settings"]
    if settings.get("minutes") is not None:
        return f"in its {settings['minutes']:g}-minute budget"
    return (f"in {settings['epochs']} epochs (the recipe before the time budget: the paper's schedule, a vocabulary "
            f"of {settings['vocab_size']:,}, label smoothing {settings['label_smoothing']:g}; the record of the "
            "budget is being measured)")


def _loaded_clause(record: dict[str, Any]) -> str:
    """The run of the same command beside busy cores, said apart from the quiet seeds ("" when there is none)."""
    if not record.get("loaded"):
        return ""
    from benchmarks.multi30k_cpu import median_speed

    run, first = record["loaded"][0], record["runs"][0]
    busy = run["busy_processes"]
    return (f"; beside {'one' if busy == 1 else busy} process{'es' if busy > 1 else ''} keeping a core busy (a machine "
            f"{median_speed(run) / median_speed(first):.2f} times as fast as for seed {first['seed']}), the same "
            f"command took {run['wall_seconds'] / 60:.1f} minutes and reached {run['test']['beam4']:.1f}")


def setup_times_block(data: Data, old: str) -> str:
    """README: the two main jobs' times in one sentence (train-threads-cpu.json, multi30k-cpu.json)."""
    quiet = next(r for r in data.threads if r["threads"] == "default" and r["busy_processes"] == 0)
    record = data.translator
    runs = record["runs"]
    minutes = sorted(r["wall_seconds"] / 60 for r in runs)
    beam4 = sorted(r["test"]["beam4"] for r in runs)
    return (f"On a {record['machine']['cpu_count']}-core CPU the dates model trained in {quiet['seconds']:.0f} s. "
            f"The translator, {_record_length(record)}, reached a test2016 BLEU of {beam4[0]:.1f} to {beam4[-1]:.1f} "
            f"with beam 4 over {len(runs)} seeds (mean {record['summary']['test_beam4']['mean']:.1f}), in "
            f"{_spread(minutes, 1, ' minutes').replace('-', ' to ')} of wall time with its test"
            f"{_loaded_clause(record)}.")


def _threads_used(run: dict[str, Any], words: bool = False) -> str:
    """The thread count of a run of train_threads.py: "1 (default)" in the table, "1 thread (the default)" in words."""
    found = re.search(r"(\d+) CPU threads?", run.get("model_line", ""))
    count = found.group(1) if found else str(run["threads"])
    default = run["threads"] == "default"
    if words:
        return f"{count} thread{'s' if count != '1' else ''}" + (" (the default)" if default else "")
    return f"{count} (default)" if default else count


def dates_time_block(data: Data, old: str) -> str:
    """docs/training.md: how long the default `train` takes (benchmarks/results/train-threads-cpu.json)."""
    runs = data.threads
    quiet = next(r for r in runs if r["threads"] == "default" and r["busy_processes"] == 0)
    busy = next((r for r in runs if r["threads"] == "default" and r["busy_processes"] > 0), None)
    head = (f"The default `python -m minitransformer train` took **{quiet['seconds']:.0f} s** on a 2-core CPU with "
            f"no deliberate load beside it"
            + (f" and **{busy['seconds']:.0f} s** beside a process spinning one core" if busy else "")
            + f" ({quiet['steps']} steps, {quiet['test_exact_match']:g}% test exact match), with the thread "
              "count that `train` chooses itself. The record, `benchmarks/results/train-threads-cpu.json`, "
              "written by `python -m benchmarks.train_threads --threads default 2 --busy 1 --json "
              "benchmarks/results/train-threads-cpu.json`:")
    rows = [("| threads | beside it | load average before | wall time | steps | seconds per step (start-up included) "
             "| test exact match |"), "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in runs:
        beside = "nothing" if not r["busy_processes"] else \
            f"{r['busy_processes']} process{'es' if r['busy_processes'] > 1 else ''} spinning a core"
        rows.append(f"| {_threads_used(r)} | {beside} | {r['load_before']:.1f} | {r['seconds']:.1f} s | {r['steps']} "
                    f"| {r['seconds_per_step']:.3f} | {r['test_exact_match']:g}% |")
    slow = []
    for threads in dict.fromkeys(r["threads"] for r in runs):
        pair = [r for r in runs if r["threads"] == threads]
        calm = next((r for r in pair if not r["busy_processes"]), None)
        loaded = next((r for r in pair if r["busy_processes"]), None)
        if calm and loaded:
            slow.append(f"{loaded['seconds_per_step'] / calm['seconds_per_step']:.1f} with "
                        f"{_threads_used(calm, words=True)}")
    tail = ("Per step, the busy core slowed training by a factor of " + " and ".join(slow) + ".") if slow else ""
    return "\n".join([head, "", *rows] + (["", tail] if tail else []))


def thread_choice_block(data: Data, old: str) -> str:
    """docs/training.md: one step of the laptop translator, every core against one (cpu-step-ideas.json)."""
    from benchmarks.cpu_step_ideas import IDEAS
    from minitransformer import Transformer, TransformerConfig

    ideas = {r["idea"]: r for r in data.step_ideas["results"]}
    vocab = IDEAS["base"][2]  # the model the comparison times: the small preset with this vocabulary
    size = Transformer(TransformerConfig.small(vocab)).num_parameters()
    cores = data.step_ideas["machine"]["threads_default"]
    return (f"A training step of the laptop translator's `small` preset ({size / 1e6:.1f}M parameters with a "
            f"vocabulary of {vocab:,}) took {ideas['base']['seconds_per_step']:.2f} s "
            f"with {cores} threads and {ideas['one_thread']['seconds_per_step']:.2f} s with one on a "
            f"{data.step_ideas['machine']['cpu_count']}-core CPU (`benchmarks/results/cpu-step-ideas.json`, "
            "from the step comparison in [Benchmarks](benchmarks.md#one-training-step-idea-by-idea)).")


def translator_headline_block(data: Data, old: str) -> str:
    """docs/training.md: the laptop translator's time and BLEU in one sentence (multi30k-cpu.json)."""
    record = data.translator
    s = record["summary"]
    minutes, beam, greedy = s["wall_minutes"], s["test_beam4"], s["test_greedy"]
    seeds = len(record["runs"])
    return (f"Measured on a {record['machine']['cpu_count']}-core CPU (torch {record['machine']['torch']}), "
            f"{_record_length(record)}: {seeds} seed{'s' if seeds > 1 else ''} took "
            f"**{_spread(minutes['values'], 1, ' minutes').replace('-', ' to ')}** of wall time, BPE and the test "
            f"included, and reached test2016 sacreBLEU **{beam['mean']:.1f}** with beam 4"
            f"{' on average' if seeds > 1 else ''} ({greedy['mean']:.1f} greedy){_loaded_clause(record)}.")


def base_on_cpu_block(data: Data, old: str) -> str:
    """docs/training.md: what the base model costs on a CPU (compare-cpu.json, the recipe, the model's size)."""
    import torch

    from minitransformer import Transformer, TransformerConfig
    from minitransformer.training.cpu import estimate_cpu_run
    from minitransformer.training.options import RECIPES

    rate = next(r["ours"] for r in data.compare["records"]
                if r["size"] == "base" and r["task"] == "train" and r["threads"] == 2)
    gpu = RECIPES["multi30k"]
    step = 2 * gpu["batch_tokens"] / rate  # a batch of batch_tokens on each side
    hours = [gpu["epochs"] * steps * step / 3600 for steps in (115, 120)]  # ~115-120 steps an epoch on Multi30k
    span = "about half a day" if all(9 < h < 15 for h in hours) else f"about {statistics.mean(hours):.0f} hours"
    with torch.device("meta"):  # sizes only, no weights
        parameters = Transformer(TransformerConfig.base(gpu["vocab_size"])).num_parameters()
    checkpoint = estimate_cpu_run(parameters, 1, 1, 1, None, keep=1, flops=1.0).checkpoint_bytes
    article = "an" if str(gpu["vocab_size"]).startswith("8") else "a"
    return (f"In the comparison with `nn.Transformer` (`benchmarks/results/compare-cpu.json`), the base model's "
            f"training step ran at about {int(round(rate, -2)):,} source and target tokens per second with two "
            f"threads on a 2-core CPU: at that rate one step of the GPU recipe's {gpu['batch_tokens']:,}-token "
            f"batches takes about {step:.0f} s, and its {gpu['epochs']} epochs {span} on a quiet machine "
            f"(Multi30k makes about 115-120 steps an epoch). Each of its checkpoints holds "
            f"{checkpoint / 1e6:.0f} MB: the weights and Adam's two moments, 12 bytes for each of the "
            f"{parameters / 1e6:.1f}M parameters of the base model with {article} {gpu['vocab_size']:,}-token "
            "vocabulary.")


def dates_checkpoints_block(data: Data, old: str) -> str:
    """docs/training.md: the checkpoints the stored dates runs of lessons 07 and 08 keep."""
    listing = next((text for text in data.outputs("08_decoding_and_gpu")
                    if re.search(r"^\s*checkpoint-\d{8}\.pt\s", text, flags=re.MULTILINE)), "")
    kept = len(re.findall(r"^\s*checkpoint-\d{8}\.pt\s", listing, flags=re.MULTILINE))
    epochs = {}
    for lesson in ("07_training", "08_decoding_and_gpu"):
        found = data.stored(lesson, r"epoch\s+(\d+\.\d+)\s+step\s+\d+\b.*\(target reached")
        epochs[lesson] = ORDINALS.get(int(float(found.group(1))) + 1, "last") if found else None
    if not kept or None in epochs.values():
        return ("The dates run keeps a checkpoint at the end of each epoch and one where it stops; the stored "
                "lessons 07 and 08 hold no finished run to count them in.")
    same = epochs["07_training"] == epochs["08_decoding_and_gpu"]
    return (f"The dates run keeps a checkpoint at the end of each epoch and one where it stops: {kept} in the run "
            f"stored in lesson 08, which stops during its {epochs['08_decoding_and_gpu']} epoch, "
            + ("as the run stored in lesson 07 does." if same else
               f"while the run stored in lesson 07 stops during its {epochs['07_training']}."))


@cache
def _size_label(name: str) -> str:
    from benchmarks import compare_torch
    from minitransformer import TransformerConfig

    spec = compare_torch.SIZES.get(name)
    if spec is None:
        return name
    config = TransformerConfig.base(spec["vocab"], **spec["config"])
    return f"`{name}` is d_model {config.d_model} with {config.n_encoder_layers}+{config.n_decoder_layers} layers"


def compare_torch_block(data: Data, old: str) -> str:
    """docs/benchmarks.md: ours against torch.nn.Transformer (compare-cpu.json)."""
    record = data.compare
    records = [r for r in record["records"] if r.get("mode", "eager") == "eager"]
    labels = {name: _size_label(name) for name in dict.fromkeys(r["size"] for r in records)}
    head = (f"The committed run: torch {record['torch']}, {record['cpus']} CPU cores, load average "
            f"{record['load_before'][0]:.1f} at the start and {record['load_after'][0]:.1f} at the end, "
            f"{record['seconds']:.0f} s in all{'' if record.get('complete') else ' (an unfinished run)'}. "
            f"Sizes: {'; '.join(labels.values())}.")
    rows = ["| size | threads | measurement | batch | ours, tokens/s | `nn.Transformer`, tokens/s | ratio |",
            "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in records:
        train = r["task"] == "train"
        what = "training step" if train else r["task"].replace("greedy", "greedy decoding,") + " tokens"
        ratio = f"**{_ratio(r['ratio'])}**" if train else _ratio(r["ratio"])
        rows.append(f"| `{r['size']}` | {r['threads']} | {what} | {r['batch']} | {r['ours']:,.0f} "
                    f"| {r['torch']:,.0f} | {ratio} |")
    training = [r["ratio"] for r in records if r["task"] == "train"]
    decode = {b: [r["ratio"] for r in records if r["task"] != "train" and r["batch"] == b]
              for b in sorted({r["batch"] for r in records if r["task"] != "train"})}
    never = " (never below 1.00x)" if min(training) >= 1 else f" (lowest {_ratio(min(training))})"
    tail = (f"Training steps: ours runs at {_spread(training, 2, 'x')} the speed of `nn.Transformer`{never}, "
            "at every size and thread count. Greedy decoding: "
            + "; ".join(f"{_spread(v, 2, 'x')} at batch {b}" for b, v in decode.items()) + ".")
    return "\n".join([head, "", *rows, "", tail])


def translator_block(data: Data, old: str) -> str:
    """docs/benchmarks.md: the laptop translator's record (multi30k-cpu.json; benchmarks/multi30k_cpu.py)."""
    record = data.translator
    from benchmarks import multi30k_cpu

    machine = record["machine"]
    commits = ", ".join(record.get("commits_of_the_runs", [])) or "unknown"
    lines = [(f"`{_command(record)}` ({record['date'][:10]}, {machine['cpu_count']} CPU cores, "
              f"torch {machine['torch']}; trained at commit{'s' if ',' in commits else ''} {commits}):"), ""]
    lines += [f"- {line}" for line in multi30k_cpu.summary_lines(record)]
    s, runs = record["summary"], record["runs"]
    if s.get("averaged_beam4"):
        averaged, beam = s["averaged_beam4"]["mean"], s["test_beam4"]["mean"]
        lines += ["", (f"That average scores {'less' if averaged < beam else 'more'} than the last checkpoint "
                       f"alone ({averaged:.1f} against {beam:.1f} with beam 4).")]
    # the targets of the laptop translator: a mean over 3 seeds or more, each in a 30-minute budget kept to the
    # minute (training and validation; the test decode after it is said apart)
    mean, budget = s["test_beam4"]["mean"], record["settings"].get("minutes")
    ends = [r["validation"][-1]["minutes"] for r in runs]
    counted = len(runs) >= 3 and budget == 30 and max(ends) <= budget + 1
    how = (f"{len(runs)} seeds in a {budget:g}-minute budget, training ended {max(ends):.1f} minutes after the start "
           f"at the latest, the test decode after it" if budget else f"{len(runs)} seeds of {record['settings']['epochs']} "
           "epochs, not in a budget")
    loaded = [r["validation"][-1]["minutes"] for r in record.get("loaded", [])]
    slower = (f"; beside a busy core, training ended {max(loaded):.1f} minutes after the start" if loaded
              else "; no run beside a busy core yet")
    floor = counted and mean >= 38.5 and bool(loaded) and max(loaded) <= budget + 1
    lines += ["", (f"The targets: test2016 BLEU with beam 4 of at least 40.6 (the goal) and 38.5 (the floor), the mean of 3 "
                   f"seeds or more, each trained in a 30-minute budget kept to the minute, on a quiet machine and (the "
                   f"floor) beside a busy core. This record ({how}, mean {mean:.1f}{slower if budget else ''}): the goal "
                   f"is {'met' if counted and mean >= 40.6 else 'not met'}, the floor is {'met' if floor else 'not met'}.")]
    return "\n".join(lines)


def recipe_search_block(data: Data, old: str) -> str:
    """docs/benchmarks.md: the trials of the recipe in a time budget (multi30k-recipes.jsonl; recipe_search.py)."""
    from benchmarks.recipe_search import outcome
    records = data.recipe_trials
    rows = ["| trial | flags | tokens/s | steps (epochs) | validation loss at the end | greedy | beam 4, alpha 0.6 "
            "| beam 4, alpha 1.0 | average of the last 3, beam 4 |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in records:
        v, o = r["valid"], outcome(r)
        averaged = "-" if o["averaged"] is None else f"{o['averaged']:.2f}"
        resumed = " (resumed once)" if r.get("invocations", 1) > 1 else ""
        flags = f"`{' '.join(r['flags'])}`" if r["flags"] else "(the laptop recipe)"
        rows.append(f"| `{r['trial']}`{resumed} | {flags} | "
                    f"{r['tokens_per_s_median']:,.0f} | {r['steps']:,} ({o['epochs']:.1f}) | {o['val_loss']:.3f} | {v['greedy']:.2f} | {v['beam4_alpha0.6']:.2f} | "
                    f"{v['beam4_alpha1.0']:.2f} | {averaged} |")
    scored = [(x, k, r["trial"]) for r in records for k, x in r["valid"].items() if k != "scoring_seconds"]
    best, how, trial = max(scored)
    budgets = sorted({f"{r['minutes']:g}" for r in records})
    head = (f"{len(records)} trials of {', '.join(budgets)} minutes each on {data.translator['machine']['cpu_count']} "
            f"CPU cores, one seed, scored on all {records[0]['valid_sentences']:,} validation pairs "
            "(sacreBLEU, cased, detokenized):")
    named = re.sub(r"averaged(\d+)_", r"the average of the last \1, ", how).replace("beam4_alpha", "beam 4, alpha ")
    tail = f"Best on validation so far: `{trial}`, {best:.2f} ({named})."
    return "\n".join([head, "", *rows, "", tail])


def step_ideas_block(data: Data, old: str) -> str:
    """docs/benchmarks.md: one training step of the laptop translator, idea by idea (cpu-step-ideas.json)."""
    record = data.step_ideas
    load = record["load_average"]
    rows = [(f"`{_command(record)}`: the fastest of {record['rounds']} alternating rounds of {record['steps']} "
             f"steps per idea, torch {record['machine']['torch']}, {record['machine']['cpu_count']} CPU cores, load "
             f"average {load['start']:.1f} at the start and {load['end']:.1f} at the end."), "",
            "| idea | what changes | seconds per step | target tokens per second, against the recipe |",
            "| --- | --- | --- | --- |"]
    for r in record["results"]:
        rows.append(f"| `{r['idea']}` | {r['what']} | {r['seconds_per_step']:.2f} | {_ratio(r['speedup'])} |")
    ideas = [r for r in record["results"] if r["idea"] != "base"]
    faster = sorted((r for r in ideas if r["speedup"] > 1), key=lambda r: -r["speedup"])
    slower = sorted((r for r in ideas if r["speedup"] <= 1), key=lambda r: -r["speedup"])
    compiled = next((r for r in ideas if r["idea"] == "compiled"), None)

    def listed(found: list[dict[str, Any]]) -> str:
        return ", ".join(f"`{r['idea']}` ({_ratio(r['speedup'])})" for r in found) or "none"

    rows += ["", f"Faster per step than the recipe: {listed(faster)}. Slower: {listed(slower)}."
             + (f" The compiled model's first step, compilation included, took {compiled['first_step_seconds']:.1f} s."
                if compiled else "")]
    return "\n".join(rows)


def padding_block(data: Data, old: str) -> str:
    """docs/benchmarks.md: padding of token-budget batches on Multi30k (multi30k_padding.json)."""
    p = data.padding
    return (f"On the {p['pairs']:,} training pairs of {p['dataset']} with the recipe's shared BPE vocabulary of "
            f"{p['vocab_size']:,} and batches of {p['batch_tokens']:,} tokens per side: cut as they come (shuffled), "
            f"an epoch is {p['shuffled']['batches']} batches and {100 * p['shuffled']['padding_fraction']:.1f}% of "
            f"their cells are padding; sorted by length first (the default), {p['sorted']['batches']} batches and "
            f"{100 * p['sorted']['padding_fraction']:.1f}% padding.")


def gpu_profile_block(data: Data, old: str) -> str:
    """docs/benchmarks.md: the GPU profile's results (benchmarks/results/<gpu>.json), or that there is none."""
    from minitransformer.profile_results import result_rows

    if not data.gpu_results:
        return ("No GPU result is committed yet: `benchmarks/results/` holds no file written by "
                "`benchmarks/gpu_profile.py`.")
    parts = []
    for name, result in data.gpu_results:
        rows = [f"`benchmarks/results/{name}`:", "", "| what | value |", "| --- | --- |"]
        rows += [f"| {what} | {str(value).replace('|', '/')} |" for what, value in result_rows(result)]
        parts.append("\n".join(rows))
    return "\n\n".join(parts)


def shipping_block(data: Data, old: str) -> str:
    """docs/shipping.md: what export measured (benchmarks/results/export-*.json; python -m minitransformer export)."""
    rows = ["| record | model | parameters | logits: largest difference | same tokens, greedy / beam 4 | float | int8 "
            "| one sentence, beam 4: PyTorch / ONNX / ONNX int8 | int8 changes the score |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    commands = []
    for path in sorted(data.results.glob("export-*.json")):
        r = json.loads(path.read_text(encoding="utf-8"))
        t, lat, q = r["tokens"], r["latency_ms"], r.get("quality")
        mb = {kind: f"{size['total'] / 1e6:.2f} MB" for kind, size in r["sizes"].items()}
        name = "exact match" if q and q["metric"] == "exact_match" else "BLEU"
        rows.append(f"| `{path.name}` | {r['title']} | {r['parameters']:,} | "
                    f"{max(r['logits']['random'], r['logits']['real']):.1e} | {t['greedy']['identical']}/{t['sentences']}"
                    f" / {t['beam4']['identical']}/{t['sentences']} | {mb['float']} | {mb.get('int8', '-')} | "
                    f"{lat['pytorch']:.0f} / {lat['onnx_float']:.0f} / {lat.get('onnx_int8', 0):.0f} ms "
                    f"({lat['tokens']:g} tokens) | "
                    + (f"{name} {q['float']:.2f} -> {q['int8']:.2f} on {q['sentences']} test sentences |" if q else "- |"))
        commands.append(f"`{path.name}`: `{r['command']}` ({r['date']}, {r['machine']['cpus']} CPU cores, "
                        f"torch {r['versions']['torch']}, onnxruntime {r['versions']['onnxruntime']})")
    return "\n".join(rows + [""] + [f"- {c}" for c in commands])


@dataclass(frozen=True)
class Block:
    page: str  # relative to the repository's root
    render: Callable[[Data, str], str]


BLOCKS: dict[str, Block] = {
    "setup-times": Block("README.md", setup_times_block),
    "lessons": Block("README.md", lessons_block),
    "dates-time": Block("docs/training.md", dates_time_block),
    "thread-choice": Block("docs/training.md", thread_choice_block),
    "translator-headline": Block("docs/training.md", translator_headline_block),
    "base-on-cpu": Block("docs/training.md", base_on_cpu_block),
    "dates-checkpoints": Block("docs/training.md", dates_checkpoints_block),
    "compare-torch": Block("docs/benchmarks.md", compare_torch_block),
    "translator": Block("docs/benchmarks.md", translator_block),
    "recipe-search": Block("docs/benchmarks.md", recipe_search_block),
    "step-ideas": Block("docs/benchmarks.md", step_ideas_block),
    "padding": Block("docs/benchmarks.md", padding_block),
    "gpu-profile": Block("docs/benchmarks.md", gpu_profile_block),
    "shipping": Block("docs/shipping.md", shipping_block),
}
#: The page that holds the ablation results, between these two markers.
ABLATION_PAGE = "docs/ablations.md"
PAGE_START = ("<!-- ablation-results: generated by `python -m benchmarks.ablations --summarize-only "
              "--page docs/ablations.md` -->")
PAGE_END = "<!-- ablation-results: end -->"


def with_ablation_results(text: str, report: dict[str, Any]) -> str:
    """``text`` with the ablation results between :data:`PAGE_START` and :data:`PAGE_END` written from ``report``."""
    from minitransformer.ablation_report import page_section

    head, rest = text.split(PAGE_START, 1)
    _, tail = rest.split(PAGE_END, 1)
    return f"{head}{PAGE_START}\n{page_section(report)}\n{PAGE_END}{tail}"


def update_ablation_page(path: str | Path, report: dict[str, Any]) -> bool:
    """Rewrite the ablation results of the page at ``path`` from ``report``; True if it changed.

    Raises:
        ValueError: the page lacks the markers.
    """
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    if PAGE_START not in text or PAGE_END not in text:
        raise ValueError(f"{path} has no generated ablation section: expected the lines {PAGE_START!r} and "
                         f"{PAGE_END!r}")
    new = with_ablation_results(text, report)
    path.write_text(new, encoding="utf-8")
    return new != text


def pages(root: Path = ROOT) -> list[Path]:
    """The pages whose blocks this script writes: the README and every page of docs/."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def render(text: str, page: str, data: Data) -> tuple[str, list[str]]:
    """``text`` with every generated block of ``page`` rewritten; and what is wrong with its markers."""
    problems = []
    opened = OPENING.findall(text)
    closed = [m.group("name") for m in BLOCK.finditer(text)]
    for name in opened:
        if name not in closed:
            problems.append(f"{page}: the block {name!r} has no closing line '<!-- /generated: {name} -->'")
        elif name not in BLOCKS:
            problems.append(f"{page}: unknown block {name!r} (tools/write_docs.py writes {', '.join(BLOCKS)})")
        elif BLOCKS[name].page != page:
            problems.append(f"{page}: the block {name!r} belongs in {BLOCKS[name].page}")
    for name in {n for n in opened if opened.count(n) > 1}:
        problems.append(f"{page}: the block {name!r} appears {opened.count(name)} times")
    for name, block in BLOCKS.items():
        if block.page == page and name not in opened:
            problems.append(f"{page}: the block {name!r} is missing")

    def body(match: re.Match) -> str:
        name = match.group("name")
        if name not in BLOCKS:
            return match.group(0)
        first = match.group(0).split("\n", 1)[0]
        return f"{first}\n{BLOCKS[name].render(data, match.group('body')).strip()}\n<!-- /generated: {name} -->"

    new = BLOCK.sub(body, text)
    if page == ABLATION_PAGE:
        if PAGE_START not in new or PAGE_END not in new:
            problems.append(f"{page}: the ablation results' markers are missing ({PAGE_START!r} ... {PAGE_END!r})")
        else:
            new = with_ablation_results(new, data.ablations)
    elif PAGE_START in new:
        problems.append(f"{page}: the ablation results belong in {ABLATION_PAGE}")
    return new, problems


def run(root: Path = ROOT, check: bool = False) -> tuple[list[str], list[str]]:
    """Rewrite (or, with ``check``, only compare) every page under ``root``.

    Returns:
        The pages that changed (or would change), and what is wrong with the markers.
    """
    data = Data(root)
    stale, problems = [], []
    for path in pages(root):
        page = path.relative_to(root).as_posix()
        text = path.read_text(encoding="utf-8")
        new, found = render(text, page, data)
        problems += found
        if new != text:
            changed = [m.group("name") for m in BLOCK.finditer(text)
                       if m.group(0) not in new] + (["ablation results"] if page == ABLATION_PAGE and
                                                      _ablation_body(text) != _ablation_body(new) else [])
            stale.append(f"{page} ({', '.join(changed) or 'blocks'})")
            if not check:
                path.write_text(new, encoding="utf-8")
    for name, block in BLOCKS.items():
        if not (root / block.page).is_file():
            problems.append(f"{block.page} is missing: it should hold the block {name!r}")
    return stale, problems


def _ablation_body(text: str) -> str:
    return text.split(PAGE_START, 1)[1].split(PAGE_END, 1)[0] if PAGE_START in text and PAGE_END in text else ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a page is out of date")
    parser.add_argument("--list", action="store_true", help="list the blocks, their pages and their sources")
    args = parser.parse_args(argv)
    if args.list:
        for name, block in BLOCKS.items():
            print(f"{name:<20} {block.page:<20} {(block.render.__doc__ or '').strip()}")
        print(f"{'ablation results':<20} {ABLATION_PAGE:<20} benchmarks/results/ablations-cpu.json "
              "(minitransformer.ablation_report.page_section)")
        return 0
    stale, problems = run(ROOT, check=args.check)
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    if args.check:
        if stale:
            print("out of date with the data: " + "; ".join(stale) + " (run python -m tools.write_docs)",
                  file=sys.stderr)
        return 1 if stale or problems else 0
    print("rewrote " + "; ".join(stale) if stale else "every page is up to date with the data")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
