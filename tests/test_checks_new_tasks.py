"""The checks of the lesson-by-lesson tasks: a right answer passes, each usual mistake gets its own message."""

from __future__ import annotations

import math
from typing import Any, Callable

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from minitransformer import MultiHeadAttention, PositionwiseFeedForward, beam_search
from minitransformer.checks import (check_additive_scores, check_alignment_and_context, check_answer,
                                    check_beam_search, check_beam_step, check_checkpoint_average,
                                    check_corpus_bleu, check_decoder_layer, check_layers_to_connect,
                                    check_normalised_scores, check_offset_rotation, check_one_hot_embedding,
                                    check_scaled_embedding, check_shifted_target, check_skipgram_gradients,
                                    check_split_and_merge_heads, check_tied_output, check_token_batches,
                                    check_warmup_schedule)
from minitransformer.checks.compare import decoding_model
from minitransformer.checks.lesson00 import _layers_needed, _reach_by_simulation
from minitransformer.checks.lesson08 import _search_by_hand, _search_cases, _ToyNextLogProbs


def passes(check: Callable[..., None], *args: Any, capsys: pytest.CaptureFixture[str], task: int = 1) -> None:
    check(*args, task=task)
    assert f"✓ Task {task} passed" in capsys.readouterr().out


def fails(check: Callable[..., None], *args: Any, match: str) -> None:
    with pytest.raises(AssertionError, match=match):
        check(*args)


# Lesson 00 ---------------------------------------------------------------------------------------------------------

def additive_scores(s: Tensor, h: Tensor, W: Tensor, U: Tensor, v: Tensor) -> Tensor:
    return torch.tanh((s @ W.T)[:, None, :] + h @ U.T) @ v  # (B, S)


def test_additive_scores(capsys: pytest.CaptureFixture[str]) -> None:
    passes(check_additive_scores, additive_scores, capsys=capsys)
    fails(check_additive_scores, lambda s, h, W, U, v: ((s @ W.T)[:, None] + h @ U.T) @ v, match="tanh is missing")
    fails(check_additive_scores, lambda s, h, W, U, v: torch.tanh((s @ W.T)[:, None] + h @ U.T).sum(-1),
          match="dot product with v")
    fails(check_additive_scores, lambda s, h, W, U, v: (torch.tanh(s @ W.T)[:, None] + torch.tanh(h @ U.T)) @ v,
          match="sum goes inside the tanh")
    fails(check_additive_scores, lambda s, h, W, U, v: torch.tanh(s @ W.T + h @ U.T) @ v, match="ROW vectors")
    fails(check_additive_scores, lambda s, h, W, U, v: torch.tanh((s @ W.T)[:, None] + h @ U.T),
          match="turned into one number")
    fails(check_additive_scores, lambda s, h, W, U, v: (torch.tanh((s @ W.T)[:, None] + h @ U.T) @ v)[..., None],
          match="squeeze")


def alignment(scores: Tensor, h: Tensor, src_mask: Tensor) -> tuple[Tensor, Tensor]:
    alpha = scores.masked_fill(~src_mask, float("-inf")).softmax(dim=-1)  # (B, S)
    return alpha, (alpha[:, :, None] * h).sum(dim=1)  # (B, He)


def test_alignment_and_context(capsys: pytest.CaptureFixture[str]) -> None:
    passes(check_alignment_and_context, alignment, capsys=capsys)
    fails(check_alignment_and_context, lambda s, h, m: alignment(s, h, torch.ones_like(m)), match="Padding must be hidden")
    fails(check_alignment_and_context, lambda s, h, m: (lambda a: (a, (a[:, :, None] * h).sum(1)))(
        s.masked_fill(~m, 0.0).softmax(-1)), match="not 0")
    fails(check_alignment_and_context, lambda s, h, m: (lambda a: (a, (a[:, :, None] * h).sum(1)))(
        s.masked_fill(~m, float("-inf")).softmax(0)), match="not over the batch|NaN")
    fails(check_alignment_and_context, lambda s, h, m: (lambda a: (a, (a[:, :, None] * h).mean(1)))(
        s.masked_fill(~m, float("-inf")).softmax(-1)), match="weighted sum")
    fails(check_alignment_and_context, lambda s, h, m: (lambda a: (a, a[:, :, None] * h))(
        s.masked_fill(~m, float("-inf")).softmax(-1)), match="weighted SUM")

    def in_place(s: Tensor, h: Tensor, m: Tensor) -> tuple[Tensor, Tensor]:
        s.masked_fill_(~m, float("-inf"))
        return alignment(s, h, m)

    fails(check_alignment_and_context, in_place, match="in place")


def layers_to_connect(n: int, kernel: int, dilated: bool) -> int:
    reach, layers, dilation = 0, 0, 1
    while reach < n - 1:
        reach += dilation * (kernel - 1) // 2
        layers += 1
        if dilated:
            dilation *= 2
    return layers


def test_layers_to_connect(capsys: pytest.CaptureFixture[str]) -> None:
    for n in (1, 2, 9, 33, 100):
        for kernel in (3, 5, 7):
            for dilated in (False, True):
                assert _layers_needed(n, kernel, dilated) == _reach_by_simulation(n, kernel, dilated)
    passes(check_layers_to_connect, layers_to_connect, capsys=capsys)
    fails(check_layers_to_connect, lambda n, k, d: layers_to_connect(n + 1, k, d), match="count the distance")
    fails(check_layers_to_connect, lambda n, k, d: math.ceil((n - 1) / (k - 1)) if not d else layers_to_connect(n, k, d),
          match="EACH side")
    fails(check_layers_to_connect, lambda n, k, d: layers_to_connect(n, k, False), match="reach doubles")
    fails(check_layers_to_connect, lambda n, k, d: layers_to_connect(n, 3, d), match="as a kernel of 3 would")
    fails(check_layers_to_connect, lambda n, k, d: float(layers_to_connect(n, k, d)) + 0.5, match="whole number")


# Lesson 01 ---------------------------------------------------------------------------------------------------------

def one_hot_embedding(tokens: Tensor, E: Tensor) -> tuple[Tensor, Tensor]:
    one_hot = F.one_hot(tokens, E.size(0)).float()  # (B, T, V)
    return one_hot, one_hot @ E  # (B, T, D)


def test_one_hot_embedding(capsys: pytest.CaptureFixture[str]) -> None:
    passes(check_one_hot_embedding, one_hot_embedding, capsys=capsys)
    fails(check_one_hot_embedding, lambda t, E: (F.one_hot(t).float(), E[t]), match="num_classes")
    fails(check_one_hot_embedding, lambda t, E: (F.one_hot(t, E.size(0)), E[t]), match="make it float")
    fails(check_one_hot_embedding, lambda t, E: E[t], match="expected a pair")
    fails(check_one_hot_embedding, lambda t, E: (F.one_hot(t, E.size(0)).float(), E[t] * 2), match="wrong vectors")


class ScaledEmbedding(nn.Module):
    def __init__(self, vocab_size: int, d_model: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(vocab_size, d_model))
        self.scale = math.sqrt(d_model)

    def forward(self, tokens: Tensor) -> Tensor:
        return self.weight[tokens] * self.scale  # (B, T, D)


def test_scaled_embedding(capsys: pytest.CaptureFixture[str]) -> None:
    passes(check_scaled_embedding, ScaledEmbedding, capsys=capsys)
    for factor, match in ((lambda d, v: 1.0, "not scaled"), (lambda d, v: 1 / math.sqrt(d), "don't divide"),
                          (lambda d, v: float(d), "not d_model"), (lambda d, v: math.sqrt(v), "not sqrt\\(vocab_size")):
        class Wrong(ScaledEmbedding):
            def __init__(self, vocab_size: int, d_model: int, factor: Callable = factor) -> None:
                super().__init__(vocab_size, d_model)
                self.scale = factor(d_model, vocab_size)

        fails(check_scaled_embedding, Wrong, match=match)

    class Transposed(ScaledEmbedding):
        def __init__(self, vocab_size: int, d_model: int) -> None:
            super().__init__(vocab_size, d_model)
            self.weight = nn.Parameter(torch.randn(d_model, vocab_size))

    fails(check_scaled_embedding, Transposed, match="not \\(D, V\\)")

    class NoWeight(nn.Module):
        def __init__(self, vocab_size: int, d_model: int) -> None:
            super().__init__()
            self.table = nn.Embedding(vocab_size, d_model)

    fails(check_scaled_embedding, NoWeight, match="no parameter `weight`")


class TiedModel(nn.Module):
    def __init__(self, vocab_size: int, d_model: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_model)
        self.out = nn.Linear(d_model, vocab_size, bias=False)
        self.out.weight = self.embed.weight  # one parameter, two uses
        self.scale = math.sqrt(d_model)

    def forward(self, tokens: Tensor) -> Tensor:
        return self.out(self.embed(tokens) * self.scale)  # (B, T, V)


def test_tied_output(capsys: pytest.CaptureFixture[str]) -> None:
    passes(check_tied_output, TiedModel, capsys=capsys)

    class Copied(TiedModel):
        def __init__(self, vocab_size: int, d_model: int) -> None:
            super().__init__(vocab_size, d_model)
            self.out.weight = nn.Parameter(self.embed.weight.detach().clone())

    fails(check_tied_output, Copied, match="merely hold the same numbers")

    class Untied(TiedModel):
        def __init__(self, vocab_size: int, d_model: int) -> None:
            super().__init__(vocab_size, d_model)
            self.out = nn.Linear(d_model, vocab_size, bias=False)

    fails(check_tied_output, Untied, match="two different parameters: tie")

    class WithBias(TiedModel):
        def __init__(self, vocab_size: int, d_model: int) -> None:
            super().__init__(vocab_size, d_model)
            self.out = nn.Linear(d_model, vocab_size)

    fails(check_tied_output, WithBias, match="bias=False")

    class Unscaled(TiedModel):
        def forward(self, tokens: Tensor) -> Tensor:
            return self.out(self.embed(tokens))

    fails(check_tied_output, Unscaled, match="Scale the embedded tokens")

    class Softmaxed(TiedModel):
        def forward(self, tokens: Tensor) -> Tensor:
            return super().forward(tokens).softmax(-1)

    fails(check_tied_output, Softmaxed, match="softmax belongs to the loss")


def skipgram(W: Tensor, C: Tensor, centre: Tensor, context: Tensor, *, sign: float = 1.0, mean: bool = True,
             overwrite: bool = False) -> tuple[Tensor, Tensor, Tensor]:
    scores = W[centre] @ C.T  # (N, V)
    p = scores.softmax(dim=-1)
    n = len(centre) if mean else 1
    loss = -p[torch.arange(len(centre)), context].log().sum() / n
    d_scores = sign * (p - F.one_hot(context, C.size(0))) / n  # (N, V)
    grad_C = d_scores.T @ W[centre]  # (V, dim)
    grad_W = torch.zeros_like(W)
    if overwrite:
        grad_W[centre] = d_scores @ C
    else:
        grad_W.index_add_(0, centre, d_scores @ C)
    return loss, grad_W, grad_C


def test_skipgram_gradients(capsys: pytest.CaptureFixture[str]) -> None:
    passes(check_skipgram_gradients, skipgram, capsys=capsys)
    passes(check_skipgram_gradients, lambda *a: (skipgram(*a)[0].item(), *skipgram(*a)[1:]), capsys=capsys)

    def plus_equals(W: Tensor, C: Tensor, centre: Tensor, context: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        loss, _, grad_C = skipgram(W, C, centre, context)
        d_scores = (torch.softmax(W[centre] @ C.T, -1) - F.one_hot(context, C.size(0))) / len(centre)
        grad_W = torch.zeros_like(W)
        grad_W[centre] += d_scores @ C
        return loss, grad_W, grad_C

    fails(check_skipgram_gradients, plus_equals, match="does not add up repeated indices")
    fails(check_skipgram_gradients, lambda *a: skipgram(*a, sign=-1.0), match="softmax - one_hot")
    fails(check_skipgram_gradients, lambda *a: skipgram(*a, mean=False), match="you summed it")
    fails(check_skipgram_gradients, lambda *a: (skipgram(*a)[0], *skipgram(*a, mean=False)[1:]), match="Divide the gradients by N")
    fails(check_skipgram_gradients, lambda *a: skipgram(*a, overwrite=True), match="index_add_")
    fails(check_skipgram_gradients, lambda *a: (skipgram(*a)[0], skipgram(*a)[1], skipgram(*a)[2].T),
          match="transpose it")
    fails(check_skipgram_gradients, lambda *a: (-skipgram(*a)[0], *skipgram(*a)[1:]), match="minus sign")


# Lesson 02 ---------------------------------------------------------------------------------------------------------

def offset_rotation(k: int, d_model: int) -> Tensor:
    omega = 10000 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)  # (D/2,)
    blocks = [torch.tensor([[math.cos(k * w), -math.sin(k * w)], [math.sin(k * w), math.cos(k * w)]],
                           dtype=torch.float64) for w in omega.tolist()]
    return torch.block_diag(*blocks)  # (D, D)


def test_offset_rotation(capsys: pytest.CaptureFixture[str]) -> None:
    passes(check_offset_rotation, offset_rotation, capsys=capsys)
    fails(check_offset_rotation, lambda k, d: offset_rotation(k, d).T, match="built its transpose")
    fails(check_offset_rotation, lambda k, d: offset_rotation(-k, d) if k else torch.eye(d) * 2, match="transpose|wrong")

    def one_exponent(k: int, d: int) -> Tensor:
        omega = 10000 ** (-torch.arange(d // 2, dtype=torch.float64) / d)
        return torch.block_diag(*[torch.tensor([[math.cos(k * w), -math.sin(k * w)], [math.sin(k * w), math.cos(k * w)]])
                                  for w in omega.tolist()])

    fails(check_offset_rotation, one_exponent, match="needs the factor 2")
    fails(check_offset_rotation, lambda k, d: torch.stack([offset_rotation(k, d)[i:i + 2, i:i + 2] for i in range(0, d, 2)]),
          match="block_diag")


# Lesson 04 ---------------------------------------------------------------------------------------------------------

def split_heads(x: Tensor, n_heads: int) -> Tensor:
    batch, length, d_model = x.shape
    return x.view(batch, length, n_heads, d_model // n_heads).transpose(1, 2)  # (B, H, T, Dk)


def merge_heads(x: Tensor) -> Tensor:
    batch, n_heads, length, d_k = x.shape
    return x.transpose(1, 2).reshape(batch, length, n_heads * d_k)  # (B, T, D)


def test_split_and_merge_heads(capsys: pytest.CaptureFixture[str]) -> None:
    passes(check_split_and_merge_heads, split_heads, merge_heads, capsys=capsys)
    fails(check_split_and_merge_heads, lambda x, h: x.reshape(x.size(0), h, x.size(1), -1), merge_heads,
          match="mixes the positions")
    fails(check_split_and_merge_heads, lambda x, h: x.view(x.size(0), x.size(1), -1, h).permute(0, 3, 1, 2),
          merge_heads, match="contiguous block")
    fails(check_split_and_merge_heads, lambda x, h: x.view(x.size(0), x.size(1), h, -1), merge_heads,
          match="transpose\\(1, 2\\)")
    fails(check_split_and_merge_heads, split_heads, lambda x: x.reshape(x.size(0), x.size(2), -1),
          match="Transpose \\(B, H, T, Dk\\) back")
    fails(check_split_and_merge_heads, split_heads, lambda x: x.transpose(1, 2).view(x.size(0), x.size(2), -1),
          match="use .reshape")


def test_questions(capsys: pytest.CaptureFixture[str]) -> None:
    passes(check_answer, "04-base-model-heads", (8, 64, 64), capsys=capsys)
    passes(check_answer, "00-sequential-steps", [50, 49, 1], capsys=capsys)
    passes(check_answer, "06-nan-rows", {"c", "D"}, capsys=capsys)
    passes(check_answer, "06-nan-rows", "C, D", capsys=capsys)
    passes(check_answer, "08-bf16-loss-scaling", "b", capsys=capsys)
    fails(check_answer, "04-base-model-heads", (8, 512, 512), match="d_model / h")
    fails(check_answer, "00-sequential-steps", (50, 25, 1), match="each kernel-3 layer reach")
    fails(check_answer, "06-nan-rows", "C", match="first row of each triangle")
    fails(check_answer, "08-bf16-loss-scaling", "A", match="FEWER mantissa")
    fails(check_answer, "08-bf16-loss-scaling", None, match="set `answer`")


# Lesson 06 ---------------------------------------------------------------------------------------------------------

def shift_target(y: Tensor, pad_id: int, bos_id: int, eos_id: int) -> tuple[Tensor, Tensor]:
    batch = y.size(0)
    lengths = (y != pad_id).sum(dim=1)  # (B,)
    tgt_in = torch.cat([torch.full((batch, 1), bos_id), y], dim=1)  # (B, L + 1)
    tgt_out = torch.cat([y, torch.full((batch, 1), pad_id)], dim=1)  # (B, L + 1)
    tgt_out[torch.arange(batch), lengths] = eos_id
    return tgt_in, tgt_out


def test_shifted_target(capsys: pytest.CaptureFixture[str]) -> None:
    passes(check_shifted_target, shift_target, capsys=capsys)
    fails(check_shifted_target, lambda y, p, b, e: shift_target(y, p, b, e)[::-1], match="swapped them")
    fails(check_shifted_target, lambda y, p, b, e: (shift_target(y, p, b, e)[0],
                                                    torch.cat([y, torch.full((y.size(0), 1), e)], 1)),
          match="before its padding")
    fails(check_shifted_target, lambda y, p, b, e: (torch.cat([torch.full((y.size(0), 1), b), y], 1), y),
          match="Add one token")
    fails(check_shifted_target, lambda y, p, b, e: (shift_target(y, p, b, e)[1].roll(1, 1).index_fill(1, torch.tensor([0]), b),
                                                    shift_target(y, p, b, e)[1]), match="never reads eos")


class DecoderLayerSolution(nn.Module):
    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.cross_attn = MultiHeadAttention(d_model, n_heads, dropout)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1, self.norm2, self.norm3 = nn.LayerNorm(d_model), nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, memory: Tensor, src_mask: Tensor | None = None,
                tgt_mask: Tensor | None = None) -> Tensor:
        x = self.norm1(x + self.dropout(self.self_attn(x, x, x, tgt_mask)[0]))
        x = self.norm2(x + self.dropout(self.cross_attn(x, memory, memory, src_mask)[0]))
        return self.norm3(x + self.dropout(self.feed_forward(x)))


def test_decoder_layer(capsys: pytest.CaptureFixture[str]) -> None:
    passes(check_decoder_layer, DecoderLayerSolution, capsys=capsys)

    class PreLN(DecoderLayerSolution):
        def forward(self, x: Tensor, memory: Tensor, src_mask: Tensor | None = None, tgt_mask: Tensor | None = None) -> Tensor:
            h = self.norm1(x)
            x = x + self.self_attn(h, h, h, tgt_mask)[0]
            x = x + self.cross_attn(self.norm2(x), memory, memory, src_mask)[0]
            return x + self.feed_forward(self.norm3(x))

    class MemoryQueries(DecoderLayerSolution):
        def forward(self, x: Tensor, memory: Tensor, src_mask: Tensor | None = None, tgt_mask: Tensor | None = None) -> Tensor:
            x = self.norm1(x + self.self_attn(x, x, x, tgt_mask)[0])
            x = self.norm2(x + self.cross_attn(memory, x, x, src_mask)[0])
            return self.norm3(x + self.feed_forward(x))

    class SwappedMasks(DecoderLayerSolution):
        def forward(self, x: Tensor, memory: Tensor, src_mask: Tensor | None = None, tgt_mask: Tensor | None = None) -> Tensor:
            return super().forward(x, memory, tgt_mask, src_mask)

    class NoTargetMask(DecoderLayerSolution):
        def forward(self, x: Tensor, memory: Tensor, src_mask: Tensor | None = None, tgt_mask: Tensor | None = None) -> Tensor:
            return super().forward(x, memory, src_mask, None)

    class AlwaysDropout(DecoderLayerSolution):
        def forward(self, x: Tensor, memory: Tensor, src_mask: Tensor | None = None, tgt_mask: Tensor | None = None) -> Tensor:
            return F.dropout(super().forward(x, memory, src_mask, tgt_mask), 0.2, training=True)

    class Renamed(DecoderLayerSolution):
        def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.1) -> None:
            super().__init__(d_model, n_heads, d_ff, dropout)
            self.ffn = self.feed_forward
            del self.feed_forward

    fails(check_decoder_layer, PreLN, match="pre-LN")
    fails(check_decoder_layer, MemoryQueries, match="QUERIES come from the decoder")
    fails(check_decoder_layer, SwappedMasks, match="masks are swapped")
    fails(check_decoder_layer, NoTargetMask, match="needs tgt_mask")
    fails(check_decoder_layer, AlwaysDropout, match="dropout must switch off")
    fails(check_decoder_layer, Renamed, match="no parameter\\(s\\) feed_forward")


# Lesson 07 ---------------------------------------------------------------------------------------------------------

def warmup_lr(step: int, d_model: int, warmup: int) -> float:
    return d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def token_batches(src_lengths: list[int], tgt_lengths: list[int], max_tokens: int) -> list[list[int]]:
    order = sorted(range(len(src_lengths)),
                   key=lambda i: (max(src_lengths[i], tgt_lengths[i]), tgt_lengths[i], src_lengths[i]))
    batches, batch, width = [], [], 0
    for i in order:
        longest = max(width, src_lengths[i], tgt_lengths[i])
        if batch and (len(batch) + 1) * longest > max_tokens:
            batches.append(batch)
            batch, longest = [], max(src_lengths[i], tgt_lengths[i])
        batch.append(i)
        width = longest
    return batches + [batch]


def test_warmup_schedule(capsys: pytest.CaptureFixture[str]) -> None:
    passes(check_warmup_schedule, warmup_lr, capsys=capsys)
    passes(check_warmup_schedule, lambda s, d, w: torch.tensor(warmup_lr(s, d, w), dtype=torch.float64), capsys=capsys)
    fails(check_warmup_schedule, lambda s, d, w: d**-0.5 * max(s**-0.5, s * w**-1.5), match="MIN")
    fails(check_warmup_schedule, lambda s, d, w: d**-0.5 * min(s**-0.5, s * w**-0.5), match="warmup\\^-1.5")
    fails(check_warmup_schedule, lambda s, d, w: min(s**-0.5, s * w**-1.5), match="d_model\\^-0.5; yours")
    fails(check_warmup_schedule, lambda s, d, w: warmup_lr(s + 1, d, w), match="added 1")
    fails(check_warmup_schedule, lambda s, d, w: "0.001", match="expected the learning rate")


def test_token_batches(capsys: pytest.CaptureFixture[str]) -> None:
    passes(check_token_batches, token_batches, capsys=capsys)

    def summed(src: list[int], tgt: list[int], budget: int) -> list[list[int]]:
        order = sorted(range(len(src)), key=lambda i: (max(src[i], tgt[i]), tgt[i], src[i]))
        batches, batch = [], []
        for i in order:
            if batch and max(sum(src[j] for j in batch + [i]), sum(tgt[j] for j in batch + [i])) > budget:
                batches.append(batch)
                batch = []
            batch.append(i)
        return batches + [batch]

    def strict(src: list[int], tgt: list[int], budget: int) -> list[list[int]]:
        return token_batches(src, tgt, budget - 1) if budget > 4 else token_batches(src, tgt, budget)

    def by_source(src: list[int], tgt: list[int], budget: int) -> list[list[int]]:
        order = sorted(range(len(src)), key=lambda i: src[i])
        batches, batch = [], []
        for i in order:
            if batch and (len(batch) + 1) * max(max(src[j], tgt[j]) for j in batch + [i]) > budget:
                batches.append(batch)
                batch = []
            batch.append(i)
        return batches + [batch]

    fails(check_token_batches, summed, match="Padding counts")
    fails(check_token_batches, strict, match="EXCEED")
    fails(check_token_batches, by_source, match="source alone")
    fails(check_token_batches, lambda s, t, b: [list(range(len(s)))[1:]], match="exactly one batch")


# Lesson 08 ---------------------------------------------------------------------------------------------------------

def normalised_scores(log_probs: Tensor, hypotheses: list[list[int]], alpha: float) -> Tensor:
    lengths = torch.tensor([len(h) - 1 for h in hypotheses], dtype=torch.float32)  # the start token is not counted
    return log_probs / ((5 + lengths) / 6) ** alpha


def test_normalised_scores(capsys: pytest.CaptureFixture[str]) -> None:
    passes(check_normalised_scores, normalised_scores, capsys=capsys)
    fails(check_normalised_scores, lambda lp, hyps, a: lp / ((5 + torch.tensor([len(h) for h in hyps])) / 6) ** a,
          match="leave out the start token")
    fails(check_normalised_scores, lambda lp, hyps, a: lp, match="not normalised")
    fails(check_normalised_scores, lambda lp, hyps, a: lp * ((5 + torch.tensor([len(h) - 1.0 for h in hyps])) / 6) ** a,
          match="don't multiply")
    fails(check_normalised_scores, lambda lp, hyps, a: lp / torch.tensor([len(h) - 1.0 for h in hyps]) ** a,
          match="not \\|Y\\|\\^alpha")


def beam_step(scores: Tensor, log_probs: Tensor, beam_size: int, eos_id: int) -> tuple[Tensor, Tensor, Tensor, list]:
    vocab = log_probs.size(1)
    total = (scores[:, None] + log_probs).flatten()  # (K * V,)
    top_scores, index = total.topk(min(2 * beam_size, total.numel()))  # best first
    parents, tokens = index // vocab, index % vocab
    ends = tokens == eos_id
    ended = [(int(parents[r]), float(top_scores[r])) for r in range(min(beam_size, len(index)))
             if ends[r] and top_scores[r] > float("-inf")]
    keep = (~ends).nonzero().flatten()[:beam_size]
    return top_scores[keep], parents[keep], tokens[keep], ended


def test_beam_step(capsys: pytest.CaptureFixture[str]) -> None:
    passes(check_beam_step, beam_step, capsys=capsys)
    fails(check_beam_step, lambda s, lp, k, e: beam_step(torch.zeros_like(s), lp, k, e), match="PLUS")

    def keep_ended(s: Tensor, lp: Tensor, k: int, e: int) -> tuple[Tensor, Tensor, Tensor, list]:
        total = (s[:, None] + lp).flatten()
        top, index = total.topk(k)
        _, _, _, ended = beam_step(s, lp, k, e)
        return top, index // lp.size(1), index % lp.size(1), ended

    fails(check_beam_step, keep_ended, match="do NOT end")

    fails(check_beam_step, lambda s, lp, k, e: beam_step(s, lp, k, e)[:3], match="four things")


def beam_search_solution(next_log_probs: Callable[[Tensor], Tensor], bos_id: int, eos_id: int, beam_size: int,
                         alpha: float, max_len: int) -> list[int]:
    prefixes, scores = torch.tensor([[bos_id]]), torch.zeros(1)
    best_score, best = float("-inf"), [bos_id]
    n_finished = 0
    for step in range(max_len):
        log_probs = next_log_probs(prefixes)  # (K, V)
        lp = ((5 + step + 1) / 6) ** alpha
        if step + 1 == max_len:  # the length limit: the best beam_size candidates all finish
            total = (scores[:, None] + log_probs).flatten()
            top, index = total.topk(min(beam_size, total.numel()))
            finished = [(int(i) // log_probs.size(1), float(s), int(i) % log_probs.size(1)) for s, i in zip(top, index)]
        else:
            new_scores, parents, tokens, ended = beam_step(scores, log_probs, beam_size, eos_id)
            finished = [(p, s, eos_id) for p, s in ended]
        for parent, score, token in finished:
            if score / lp > best_score:
                best_score, best = score / lp, prefixes[parent].tolist() + [token]
        n_finished += len(finished)
        if n_finished >= beam_size or step + 1 == max_len:
            break
        prefixes = torch.cat([prefixes[parents], tokens[:, None]], dim=1)
        scores = new_scores
    return best


def test_search_by_hand_matches_the_package() -> None:
    penalty_matters = 0
    for _, seed, src, eos, beam_size, alpha, max_len in _search_cases():
        model = decoding_model(seed)
        row = beam_search(model, src[None], 1, eos, beam_size, alpha, max_len=max_len, use_cache=False)[0].tolist()
        while row[-1] == model.config.pad_id:
            row.pop()
        assert _search_by_hand(_ToyNextLogProbs(model, src, 1), 1, eos, beam_size, alpha, max_len) == row
        plain = _search_by_hand(_ToyNextLogProbs(model, src, 1), 1, eos, beam_size, alpha, max_len, penalty=False)
        penalty_matters += plain != row and eos in row
    assert penalty_matters >= 4  # the cases were chosen so that the length penalty changes the winner


def test_beam_search(capsys: pytest.CaptureFixture[str]) -> None:
    passes(check_beam_search, beam_search_solution, capsys=capsys)

    def no_penalty(f: Callable, b: int, e: int, k: int, a: float, m: int) -> list[int]:
        return beam_search_solution(f, b, e, k, 0.0, m)

    fails(check_beam_search, no_penalty, match="lp = \\(\\(5 \\+ t\\) / 6\\)\\^alpha")
    fails(check_beam_search, lambda f, b, e, k, a, m: _search_by_hand(f, b, e, k, a, m, stop_at_first=True),
          match="first one to end")
    fails(check_beam_search, lambda f, b, e, k, a, m: _search_by_hand(f, b, e, k, a, m)[1:], match="start token")


def average(state_dicts: list[dict[str, Tensor]]) -> dict[str, Tensor]:
    last = state_dicts[-1]
    out = {}
    for name, value in last.items():
        if value.is_floating_point():
            out[name] = (sum(sd[name].double() for sd in state_dicts) / len(state_dicts)).to(value.dtype)
        else:
            out[name] = value.clone()
    return out


def test_checkpoint_average(capsys: pytest.CaptureFixture[str]) -> None:
    passes(check_checkpoint_average, average, capsys=capsys)

    def in_place(sds: list[dict[str, Tensor]]) -> dict[str, Tensor]:
        total = sds[0]
        for sd in sds[1:]:
            for k, v in sd.items():
                if v.is_floating_point():
                    total[k] += v
        return total

    def native(sds: list[dict[str, Tensor]]) -> dict[str, Tensor]:
        return {k: sum(sd[k] for sd in sds) / len(sds) if v.is_floating_point() else v for k, v in sds[-1].items()}

    def all_averaged(sds: list[dict[str, Tensor]]) -> dict[str, Tensor]:
        return {k: sum(sd[k].double() for sd in sds) / len(sds) for k in sds[-1]}

    def summed(sds: list[dict[str, Tensor]]) -> dict[str, Tensor]:
        return {k: sum(sd[k].double() for sd in sds).to(v.dtype) if v.is_floating_point() and v.dtype != torch.float16
                else average(sds)[k] for k, v in sds[-1].items()}

    fails(check_checkpoint_average, in_place, match="changed the state dicts")
    fails(check_checkpoint_average, native, match="float16 sum overflows")
    fails(check_checkpoint_average, all_averaged, match="dtype")
    fails(check_checkpoint_average, summed, match="Divide the sum")
    fails(check_checkpoint_average, lambda sds: list(sds[-1].values()), match="expected a dict")


def bleu_solution(hyps: list[str], refs: list[list[str]], clip: bool = True, geometric: bool = True,
                  brevity: bool = True, closest: bool = True) -> float:
    from collections import Counter

    matches, totals, c, r = [0] * 4, [0] * 4, 0, 0
    for h, rs in zip(hyps, refs):
        w, xs = h.split(), [x.split() for x in rs]
        c += len(w)
        r += min((len(x) for x in xs), key=lambda n: (abs(n - len(w)), n)) if closest else len(xs[0])
        for n in range(1, 5):
            counts = Counter(tuple(w[k:k + n]) for k in range(len(w) - n + 1))
            most: Counter = Counter()
            for x in xs:
                for g, k in Counter(tuple(x[j:j + n]) for j in range(len(x) - n + 1)).items():
                    most[g] = max(most[g], k)
            matches[n - 1] += sum(min(k, most[g]) if clip else k * (g in most) for g, k in counts.items())
            totals[n - 1] += sum(counts.values())
    precisions = [m / t for m, t in zip(matches, totals)]
    mean = math.exp(sum(map(math.log, precisions)) / 4) if geometric else sum(precisions) / 4
    return 100 * (math.exp(1 - r / c) if brevity and c <= r else 1.0) * mean


def test_corpus_bleu(capsys: pytest.CaptureFixture[str]) -> None:
    passes(check_corpus_bleu, bleu_solution, capsys=capsys)
    for seed in (1, 2, 3):
        check_corpus_bleu(bleu_solution, seed=seed)

    def sentence_average(hyps: list[str], refs: list[list[str]]) -> float:
        return sum(bleu_solution([h], [r]) if len(h.split()) >= 4 else 0.0 for h, r in zip(hyps, refs)) / len(hyps)

    fails(check_corpus_bleu, lambda h, r: bleu_solution(h, r, clip=False), match="Clip the counts")
    fails(check_corpus_bleu, lambda h, r: bleu_solution(h, r, geometric=False), match="geometric mean")
    fails(check_corpus_bleu, lambda h, r: bleu_solution(h, r, brevity=False), match="brevity penalty")
    fails(check_corpus_bleu, sentence_average, match="corpus score")
    fails(check_corpus_bleu, lambda h, r: bleu_solution(h, r, closest=False), match="closest to its hypothesis")
    fails(check_corpus_bleu, lambda h, r: bleu_solution(h, r) / 100, match="from 0 to 100")
    fails(check_corpus_bleu, lambda h, r: "42", match="expected a number")

    def borrowed(hyps: list[str], refs: list[list[str]]) -> float:
        import sacrebleu

        return sacrebleu.corpus_bleu(hyps, [[x[0] for x in refs]], tokenize="none").score

    with pytest.raises(AssertionError, match="sacrebleu's corpus_bleu"):
        check_corpus_bleu(borrowed)


# All of them ---------------------------------------------------------------------------------------------------------

def test_checks_leave_the_global_random_state_alone() -> None:
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    for check, args in ((check_additive_scores, (additive_scores,)), (check_alignment_and_context, (alignment,)),
                        (check_layers_to_connect, (layers_to_connect,)), (check_one_hot_embedding, (one_hot_embedding,)),
                        (check_scaled_embedding, (ScaledEmbedding,)), (check_tied_output, (TiedModel,)),
                        (check_skipgram_gradients, (skipgram,)), (check_offset_rotation, (offset_rotation,)),
                        (check_split_and_merge_heads, (split_heads, merge_heads)),
                        (check_shifted_target, (shift_target,)), (check_decoder_layer, (DecoderLayerSolution,)),
                        (check_warmup_schedule, (warmup_lr,)), (check_token_batches, (token_batches,)),
                        (check_normalised_scores, (normalised_scores,)), (check_beam_step, (beam_step,)),
                        (check_beam_search, (beam_search_solution,)), (check_checkpoint_average, (average,)),
                        (check_corpus_bleu, (bleu_solution,))):
        check(*args)
    assert torch.equal(torch.rand(3), expected)


def test_checks_fail_on_the_package_s_own_piece() -> None:
    from minitransformer import TokenEmbedding, length_penalty
    from minitransformer.training import transformer_lr

    class Borrowed(nn.Module):
        def __init__(self, vocab_size: int, d_model: int) -> None:
            super().__init__()
            self.inner = TokenEmbedding(vocab_size, d_model)
            self.weight = self.inner.embedding.weight

        def forward(self, tokens: Tensor) -> Tensor:
            return self.inner(tokens)

    for check, solution in ((check_scaled_embedding, Borrowed), (check_warmup_schedule, transformer_lr),
                            (check_normalised_scores, lambda lp, hyps, a: lp / length_penalty(
                                torch.tensor([len(h) - 1 for h in hyps]), a))):
        with pytest.raises(BaseException, match="TokenEmbedding|transformer_lr|length_penalty"):
            check(solution)


def test_more_named_mistakes() -> None:
    fails(check_alignment_and_context, lambda s, h, m: alignment(s, h, ~m | (~m).all(-1, keepdim=True)),
          match="you hid the real words|NaN")
    fails(check_layers_to_connect, lambda n, k, d: layers_to_connect(n, k + 2, d) if not d else layers_to_connect(n, k, d),
          match="not k\\.|EACH side")
    fails(check_offset_rotation, lambda k, d: torch.block_diag(*[
        torch.tensor([[math.sin(k * w), -math.cos(k * w)], [math.cos(k * w), math.sin(k * w)]], dtype=torch.float64)
        for w in (10000 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)).tolist()]), match="diagonal of each block")

    def with_autograd(W: Tensor, C: Tensor, centre: Tensor, context: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        with torch.enable_grad():
            W_, C_ = W.clone().requires_grad_(), C.clone().requires_grad_()
            loss = F.cross_entropy(W_[centre] @ C_.T, context)
            return (loss.detach(), *torch.autograd.grad(loss, (W_, C_)))

    with pytest.raises(BaseException, match="grad"):
        check_skipgram_gradients(with_autograd)


def test_blank_stubs_raise_not_implemented() -> None:
    def stub(*_: Any) -> Any:
        raise NotImplementedError("Task 1: ...")

    for check in (check_additive_scores, check_alignment_and_context, check_layers_to_connect, check_one_hot_embedding,
                  check_skipgram_gradients, check_offset_rotation, check_shifted_target, check_warmup_schedule,
                  check_token_batches, check_normalised_scores, check_beam_step, check_beam_search,
                  check_checkpoint_average, check_corpus_bleu):
        with pytest.raises(NotImplementedError):
            check(stub)
    with pytest.raises(NotImplementedError):
        check_split_and_merge_heads(stub, stub)
