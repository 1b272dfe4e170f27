"""torch.compile over the model and the training run, on the CPU.

The GPU profile trains with ``torch.compile`` (and bf16), a path no CPU lesson takes. These
tests compile with dynamo's ``eager`` backend, which traces the Python code exactly as the
GPU's inductor backend does but skips code generation, so a model that cannot be traced, or
that breaks into several graphs, fails here in seconds instead of on a rented GPU.
``fullgraph=True`` turns every graph break into an error: a break costs speed on a GPU.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from minitransformer import Transformer, TransformerConfig
from minitransformer.training import TrainOptions, read_log, train

# Batches of different lengths, as the bucketed batches of a training run: after the second
# shape dynamo recompiles with symbolic (dynamic) lengths, where Python code that needs a
# concrete int (formatting, an isinstance check, a call into the OS) fails to trace.
SHAPES = [(3, 7, 5), (3, 9, 6), (2, 11, 8)]  # (B, S, T)


def _config(**changes: Any) -> TransformerConfig:
    return TransformerConfig.tiny(40, **{"d_model": 16, "n_heads": 2, "d_ff": 32, "n_encoder_layers": 2,
                                         "n_decoder_layers": 2, **changes})


def _batch(batch: int, src_len: int, tgt_len: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(1, 40, (batch, src_len), generator=g)  # (B, S)
    tgt = torch.randint(1, 40, (batch, tgt_len), generator=g)  # (B, T)
    src[0, -2:] = 0  # some padding on both sides
    tgt[-1, -1] = 0
    return src, tgt


@pytest.mark.parametrize("changes", [
    {},
    {"norm_first": True, "tie_embeddings": True},
    {"positional": "learned", "d_qk": 4},
], ids=["paper", "pre-ln-tied", "learned-dqk"])
def test_the_model_compiles_to_one_graph_and_matches_eager(changes: dict[str, Any]) -> None:
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = Transformer(_config(**changes))
    compiled = torch.compile(model, backend="eager", fullgraph=True)
    for i, (b, s, t) in enumerate(SHAPES):
        src, tgt = _batch(b, s, t, seed=i)
        model.train()
        compiled(src, tgt).float().logsumexp(-1).mean().backward()  # dropout on, gradients through
        assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters() if p.requires_grad)
        model.zero_grad()
        model.eval()
        with torch.no_grad():
            torch.testing.assert_close(compiled(src, tgt), model(src, tgt), rtol=1e-5, atol=1e-5)


def test_the_model_compiles_under_bf16_autocast() -> None:
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = Transformer(_config()).eval()
    compiled = torch.compile(model, backend="eager", fullgraph=True)
    for i, (b, s, t) in enumerate(SHAPES):
        src, tgt = _batch(b, s, t, seed=i)
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            ours, reference = compiled(src, tgt), model(src, tgt)
        assert ours.dtype == torch.bfloat16
        torch.testing.assert_close(ours, reference)


def test_a_compiled_bf16_training_run_traces_to_one_graph(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The training run's own torch.compile call, made strict: any break in the graph fails.
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("TQDM_DISABLE", "1")
    calls: list[Any] = []
    real_compile = torch.compile

    def strict_compile(module: Any, **kwargs: Any) -> Any:
        calls.append(module)
        return real_compile(module, **{**kwargs, "backend": "eager", "fullgraph": True})

    monkeypatch.setattr(torch, "compile", strict_compile)
    torch._dynamo.reset()
    result = train(TrainOptions(dataset="dates", train_size=60, vocab_size=1000, d_model=16, n_heads=2, d_ff=32,
                                layers=1, batch_tokens=200, warmup=10, max_steps=6, eval_sentences=8, log_every=1,
                                show=0, target=None, compile=True, precision="bf16", out=str(tmp_path / "run")))
    assert len(calls) == 1 and isinstance(calls[0], Transformer)
    losses = [r["loss"] for r in read_log(tmp_path / "run" / "log.jsonl") if r["event"] == "train"]
    assert len(losses) == 6 and all(torch.isfinite(torch.tensor(losses)))
    assert result is not None


def test_strict_compile_catches_a_graph_break() -> None:
    # The check above can fail: a model that calls into the OS mid-forward is refused.
    import os

    class Breaks(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * os.sysconf("SC_PAGE_SIZE")

    torch._dynamo.reset()
    with pytest.raises(Exception, match="(?i)sysconf|graph break|unsupported"):
        torch.compile(Breaks(), backend="eager", fullgraph=True)(torch.ones(2))


def test_the_compiled_comparison_traces_our_model_to_one_graph(monkeypatch: pytest.MonkeyPatch) -> None:
    # benchmarks.gpu_profile times a compiled step of our model against nn.Transformer's: a break in
    # our graph would tilt the ratio. nn.Transformer is PyTorch's own and is compiled as it comes.
    from benchmarks.harness import compare_with_torch, synthetic_batches

    real_compile = torch.compile
    strict: list[bool] = []

    def compile_ours_strictly(module: Any, **kwargs: Any) -> Any:
        strict.append(isinstance(module, Transformer))
        return real_compile(module, **{**kwargs, "backend": "eager", "fullgraph": isinstance(module, Transformer)})

    monkeypatch.setattr(torch, "compile", compile_ours_strictly)
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = Transformer(_config(dropout=0.0))
    batches = synthetic_batches(40, batch_tokens=64, length=8, count=2)
    found = compare_with_torch(model, batches, torch.device("cpu"), compile=True, steps=2, warmup=1)
    assert strict == [True, False]
    assert found["ours"]["tokens_per_s"] > 0 and found["torch"]["tokens_per_s"] > 0
