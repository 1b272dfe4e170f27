"""The lessons' live controls (minitransformer.playground): each view's numbers, its figure, and the helpers.

Every view is checked for the property its control teaches (the scaled softmax keeps its
entropy, the schedule peaks at the warm-up step, ...), for its figure (a Figure with the
expected number of axes), and for a clear ValueError on bad settings.
"""

from __future__ import annotations

import itertools
import math
import subprocess
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest
import torch
from matplotlib.figure import Figure
from torch.testing import assert_close

from minitransformer import (
    DecoderOnlyLM,
    Transformer,
    TransformerConfig,
    beam_search,
    greedy_decode,
    length_penalty,
    next_token_probabilities,
    sinusoidal_positional_encoding,
    transformer_lr,
    translate_sentences,
)
from minitransformer.data import CharTokenizer, SharedTokenizer
from minitransformer.playground import (
    D_K_VALUES,
    ablation_variants,
    beam_hypotheses,
    compare_variants,
    draw_beam_search,
    draw_embedding_scale,
    draw_head_patterns,
    draw_layer_gradients,
    draw_masked_attention,
    draw_next_token,
    draw_offset_rotation,
    draw_positional_table,
    draw_sampling,
    draw_smoothed_target,
    draw_softmax_saturation,
    draw_variant_comparison,
    draw_warmup_schedule,
    embedding_scale,
    fixed,
    head_patterns,
    layer_gradients,
    live,
    lm_next_token_logits,
    masked_attention,
    next_token_distribution,
    offset_rotation,
    plot_view,
    positional_table,
    sample_texts,
    sentence_beams,
    smoothed_target,
    softmax_saturation,
    static_panels,
    warmup_schedule,
)

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


@pytest.fixture(scope="module")
def translator() -> Transformer:
    """A tiny untrained encoder-decoder, seeded, in eval mode (ids: pad 0, bos 1, eos 2)."""
    with torch.random.fork_rng():
        torch.manual_seed(0)
        config = TransformerConfig.tiny(16, d_model=32, n_heads=2, d_ff=64, n_encoder_layers=1,
                                        n_decoder_layers=2, dropout=0.0, max_len=40)
        return Transformer(config).eval()


@pytest.fixture(scope="module")
def char_lm() -> tuple[DecoderOnlyLM, CharTokenizer]:
    """A tiny untrained character language model and its tokenizer."""
    tokenizer = CharTokenizer("abcdefgh \n")
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = DecoderOnlyLM(len(tokenizer), d_model=16, n_heads=2, d_ff=32, n_layers=1, max_len=64, dropout=0.0)
    return model.eval(), tokenizer


@pytest.fixture(scope="module")
def report() -> dict:
    """A small ablation report: two variants, three seeds, seed 2 of the variant diverged."""
    def run(variant: str, seed: int, final: float | None) -> dict:
        ppl = [50.0 + seed, 20.0 + seed, final if final is not None else None]
        return {"variant": variant, "seed": seed, "ppl": final, "bleu": None if final is None else 30 - final,
                "diverged": final is None, "valid_curve": {"step": [100, 200, 300], "ppl": ppl},
                "curve": {"step": [10, 20], "train_nll": [5.0, 4.0 - seed / 10]}}
    runs = [run("baseline", s, 12.0 + s) for s in range(3)] + [run("pre_ln", 0, 11.0), run("pre_ln", 1, 12.5),
                                                             run("pre_ln", 2, None)]
    summary = {"baseline": {"label": "the recipe"}, "pre_ln": {"label": "pre-LN instead of post-LN"}}
    return {"runs": runs, "summary": summary}


# --- lesson 01: embedding scale ------------------------------------------------------------------------------

@pytest.mark.parametrize("d_model", [64, 512])
def test_scaling_makes_the_token_part_as_large_as_the_position_part(d_model: int):
    scaled = embedding_scale(d_model, scaled=True, init="normal")
    unscaled = embedding_scale(d_model, scaled=False, init="normal")
    # N(0, 1/d) entries times sqrt(d) have spread 1; a sine-cosine pair has RMS 1/sqrt(2).
    assert scaled.ratio == pytest.approx(math.sqrt(2), rel=0.05)
    assert unscaled.ratio == pytest.approx(math.sqrt(2 / d_model), rel=0.05)
    assert scaled.position_rms == pytest.approx(math.sqrt(0.5), rel=0.02)
    assert scaled.token_cosine > 0.7 and unscaled.token_cosine < 0.2  # the sum points where the token part does
    assert_close(scaled.tokens, unscaled.tokens * math.sqrt(d_model))  # the same table, read two ways
    assert_close(scaled.positions, sinusoidal_positional_encoding(200, d_model))


def test_embedding_scale_is_seeded_and_leaves_the_global_generator_alone():
    state = torch.get_rng_state()
    a, b = embedding_scale(64, init="pytorch", seed=3), embedding_scale(64, init="pytorch", seed=3)
    assert torch.equal(torch.get_rng_state(), state)
    assert torch.equal(a.tokens, b.tokens)
    assert not torch.equal(a.tokens, embedding_scale(64, init="pytorch", seed=4).tokens)
    assert embedding_scale(512, init="pytorch").ratio > 20  # PyTorch's N(0, 1) start, scaled: tokens drown positions


@pytest.mark.parametrize("kwargs, message", [
    ({"init": "uniform"}, "init must be one of"),
    ({"d_model": 63}, "even"),
    ({"vocab_size": 0}, "vocab_size"),
])
def test_embedding_scale_refuses_bad_settings(kwargs: dict, message: str):
    with pytest.raises(ValueError, match=message):
        embedding_scale(**kwargs)


# --- lesson 02: positional encoding ----------------------------------------------------------------------------

def test_positional_table_is_the_package_table_and_names_the_wavelength():
    view = positional_table(max_len=30, d_model=16, base=100.0, pair=3)
    assert_close(view.table, sinusoidal_positional_encoding(30, 16, base=100.0))
    assert view.frequency == pytest.approx(100.0 ** (-6 / 16))
    assert view.wavelength == pytest.approx(2 * math.pi * 100.0 ** (6 / 16))


@pytest.mark.parametrize("offset", [0, 1, 7, 33])
def test_an_offset_is_a_rotation_and_dot_products_depend_on_the_offset_only(offset: int):
    view = offset_rotation(offset, d_model=32, max_len=50)
    assert view.error < 1e-5  # PE(p) M_k = PE(p + k) at every p
    assert_close(view.rotation @ view.rotation.T, torch.eye(32, dtype=torch.float64))  # orthogonal
    assert float(view.along_offset.max() - view.along_offset.min()) < 1e-4
    assert_close(view.along_offset, torch.full_like(view.along_offset, view.expected), atol=1e-4, rtol=0)
    # The whole matrix of dot products is constant along every diagonal (it depends on p' - p only).
    for k in range(50):
        diagonal = torch.diagonal(view.dots, k)
        assert float(diagonal.max() - diagonal.min()) < 1e-4


@pytest.mark.parametrize("call, message", [
    (lambda: positional_table(d_model=16, pair=8), "pair"),
    (lambda: positional_table(base=1.0), "base"),
    (lambda: positional_table(d_model=15), "even"),
    (lambda: offset_rotation(offset=60, max_len=60), "offset"),
    (lambda: offset_rotation(offset=-1), "offset"),
])
def test_positional_views_refuse_bad_settings(call, message: str):
    with pytest.raises(ValueError, match=message):
        call()


# --- lesson 03: self-attention ---------------------------------------------------------------------------------

def test_the_scaled_softmax_keeps_its_entropy_while_the_unscaled_one_collapses():
    widths = [4, 16, 64, 256, 1024]
    scaled = [softmax_saturation(d, scaled=True) for d in widths]
    unscaled = [softmax_saturation(d, scaled=False) for d in widths]
    entropies = [v.entropy for v in scaled]
    assert max(entropies) - min(entropies) < 0.1  # about the same at every d_k
    assert all(a.entropy > b.entropy for a, b in itertools.pairwise(unscaled))  # falls with d_k
    assert unscaled[-1].entropy < 0.15 and unscaled[-1].max_weight > 0.95  # nearly one-hot
    assert max(v.max_weight for v in scaled) < 0.4
    assert_close(scaled[0].weights.sum(dim=-1), torch.ones(500))
    assert softmax_saturation(1, True).entropy == softmax_saturation(1, False).entropy  # sqrt(1) = 1
    assert 1024 in D_K_VALUES


def test_masked_keys_get_zero_weight_and_rows_still_sum_to_one():
    view = masked_attention(padded=[4, 5], causal=True)
    assert view.tokens == ["the", "cat", "sat", "on", "<pad>", "<pad>"]
    future = torch.ones(6, 6, dtype=torch.bool).triu(diagonal=1)
    assert not view.mask[future].any() and not view.mask[:, 4:].any()
    assert torch.equal(view.weights[~view.mask], torch.zeros(int((~view.mask).sum())))
    assert_close(view.weights.sum(dim=-1), torch.ones(6))
    plain = masked_attention()
    assert view.mask.float().sum() < plain.mask.float().sum() == 36
    # Hiding the padding changes nothing for a query that could not see it anyway (causal row 0..3).
    assert_close(view.weights[:4, :4], masked_attention(causal=True).weights[:4, :4])


@pytest.mark.parametrize("call, message", [
    (lambda: masked_attention(padded=[6]), "padded position"),
    (lambda: masked_attention(sentence="   "), "sentence"),
    (lambda: softmax_saturation(n_keys=1), "n_keys"),
    (lambda: softmax_saturation(d_k=0), "d_k"),
])
def test_attention_views_refuse_bad_settings(call, message: str):
    with pytest.raises(ValueError, match=message):
        call()


# --- lesson 04: multi-head attention ---------------------------------------------------------------------------

def test_heads_change_the_patterns_but_not_the_parameters_or_the_flops():
    views = {h: head_patterns(h, d_model=64) for h in (1, 2, 4, 8, 16)}
    assert {v.parameters for v in views.values()} == {4 * 64 * 64 + 4 * 64}
    assert {v.flops for v in views.values()} == {views[1].expected_flops}
    for h, v in views.items():
        t = len(v.tokens)
        assert v.weights.shape == (h, t, t) and v.d_k == 64 // h
        assert_close(v.weights.sum(dim=-1), torch.ones(h, t))
    assert not torch.allclose(views[4].weights[0], views[4].weights[1])  # each head its own pattern
    assert torch.equal(head_patterns(4).weights, views[4].weights)  # seeded


def test_heads_must_divide_d_model():
    with pytest.raises(ValueError, match="n_heads must divide d_model=64"):
        head_patterns(3, d_model=64)


# --- lesson 05: post-LN and pre-LN -----------------------------------------------------------------------------

def test_pre_ln_gradients_shrink_with_depth_while_post_ln_ones_grow_towards_the_output():
    post, pre = layer_gradients(24, norm_first=False), layer_gradients(24, norm_first=True)
    assert post.gradient_norms.shape == (24,) and post.stream_norms.shape == (25,)
    assert post.gradient_norms[-1] > 2 * post.gradient_norms[0]  # post-LN: largest near the output
    assert pre.gradient_norms[-1] < pre.gradient_norms[0]  # pre-LN: smaller towards the output
    assert post.gradient_norms[-1] > 3 * pre.gradient_norms[-1]
    assert pre.gradient_norms[-1] < layer_gradients(6, norm_first=True).gradient_norms[-1]
    assert_close(post.stream_norms, torch.full((25,), 8.0), atol=0.1, rtol=0)  # LayerNorm holds it at sqrt(64)
    assert pre.stream_norms[-1] > 2 * pre.stream_norms[0]  # pre-LN lets it grow


def test_layer_gradients_refuse_bad_settings():
    with pytest.raises(ValueError, match="n_layers"):
        layer_gradients(0)
    with pytest.raises(ValueError, match="n_heads must divide d_model"):
        layer_gradients(2, d_model=64, n_heads=5)


# --- lesson 07: label smoothing and the schedule ---------------------------------------------------------------

@pytest.mark.parametrize("epsilon, vocab_size, pad_id", [(0.1, 10, 0), (0.3, 50, 0), (0.1, 37000, 0), (0.2, 8, None)])
def test_the_smoothed_target_sums_to_one_and_its_entropy_is_the_loss_floor(epsilon: float, vocab_size: int,
                                                                          pad_id: int | None):
    view = smoothed_target(epsilon, vocab_size, gold=4, pad_id=pad_id)
    n_others = vocab_size - 1 - (pad_id is not None)
    assert view.q.sum().item() == pytest.approx(1.0, abs=1e-5)
    assert view.q[4].item() == pytest.approx(1 - epsilon)
    if pad_id is not None:
        assert view.q[pad_id] == 0
    expected = -(1 - epsilon) * math.log(1 - epsilon) - epsilon * math.log(epsilon / n_others)
    assert view.closed_form == pytest.approx(expected)
    assert view.floor == pytest.approx(expected, rel=1e-4)  # the package's loss at p = q
    assert abs(view.best_p - (1 - epsilon)) <= 1 / len(view.p_gold)  # the loss is smallest at p(gold) = 1 - eps
    assert view.loss.min().item() >= view.floor - 1e-4


def test_without_smoothing_the_floor_is_zero():
    view = smoothed_target(0.0, 10)
    assert view.floor == 0 and view.closed_form == 0
    assert view.best_p > 0.99


@pytest.mark.parametrize("kwargs, message", [
    ({"epsilon": -0.1}, "epsilon"),
    ({"epsilon": 1.0}, "epsilon"),
    ({"gold": 0, "pad_id": 0}, "pad id"),
    ({"vocab_size": 2}, "vocab_size"),
    ({"gold": 10, "vocab_size": 10}, "gold"),
])
def test_smoothed_target_refuses_bad_settings(kwargs: dict, message: str):
    with pytest.raises(ValueError, match=message):
        smoothed_target(**kwargs)


@pytest.mark.parametrize("d_model, warmup, factor", [(512, 4000, 1.0), (64, 400, 2.0), (256, 1500, 0.5)])
def test_the_schedule_peaks_at_the_warmup_step_with_the_formula_value(d_model: int, warmup: int, factor: float):
    view = warmup_schedule(d_model, warmup, factor, steps=3 * warmup)
    assert view.peak_step == warmup
    assert view.peak_lr == pytest.approx(factor * (d_model * warmup) ** -0.5)
    assert view.formula_peak == pytest.approx(view.peak_lr)
    assert view.lr[99] == transformer_lr(100, d_model, warmup, factor)
    assert (view.lr[1:warmup] > view.lr[: warmup - 1]).all() and (view.lr[warmup:] < view.lr[warmup - 1 : -1]).all()


def test_schedule_refuses_bad_settings():
    assert warmup_schedule(512, 4000, steps=1000).peak_step == 1000  # still rising at the last step
    with pytest.raises(ValueError, match="factor"):
        warmup_schedule(factor=0.0)
    with pytest.raises(ValueError, match="warmup"):
        warmup_schedule(warmup=0)


# --- lesson 08: beam search ------------------------------------------------------------------------------------

@pytest.mark.parametrize("seed", [0, 1, 2])
def test_beam_size_one_is_greedy_decoding(translator: Transformer, seed: int):
    src = torch.randint(3, 16, (1, 5), generator=torch.Generator().manual_seed(seed))
    found = beam_hypotheses(translator, src, bos_id=1, eos_id=2, beam_size=1, max_len=12)
    greedy = greedy_decode(translator, src, max_len=12, bos_id=1, eos_id=2)[0].tolist()
    assert found.best.ids == greedy[: len(found.best.ids)]
    assert all(t == translator.config.pad_id for t in greedy[len(found.best.ids):])


@pytest.mark.parametrize("beam_size", [2, 4])
@pytest.mark.parametrize("alpha", [0.0, 0.6, 2.0])
@pytest.mark.parametrize("eos_id", [2, None])
def test_the_best_hypothesis_is_what_beam_search_returns(translator: Transformer, beam_size: int, alpha: float,
                                                         eos_id: int | None):
    src = torch.tensor([[5, 9, 3, 12, 7, 2]])
    found = beam_hypotheses(translator, src, 1, eos_id, beam_size, alpha, max_extra_len=6)
    package = beam_search(translator, src, 1, eos_id, beam_size, alpha, max_extra_len=6)[0].tolist()
    assert found.best.ids == package
    assert found.best is found.hypotheses[0]
    scores = [h.score for h in found.hypotheses]
    assert scores == sorted(scores, reverse=True)
    for h in found.hypotheses:
        assert h.length == len(h.ids) - 1 and h.ids[0] == 1
        assert h.score == pytest.approx(h.log_prob / float(length_penalty(h.length, alpha)), rel=1e-5)
        assert h.ended == (eos_id is not None and h.ids[-1] == eos_id)


def test_beam_hypotheses_follow_one_sentence_and_check_their_settings(translator: Transformer):
    with pytest.raises(ValueError, match="one sentence"):
        beam_hypotheses(translator, torch.tensor([[5, 6], [7, 8]]), 1, 2)
    with pytest.raises(ValueError, match="alpha"):
        beam_hypotheses(translator, torch.tensor([5, 6, 2]), 1, 2, alpha=-1.0)
    with pytest.raises(ValueError, match="beam_size"):
        beam_hypotheses(translator, torch.tensor([5, 6, 2]), 1, 2, beam_size=0)


def test_sentence_beams_decode_the_hypotheses_as_translate_sentences_does():
    pairs = [("Saturday, November 21, 2026", "Samstag, 21. November 2026"),
             ("Friday, March 3, 2023", "Freitag, 3. März 2023")]
    tokenizer = SharedTokenizer.train(pairs, vocab_size=120, min_frequency=1)
    with torch.random.fork_rng():
        torch.manual_seed(1)
        model = Transformer(TransformerConfig.tiny(tokenizer.vocab_size, d_model=32, n_heads=2, d_ff=64,
                                                   n_encoder_layers=1, n_decoder_layers=1, max_len=48))
    found = sentence_beams(model, tokenizer, "Friday, March 3, 2023", beam_size=3, max_extra_len=5)
    assert all(h.text == tokenizer.decode(h.ids[1:]) for h in found.hypotheses)
    assert found.best.text == translate_sentences(model, tokenizer, ["Friday, March 3, 2023"], beam_size=3,
                                                  extra_length=5)[0]
    with pytest.raises(ValueError, match="sentence"):
        sentence_beams(model, tokenizer, "  ")


# --- lesson 09: temperature and top-k --------------------------------------------------------------------------

LOGITS = torch.tensor([2.0, 1.0, 0.5, -1.0, 3.0, 0.0])


def test_temperature_towards_zero_approaches_the_argmax_and_high_temperature_flattens():
    cold = next_token_distribution(LOGITS, temperature=0.05)
    assert cold.probs.argmax() == LOGITS.argmax() and cold.probs.max() > 0.999
    assert torch.equal(next_token_distribution(LOGITS, 0.0).probs, torch.eye(6)[4])
    entropies = [next_token_distribution(LOGITS, t).entropy for t in (0.1, 0.5, 1.0, 2.0, 10.0)]
    assert entropies == sorted(entropies) and entropies[-1] == pytest.approx(math.log(6), abs=0.05)
    view = next_token_distribution(LOGITS, 0.7, top_k=3)
    assert_close(view.probs, next_token_probabilities(LOGITS, 0.7, 3))
    assert_close(view.plain, torch.softmax(LOGITS, dim=-1))


@pytest.mark.parametrize("k", [1, 2, 4, 6])
def test_top_k_zeroes_all_but_k_tokens(k: int):
    view = next_token_distribution(LOGITS, 1.0, top_k=k)
    assert view.kept == k
    assert set(view.probs.nonzero().flatten().tolist()) == set(LOGITS.topk(k).indices.tolist())
    assert view.probs.sum().item() == pytest.approx(1.0)


def test_sampled_texts_are_seeded_and_temperature_zero_is_greedy(char_lm):
    model, tokenizer = char_lm
    a = sample_texts(model, tokenizer, "abc", temperature=1.5, n_samples=3, max_new_tokens=20, seed=5)
    assert a == sample_texts(model, tokenizer, "abc", temperature=1.5, n_samples=3, max_new_tokens=20, seed=5)
    assert len(a) == 3 and all(len(t) == 20 for t in a)
    greedy = sample_texts(model, tokenizer, "abc", temperature=0.0, n_samples=2, max_new_tokens=15, seed=1)
    assert greedy[0] == greedy[1]
    logits = lm_next_token_logits(model, tokenizer, "abc")
    assert logits.shape == (len(tokenizer),)
    assert tokenizer.decode([int(logits.argmax())]) == greedy[0][0]


@pytest.mark.parametrize("call, message", [
    (lambda: next_token_distribution(LOGITS, top_k=7), "top_k"),
    (lambda: next_token_distribution(LOGITS, temperature=-1.0), "temperature"),
    (lambda: next_token_distribution(LOGITS[None]), r"shape \(V,\)"),
])
def test_sampling_views_refuse_bad_settings(call, message: str):
    with pytest.raises(ValueError, match=message):
        call()


# --- lesson 10: the ablation results ---------------------------------------------------------------------------

def test_variants_are_paired_by_seed(report: dict):
    view = compare_variants("pre_ln", results=report)
    assert view.paired == [0, 1, 2]
    assert view.differences[:2] == [pytest.approx(-1.0), pytest.approx(-0.5)] and view.differences[2] is None
    assert view.steps == [100, 200, 300] and math.isnan(view.curves["pre_ln"][2][-1])
    assert compare_variants("pre_ln", kind="train", metric="bleu", results=report).differences[:2] == [
        pytest.approx(1.0), pytest.approx(0.5)]
    assert ablation_variants(report) == ["baseline", "pre_ln"]


def test_compare_variants_refuses_unknown_variants(report: dict):
    with pytest.raises(ValueError, match=r"no runs in the results: expected one of \['baseline', 'pre_ln'\]"):
        compare_variants("heads_2", results=report)
    with pytest.raises(ValueError, match="kind"):
        compare_variants(kind="test", results=report)
    with pytest.raises(ValueError, match="metric"):
        compare_variants(metric="loss", results=report)


COMMITTED_ABLATIONS = ROOT / "benchmarks" / "results" / "ablations-cpu.json"


@pytest.mark.skipif(not COMMITTED_ABLATIONS.is_file(), reason="the committed ablation results are not here")
def test_the_committed_results_give_per_seed_curves_and_finals():
    view = compare_variants("pre_ln", results=COMMITTED_ABLATIONS)
    assert len(view.paired) >= 2 and len(view.steps) >= 2
    summary = __import__("json").loads(COMMITTED_ABLATIONS.read_text())["summary"]
    assert sorted(view.finals["pre_ln"].values()) == sorted(summary["pre_ln"]["ppl"]["values"])
    partial = COMMITTED_ABLATIONS.with_suffix(".partial.jsonl")
    if partial.is_file():
        assert compare_variants("no_warmup", results=partial).paired


# --- the figures -----------------------------------------------------------------------------------------------

def _draw_cases(char_lm, report: dict):
    model, tokenizer = char_lm
    shared = SharedTokenizer.train([("a b c", "x y z")], vocab_size=130, min_frequency=1)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        mt = Transformer(TransformerConfig.tiny(shared.vocab_size, d_model=32, n_heads=2, d_ff=64, n_encoder_layers=1,
                                                n_decoder_layers=1, max_len=32)).eval()
    return [
        (draw_embedding_scale, {"d_model": 64}, 2),
        (draw_positional_table, {"max_len": 20, "d_model": 16, "pair": 2}, 3),  # heat map, its colour bar, curves
        (draw_offset_rotation, {"offset": 3, "d_model": 16, "max_len": 20}, 3),
        (draw_softmax_saturation, {"d_k": 16}, 3),
        (draw_masked_attention, {"padded": [5], "causal": True}, 2),
        (draw_head_patterns, {"n_heads": 4}, 5),  # four heads and a colour bar
        (draw_head_patterns, {"n_heads": 2}, 3),
        (draw_layer_gradients, {"n_layers": 3}, 2),
        (draw_smoothed_target, {"epsilon": 0.2}, 2),
        (draw_warmup_schedule, {"warmup": 100, "steps": 500}, 1),
        (draw_beam_search, {"model": mt, "tokenizer": shared, "sentence": "a b c", "beam_size": 3,
                            "max_extra_len": 4}, 2),
        (draw_next_token, {"logits": LOGITS, "temperature": 0.5, "labels": list("abcdef")}, 1),
        (draw_sampling, {"model": model, "tokenizer": tokenizer, "prompt": "ab", "max_new_tokens": 10}, 2),
        (draw_variant_comparison, {"variant": "pre_ln", "results": report}, 2),
    ]


def test_every_draw_function_makes_a_figure_with_its_axes(char_lm, report: dict):
    for draw, settings, n_axes in _draw_cases(char_lm, report):
        fig = plot_view(draw, **settings)
        assert isinstance(fig, Figure)
        assert len(fig.axes) == n_axes, (draw.__name__, len(fig.axes))
        fig.canvas.draw()  # renders without error


def test_draw_functions_want_a_figure():
    with pytest.raises(ValueError, match="Figure or SubFigure"):
        draw_warmup_schedule(plt.gca())


def test_static_panels_make_one_panel_per_value():
    fig = static_panels(draw_softmax_saturation, "scaled", [False, True], d_k=64)
    assert len(fig.subfigs) == 2 and len(fig.axes) == 6
    assert [s._suptitle.get_text() for s in fig.subfigs] == ["scaled = False", "scaled = True"]
    fig = static_panels(draw_warmup_schedule, "warmup", [100, 200, 400], stacked=True, steps=800,
                        titles=["short", "medium", "long"])
    assert len(fig.subfigs) == 3 and len(fig.axes) == 3
    assert fig.get_size_inches()[1] > fig.get_size_inches()[0]  # one above the other
    assert [s._suptitle.get_text() for s in fig.subfigs] == ["short", "medium", "long"]


@pytest.mark.parametrize("call, message", [
    (lambda: static_panels(draw_warmup_schedule, "warmup", []), "1 to 6 values"),
    (lambda: static_panels(draw_warmup_schedule, "warmups", [1, 2]), "has no setting 'warmups'"),
    (lambda: static_panels(draw_warmup_schedule, "warmup", [1, 2], warmup=3), "do not also fix it"),
    (lambda: static_panels(draw_warmup_schedule, "warmup", [1, 2], titles=["a"]), "one title per value"),
    (lambda: plot_view(draw_warmup_schedule, heads=2), "has no setting 'heads'"),
])
def test_static_panels_refuse_bad_settings(call, message: str):
    with pytest.raises(ValueError, match=message):
        call()


def test_live_builds_a_control_per_setting_and_redraws_on_change():
    import ipywidgets as widgets

    calls = []

    def draw_demo(fig, count: int = 2, width: float = 0.5, heads: int = 4, mode: str = "a", flag: bool = False,
                  text: str = "hi", extra: object = None):
        calls.append((count, width, heads, mode, flag, text, extra))
        fig.subplots()

    marker = object()
    ui = live(draw_demo, count=(1, 5), width=(0.0, 1.0), heads=[1, 2, 4, 8], mode=["a", "b"], flag=False,
              text="hi", extra=marker)
    assert isinstance(ui, widgets.VBox)
    controls, output = ui.children
    assert isinstance(output, widgets.Output)
    by_name = {c.description: c for c in controls.children}
    assert set(by_name) == {"count", "width", "heads", "mode", "flag", "text"}  # extra is passed, not shown
    assert isinstance(by_name["count"], widgets.IntSlider) and by_name["count"].value == 2  # the draw default
    assert isinstance(by_name["width"], widgets.FloatSlider) and by_name["width"].value == 0.5
    assert isinstance(by_name["heads"], widgets.SelectionSlider) and by_name["heads"].value == 4
    assert isinstance(by_name["mode"], widgets.Dropdown)
    assert isinstance(by_name["flag"], widgets.Checkbox) and isinstance(by_name["text"], widgets.Text)
    assert not by_name["count"].continuous_update and not by_name["heads"].continuous_update
    assert calls[-1] == (2, 0.5, 4, "a", False, "hi", marker)  # drawn once at the start
    by_name["heads"].value = 8
    by_name["flag"].value = True
    assert calls[-1] == (2, 0.5, 8, "a", True, "hi", marker)


def test_live_works_with_a_lesson_view_and_fixed_values():
    import ipywidgets as widgets

    ui = live(draw_smoothed_target, epsilon=(0.0, 0.5, 0.05), vocab_size=[5, 10, 50], pad_id=fixed(0),
              continuous_update=True)
    sliders = ui.children[0].children
    assert [s.description for s in sliders] == ["epsilon", "vocab_size"]
    assert sliders[0].continuous_update and sliders[0].value == pytest.approx(0.1)
    sliders[1].value = 50
    assert isinstance(ui.children[1], widgets.Output)


def test_a_set_makes_a_multiple_selection_for_the_mask():
    import ipywidgets as widgets

    ui = live(draw_masked_attention, padded=set(range(6)), causal=False)
    picker, causal = ui.children[0].children
    assert isinstance(picker, widgets.SelectMultiple) and picker.value == ()
    assert isinstance(causal, widgets.Checkbox)
    picker.value = (4, 5)  # mark the last two positions as padding: the view is redrawn without error
    assert picker.value == (4, 5)


def test_the_padding_positions_follow_the_sentence_typed_in_lesson_06():
    # Lesson 06's control: the positions to pad are those of the sentence in the text box, whatever its length.
    ui = live(draw_masked_attention, padded=set(range(6)), causal=True, sentence="the cat sat on the mat")
    picker, causal, text = ui.children[0].children
    positions = lambda: [value for _, value in picker.options]  # noqa: E731
    assert positions() == list(range(6))
    text.value = "the old cat sat on the red mat"  # 8 words: 8 positions to pick from
    assert positions() == list(range(8)) and picker.rows == 8
    picker.value = (1, 6, 7)
    text.value = "a cat sat"  # shorter: the positions that are gone are unpicked, and the view is drawn without error
    assert positions() == [0, 1, 2] and picker.value == (1,)
    text.value = "a dog sat down"
    assert positions() == [0, 1, 2, 3] and picker.value == (1,)  # kept


def test_a_control_starts_with_the_options_of_its_sentence():
    ui = live(draw_masked_attention, padded=set(range(6)), sentence="only three words")
    assert [value for _, value in ui.children[0].children[0].options] == [0, 1, 2]
    ui = live(draw_masked_attention, padded=set(range(6)), causal=False)  # lesson 03: the default sentence, 6 words
    assert [value for _, value in ui.children[0].children[0].options] == list(range(6))


def test_options_from_makes_a_drop_down_follow_a_slider():
    from minitransformer.playground import options_from

    drawn: list[tuple[int, int]] = []

    @options_from(k=lambda n, **_: range(n) if n > 1 else 1 / 0)  # n = 1: the rule fails, the options stay
    def draw(fig, n: int = 3, k: int = 0) -> None:
        assert 0 <= k < max(n, 2), (n, k)
        drawn.append((n, k))

    ui = live(draw, n=(1, 6), k=[0, 1, 2, 3, 4, 5])
    slider, choice = ui.children[0].children
    assert [v for _, v in choice.options] == [0, 1, 2] and drawn[-1] == (3, 0)
    choice.value = 2
    slider.value = 5
    assert [v for _, v in choice.options] == [0, 1, 2, 3, 4] and drawn[-1] == (5, 2)
    slider.value = 2
    assert [v for _, v in choice.options] == [0, 1] and drawn[-1] == (2, 0)  # 2 is gone: the first option
    slider.value = 1
    assert [v for _, v in choice.options] == [0, 1] and drawn[-1] == (1, 0)
    with pytest.raises(TypeError, match="must be a function"):
        options_from(k=[0, 1])


@pytest.mark.parametrize("controls, message", [
    ({"heads": (1, 8)}, "has no setting 'heads'"),
    ({"warmup": 100}, "at least one control"),
    ({"warmup": (5, 1)}, "min < max"),
    ({"warmup": (1, 2, 3, 4)}, r"\(min, max\)"),
    ({"warmup": []}, "at least one option"),
])
def test_live_refuses_bad_controls(controls: dict, message: str):
    with pytest.raises(ValueError, match=message):
        live(draw_warmup_schedule, **controls)


def test_the_playground_imports_without_ipywidgets_and_live_says_what_to_install():
    code = ("import sys; sys.modules['ipywidgets'] = None\n"
            "import minitransformer.playground as p\n"
            "try:\n    p.live(p.draw_warmup_schedule, warmup=(1, 10))\n"
            "except ImportError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120,
                         check=False)
    assert out.returncode == 0, out.stderr
    assert "notebooks extra" in out.stdout and "ipywidgets" in out.stdout
