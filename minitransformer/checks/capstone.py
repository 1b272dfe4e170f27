"""Checks for exercise 11, the capstone: the learner's own Transformer, its training loop, and a trained model.

The learner builds the encoder-decoder model from their own pieces and writes the training loop; the
checks hold both against the package (same weights: same logits; same start and data: same losses), run
the two sanity checks of a practitioner (the loss at initialisation, one batch overfitted), and decode the
held-out test dates with the trained model to measure its exact match. None of them needs the package's
model or loop in the learner's code: those are what the tasks replace, and the checks refuse them.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import torch
from torch import Tensor, nn

from ..config import TransformerConfig
from ..data.batching import collate_pairs
from ..model import Transformer
from ..training.loss import label_smoothed_nll
from ..training.schedule import transformer_scheduler
from ..training.step import paper_adam, train_step
from .compare import (as_number, build_learner, call_learner, call_text, callable_name, describe, expect_shape,
                      expect_tensor, fill_parameters, isolated, make_rng, report_passed, shape_text)

__all__ = ["check_capstone_loss", "check_capstone_model", "check_capstone_run", "check_capstone_training",
           "check_initial_loss", "check_overfit_one_batch"]

PAD, BOS, EOS = 0, 1, 2  # the ids of SharedTokenizer's special tokens (unk is 3)
#: The exact match on the held-out test dates that the trained model must reach (task 5).
TARGET = 0.95

# The package's and PyTorch's ready-made pieces: the model must be made of the learner's own.
MODEL_PIECES = (
    "minitransformer.model:Transformer", "minitransformer.model:Encoder", "minitransformer.model:Decoder",
    "minitransformer.layers:EncoderLayer", "minitransformer.layers:DecoderLayer", "minitransformer.layers:LayerNorm",
    "minitransformer.layers:PositionwiseFeedForward", "minitransformer.attention:MultiHeadAttention",
    "minitransformer.attention:scaled_dot_product_attention", "minitransformer.embeddings:TokenEmbedding",
    "minitransformer.embeddings:PositionalEncoding", "minitransformer.embeddings:sinusoidal_positional_encoding",
    "minitransformer.masks:make_padding_mask", "minitransformer.masks:make_target_mask",
    "minitransformer.masks:make_causal_mask",
    "torch.nn:Transformer", "torch.nn:TransformerEncoder", "torch.nn:TransformerDecoder",
    "torch.nn:TransformerEncoderLayer", "torch.nn:TransformerDecoderLayer", "torch.nn:MultiheadAttention",
    "torch.nn:LayerNorm", "torch.nn.functional:layer_norm", "torch.nn.functional:scaled_dot_product_attention",
    "torch.nn.functional:multi_head_attention_forward",
)
# ... and the loop must be the learner's: batches, loss, schedule, step.
LOOP_PIECES = (
    "minitransformer.training.step:train_step", "minitransformer.training.step:paper_adam",
    "minitransformer.training.loss:label_smoothed_nll", "minitransformer.training.loss:LabelSmoothingLoss",
    "minitransformer.training.schedule:transformer_lr", "minitransformer.training.schedule:transformer_scheduler",
    "minitransformer.data.batching:collate_pairs",
)

# The learner's model is built as cls(vocab_size, d_model, n_heads, d_ff, n_layers).
_SIZES = dict(vocab_size=23, d_model=32, n_heads=4, d_ff=64, n_layers=2)


def _reference(seed: int, vocab_size: int = _SIZES["vocab_size"]) -> Transformer:
    """The package's model of the sizes the checks build, freshly initialised from ``seed``."""
    torch.manual_seed(seed)
    s = _SIZES
    config = TransformerConfig.tiny(vocab_size, d_model=s["d_model"], n_heads=s["n_heads"], d_ff=s["d_ff"],
                                    n_encoder_layers=s["n_layers"], n_decoder_layers=s["n_layers"], dropout=0.0)
    return Transformer(config)


def _build(cls: type[nn.Module], vocab_size: int = _SIZES["vocab_size"]) -> tuple[nn.Module, str]:
    s = _SIZES
    args = (vocab_size, s["d_model"], s["n_heads"], s["d_ff"], s["n_layers"])
    return build_learner(cls, *args), call_text(cls, *args)


def _load_package_weights(mine: nn.Module, ref: Transformer, owner: str) -> None:
    """Copy the package's weights into the learner's model, matching the parameters by name.

    The names are the package's (``encoder.layers.0.self_attn.w_q.weight``...); the three tied
    matrices (``src_embed.embedding.weight``, ``tgt_embed.embedding.weight``, ``generator.weight``)
    must be one parameter in the learner's model too.
    """
    __tracebackhide__ = True
    theirs = ref.state_dict()  # every name, the tied matrix under its three names
    own = dict(mine.named_parameters(remove_duplicate=False))
    missing = [n for n in theirs if n not in own]
    if missing:
        have = sorted(own)
        raise AssertionError(
            f"{owner} has no parameter {', '.join(missing[:3])}{' ...' if len(missing) > 3 else ''} "
            f"({len(missing)} of the package's {len(theirs)} names are missing). Name the parts as the table of "
            "task 1 says, so that the package's weights can be copied in by name. Yours are: "
            f"{', '.join(have[:8]) or 'none'}{' ...' if len(have) > 8 else ''}"
        )
    extra = [n for n in own if n not in theirs]
    if extra:
        raise AssertionError(f"{owner} has parameters the package's model does not have: {', '.join(extra[:4])}"
                             f"{' ...' if len(extra) > 4 else ''}. The paper's output layer has no bias, and "
                             "the positional encoding is a fixed table, not a parameter (register_buffer).")
    for name, tensor in theirs.items():
        if tuple(own[name].shape) != tuple(tensor.shape):
            hint = " (nn.Linear(in, out) stores its weight as (out, in))" \
                if own[name].dim() == 2 and tuple(own[name].shape) == tuple(tensor.shape)[::-1] else ""
            raise AssertionError(f"{owner}: parameter {name} has shape {shape_text(own[name])} but the package's "
                                 f"has {shape_text(tensor)}{hint}")
    tied = ("src_embed.embedding.weight", "tgt_embed.embedding.weight", "generator.weight")
    if not (own[tied[0]] is own[tied[1]] is own[tied[2]]):
        raise AssertionError(
            f"{owner}: {', '.join(tied)} are separate parameters. The paper shares one (V, D) weight matrix "
            "between the two embeddings and the output layer (section 3.4): make the three names one parameter."
        )
    with torch.no_grad():
        for name, tensor in theirs.items():
            own[name].copy_(tensor)


def _pairs(g: torch.Generator, n: int, vocab_size: int, shortest: int = 2, longest: int = 8) -> list[tuple[list[int], list[int]]]:
    """``n`` random (source ids, target ids) pairs, each side ending with eos, no special token inside."""
    def side() -> list[int]:
        length = int(torch.randint(shortest, longest + 1, (), generator=g))
        return [*torch.randint(4, vocab_size, (length,), generator=g).tolist(), EOS]

    return [(side(), side()) for _ in range(n)]


def _by_hand(ref: Transformer, src: Tensor, tgt_in: Tensor, *, scale: bool = True, positions: str = "both",
             pe: Tensor | None = None, cross_mask: bool = True, causal: bool = True, scale_after: bool = False) -> Tensor:
    """The package's logits computed from its parts, with the switches turning on the usual mistakes."""
    d_model = ref.config.d_model
    table = ref.positional.pe if pe is None else pe

    def embed(embedder: nn.Module, ids: Tensor, add: bool) -> Tensor:
        x = embedder.embedding(ids)
        if scale_after:
            return (x + table[: ids.size(1)]) * math.sqrt(d_model)
        x = x * (math.sqrt(d_model) if scale else 1.0)
        return x + table[: ids.size(1)] if add else x

    src_mask = (src != PAD)[:, None, None, :]  # (B, 1, 1, S)
    length = tgt_in.size(1)
    tgt_mask = (tgt_in != PAD)[:, None, None, :]  # (B, 1, 1, T)
    if causal:
        tgt_mask = tgt_mask & torch.ones(length, length, dtype=torch.bool).tril()  # (B, 1, T, T)
    memory = ref.encoder(embed(ref.src_embed, src, positions in ("both", "src")), src_mask)
    y = ref.decoder(embed(ref.tgt_embed, tgt_in, positions in ("both", "tgt")), memory,
                    src_mask if cross_mask else None, tgt_mask)
    return ref.generator(y)  # (B, T, V)


def _logits(model: nn.Module, src: Tensor, tgt_in: Tensor, owner: str, vocab_size: int) -> Tensor:
    __tracebackhide__ = True
    text = f"{owner}.forward(src {shape_text(src)}, tgt_in {shape_text(tgt_in)})"
    out = call_learner(model, src, tgt_in, text=text)
    out = expect_tensor(out[0] if isinstance(out, (tuple, list)) and out else out, text, "of logits (B, T, V)")
    expect_shape(out, (*tgt_in.shape, vocab_size), text, "logits", {
        (*src.shape, vocab_size): "The logits have one row per TARGET position: the decoder's queries come from tgt_in.",
        (*tgt_in.shape, _SIZES["d_model"]): "Apply the output layer (generator) to the decoder's output: logits "
                                            "have one score per vocabulary entry.",
    })
    return out


def _model_batch() -> tuple[Tensor, Tensor]:
    """Three source and target rows with padding of different lengths (ids 4..22 are words)."""
    src = torch.tensor([[5, 9, 12, 7, 2, 0, 0], [8, 4, 2, 0, 0, 0, 0], [13, 6, 17, 21, 10, 11, 2]])
    tgt_in = torch.tensor([[1, 14, 6, 9, 0, 0], [1, 19, 7, 8, 22, 5], [1, 4, 0, 0, 0, 0]])
    return src, tgt_in


@isolated(avoid=MODEL_PIECES)
def check_capstone_model(cls: type[nn.Module], *, task: int | str | None = None) -> None:
    """Check the learner's whole encoder-decoder model against the package's :class:`Transformer`.

    ``cls(vocab_size, d_model, n_heads, d_ff, n_layers)`` must hold the package's parameter names
    (so its weights can be copied in by name, the three (V, D) matrices tied) and ``forward(src,
    tgt_in)`` must return the logits (B, T, V) with the padding and causal masks built inside. The
    check copies a random set of the package's weights (every bias and LayerNorm gain nonzero)
    into it and compares the logits on a padded batch; it also checks that changing later target
    tokens, or adding padding to the source, leaves the other logits unchanged.
    """
    __tracebackhide__ = True
    vocab = _SIZES["vocab_size"]
    mine, owner = _build(cls)
    ref = _reference(0).eval()
    fill_parameters(ref, make_rng())
    _load_package_weights(mine, ref, owner)
    src, tgt_in = _model_batch()
    got = _logits(mine, src, tgt_in, owner, vocab)
    real = tgt_in != PAD  # (B, T): padding positions of the target count for nothing
    if not torch.isfinite(got[real]).all():
        raise AssertionError(f"{owner}: the logits hold NaN or inf. A query whose keys are ALL hidden gets a row of "
                             "NaN weights: hide padding keys only (a mask (B, 1, 1, S)), not the padding queries' rows.")
    # Causality: a position's logits may not depend on later target tokens.
    later = tgt_in.clone()
    later[1, 3:] = torch.tensor([9, 10, 11])
    changed = _logits(mine, src, later, owner, vocab)
    if not torch.allclose(changed[1, :3], got[1, :3], atol=1e-5, rtol=1e-4):
        raise AssertionError(f"{owner}: changing target tokens 3-5 of a sentence changed the logits of positions "
                             "0-2: the decoder's self-attention sees the future. Combine the padding mask of tgt_in "
                             "with the causal (lower-triangular) mask.")
    # Source padding: more padding columns may not change anything.
    padded = torch.cat([src, torch.zeros(3, 2, dtype=src.dtype)], dim=1)
    wider = _logits(mine, padded, tgt_in, owner, vocab)
    if not torch.allclose(wider[real], got[real], atol=1e-5, rtol=1e-4):
        raise AssertionError(f"{owner}: adding two padding tokens to each source sentence changed the logits: padding "
                             "keys are attended. Hide them with the source's padding mask, in the encoder's "
                             "self-attention and in the decoder's cross-attention.")
    expected = ref(src, tgt_in)
    if torch.allclose(got[real], expected[real], atol=1e-4, rtol=1e-4):
        report_passed(task, "your model equals the package's Transformer with its weights copied in (2+2 layers, "
                            "tied embeddings, a padded batch); causal, and blind to source padding")
        return
    swapped = ref.positional.pe.clone()
    swapped[:, 0::2], swapped[:, 1::2] = ref.positional.pe[:, 1::2], ref.positional.pe[:, 0::2]
    mistakes = [
        ("Multiply the token embeddings by sqrt(d_model) (section 3.4) before adding the positions.",
         lambda: _by_hand(ref, src, tgt_in, scale=False)),
        ("Scale the embeddings by sqrt(d_model) BEFORE adding the positional encoding, not the sum.",
         lambda: _by_hand(ref, src, tgt_in, scale_after=True)),
        ("Add the positional encoding to the embedded source and target.",
         lambda: _by_hand(ref, src, tgt_in, positions="none")),
        ("Add the positional encoding to the embedded target as well as to the source.",
         lambda: _by_hand(ref, src, tgt_in, positions="src")),
        ("Sines go in the even columns (0, 2, ...) and cosines in the odd ones: yours are swapped.",
         lambda: _by_hand(ref, src, tgt_in, pe=swapped)),
        ("The decoder's cross-attention must hide the source's padding too: pass the source padding mask to it.",
         lambda: _by_hand(ref, src, tgt_in, cross_mask=False)),
    ]
    for hint, wrong in mistakes:
        if torch.allclose(got[real], wrong()[real], atol=1e-4, rtol=1e-4):
            raise AssertionError(f"{owner}: wrong logits. {hint}")
    bad = (~torch.isclose(got[real], expected[real], atol=1e-4, rtol=1e-4)).sum().item()
    raise AssertionError(
        f"{owner}: with the package's weights copied in, {bad} of {expected[real].numel()} logits differ from the "
        "package's Transformer (largest difference "
        f"{(got[real] - expected[real]).abs().max().item():.3g}). Check each piece against its exercise (03 attention, "
        "04 multi-head, 05 LayerNorm, feed-forward and encoder layer, 06 masks and decoder layer), and the post-LN "
        "wiring: x = LayerNorm(x + Sublayer(x))."
    )


@isolated(avoid=("minitransformer.training.loss:label_smoothed_nll", "minitransformer.training.loss:LabelSmoothingLoss"))
def check_capstone_loss(fn: Callable[[Tensor, Tensor, float, int], Any], *, task: int | str | None = None) -> None:
    """Check ``fn(logits, target, epsilon, pad_id) -> loss``: the label-smoothed loss per target token.

    The mean over the non-padding target positions of -sum_v q(v) log p(v), with q of section 5.4 as
    in exercise 07 (1 - eps on the gold token, 0 on padding, eps / (V - 2) elsewhere): the package's
    ``label_smoothed_nll(logits, target, epsilon, pad_id)[0]`` divided by the number of real tokens.
    """
    __tracebackhide__ = True
    g = make_rng()
    target = torch.tensor([[5, 9, 7, 2, 0], [6, 4, 2, 0, 0], [8, 8, 10, 11, 2]])
    for epsilon, pad_id in ((0.1, 0), (0.0, 0), (0.2, 0)):
        logits = torch.randn(3, 5, 13, generator=g) * 2.0
        text = f"{callable_name(fn)}(logits {shape_text(logits)}, target {shape_text(target)}, epsilon={epsilon}, " \
               f"pad_id={pad_id})"
        got = as_number(call_learner(fn, logits, target, epsilon, pad_id, text=text), text,
                        "the loss per target token, a one-element tensor")
        total, nll, count = label_smoothed_nll(logits, target, epsilon, pad_id)
        expected = (total / count).item()
        if math.isclose(got, expected, rel_tol=1e-4, abs_tol=1e-5):
            continue
        log_p = torch.log_softmax(logits, dim=-1)
        real = target != pad_id
        gold = -log_p.gather(-1, target[..., None]).squeeze(-1)  # (B, T)
        uniform = -log_p.mean(-1)  # (B, T): eps spread over all V tokens
        candidates = [
            (total.item(), "Return the MEAN over the real target tokens, not the sum: the losses of batches of "
                           "different sizes must be comparable."),
            (((1 - epsilon) * gold + epsilon * uniform)[real].mean().item(),
             "That is F.cross_entropy's label_smoothing, which spreads eps over all V tokens, gold and padding "
             "included. Here the gold token gets 1 - eps, padding 0 and each of the V - 2 others eps / (V - 2)."),
            (((1 - epsilon) * gold + epsilon * uniform).mean().item() if epsilon else gold.mean().item(),
             "Leave the padding positions out of the mean: their targets are not words."),
            (nll.item() / count.item(), "Smooth the targets: with epsilon > 0 the gold token gets 1 - eps only."),
        ]
        hint = next((h for value, h in candidates if math.isclose(got, value, rel_tol=1e-4, abs_tol=1e-5)), "")
        if epsilon == 0 and not hint and math.isclose(got, gold.mean().item(), rel_tol=1e-4):
            hint = "Leave the padding positions out of the mean: their targets are not words."
        raise AssertionError(f"{text} returned {got:.5f}; expected {expected:.5f}." + (f" {hint}" if hint else ""))
    report_passed(task, "label-smoothed loss per target token, 3 cases (eps 0.1, 0 and 0.2, padding left out), "
                        "equal to the package's")


@isolated(avoid=MODEL_PIECES)
def check_initial_loss(cls: type[nn.Module], expected_fn: Callable[[int], Any], *,
                       task: int | str | None = None) -> None:
    """Check ``expected_fn(vocab_size)``, the loss a model that knows nothing should have, and the learner's model at it.

    A model that gives every one of the V tokens the same probability 1/V has the loss ln V per
    token, smoothed or not (the target distribution q sums to 1). A freshly built model of the
    learner's (its own initialisation) must start within 20% of that on a batch of random pairs:
    much higher means the initial logits are far from uniform (embeddings drawn too wide, and
    with tied weights the output layer with them).
    """
    __tracebackhide__ = True
    for vocab in (23, 248, 1000):
        text = f"{callable_name(expected_fn)}({vocab})"
        got = as_number(call_learner(expected_fn, vocab, text=text), text, "the expected loss, a number")
        if math.isclose(got, math.log(vocab), rel_tol=1e-6):
            continue
        hints = {math.log2(vocab): "Natural logarithm: the loss is computed with log_softmax, in nats.",
                 1.0 / vocab: "That is the probability of each token; the loss is its negative logarithm.",
                 -math.log(vocab): "The loss is -log p, positive.", float(vocab): "The loss is -log(1/V)."}
        hint = next((h for v, h in hints.items() if math.isclose(got, v, rel_tol=1e-6)), "")
        raise AssertionError(f"{text} returned {got:.5g}; a model that gives every one of the {vocab} tokens the same "
                             "probability has a loss of " + f"{math.log(vocab):.5g} per token." + (f" {hint}" if hint else ""))
    vocab = 248  # the dates' vocabulary
    mine, owner = _build(cls, vocab)
    g = make_rng()
    batch = collate_pairs(_pairs(g, 32, vocab, 6, 12), PAD, BOS, EOS)
    logits = _logits(mine, batch.src, batch.tgt_in, owner, vocab)
    total, _, count = label_smoothed_nll(logits, batch.tgt_out, 0.1, PAD)
    loss, expected = (total / count).item(), math.log(vocab)
    if not math.isfinite(loss) or abs(loss - expected) > 0.2 * expected:
        spread = logits[batch.tgt_in != PAD].std().item()
        raise AssertionError(
            f"A freshly built {owner} has a label-smoothed loss of {loss:.3f} per token on random pairs, but a model "
            f"that knows nothing should be near ln {vocab} = {expected:.3f}: its logits have a spread of {spread:.2f}, "
            "so it is confidently wrong from the start. Look at how your embedding table is initialised: it is "
            "multiplied by sqrt(d_model) and, tied, it is also the output layer."
        )
    report_passed(task, f"expected loss ln V; a fresh model starts at {loss:.2f} per token, near ln {vocab} = "
                        f"{expected:.2f}")


def _train_learner(fn: Callable[..., Any], model: nn.Module, batches: list[list[tuple[list[int], list[int]]]],
                   settings: dict[str, Any], text: str) -> list[float]:
    """Run the learner's training loop on ``batches``; its per-step losses as floats."""
    __tracebackhide__ = True

    def run(m: nn.Module, b: Any) -> Any:
        with torch.enable_grad():
            return fn(m, b, **settings)

    losses = call_learner(run, model, batches, text=text)
    if isinstance(losses, Tensor):
        losses = losses.tolist()
    if not isinstance(losses, (list, tuple)) or len(losses) != len(batches):
        raise AssertionError(f"{text} returned {describe(losses)[:80]}; expected a list of {len(batches)} losses, one "
                             "per batch (one optimiser step each)")
    return [as_number(x, text, "a list of losses, numbers") for x in losses]


def _reference_losses(ref: Transformer, batches: list[list[tuple[list[int], list[int]]]], d_model: int, warmup: int,
                      lr_factor: float, label_smoothing: float, *, off_by_one: bool = False, no_zero_grad: bool = False,
                      betas: tuple[float, float] = (0.9, 0.98), eps: float = 1e-9) -> list[float]:
    """The package's own loop (paper_adam, the warm-up schedule, train_step): the loss per target token of each step."""
    losses = []
    with torch.enable_grad():
        if betas == (0.9, 0.98) and eps == 1e-9:
            optimizer = paper_adam(ref.parameters(), torch.device("cpu"))
        else:
            optimizer = torch.optim.Adam(ref.parameters(), lr=1.0, betas=betas, eps=eps)
        scheduler = transformer_scheduler(optimizer, d_model, warmup, lr_factor)
        if off_by_one:  # the rate of step k given to update k + 1
            scheduler.lr_lambdas[0] = (lambda f: lambda i: f(i - 1) if i > 0 else 0.0)(scheduler.lr_lambdas[0])
            for group in optimizer.param_groups:
                group["lr"] = 0.0
        for pairs in batches:
            batch = collate_pairs(pairs, PAD, BOS, EOS)
            if no_zero_grad:
                logits = ref(batch.src, batch.tgt_in)
                total, _, count = label_smoothed_nll(logits, batch.tgt_out, label_smoothing, PAD)
                (total / count).backward()
                optimizer.step()
                scheduler.step()
                losses.append((total / count).item())
                continue
            total, _, _ = train_step(ref, [batch], optimizer, scale=1.0 / batch.n_tgt_tokens,
                                     label_smoothing=label_smoothing, pad_id=PAD, scheduler=scheduler)
            losses.append(total.item() / batch.n_tgt_tokens)
    return losses


def _check_collate(fn: Callable[..., Any]) -> None:
    __tracebackhide__ = True
    g = make_rng()
    for pairs in (_pairs(g, 4, 23), [([5, 6, EOS], [7, EOS])], _pairs(g, 3, 23, 1, 3)):
        text = f"{callable_name(fn)}({len(pairs)} pairs)"
        out = call_learner(fn, pairs, text=text)
        if not isinstance(out, (tuple, list)) or len(out) != 3 or not all(isinstance(t, Tensor) for t in out):
            raise AssertionError(f"{text} returned {describe(out)[:80]}; expected three tensors (src, tgt_in, tgt_out)")
        batch = collate_pairs(pairs, PAD, BOS, EOS)
        for name, got, expected in zip(("src", "tgt_in", "tgt_out"), out, (batch.src, batch.tgt_in, batch.tgt_out)):
            expect_shape(got, expected.shape, text, name)
            if got.dtype != torch.int64:
                raise AssertionError(f"{text}: {name} is {str(got.dtype).replace('torch.', '')}; token ids are int64 "
                                     "(torch.long), the type nn.Embedding takes")
            if torch.equal(got, expected):
                continue
            hint = ""
            if name == "tgt_in" and torch.equal(got, batch.tgt_out):
                hint = " The decoder's input is the target shifted right: bos, then every target token but the last (eos)."
            elif name == "tgt_out" and torch.equal(got, batch.tgt_in):
                hint = " tgt_out is what the decoder must predict: the target ids as given, ending with eos."
            raise AssertionError(f"{text}: {name} is {got.tolist()}; expected {expected.tolist()}.{hint}")


@isolated(avoid=(*MODEL_PIECES, *LOOP_PIECES))
def check_capstone_training(cls: type[nn.Module], collate: Callable[..., Any], train: Callable[..., Any], *,
                            task: int | str | None = None) -> None:
    """Check the learner's batches and training loop against the package's ``train_step`` from the same start.

    ``collate(pairs)`` must give ``(src, tgt_in, tgt_out)`` as ``collate_pairs`` does; then the package's
    model is initialised from a seed, its weights copied into the learner's model, and both are trained
    on the same six batches in the same order: the package's with ``paper_adam``, the warm-up schedule and
    ``train_step``, the learner's with ``train(model, batches, d_model=..., warmup=..., lr_factor=...,
    label_smoothing=...)``. The losses per target token of the six steps must agree.
    """
    __tracebackhide__ = True
    _check_collate(collate)
    g = make_rng()
    batches = [_pairs(g, 6, _SIZES["vocab_size"]) for _ in range(6)]
    settings = dict(d_model=_SIZES["d_model"], warmup=4, lr_factor=0.5, label_smoothing=0.1)
    mine, owner = _build(cls)
    ref = _reference(1)
    start = {n: p.clone() for n, p in ref.state_dict().items()}
    _load_package_weights(mine, ref, owner)
    probe = collate_pairs(batches[0], PAD, BOS, EOS)
    if not torch.allclose(_logits(mine, probe.src, probe.tgt_in, owner, _SIZES["vocab_size"]),
                          ref.eval()(probe.src, probe.tgt_in), atol=1e-4, rtol=1e-4):  # also hands the weights over
        raise AssertionError(f"{owner} does not compute the package's logits with its weights: make task 1 pass first.")
    text = (f"{callable_name(train)}(model, {len(batches)} batches, d_model={settings['d_model']}, "
            f"warmup={settings['warmup']}, lr_factor={settings['lr_factor']}, "
            f"label_smoothing={settings['label_smoothing']})")
    got = _train_learner(train, mine, batches, settings, text)
    expected = _reference_losses(ref.train(), batches, **settings)
    if all(math.isclose(a, b, rel_tol=5e-4, abs_tol=1e-4) for a, b in zip(got, expected)):
        report_passed(task, "your batches, and 6 steps of your loop (warm-up schedule, label smoothing, Adam) give "
                            "the package's losses from the same start and data")
        return

    def variant(**kw: Any) -> list[float]:
        again = _reference(1)
        again.load_state_dict(start)
        return _reference_losses(again.train(), batches, **{**settings, **kw})

    shown = ", ".join(f"{x:.4f}" for x in got)
    wanted = ", ".join(f"{x:.4f}" for x in expected)
    if not math.isclose(got[0], expected[0], rel_tol=5e-4, abs_tol=1e-4):
        hint = ""
        if math.isclose(got[0], expected[0] * sum(len(t) for _, t in batches[0]), rel_tol=2e-3):
            hint = " Return the loss per target token (the mean over the real tokens), not the sum."
        raise AssertionError(f"{text}: the first loss, before any update, is {got[0]:.5f} but the package's is "
                             f"{expected[0]:.5f}: the loss itself differs (task 2), or the batch.{hint}")
    mistakes = [
        ("The rate of step k is the schedule at k, counted from 1: yours is one step late (the first update gets 0).",
         lambda: variant(off_by_one=True)),
        ("Clear the gradients after every step (optimizer.zero_grad()): yours add up from step to step.",
         lambda: variant(no_zero_grad=True)),
        ("Use the paper's Adam: betas (0.9, 0.98) and eps 1e-9 (section 5.3), not PyTorch's defaults.",
         lambda: variant(betas=(0.9, 0.999), eps=1e-8)),
        ("Use the schedule's rate at every step, times lr_factor: yours ignores lr_factor.",
         lambda: variant(lr_factor=1.0)),
        ("The schedule's warm-up is the `warmup` argument: yours uses another.", lambda: variant(warmup=4000)),
    ]
    for hint, wrong in mistakes:
        if all(math.isclose(a, b, rel_tol=5e-4, abs_tol=1e-4) for a, b in zip(got, wrong())):
            raise AssertionError(f"{text}: losses {shown}; the package's are {wanted}. {hint}")
    raise AssertionError(f"{text}: losses {shown}; the package's are {wanted}. The first one agrees, so the model and "
                         "the loss do: look at the update (the learning rate of each step, set before optimizer.step(); "
                         "Adam's settings; zero_grad; one step per batch).")


@isolated(avoid=(*MODEL_PIECES, *LOOP_PIECES))
def check_overfit_one_batch(cls: type[nn.Module], train: Callable[..., Any], settings: Any, *,
                            task: int | str | None = None) -> None:
    """Check that the learner's model and loop, with the learner's ``settings``, learn one batch by heart.

    ``settings`` is a dict with ``steps`` (at most 300), ``warmup``, ``lr_factor`` and
    ``label_smoothing``. The check starts the learner's model from the package's initialisation, trains
    it with ``train(model, [batch] * steps, d_model=32, ...)`` on one batch of 8 random pairs, and wants
    the last loss per token below 0.05: a model and a loop that work can memorise 8 pairs.
    """
    __tracebackhide__ = True
    if settings is None:
        raise NotImplementedError(f"Task {task}: set overfit_settings to the dict of your choice")
    keys = {"steps", "warmup", "lr_factor", "label_smoothing"}
    if not isinstance(settings, dict) or set(settings) != keys:
        raise AssertionError(f"overfit_settings is {describe(settings)[:100]}; expected a dict with exactly the keys "
                             f"{', '.join(sorted(keys))}")
    steps = settings["steps"]
    if isinstance(steps, bool) or not isinstance(steps, int) or not 1 <= steps <= 300:
        raise AssertionError(f"overfit_settings['steps'] is {steps!r}; choose a whole number of steps up to 300")
    smoothing = as_number(settings["label_smoothing"], "overfit_settings['label_smoothing']")
    if smoothing > 0:
        floor = -(1 - smoothing) * math.log(1 - smoothing) - smoothing * math.log(smoothing / 246)
        raise AssertionError(
            f"With label_smoothing={smoothing:g} the loss cannot go to 0, even for a model that has learned the batch "
            f"perfectly: the best it can do is the entropy of the smoothed targets (about {floor:.2f} per token for 248 "
            "tokens). To see memorisation, switch smoothing off."
        )
    mine, owner = _build(cls)
    ref = _reference(2)
    _load_package_weights(mine, ref, owner)
    batch = _pairs(make_rng(), 8, _SIZES["vocab_size"])
    probe = collate_pairs(batch, PAD, BOS, EOS)
    _logits(mine, probe.src, probe.tgt_in, owner, _SIZES["vocab_size"])  # hands the copied weights over
    run = {"d_model": _SIZES["d_model"], "warmup": settings["warmup"], "lr_factor": settings["lr_factor"],
           "label_smoothing": smoothing}
    text = f"{callable_name(train)}(model, [batch] * {steps}, d_model={_SIZES['d_model']}, warmup={run['warmup']!r}, " \
           f"lr_factor={run['lr_factor']!r}, label_smoothing={smoothing:g})"
    losses = _train_learner(train, mine, [batch] * steps, run, text)
    last = losses[-1]
    if not math.isfinite(last) or last >= 0.05:
        trend = ", ".join(f"{losses[i]:.3f}" for i in sorted({0, len(losses) // 4, len(losses) // 2, len(losses) - 1}))
        d_model, warmup, factor = _SIZES["d_model"], as_number(run["warmup"], "warmup"), as_number(run["lr_factor"], "lr_factor")
        top = factor * d_model**-0.5 * min(warmup, steps) * warmup**-1.5  # the highest rate the run reaches
        if not math.isfinite(last) or last > losses[0] or top > 0.02:
            hint = (f"The highest rate of your run is {top:.3g}: too high for Adam to settle into the minimum (the loss "
                    "jumps around it). Aim lower, about 0.01 for a model this small: a smaller lr_factor or a longer "
                    "warm-up.")
        elif top < 0.003 or warmup > steps:
            hint = (f"The highest rate of your run is only {top:.3g}" + (" (the warm-up is longer than the run)"
                    if warmup > steps else "") + ": the weights hardly move. Aim for about 0.01 within the first "
                    "tenth of the steps: a larger lr_factor or a shorter warm-up.")
        else:
            hint = "The rate looks reasonable: give it more steps, or look at the loop (does every step update?)."
        raise AssertionError(f"{text}: the loss went {trend}; memorising one batch should bring it below 0.05. {hint}")
    report_passed(task, f"one batch of 8 pairs memorised: loss {losses[0]:.2f} -> {last:.4f} in {steps} steps")


def _test_dates() -> tuple[list[tuple[list[int], list[int]]], int]:
    """The held-out test dates as ids of the notebook's tokenizer (trained again here from the training dates)."""
    from ..data import SharedTokenizer, load_dates

    tokenizer = SharedTokenizer.train(load_dates("train"), vocab_size=1000)
    pairs = load_dates("test")
    return [(tokenizer.encode(s), tokenizer.encode(t)) for s, t in pairs], tokenizer.vocab_size


def _greedy(model: nn.Module, src: Tensor, longest: int, vocab_size: int, owner: str) -> list[list[int]]:
    """The check's own greedy decoding with the learner's forward: the most likely token, until eos."""
    __tracebackhide__ = True
    out = torch.full((src.size(0), 1), BOS)
    done = torch.zeros(src.size(0), dtype=torch.bool)
    for _ in range(longest):
        logits = _logits(model, src, out, owner, vocab_size)[:, -1]  # (B, V)
        logits[:, [PAD, BOS]] = float("-inf")
        token = logits.argmax(-1).masked_fill(done, PAD)  # (B,)
        out = torch.cat([out, token[:, None]], dim=1)
        done |= token == EOS
        if done.all():
            break
    return [row[1:] for row in out.tolist()]


@isolated(avoid=MODEL_PIECES)
def check_capstone_run(model: Any, losses: Any, *, task: int | str | None = None) -> None:
    """Check the learner's trained model: its exact match on the 1,000 held-out test dates must reach :data:`TARGET`.

    The check decodes the test dates itself, greedily with the learner's ``model(src, tgt_in)``, and
    counts a date right when every token up to eos is. ``losses`` is the run's loss per step (the curve).
    """
    __tracebackhide__ = True
    if model is None:
        raise NotImplementedError(f"Task {task}: train your model: set model to it and losses to its curve")
    if not isinstance(model, nn.Module):
        raise AssertionError(f"model is {describe(model)[:80]}; expected your trained MyTransformer")
    if isinstance(losses, Tensor):
        losses = losses.tolist()
    if not isinstance(losses, (list, tuple)) or len(losses) < 20 or \
            not all(isinstance(x, (int, float)) and math.isfinite(x) for x in losses):
        raise AssertionError(f"losses is {describe(losses)[:80]}; expected the loss of every training step, a list "
                             "of at least 20 numbers")
    pairs, vocab = _test_dates()
    owner = type(model).__name__
    model.eval()
    right = 0
    for start in range(0, len(pairs), 500):
        chunk = pairs[start:start + 500]
        src = collate_pairs(chunk, PAD, BOS, EOS).src
        for row, (_, target) in zip(_greedy(model, src, 16, vocab, owner), chunk):
            right += row[:len(target)] == target
    score = right / len(pairs)
    if score < TARGET:
        raise AssertionError(f"your model translates {right} of the {len(pairs)} held-out test dates exactly "
                             f"({score:.1%}); the target is {TARGET:.0%}. Train longer (a larger budget) or check the "
                             "validation curve of your run.")
    report_passed(task, f"{score:.1%} exact match on the {len(pairs)} held-out test dates (target {TARGET:.0%}), "
                        f"after {len(losses)} steps")
