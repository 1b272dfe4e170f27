"""The German -> English translator of lesson 08b: the one ``train --dataset multi30k`` left in ``runs/multi30k``,
or a short stand-in run, announced, when there is none.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from .data import SharedTokenizer, collate_pairs
from .evaluation import bleu, translate_sentences
from .model import Transformer

#: What lesson 08b trains when the full translator is missing: a narrow model for a minute.
SHORT_RUN = dict(train_size=10_000, d_model=128, n_heads=4, d_ff=512, layers=2, vocab_size=4000, batch_tokens=2500,
                 warmup=100, lr_factor=1.0, epochs=1, valid_sentences=50, eval_sentences=100, test_beam=1, show=0)


@dataclass
class Translator:
    """A trained German -> English model with what a lesson should say about it."""

    model: Transformer
    tokenizer: SharedTokenizer
    folder: Path
    full: bool
    steps: int
    test_bleu: dict[str, float]
    description: str
    alpha: float = 0.6  # the length penalty of beam search that the run chose (its test used it)


def _records(folder: Path) -> list[dict[str, Any]]:
    from .training import read_log

    log = folder / "log.jsonl"
    return read_log(log) if log.is_file() else []


def load_translator(folder: str | Path) -> Translator | None:
    """The translator of a Multi30k run folder, or None when the folder holds no finished run.

    A run counts as finished when its log holds a test score (training ended and was scored).
    """
    from .training import load_model
    from .training.checkpoint import chosen_alpha

    folder = Path(folder)
    records = _records(folder)
    setup = next((r for r in reversed(records) if r.get("event") == "setup"), None)
    test = next((r for r in reversed(records) if r.get("event") == "test"), None)
    if setup is None or test is None or setup.get("options", {}).get("dataset") != "multi30k":
        return None
    model, tokenizer, checkpoint = load_model(folder)
    beam = next((r for r in reversed(records) if r.get("event") == "test_beam"), None)
    scores = {"greedy": test["bleu"], **({f"beam{beam['beam']}": beam["bleu"]} if beam else {})}
    options = setup["options"]
    if options.get("minutes") is not None:  # a run in a time budget is full when it used its budget to the end
        done = next((r for r in reversed(records) if r.get("event") == "done"), None)
        full = done is not None and not done.get("interrupted") and options.get("train_size") is None
        length = f"a {options['minutes']:g}-minute budget"
    else:
        planned = options.get("epochs")
        full = planned is not None and checkpoint.get("epoch", 0) >= planned and options.get("train_size") is None
        length = f"{planned} epochs"
    c = setup["config"]
    shown = ", ".join(f"{k} {v:.1f}" for k, v in scores.items())
    kind = (f"the full run ({length})" if full
            else "a SHORT run (poor translations: train the full one for real results)")
    description = (f"{kind} in {folder}: {c['n_encoder_layers']}+{c['n_decoder_layers']} layers, d_model "
                   f"{c['d_model']}, {setup['parameters'] / 1e6:.1f}M parameters, {test['step']:,} steps; "
                   f"its test2016 BLEU ({test['n']:,} sentences) from its log: {shown}")
    return Translator(model, tokenizer, folder, full, int(test["step"]), scores, description, chosen_alpha(options))


def train_short_translator(out: str | Path, data_dir: str | Path | None = None, **changes: Any) -> Translator:
    """Train the short stand-in (:data:`SHORT_RUN`, about a minute on a CPU) into ``out`` and load it."""
    from .training import TrainOptions, train

    settings = {**SHORT_RUN, **changes}
    options = TrainOptions(dataset="multi30k", data_dir=None if data_dir is None else str(data_dir), device="cpu",
                           out=str(out), overwrite=True, **settings)
    result = train(options)
    if result.interrupted:
        raise KeyboardInterrupt("the short translator run was interrupted")
    found = load_translator(out)
    if found is None:
        raise RuntimeError(f"the short run in {out} wrote no test score")
    return found


@torch.no_grad()
def sentence_log_probs(model: Transformer, tokenizer: SharedTokenizer, sources: list[str],
                       outputs: list[str]) -> Tensor:
    """log P(output | source) of each pair under ``model``, teacher-forced: a (N,) tensor."""
    if len(sources) != len(outputs):
        raise ValueError(f"expected as many outputs as sources, got {len(outputs)} and {len(sources)}")
    pairs = list(zip(tokenizer.encode_batch(sources), tokenizer.encode_batch(outputs)))
    batch = collate_pairs(pairs, tokenizer.pad_id, tokenizer.bos_id, tokenizer.eos_id)  # src (N, S), tgt (N, T)
    model.eval()
    log_p = torch.log_softmax(model(batch.src, batch.tgt_in), dim=-1)  # (N, T, V)
    picked = log_p.gather(-1, batch.tgt_out[..., None]).squeeze(-1)  # (N, T)
    return (picked * (batch.tgt_out != tokenizer.pad_id)).sum(-1)


def beam_wins(model: Transformer, tokenizer: SharedTokenizer, pairs: list[tuple[str, str]],
              beam_size: int = 4, alpha: float = 0.6) -> list[dict[str, Any]]:
    """The pairs where beam search finds a likelier output than greedy decoding *and* a better one.

    Better means a higher sentence BLEU against the reference (sacreBLEU's ``sentence_bleu``).
    Beam search uses the length penalty ``alpha``. Sorted by that gain, largest first. Each item: source, reference, greedy, beam, their log
    probabilities and sentence BLEUs.
    """
    import sacrebleu

    sources, references = [s for s, _ in pairs], [t for _, t in pairs]
    greedy = translate_sentences(model, tokenizer, sources)
    beam = translate_sentences(model, tokenizer, sources, beam_size=beam_size, alpha=alpha)
    differ = [i for i in range(len(pairs)) if greedy[i] != beam[i]]
    if not differ:
        return []
    lp_g = sentence_log_probs(model, tokenizer, [sources[i] for i in differ], [greedy[i] for i in differ])
    lp_b = sentence_log_probs(model, tokenizer, [sources[i] for i in differ], [beam[i] for i in differ])
    found = []
    for k, i in enumerate(differ):
        b_g = sacrebleu.sentence_bleu(greedy[i], [references[i]]).score
        b_b = sacrebleu.sentence_bleu(beam[i], [references[i]]).score
        if lp_b[k] > lp_g[k] and b_b > b_g:
            found.append({"source": sources[i], "reference": references[i], "greedy": greedy[i], "beam": beam[i],
                          "log_p_greedy": float(lp_g[k]), "log_p_beam": float(lp_b[k]),
                          "bleu_greedy": b_g, "bleu_beam": b_b})
    return sorted(found, key=lambda w: w["bleu_beam"] - w["bleu_greedy"], reverse=True)


def corpus_scores(model: Transformer, tokenizer: SharedTokenizer, pairs: list[tuple[str, str]],
                  beam_size: int = 4, alpha: float = 0.6) -> dict[str, float]:
    """Corpus sacreBLEU (13a, cased, detokenized) of greedy and beam search translations (length penalty
    ``alpha``), and their seconds."""
    import time

    sources, references = [s for s, _ in pairs], [t for _, t in pairs]
    started = time.perf_counter()
    # The batch sizes of the training run's own test (Trainer.translate), so that the scores can be compared.
    greedy = translate_sentences(model, tokenizer, sources, batch_size=250)
    middle = time.perf_counter()
    beam = translate_sentences(model, tokenizer, sources, batch_size=max(1, 250 // beam_size), beam_size=beam_size,
                               alpha=alpha)
    end = time.perf_counter()
    return {"greedy": bleu(greedy, references), f"beam{beam_size}": bleu(beam, references),
            "greedy_seconds": middle - started, f"beam{beam_size}_seconds": end - middle}
