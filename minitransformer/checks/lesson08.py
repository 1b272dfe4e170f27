"""Checks for exercise 08: the length penalty, beam search, checkpoint averaging (lesson 08) and BLEU (lesson 08b)."""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import torch
from torch import Tensor

from ..config import TransformerConfig
from ..decoding import beam_search, length_penalty
from ..masks import make_padding_mask
from ..model import Transformer
from .operations import SOFTMAX
from .compare import (call_learner, compare, decoding_model, describe, expect_shape, expect_tensor, isolated, callable_name,
                      report_passed, random_tensor, make_rng, shape_text)

__all__ = ["check_beam_search", "check_beam_step", "check_checkpoint_average", "check_corpus_bleu",
           "check_normalised_scores"]


def _scores(log_probs: Tensor, lengths: Tensor, alpha: float) -> Tensor:
    return log_probs / length_penalty(lengths, alpha)


@isolated(avoid=("minitransformer.decoding:length_penalty",),
          builds='the length penalty from its formula', allow=())
def check_normalised_scores(fn: Callable[[Tensor, Sequence[Sequence[int]], float], Tensor], *,
                            task: int | str | None = None) -> None:
    """Check ``fn(log_probs, hypotheses, alpha) -> scores`` (N,): log P(Y) / lp(Y), lp(Y) = ((5 + |Y|) / 6)^alpha.

    Each hypothesis is a list of token ids that starts with the start token and ends with the end
    token; |Y| counts the generated tokens, the end token included and the start token not
    (Wu et al., 2016; paper section 6.1; lesson 08).

    Args:
        fn: the learner's function.
        task: task number printed on success.

    Raises:
        AssertionError: what differs, and the likely mistake.
    """
    __tracebackhide__ = True
    hypotheses = [[1, 2], [1, 7, 2], [1, 5, 6, 7, 8, 2], [1, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 2]]
    cases = [(torch.tensor([-1.5, -2.0, -3.2, -5.0]), 0.6), (torch.tensor([-0.7, -0.9, -2.5, -4.1]), 1.0),
             (torch.tensor([-2.0, -2.2, -2.4, -2.6]), 0.0)]
    for log_probs, alpha in cases:
        text = f"{callable_name(fn)}(log_probs {shape_text(log_probs)}, hypotheses of lengths 2 to 12, alpha={alpha})"
        got = expect_tensor(call_learner(fn, log_probs.clone(), [list(h) for h in hypotheses], alpha, text=text), text,
                             f"of shape {shape_text(log_probs)}")
        lengths = torch.tensor([len(h) - 1 for h in hypotheses])
        expected = _scores(log_probs, lengths, alpha)
        compare(got, expected, text, "scores", [
            ("|Y| counts the generated tokens: leave out the start token (len(hypothesis) - 1).",
             lambda: _scores(log_probs, lengths + 1, alpha)),
            ("|Y| includes the end token: only the start token is left out.",
             lambda: _scores(log_probs, lengths - 1, alpha)),
            ("Divide the log-probability by lp(Y) = ((5 + |Y|) / 6)^alpha; yours is not normalised, so it prefers "
             "short hypotheses.", lambda: log_probs),
            ("Divide by lp(Y), don't multiply: log-probabilities are negative, so multiplying punishes long "
             "hypotheses even more.", lambda: log_probs * length_penalty(lengths, alpha)),
            ("lp(Y) = ((5 + |Y|) / 6)^alpha, not |Y|^alpha.", lambda: log_probs / lengths.float() ** alpha),
            ("The penalty is ((5 + |Y|) / 6)^alpha: the 5 goes inside the division by 6.",
             lambda: log_probs / (5 + lengths.float() / 6) ** alpha),
        ], atol=1e-5, rtol=1e-5)
    report_passed(task, "length-normalised scores, 4 hypotheses of 1 to 11 tokens, alpha 0.6, 1 and 0")


def _step_by_hand(scores: Tensor, log_probs: Tensor, beam_size: int, eos_id: int, *, add_scores: bool = True,
                  end_among: str = "k", keep_ended: bool = False) -> tuple[Any, ...]:
    """One beam step, right (the defaults) or with one of the usual mistakes."""
    k_live, vocab = log_probs.shape
    total = scores[:, None] + log_probs if add_scores else log_probs.clone()  # (K, V)
    n_top = min(2 * beam_size, k_live * vocab)
    top_scores, index = total.reshape(-1).topk(n_top)  # (2K,)
    top_parents, top_tokens = index // vocab, index % vocab
    ends = top_tokens == eos_id
    first = torch.arange(n_top) < (beam_size if end_among == "k" else n_top)
    ended = [(int(p), float(s)) for p, s, e, f in zip(top_parents, top_scores, ends, first)
             if e and f and s > -math.inf]
    live = torch.ones_like(ends) if keep_ended else ~ends
    keep = live.nonzero().flatten()[:beam_size]
    return top_scores[keep], top_parents[keep], top_tokens[keep], ended


def _ended_text(ended: list[tuple[int, float]]) -> str:
    return "[" + ", ".join(f"(beam {p}, {s:.3f})" for p, s in ended) + "]"


@isolated(builds='the beam step from topk over the flattened scores', allow=())
def check_beam_step(fn: Callable[..., tuple[Tensor, Tensor, Tensor, list[tuple[int, float]]]], *,
                    task: int | str | None = None) -> None:
    """Check ``fn(scores, log_probs, beam_size, eos_id) -> (new_scores, parents, tokens, ended)``: one beam step.

    ``scores`` (K,) are the log-probabilities of the live hypotheses, ``log_probs`` (K, V) those of
    their next token. Every (hypothesis, token) pair is a candidate scored scores[b] + log_probs[b, v];
    take the best 2 * beam_size of all K * V candidates, best first. ``ended``: the candidates among
    the best ``beam_size`` whose token is ``eos_id``, as (parent, score) pairs, best first.
    ``new_scores``, ``parents``, ``tokens`` (beam_size,): the best ``beam_size`` candidates that do not
    end, best first. This is one step of :func:`beam_search` (lesson 08).

    Args:
        fn: the learner's function.
        task: task number printed on success.

    Raises:
        AssertionError: what differs, and the likely mistake.
    """
    __tracebackhide__ = True
    g = make_rng()
    cases = []
    for k_live, vocab, beam_size, eos in ((1, 8, 3, 2), (3, 8, 3, 2), (4, 10, 4, 5), (2, 6, 2, 0)):
        log_probs = torch.log_softmax(random_tensor(g, k_live, vocab, scale=2.0), dim=-1)
        scores = -torch.rand(k_live, generator=g) * 3 if k_live > 1 else torch.zeros(1)
        cases.append((scores, log_probs, beam_size, eos))
    # A step where the end token is the best choice of every beam.
    lp = torch.log_softmax(random_tensor(g, 3, 7), dim=-1)
    lp[:, 2] = -0.01
    cases.append((torch.tensor([-1.0, -1.2, -1.5]), torch.log_softmax(lp, dim=-1), 3, 2))
    for scores, log_probs, beam_size, eos in cases:
        text = (f"{callable_name(fn)}(scores {shape_text(scores)}, log_probs {shape_text(log_probs)}, beam_size={beam_size}, "
                f"eos_id={eos})")
        result = call_learner(fn, scores.clone(), log_probs.clone(), beam_size, eos, text=text)
        if isinstance(result, Tensor) or not isinstance(result, (tuple, list)) or len(result) != 4:
            raise AssertionError(f"{text} returned {describe(result)}; expected four things "
                                 "(new_scores, parents, tokens, ended)")
        new_scores, parents, tokens, ended = result
        exp_scores, exp_parents, exp_tokens, exp_ended = _step_by_hand(scores, log_probs, beam_size, eos)
        for name, got, want in (("new_scores", new_scores, exp_scores), ("parents", parents, exp_parents),
                                ("tokens", tokens, exp_tokens)):
            expect_tensor(got, text, f"as {name}")
            expect_shape(got, want.shape, text, name)
        got_ended = [(int(p), float(s)) for p, s in ended] if isinstance(ended, (list, tuple)) else None
        if got_ended is None:
            raise AssertionError(f"{text}: ended must be a list of (parent, score) pairs, got {describe(ended)}")
        same = (torch.equal(parents.long(), exp_parents) and torch.equal(tokens.long(), exp_tokens)
                and torch.allclose(new_scores.float(), exp_scores, atol=1e-5)
                and len(got_ended) == len(exp_ended)
                and all(p == q and abs(s - t) < 1e-5 for (p, s), (q, t) in zip(got_ended, exp_ended)))
        if same:
            continue
        hints = [
            ({"add_scores": False}, "A candidate's score is its hypothesis's score PLUS the new token's "
                                    "log-probability: scores[:, None] + log_probs."),
            ({"keep_ended": True}, "Candidates that end with eos leave the beam: the live beam is the best beam_size "
                                   "candidates that do NOT end."),
            ({"end_among": "all"}, "Only end tokens among the best beam_size candidates finish a hypothesis; one "
                                   "further down the 2 * beam_size list does not."),
        ]
        for kw, hint in hints:
            w_scores, w_parents, w_tokens, w_ended = _step_by_hand(scores, log_probs, beam_size, eos, **kw)
            if (w_parents.shape == parents.shape and torch.equal(parents.long(), w_parents)
                    and torch.equal(tokens.long(), w_tokens) and len(w_ended) == len(got_ended)
                    and all(p == q for (p, _), (q, _) in zip(got_ended, w_ended))):
                raise AssertionError(f"{text}: {hint}")
        vocab = log_probs.size(1)
        if torch.equal(parents.long(), exp_tokens) or (tokens.long() >= vocab).any():
            raise AssertionError(f"{text}: a flat index i into the (K * V) candidates is beam i // V and token i % V.")
        raise AssertionError(
            f"{text}: expected parents {exp_parents.tolist()}, tokens {exp_tokens.tolist()}, scores "
            f"{[round(s, 3) for s in exp_scores.tolist()]}, ended {_ended_text(exp_ended)}; got parents "
            f"{parents.tolist()}, tokens {tokens.tolist()}, scores {[round(float(s), 3) for s in new_scores]}, "
            f"ended {_ended_text(got_ended)}"
        )
    report_passed(task, "one beam step, 5 cases (the first step, 2 to 4 beams, end tokens ranked high and low)")


class _ToyNextLogProbs:
    """``next_log_probs(prefixes (K, t)) -> (K, V)`` for one source sentence of a small model."""

    def __init__(self, model: Transformer, src: Tensor, bos_id: int, beam_size: int | None = None,
                 max_len: int | None = None) -> None:
        self.model, self.bos_id = model, bos_id
        self.src_mask = make_padding_mask(src[None], model.config.pad_id)  # (1, 1, 1, S)
        self.memory = model.encode(src[None], self.src_mask)  # (1, S, D)
        self.calls = 0
        # What one search can need (the grader computes this for the learner's code): at most 2 * beam_size
        # prefixes of at most max_len + 1 tokens a call, and beam_size calls a step, twice over.
        self.rows = 2 * beam_size if beam_size is not None else None
        self.length = max_len + 1 if max_len is not None else None
        self.most_calls = 2 * beam_size * (max_len + 1) + 8 if beam_size is not None and max_len is not None else None

    @torch.no_grad()
    def __call__(self, prefixes: Tensor) -> Tensor:
        self.calls += 1
        if not isinstance(prefixes, Tensor) or prefixes.dim() != 2 or prefixes.is_floating_point():
            raise ValueError(f"next_log_probs expects the live prefixes as a (K, t) tensor of token ids, got "
                             f"{describe(prefixes)}")
        k = prefixes.size(0)
        if (self.rows is not None and not 1 <= k <= self.rows) or \
                (self.length is not None and not 1 <= prefixes.size(1) <= self.length):
            raise ValueError(f"next_log_probs takes the live prefixes of this search, at most {self.rows} rows of at "
                             f"most {self.length} tokens (beam_size and max_len + 1); got {describe(prefixes)}")
        if self.most_calls is not None and self.calls > self.most_calls:
            raise ValueError(f"next_log_probs was called {self.calls} times; a search of this beam size and length "
                             f"needs at most {self.most_calls}")
        hidden = self.model.decode(prefixes.long(), self.memory.expand(k, -1, -1),
                                   self.src_mask.expand(k, -1, -1, -1))  # (K, t, D)
        logits = self.model.generator(hidden[:, -1]).float()  # (K, V)
        logits[:, [self.model.config.pad_id, self.bos_id]] = float("-inf")  # never generated
        return torch.log_softmax(logits, dim=-1)


def _search_by_hand(next_log_probs: Callable[[Tensor], Tensor], bos: int, eos: int, beam_size: int, alpha: float,
                    max_len: int, *, penalty: bool = True, stop_at_first: bool = False) -> list[int]:
    """Beam search for one sentence, built from :func:`_step_by_hand`; the switches are the usual mistakes."""
    prefixes = torch.tensor([[bos]])
    scores = torch.zeros(1)
    best: tuple[float, list[int]] = (-math.inf, [])
    n_ended = 0
    for step in range(max_len):
        log_probs = next_log_probs(prefixes)
        lp = ((5 + step + 1) / 6) ** alpha if penalty else 1.0
        new_scores, parents, tokens, ended = _step_by_hand(scores, log_probs, beam_size, eos)
        if step + 1 == max_len:  # at the length limit every one of the best beam_size candidates finishes
            total = (scores[:, None] + log_probs).reshape(-1)
            top, index = total.topk(min(beam_size, total.numel()))
            ended = [(int(i) // log_probs.size(1), float(s)) for s, i in zip(top, index) if s > -math.inf]
            ended_tokens = [int(i) % log_probs.size(1) for i in index]
        else:
            ended_tokens = [eos] * len(ended)
        for (parent, score), token in zip(ended, ended_tokens):
            if score / lp > best[0]:
                best = (score / lp, prefixes[parent].tolist() + [token])
        n_ended += len(ended)
        if n_ended >= beam_size or step + 1 == max_len or (stop_at_first and n_ended > 0):
            break
        prefixes = torch.cat([prefixes[parents], tokens[:, None]], dim=1)
        scores = new_scores
    return best[1]


def _search_cases() -> list[tuple[str, int, Tensor, int, int, float, int]]:
    """(description, model seed, source, eos, beam size, alpha, max_len).

    Chosen (by a search, see the tests) so that the length penalty changes the winner and beam
    search differs from greedy decoding; the source ids avoid 0-3, the special tokens.
    """
    return [
        ("model 0, beam 4, alpha 0.6", 0, torch.tensor([5, 5, 7, 9, 8]), 2, 4, 0.6, 10),
        ("model 1, beam 3, alpha 1.0", 1, torch.tensor([4, 5, 7, 10, 9]), 5, 3, 1.0, 10),
        ("model 5, beam 3, alpha 1.0, a long winner", 5, torch.tensor([8, 7, 7, 10, 8]), 8, 3, 1.0, 10),
        ("model 2, beam 2, alpha 1.5", 2, torch.tensor([10, 6, 10, 5, 9]), 7, 2, 1.5, 10),
        ("model 0, beam 1 (greedy)", 0, torch.tensor([9, 10, 9, 9]), 4, 1, 0.6, 6),
        ("model 1, beam 3, a length limit of 2", 1, torch.tensor([9, 10, 9, 9]), 5, 3, 0.6, 2),
    ]


@isolated(avoid=("minitransformer.decoding:beam_search", "minitransformer.decoding:length_penalty"),
          builds='beam search from the step you wrote, the scores and topk', allow=(*SOFTMAX,))
def check_beam_search(fn: Callable[..., Sequence[int]], *, task: int | str | None = None) -> None:
    """Check ``fn(next_log_probs, bos_id, eos_id, beam_size, alpha, max_len) -> tokens`` against :func:`beam_search`.

    ``next_log_probs(prefixes)`` maps the live prefixes (K, t) to the log-probabilities (K, V) of
    their next token (a small random Transformer and one source sentence stand behind it). The
    result is the best finished hypothesis by log P / lp, as a list of ids starting with ``bos_id``.
    Rules as in lesson 08: start from [bos] with score 0; each step is the beam step of the previous
    task; a hypothesis ending with eos among the best ``beam_size`` finishes, scored log P / lp(t)
    with t the tokens generated so far; stop when ``beam_size`` hypotheses have finished, or after
    ``max_len`` tokens, where the best ``beam_size`` candidates all finish.

    Args:
        fn: the learner's function.
        task: task number printed on success.

    Raises:
        AssertionError: what differs, and the likely mistake.
    """
    __tracebackhide__ = True
    bos = 1
    cases = _search_cases()
    for case, seed, src, eos, beam_size, alpha, max_len in cases:
        model = decoding_model(seed)
        oracle = _ToyNextLogProbs(model, src, bos, beam_size, max_len)
        text = (f"{callable_name(fn)}(next_log_probs, bos_id={bos}, eos_id={eos}, beam_size={beam_size}, alpha={alpha}, "
                f"max_len={max_len}) [{case}]")
        got = call_learner(fn, oracle, bos, eos, beam_size, alpha, max_len, text=text)
        if isinstance(got, Tensor):
            got = got.flatten().tolist()
        if not isinstance(got, (list, tuple)):
            raise AssertionError(f"{text} returned {describe(got)}; expected a list of token ids")
        got = [int(t) for t in got]
        row = beam_search(model, src[None], bos, eos, beam_size, alpha, max_len=max_len, use_cache=False)[0].tolist()
        while row and row[-1] == model.config.pad_id:
            row.pop()
        if got == row:
            continue
        if not got or got[0] != bos:
            raise AssertionError(f"{text}: the hypothesis starts with the start token bos_id={bos}; got {got}")
        plain = _ToyNextLogProbs(model, src, bos)
        hints = [
            ({"penalty": False}, "Divide each finished hypothesis's log-probability by lp = ((5 + t) / 6)^alpha "
                                 "before comparing: without it the search prefers short outputs."),
            ({"stop_at_first": True}, f"Keep searching until beam_size = {beam_size} hypotheses have finished: the "
                                      "first one to end is not necessarily the best after normalisation."),
        ]
        matched = [hint for kw, hint in hints
                   if _search_by_hand(plain, bos, eos, beam_size, alpha, max_len, **kw) == got]
        if len(matched) == 1:
            raise AssertionError(f"{text}: {matched[0]}")
        if matched:
            raise AssertionError(f"{text}: expected {row}, got {got}. Usual mistakes that give your result here: "
                                 + " ".join(f"({i}) {h}" for i, h in enumerate(matched, start=1)))
        raise AssertionError(f"{text}: expected {row}, got {got}")
    n_models = len({seed for _, seed, *_ in cases})
    report_passed(task, f"beam search with length penalty, {len(cases)} searches on {n_models} small models "
                  "(beam 1 to 4, alpha 0.6 to 1.5, a length limit), equal to beam_search")


@isolated(avoid=("minitransformer.training.checkpoint:average_checkpoints",),
          builds='the average from sums over the state dicts', allow=())
def check_checkpoint_average(fn: Callable[[list[dict[str, Tensor]]], dict[str, Tensor]], *,
                             task: int | str | None = None) -> None:
    """Check ``fn(state_dicts) -> averaged``: checkpoint averaging, as :func:`average_checkpoints` does it.

    Every floating-point tensor becomes the mean of its values in the k state dicts, computed in
    float64 and returned in its own dtype; other tensors (integer counters) are the last state
    dict's; the inputs are left unchanged (paper section 6.1, lesson 08).

    Args:
        fn: the learner's function.
        task: task number printed on success.

    Raises:
        AssertionError: what differs, and the likely mistake.
    """
    __tracebackhide__ = True
    g = make_rng()
    # Xavier: the random draws (and so the check's cases) stay those the check was written with.
    config = TransformerConfig.tiny(9, d_model=8, n_heads=2, d_ff=16, n_encoder_layers=1, n_decoder_layers=1,
                                    embedding_init="xavier")
    state_dicts = []
    for k in range(3):
        sd = {name: random_tensor(g, *p.shape) for name, p in Transformer(config).state_dict().items()}
        tied = sd["src_embed.embedding.weight"]
        for name in ("tgt_embed.embedding.weight", "generator.weight"):  # tied weights share one tensor, as in a
            sd[name] = tied  # real state dict
        sd["steps_done"] = torch.tensor(1000 * (k + 1))  # an integer counter
        sd["half_weight"] = torch.full((3,), 30000.0 + 1000 * k, dtype=torch.float16)  # the sum overflows float16
        state_dicts.append(sd)
    text = f"{callable_name(fn)}(3 state dicts of {len(state_dicts[0])} tensors)"
    got = call_learner(fn, state_dicts, text=text, in_place=(
        "changed the state dicts it was given: start the sums from copies (v.double() or v.clone()), never add "
        "into an input tensor; tied weights share one tensor, so an in-place sum would even count them several "
        "times."))
    if not isinstance(got, dict):
        raise AssertionError(f"{text} returned {describe(got)}; expected a dict name -> tensor, like a state_dict")
    if set(got) != set(state_dicts[0]):
        missing = sorted(set(state_dicts[0]) - set(got))
        raise AssertionError(f"{text}: the averaged dict must have the same keys as the inputs; missing "
                             f"{missing[:3]}, extra {sorted(set(got) - set(state_dicts[0]))[:3]}")
    for name in state_dicts[0]:
        value = expect_tensor(got[name], f"{text}['{name}']", "")
        last = state_dicts[-1][name]
        where = f"{text}: '{name}'"
        if value.dtype != last.dtype:
            hint = (" Integer tensors (step counters, index buffers) are not averaged: keep the last state dict's."
                    if not last.is_floating_point() else " Cast the mean back to the tensor's own dtype.")
            raise AssertionError(f"{where} has dtype {value.dtype}; expected {last.dtype}.{hint}")
        if not last.is_floating_point():
            if not torch.equal(value, last):
                raise AssertionError(f"{where} is {value.tolist()}; integer tensors are not averaged: keep the last "
                                     f"state dict's value, {last.tolist()}.")
            continue
        if not torch.isfinite(value).all():
            raise AssertionError(f"{where} holds inf: its float16 sum overflows (float16 stops at 65504). Sum in "
                                 "float64, divide, then cast back to float16.")
        stack = torch.stack([sd[name].double() for sd in state_dicts])
        expected = stack.mean(dim=0).to(last.dtype)
        compare(value, expected, where, "average", [
            ("Divide the sum by the number of state dicts.", lambda: stack.sum(dim=0).to(last.dtype)),
            ("Average all the state dicts, not just the last two.", lambda: stack[1:].mean(dim=0).to(last.dtype)),
            ("That is the last state dict's value; average over all of them.", lambda: last),
        ], atol=1e-3 if last.dtype == torch.float16 else 1e-6, rtol=1e-3 if last.dtype == torch.float16 else 1e-5)
    report_passed(task, "checkpoint averaging of 3 state dicts (tied weights, an integer counter, a float16 tensor)")


# --- BLEU (lesson 08b) --------------------------------------------------------------------------------------------

_BLEU_WORDS = ("the", "a", "dog", "cat", "runs", "sits", "on", "in", "grass", "snow", "red", "small", "man", "two",
               "park", "and", "with", "ball")


def _ngram_counts(tokens: Sequence[str], n: int) -> dict[tuple[str, ...], int]:
    counts: dict[tuple[str, ...], int] = {}
    for i in range(len(tokens) - n + 1):
        gram = tuple(tokens[i : i + n])
        counts[gram] = counts.get(gram, 0) + 1
    return counts


def _bleu_by_hand(hyps: Sequence[str], refs: Sequence[Sequence[str]], *, clip: bool = True,
                  geometric: bool = True, brevity: bool = True, ref_length: str = "closest",
                  merge: str = "max") -> float:
    """Corpus BLEU (0-100) of whitespace-split sentences, and the usual mistakes as switches.

    Modified n-gram precision (each hypothesis n-gram counts at most as often as it occurs in one
    reference, the largest such count over the references), n = 1..4, summed over the corpus; their
    geometric mean; the brevity penalty exp(1 - r / c) when the hypotheses' length c is below r, the
    sum of each sentence's reference length closest to its hypothesis (on a tie the shorter one).
    """
    matches, totals = [0] * 4, [0] * 4
    c = r = 0
    for hyp, group in zip(hyps, refs):
        h, rs = hyp.split(), [ref.split() for ref in group]
        c += len(h)
        lengths = [len(x) for x in rs]
        r += {"closest": min(lengths, key=lambda n: (abs(n - len(h)), n)), "first": lengths[0],
              "shortest": min(lengths)}[ref_length]
        for n in range(1, 5):
            hc = _ngram_counts(h, n)
            rc: dict[tuple[str, ...], int] = {}
            for x in rs:
                for gram, k in _ngram_counts(x, n).items():
                    rc[gram] = max(rc.get(gram, 0), k) if merge == "max" else rc.get(gram, 0) + k
            totals[n - 1] += sum(hc.values())
            matches[n - 1] += sum(min(k, rc.get(g, 0)) if clip else (k if g in rc else 0) for g, k in hc.items())
    if min(totals) == 0 or min(matches) == 0:
        return 0.0
    precisions = [m / t for m, t in zip(matches, totals)]
    mean = math.exp(sum(math.log(p) for p in precisions) / 4) if geometric else sum(precisions) / 4
    penalty = math.exp(1 - r / c) if brevity and c < r else 1.0
    return 100.0 * penalty * mean


def _bleu_corpus(rnd: Any, n_sentences: int, most_refs: int, shorten: float) -> tuple[list[str], list[list[str]]]:
    """Random references and hypotheses made from them by the edits a translation system makes."""
    hyps, refs = [], []
    for _ in range(n_sentences):
        group = [[rnd.choice(_BLEU_WORDS) for _ in range(rnd.randint(6, 12))] for _ in range(rnd.randint(1, most_refs))]
        hyp = list(rnd.choice(group))
        for _ in range(rnd.randint(0, 2)):  # a wrong word
            hyp[rnd.randrange(len(hyp))] = rnd.choice(_BLEU_WORDS)
        if rnd.random() < shorten:  # a word left out, or two
            k = rnd.randrange(len(hyp))
            del hyp[k : k + rnd.randint(1, 2)]
        if rnd.random() < 0.3:  # a word said twice: clipping matters
            k = rnd.randrange(len(hyp))
            hyp.insert(k, hyp[k])
        hyps.append(" ".join(hyp))
        refs.append([" ".join(x) for x in group])
    return hyps, refs


@isolated(avoid=("sacrebleu:corpus_bleu", "sacrebleu:sentence_bleu", "minitransformer.evaluation:bleu"),
          builds='BLEU from n-gram counts, in Python', allow=())
def check_corpus_bleu(fn: Callable[[list[str], list[list[str]]], Any], *, task: int | str | None = None,
                      seed: int = 0) -> None:
    """Check ``fn(hypotheses, references) -> BLEU`` (0-100) against sacreBLEU's ``corpus_bleu``.

    Sentences are split on spaces (sacreBLEU with ``tokenize="none"``); ``references[i]`` lists the
    one or more references of sentence i. The corpora drawn here have a match of every n-gram order,
    so no smoothing is involved (Papineni et al., 2002; lesson 08b).

    Args:
        fn: the learner's function.
        task: task number printed on success.
        seed: which random corpora (the grader's hidden tests use others).

    Raises:
        AssertionError: what differs, and the likely mistake.
    """
    __tracebackhide__ = True
    import random

    import sacrebleu

    from ..evaluation import reference_streams

    rnd = random.Random(f"bleu:{seed}")
    cases = [(["the cat sat on the mat"], [["the cat sat on a red mat"]], "one sentence"),
             (["the the cat sat on on the mat today", "a dog runs"],
              [["the cat sat on the mat", "a cat sat on a mat"], ["a dog runs in the park"]],
              "two sentences, a repeated word, a short hypothesis, two references")]
    for n, most_refs, shorten, what in ((30, 1, 0.8, "30 sentences, one reference each, mostly short hypotheses"),
                                        (40, 3, 0.3, "40 sentences, one to three references each")):
        while True:
            hyps, refs = _bleu_corpus(rnd, n, most_refs, shorten)
            if _bleu_by_hand(hyps, refs) > 0:
                break
        cases.append((hyps, refs, what))
    for hyps, refs, what in cases:
        text = f"{callable_name(fn)}({len(hyps)} hypotheses, their references) [{what}]"
        streams = reference_streams(refs)
        expected = float(sacrebleu.corpus_bleu(hyps, streams, tokenize="none").score)
        assert abs(expected - _bleu_by_hand(hyps, refs)) < 1e-9, "the check's own BLEU disagrees with sacreBLEU"
        got_raw = call_learner(fn, [h for h in hyps], [list(r) for r in refs], text=text)
        if isinstance(got_raw, Tensor) and got_raw.numel() == 1:
            got_raw = got_raw.item()
        if isinstance(got_raw, bool) or not isinstance(got_raw, (int, float)):
            raise AssertionError(f"{text} returned {describe(got_raw)}; expected a number from 0 to 100")
        got = float(got_raw)
        if math.isclose(got, expected, rel_tol=1e-6, abs_tol=1e-6):
            continue
        sentence_mean = sum(_bleu_by_hand([h], [r]) for h, r in zip(hyps, refs)) / len(hyps)
        hints = [
            ("BLEU is reported from 0 to 100: multiply by 100.", expected / 100),
            ("Clip the counts: a hypothesis n-gram counts at most as often as it occurs in a reference (min of the "
             "two counts), so 'the the the' cannot match one 'the' three times.",
             _bleu_by_hand(hyps, refs, clip=False)),
            ("Combine the four precisions with the geometric mean, exp(mean of log p_n), not the arithmetic mean.",
             _bleu_by_hand(hyps, refs, geometric=False)),
            ("Apply the brevity penalty exp(1 - r / c) when the hypotheses are shorter in total (c) than the "
             "references (r): precision alone rewards leaving words out.", _bleu_by_hand(hyps, refs, brevity=False)),
            ("BLEU is a corpus score: add up the matches and totals (and lengths) of all sentences first, then "
             "compute one score; the average of sentence scores is another, lower number.", sentence_mean),
            ("With several references, the reference length r of a sentence is the one closest to its hypothesis's "
             "length (the shorter on a tie), not the first reference's.",
             _bleu_by_hand(hyps, refs, ref_length="first")),
            ("With several references, the reference length r of a sentence is the one closest to its hypothesis's "
             "length, not the shortest.", _bleu_by_hand(hyps, refs, ref_length="shortest")),
            ("With several references, an n-gram's clipping count is its largest count in any ONE reference, not "
             "the sum over the references.", _bleu_by_hand(hyps, refs, merge="sum")),
        ]
        matched = [hint for hint, value in hints if math.isclose(got, value, rel_tol=1e-6, abs_tol=1e-6)]
        if matched:
            raise AssertionError(f"{text}: expected {expected:.4f}, got {got:.4f}. {' '.join(dict.fromkeys(matched))}")
        raise AssertionError(f"{text}: expected {expected:.4f} (sacreBLEU's corpus_bleu), got {got:.4f}")
    report_passed(task, f"corpus BLEU of {len(cases)} corpora (1 to 40 sentences, one to three references, repeated "
                  "words, short hypotheses), equal to sacreBLEU")
