"""The copy task of the Annotated Transformer, kept as a test of the public API (issue 12, section 4).

Random symbols of a fixed length, no end token, and a start token that is also a real
symbol (1). Decoding it right needs ``eos_id=None`` (exactly ``max_len`` tokens) and
``banned_ids=[PAD]`` (the start symbol may be generated): with the default, which bans the
start token, every sequence holding a 1 comes out wrong.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
import torch.nn.functional as F

from minitransformer import Transformer, TransformerConfig, greedy_decode, set_seed

PAD, START = 0, 1  # START is symbol 1: a start token and a real symbol at once
VOCAB = 11  # PAD and the symbols 1..10
LENGTH = 8
MAX_STEPS = 1500  # a ceiling; training stops once the smoothed loss is below STOP_LOSS
STOP_LOSS = 0.003


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    # A model this small runs fastest on one thread, and does not slow down when other
    # processes share the cores; one thread also makes the run deterministic.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _symbols(generator: torch.Generator, n: int) -> torch.Tensor:
    return torch.randint(1, VOCAB, (n, LENGTH), generator=generator)  # (n, L), symbols 1..10


def _train_copy(norm_first: bool) -> tuple[Transformer, set[tuple[int, ...]], int]:
    """A one-layer model taught to copy; returns it, the sequences it saw and the steps taken."""
    set_seed(0)
    config = TransformerConfig.tiny(VOCAB, d_model=32, n_heads=4, d_ff=64, n_encoder_layers=1,
                                    n_decoder_layers=1, dropout=0.0, max_len=LENGTH + 1, norm_first=norm_first)
    model = Transformer(config)
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-3, betas=(0.9, 0.98), eps=1e-9)
    g = torch.Generator().manual_seed(0)
    seen: set[tuple[int, ...]] = set()
    smoothed = float("inf")
    for step in range(1, MAX_STEPS + 1):
        src = _symbols(g, 64)  # (B, L)
        seen.update(map(tuple, src.tolist()))
        tgt_in = torch.cat([torch.full((64, 1), START), src[:, :-1]], dim=1)  # (B, L): start, then shifted
        loss = F.cross_entropy(model(src, tgt_in).reshape(-1, VOCAB), src.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        smoothed = loss.item() if step == 1 else 0.9 * smoothed + 0.1 * loss.item()
        if smoothed < STOP_LOSS:
            break
    return model.eval(), seen, step


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])
def test_tiny_model_copies_held_out_sequences(norm_first):
    model, seen, steps = _train_copy(norm_first)
    test = _symbols(torch.Generator().manual_seed(123), 300)
    held_out = torch.tensor([row for row in test.tolist() if tuple(row) not in seen])  # (N, L)
    assert len(held_out) >= 290

    out = greedy_decode(model, held_out, max_len=LENGTH, bos_id=START, eos_id=None, banned_ids=[PAD])
    assert out.shape == (len(held_out), 1 + LENGTH)  # no end token: exactly max_len new tokens
    correct = (out[:, 1:] == held_out).all(dim=1)  # (N,)
    assert correct.float().mean() >= 0.95, f"{correct.float().mean():.3f} copied exactly after {steps} steps"

    # The start symbol is a real symbol here: most sequences hold a 1 and are copied all the same...
    has_start = (held_out == START).any(dim=1)  # (N,)
    assert has_start.float().mean() > 0.5
    assert correct[has_start].float().mean() >= 0.95
    # ...while the default banned_ids (pad and the start token) can never write a 1.
    default = greedy_decode(model, held_out, max_len=LENGTH, bos_id=START, eos_id=None)
    assert not (default[:, 1:] == START).any()
    assert not (default[:, 1:] == held_out).all(dim=1)[has_start].any()

    # Without the cache the same tokens come out.
    uncached = greedy_decode(model, held_out, max_len=LENGTH, bos_id=START, eos_id=None, banned_ids=[PAD],
                             use_cache=False)
    assert torch.equal(uncached, out)
