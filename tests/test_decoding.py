import pytest
import torch

from minitransformer import Transformer, TransformerConfig, beam_search, greedy_decode, length_penalty, set_seed

PAD, BOS, EOS = 0, 1, 2
VOCAB = 13


def _copy_batch(batch_size: int, length: int, vocab: int = VOCAB) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    body = torch.randint(3, vocab, (batch_size, length))
    src = torch.cat([body, torch.full((batch_size, 1), EOS)], dim=1)
    tgt_in = torch.cat([torch.full((batch_size, 1), BOS), body], dim=1)
    tgt_out = torch.cat([body, torch.full((batch_size, 1), EOS)], dim=1)
    return src, tgt_in, tgt_out


def _train_copy(steps: int) -> tuple[Transformer, float]:
    set_seed(0)
    # Xavier-started: the seeded cases below (where beam search beats greedy) were found with it.
    model = Transformer(TransformerConfig.tiny(VOCAB, d_model=64, n_heads=4, d_ff=128, dropout=0.0,
                                               embedding_init="xavier"))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.98), eps=1e-9)
    loss = torch.tensor(float("nan"))
    for _ in range(steps):
        src, tgt_in, tgt_out = _copy_batch(64, 8)
        logits = model(src, tgt_in)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), tgt_out.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if loss.item() < 0.002:
            break
    return model.eval(), loss.item()


@pytest.fixture(scope="module")
def copy_model() -> Transformer:
    return _train_copy(900)[0]


@pytest.fixture(scope="module")
def half_trained() -> Transformer:
    # Stopped early: its outputs vary in length and it is unsure, so the searches differ.
    return _train_copy(60)[0]


def test_tiny_model_learns_to_copy_and_greedy_decoding_reproduces_it(copy_model):
    set_seed(1)
    src, _, tgt_out = _copy_batch(32, 8)
    out = greedy_decode(copy_model, src, max_len=12, bos_id=BOS, eos_id=EOS)
    assert out.shape == (32, 10)
    assert torch.equal(out[:, 1:], tgt_out)
    assert torch.equal(beam_search(copy_model, src, BOS, EOS, beam_size=4)[:, 1:], tgt_out)


def test_each_sentence_stops_at_its_own_end_token(half_trained):
    set_seed(2)
    src = torch.cat([_copy_batch(8, 3)[0], torch.full((8, 5), PAD)], dim=1)
    src[:4] = _copy_batch(4, 8)[0]
    for out in (greedy_decode(half_trained, src, max_len=15, bos_id=BOS, eos_id=EOS),
                beam_search(half_trained, src, BOS, EOS, beam_size=3, max_len=15)):
        assert torch.all(out[:, 0] == BOS)
        ends = [row.index(EOS) if EOS in row else None for row in out.tolist()]
        assert len(set(ends)) > 1, ends  # different sentences end at different steps
        for row, end in zip(out.tolist(), ends):
            if end is not None:
                assert all(t == PAD for t in row[end + 1:]), row


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_beam_of_one_is_greedy(half_trained, seed):
    set_seed(seed)
    src = _copy_batch(16, 6)[0]
    greedy = greedy_decode(half_trained, src, max_len=10, bos_id=BOS, eos_id=EOS)
    beam = beam_search(half_trained, src, BOS, EOS, beam_size=1, max_len=10)
    assert torch.equal(greedy, beam)


def test_cache_gives_the_same_tokens(half_trained):
    set_seed(3)
    src = _copy_batch(16, 7)[0]
    src[8:, 4:] = PAD
    assert torch.equal(greedy_decode(half_trained, src, 12, BOS, EOS, use_cache=True),
                       greedy_decode(half_trained, src, 12, BOS, EOS, use_cache=False))
    assert torch.equal(beam_search(half_trained, src, BOS, EOS, beam_size=4, use_cache=True),
                       beam_search(half_trained, src, BOS, EOS, beam_size=4, use_cache=False))


def test_cached_decoder_states_equal_full_recomputation():
    set_seed(4)
    model = Transformer(TransformerConfig.tiny(20, dropout=0.0, norm_first=True)).eval()
    src, tgt = torch.randint(3, 20, (2, 6)), torch.randint(3, 20, (2, 7))
    memory = model.encode(src)
    full = model.decode(tgt, memory)
    cache = model.new_cache()
    steps = [model.decode(tgt[:, :3], memory, cache=cache)]  # a prefix of 3 at once, then one by one
    steps += [model.decode(tgt[:, t:t + 1], memory, cache=cache) for t in range(3, 7)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)
    assert cache.length == 7


def test_beam_search_finds_likelier_outputs_than_greedy(half_trained):
    set_seed(5)
    src = _copy_batch(32, 8)[0]
    greedy = greedy_decode(half_trained, src, 14, BOS, EOS)
    beam = beam_search(half_trained, src, BOS, EOS, beam_size=4, alpha=0.0, max_len=14)

    def log_prob(out: torch.Tensor) -> torch.Tensor:
        logits = half_trained(src, out[:, :-1])
        lp = torch.log_softmax(logits, -1).gather(-1, out[:, 1:, None])[..., 0]
        return lp.masked_fill(out[:, 1:] == PAD, 0).sum(-1)

    with torch.no_grad():
        assert torch.all(log_prob(beam) >= log_prob(greedy) - 1e-4)


def test_length_penalty_and_bad_arguments(copy_model):
    assert float(length_penalty(1, 0.6)) == pytest.approx(1.0)
    assert float(length_penalty(10, 0.0)) == 1.0
    with pytest.raises(ValueError, match="beam_size must be at least 1, got 0"):
        beam_search(copy_model, torch.ones(1, 3, dtype=torch.long), BOS, EOS, beam_size=0)
    with pytest.raises(ValueError, match=r"src must be token ids of shape \(B, S\)"):
        greedy_decode(copy_model, torch.ones(3, dtype=torch.long), 5, BOS, EOS)


def test_padding_and_start_tokens_are_never_generated():
    set_seed(6)
    model = Transformer(TransformerConfig.tiny(VOCAB, dropout=0.0)).eval()
    with torch.no_grad():  # make pad and bos the most likely tokens everywhere
        model.generator.weight[PAD] = model.generator.weight[3] * 50
        model.generator.weight[BOS] = model.generator.weight[3] * 40
    src = _copy_batch(4, 5)[0]
    for use_cache in (True, False):
        out = greedy_decode(model, src, 6, BOS, EOS, use_cache=use_cache)
        assert not torch.any(out[:, 1:] == PAD) and not torch.any(out[:, 1:] == BOS)
        beam = beam_search(model, src, BOS, EOS, beam_size=3, max_len=6, use_cache=use_cache)
        assert not torch.any(beam[:, 1:] == BOS)


def _biased_model(max_len: int = 512) -> Transformer:
    """A random model that prefers pad most, then the start token, then symbol 3, at every step."""
    set_seed(7)
    model = Transformer(TransformerConfig.tiny(VOCAB, dropout=0.0, max_len=max_len)).eval()
    with torch.no_grad():
        model.generator.weight[PAD] = model.generator.weight[3] * 50
        model.generator.weight[BOS] = model.generator.weight[3] * 40
    return model


@pytest.mark.parametrize("use_cache", [True, False])
def test_banned_ids_are_explicit_and_both_cache_paths_agree(use_cache):
    model = _biased_model()
    src = _copy_batch(4, 5)[0]
    cases = {None: {PAD, BOS}, (PAD,): {PAD}, (): set()}  # banned_ids -> ids that must not appear
    for banned, never in cases.items():
        banned_ids = None if banned is None else list(banned)
        greedy = greedy_decode(model, src, 6, BOS, EOS, use_cache=use_cache, banned_ids=banned_ids)
        beam = beam_search(model, src, BOS, EOS, beam_size=3, max_len=6, use_cache=use_cache, banned_ids=banned_ids)
        for out in (greedy, beam):
            generated = set(out[:, 1:].flatten().tolist())
            assert not generated & never, (banned, generated)
        if banned == (PAD,):
            assert BOS in set(greedy[:, 1:].flatten().tolist())  # the start symbol is an output now
        if banned == ():
            assert PAD in set(greedy[:, 1:].flatten().tolist())
        # A generated pad is a token, not padding: with and without the cache it is read alike.
        assert torch.equal(greedy, greedy_decode(model, src, 6, BOS, EOS, use_cache=not use_cache,
                                                 banned_ids=banned_ids))
        assert torch.equal(beam, beam_search(model, src, BOS, EOS, beam_size=3, max_len=6,
                                             use_cache=not use_cache, banned_ids=banned_ids))


def test_without_end_token_exactly_max_len_tokens_come_out(half_trained):
    set_seed(8)
    src = _copy_batch(6, 4)[0]
    greedy = greedy_decode(half_trained, src, 9, BOS, eos_id=None)
    assert greedy.shape == (6, 10) and torch.all(greedy[:, 0] == BOS)
    beam = beam_search(half_trained, src, BOS, None, beam_size=3, max_len=9)
    assert beam.shape == (6, 10)
    assert torch.equal(beam_search(half_trained, src, BOS, None, beam_size=1, max_len=9), greedy)
    assert not torch.any(greedy == PAD)  # nothing is padded: no sentence ever ends
    # With an end token the same steps are taken up to each sentence's end.
    with_end = greedy_decode(half_trained, src, 9, BOS, EOS)
    ended = 0
    for row, row_with_end in zip(greedy.tolist(), with_end.tolist()):
        if EOS in row_with_end:
            end = row_with_end.index(EOS)
            assert row[:end + 1] == row_with_end[:end + 1]
            ended += 1
    assert ended > 0


def test_start_token_equal_to_pad_is_refused():
    model = _biased_model()
    src = _copy_batch(2, 4)[0]
    with pytest.raises(ValueError, match=r"bos_id=0 is also the model.s pad id"):
        greedy_decode(model, src, 5, bos_id=PAD, eos_id=EOS)
    with pytest.raises(ValueError, match=r"bos_id=0 is also the model.s pad id"):
        beam_search(model, src, bos_id=PAD, eos_id=EOS)


def test_max_len_is_checked_against_the_positional_table_before_decoding(monkeypatch):
    model = _biased_model(max_len=16)
    src = _copy_batch(2, 4)[0]
    assert greedy_decode(model, src, 16, BOS, None).shape == (2, 17)  # the decoder reads 16 positions: fits
    # The default beam limit (source length + 50) is cut to the table.
    assert beam_search(model, src, BOS, None, beam_size=2).size(1) <= 17

    def never(*args, **kwargs):
        raise AssertionError("decoding started before the arguments were checked")

    monkeypatch.setattr(model, "encode", never)
    with pytest.raises(ValueError, match=r"max_len=17 is longer than the model's positional table \(config.max_len=16\)"):
        greedy_decode(model, src, 17, BOS, EOS)
    with pytest.raises(ValueError, match=r"max_len=40 is longer than .*config.max_len=16"):
        beam_search(model, src, BOS, EOS, max_len=40)
