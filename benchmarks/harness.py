"""Measuring training speed: model FLOPs, MFU, tokens per second, peak memory (lesson 08b).

Three questions about a training step, each with one function:

- How much arithmetic is it? :func:`palm_flops_per_token` writes out the usual convention
  and :func:`training_flops` applies it to the two stacks of an encoder-decoder.
- How close to the hardware's limit does it run? :func:`mfu`, the model FLOPs utilisation:
  model FLOPs done per second over the GPU's dense bf16 peak (:func:`peak_tflops`).
- Is our code as fast as PyTorch's own Transformer? :func:`compare_with_torch` times a
  training step of ours and of a ``torch.nn.Transformer`` holding the same weights, on the
  same batches, eager and compiled.

``python -m benchmarks.gpu_profile`` puts them together and writes a result JSON;
:mod:`minitransformer.profile_results` reads it back for the lesson.
"""

from __future__ import annotations

import copy
import contextlib
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import Tensor, nn

from minitransformer.config import TransformerConfig
from minitransformer.data import Batch, collate_pairs
from minitransformer.decoding import greedy_decode
from minitransformer.interop import decoder_layer_to_torch, encoder_layer_to_torch, to_torch_nn_mask
from minitransformer.masks import make_causal_mask, make_padding_mask
from minitransformer.model import Transformer
from minitransformer.training.step import paper_adam, train_step

#: Dense (no sparsity) bf16 tensor-core peak in TFLOP/s, from the vendors' data sheets, keyed by
#: what ``torch.cuda.get_device_name()`` returns. An unknown name gets no MFU: a guessed peak
#: would make the figure meaningless. The H100 SXM reports itself as "NVIDIA H100 80GB HBM3";
#: the PCIe and NVL cards have lower peaks and are left out on purpose.
PEAK_BF16_TFLOPS: dict[str, float] = {
    "NVIDIA H100 80GB HBM3": 989.0,
    "NVIDIA H100 SXM5 80GB": 989.0,
    "NVIDIA H200": 989.0,
    "NVIDIA A100-SXM4-40GB": 312.0,
    "NVIDIA A100-SXM4-80GB": 312.0,
    "NVIDIA A100-PCIE-40GB": 312.0,
    "NVIDIA A100 80GB PCIe": 312.0,
    "NVIDIA L4": 121.0,
    "NVIDIA GeForce RTX 4090": 165.0,
}


def peak_tflops(device_name: str) -> float | None:
    """The dense bf16 peak of a GPU in TFLOP/s, or None when the name is not in the table.

    Args:
        device_name: what ``torch.cuda.get_device_name()`` says, e.g. "NVIDIA H100 80GB HBM3".
    """
    return PEAK_BF16_TFLOPS.get(device_name.strip())


def palm_flops_per_token(n_params: int, n_layers: int, d_model: int, seq_len: float) -> float:
    """Training FLOPs per token of a Transformer stack, as in the PaLM paper's appendix B.

    FLOPs per token = 6 * N + 12 * n_layers * d_model * seq_len

    - 6 * N: every weight (N of them, embeddings excluded) takes part in one multiply-add
      (2 FLOPs) per token in the forward pass and two in the backward pass (the gradients
      of the input and of the weight): 2 + 4 = 6.
    - 12 * n_layers * d_model * seq_len: the two attention matrix products, Q K^T and
      weights @ V, each 2 * seq_len * d_model FLOPs per token forward (all heads together),
      times 3 for forward plus backward. Causal masking is not discounted.

    Args:
        n_params: parameters of the stack without the embedding tables.
        n_layers: attention layers a token goes through.
        d_model: model width (n_heads * d_k).
        seq_len: length of the sequence attended over.
    """
    return 6 * n_params + 12 * n_layers * d_model * seq_len


def stack_parameters(model: Transformer) -> tuple[int, int]:
    """Parameters of the encoder stack and of the decoder stack (no embeddings, no output layer)."""
    return (sum(p.numel() for p in model.encoder.parameters()),
            sum(p.numel() for p in model.decoder.parameters()))


def training_flops(config: TransformerConfig, encoder_params: int, decoder_params: int, n_src: float,
                   n_tgt: float, src_len: float, tgt_len: float) -> float:
    """Model FLOPs of a training pass over ``n_src`` source and ``n_tgt`` target tokens.

    The PaLM count (:func:`palm_flops_per_token`) applied to each stack: a source token goes
    through the encoder (self-attention over the source); a target token through the decoder,
    whose self-attention spans the target and whose cross-attention spans the source. As in
    the convention, the embeddings and the pre-softmax projection (which shares their
    matrix) are not counted, so the figure is a slight undercount.

    Args:
        config: the model's sizes.
        encoder_params, decoder_params: from :func:`stack_parameters`.
        n_src, n_tgt: real (not padding) tokens.
        src_len, tgt_len: mean sentence lengths in tokens.
    """
    d, n_enc, n_dec = config.d_model, config.n_encoder_layers, config.n_decoder_layers
    encoder = palm_flops_per_token(encoder_params, n_enc, d, src_len) * n_src
    decoder = palm_flops_per_token(decoder_params, n_dec, d, tgt_len) * n_tgt
    cross = 12 * n_dec * d * src_len * n_tgt
    return encoder + decoder + cross


def mfu(flops_per_second: float, peak: float | None) -> float | None:
    """Model FLOPs utilisation in [0, 1]: achieved model FLOP/s over the peak (TFLOP/s); None if unknown."""
    if peak is None or peak <= 0:
        return None
    return flops_per_second / (peak * 1e12)


def device_name(device: torch.device) -> str:
    """The GPU's name, or "cpu" / "mps"."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return device.type


def reset_peak_memory(device: torch.device) -> None:
    """Start a new peak-memory measurement (CUDA only; elsewhere nothing is measured)."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def peak_memory(device: torch.device) -> int | None:
    """Bytes of the largest GPU memory allocation since the last reset; None off CUDA."""
    if device.type == "cuda":
        return int(torch.cuda.max_memory_allocated(device))
    return None


class TorchTransformer(nn.Module):
    """``torch.nn.Transformer`` between our embeddings and output layer: the yardstick.

    Holds copies of a :class:`Transformer`'s weights (embeddings, positional encoding and
    generator are deep copies; the layers are converted by :mod:`minitransformer.interop`),
    so the two compute the same logits and differ only in how the layers are written.
    The stacks get no final LayerNorm, as in our post-LN model.

    Shape:
        src (B, S) and tgt (B, T) token ids; returns logits (B, T, V).
    """

    def __init__(self, model: Transformer) -> None:
        super().__init__()
        c = model.config
        self.pad_id = c.pad_id
        self.src_embed = copy.deepcopy(model.src_embed)
        self.tgt_embed = copy.deepcopy(model.tgt_embed)
        self.positional = copy.deepcopy(model.positional)
        self.generator = copy.deepcopy(model.generator)
        if c.tie_embeddings:
            self.tgt_embed.embedding.weight = self.src_embed.embedding.weight
            self.generator.weight = self.src_embed.embedding.weight
        encoder = nn.TransformerEncoder(encoder_layer_to_torch(model.encoder.layers[0]), c.n_encoder_layers,
                                        enable_nested_tensor=False)
        decoder = nn.TransformerDecoder(decoder_layer_to_torch(model.decoder.layers[0]), c.n_decoder_layers)
        self.transformer = nn.Transformer(c.d_model, c.n_heads, custom_encoder=encoder, custom_decoder=decoder,
                                          batch_first=True)
        # nn.Transformer re-initialises every weight it holds: copy ours in afterwards.
        encoder.layers = nn.ModuleList(encoder_layer_to_torch(layer) for layer in model.encoder.layers)
        decoder.layers = nn.ModuleList(decoder_layer_to_torch(layer) for layer in model.decoder.layers)

    def encode(self, src: Tensor) -> tuple[Tensor, Tensor]:
        """The encoder's output (B, S, D) and the source padding mask (B, S) (True = padding)."""
        src_padding = to_torch_nn_mask(make_padding_mask(src, self.pad_id))  # (B, S), True = padding
        memory = self.transformer.encoder(self.positional(self.src_embed(src)), src_key_padding_mask=src_padding)
        return memory, src_padding  # (B, S, D), (B, S)

    @torch.no_grad()
    def greedy_decode(self, src: Tensor, max_len: int, bos_id: int, banned_ids: Sequence[int] = ()) -> Tensor:
        """Greedy decoding as a user of ``nn.Transformer`` writes it: the decoder re-runs over all tokens.

        ``nn.Transformer`` has no key/value cache, so step t runs the decoder over the t tokens
        so far and keeps the last position's logits. Exactly ``max_len`` tokens are generated
        (no end token), like :func:`~minitransformer.decoding.greedy_decode` with ``eos_id=None``.

        Args:
            src: source ids (B, S).
            max_len: tokens to generate after ``bos_id``.
            bos_id: the start token.
            banned_ids: ids never generated (as in our greedy decoding).

        Returns:
            Token ids (B, 1 + max_len).
        """
        memory, src_padding = self.encode(src)  # (B, S, D), (B, S)
        ys = torch.full((src.size(0), 1), bos_id, dtype=torch.long, device=src.device)  # (B, 1)
        for _ in range(max_len):
            causal = to_torch_nn_mask(make_causal_mask(ys.size(1), device=src.device))  # (t, t)
            hidden = self.transformer.decoder(self.positional(self.tgt_embed(ys)), memory, tgt_mask=causal,
                                              memory_key_padding_mask=src_padding, tgt_is_causal=True)
            logits = self.generator(hidden[:, -1])  # (B, V)
            if banned_ids:
                logits[:, list(banned_ids)] = float("-inf")
            ys = torch.cat([ys, logits.argmax(dim=-1, keepdim=True)], dim=1)  # (B, t + 1)
        return ys

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        src_padding = to_torch_nn_mask(make_padding_mask(src, self.pad_id))  # (B, S), True = padding
        tgt_padding = to_torch_nn_mask(make_padding_mask(tgt, self.pad_id))  # (B, T)
        causal = to_torch_nn_mask(make_causal_mask(tgt.size(1), device=tgt.device))  # (T, T), True = blocked
        hidden = self.transformer(
            self.positional(self.src_embed(src)), self.positional(self.tgt_embed(tgt)), tgt_mask=causal,
            src_key_padding_mask=src_padding, tgt_key_padding_mask=tgt_padding,
            memory_key_padding_mask=src_padding, tgt_is_causal=True,
        )  # (B, T, D)
        return self.generator(hidden)  # (B, T, V)


def synthetic_batches(vocab_size: int, batch_tokens: int, length: int, count: int, pad_id: int = 0,
                      bos_id: int = 1, eos_id: int = 2, seed: int = 0) -> list[Batch]:
    """Batches of random sentence pairs, all of one padded shape, for timing.

    Each batch has ``batch_tokens // length`` pairs; every sentence has between
    ``length // 2`` and ``length`` tokens (eos included), so there is padding as in real
    batches but one shape throughout (a compiled model is not recompiled).

    Args:
        vocab_size: token ids are drawn from the ids above the special ones.
        batch_tokens: token budget of each side, as in training.
        length: the padded width of every source and target row.
        count: number of batches.
        pad_id, bos_id, eos_id: the special ids.
        seed: seed of the lengths and ids.
    """
    if length < 2 or batch_tokens < length:
        raise ValueError(f"need length >= 2 and batch_tokens >= length, got length={length}, "
                         f"batch_tokens={batch_tokens}")
    generator = torch.Generator().manual_seed(seed)
    rows = batch_tokens // length
    low = max(pad_id, bos_id, eos_id) + 1
    if vocab_size <= low:
        raise ValueError(f"vocab_size must be above the {low} special ids, got {vocab_size}")

    def sentence(n: int | None = None) -> list[int]:
        n = n or int(torch.randint(max(1, length // 2), length + 1, (), generator=generator))
        return torch.randint(low, vocab_size, (n - 1,), generator=generator).tolist() + [eos_id]

    batches = []
    for _ in range(count):
        # The first pair has the full width, so every batch has the shape (rows, length).
        pairs = [(sentence(length), sentence(length))] + [(sentence(), sentence()) for _ in range(rows - 1)]
        batches.append(collate_pairs(pairs, pad_id, bos_id, eos_id))
    return batches


@dataclass
class StepTiming:
    """Speed of training steps on fixed batches.

    Attributes:
        seconds_per_step: mean wall time of a timed step.
        tokens_per_s: source plus target tokens (padding excluded) per second.
        tgt_tokens_per_s: target tokens per second.
        first_steps_seconds: wall time of the untimed first steps (compilation included).
        peak_memory: peak GPU bytes during the timed steps (None off CUDA).
        steps: timed steps.
    """

    seconds_per_step: float
    tokens_per_s: float
    tgt_tokens_per_s: float
    first_steps_seconds: float
    peak_memory: int | None
    steps: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_training_steps(module: nn.Module, batches: Sequence[Batch], device: torch.device, *, bf16: bool = False,
                        steps: int = 20, warmup: int = 3, label_smoothing: float = 0.1,
                        pad_id: int = 0) -> StepTiming:
    """Time forward, loss, backward and an Adam step of ``module`` on ``batches`` (in turn).

    The same step for any model that maps (src, tgt_in) to logits, so that two models are
    compared on equal terms: Adam as in training (fused on CUDA), the label-smoothed loss,
    bf16 autocast when asked. The first ``warmup`` steps (compilation, allocator growth) are
    timed apart. This is a measuring harness; training itself is :class:`Trainer`'s.

    Args:
        module: the model, possibly wrapped in ``torch.compile``; its weights are updated.
        batches: batches on any device (moved to ``device`` once, first).
        device: where to run.
        bf16: run forward passes under bf16 autocast.
        steps: timed steps.
        warmup: untimed first steps.
        label_smoothing: eps_ls of the loss.
        pad_id: padding id of the targets.
    """
    if steps < 1 or warmup < 0 or not batches:
        raise ValueError(f"need steps >= 1, warmup >= 0 and some batches, got {steps}, {warmup}, {len(batches)}")
    on_device = [b.to(device) for b in batches]
    optimizer = paper_adam(module.parameters(), device, lr=1e-4)
    module.train()

    def autocast() -> contextlib.AbstractContextManager:
        return torch.autocast(device_type=device.type, dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()

    def step(batch: Batch) -> None:
        train_step(module, [batch], optimizer, scale=1 / batch.n_tgt_tokens, label_smoothing=label_smoothing,
                   pad_id=pad_id, autocast=autocast)

    start = time.perf_counter()
    for i in range(warmup):
        step(on_device[i % len(on_device)])
    _synchronize(device)
    first = time.perf_counter() - start
    reset_peak_memory(device)
    tokens = tgt_tokens = 0
    start = time.perf_counter()
    for i in range(steps):
        batch = on_device[(warmup + i) % len(on_device)]
        step(batch)
        tokens += batch.n_src_tokens + batch.n_tgt_tokens
        tgt_tokens += batch.n_tgt_tokens
    _synchronize(device)
    seconds = time.perf_counter() - start
    return StepTiming(seconds / steps, tokens / seconds, tgt_tokens / seconds, first, peak_memory(device), steps)


def compare_with_torch(model: Transformer, batches: Sequence[Batch], device: torch.device, *, bf16: bool = False,
                       compile: bool = False, steps: int = 20, warmup: int = 3) -> dict[str, Any]:
    """Time a training step of ``model`` and of a :class:`TorchTransformer` with the same weights.

    Both start from the same weights, on the same batches, with the same optimizer and
    precision; with ``compile`` each is wrapped in ``torch.compile`` the same way. ``model``
    itself is not changed (a copy is trained).

    Args:
        model: our :class:`Transformer`.
        batches: the batches (e.g. from :func:`synthetic_batches`).
        device: where to run.
        bf16: bf16 autocast.
        compile: ``torch.compile`` both models.
        steps, warmup: as in :func:`time_training_steps`.

    Returns:
        ``{"ours": StepTiming dict, "torch": StepTiming dict, "ratio": ours / torch tokens per second}``.
    """
    ours: nn.Module = copy.deepcopy(model).to(device)
    theirs: nn.Module = TorchTransformer(model).to(device)
    if compile:
        ours, theirs = torch.compile(ours), torch.compile(theirs)
    pad = model.config.pad_id
    timings = {}
    for name, module in (("ours", ours), ("torch", theirs)):
        timings[name] = time_training_steps(module, batches, device, bf16=bf16, steps=steps, warmup=warmup,
                                            pad_id=pad).to_dict()
    ratio = timings["ours"]["tokens_per_s"] / timings["torch"]["tokens_per_s"]
    return {**timings, "ratio": ratio}


def profile_training_step(module: nn.Module, batch: Batch, device: torch.device, *, bf16: bool = False,
                          steps: int = 3, row_limit: int = 12) -> str:
    """The PyTorch profiler's table of the most expensive operators of a few training steps.

    Args:
        module: the model.
        batch: one batch.
        device: where to run.
        bf16: bf16 autocast.
        steps: profiled steps (after one untimed step).
        row_limit: rows of the table.

    Returns:
        The table, sorted by total time (CUDA time on a GPU, else CPU time).
    """
    from torch.profiler import ProfilerActivity, profile

    time_training_steps(module, [batch], device, bf16=bf16, steps=1, warmup=0)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        time_training_steps(module, [batch], device, bf16=bf16, steps=steps, warmup=0)
    key = "cuda_time_total" if device.type == "cuda" else "cpu_time_total"
    return prof.key_averages().table(sort_by=key, row_limit=row_limit)


def alternate(runs: dict[str, Any], repeats: int) -> dict[str, list[float]]:
    """Call each of ``runs`` (name -> function returning a figure: a speed, a time) ``repeats`` times, taking turns.

    The order flips every round (ours, theirs, theirs, ours, ...), so that neither model is
    always the one that runs right after the other on a machine whose load changes. Returns
    every figure of each run, in order; the caller picks the best (fastest) of each.
    """
    names = list(runs)
    found: dict[str, list[float]] = {name: [] for name in names}
    for i in range(repeats):
        for name in (names if i % 2 == 0 else names[::-1]):
            found[name].append(runs[name]())
    return found


def _ratio_record(speeds: dict[str, list[float]], unit: str) -> dict[str, Any]:
    best = {name: max(values) for name, values in speeds.items()}  # the fastest = the least disturbed run
    return {"ours": best["ours"], "torch": best["torch"], "ratio": best["ours"] / best["torch"], "unit": unit,
            "all_ours": speeds["ours"], "all_torch": speeds["torch"]}


def side_by_side_training(model: Transformer, batches: Sequence[Batch], device: torch.device, *, repeats: int = 3,
                          steps: int = 5, compile: bool = False, bf16: bool = False) -> dict[str, Any]:
    """Training-step speed of ``model`` and of a :class:`TorchTransformer` with the same weights, alternating.

    Like :func:`compare_with_torch`, but the two models are built once and take turns
    ``repeats`` times (each turn: a fresh Adam, one untimed step, ``steps`` timed ones); the
    fastest turn of each counts. ``model`` itself is not changed (copies are trained).

    Returns:
        ``{"ours", "torch"}`` tokens (source + target, padding excluded) per second, ``"ratio"``
        ours / torch, ``"unit"``, and every turn's figure in ``"all_ours"``, ``"all_torch"``.
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    ours: nn.Module = copy.deepcopy(model).to(device)
    theirs: nn.Module = TorchTransformer(model).to(device)
    if compile:
        ours, theirs = torch.compile(ours), torch.compile(theirs)
    pad = model.config.pad_id

    def runner(module: nn.Module) -> Any:
        return lambda: time_training_steps(module, batches, device, bf16=bf16, steps=steps, warmup=1,
                                           pad_id=pad).tokens_per_s

    return _ratio_record(alternate({"ours": runner(ours), "torch": runner(theirs)}, repeats), "tokens/s")


def side_by_side_decoding(model: Transformer, src: Tensor, device: torch.device, *, new_tokens: int = 32,
                          bos_id: int = 1, repeats: int = 3, warmup: bool = True,
                          compile: bool = False) -> dict[str, Any]:
    """Greedy decoding speed: ours with the key/value cache, ``nn.Transformer`` re-running its decoder.

    Both encode ``src`` and generate exactly ``new_tokens`` tokens per sentence (no end token),
    banning the pad id and ``bos_id`` as our :func:`~minitransformer.decoding.greedy_decode`
    does by default, in eval mode without gradients. The two take turns ``repeats`` times
    after one untimed run each (``warmup=False`` leaves it out, for big models on a CPU, where
    it costs far more than it settles); the fastest of each counts. With ``compile``, the encoder and
    decoder stacks of both are compiled in place (the decoder's input grows by a token each
    step, so it recompiles for new shapes; the untimed run pays for that).

    Returns:
        As :func:`side_by_side_training`, in generated tokens per second, plus ``"agreement"``:
        the fraction of generated tokens on which the two agree (same weights, same search:
        1.0 up to rounding near-ties).
    """
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    ours = copy.deepcopy(model).to(device).eval()
    theirs = TorchTransformer(model).to(device).eval()
    src = src.to(device)
    banned = [model.config.pad_id, bos_id]
    if compile:  # in place, so that both keep their decoding methods
        for stack in (ours.encoder, ours.decoder, theirs.transformer.encoder, theirs.transformer.decoder):
            stack.compile()
    outputs: dict[str, Tensor] = {}

    def ours_once() -> Tensor:
        return greedy_decode(ours, src, new_tokens, bos_id=bos_id, eos_id=None)

    def theirs_once() -> Tensor:
        return theirs.greedy_decode(src, new_tokens, bos_id, banned)

    def timed(name: str, fn: Any) -> Any:
        def run() -> float:
            _synchronize(device)
            start = time.perf_counter()
            with torch.no_grad():
                outputs[name] = fn()
            _synchronize(device)
            return src.size(0) * new_tokens / (time.perf_counter() - start)
        return run

    runs = {"ours": timed("ours", ours_once), "torch": timed("torch", theirs_once)}
    for run in runs.values() if warmup or compile else ():
        run()  # untimed: first-call allocations (and compilation)
    record = _ratio_record(alternate(runs, repeats), "generated tokens/s")
    record["agreement"] = (outputs["ours"] == outputs["torch"]).float().mean().item()
    return record
