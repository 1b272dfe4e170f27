"""The checks of exercise 09 (minitransformer.checks.lesson09): correct code passes, each usual mistake is named."""

from __future__ import annotations

import math
import re

import pytest
import torch

from minitransformer import DecoderOnlyLM, masked_mean, next_token_probabilities
from minitransformer.checks import (check_decoder_only_logits, check_family_choice, check_masked_mean,
                                    check_next_token_probabilities)
from minitransformer.checks import compare
from minitransformer.checks.lesson09 import APPLICATIONS, FAMILIES


# ---------------------------------------------------------------------------------------------
# Task 1: decoder-only logits
# ---------------------------------------------------------------------------------------------

def _lm_logits(model: DecoderOnlyLM, tokens: torch.Tensor, *, mask: str = "tril", scale: bool = True,
               positions: bool = True, final_norm: bool = True, last_only: bool = False) -> torch.Tensor:
    T = tokens.size(1)
    ones = torch.ones(T, T, dtype=torch.bool)
    masks = {"tril": ones.tril()[None, None], "none": None, "triu": ones.triu()[None, None],
             "strict": ones.tril(-1)[None, None]}
    x = model.embed.embedding(tokens) * (math.sqrt(model.embed.d_model) if scale else 1.0)
    if positions:
        x = x + model.positional.pe[:T]
    for layer in model.decoder.layers:
        x = layer(x, masks[mask])
    if final_norm and model.decoder.norm is not None:
        x = model.decoder.norm(x)
    logits = x @ model.embed.embedding.weight.T
    return logits[:, -1] if last_only else logits


@pytest.fixture
def package_judged_as_learner(monkeypatch):
    """The package's own functions passed as the learner's: their operations are not judged (they are the reference)."""
    monkeypatch.setattr(compare, "JUDGE", False)


def test_decoder_only_logits_by_hand_passes(capsys: pytest.CaptureFixture[str]):
    check_decoder_only_logits(_lm_logits, task=1)
    assert "Task 1 passed" in capsys.readouterr().out
    with pytest.raises(AssertionError, match=r"not model\(tokens\); your code called minitransformer's DecoderOnlyLM"):
        check_decoder_only_logits(lambda model, tokens: model(tokens))  # right numbers, not built


def test_the_model_s_own_forward_gives_the_right_logits(package_judged_as_learner, capsys):
    check_decoder_only_logits(lambda model, tokens: model(tokens))
    assert "passed" in capsys.readouterr().out


@pytest.mark.parametrize("kwargs, message", [
    ({"mask": "none"}, "No causal mask"),
    ({"mask": "triu"}, "upside down"),
    ({"mask": "strict"}, "hides the diagonal"),
    ({"scale": False}, r"sqrt\(d_model\)"),
    ({"positions": False}, "positions are missing"),
    ({"final_norm": False}, "final LayerNorm is missing"),
    ({"last_only": True}, "only one row per sequence"),
])
def test_decoder_only_logits_names_the_mistake(kwargs: dict, message: str):
    with pytest.raises(AssertionError, match=message):
        check_decoder_only_logits(lambda model, tokens: _lm_logits(model, tokens, **kwargs), task=1)


def test_decoder_only_logits_untied_output_gets_the_fallback_hint():
    def untied(model, tokens):
        return _lm_logits(model, tokens) + 0.5

    with pytest.raises(AssertionError, match="The output layer is tied"):
        check_decoder_only_logits(untied)


def test_decoder_only_logits_reports_the_learners_error():
    def broken(model, tokens):
        raise KeyError("oops")

    with pytest.raises(AssertionError, match=r"broken\(model \(post-LN\), tokens \(2, 6\)\) raised KeyError"):
        check_decoder_only_logits(broken)


# ---------------------------------------------------------------------------------------------
# Task 2: temperature and top-k
# ---------------------------------------------------------------------------------------------

def _probs(logits, temperature, top_k, *, mode: str = "right"):
    if temperature == 0 or top_k == 1:
        if mode == "nan_at_zero" and temperature == 0:
            return torch.softmax(logits / temperature, -1)
        return torch.zeros_like(logits).scatter_(-1, logits.argmax(-1, keepdim=True), 1.0)
    k = top_k if top_k is not None else logits.size(-1)
    tau = {"multiply": 1 / temperature, "ignore_tau": 1.0}.get(mode, temperature)
    if mode == "ignore_k":
        k = logits.size(-1)
    if mode == "plus_one":
        k = min(k + 1, logits.size(-1)) if top_k is not None else k
    if mode == "minus_one" and top_k is not None:
        k = k - 1
    largest = mode != "smallest"
    bound = logits.topk(k, dim=-1, largest=largest).values[..., -1:]
    filtered = logits.masked_fill(logits < bound if largest else logits > bound, float("-inf"))
    if mode == "no_renorm":
        return torch.softmax(logits / tau, -1) * torch.isfinite(filtered)
    if mode == "logits":
        return filtered / tau
    return torch.softmax(filtered / tau, -1)


def test_next_token_probabilities_passes(capsys: pytest.CaptureFixture[str], package_judged_as_learner):
    check_next_token_probabilities(_probs, task=2)
    check_next_token_probabilities(next_token_probabilities)
    assert "Task 2 passed" in capsys.readouterr().out


@pytest.mark.parametrize("mode, message", [
    ("multiply", "multiplies the logits"),
    ("ignore_tau", "temperature is ignored"),
    ("ignore_k", "top_k is ignored"),
    ("smallest", "k smallest"),
    ("plus_one", "Off by one: 4 tokens kept instead of 3"),
    ("minus_one", "Off by one: 2 tokens kept instead of 3"),
    ("no_renorm", "renormalise"),
    ("logits", "must sum to 1"),
    ("nan_at_zero", "Temperature 0 means greedy"),
])
def test_next_token_probabilities_names_the_mistake(mode: str, message: str):
    with pytest.raises(AssertionError, match=message):
        check_next_token_probabilities(lambda logits, t, k: _probs(logits, t, k, mode=mode), task=2)


# ---------------------------------------------------------------------------------------------
# Task 3: masked mean pooling
# ---------------------------------------------------------------------------------------------

def test_masked_mean_passes(capsys: pytest.CaptureFixture[str], package_judged_as_learner):
    def by_hand(x, keep):
        w = keep.float()[..., None]
        return (x * w).sum(1) / w.sum(1).clamp(min=1)

    check_masked_mean(by_hand, task=3)
    check_masked_mean(masked_mean)
    assert "Task 3 passed" in capsys.readouterr().out


@pytest.mark.parametrize("fn, message", [
    (lambda x, keep: x.mean(dim=1), "Padding is included"),
    (lambda x, keep: (x * keep[..., None]).sum(1), "The sum is not divided"),
    (lambda x, keep: (x * keep[..., None]).sum(1) / x.size(1), "Divided by T"),
    (lambda x, keep: (x * ~keep[..., None]).sum(1) / (~keep).sum(1, keepdim=True).clamp(min=1), "inverted"),
    (lambda x, keep: (x * keep[..., None]).mean(dim=2), "feature axis"),
    (lambda x, keep: masked_mean(x, keep)[:, None], "Drop the length axis"),
    (lambda x, keep: (x * keep[..., None]).sum(1) / keep.sum(1, keepdim=True), "clamp the count"),
    (lambda x, keep: x.sum(), r"has shape \(\) but expected \(3, 4\)"),
])
def test_masked_mean_names_the_mistake(fn, message: str):
    with pytest.raises(AssertionError, match=message):
        check_masked_mean(fn, task=3)


# ---------------------------------------------------------------------------------------------
# Task 4: which family
# ---------------------------------------------------------------------------------------------

RIGHT = dict(zip(APPLICATIONS, ["encoder-only", "encoder-only", "decoder-only", "decoder-only", "encoder-decoder"]))


def test_family_choice_passes(capsys: pytest.CaptureFixture[str]):
    check_family_choice(RIGHT.get, task=4)
    check_family_choice(lambda a: RIGHT[a].upper())
    assert "Task 4 passed" in capsys.readouterr().out
    assert set(RIGHT.values()) == set(FAMILIES)


def test_family_choice_explains_a_wrong_family():
    wrong = {**RIGHT, APPLICATIONS[2]: "encoder-only"}
    with pytest.raises(AssertionError, match=re.escape("returned 'encoder-only', but decoder-only fits better: "
                                                       "the task is 'write what comes next")):
        check_family_choice(wrong.get, task=4)


def test_family_choice_accepts_both_families_for_the_story_prompt(capsys: pytest.CaptureFixture[str]):
    story = "write a story from a one-line prompt"
    assert story in APPLICATIONS
    check_family_choice({**RIGHT, story: "encoder-decoder"}.get, task=4)
    assert "Task 4 passed" in capsys.readouterr().out
    with pytest.raises(AssertionError, match=re.escape("returned 'encoder-only', but decoder-only or "
                                                       "encoder-decoder fits better")):
        check_family_choice({**RIGHT, story: "encoder-only"}.get, task=4)


def test_family_choice_rejects_an_unknown_answer():
    with pytest.raises(AssertionError, match="returned 'GPT'; expected one of 'encoder-only'"):
        check_family_choice(lambda a: "GPT")
    with pytest.raises(AssertionError, match="returned None"):
        check_family_choice(lambda a: None)


def test_checks_leave_the_global_random_state_alone(package_judged_as_learner):
    state = torch.random.get_rng_state()
    check_next_token_probabilities(next_token_probabilities)
    check_decoder_only_logits(lambda model, tokens: model(tokens))
    assert torch.equal(torch.random.get_rng_state(), state)
