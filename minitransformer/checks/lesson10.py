"""Checks for exercise 10 (why the recipe): predicting ablations, the schedules without warm-up, learned positions."""

from __future__ import annotations

import math
from typing import Any, Callable

import torch
from torch import Tensor, nn

from ..embeddings import LearnedPositionalEmbedding
from ..training.schedule import ConstantAtPeak, DecayWithoutWarmup, transformer_lr
from .compare import build_learner, call_learner, compare, describe, expect_tensor, isolated, callable_name, report_passed, make_rng
from .questions import grade_answer, Question

__all__ = ["PREDICTIONS", "check_ablation_prediction", "check_constant_schedule", "check_learned_positions",
           "check_no_warmup_schedule"]

#: The questions of exercise 10: two rows of Table 3 that lesson 10 does not run (development set, base
#: model 4.92 perplexity and 25.8 BLEU), and the design of a learning-rate ablation.
PREDICTIONS: dict[str, Question] = {
    "10-more-smoothing": Question(
        title="twice the label smoothing, eps_ls = 0.2 (Table 3, row D)",
        correct="C",
        why="eps_ls = 0.2 gave perplexity 5.47 and BLEU 25.7 against the base model's 4.92 and 25.8: a target "
            "with 0.8 on the right token teaches the model to leave more probability to the others, which "
            "perplexity counts against it, while BLEU only needs the right token ranked first, and it still is",
        wrong={
            "A": "Smoothing does not move the two figures the same way. Perplexity measures the probability the "
                 "model gives the reference token, and a target of 0.8 on that token teaches it to give less: "
                 "perplexity gets worse. BLEU only asks which token is ranked first.",
            "B": "Perplexity moves the other way from eps_ls = 0. With 0.2 the target asks for 0.8 on the right "
                 "token instead of 0.9, so the model learns to keep more probability away from the reference "
                 "token, and that is exactly what perplexity charges for.",
            "D": "Perplexity does get worse, but BLEU is decided by the token ranked first at each step (greedy "
                 "or beam search), not by how much probability it gets. Training towards 0.8 instead of 0.9 "
                 "lowers the right token's probability without taking its first place, so the translations, "
                 "and BLEU, hardly change.",
        },
    ),
    "10-two-layers": Question(
        title="two layers per stack instead of six (Table 3, row C)",
        correct="D",
        why="N = 2 gave perplexity 6.11 and BLEU 23.7 against 4.92 and 25.8 (36M parameters against 65M), the "
            "worst row of Table 3 on both figures, and worse than d_model = 256 with fewer parameters (5.75 and "
            "24.5, 28M): each layer lets every position gather information from the others once more, and two "
            "rounds are far fewer than six; the parameter count does not show that",
        wrong={
            "A": "Row C points the other way at a fixed number of steps: the paper's smaller models were worse and "
                 "its larger ones better (d_model = 256 gave 5.75, 1024 gave 4.66). With N = 2 both figures got "
                 "worse.",
            "B": "N leaves the embedding table alone, but it removes two thirds of the attention and feed-forward "
                 "sublayers, where the model does its work: both figures got worse, more than in any other row "
                 "of Table 3.",
            "C": "Parameters are not the whole story: N = 2 kept more of them than d_model = 256 (36M against 28M) "
                 "and still did worse on both figures. Width sets how much each sublayer holds; depth sets how "
                 "many times each position can gather from the others and transform the result, and two rounds "
                 "are far fewer than six.",
        },
    ),
    "10-confound": Question(
        title="what the constant-rate experiment can conclude",
        correct="B",
        why="run C removes the warm-up (steps 1-100) and the decay (steps 101-900, where its rate ends 3 times "
            "run P's and averages about twice as much over the run), so the result cannot be put on the warm-up "
            "alone; a fair test changes one of them: drop the rise and keep the decay (task 4)",
        wrong={
            "A": "The runs also differ after step 100: run P's rate decays as 1/sqrt(step) from step 100 on, while "
                 "run C's stays at the peak. By step 900 run P's rate is a third of run C's, and eight ninths of "
                 "the run lie after the warm-up.",
            "C": "More seeds tell whether the difference is real, not what caused it. With ten seeds per schedule "
                 "run C would still differ from run P in two ways, the warm-up and the decay, and the conclusion "
                 "would still not follow: noise and a confound are separate problems.",
            "D": "A constant at the first step's rate is warmup = 100 times below the peak for the whole run: it "
                 "removes the rise and the decay and also shrinks every update, so it changes more than run C "
                 "does. To remove only the warm-up, start at the peak and keep the paper's decay after step = "
                 "warmup.",
        },
    ),
}


@isolated
def check_ablation_prediction(question: str, answer: Any, *, task: int | str | None = None) -> None:
    """Check the answer to a question of exercise 10 (a key of :data:`PREDICTIONS`): a row of Table 3, or an
    ablation's design.

    Args:
        question: the question's key, as in the check cell.
        answer: the learner's letter, e.g. ``"B"``.
        task: task number printed on success.

    Raises:
        AssertionError: the answer is missing or wrong, with what the paper measured.
    """
    __tracebackhide__ = True
    grade_answer(PREDICTIONS, question, answer, task, expected="a letter", other="Answer with one letter, A, B, C or D.")


@isolated(builds='the schedule from its formula', allow=())
def check_constant_schedule(fn: Callable[[int, int, int, float], float], *, task: int | str | None = None,
                            cases: tuple[tuple[int, int, float], ...] = ((512, 4000, 1.0), (128, 100, 0.5))) -> None:
    """Check ``fn(step, d_model, warmup, factor) -> lr``: the constant rate at the schedule's peak.

    The rate is the peak of the paper's schedule, ``factor * d_model^-0.5 * warmup^-0.5``, at every
    step from the first one on (:class:`~minitransformer.training.schedule.ConstantAtPeak`, the variant
    ``constant_lr`` of lesson 10, which removes the warm-up and the decay). Exercise 10 asks instead for
    the schedule that removes only the warm-up, :func:`check_no_warmup_schedule`; this check remains for
    notebooks that use it.

    Args:
        fn: the learner's function.
        task: task number printed on success.
        cases: ``(d_model, warmup, factor)`` triples tried, each at several steps.

    Raises:
        AssertionError: what differs, and the likely mistake.
    """
    __tracebackhide__ = True
    for d_model, warmup, factor in cases:
        expected_fn = ConstantAtPeak(d_model, warmup, factor)
        for step in (warmup // 2 or 1, 1, 2, warmup, 3 * warmup, 50 * warmup):
            text = f"{callable_name(fn)}(step={step}, d_model={d_model}, warmup={warmup}, factor={factor})"
            got = call_learner(fn, step, d_model, warmup, factor, text=text)
            if isinstance(got, Tensor) and got.numel() == 1:
                got = got.item()
            if isinstance(got, bool) or not isinstance(got, (int, float)):
                raise AssertionError(f"{text} returned {got!r}; expected a float learning rate")
            expected = expected_fn(step - 1)
            if math.isclose(got, expected, rel_tol=1e-6):
                continue
            hints = [
                (factor * d_model**-0.5 * step**-0.5, "The rate must not decay with the step: use warmup^-0.5, "
                                                      "not step^-0.5."),
                (factor * d_model**-0.5 * warmup**-1.5, "warmup^-1.5 is the slope of the warm-up; its peak is "
                                                        "warmup * warmup^-1.5 = warmup^-0.5."),
                (d_model**-0.5 * warmup**-0.5, "Multiply by `factor` too."),
                (transformer_lr(step, d_model, warmup, factor),
                 "That is the paper's warm-up schedule at this step; the ablation keeps its PEAK value, the rate "
                 "at step = warmup, from the first step on."),
            ]
            hint = next((h for value, h in hints if math.isclose(got, value, rel_tol=1e-6)), "")
            raise AssertionError(f"{text} returned {got:.6g}, expected {expected:.6g}." + (f" {hint}" if hint else ""))
    report_passed(task, f"constant learning rate at the schedule's peak, {len(cases)} settings x 6 steps, equal to "
                  "ConstantAtPeak")


def _no_warmup_mistakes(d_model: int, warmup: int, factor: float) -> list[tuple[Callable[[int], float], str]]:
    """The usual wrong versions of the decay-without-warm-up schedule, as functions of the step, with their hints."""
    scale = factor * d_model**-0.5
    return [
        (lambda step: scale * warmup**-0.5,
         "That is the constant rate at the schedule's peak, which removes the decay too: from step = warmup on, "
         "the rate must fall as step^-0.5, as in the paper's schedule."),
        (lambda step: transformer_lr(step, d_model, warmup, factor),
         "That is the paper's schedule with its warm-up: without the warm-up, the first `warmup` steps get the "
         "peak rate, factor * d_model^-0.5 * warmup^-0.5, instead of a linear rise."),
        (lambda step: scale * min(step, warmup) ** -0.5,
         "Take the MAX of step and warmup: with the min, the rate is step^-0.5 before the peak (above the peak "
         "itself) and stays at the peak after it."),
        (lambda step: scale * step**-0.5,
         "Hold the peak until step = warmup: step^-0.5 alone starts at factor * d_model^-0.5 at step 1, "
         "sqrt(warmup) times the peak."),
        (lambda step: scale * max(step + 1, warmup) ** -0.5,
         "Use step as given: it counts from 1 (the first update is step 1), and yours is one step ahead."),
        (lambda step: scale * max(step - 1, warmup) ** -0.5,
         "Use step as given: it counts from 1 (the first update is step 1), and yours is one step behind."),
        *[(lambda step, p=p: scale * max(step, warmup) ** p,
           f"The decay is 1/sqrt(step): raise max(step, warmup) to the power -0.5, not {p}.")
          for p in (-1.0, -1.5, 0.5, -2.0)],
        (lambda step: factor * d_model**0.5 * max(step, warmup) ** -0.5,
         "Multiply by d_model^-0.5 = 1/sqrt(d_model), not by sqrt(d_model)."),
        (lambda step: d_model**-0.5 * max(step, warmup) ** -0.5, "Multiply by `factor` too."),
    ]


@isolated(avoid=("minitransformer.training.schedule:transformer_lr",),
          builds='the schedule from its formula', allow=())
def check_no_warmup_schedule(fn: Callable[[int, int, int, float], float], *, task: int | str | None = None,
                             cases: tuple[tuple[int, int, float], ...] = ((512, 4000, 1.0), (128, 100, 0.5))) -> None:
    """Check ``fn(step, d_model, warmup, factor) -> lr``: the paper's schedule without its warm-up, decay kept.

    The rate is the schedule's peak until step = warmup, then the paper's decay:
    ``factor * d_model^-0.5 * max(step, warmup)^-0.5`` with ``step`` counted from 1
    (:class:`~minitransformer.training.schedule.DecayWithoutWarmup`, ``lr_schedule="decay_only"``, the
    variant ``no_warmup`` of lesson 10). The learner's code must not call the package's ``transformer_lr``.

    Args:
        fn: the learner's function.
        task: task number printed on success.
        cases: ``(d_model, warmup, factor)`` triples tried, each at the first steps, around step = warmup
            and far into the decay.

    Raises:
        AssertionError: what differs, and the likely mistake.
    """
    __tracebackhide__ = True
    tried = 0
    for d_model, warmup, factor in cases:
        expected_fn = DecayWithoutWarmup(d_model, warmup, factor)
        steps = sorted({1, 2, warmup // 2 or 1, max(warmup - 1, 1), warmup, warmup + 1, 3 * warmup, 50 * warmup})
        got: dict[int, float] = {}
        for step in steps:
            text = f"{callable_name(fn)}(step={step}, d_model={d_model}, warmup={warmup}, factor={factor})"
            value = call_learner(fn, step, d_model, warmup, factor, text=text)
            if isinstance(value, Tensor):
                raise AssertionError(f"{text} returned {describe(value)}; expected a Python float. Compute with "
                                     "numbers (** and max work on ints and floats), or convert with float(...)")
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise AssertionError(f"{text} returned {value!r}; expected a float learning rate")
            got[step] = float(value)
        tried += len(steps)
        expected = {s: expected_fn(s - 1) for s in steps}
        wrong = [s for s in steps if not math.isclose(got[s], expected[s], rel_tol=1e-6)]
        if not wrong:
            continue
        # Show the step where the two differ most: a constant peak is 0.01% off at step warmup + 1, 7x at 50 * warmup.
        step = max(wrong, key=lambda s: abs(got[s] - expected[s]) / expected[s]
                   if math.isfinite(got[s]) else math.inf)
        text = f"{callable_name(fn)}(step={step}, d_model={d_model}, warmup={warmup}, factor={factor})"
        mistakes = _no_warmup_mistakes(d_model, warmup, factor)
        # A mistake explains the whole curve, not one point: the constant peak and the min agree after the peak.
        hint = next((h for value, h in mistakes if all(math.isclose(got[s], value(s), rel_tol=1e-6) for s in steps)),
                    next((h for value, h in mistakes if math.isclose(got[step], value(step), rel_tol=1e-6)), ""))
        raise AssertionError(f"{text} returned {got[step]:.6g}, expected {expected[step]:.6g}."
                             + (f" {hint}" if hint else ""))
    report_passed(task, f"learning rate without warm-up, decay kept, {tried} steps in {len(cases)} settings (step 1, "
                  "around step = warmup, the decay), equal to DecayWithoutWarmup")


@isolated(avoid=("minitransformer.embeddings:LearnedPositionalEmbedding",),
          builds='learned positions from an embedding table of positions', allow=('embedding', 'dropout'))
def check_learned_positions(cls: type[nn.Module], *, task: int | str | None = None,
                            sizes: tuple[tuple[int, int], ...] = ((8, 6), (16, 12))) -> None:
    """Check ``cls(d_model, max_len, dropout)``: learned positional embeddings (Table 3, row E).

    The module holds ``self.embedding = nn.Embedding(max_len, d_model)`` and ``self.dropout``;
    ``forward(x, offset=0)`` returns ``dropout(x + table[offset : offset + T])`` for x of shape
    (B, T, D), and raises a ValueError when ``offset + T > max_len``. Compared with
    :class:`~minitransformer.embeddings.LearnedPositionalEmbedding` holding the same table.

    Args:
        cls: the learner's class.
        task: task number printed on success.
        sizes: ``(d_model, max_len)`` pairs tried.

    Raises:
        AssertionError: what differs, and the likely mistake.
    """
    __tracebackhide__ = True
    g = make_rng()
    for d_model, max_len in sizes:
        built = f"{callable_name(cls)}({d_model}, {max_len}, 0.0)"
        module = build_learner(cls, d_model, max_len, 0.0)
        table = getattr(module, "embedding", None)
        if not isinstance(table, nn.Embedding):
            raise AssertionError(f"{built} has no `embedding` of type nn.Embedding; create it in __init__ as "
                                 f"self.embedding = nn.Embedding(max_len, d_model)")
        if tuple(table.weight.shape) != (max_len, d_model):
            swap = " (nn.Embedding(num_embeddings, embedding_dim): one row per position)" \
                if tuple(table.weight.shape) == (d_model, max_len) else ""
            raise AssertionError(f"{built}.embedding.weight has shape {tuple(table.weight.shape)}, expected "
                                 f"({max_len}, {d_model}){swap}")
        if not table.weight.requires_grad:
            raise AssertionError(f"{built}: the table must be trained (requires_grad=True); a fixed table is the "
                                 "sinusoid's job")
        table.weight.copy_(torch.randn(max_len, d_model, generator=g))
        reference = LearnedPositionalEmbedding(d_model, max_len, 0.0).eval()
        reference.embedding.weight.copy_(table.weight)
        x = torch.randn(2, max_len // 2, d_model, generator=g)  # (B, T, D)
        for offset in (0, max_len // 2):
            text = f"{built}.forward(x {tuple(x.shape)}, offset={offset})"
            out = expect_tensor(call_learner(lambda: module(x, offset) if offset else module(x), text=text), text,
                                 f"of shape {tuple(x.shape)}")
            expected = reference(x, offset)
            mistakes = [
                ("Add the position vectors to x: return x + table[...], not the table alone.",
                 lambda: table.weight[offset:offset + x.size(1)].expand_as(x)),
                ("Start at row `offset`: when decoding one token at a time, the new token sits at position "
                 "offset, not 0.", lambda: reference(x, 0)),
                ("Use rows offset .. offset + T - 1 of the table, one per position of x.",
                 lambda: x + table.weight[: x.size(1)].flip(0)),
            ]
            compare(out, expected, text, "output", mistakes, atol=1e-6, rtol=1e-5)
        too_long = torch.zeros(1, max_len, d_model)
        text = f"{built}.forward(x {tuple(too_long.shape)}, offset=1)"
        try:
            module(too_long, 1)
        except ValueError:
            pass
        except Exception as err:
            raise AssertionError(f"{text} raised {type(err).__name__}: {err}; expected a ValueError that says the "
                                 f"sequence is longer than max_len={max_len}") from err
        else:
            raise AssertionError(f"{text} returned without an error; position {max_len} has no row in the table "
                                 f"of max_len={max_len}: raise a ValueError")
    report_passed(task, f"learned positional embeddings, {len(sizes)} sizes, offsets 0 and T, too-long input refused; "
                  "equal to LearnedPositionalEmbedding")
