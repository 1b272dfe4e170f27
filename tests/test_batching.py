"""Token-budget batches, DDP sharding, and the collate with the right-shifted target."""

from __future__ import annotations

import random
from collections import Counter

import pytest
import torch

from minitransformer.data import Batch, TokenBatchSampler, collate_pairs, padding_fraction


@pytest.fixture(scope="module")
def lengths() -> tuple[list[int], list[int]]:
    """Sentence lengths shaped like Multi30k's: targets correlate with sources."""
    rng = random.Random(0)
    src = [max(2, int(rng.gauss(15, 5))) for _ in range(3000)]
    tgt = [max(2, s + rng.randint(-4, 4)) for s in src]
    return src, tgt


def test_no_batch_exceeds_budget(lengths: tuple[list[int], list[int]]) -> None:
    src, tgt = lengths
    for max_tokens in (40, 500, 4000):
        for batch in TokenBatchSampler(src, tgt, max_tokens, seed=1):
            assert len(batch) * max(src[i] for i in batch) <= max_tokens
            assert len(batch) * max(tgt[i] for i in batch) <= max_tokens


def test_every_pair_once_per_epoch(lengths: tuple[list[int], list[int]]) -> None:
    sampler = TokenBatchSampler(*lengths, max_tokens=1000, seed=2)
    for epoch in range(3):
        sampler.set_epoch(epoch)
        batches = list(sampler)
        assert len(batches) == len(sampler)
        assert sorted(i for b in batches for i in b) == list(range(3000))


def test_epochs_shuffle_differently_but_deterministically(lengths: tuple[list[int], list[int]]) -> None:
    def epoch_batches(seed: int, epoch: int) -> list[list[int]]:
        sampler = TokenBatchSampler(*lengths, max_tokens=1000, seed=seed)
        sampler.set_epoch(epoch)
        return list(sampler)

    assert epoch_batches(0, 0) == epoch_batches(0, 0)
    assert epoch_batches(0, 0) != epoch_batches(0, 1)
    assert epoch_batches(0, 1) != epoch_batches(1, 1)
    fixed = TokenBatchSampler(*lengths, max_tokens=1000, shuffle=False)
    first = list(fixed)
    fixed.set_epoch(5)
    assert list(fixed) == first


@pytest.mark.parametrize("world_size", [2, 3, 8])
def test_ddp_shards_are_disjoint_equal_and_complete(lengths: tuple[list[int], list[int]], world_size: int) -> None:
    src, tgt = lengths
    shards = []
    for rank in range(world_size):
        sampler = TokenBatchSampler(src, tgt, 1000, seed=3, rank=rank, world_size=world_size)
        sampler.set_epoch(4)
        shards.append(list(sampler))
        assert len(shards[-1]) == len(sampler)
    assert len({len(s) for s in shards}) == 1  # same number of batches on every rank
    counts = Counter(i for shard in shards for batch in shard for i in batch)
    assert sorted(counts) == list(range(3000)) and set(counts.values()) == {1}
    for shard in shards:
        for batch in shard:
            assert len(batch) * max(max(src[i], tgt[i]) for i in batch) <= 1000


def test_padding_much_lower_than_random_batching(lengths: tuple[list[int], list[int]]) -> None:
    src, tgt = lengths
    bucketed = padding_fraction(list(TokenBatchSampler(src, tgt, 2000)), src, tgt)
    unsorted = padding_fraction(list(TokenBatchSampler(src, tgt, 2000, bucket=False)), src, tgt)
    assert bucketed < 0.15 and unsorted > 0.3 and bucketed < unsorted / 3  # measured: 0.09 and 0.47
    assert padding_fraction([[0, 1]], [3, 1], [2, 2]) == pytest.approx(1 - 8 / 10)


def test_sampler_errors_are_clear() -> None:
    with pytest.raises(ValueError, match="pair 1 has 30 source and 4 target tokens, more than max_tokens=20"):
        TokenBatchSampler([5, 30], [5, 4], max_tokens=20)
    with pytest.raises(ValueError, match="2 source and 3 target lengths"):
        TokenBatchSampler([5, 6], [5, 6, 7], max_tokens=20)
    with pytest.raises(ValueError, match="rank < world_size"):
        TokenBatchSampler([5, 6], [5, 6], max_tokens=20, rank=2, world_size=2)
    with pytest.raises(ValueError, match="single-pair batches"):
        TokenBatchSampler([9, 9, 9], [9, 9, 9], max_tokens=10, world_size=2).all_batches()


def test_collate_pads_and_shifts_target() -> None:
    pad, bos, eos = 0, 1, 2
    pairs = [([5, 6, 7, eos], [8, 9, eos]), ([5, eos], [8, 9, 10, 11, eos])]
    batch = collate_pairs(pairs, pad_id=pad, bos_id=bos, eos_id=eos)
    assert isinstance(batch, Batch) and len(batch) == 2
    assert batch.src.dtype == torch.long and batch.src.shape == (2, 4)
    assert batch.tgt_in.shape == batch.tgt_out.shape == (2, 5)
    torch.testing.assert_close(batch.src, torch.tensor([[5, 6, 7, eos], [5, eos, pad, pad]]))
    torch.testing.assert_close(batch.tgt_in, torch.tensor([[bos, 8, 9, pad, pad], [bos, 8, 9, 10, 11]]))
    torch.testing.assert_close(batch.tgt_out, torch.tensor([[8, 9, eos, pad, pad], [8, 9, 10, 11, eos]]))
    # Right shift: the decoder input is the output delayed by one step.
    torch.testing.assert_close(batch.tgt_in[:, 1:][batch.tgt_in[:, 1:] != pad], batch.tgt_out[:, :-1][batch.tgt_in[:, 1:] != pad])
    assert (batch.n_src_tokens, batch.n_tgt_tokens) == (6, 8)
    moved = batch.to("cpu")
    assert moved.src.device.type == "cpu" and moved.n_tgt_tokens == 8


def test_collate_rejects_badly_encoded_targets() -> None:
    with pytest.raises(ValueError, match="ending with eos_id=2"):
        collate_pairs([([5, 2], [8, 9])], pad_id=0, bos_id=1, eos_id=2)
    with pytest.raises(ValueError, match="start with bos_id=1"):
        collate_pairs([([5, 2], [1, 8, 2])], pad_id=0, bos_id=1, eos_id=2)


def test_sampler_and_collate_sizes_agree(lengths: tuple[list[int], list[int]]) -> None:
    src, tgt = lengths
    rng = random.Random(5)
    pairs = [([rng.randint(4, 99) for _ in range(s - 1)] + [2], [rng.randint(4, 99) for _ in range(t - 1)] + [2]) for s, t in zip(src, tgt)]
    for indices in TokenBatchSampler(src, tgt, 800, seed=0):
        batch = collate_pairs([pairs[i] for i in indices], 0, 1, 2)
        assert batch.src.numel() <= 800 and batch.tgt_out.numel() <= 800
