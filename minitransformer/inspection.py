"""Looking inside a trained model: its attention maps for one sentence, as figures (lesson 08).

:func:`sentence_attention` runs one teacher-forced pass and returns every attention weight
with the token labels; :func:`save_attention_maps` writes one PNG per layer and kind
(encoder self-attention, decoder self-attention, cross-attention), a panel per head.
``python -m minitransformer attention`` calls it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import matplotlib.pyplot as plt
import torch

from .data import SharedTokenizer
from .decoding import greedy_decode
from .evaluation import check_source_length, cut_loop, output_limit
from .model import Transformer
from .plotting import plot_attention_heads
from .utils import writable_folder

#: The three kinds of attention, as named by :meth:`Transformer.attention_maps`, with a title each.
KINDS = {
    "encoder": "encoder self-attention",
    "decoder_self": "decoder self-attention (masked)",
    "cross": "cross-attention (decoder queries, encoder keys)",
}


@dataclass
class SentenceAttention:
    """Attention weights of one sentence pair, with the tokenizer's own token labels.

    The labels keep the BPE marker "▁" (a space before the token) as the tokenizer writes it,
    so that figures, printed tokens and lesson text spell a token the same way.
    """

    maps: dict[str, list[torch.Tensor]]
    src_tokens: list[str]
    tgt_tokens: list[str]
    translation: str
    note: str | None = None

    def labels(self, kind: str) -> tuple[list[str], list[str]]:
        """(query labels, key labels) of one kind of attention."""
        if kind == "encoder":
            return self.src_tokens, self.src_tokens
        if kind == "decoder_self":
            return self.tgt_tokens, self.tgt_tokens
        if kind == "cross":
            return self.tgt_tokens, self.src_tokens
        raise ValueError(f"kind must be one of {sorted(KINDS)}, got {kind!r}")


def _labels(tokenizer: SharedTokenizer, ids: list[int]) -> list[str]:
    return [tokenizer.id_to_token(i) for i in ids]  # "▁" kept: matplotlib's default font draws it


@torch.no_grad()
def sentence_attention(model: Transformer, tokenizer: SharedTokenizer, source: str, target: str | None = None,
                       device: torch.device | str | None = None, max_extra_len: int = 50) -> SentenceAttention:
    """Every attention weight of the model for one sentence."""
    if device is None:
        device = next(model.parameters()).device
    model.eval()
    src_ids = tokenizer.encode(source)  # ends with eos, as in training
    check_source_length(model, src_ids, "the source sentence")
    src = torch.tensor([src_ids], device=device)  # (1, S)
    note = None
    if target is None:
        limit = output_limit(model, len(src_ids), max_extra_len)
        out = greedy_decode(model, src, limit, tokenizer.bos_id, tokenizer.eos_id)
        generated, note = cut_loop(out[0, 1:].tolist(), tokenizer.eos_id, limit)
        tgt_ids = [tokenizer.bos_id] + [i for i in generated if i != tokenizer.eos_id]
        # the decoder's inputs: start token and the words, not the end token
    else:
        tgt_ids = [tokenizer.bos_id] + tokenizer.encode(target, add_eos=False)
        if len(tgt_ids) > model.config.max_len:
            raise ValueError(f"--target has {len(tgt_ids)} tokens with the start token, but the model reads at "
                             f"most max_len={model.config.max_len} (the length of its positional table)")
    tgt = torch.tensor([tgt_ids], device=device)  # (1, T)
    maps = model.attention_maps(src, tgt)
    return SentenceAttention(
        maps={kind: [layer[0].float().cpu() for layer in layers] for kind, layers in maps.items()},  # (H, Tq, Tk)
        src_tokens=_labels(tokenizer, src_ids),
        tgt_tokens=_labels(tokenizer, tgt_ids),
        translation=target if target is not None else tokenizer.decode(tgt_ids),
        note=note,
    )


def save_attention_maps(attention: SentenceAttention, out_dir: str | Path, kinds: tuple[str, ...] = tuple(KINDS),
                        dpi: int = 110) -> list[Path]:
    """Write one PNG per kind and layer, a panel per head, with token labels."""
    unknown = set(kinds) - set(KINDS)
    if unknown:
        raise ValueError(f"kinds must be among {sorted(KINDS)}, got {sorted(unknown)}")
    out = writable_folder(out_dir, "the folder for the attention maps")
    written = []
    for kind in kinds:
        queries, keys = attention.labels(kind)
        for layer, weights in enumerate(attention.maps[kind], start=1):
            fig = plot_attention_heads(weights, queries, keys,
                                       titles=[f"head {h + 1}" for h in range(weights.size(0))],
                                       suptitle=f"{KINDS[kind]}, layer {layer}")
            path = out / f"{kind}_layer{layer}.png"
            fig.savefig(path, dpi=dpi, bbox_inches="tight")
            plt.close(fig)
            written.append(path)
    return written
