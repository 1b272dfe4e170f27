"""Shipping a trained translator: ONNX files, the proof that they are the model, int8, timing (docs/shipping.md).

The encoder runs once per sentence, the decoder once per token: it takes the key/value cache of lesson 08 and
returns it one position longer (ONNX graphs hold no state). Serving differs from training in four ways: no
dropout, that cache, batch 1, and int8 weights if wanted. With the tokenizer and ``config.json`` the folder is
all the course website's translator needs. Needs the ``export`` extra: ``pip install -e ".[export]"``.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
import os
import platform
import statistics
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from .cache import KVCache, LayerCache
from .config import TransformerConfig
from .data import SharedTokenizer
from .decoding import beam_search, greedy_decode
from .model import Transformer

FORMAT = "minitransformer-onnx"
FORMAT_VERSION = 1
INSTALL = 'pip install -e ".[export]"  (onnx, onnxscript and onnxruntime)'
ENCODER, DECODER, TOKENIZER, CONFIG, REPORT = "encoder.onnx", "decoder.onnx", "tokenizer.json", "config.json", "report.json"
INT8 = {ENCODER: "encoder.int8.onnx", DECODER: "decoder.int8.onnx"}
WEIGHTS, WEIGHTS_INT8 = "weights.bin", "weights.int8.bin"  # each precision's two graphs read theirs from one file
#: Largest difference allowed between ONNX Runtime's float32 logits and the package's (both float32).
LOGIT_TOLERANCE = 1e-3


class ExportError(ValueError):
    """A checkpoint or folder that cannot be exported, or an export that does not match the model."""


def require_onnx() -> None:
    """Raise :class:`ExportError` with the install line unless onnx, onnxscript and onnxruntime import."""
    import importlib.util

    missing = [m for m in ("onnx", "onnxscript", "onnxruntime") if importlib.util.find_spec(m) is None]
    if missing:
        raise ExportError(f"exporting needs {', '.join(missing)}, not installed here: {INSTALL}")


class _Graph(nn.Module):
    def __init__(self, model: Transformer) -> None:
        super().__init__()
        self.model = model


class EncoderGraph(_Graph):
    """Source ids (B, S) -> the cross-attention keys and values of every decoder layer, (L, B, H, S, Dk) each: the
    decoder reads the memory only through its W_K and W_V, so they are computed once per sentence, here."""

    def forward(self, src: Tensor) -> tuple[Tensor, Tensor]:
        m = self.model
        src_mask = (src != m.config.pad_id)[:, None, None, :]  # (B, 1, 1, S)
        memory = m.encoder(m.positional(m.src_embed(src)), src_mask)  # (B, S, D)
        keys, values = [], []
        for layer in m.decoder.layers:
            attention = layer.cross_attn
            keys.append(attention.split_heads(attention.w_k(memory)))  # (B, H, S, Dk)
            values.append(attention.split_heads(attention.w_v(memory)))  # (B, H, S, Dk)
        return torch.stack(keys), torch.stack(values)  # (L, B, H, S, Dk)


class DecoderStepGraph(_Graph):
    """One decoding step: the newest token (B, 1) and the cache of the t tokens before it -> logits (B, V),
    the cache for t + 1 tokens (L, B, H, t + 1, Dk) and the cross-attention weights (L, B, H, S) of this step."""

    def forward(self, token: Tensor, src_mask: Tensor, self_keys: Tensor, self_values: Tensor,
                cross_keys: Tensor, cross_values: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        m = self.model
        x = m.positional(m.tgt_embed(token), offset=self_keys.size(3))  # (B, 1, D): the token sits at position t
        mask = src_mask[:, None, None, :]  # (B, 1, 1, S)
        new_keys, new_values, weights = [], [], []
        for i, layer in enumerate(m.decoder.layers):
            cache = LayerCache(KVCache(key=self_keys[i], value=self_values[i]),
                               KVCache(static=True, key=cross_keys[i], value=cross_values[i]))
            # The memory argument is only read when the cross-attention cache is empty; here it never is.
            x, _, cross = layer(x, x, mask, None, cache, need_weights=True)  # (B, 1, D), (B, H, 1, S)
            new_keys.append(cache.self_attn.key)  # (B, H, t + 1, Dk)
            new_values.append(cache.self_attn.value)
            weights.append(cross[:, :, 0])  # (B, H, S)
        if m.decoder.norm is not None:
            x = m.decoder.norm(x)
        logits = m.generator(x[:, -1])  # (B, V)
        return logits, torch.stack(new_keys), torch.stack(new_values), torch.stack(weights)


ENCODER_IO = (["src"], ["cross_keys", "cross_values"])
DECODER_IO = (["token", "src_mask", "self_keys", "self_values", "cross_keys", "cross_values"],
              ["logits", "new_self_keys", "new_self_values", "cross_weights"])


@contextlib.contextmanager
def _quiet() -> Any:
    """The exporter's progress lines and notices, kept for an error message instead of printed."""
    said, logger = io.StringIO(), logging.getLogger("torch.onnx")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with contextlib.redirect_stdout(said), contextlib.redirect_stderr(said), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield said
    finally:
        logger.setLevel(level)


def export_graphs(model: Transformer, out: Path) -> None:
    """Write ``encoder.onnx`` and ``decoder.onnx`` for ``model`` into ``out``.

    The dynamo-based exporter (``torch.onnx.export(dynamo=True)``, PyTorch's default) traces with symbolic
    sizes: batch, source length and cache length stay free, within the ranges declared here, and checks the
    model code holds for every size in them (the older TorchScript tracer bakes such checks in as constants).
    """
    from torch.export import Dim

    c = model.config
    batch, src_len = Dim("batch", min=1, max=1024), Dim("src_len", min=1, max=c.max_len)
    past = Dim("past", min=0, max=c.max_len - 1)  # the cache before the first step is empty
    src = torch.randint(4, c.src_vocab_size, (3, 7))  # sizes above 1 so that no axis is taken for a constant
    cross = EncoderGraph(model)(src)
    heads, d_qk, d_v, layers = c.n_heads, model.decoder.layers[0].self_attn.d_qk, c.d_k, len(model.decoder.layers)
    step_args = (torch.full((3, 1), 5), src != c.pad_id, torch.zeros(layers, 3, heads, 4, d_qk),
                 torch.zeros(layers, 3, heads, 4, d_v), *cross)
    jobs = [(EncoderGraph(model), (src,), ENCODER, ENCODER_IO, ({0: batch, 1: src_len},)),
            (DecoderStepGraph(model), step_args, DECODER, DECODER_IO,
             ({0: batch}, {0: batch, 1: src_len}, {1: batch, 3: past}, {1: batch, 3: past}, {1: batch, 3: src_len},
              {1: batch, 3: src_len}))]
    for graph, args, name, (inputs, outputs), shapes in jobs:
        with _quiet() as said:
            try:
                torch.onnx.export(graph.eval(), args, str(out / name), dynamo=True, external_data=False,
                                  input_names=inputs, output_names=outputs, dynamic_shapes=shapes)
            except Exception as error:  # the exporter raises many kinds; its own words go into the message
                lines = [line for line in said.getvalue().splitlines() if line.strip()][-8:]
                raise ExportError(f"torch.onnx.export could not export the {name[:-5]} of this model: "
                                  f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
                                  + ("\n" + "\n".join(lines) if lines else "")) from error


def quantize(out: Path) -> None:
    """Write the int8 copies: weights of matrix products and embeddings as 8-bit integers with a scale, activations
    quantised on the fly (dynamic quantisation). The decoder's product with the tied output matrix, quantised a
    second time transposed, then reads the lookup's copy, through a Transpose that a session folds as it loads."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    for name, int8 in INT8.items():
        with _quiet():
            quantize_dynamic(str(out / name), str(out / int8), weight_type=QuantType.QInt8)
    model = onnx.load(out / INT8[DECODER])
    graph, names = model.graph, {t.name for t in model.graph.initializer}
    copies = {n: n.replace("_Transposed", "") for n in names if n.replace("_Transposed", "") in names - {n}}
    for copy, own in copies.items():
        graph.node.insert(0, onnx.helper.make_node("Transpose" if "_quantized" in own else "Identity", [own], [copy]))
    for tensor in [t for t in graph.initializer if t.name in copies]:
        graph.initializer.remove(tensor)
    onnx.save(model, out / INT8[DECODER])


def share_weights(out: Path, graphs: list[str], weights: str) -> None:
    """Move the large tensors of ``graphs`` into the file ``weights`` that they all name (ONNX external data),
    each distinct one once (both graphs hold the embedding and the position table); small ones stay inline."""
    import onnx

    offsets: dict[bytes, int] = {}  # a tensor's bytes -> where they start in the file
    with open(out / weights, "wb") as file:
        for name in graphs:
            model = onnx.load(out / name)
            for tensor, data in ((t, t.raw_data) for t in model.graph.initializer if len(t.raw_data) >= 1024):
                if data not in offsets:
                    offsets[data] = file.tell()
                    file.write(data)
                onnx.external_data_helper.set_external_data(tensor, weights, offsets[data], len(data))
                tensor.ClearField("raw_data")
            (out / name).write_bytes(model.SerializeToString())


class OnnxCache:
    """The self-attention keys and values that the exported decoder takes and returns, as NumPy arrays."""

    length = 0
    keys: np.ndarray  # (L, B, H, t, Dk)
    values: np.ndarray
    cross: tuple[np.ndarray, np.ndarray] | None = None  # (L, B, H, S, Dk): computed once, never reordered

    def reorder(self, index: Tensor) -> None:
        """Keep batch rows ``index`` (beam search's surviving hypotheses)."""
        self.keys, self.values = self.keys[:, index.numpy()], self.values[:, index.numpy()]


class OnnxTranslator(Transformer):
    """An exported folder run by ONNX Runtime behind the methods that the package's ``greedy_decode`` and
    ``beam_search`` call. ``encode`` packs the cross-attention keys and values as a (B, S, ...) "memory", so that
    beam search's copies of the memory per hypothesis copy them."""

    def __init__(self, folder: str | Path, int8: bool = False, threads: int = 1) -> None:
        import onnxruntime as ort

        nn.Module.__init__(self)  # no weights here: they live in the ONNX files
        folder, options = Path(folder), ort.SessionOptions()
        info = read_config(folder)
        self.config = TransformerConfig.from_dict(info["model"])
        self.generator = nn.Identity()  # decode returns logits already
        options.intra_op_num_threads, options.log_severity_level = threads, 3
        self.encoder_session, self.decoder_session = (
            ort.InferenceSession(str(folder / (INT8[n] if int8 else n)), options, providers=["CPUExecutionProvider"])
            for n in (ENCODER, DECODER))
        self.layers, self.d_qk = info["layers"], info["d_qk"]

    def new_cache(self) -> OnnxCache:  # type: ignore[override]
        return OnnxCache()

    def encode(self, src: Tensor, src_mask: Tensor | None = None) -> Tensor:
        keys, values = self.encoder_session.run(None, {"src": src.cpu().numpy().astype(np.int64)})  # (L, B, H, S, Dk)
        packed = np.concatenate([keys, values], axis=-1).transpose(1, 3, 0, 2, 4)  # (B, S, L, H, Dk + Dv)
        return torch.from_numpy(np.ascontiguousarray(packed)).flatten(2)  # (B, S, L * H * (Dk + Dv))

    def decode(self, tgt: Tensor, memory: Tensor, src_mask: Tensor | None = None,  # type: ignore[override]
               tgt_mask: Tensor | None = None, cache: Any = None, memory_mask: Tensor | None = None) -> Tensor:
        if not isinstance(cache, OnnxCache) or tgt.size(1) != 1:
            raise ValueError("the exported decoder runs one token at a time: pass cache=model.new_cache() and the "
                             "newest token (B, 1)")
        batch, length = memory.shape[:2]
        heads = self.config.n_heads
        if cache.cross is None:  # beam search keeps a sentence's hypotheses in the rows of its memory, never moved
            packed = memory.numpy().reshape(batch, length, self.layers, heads, -1).transpose(2, 0, 3, 1, 4)
            cache.cross = (np.ascontiguousarray(packed[..., : self.d_qk]), np.ascontiguousarray(packed[..., self.d_qk:]))
            cache.keys = np.zeros((self.layers, batch, heads, 0, self.d_qk), np.float32)
            cache.values = np.zeros((self.layers, batch, heads, 0, self.config.d_k), np.float32)
        mask = src_mask.reshape(batch, length) if src_mask is not None else np.ones((batch, length), bool)
        logits, cache.keys, cache.values, _ = self.decoder_session.run(None, {
            "token": tgt.cpu().numpy().astype(np.int64), "src_mask": np.asarray(mask, dtype=bool),
            "self_keys": cache.keys, "self_values": cache.values,
            "cross_keys": cache.cross[0], "cross_values": cache.cross[1]})
        cache.length += 1
        return torch.from_numpy(logits)[:, None, :]  # (B, 1, V)


def read_config(folder: str | Path) -> dict[str, Any]:
    """``config.json`` of an exported folder, checked to be one."""
    path = Path(folder) / CONFIG
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ExportError(f"{folder} is not an exported model: cannot read {path} ({error})") from error
    if not isinstance(info, dict) or info.get("format") != FORMAT:
        raise ExportError(f"{path} is not the config of a minitransformer export (format {FORMAT!r})")
    return info


def _load(checkpoint: str | Path) -> tuple[Transformer, SharedTokenizer, dict[str, Any], Path]:
    from .training import CheckpointError, load_model
    from .training.checkpoint import BEST, latest_checkpoint

    place = Path(checkpoint)
    if not place.exists():
        raise ExportError(f"--checkpoint {checkpoint}: no such file or folder (expected a checkpoint file or a run "
                          "folder written by python -m minitransformer train)")
    try:
        path = place / BEST if place.is_dir() and (place / BEST).is_file() else latest_checkpoint(place)
        model, tokenizer, saved = load_model(path)
    except (CheckpointError, FileNotFoundError, KeyError, TypeError, ValueError) as error:
        raise ExportError(f"cannot export {checkpoint}: {error}. Export takes the checkpoint of an "
                          "encoder-decoder translator written by python -m minitransformer train "
                          "(or average)") from error
    return model.float().eval(), tokenizer, saved, Path(path)


def describe(saved: dict[str, Any]) -> dict[str, str]:
    """What the model translates, in words for a page: dataset and languages."""
    o = saved.get("options", {})
    dataset, dates = o.get("dataset", "text"), o.get("dataset") == "dates"
    src, tgt = (o.get("src_locale"), o.get("tgt_locale")) if dates else (o.get("src_lang"), o.get("tgt_lang"))
    return {"dataset": dataset, "source": src, "target": tgt,
            "title": f"{dataset}, {src} -> {tgt}" + (" (generated with Babel)" if dates else "")}


def held_out(saved: dict[str, Any], n: int | None = None) -> tuple[list[str], list[str]]:
    """Source sentences and references of the run's test split (validation when it has none)."""
    from .training.corpus import load_corpus
    from .training.options import TrainOptions

    options = {k: v for k, v in saved.get("options", {}).items() if k in TrainOptions.__dataclass_fields__}
    corpus = load_corpus(TrainOptions.from_dict({**options, "out": None, "resume": None}).resolved())
    pairs = (corpus.test or corpus.validation)[:n]
    return [s for s, _ in pairs], [t for _, t in pairs]


def export(checkpoint: str | Path, out: str | Path, int8: bool = False, examples: int = 50) -> dict[str, Any]:
    """Export ``checkpoint`` into the folder ``out``; returns its config (also written as ``config.json``)."""
    from .training.checkpoint import chosen_alpha

    require_onnx()
    out = Path(out)
    model, tokenizer, saved, path = _load(checkpoint)
    if out.exists() and not out.is_dir():
        raise ExportError(f"--out {out} is a file: expected a folder (created if it does not exist)")
    if out.is_dir() and any(out.iterdir()) and not (out / CONFIG).is_file():
        raise ExportError(f"--out {out} holds other files: name a new or empty folder, or an earlier export")
    out.mkdir(parents=True, exist_ok=True)
    for old in [*INT8.values(), WEIGHTS, WEIGHTS_INT8, REPORT]:
        (out / old).unlink(missing_ok=True)
    export_graphs(model, out)
    if int8:  # from the one-file float graphs, before they share their weights
        quantize(out)
        share_weights(out, list(INT8.values()), WEIGHTS_INT8)
    share_weights(out, [ENCODER, DECODER], WEIGHTS)
    tokenizer.save(out / TOKENIZER)
    sources, _ = held_out(saved, examples)
    c = model.config
    files = [ENCODER, DECODER, WEIGHTS, TOKENIZER] + ([*INT8.values(), WEIGHTS_INT8] if int8 else [])
    info = {
        "format": FORMAT, "format_version": FORMAT_VERSION,
        "model": c.to_dict(), "layers": len(model.decoder.layers), "d_qk": model.decoder.layers[0].self_attn.d_qk,
        "parameters": model.num_parameters(),
        "checkpoint": str(path), "step": saved.get("step"), **describe(saved),
        "tokens": {"pad": tokenizer.pad_id, "bos": tokenizer.bos_id, "eos": tokenizer.eos_id, "unk": tokenizer.unk_id},
        # what `translate` does: never generate <pad> or <bos>; source + 50 tokens at most; beam 4 with the length
        # penalty the run chose (the paper's 0.6 for runs from before the option)
        "decoding": {"banned": [tokenizer.pad_id, tokenizer.bos_id], "extra_length": 50, "beam": 4,
                     "alpha": chosen_alpha(saved.get("options"))},
        "examples": sources,
        "files": {name: {"bytes": (out / name).stat().st_size,
                         "sha256": hashlib.sha256((out / name).read_bytes()).hexdigest()} for name in files},
        "int8": int8,
    }
    (out / CONFIG).write_text(json.dumps(info, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return info


@torch.no_grad()
def logits_difference(model: Transformer, runtime: OnnxTranslator, src: Tensor, tgt: Tensor) -> float:
    """Largest |difference| between the package's teacher-forced logits and ONNX Runtime's, stepping through
    ``tgt`` (B, T) token by token with the cache; positions after a target's padding are left out."""
    expected = model(src, tgt)  # (B, T, V)
    memory = runtime.encode(src)
    cache = runtime.new_cache()
    src_mask = (src != model.config.pad_id)[:, None, None, :]  # (B, 1, 1, S)
    worst = 0.0
    for t in range(tgt.size(1)):
        got = runtime.decode(tgt[:, t:t + 1], memory, src_mask, cache=cache)[:, 0]  # (B, V)
        keep = (tgt[:, : t + 1] != model.config.pad_id).all(dim=1)  # (B,)
        if keep.any():
            worst = max(worst, float((got[keep] - expected[keep, t]).abs().max()))
    return worst


@torch.no_grad()
def decode_ids(model: Transformer, tokenizer: SharedTokenizer, sentences: list[str], beam: int,
               batch_size: int = 64, alpha: float = 0.6, extra_length: int = 50) -> list[list[int]]:
    """The generated ids of each sentence (up to its end token), batched as ``translate`` batches them."""
    from .evaluation import output_limit

    encoded = tokenizer.encode_batch(sentences)
    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))
    out: list[list[int]] = [[] for _ in encoded]
    for start in range(0, len(order), batch_size):
        chunk = order[start:start + batch_size]
        src = nn.utils.rnn.pad_sequence([torch.tensor(encoded[i]) for i in chunk], batch_first=True,
                                        padding_value=tokenizer.pad_id)  # (B, S)
        if beam == 1:
            ys = greedy_decode(model, src, min(src.size(1) + extra_length, model.config.max_len - 1),
                               tokenizer.bos_id, tokenizer.eos_id)
        else:
            ys = beam_search(model, src, tokenizer.bos_id, tokenizer.eos_id, beam_size=beam, alpha=alpha,
                             max_extra_len=extra_length)
        for i, ids in zip(chunk, ys.tolist()):
            ids = ids[1: 1 + output_limit(model, len(encoded[i]), extra_length)]
            out[i] = ids[: ids.index(tokenizer.eos_id) + 1] if tokenizer.eos_id in ids else ids
    return out


def _score(saved: dict[str, Any], hypotheses: list[str], references: list[str]) -> tuple[str, float]:
    from .evaluation import bleu, exact_match

    if saved.get("options", {}).get("dataset") == "dates":
        return "exact_match", 100 * exact_match(hypotheses, references)
    return "bleu", bleu(hypotheses, references)


def _ms_per_sentence(model: Transformer, tokenizer: SharedTokenizer, sentences: list[str], beam: int,
                     tokens: list[int] | None = None) -> float:
    """Median milliseconds to translate one sentence alone on one thread (batch 1, as the browser does);
    the number of tokens written goes into ``tokens``."""
    times, threads = [], torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for sentence in sentences:
            start = time.perf_counter()
            written = decode_ids(model, tokenizer, [sentence], beam, batch_size=1)[0]
            times.append(1000 * (time.perf_counter() - start))
            if tokens is not None:
                tokens.append(len(written))
    finally:
        torch.set_num_threads(threads)
    return round(statistics.median(times), 2)


def check(folder: str | Path, checkpoint: str | Path, sentences: int = 100, quality_sentences: int | None = None,
          timing_sentences: int = 20, seed: int = 0) -> dict[str, Any]:
    """Compare an exported folder with its checkpoint: the report (also written as ``report.json``). Tokens are
    compared on ``sentences``; int8 is scored on ``quality_sentences`` (default: all the test split)."""
    require_onnx()
    import onnxruntime

    folder = Path(folder)
    info = read_config(folder)
    model, tokenizer, saved, path = _load(checkpoint)
    torch.manual_seed(seed)
    runtime = OnnxTranslator(folder)
    c = model.config
    sources, references = held_out(saved)

    report: dict[str, Any] = {
        "format": "minitransformer-export-report", "checkpoint": str(path), "title": info["title"],
        "parameters": info["parameters"],
        "versions": {"torch": torch.__version__, "onnxruntime": onnxruntime.__version__},
        "machine": {"cpus": os.cpu_count(), "processor": platform.machine()},
    }
    # Logits: random ids (no padding), then real sentence pairs of several lengths padded into one batch.
    random_src = torch.randint(4, c.src_vocab_size, (3, 9))
    random_tgt = torch.cat([torch.full((3, 1), tokenizer.bos_id), torch.randint(4, c.tgt_vocab_size, (3, 11))], 1)
    real_src, real_tgt = (nn.utils.rnn.pad_sequence([torch.tensor(ids) for ids in rows], batch_first=True,
                                                    padding_value=tokenizer.pad_id)
                          for rows in (tokenizer.encode_batch(sources[:16]),
                                       tokenizer.encode_batch(references[:16], add_bos=True)))
    report["logits"] = {"tolerance": LOGIT_TOLERANCE,
                        "random": logits_difference(model, runtime, random_src, random_tgt),
                        "real": logits_difference(model, runtime, real_src, real_tgt)}
    # Tokens: the same searches, the same batches, over held-out sentences.
    checked = sources[:sentences]
    report["tokens"] = {"sentences": len(checked)}
    for name, beam in (("greedy", 1), ("beam4", 4)):
        expected, got = decode_ids(model, tokenizer, checked, beam), decode_ids(runtime, tokenizer, checked, beam)
        differ = [k for k, (e, g) in enumerate(zip(expected, got)) if e != g]
        report["tokens"][name] = {"identical": len(checked) - len(differ), "first_differences": differ[:5]}
    report["sizes"] = {"float": {name: (folder / name).stat().st_size for name in (ENCODER, DECODER, WEIGHTS)}}
    timed, written = sources[:timing_sentences], []
    report["latency_ms"] = {"sentences": len(timed), "beam": 4,
                            "pytorch": _ms_per_sentence(model, tokenizer, timed, 4),
                            "onnx_float": _ms_per_sentence(runtime, tokenizer, timed, 4, written)}
    report["latency_ms"]["tokens"] = statistics.median(written)  # an untrained model writes to its limit
    if info.get("int8"):
        quantised = OnnxTranslator(folder, int8=True)
        report["sizes"]["int8"] = {name: (folder / name).stat().st_size for name in [*INT8.values(), WEIGHTS_INT8]}
        report["latency_ms"]["onnx_int8"] = _ms_per_sentence(quantised, tokenizer, timed, 4)
        scored, refs = sources[:quality_sentences], references[:quality_sentences]
        float_ids, int8_ids = (decode_ids(runner, tokenizer, scored, 4) for runner in (runtime, quantised))
        metric, float_score = _score(saved, tokenizer.decode_batch(float_ids), refs)
        _, int8_score = _score(saved, tokenizer.decode_batch(int8_ids), refs)
        report["quality"] = {"sentences": len(scored), "beam": 4, "metric": metric, "float": round(float_score, 2),
                             "int8": round(int8_score, 2), "change": round(int8_score - float_score, 2),
                             "tokens_changed": sum(a != b for a, b in zip(float_ids, int8_ids))}
    for kind in report["sizes"].values():
        kind["total"] = sum(kind.values())
    (folder / REPORT).write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    return report


def problems(report: dict[str, Any]) -> list[str]:
    """What in a report says the export is not the model (empty when it is)."""
    found = [f"{kind} logits differ by {report['logits'][kind]:.2g} (tolerance {LOGIT_TOLERANCE})"
             for kind in ("random", "real") if not report["logits"][kind] <= LOGIT_TOLERANCE]
    n = report["tokens"]["sentences"]
    return found + [f"{name}: {n - t['identical']} of {n} translations differ (sentences {t['first_differences']} "
                    "first)" for name, t in report["tokens"].items() if name != "sentences" and t["identical"] != n]


def summary(report: dict[str, Any]) -> list[str]:
    """The report in a few printed lines."""
    mb = 1e6
    n, tokens, lat = report["tokens"]["sentences"], report["tokens"], report["latency_ms"]
    lines = [f"checked against {report['checkpoint']} ({report['parameters']:,} parameters, {report['title']}):",
             f"  logits: largest difference {report['logits']['random']:.1e} on random ids, "
             f"{report['logits']['real']:.1e} on real sentences (tolerance {LOGIT_TOLERANCE:g})",
             f"  tokens: greedy identical on {tokens['greedy']['identical']}/{n} held-out sentences, "
             f"beam 4 on {tokens['beam4']['identical']}/{n}",
             f"  size: float {report['sizes']['float']['total'] / mb:.2f} MB"
             + (f", int8 {report['sizes']['int8']['total'] / mb:.2f} MB" if "int8" in report["sizes"] else ""),
             f"  one sentence ({lat['tokens']:g} tokens), beam 4, batch 1, one thread (median of {lat['sentences']}): "
             f"PyTorch {lat['pytorch']:.1f} ms, ONNX float {lat['onnx_float']:.1f} ms"
             + (f", ONNX int8 {lat['onnx_int8']:.1f} ms" if "onnx_int8" in lat else "")]
    q = report.get("quality")
    return lines + ([f"  int8: {'exact match (%)' if q['metric'] == 'exact_match' else 'BLEU'} {q['int8']:.2f} against "
                     f"{q['float']:.2f} for float ({q['change']:+.2f}) on {q['sentences']} test sentences, beam 4; "
                     f"{q['tokens_changed']} translations changed"] if q else [])


def run_command(args: Any) -> int:
    """``python -m minitransformer export``: export, check, print the check, fail if the export is not the model."""
    for name, value in (("sentences", args.sentences), ("quality-sentences", args.quality_sentences)):
        if value is not None and value < 1:
            raise ExportError(f"--{name} must be at least 1, got {value}")
    start = time.perf_counter()
    info = export(args.checkpoint, args.out, int8=args.int8)
    files = ", ".join(f"{name} ({meta['bytes'] / 1e6:.2f} MB)" for name, meta in info["files"].items())
    print(f"exported {info['checkpoint']} to {args.out}: {files}, {CONFIG}")
    report = check(args.out, args.checkpoint, args.sentences, args.quality_sentences)
    print("\n".join(summary(report)))
    if args.report:  # a record for benchmarks/results: what wrote it, and when
        flags = [f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items() if k in ("sentences", "quality_sentences")
                 and v is not None] + ["--int8"] * args.int8
        record = {**report, "command": " ".join(["python -m minitransformer export --checkpoint", str(args.checkpoint),
                                                 "--out", str(args.out), *flags]), "date": time.strftime("%Y-%m-%d")}
        Path(args.report).parent.mkdir(parents=True, exist_ok=True)
        Path(args.report).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    if found := problems(report):
        raise ExportError("the exported model does not match the checkpoint: " + "; ".join(found))
    print(f"the export is the model ({time.perf_counter() - start:.0f} s); report: {Path(args.out) / REPORT}")
    return 0
