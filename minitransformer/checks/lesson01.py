"""Checks for exercise 01: one-hot lookup, sqrt(d_model) scaling, tied output, skip-gram, BPE merges (lesson 01).

The BPE check does not ask for one particular list of merges: it replays the learner's merges on the
corpus and accepts them when every merge is a most frequent pair of its step (pairs of neighbouring
symbols, each word weighted by its count, overlapping pairs counted, merged left to right), and when
the list stops where BPE stops. How ties between equally frequent pairs are broken is a convention
(the ``tokenizers`` trainer takes the smallest ids, as :func:`minitransformer.data.learn_bpe` does):
any choice passes. A list that fails is replayed again under each usual mistake's rules to name it.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..embeddings import TokenEmbedding
from .operations import LINEAR, MATMUL, SOFTMAX
from .compare import (SEED, build_learner, call_learner, call_text, compare, describe, expect_shape, expect_tensor, isolated,
                      callable_name, split_pair, report_passed, random_tensor, make_rng, shape_text)

__all__ = ["check_bpe_merges", "check_one_hot_embedding", "check_scaled_embedding", "check_skipgram_gradients",
           "check_tied_output"]


@isolated(avoid=("torch.nn.functional:embedding",),
          builds='the lookup as a one-hot vector times the table', allow=(*MATMUL, 'one_hot'))
def check_one_hot_embedding(fn: Callable[[Tensor, Tensor], tuple[Tensor, Tensor]], *,
                            task: int | str | None = None) -> None:
    """Check ``fn(tokens, E) -> (one_hot, vectors)``: the embedding lookup as a one-hot matrix product.

    ``tokens`` (B, T) int64 ids, ``E`` (V, D); ``one_hot`` is (B, T, V) float with a single 1 per row,
    ``vectors = one_hot @ E`` is (B, T, D) and equals the lookup ``E[tokens]`` (lesson 01).

    Args:
        fn: the learner's function.
        task: task number printed on success.

    Raises:
        AssertionError: what differs, and the likely mistake.
    """
    __tracebackhide__ = True
    g = make_rng()
    cases = [
        ("a padded batch", torch.tensor([[4, 7, 5, 0], [6, 4, 0, 0]]), random_tensor(g, 9, 5)),
        ("the last id of the vocabulary", torch.tensor([[8, 1, 2, 3]]), random_tensor(g, 9, 3)),
        ("one token", torch.tensor([[2]]), random_tensor(g, 4, 6)),
    ]
    for case, tokens, E in cases:
        text = call_text(fn, tokens, E, names=("tokens", "E")) + f" [{case}]"
        one_hot, vectors = split_pair(call_learner(fn, tokens, E, text=text), text, "one_hot, vectors")
        (batch, length), (vocab, d_model) = tokens.shape, E.shape
        one_hot = expect_tensor(one_hot, text, "as one_hot")
        vectors = expect_tensor(vectors, text, "as the vectors")
        expect_shape(one_hot, (batch, length, vocab), text, "one-hot tensor", {
            (batch, length, int(tokens.max()) + 1): "The one-hot vectors need V = E.size(0) entries, one per row of "
                                                  "the table, not just as many as the largest id in the batch: "
                                                  "pass num_classes.",
        })
        if not one_hot.is_floating_point():
            raise AssertionError(f"{text}: one_hot is a {one_hot.dtype} tensor; make it float (.float()) so that it "
                                 "can be multiplied with the float table E")
        expected_one_hot = F.one_hot(tokens, vocab).float()
        if not torch.equal(one_hot, expected_one_hot):
            raise AssertionError(f"{text}: wrong one-hot tensor: row (b, t) must be all 0 except a 1 at column "
                                 f"tokens[b, t]; for sentence 0 expected the 1s in columns {tokens[0].tolist()}, "
                                 f"got {one_hot[0].argmax(-1).tolist()}")
        expect_shape(vectors, (batch, length, d_model), text, "vectors")
        compare(vectors, E[tokens], text, "vectors", [])
    report_passed(task, "embedding lookup as a one-hot product, 3 batches (padding, the last id, one token)")


@isolated(avoid=("minitransformer.embeddings:TokenEmbedding",),
          builds='the scaled token embedding from a lookup and a multiplication', allow=('embedding',))
def check_scaled_embedding(cls: type[nn.Module], *, task: int | str | None = None) -> None:
    """Check an embedding module against :class:`TokenEmbedding`: lookup times sqrt(d_model) (section 3.4).

    ``cls(vocab_size, d_model)`` must hold the table as a parameter ``weight`` of shape (V, D);
    ``forward(tokens)`` returns ``weight[tokens] * sqrt(d_model)``, (B, T) -> (B, T, D).

    Args:
        cls: the learner's class.
        task: task number printed on success.

    Raises:
        AssertionError: what differs, and the likely mistake.
    """
    __tracebackhide__ = True
    g = make_rng()
    for vocab, d_model, tokens in ((10, 16, torch.tensor([[4, 9, 1, 0], [5, 5, 0, 0]])),
                                   (7, 9, torch.tensor([[6, 3, 2]])), (5, 1, torch.tensor([[4]]))):
        module = build_learner(cls, vocab, d_model)
        owner = f"{callable_name(cls)}({vocab}, {d_model})"
        weight = getattr(module, "weight", None)
        if not isinstance(weight, nn.Parameter):
            found = ", ".join(f"{n} {shape_text(p)}" for n, p in module.named_parameters()) or "none"
            raise AssertionError(f"{owner} has no parameter `weight` (its parameters: {found}): keep the table as "
                                 "self.weight = nn.Parameter(torch.randn(vocab_size, d_model)), or expose "
                                 "nn.Embedding's table under that name")
        if tuple(weight.shape) != (vocab, d_model):
            hint = " (rows are tokens: (V, D), not (D, V))" if tuple(weight.shape) == (d_model, vocab) else ""
            raise AssertionError(f"{owner}.weight has shape {shape_text(weight)}; expected ({vocab}, {d_model}){hint}")
        ref = TokenEmbedding(vocab, d_model)
        ref.weight.copy_(random_tensor(g, vocab, d_model, scale=0.2))
        weight.copy_(ref.weight)
        text = f"{owner}.forward(tokens {shape_text(tokens)})"
        out = expect_tensor(call_learner(module, tokens, text=text), text, f"of shape {shape_text((*tokens.shape, d_model))}")
        expected = ref(tokens)
        rows = ref.weight[tokens]
        compare(out, expected, text, "vectors", [
            ("Multiply the looked-up rows by sqrt(d_model) (section 3.4): yours are not scaled.", lambda: rows),
            (f"Multiply by sqrt(d_model) = {math.sqrt(d_model):.3f}, don't divide.", lambda: rows / math.sqrt(d_model)),
            (f"The factor is sqrt(d_model) = {math.sqrt(d_model):.3f}, not d_model = {d_model}.",
             lambda: rows * d_model),
            ("The factor is sqrt(d_model), the width of the vectors, not sqrt(vocab_size).",
             lambda: rows * math.sqrt(vocab) if vocab != d_model else None),
        ])
    report_passed(task, "scaled token embedding, 3 sizes (d_model 16, 9 and 1)")


@isolated(builds='the tied output layer from one shared parameter', allow=(*LINEAR, 'embedding'))
def check_tied_output(cls: type[nn.Module], *, task: int | str | None = None) -> None:
    """Check a tiny language model whose embedding and output layer share one matrix (section 3.4).

    ``cls(vocab_size, d_model)`` holds ``embed = nn.Embedding(V, D)`` and ``out = nn.Linear(D, V,
    bias=False)`` whose weight IS the embedding's (one parameter, V * D numbers in all);
    ``forward(tokens)`` returns the logits ``(E[tokens] * sqrt(D)) @ E^T``, (B, T) -> (B, T, V).

    Args:
        cls: the learner's class.
        task: task number printed on success.

    Raises:
        AssertionError: what differs, and the likely mistake.
    """
    __tracebackhide__ = True
    g = make_rng()
    vocab, d_model = 11, 6
    model = build_learner(cls, vocab, d_model)
    owner = f"{callable_name(cls)}({vocab}, {d_model})"
    embed, out = getattr(model, "embed", None), getattr(model, "out", None)
    if not isinstance(embed, nn.Embedding):
        raise AssertionError(f"{owner}.embed should be nn.Embedding({vocab}, {d_model}); got "
                             f"{type(embed).__name__ if embed is not None else 'nothing'}")
    if not isinstance(out, nn.Linear):
        raise AssertionError(f"{owner}.out should be nn.Linear({d_model}, {vocab}, bias=False); got "
                             f"{type(out).__name__ if out is not None else 'nothing'}")
    if tuple(out.weight.shape) != (vocab, d_model):
        raise AssertionError(f"{owner}.out.weight has shape {shape_text(out.weight)}; nn.Linear({d_model}, {vocab}) stores "
                             f"({vocab}, {d_model}), exactly the shape of the embedding table")
    if out.bias is not None:
        raise AssertionError(f"{owner}.out has a bias: build it with bias=False (the paper's projection is E^T alone)")
    if out.weight is not embed.weight:
        same = torch.equal(out.weight, embed.weight)
        raise AssertionError(
            f"{owner}.out.weight and {owner}.embed.weight are two different parameters"
            + (" that merely hold the same numbers now (a copy drifts apart in training)" if same else "")
            + ": tie them by assigning the parameter itself, self.out.weight = self.embed.weight."
        )
    n_params = sum(p.numel() for p in model.parameters())
    if n_params != vocab * d_model:
        raise AssertionError(f"{owner} has {n_params} parameters; a tied model has V * D = {vocab * d_model}: "
                             "one matrix, counted once, and nothing else")
    E = random_tensor(g, vocab, d_model, scale=0.4)
    embed.weight.copy_(E)
    for tokens in (torch.tensor([[3, 7, 10], [4, 4, 0]]), torch.tensor([[5]])):
        text = f"{owner}.forward(tokens {shape_text(tokens)})"
        logits = expect_tensor(call_learner(model, tokens, text=text), text, f"of shape {shape_text((*tokens.shape, vocab))}")
        expect_shape(logits, (*tokens.shape, vocab), text, "logits", {
            (*tokens.shape, d_model): "Those are the embedded vectors; the output layer turns them into V scores.",
        })
        x = E[tokens]  # (B, T, D)
        expected = (x * math.sqrt(d_model)) @ E.T  # (B, T, V)
        compare(logits, expected, text, "logits", [
            ("Scale the embedded tokens by sqrt(d_model) before the output layer, as the Transformer's embedding does.",
             lambda: x @ E.T),
            ("Return the scores (logits) themselves; the softmax belongs to the loss.",
             lambda: torch.softmax(expected, dim=-1)),
            ("Return the logits; log_softmax belongs to the loss.", lambda: torch.log_softmax(expected, dim=-1)),
        ])
    report_passed(task, f"tied embedding and output layer: one ({vocab}, {d_model}) parameter, logits for 2 batches")


def _skipgram_by_hand(W: Tensor, C: Tensor, centre: Tensor, context: Tensor, *, mean: bool = True,
                      sign: float = 1.0, overwrite: bool = False) -> tuple[Tensor, Tensor, Tensor]:
    scores = W[centre] @ C.T  # (N, V)
    n = centre.numel()
    loss = F.cross_entropy(scores, context, reduction="mean" if mean else "sum")
    d_scores = sign * (torch.softmax(scores, dim=-1) - F.one_hot(context, C.size(0)))  # (N, V)
    if mean:
        d_scores = d_scores / n
    grad_C = d_scores.T @ W[centre]  # (V, dim)
    grad_W = torch.zeros_like(W)
    rows = d_scores @ C  # (N, dim)
    if overwrite:
        grad_W[centre] = rows
    else:
        grad_W.index_add_(0, centre, rows)
    return loss, grad_W, grad_C


@isolated(avoid=("torch.autograd:grad", "torch.autograd:backward"),
          builds="the skip-gram's gradients by hand, from a softmax and matrix products",
          allow=(*MATMUL, *SOFTMAX, 'one_hot'))
def check_skipgram_gradients(fn: Callable[..., tuple[Tensor, Tensor, Tensor]], *,
                             task: int | str | None = None) -> None:
    """Check ``fn(W, C, centre, context) -> (loss, grad_W, grad_C)``: one skip-gram step by hand (lesson 01).

    scores = W[centre] C^T (N, V); loss = mean over the N pairs of the cross-entropy of the softmax
    with the context word; the gradients of that loss with respect to the word vectors W (V, dim)
    and the context vectors C (V, dim), computed without autograd. Compared with autograd.

    Args:
        fn: the learner's function.
        task: task number printed on success.

    Raises:
        AssertionError: what differs, and the likely mistake.
    """
    __tracebackhide__ = True
    g = make_rng()
    cases = [
        ("4 pairs, all centres different", torch.tensor([4, 5, 6, 7]), torch.tensor([5, 4, 8, 6])),
        ("a centre word repeated in 3 pairs", torch.tensor([4, 9, 4, 4, 6]), torch.tensor([5, 4, 7, 8, 4])),
        ("one pair", torch.tensor([8]), torch.tensor([5])),
    ]
    for case, centre, context in cases:
        W, C = random_tensor(g, 10, 3, scale=0.5), random_tensor(g, 10, 3, scale=0.5)
        args = (W, C, centre, context)
        text = call_text(fn, *args, names=("W", "C", "centre", "context")) + f" [{case}]"
        result = call_learner(fn, *args, text=text,
                              in_place="changed its inputs in place: return the gradients, do not update W or C")
        if isinstance(result, Tensor) or not isinstance(result, (tuple, list)) or len(result) != 3:
            raise AssertionError(f"{text} must return three things, (loss, grad_W, grad_C)")
        loss = torch.tensor(float(result[0])) if isinstance(result[0], (int, float)) else result[0]  # .item() is fine
        loss, grad_W, grad_C = (expect_tensor(r, text, f"as {n}")
                                for r, n in zip((loss, *result[1:]), ("the loss", "grad_W", "grad_C")))
        with torch.enable_grad():
            W_ = W.clone().requires_grad_(True)
            C_ = C.clone().requires_grad_(True)
            expected_loss = F.cross_entropy(W_[centre] @ C_.T, context)
            expected_W, expected_C = torch.autograd.grad(expected_loss, (W_, C_))
        expected_loss = expected_loss.detach()
        if loss.numel() != 1:
            raise AssertionError(f"{text}: the loss has shape {shape_text(loss)}; expected one number, the mean over the "
                                 f"{centre.numel()} pairs")
        compare(loss.reshape(()), expected_loss, text, "loss", [
            ("Average the cross-entropy over the pairs; you summed it.",
             lambda: _skipgram_by_hand(W, C, centre, context, mean=False)[0]),
            ("The loss is the cross-entropy of the softmax, -log p(context | centre); you left out the minus sign.",
             lambda: -expected_loss),
        ])
        expect_shape(grad_C, tuple(C.shape), text, "gradient grad_C",
                      {(C.size(1), C.size(0)): "grad_C has the shape of C, (V, dim): transpose it."})
        expect_shape(grad_W, tuple(W.shape), text, "gradient grad_W",
                      {(centre.numel(), W.size(1)): "grad_W has the shape of the whole table W, (V, dim): add each "
                                                    "pair's row into the row of its centre word (index_add_)."})
        grad_mistakes = [
            ("The gradient of the cross-entropy with respect to the scores is softmax - one_hot, not one_hot - "
             "softmax: check the sign.", {"sign": -1.0}),
            ("Divide the gradients by N, the number of pairs, as the loss is their mean.", {"mean": False}),
            ("A centre word that occurs in several pairs gets the SUM of their rows: grad_W[centre] = rows (or += "
             "rows, which does not add up repeated indices either) keeps only one of them; use "
             "grad_W.index_add_(0, centre, rows).", {"overwrite": True}),
        ]
        for index, what, given, expected in ((2, "grad_C", grad_C, expected_C), (1, "grad_W", grad_W, expected_W)):
            compare(given, expected, text, what, [
                (hint, lambda kw=kw, index=index: _skipgram_by_hand(W, C, centre, context, **kw)[index])
                for hint, kw in grad_mistakes
            ])
    report_passed(task, "skip-gram loss and gradients by hand, 3 batches (a repeated centre word, one pair), "
                  "equal to autograd")


Pair = tuple[str, str]
Words = dict[tuple[str, ...], int]

# The rules of BPE as the task states them; each usual mistake changes one of them (see _MISTAKES).
_RULES: dict[str, Any] = {"weighted": True, "overlapping": True, "merge": "left", "marker": True, "min_frequency": 2}


def _pair_counts(words: Words, *, weighted: bool = True, overlapping: bool = True, marker: bool = True,
                 **_: Any) -> Counter[Pair]:
    """The pairs of neighbouring symbols and how often they occur, counted by the given rules."""
    pairs: Counter[Pair] = Counter()
    for symbols, n in words.items():
        seen = list(zip(symbols, symbols[1:]))
        for pair in (seen if overlapping else dict.fromkeys(seen)):
            if marker or "▁" not in pair:
                pairs[pair] += n if weighted else 1
    return pairs


def _apply(words: Words, pair: Pair, *, merge: str = "left", **_: Any) -> Words:
    merged: Words = {}
    for symbols, n in words.items():
        new = _merge(symbols, pair, merge)
        merged[new] = merged.get(new, 0) + n
    return merged


def _bpe_variant(counts: dict[str, int], num_merges: int, *, ties: str = "ids", **rules: Any) -> list[Pair]:
    """BPE learned by ``rules`` (a usual mistake, or none) with one tie rule: a learner's answer, simulated.

    ``ties``: "ids" (the ``tokenizers`` trainer's rule, equal to ``learn_bpe``), "first" (the pair seen
    first, as ``Counter.most_common`` takes it) or "string" (the smallest pair as strings).
    """
    rules = {**_RULES, **rules}
    words: Words = {tuple(w): n for w, n in counts.items()}
    made: dict[str, int] = {}
    merges: list[Pair] = []
    while len(merges) < num_merges:
        pairs = _pair_counts(words, **rules)
        if not pairs:
            break
        if ties == "first":
            best = pairs.most_common(1)[0][0]
        elif ties == "string":
            best = min(pairs, key=lambda p: (-pairs[p], p))
        else:
            best = min(pairs, key=lambda p: (-pairs[p], *[_rank(s, made) for s in p]))
        if pairs[best] < rules["min_frequency"]:
            break
        merges.append(best)
        made.setdefault(best[0] + best[1], len(made))
        words = _apply(words, best, **rules)
    return merges


def _replay(counts: dict[str, int], num_merges: int, given: list[Pair], **rules: Any) -> str | None:
    """Why ``given`` is not a BPE of ``counts`` under ``rules`` (the task's by default), or None when it is one."""
    rules = {**_RULES, **rules}
    least = rules["min_frequency"]
    words: Words = {tuple(w): n for w, n in counts.items()}
    for k, pair in enumerate(given):
        pairs = _pair_counts(words, **rules)
        top = max(pairs.values(), default=0)
        right = f"merges 1 to {k} are right; " if k > 1 else "merge 1 is right; " if k == 1 else ""
        if k >= num_merges or top < least:
            why = (f"num_merges is {num_merges}" if k >= num_merges else
                   f"no pair occurs {least} times any more (the most frequent occurs {top} times)" if pairs else
                   "every word is a single symbol")
            return f"{right}BPE stops after {k} merges ({why}), but yours goes on with {pair}"
        if pairs.get(pair, 0) != top:
            best = sorted(p for p, n in pairs.items() if n == top)
            shown = ", ".join(map(str, best[:6])) + (", ..." if len(best) > 6 else "")
            counted = f"occurs {pairs[pair]} times" if pair in pairs else "does not occur"
            return (f"{right}merge {k + 1}, {pair}, {counted} at that step, but the most frequent "
                    f"{'pair occurs' if len(best) == 1 else 'pairs occur'} {top} times: {shown} "
                    "(each word's pairs counted with the word's count, overlapping pairs too)")
        words = _apply(words, pair, **rules)
    if len(given) < num_merges:
        pairs = _pair_counts(words, **rules)
        top = max(pairs.values(), default=0)
        if top >= least:
            best = min(p for p, n in pairs.items() if n == top)
            return (f"your list stops after {len(given)} merges, but BPE goes on: {best} still occurs {top} times; "
                    f"stop only after num_merges = {num_merges} merges, or when no pair occurs at least {least} times")
    return None


def _rank(symbol: str, made: dict[str, int]) -> tuple[int, Any]:
    if symbol in made:
        return (1, made[symbol])
    return (0, ord(symbol)) if len(symbol) == 1 else (2, symbol)  # (2, ...): a symbol only a mistake makes


def _merge(symbols: tuple[str, ...], pair: Pair, how: str) -> tuple[str, ...]:
    # The usual mistakes, played as learner code inside the check: the package's merge_pair would trip the
    # check's own "calls the ready-made piece" sentinel, so even the correct scan is written out here.
    a, b = pair
    if how == "text":  # replacing text, blind to where one symbol ends
        return tuple(" ".join(symbols).replace(f"{a} {b}", a + b).split(" "))
    seq = list(symbols) if how == "left" else list(reversed(symbols))
    first, second = (a, b) if how == "left" else (b, a)
    out, i = [], 0
    while i < len(seq):
        if i + 1 < len(seq) and seq[i] == first and seq[i + 1] == second:
            out.append(a + b)
            i += 2
        else:
            out.append(seq[i])
            i += 1
    return tuple(out if how == "left" else reversed(out))


_MISTAKES: list[tuple[str, dict[str, Any]]] = [
    ("Weight each word's pairs by the word's count: a word seen 5 times adds 5 to each of its pairs.",
     {"weighted": False}),
    ("Count every occurrence of a pair, overlapping ones too: the word 'a a a' holds the pair (a, a) twice.",
     {"overlapping": False}),
    ("Merge from left to right: with the pair (a, a), 'a a a' becomes 'aa a', not 'a aa'.", {"merge": "right"}),
    ("Merge whole symbols: replacing the text 'a b' in the joined word also matches the end of a longer "
     "symbol, as in 'xa b'; compare the symbols themselves, pair by pair.", {"merge": "text"}),
    ("The word-start marker ▁ is a character like any other: count and merge its pairs too ('▁' + 'a' -> '▁a').",
     {"marker": False}),
    ("Stop when the most frequent pair occurs fewer than 2 times, even before num_merges merges.",
     {"min_frequency": 1}),
]


def _cases() -> list[tuple[str, dict[str, int], int]]:
    rng = random.Random(SEED)
    drawn = []
    for k in range(3):
        counts: dict[str, int] = {}
        for _ in range(12):
            word = "▁" + "".join(rng.choice("aabcd") for _ in range(rng.randint(1, 6)))
            counts[word] = counts.get(word, 0) + rng.randint(1, 4)
        drawn.append((f"drawn corpus {k + 1} of 3", counts, 30))
    return [
        ("a tie at the first step (either pair will do)", {"▁ba": 2, "▁ab": 2, "▁cab": 1}, 3),
        ("ties between merged tokens", {"▁xyab": 3, "▁ab": 2, "▁xy": 2, "▁yz": 3}, 6),
        ("overlapping pairs", {"▁aaa": 4, "▁aaaa": 1, "▁aab": 2, "▁ba": 3}, 6),
        ("symbols that end like the pair", {"▁cab": 4, "▁ca": 6, "▁ab": 3, "▁abb": 2}, 6),
        ("weighted words", {"▁cd": 5, "▁ab": 1, "▁abx": 1, "▁aby": 1}, 2),
        ("a corpus that runs out of pairs", {"▁ab": 2, "▁cd": 1}, 5),
        *drawn,
    ]


def _as_merges(result: Any, text: str) -> list[Pair]:
    __tracebackhide__ = True
    if not isinstance(result, (list, tuple)):
        raise AssertionError(f"{text} returned {describe(result)}; expected a list of merges, each a pair of "
                             "strings such as ('a', 'b')")
    merges = []
    for k, m in enumerate(result):
        if not isinstance(m, (list, tuple)) or len(m) != 2 or not all(isinstance(s, str) for s in m):
            raise AssertionError(f"{text}: merge {k} is {m!r}; expected a pair of strings (left, right), "
                                 "such as ('a', 'b'), not the merged token 'ab'")
        merges.append((m[0], m[1]))
    return merges


@isolated(avoid=("minitransformer.data.bpe:learn_bpe", "minitransformer.data.bpe:merge_pair",
                  "minitransformer.data.bpe:count_pairs"),
          builds='the BPE merges from counts of pairs, in Python', allow=())
def check_bpe_merges(fn: Callable[[dict[str, int], int], list[Pair]], *, task: int | str | None = None) -> None:
    """Check ``fn(word_counts, num_merges) -> merges``: BPE merges learned by hand (lesson 01).

    ``word_counts`` maps each word (with its word-start marker, e.g. ``"▁cat"``) to its count. The
    merges are replayed on the words: each must be a most frequent pair of neighbouring symbols at its
    step (overlapping pairs counted, words weighted by their counts), merged left to right, and the
    list must stop after ``num_merges`` merges or once no pair occurs twice (``min_frequency=2``).
    Ties may be broken any way; :func:`minitransformer.data.learn_bpe` (and the ``tokenizers``
    trainer) is one answer. Corpora: six built around the usual mistakes and three drawn by the grader.

    Args:
        fn: the learner's function.
        task: task number printed on success.

    Raises:
        AssertionError: the first merge that is not a most frequent pair, and the likely mistake.
    """
    __tracebackhide__ = True
    for case, counts, num_merges in _cases():
        text = f"{callable_name(fn)}({counts!r}, {num_merges})" if len(counts) < 6 else \
            f"{callable_name(fn)}(<{len(counts)} words>, {num_merges}) [{case}]"
        given = _as_merges(call_learner(fn, dict(counts), num_merges, text=text), text)
        problem = _replay(counts, num_merges, given)
        if problem is None:
            continue
        for hint, wrong in _MISTAKES:
            if _replay(counts, num_merges, given, **wrong) is None:
                raise AssertionError(f"{text}: wrong merges {given}. {hint}")
        raise AssertionError(f"{text}: {problem}.")
    report_passed(task, f"BPE merges replayed on {len(_cases())} corpora, each a most frequent pair of its step (ties "
                  "broken any way): overlapping pairs, word counts, the marker, and 3 drawn corpora")
