"""Checks for exercise 06: causal and target masks, the shifted target, decoder layer, greedy decoding (lesson 06)."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import torch
from torch import Tensor, nn

from ..data.batching import collate_pairs
from ..decoding import greedy_decode
from ..layers import DecoderLayer
from ..masks import make_causal_mask, make_padding_mask, make_target_mask
from ..model import Transformer
from .operations import LINEAR, MASKS, PIECES, SOFTMAX
from .compare import (build_learner, call_learner, compare, decoding_model, expect_bool, expect_shape, expect_tensor,
                      fill_parameters, first_output, isolated, callable_name, split_pair, report_passed, random_tensor, make_rng, shape_text)

__all__ = ["check_causal_mask", "check_decoder_layer", "check_greedy_decode", "check_shifted_target",
           "check_target_mask"]


@isolated(avoid=("minitransformer.masks:make_target_mask",),
          builds='the target mask from a comparison and tril', allow=())
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
        text = f"{callable_name(fn)}(tgt {shape_text(tgt)}, pad_id={pad_id})"
        mask = expect_tensor(call_learner(fn, tgt, pad_id, text=text), text, "(the mask)")
        expect_bool(mask, text)
        batch, length = tgt.shape
        expect_shape(mask, (batch, 1, length, length), text, "mask", {
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
    report_passed(task, "target mask, 3 batches (pad id 0 and 4, length 1)")


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


def _end_rows(out: Tensor, eos_id: int) -> list[int | None]:
    return [row.index(eos_id) if eos_id in row else None for row in out.tolist()]


@isolated(avoid=("minitransformer.decoding:greedy_decode", "minitransformer.decoding:beam_search"),
          serve=("minitransformer.masks:make_target_mask",),  # the model's decode builds its target mask
          builds="greedy decoding, step by step, from the model's encode, decode and generator",
          allow=(*LINEAR, *SOFTMAX, *MASKS, *(f"minitransformer:Transformer.{m}" for m in ("encode", "decode", "forward"))))
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
    g = make_rng()
    bos, max_len = 1, 7
    n_cases = 0
    for seed in seeds:
        model = decoding_model(seed)
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
                text = (f"{callable_name(fn)}(model, src {shape_text(batch)}, max_len={max_len}, bos_id={bos}, eos_id={eos}) "
                        f"[{case}]")
                out = expect_tensor(call_learner(fn, model, batch, max_len, bos, eos, text=text), text, "of token ids")
                expected = greedy_decode(model, batch, max_len, bos, eos, use_cache=False)
                if out.dim() != 2 or out.size(0) != batch.size(0):
                    raise AssertionError(f"{text} returned shape {shape_text(out)}; expected (B, 1 + L) = "
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
    report_passed(task, f"greedy decoding, {n_cases} cases on {len(seeds)} small models (one sentence and a padded batch each)")


@isolated(avoid=("minitransformer.masks:make_causal_mask", "minitransformer.masks:make_target_mask"),
          builds='the causal mask from ones and tril', allow=())
def check_causal_mask(fn: Callable[[int], Tensor], *, task: int | str | None = None) -> None:
    """Check ``fn(size)`` against :func:`make_causal_mask`: bool (1, 1, T, T), lower triangle and diagonal True.

    Args:
        fn: the learner's function.
        task: task number printed on success.

    Raises:
        AssertionError: what differs, and the likely mistake.
    """
    __tracebackhide__ = True
    for size in (3, 1, 6):
        text = f"{callable_name(fn)}({size})"
        mask = expect_tensor(call_learner(fn, size, text=text), text, "(the mask)")
        expect_bool(mask, text)
        expect_shape(mask, (1, 1, size, size), text, "mask", {
            (size, size): "Add two leading axes, (T, T) -> (1, 1, T, T), so it broadcasts over the batch and the heads.",
            (1, size, size): "Add one more leading axis: (1, 1, T, T) broadcasts over the batch and the heads.",
        })
        expected = make_causal_mask(size)
        if not torch.equal(mask, expected):
            square = torch.ones(size, size, dtype=torch.bool)
            if torch.equal(mask[0, 0], square.triu()):
                hint = ("Row t is query t and column s is key s: query t may see keys 0..t, the lower triangle "
                        "(tril). Yours lets every position see the future and not the past.")
            elif torch.equal(mask[0, 0], square.tril(-1)):
                hint = "A position may attend to itself: keep the diagonal (tril(), not tril(-1))."
            elif torch.equal(mask[0, 0], square.tril(1)):
                hint = ("tril(1) keeps one diagonal above the main one: position t would see position t + 1, the "
                        "token it must predict. Use tril() (diagonal 0): query t sees keys 0..t.")
            elif torch.equal(mask[0, 0], ~square.tril()):
                hint = "True means 'may attend': your mask allows exactly the future positions (it is inverted)."
            else:
                row, col = (int(i) for i in (mask[0, 0] != expected[0, 0]).nonzero()[0])
                hint = (f"Row {row} of your causal mask lets position {row} see position {col}, which is in its future."
                        if col > row else f"Row {row} of your causal mask hides position {col} from position {row}, "
                        "which may see itself and every earlier position.")
                hint += f" Expected\n{expected[0, 0].int()}\ngot\n{mask[0, 0].int()}"
            raise AssertionError(f"{text} gave the wrong mask. {hint}")
    report_passed(task, "causal mask, sizes 1, 3 and 6")


@isolated(avoid=("minitransformer.data.batching:collate_pairs",),
          builds='the shifted target from cat and indexing', allow=())
def check_shifted_target(fn: Callable[[Tensor, int, int, int], tuple[Tensor, Tensor]], *,
                         task: int | str | None = None) -> None:
    """Check ``fn(y, pad_id, bos_id, eos_id) -> (tgt_in, tgt_out)``: the decoder's input and labels (lesson 06).

    ``y`` (B, L) holds the target sentences without start or end token, padded with ``pad_id``.
    ``tgt_in`` (B, L + 1) is ``bos`` followed by each sentence, ``tgt_out`` (B, L + 1) each
    sentence followed by ``eos``, both padded: the same as :func:`collate_pairs`.

    Args:
        fn: the learner's function.
        task: task number printed on success.

    Raises:
        AssertionError: what differs, and the likely mistake.
    """
    __tracebackhide__ = True
    cases = [
        ("a padded batch", [[7, 8, 9], [5, 6], [4]], 0, 1, 2),
        ("no padding", [[4, 5, 6, 7], [9, 8, 7, 6]], 0, 1, 2),
        ("other special ids", [[10, 11], [12, 13, 14, 15]], 3, 1, 0),
        ("one word", [[6]], 0, 1, 2),
    ]
    for case, sentences, pad, bos, eos in cases:
        longest = max(len(s) for s in sentences)
        y = torch.tensor([s + [pad] * (longest - len(s)) for s in sentences])  # (B, L)
        text = f"{callable_name(fn)}(y {shape_text(y)}, pad_id={pad}, bos_id={bos}, eos_id={eos}) [{case}]"
        tgt_in, tgt_out = split_pair(call_learner(fn, y, pad, bos, eos, text=text,
                                                  in_place="changed y in place: build new tensors"),
                                     text, "tgt_in, tgt_out")
        tgt_in, tgt_out = expect_tensor(tgt_in, text, "as tgt_in"), expect_tensor(tgt_out, text, "as tgt_out")
        batch = collate_pairs([([4], s + [eos]) for s in sentences], pad, bos, eos)
        for name, got, expected in (("tgt_in", tgt_in, batch.tgt_in), ("tgt_out", tgt_out, batch.tgt_out)):
            expect_shape(got, expected.shape, text, name, {
                (len(sentences), longest + 2): "Each of tgt_in and tgt_out adds ONE token to the sentence: bos in "
                                              "front of tgt_in, eos at the end of tgt_out, so both are (B, L + 1).",
                (len(sentences), longest): "Add one token: bos in front for tgt_in, eos after the words for tgt_out.",
            })
        if torch.equal(tgt_in, batch.tgt_out) and torch.equal(tgt_out, batch.tgt_in):
            raise AssertionError(f"{text}: you swapped them: the decoder READS bos y_1 ... y_n (tgt_in) and must "
                                 "PREDICT y_1 ... y_n eos (tgt_out).")
        for name, got, expected in (("tgt_in", tgt_in, batch.tgt_in), ("tgt_out", tgt_out, batch.tgt_out)):
            if torch.equal(got.long(), expected):
                continue
            row = next(b for b in range(len(sentences)) if not torch.equal(got[b].long(), expected[b]))
            appended = torch.cat([y, torch.full((len(sentences), 1), eos)], dim=1)  # eos after the padding
            hints = [
                (name == "tgt_out" and torch.equal(got.long(), appended),
                 "The end token goes right after each sentence's last word, before its padding, not at the end of "
                 "the padded row."),
                (name == "tgt_in" and bool((got == eos).any()),
                 "tgt_in holds no end token: the decoder never reads eos, it only has to predict it."),
                (name == "tgt_out" and bool((got == bos).any()),
                 "tgt_out holds no start token: nothing ever predicts bos."),
                (name == "tgt_in" and bool((got[:, 0] != bos).any()), "Every row of tgt_in starts with bos."),
            ]
            hint = next((h for matched, h in hints if matched), "")
            raise AssertionError(f"{text}: wrong {name}: for sentence {row} expected {expected[row].tolist()}, got "
                                 f"{got[row].tolist()}." + (f" {hint}" if hint else ""))
    report_passed(task, "shifted target, 4 batches (padding, none, other special ids, one word)")


def _decoder_by_hand(ref: DecoderLayer, y: Tensor, memory: Tensor, src_mask: Tensor | None,
                     tgt_mask: Tensor | None, *, order: str = "post", cross_query: str = "a",
                     cross_source: str = "memory", self_mask: str = "tgt", cross_mask: str = "src",
                     norms: tuple[int, int, int] = (1, 2, 3), residual: bool = True) -> Tensor:
    """A decoder layer from ``ref``'s parts, wired right (the defaults) or in a usual wrong way."""
    masks = {"tgt": tgt_mask, "src": src_mask, "none": None}
    n1, n2, n3 = (getattr(ref, f"norm{i}") for i in norms)

    def add(x: Tensor, sub: Tensor) -> Tensor:
        return x + sub if residual else sub

    if order == "pre":
        h = n1(y)
        a = y + ref.self_attn(h, h, h, masks[self_mask])[0]
        h = n2(a)
        b = a + ref.cross_attn(h, memory, memory, masks[cross_mask])[0]
        return b + ref.feed_forward(n3(b))
    a = n1(add(y, ref.self_attn(y, y, y, masks[self_mask])[0]))
    query = {"a": a, "y": y, "memory": memory}[cross_query]
    source = {"memory": memory, "a": a}[cross_source]
    b = n2(add(a, ref.cross_attn(query, source, source, masks[cross_mask])[0]))
    return n3(add(b, ref.feed_forward(b)))


@isolated(avoid=("minitransformer.layers:DecoderLayer", "torch.nn:TransformerDecoderLayer"),
          builds='the decoder layer from attention, the feed-forward network, residuals and layer norms',
          allow=(*LINEAR, *SOFTMAX, 'relu', 'dropout', 'layer_norm', 'var', 'std', 'var_mean', 'scaled_dot_product_attention', *PIECES))
def check_decoder_layer(cls: type[nn.Module], *, task: int | str | None = None) -> None:
    """Check a post-LN decoder layer against :class:`DecoderLayer`, weights copied by attribute name.

    ``cls(d_model, n_heads, d_ff, dropout)`` must hold ``self_attn`` and ``cross_attn``
    (:class:`MultiHeadAttention`), ``feed_forward`` (:class:`PositionwiseFeedForward`) and
    ``norm1``, ``norm2``, ``norm3`` (LayerNorms with ``weight`` and ``bias``);
    ``forward(x, memory, src_mask=None, tgt_mask=None)`` computes
    a = norm1(x + SelfAttn(x, x, x, tgt_mask)), b = norm2(a + CrossAttn(a, memory, memory, src_mask)),
    out = norm3(b + FFN(b)) (section 3.1, lesson 06). It is built with dropout 0.2 and run in eval
    mode, where dropout must be off.

    Args:
        cls: the learner's class.
        task: task number printed on success.

    Raises:
        AssertionError: what differs, and the likely mistake.
    """
    __tracebackhide__ = True
    g = make_rng()
    d_model, n_heads, d_ff, dropout = 8, 2, 16, 0.2
    layer = build_learner(cls, d_model, n_heads, d_ff, dropout)
    owner = f"{callable_name(cls)}({d_model}, {n_heads}, {d_ff}, {dropout})"
    ref = DecoderLayer(d_model, n_heads, d_ff, dropout).eval()
    fill_parameters(ref, g)
    mine = dict(layer.named_parameters())
    wanted = dict(ref.named_parameters())
    missing = [n for n in wanted if n not in mine]
    if missing:
        parts = sorted({n.split(".")[0] for n in missing})
        raise AssertionError(
            f"{owner} has no parameter(s) {', '.join(missing[:4])}{' ...' if len(missing) > 4 else ''}: the layer "
            f"needs the sub-modules {', '.join(parts)} under these names (self_attn and cross_attn = "
            "MultiHeadAttention(d_model, n_heads, dropout), feed_forward = PositionwiseFeedForward(d_model, d_ff, "
            "dropout), norm1/norm2/norm3 = nn.LayerNorm(d_model))"
        )
    extra = [n for n in mine if n not in wanted]
    if extra:
        raise AssertionError(f"{owner} has parameters the decoder layer does not have: {', '.join(extra[:4])}")
    for name, p in wanted.items():
        if mine[name].shape != p.shape:
            raise AssertionError(f"{owner}.{name} has shape {shape_text(mine[name])}; expected {shape_text(p)}")
        mine[name].copy_(p)
    keep_src = torch.tensor([[True, True, True, False], [True, True, True, True]])[:, None, None, :]
    tgt5 = torch.tensor([[1, 5, 6, 7, 0], [1, 4, 4, 5, 6]])
    tgt4 = torch.tensor([[1, 5, 6, 0], [1, 4, 4, 5]])
    src5 = torch.tensor([[4, 5, 6, 0, 0], [4, 5, 6, 7, 8]])
    cases = [
        ("T=4, S=4, padding and causal masks", random_tensor(g, 2, 4, d_model), random_tensor(g, 2, 4, d_model), keep_src,
         make_target_mask(tgt4, 0)),
        ("T=5, S=5, padding and causal masks", random_tensor(g, 2, 5, d_model), random_tensor(g, 2, 5, d_model),
         make_padding_mask(src5, 0), make_target_mask(tgt5, 0)),
        ("T=4, S=3, no masks", random_tensor(g, 2, 4, d_model), random_tensor(g, 2, 3, d_model), None, None),
        ("one target position, T=1", random_tensor(g, 1, 1, d_model), random_tensor(g, 1, 3, d_model), None, None),
    ]
    for case, y, memory, src_mask, tgt_mask in cases:
        args = (y, memory, src_mask, tgt_mask)
        text = (f"{owner}.forward(x {shape_text(y)}, memory {shape_text(memory)}, src_mask "
                f"{shape_text(src_mask) if src_mask is not None else None}, tgt_mask "
                f"{shape_text(tgt_mask) if tgt_mask is not None else None}) [{case}]")
        out = expect_tensor(first_output(call_learner(layer, *args, text=text)), text, f"of shape {shape_text(y)}")
        expected = ref(*args)
        expect_shape(out, expected.shape, text, "output", {
            tuple(memory.shape): "The output has one vector per TARGET position: the queries of the cross-attention "
                                 "come from the decoder, the keys and values from memory.",
        })
        again = first_output(call_learner(layer, *args, text=text))
        if not torch.equal(out, again):
            raise AssertionError(f"{text}: two calls in eval mode gave different outputs: dropout must switch off in "
                                 "eval mode; use nn.Dropout modules (or pass dropout to the sub-modules), not "
                                 "F.dropout(..., training=True).")

        def wrong(**kw: Any) -> Callable[[], Tensor]:
            return lambda: _decoder_by_hand(ref, *args, **kw)

        compare(out, expected, text, "output", [
            ("Your layer is pre-LN, x + Sublayer(LayerNorm(x)); the paper's decoder is post-LN: "
             "LayerNorm(x + Sublayer(x)) after each of the three sub-layers.", wrong(order="pre")),
            ("In the cross-attention the QUERIES come from the decoder (a, after the masked self-attention) and the "
             "keys and values from memory: cross_attn(a, memory, memory, src_mask).",
             wrong(cross_query="memory", cross_source="a")),
            ("In the cross-attention the QUERIES come from the decoder (a) and the keys and values from memory: "
             "cross_attn(a, memory, memory, src_mask).", wrong(cross_query="memory")),
            ("The cross-attention's queries are the output of the first sub-layer, a = norm1(x + SelfAttn(x)), not "
             "the layer's input x.", wrong(cross_query="y")),
            ("The cross-attention reads the source: its keys and values are memory, not the decoder's own states.",
             wrong(cross_source="a")),
            ("The self-attention needs tgt_mask (padding and causal): without it every position sees the future.",
             wrong(self_mask="none")),
            ("The cross-attention needs src_mask, so that it ignores the source's padding.", wrong(cross_mask="none")),
            ("The masks are swapped: tgt_mask belongs to the self-attention, src_mask to the cross-attention.",
             wrong(self_mask="src", cross_mask="tgt")),
            ("norm1, norm2 and norm3 follow the self-attention, the cross-attention and the feed-forward network, in "
             "that order.", wrong(norms=(1, 3, 2))),
            ("norm1, norm2 and norm3 follow the self-attention, the cross-attention and the feed-forward network, in "
             "that order.", wrong(norms=(3, 2, 1))),
            ("The residual connections are missing: LayerNorm(x + Sublayer(x)), the sub-layer's input added back.",
             wrong(residual=False)),
        ])
    report_passed(task, "post-LN decoder layer, 4 cases (padding and causal masks, S != T, T = 1), dropout off in eval mode")
