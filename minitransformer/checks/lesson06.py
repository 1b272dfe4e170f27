"""Checks for exercises 03: target mask, label smoothing, greedy decoding (lessons 06 and 07)."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..config import TransformerConfig
from ..decoding import greedy_decode
from ..masks import make_causal_mask, make_padding_mask, make_target_mask
from ..model import Transformer
from ._common import (_call, _close, _compare, _expect_bool, _expect_shape, _expect_tensor, _isolated, _name, _passed,
                      _rand, _rng, _shape)

__all__ = ["check_greedy_decode", "check_label_smoothing_target", "check_target_mask"]


@_isolated(avoid=("minitransformer.masks:make_target_mask",))
def check_target_mask(fn: Callable[[Tensor, int], Tensor], *, task: int | str | None = None) -> None:
    """Check ``fn(tgt, pad_id)`` against :func:`make_target_mask`: padding & causal, bool (B, 1, T, T).

    Args:
        fn: the learner's function.
        task: task number printed on success.

    Raises:
        AssertionError: what differs, and the likely mistake.
    """
    __tracebackhide__ = True
    cases = [
        (torch.tensor([[1, 5, 6, 7, 0, 0], [1, 8, 9, 4, 5, 2]]), 0),
        (torch.tensor([[1, 5, 4, 4], [1, 4, 4, 4]]), 4),
        (torch.tensor([[1]]), 0),
    ]
    for tgt, pad_id in cases:
        text = f"{_name(fn)}(tgt {_shape(tgt)}, pad_id={pad_id})"
        mask = _expect_tensor(_call(fn, tgt, pad_id, text=text), text, "(the mask)")
        _expect_bool(mask, text)
        batch, length = tgt.shape
        _expect_shape(mask, (batch, 1, length, length), text, "mask", {
            (batch, length, length): "Keep the heads axis: (B, 1, T, T) broadcasts over the heads.",
            (1, 1, length, length): "The padding differs between sentences, so the mask has one (T, T) block per "
                                    "sentence: (B, 1, T, T).",
            (batch, 1, 1, length): "The causal part is missing: each query t may only see keys 0..t.",
        })
        expected = make_target_mask(tgt, pad_id)
        if torch.equal(mask, expected):
            continue
        pad, causal = make_padding_mask(tgt, pad_id), make_causal_mask(length)
        query_pad = (tgt != pad_id)[:, None, :, None] & causal
        hints = [
            (pad | causal, "Combine the two masks with & (and): a key must be a real token AND not in the future."),
            (causal.expand_as(expected), "Padding keys must be hidden too: combine the causal mask with the padding mask."),
            (pad.expand_as(expected), "The future must be hidden too: combine the padding mask with the causal mask."),
            (query_pad, "The padding mask hides keys, the columns: its shape is (B, 1, 1, T), not (B, 1, T, 1)."),
            (~expected, "True means 'may attend': your mask is inverted."),
        ]
        hint = next((h for wrong, h in hints if torch.equal(mask, wrong)),
                    f"expected for sentence 0\n{expected[0, 0].int()}\ngot\n{mask[0, 0].int()}")
        raise AssertionError(f"{text} gave the wrong mask. {hint}")
    _passed(task, "target mask, 3 batches (pad id 0 and 4, length 1)")


def _smoothed_targets_reference(target: Tensor, vocab_size: int, epsilon: float, pad_id: int) -> Tensor:
    """q(gold) = 1 - eps, q(pad) = 0, eps / (V - 2) elsewhere; all zeros where the target is padding."""
    q = torch.full((*target.shape, vocab_size), epsilon / (vocab_size - 2))
    q[..., pad_id] = 0.0
    q.scatter_(-1, target[..., None], 1.0 - epsilon)
    return q.masked_fill((target == pad_id)[..., None], 0.0)  # (B, T, V)


@_isolated(avoid=("minitransformer.training.loss:label_smoothed_nll", "minitransformer.training.loss:LabelSmoothingLoss"))
def check_label_smoothing_target(fn: Callable[[Tensor, int, float, int], Tensor], *,
                                 task: int | str | None = None) -> None:
    """Check ``fn(target, vocab_size, epsilon, pad_id) -> q`` (B, T, V), the label-smoothed targets of section 5.4.

    q(gold) = 1 - eps, q(pad) = 0, every other token eps / (V - 2), and a row of zeros where the
    target itself is padding. The cross-entropy with these targets must equal
    :func:`minitransformer.training.label_smoothed_nll`, which is checked too.

    Args:
        fn: the learner's function.
        task: task number printed on success.

    Raises:
        AssertionError: what differs, and the likely mistake.
    """
    __tracebackhide__ = True
    from ..training.loss import label_smoothed_nll

    g = _rng()
    cases = [
        (torch.tensor([[4, 5, 2, 0, 0], [5, 6, 6, 4, 2]]), 7, 0.1, 0),
        (torch.tensor([[2, 0, 4], [1, 1, 1]]), 5, 0.2, 1),
        (torch.tensor([[5, 4]]), 6, 0.0, 0),
    ]
    for target, vocab, eps, pad_id in cases:
        text = f"{_name(fn)}(target {_shape(target)}, vocab_size={vocab}, epsilon={eps}, pad_id={pad_id})"
        q = _expect_tensor(_call(fn, target, vocab, eps, pad_id, text=text), text, "of shape (B, T, V)")
        _expect_shape(q, (*target.shape, vocab), text, "q", {
            (target.numel(), vocab): "Keep the (B, T) axes: q is (B, T, V), one distribution per position.",
        })
        if not q.is_floating_point():
            raise AssertionError(f"{text} returned a {q.dtype} tensor; probabilities are floating-point numbers")
        expected = _smoothed_targets_reference(target, vocab, eps, pad_id)
        real = target != pad_id
        uniform = F.one_hot(target, vocab) * (1 - eps) + eps / vocab  # (B, T, V)
        if eps > 0 and _close(q[real], uniform[real], 1e-5, 1e-4):
            raise AssertionError(
                f"{text}: that is F.cross_entropy's label_smoothing (eps spread over all V tokens, gold and pad "
                "included). Here the gold token gets exactly 1 - eps, padding 0, and each of the other V - 2 "
                "tokens eps / (V - 2)."
            )
        sums = q.sum(-1)
        if not torch.allclose(sums[real], torch.ones_like(sums[real]), atol=1e-5):
            b, t = (int(i) for i in real.nonzero()[((sums[real] - 1).abs() > 1e-5).nonzero()[0, 0]])
            raise AssertionError(
                f"{text}: the distribution of position ({b}, {t}) sums to {sums[b, t].item():.4f}, not 1. The gold "
                "token gets 1 - eps, padding 0, and the eps left is shared by the V - 2 other tokens."
            )
        if (q[~real] != 0).any():
            raise AssertionError(f"{text}: a position whose target is padding counts for nothing: its row of q "
                                 "must be all zeros.")
        if (q[..., pad_id] != 0).any():
            raise AssertionError(f"{text}: padding is never a correct next token, so column pad_id={pad_id} of q "
                                 "must be 0.")
        _compare(q, expected, text, "q", [
            ("The gold token gets exactly 1 - eps.", lambda: _smoothed_targets_reference(target, vocab, 0.0, pad_id)),
        ])
        logits = _rand(g, *target.shape, vocab)
        ours = -(q * torch.log_softmax(logits, dim=-1)).sum()
        assert torch.allclose(ours, label_smoothed_nll(logits, target, eps, pad_id)[0], atol=1e-4), (
            f"{text}: the cross-entropy -sum q log p with your q differs from label_smoothed_nll"
        )
    _passed(task, "label-smoothed targets, 3 batches (eps 0.1, 0.2 and 0, pad id 0 and 1); "
                  "their cross-entropy equals label_smoothed_nll")


def _greedy_by_hand(model: Transformer, src: Tensor, max_len: int, bos_id: int, eos_id: int, *,
                    first_position: bool = False, pass_src_mask: bool = True, stop: bool = True,
                    pad_after_end: bool = True) -> Tensor:
    """Greedy decoding with one of the usual mistakes switched on (all off = :func:`greedy_decode`)."""
    pad_id = model.config.pad_id
    src_mask = make_padding_mask(src, pad_id)
    memory = model.encode(src, src_mask)
    ys = torch.full((src.size(0), 1), bos_id, dtype=torch.long)
    finished = torch.zeros(src.size(0), dtype=torch.bool)
    for _ in range(max_len):
        hidden = model.decode(ys, memory, src_mask if pass_src_mask else None)  # (B, t, D)
        token = model.generator(hidden[:, 0 if first_position else -1]).argmax(-1)  # (B,)
        if pad_after_end:
            token = token.masked_fill(finished, pad_id)
        ys = torch.cat([ys, token[:, None]], dim=1)
        finished |= token == eos_id
        if stop and bool(finished.all()):
            break
    return ys


@torch.no_grad()
def _decoding_model(seed: int) -> Transformer:
    """A small random model whose greedy outputs depend on the source (tokens 0-3 are pad, bos, eos, unk)."""
    torch.manual_seed(seed)
    # Xavier: the random draws (and so the check's cases) stay those the check was written with.
    config = TransformerConfig.tiny(11, d_model=16, n_heads=2, d_ff=32, n_encoder_layers=1, n_decoder_layers=1,
                                    dropout=0.0, tie_embeddings=False, embedding_init="xavier")
    model = Transformer(config).eval()
    for p in model.parameters():
        if p.dim() > 1:
            p.normal_(0.0, 0.5)
    # A trained model never predicts padding or the start token; this one must not either.
    model.generator = nn.Linear(config.d_model, config.tgt_vocab_size)
    model.generator.weight.normal_(0.0, 0.5)
    model.generator.bias.zero_()
    model.generator.bias[[config.pad_id, 1]] = -1e4
    return model


def _end_rows(out: Tensor, eos_id: int) -> list[int | None]:
    return [row.index(eos_id) if eos_id in row else None for row in out.tolist()]


@_isolated(avoid=("minitransformer.decoding:greedy_decode", "minitransformer.decoding:beam_search"),
           serve=("minitransformer.masks:make_target_mask",))  # the model's decode builds its target mask
def check_greedy_decode(fn: Callable[..., Tensor], *, task: int | str | None = None,
                        seeds: Sequence[int] = (0, 1, 2)) -> None:
    """Check ``fn(model, src, max_len, bos_id, eos_id) -> (B, 1 + L)`` against :func:`greedy_decode`.

    The tokens start with ``bos_id``; each sentence stops at its own ``eos_id`` and is padded with
    ``model.config.pad_id`` after it; the loop ends when all have ended or after ``max_len`` new
    tokens (lesson 06). Small random models with several end-token choices are used, so that
    sentences end at different steps, all end early, or none ends.

    Args:
        fn: the learner's function.
        task: task number printed on success.
        seeds: the seeds of the small random models decoded (the grader's hidden tests use others).

    Raises:
        AssertionError: what differs, and the likely mistake.
    """
    __tracebackhide__ = True
    g = _rng()
    bos, max_len = 1, 7
    n_cases = 0
    for seed in seeds:
        model = _decoding_model(seed)
        src = torch.randint(4, 11, (6, 5), generator=g)  # 0-3: <pad> <bos> <eos> <unk>
        src[3:, 3:] = model.config.pad_id  # three shorter sentences, padded
        # End tokens that make the references differ: ends at different steps, all early, never.
        endings: dict[str, int] = {}
        for eos in (2, *range(4, 11)):
            ends = _end_rows(greedy_decode(model, src, max_len, bos, eos, use_cache=False), eos)
            if None in ends and len(set(ends)) > 1:
                endings.setdefault("some sentences end, at different steps, others never", eos)
            elif None not in ends:
                endings.setdefault("every sentence ends early", eos)
            elif all(e is None for e in ends):
                endings.setdefault("no sentence ends", eos)
        for case, eos in endings.items():
            n_cases += 1
            for rows in (slice(0, 1), slice(None)):  # one sentence first, then the batch
                batch = src[rows]
                text = (f"{_name(fn)}(model, src {_shape(batch)}, max_len={max_len}, bos_id={bos}, eos_id={eos}) "
                        f"[{case}]")
                out = _expect_tensor(_call(fn, model, batch, max_len, bos, eos, text=text), text, "of token ids")
                expected = greedy_decode(model, batch, max_len, bos, eos, use_cache=False)
                if out.dim() != 2 or out.size(0) != batch.size(0):
                    raise AssertionError(f"{text} returned shape {_shape(out)}; expected (B, 1 + L) = "
                                         f"({batch.size(0)}, 1 + L), one row of token ids per sentence")
                if not bool((out[:, 0] == bos).all()):
                    raise AssertionError(f"{text}: every row must start with the start token bos_id={bos}, "
                                         f"got first column {out[:, 0].tolist()}")

                def wrong(**kw: Any) -> Callable[[], Tensor]:
                    return lambda: _greedy_by_hand(model, batch, max_len, bos, eos, **kw)

                if out.shape != expected.shape or not torch.equal(out, expected):
                    for hint, make in [
                        ("The next token comes from the decoder's output at the LAST position, "
                         "hidden[:, -1], not the first.", wrong(first_position=True)),
                        ("Pass the source padding mask to model.decode as src_mask, so that the cross-attention "
                         "ignores the source's padding.", wrong(pass_src_mask=False)),
                        ("Stop as soon as every sentence has produced eos_id.", wrong(stop=False)),
                        (f"After a sentence's end token, fill its row with the pad id "
                         f"(model.config.pad_id = {model.config.pad_id}).", wrong(pad_after_end=False)),
                    ]:
                        wrong_out = make()
                        if out.shape == wrong_out.shape and torch.equal(out.long(), wrong_out):
                            raise AssertionError(f"{text}: {hint}")
                    raise AssertionError(f"{text}: expected\n{expected.tolist()}\ngot\n{out.tolist()}")
    _passed(task, f"greedy decoding, {n_cases} cases on {len(seeds)} small models (one sentence and a padded batch each)")
