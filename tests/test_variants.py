"""The encoder-only classifier and the decoder-only language model (minitransformer.variants)."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.testing import assert_close

from minitransformer import (BagOfWordsClassifier, DecoderOnlyLM, EncoderClassifier, encoder_layer_to_torch,
                             make_causal_mask, masked_mean, next_token_probabilities, sample_next_token,
                             to_torch_nn_mask)

V = 23


def _lm(norm_first: bool = False, max_len: int = 16) -> DecoderOnlyLM:
    return DecoderOnlyLM(V, d_model=16, n_heads=4, d_ff=32, n_layers=2, max_len=max_len, dropout=0.0,
                         norm_first=norm_first).eval()


def _torch_stack(model: DecoderOnlyLM) -> nn.TransformerEncoder:
    """nn.TransformerEncoder holding a copy of the LM's layers (and final norm for pre-LN)."""
    layers = [encoder_layer_to_torch(layer) for layer in model.decoder.layers]
    norm = None
    if model.decoder.norm is not None:
        norm = nn.LayerNorm(16)
        norm.load_state_dict(model.decoder.norm.state_dict())
    stack = nn.TransformerEncoder(layers[0], num_layers=len(layers), norm=norm, enable_nested_tensor=False)
    stack.layers = nn.ModuleList(layers)
    return stack.eval()


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])
def test_lm_equals_torch_encoder_with_causal_mask(norm_first: bool):
    model = _lm(norm_first)
    tokens = torch.randint(0, V, (3, 9))
    x = model.positional(model.embed(tokens))  # (B, T, D)
    causal = to_torch_nn_mask(make_causal_mask(9))  # (T, T), True = blocked
    with torch.no_grad():
        theirs = _torch_stack(model)(x, mask=causal, is_causal=True)
        ours = model.hidden_states(tokens)[0]
        assert_close(ours, theirs, atol=1e-5, rtol=1e-4)
        assert_close(model(tokens), theirs @ model.embed.weight.T, atol=1e-5, rtol=1e-4)


def test_lm_output_layer_is_tied_to_the_embedding():
    model = _lm()
    assert model.generator.weight is model.embed.embedding.weight
    # parameters() lists a shared tensor once: embedding + the layers, no second (V, D) matrix.
    n_layers = sum(p.numel() for p in model.decoder.parameters())
    assert sum(p.numel() for p in model.parameters()) == V * 16 + n_layers


def test_lm_is_causal():
    model = _lm()
    tokens = torch.randint(0, V, (2, 10))
    changed = tokens.clone()
    changed[:, 6] = (changed[:, 6] + 1) % V  # perturb one future token
    with torch.no_grad():
        before, after = model(tokens), model(changed)
    assert_close(before[:, :6], after[:, :6])  # positions 0..5 cannot see position 6
    assert not torch.allclose(before[:, 6:], after[:, 6:])


def test_lm_attention_maps_are_causal():
    maps = _lm().attention_maps(torch.randint(0, V, (2, 7)))
    assert len(maps) == 2 and maps[0].shape == (2, 4, 7, 7)
    assert torch.all(maps[1].triu(diagonal=1) == 0)
    assert_close(maps[0].sum(-1), torch.ones(2, 4, 7))


def test_cached_forward_equals_full_forward():
    model = _lm(norm_first=True)
    tokens = torch.randint(0, V, (2, 11))
    with torch.no_grad():
        full = model(tokens)
        cache = model.new_cache()
        parts = [model(tokens[:, :4], cache), model(tokens[:, 4:5], cache), model(tokens[:, 5:], cache)]
    assert cache.length == 11
    assert_close(torch.cat(parts, dim=1), full, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])
def test_generate_with_cache_equals_without(norm_first: bool):
    model = _lm(norm_first, max_len=12)
    prompt = torch.randint(0, V, (2, 3))
    for kwargs in ({"temperature": 0.0}, {"temperature": 0.9, "top_k": 5, "seed": 3}, {"temperature": 1.3, "seed": 7}):
        # 20 new tokens pass max_len=12: the sliding window is tested too.
        cached = model.generate(prompt, 20, use_cache=True, **kwargs)
        plain = model.generate(prompt, 20, use_cache=False, **kwargs)
        assert cached.shape == (2, 23)
        assert torch.equal(cached, plain), kwargs
        assert torch.equal(cached[:, :3], prompt)


def test_greedy_generation_is_argmax_of_the_full_forward():
    model = _lm()
    ids = model.generate(torch.tensor([4, 9, 1]), 6, temperature=0.0)
    assert ids.shape == (9,)
    with torch.no_grad():
        logits = model(ids[None, :-1])[0]  # (T - 1, V)
    assert torch.equal(logits[2:].argmax(-1), ids[3:])
    assert torch.equal(model.generate(torch.tensor([4, 9, 1]), 6, temperature=0.7, top_k=1, seed=0), ids)


def test_seeded_generation_is_reproducible_and_leaves_global_rng_alone():
    model = _lm()
    state = torch.random.get_rng_state()
    a = model.generate(torch.tensor([[1, 2]]), 8, temperature=1.0, seed=5)
    assert torch.equal(torch.random.get_rng_state(), state)
    assert torch.equal(a, model.generate(torch.tensor([[1, 2]]), 8, temperature=1.0, seed=5))


def test_temperature_zero_and_top_k_one_are_argmax():
    logits = torch.randn(5, V)
    argmax = logits.argmax(-1, keepdim=True)
    assert torch.equal(sample_next_token(logits, temperature=0.0), argmax)
    assert torch.equal(sample_next_token(logits, temperature=2.0, top_k=1), argmax)
    assert torch.equal(next_token_probabilities(logits, 0.0).argmax(-1, keepdim=True), argmax)
    assert_close(next_token_probabilities(logits, 0.0).sum(-1), torch.ones(5))


def test_top_k_and_temperature_distribution():
    logits = torch.tensor([[2.0, 1.0, 0.5, -1.0, 3.0]])
    probs = next_token_probabilities(logits, temperature=0.5, top_k=2)
    expected = torch.zeros(1, 5)
    expected[0, [4, 0]] = torch.softmax(torch.tensor([3.0, 2.0]) / 0.5, dim=0)
    assert_close(probs, expected)
    assert_close(next_token_probabilities(logits, 1.0), torch.softmax(logits, -1))
    draws = torch.cat([sample_next_token(logits, 1.0, top_k=2, generator=torch.Generator().manual_seed(s))
                       for s in range(50)])
    assert set(draws.flatten().tolist()) <= {0, 4}


@pytest.mark.parametrize("call, argument", [
    (lambda m: m.generate(torch.arange(17) % V, 2), "prompt_ids"),
    (lambda m: m.generate(torch.zeros(0, dtype=torch.long), 2), "prompt_ids"),
    (lambda m: m.generate(torch.zeros(2, 0, dtype=torch.long), 2), "prompt_ids"),
    (lambda m: m.generate(torch.tensor([1, 2]), 2, top_k=V + 1), "top_k"),
    (lambda m: m.generate(torch.tensor([1, 2]), 2, top_k=0), "top_k"),
    (lambda m: m.generate(torch.tensor([1, 2]), 2, temperature=-0.1), "temperature"),
    (lambda m: m.generate(torch.tensor([1, 2]), -1), "max_new_tokens"),
    (lambda m: m(torch.zeros(1, 17, dtype=torch.long)), "max_len"),
], ids=["prompt too long", "empty prompt", "empty batch prompt", "top_k > V", "top_k 0", "negative temperature",
        "negative max_new_tokens", "input too long"])
def test_bad_input_names_the_argument(call, argument: str):
    with pytest.raises(ValueError, match=argument) as info:
        call(_lm())
    assert "got" in str(info.value) or "expected" in str(info.value)


def test_bad_input_messages_say_expected_and_given():
    with pytest.raises(ValueError, match=r"prompt_ids has 17 tokens but the model's max_len is 16"):
        _lm().generate(torch.arange(17) % V, 1)
    with pytest.raises(ValueError, match=r"top_k must be None or an integer from 1 to the vocabulary size 23, got 24"):
        _lm().generate(torch.tensor([1]), 1, top_k=24)
    with pytest.raises(ValueError, match=r"temperature must be a number >= 0.*got -1"):
        next_token_probabilities(torch.zeros(1, 3), temperature=-1)


def test_generation_restores_training_mode():
    model = _lm().train()
    model.generate(torch.tensor([1, 2]), 3, temperature=0.0)
    assert model.training


# ---------------------------------------------------------------------------------------------
# Encoder-only classifier
# ---------------------------------------------------------------------------------------------

def _classifier(norm_first: bool = False) -> EncoderClassifier:
    return EncoderClassifier(V, 3, d_model=16, n_heads=4, d_ff=32, n_layers=2, max_len=20, dropout=0.0,
                             norm_first=norm_first).eval()


@pytest.mark.parametrize("norm_first", [False, True], ids=["post-LN", "pre-LN"])
def test_classifier_ignores_padding(norm_first: bool):
    model = _classifier(norm_first)
    tokens = torch.tensor([[5, 6, 7, 8], [9, 10, 11, 12]])
    padded = torch.cat([tokens, torch.zeros(2, 5, dtype=torch.long)], dim=1)
    with torch.no_grad():
        out = model(tokens)
        assert out.shape == (2, 3)
        assert_close(model(padded), out, atol=1e-5, rtol=1e-4)
        # One row padded to the other's length: the same logits as alone.
        mixed = torch.tensor([[5, 6, 7, 8], [9, 10, 0, 0]])
        assert_close(model(mixed)[1], model(torch.tensor([[9, 10]]))[0], atol=1e-5, rtol=1e-4)


def test_classifier_sees_word_order():
    model = _classifier()
    with torch.no_grad():
        assert not torch.allclose(model(torch.tensor([[5, 6, 7]])), model(torch.tensor([[7, 6, 5]])))


def test_masked_mean():
    x = torch.arange(12.0).view(2, 3, 2)
    keep = torch.tensor([[True, True, False], [True, False, False]])
    assert_close(masked_mean(x, keep), torch.tensor([[1.0, 2.0], [6.0, 7.0]]))
    assert_close(masked_mean(x, torch.zeros(2, 3, dtype=torch.bool)), torch.zeros(2, 2))
    with pytest.raises(ValueError, match="keep must have shape"):
        masked_mean(x, keep[:, :2])


def test_bag_of_words_is_blind_to_order_and_padding():
    model = BagOfWordsClassifier(V, 2)
    with torch.no_grad():
        model.weight.weight.normal_()
        model.weight.weight[0] = 0
    a = model(torch.tensor([[3, 4, 5, 0, 0]]))
    assert_close(a, model(torch.tensor([[5, 3, 4]])))
    counts = torch.zeros(1, V)
    counts[0, [3, 4, 5]] = 1
    assert_close(a, counts @ model.weight.weight + model.bias)


def test_classifier_learns_word_order():
    """A few steps suffice to tell sorted from reversed sequences, which a bag of words cannot."""
    torch.manual_seed(0)
    model = EncoderClassifier(12, 2, d_model=16, n_heads=2, d_ff=32, n_layers=1, max_len=8, dropout=0.0)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(60):
        x = torch.randint(1, 12, (32, 5)).sort(dim=1).values  # (B, 5)
        y = torch.randint(0, 2, (32,))
        x = torch.where(y[:, None].bool(), x, x.flip(1))
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert loss.item() < 0.3
