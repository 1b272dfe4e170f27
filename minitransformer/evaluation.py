"""Translation quality: exact match, sacreBLEU, batched translation (lessons 07, 08 and 08b), and input warnings.

BLEU is sacreBLEU's ``corpus_bleu`` on detokenized, cased output (Post, 2018); the paper's multi-bleu.perl
figures on tokenized text are not directly comparable.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from .data import SharedTokenizer
from .decoding import beam_search, greedy_decode
from .model import Transformer

#: Greedy decoding may write this many tokens more than the source has (paper, section 6.1).
EXTRA_LENGTH = 50


def _check_pairs(hypotheses: Sequence[str], references: Sequence[object]) -> None:
    if len(hypotheses) != len(references):
        raise ValueError(
            f"expected one hypothesis per reference, got {len(hypotheses)} hypotheses and "
            f"{len(references)} references"
        )
    if not references:
        raise ValueError("expected at least one sentence to score, got none")


def reference_streams(references: Sequence[str | Sequence[str]]) -> list[list[str | None]]:
    """Per-sentence references turned into sacreBLEU's reference streams."""
    per_sentence: list[list[str]] = []
    for i, refs in enumerate(references):
        group = [refs] if isinstance(refs, str) else list(refs)
        if not group or not all(isinstance(r, str) for r in group):
            raise ValueError(f"reference {i} must be a string or a non-empty list of strings, got {refs!r}")
        per_sentence.append(group)
    most = max(len(group) for group in per_sentence)
    return [[group[k] if k < len(group) else None for group in per_sentence] for k in range(most)]


def bleu_signature() -> str:
    """How :func:`bleu` scores, in sacreBLEU's own words: "sacreBLEU on detokenized output, nrefs:1|case:mixed|..."."""
    from sacrebleu.metrics import BLEU

    scorer = BLEU()  # corpus_bleu's defaults: 13a tokenization, mixed case, exponential smoothing
    scorer.corpus_score(["a"], [["a"]])  # the signature needs the number of references
    return f"sacreBLEU on detokenized output, {scorer.get_signature()}"


def exact_match(hypotheses: Sequence[str], references: Sequence[str]) -> float:
    """Fraction of hypotheses identical to their reference (after stripping outer spaces)."""
    _check_pairs(hypotheses, references)
    return sum(h.strip() == r.strip() for h, r in zip(hypotheses, references)) / len(references)


def bleu(hypotheses: Sequence[str], references: Sequence[str | Sequence[str]]) -> float:
    """Corpus BLEU (0-100) of detokenized, cased hypotheses against raw references (sacreBLEU).

    With several references, a hypothesis n-gram counts up to the largest number of times it
    occurs in any one of them, and the brevity penalty uses the reference length closest to
    the hypothesis's (Papineni et al., 2002; lesson 08b computes it by hand).
    """
    _check_pairs(hypotheses, references)
    import sacrebleu  # heavy import, only needed here

    return float(sacrebleu.corpus_bleu(list(hypotheses), reference_streams(references)).score)


METRICS = {"exact_match": exact_match, "bleu": bleu}

#: An output that ends in the same group of at most this many tokens ...
LOOP_PERIOD = 4
#: ... repeated at least this many times, without an end token, is a loop (see :func:`cut_loop`).
LOOP_REPEATS = 3


def check_source_length(model: Transformer, ids: Sequence[int], what: str) -> None:
    """Refuse a source longer than the model's positional table, naming ``what`` ("sentence 3")."""
    longest = model.config.max_len
    if len(ids) > longest:
        raise ValueError(f"{what} has {len(ids)} tokens but the model reads at most max_len={longest} "
                         "(the length of its positional table); shorten or split it")


def output_limit(model: Transformer, source_length: int, extra_length: int) -> int:
    """Most tokens generated for a source of ``source_length`` tokens (paper: source + 50), within the table."""
    return min(source_length + extra_length, model.config.max_len - 1)


def cut_loop(ids: Sequence[int], eos_id: int, limit: int) -> tuple[list[int], str | None]:
    """The generated ids of one output, and a note when the output is unreliable.

    An output without the end token stopped only at its length limit: decoding failed to
    finish, which happens on input unlike the training data. If it ends in a loop (a group
    of up to :data:`LOOP_PERIOD` tokens repeated :data:`LOOP_REPEATS` times or more), the
    repetitions after the first are cut, as if decoding had stopped when the loop began.
    """
    ids = list(ids)
    if eos_id in ids:
        return ids[: ids.index(eos_id) + 1], None
    note = f"no end token within its limit of {limit} tokens"
    for period in range(1, LOOP_PERIOD + 1):
        unit = ids[len(ids) - period:]
        repeats = 0
        while len(ids) >= (repeats + 1) * period and ids[len(ids) - (repeats + 1) * period:][:period] == unit:
            repeats += 1
        if repeats >= LOOP_REPEATS:
            kept = len(ids) - (repeats - 1) * period
            return ids[:kept], f"{note}: it repeated a group of {period} token(s) {repeats} times, cut after the first"
    return ids, note


@torch.no_grad()
def translate_sentences(
    model: Transformer,
    tokenizer: SharedTokenizer,
    sentences: Sequence[str],
    device: torch.device | str | None = None,
    batch_size: int = 64,
    extra_length: int = EXTRA_LENGTH,
    beam_size: int = 1,
    alpha: float = 0.6,
) -> list[str]:
    """Translate sentences with greedy decoding or beam search, in batches of similar length.

    Each output has at most its source's length + ``extra_length`` tokens (and never more than
    the model's positional table allows), whatever the batch. The model is put in eval mode
    and left there.
    """
    return translate_with_notes(model, tokenizer, sentences, device, batch_size, extra_length, beam_size,
                                alpha, cut_loops=False)[0]


@torch.no_grad()
def translate_with_notes(
    model: Transformer,
    tokenizer: SharedTokenizer,
    sentences: Sequence[str],
    device: torch.device | str | None = None,
    batch_size: int = 64,
    extra_length: int = EXTRA_LENGTH,
    beam_size: int = 1,
    alpha: float = 0.6,
    cut_loops: bool = True,
) -> tuple[list[str], list[str | None]]:
    """:func:`translate_sentences`, and for each sentence None or why its translation is unreliable.

    A translation is unreliable when decoding reached the length limit without the end token
    (see :func:`cut_loop`); with ``cut_loops`` a repetition loop at its end is cut.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    if beam_size < 1:
        raise ValueError(f"beam_size must be at least 1, got {beam_size}")
    if device is None:
        device = next(model.parameters()).device
    model.eval()
    encoded = tokenizer.encode_batch(list(sentences))  # source ids end with eos, as in training
    longest = model.config.max_len
    for k, ids in enumerate(encoded, 1):  # counted from 1, as a user counts lines
        check_source_length(model, ids, f"sentence {k}")
    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))
    out: list[str] = [""] * len(encoded)
    notes: list[str | None] = [None] * len(encoded)
    for start in range(0, len(order), batch_size):
        chunk = order[start : start + batch_size]
        width = max(len(encoded[i]) for i in chunk)
        src = torch.full((len(chunk), width), tokenizer.pad_id, dtype=torch.long)  # (B, S)
        for row, i in enumerate(chunk):
            src[row, : len(encoded[i])] = torch.tensor(encoded[i])
        max_len = min(width + extra_length, longest - 1)
        if beam_size == 1:
            ys = greedy_decode(model, src.to(device), max_len, tokenizer.bos_id, tokenizer.eos_id)  # (B, 1 + L)
        else:
            ys = beam_search(model, src.to(device), tokenizer.bos_id, tokenizer.eos_id, beam_size=beam_size,
                             alpha=alpha, max_extra_len=extra_length)  # (B, 1 + L)
        for row, ids in zip(chunk, ys.tolist()):
            # Each sentence's own limit, so the result does not depend on its batch-mates.
            limit = output_limit(model, len(encoded[row]), extra_length)
            kept, notes[row] = cut_loop(ids[1 : 1 + limit], tokenizer.eos_id, limit)
            out[row] = tokenizer.decode(kept if cut_loops else ids[1 : 1 + limit])
    return out, notes


def unfamiliar_input(sentences: list[str], tokenizer: Any, options: dict[str, Any],
                      longest: int | None = None, numbers: Sequence[int] | None = None) -> list[str]:
    """Warnings for sentences unlike anything the model was trained on (its answer is then a guess)."""
    from .data.language import guess_language

    warnings = []
    known = {c for c in set("".join(sentences)) if not c.isspace()
             and (tokenizer.token_to_id(c) != tokenizer.unk_id or tokenizer.token_to_id("\u2581" + c)
                  != tokenizer.unk_id)}
    dates = options.get("dataset") == "dates"
    if dates:
        import datetime

        from babel.dates import format_date

        from .data.dates import FIRST_YEAR, LAST_YEAR, parse_long_date, wrong_weekday

        locale = options.get("src_locale", "en_US")
        example = format_date(datetime.date(2023, 3, 3), format="full", locale=locale)
    source = options.get("src_lang") if options.get("dataset") == "multi30k" else None
    names = {"de": "German", "en": "English"}
    for k, sentence in zip(numbers or range(1, len(sentences) + 1), sentences):
        unknown = sorted({c for c in sentence if not c.isspace() and c not in known})
        if unknown:
            shown = " ".join(repr(c) for c in unknown[:10]) + (" ..." if len(unknown) > 10 else "")
            warnings.append(f"sentence {k} has characters the model's vocabulary never saw ({shown}): "
                            "they are read as <unk>, so its translation is a guess")
        # Counted as training counted them (tokenization_report): without the end token.
        if longest is not None and (n := len(tokenizer.encode(sentence, add_eos=False))) > longest:
            warnings.append(f"sentence {k} is {n} tokens long, longer than every training sentence (at most "
                            f"{longest}): the model never learned positions this far, so expect its translation "
                            "to lose or repeat parts; split it into shorter sentences")
        if source in names and (looks := guess_language(sentence)) is not None and looks != source:
            warnings.append(f"sentence {k} ({sentence[:40]!r}) looks {names.get(looks, looks)}, but this model "
                            f"translates from {names[source]}: its translation is a guess")
        if dates:
            date = parse_long_date(sentence, locale)
            if date is None and (date := wrong_weekday(sentence, locale)) is not None:
                right = format_date(date, format="full", locale=locale)
                warnings.append(f"sentence {k} ({sentence[:60]!r}): the weekday does not match the date, which "
                                f"is {right!r}; this model saw only real dates, so its translation is a guess")
            elif date is None:
                warnings.append(f"sentence {k} ({sentence[:60]!r}) is not a full {locale} date such as "
                                f"{example!r}, the only kind of sentence this model was trained on: its "
                                "translation is a guess")
            if date is not None and not FIRST_YEAR <= date.year <= LAST_YEAR:
                warnings.append(f"sentence {k} names the year {date.year}, outside the years this model was "
                                f"trained on ({FIRST_YEAR}-{LAST_YEAR}): its translation is a guess")
    return warnings


def training_length(checkpoint: dict[str, Any], path: str | Path) -> int | None:
    """Tokens of the longest training sentence of a checkpoint's run, or None when unknown.

    Read from the checkpoint (``metrics["train_max_tokens"]``), else from the ``setup`` record of
    the run folder's ``log.jsonl`` (for a checkpoint that lacks it).
    """
    found = checkpoint.get("metrics", {}).get("train_max_tokens")
    if isinstance(found, int):
        return found
    folder = Path(path) if Path(path).is_dir() else Path(path).parent
    try:
        from .training.runlog import read_log

        setups = [r for r in read_log(folder / "log.jsonl") if r.get("event") == "setup"]
    except (OSError, ValueError):
        return None
    value = setups[-1].get("max_tokens") if setups else None
    return value if isinstance(value, int) else None
