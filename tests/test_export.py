"""``python -m minitransformer export``: the ONNX files are the model (logits, tokens), int8 is measured, errors are clear.

A tiny dates model is trained and exported once for the module (the dynamo exporter takes tens of seconds);
every test reads that export. The browser's side is tests/test_site.py and tests/test_site_translator.py.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from minitransformer.__main__ import main
from minitransformer.evaluation import translate_sentences
from minitransformer.training import load_model

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--train-size", "400", "--d-model", "16", "--n-heads", "2", "--d-ff", "32", "--layers", "1",
        "--batch-tokens", "400", "--warmup", "10", "--eval-sentences", "8", "--show", "0", "--target", "0",
        "--embedding-init", "xavier", "--max-steps", "40"]

pytestmark = pytest.mark.extra("export")


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A tiny dates model, trained for 40 steps and exported with --int8 through the command line."""
    folder = tmp_path_factory.mktemp("export")
    old = {k: os.environ.get(k) for k in ("XDG_CACHE_HOME", "TQDM_DISABLE")}
    os.environ.update(XDG_CACHE_HOME=str(folder / "cache"), TQDM_DISABLE="1")
    try:
        assert main(["train", *TINY, "--beam-alpha", "1.2", "--out", str(folder / "run")]) == 0
        import contextlib
        import io

        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            code = main(["export", "--checkpoint", str(folder / "run"), "--out", str(folder / "onnx"), "--int8",
                         "--sentences", "24", "--quality-sentences", "40", "--report", str(folder / "record.json")])
    finally:
        for k, v in old.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
    return {"code": code, "printed": printed.getvalue(), "run": folder / "run", "out": folder / "onnx",
            "record": folder / "record.json"}


def test_the_command_writes_the_files_and_prints_its_proof(exported: dict) -> None:
    assert exported["code"] == 0, exported["printed"]
    out = exported["out"]
    for name in ("encoder.onnx", "decoder.onnx", "weights.bin", "encoder.int8.onnx", "decoder.int8.onnx",
                 "weights.int8.bin", "tokenizer.json", "config.json", "report.json"):
        assert (out / name).is_file(), name
    printed = exported["printed"]
    for phrase in ("logits: largest difference", "greedy identical on 24/24", "beam 4 on 24/24", "int8",
                   "exact match (%)", "the export is the model"):
        assert phrase in printed, printed
    report = json.loads((out / "report.json").read_text())
    record = json.loads(exported["record"].read_text())
    assert record.pop("command").startswith("python -m minitransformer export --checkpoint") and record.pop("date")
    assert record == report
    assert report["logits"]["random"] < 1e-4 and report["logits"]["real"] < 1e-4
    assert report["sizes"]["int8"]["total"] < report["sizes"]["float"]["total"]
    assert report["quality"]["sentences"] == 40 and report["quality"]["metric"] == "exact_match"
    config = json.loads((out / "config.json").read_text())
    assert config["int8"] and config["examples"] and config["dataset"] == "dates"
    assert config["decoding"]["alpha"] == 1.2  # the length penalty the run chose, as `translate` uses it


def test_onnx_runtime_steps_give_the_package_logits_cache_and_attention(exported: dict) -> None:
    import onnxruntime as ort

    model, tokenizer, _ = load_model(exported["run"])
    out = exported["out"]
    encoder = ort.InferenceSession(str(out / "encoder.onnx"), providers=["CPUExecutionProvider"])
    decoder = ort.InferenceSession(str(out / "decoder.onnx"), providers=["CPUExecutionProvider"])
    sentences = ["Friday, March 3, 2023", "Monday, May 1, 2000 and more words"]
    src = torch.nn.utils.rnn.pad_sequence([torch.tensor(tokenizer.encode(s)) for s in sentences], batch_first=True)
    tgt = torch.randint(4, tokenizer.vocab_size, (2, 7))
    tgt[:, 0] = tokenizer.bos_id
    expected = model(src, tgt)  # (B, T, V)
    crosses = model.attention_maps(src, tgt)["cross"]  # per layer (B, H, T, S)
    keys, values = encoder.run(None, {"src": src.numpy()})
    cache = model.new_cache()
    model.decode(tgt, model.encode(src), (src != 0)[:, None, None, :], cache=cache)  # the package's cache, T tokens
    self_keys = np.zeros((keys.shape[0], 2, keys.shape[2], 0, keys.shape[4]), np.float32)
    self_values = np.zeros_like(self_keys)
    for t in range(tgt.size(1)):
        logits, self_keys, self_values, weights = decoder.run(None, {
            "token": tgt[:, t:t + 1].numpy(), "src_mask": (src != 0).numpy(), "self_keys": self_keys,
            "self_values": self_values, "cross_keys": keys, "cross_values": values})
        np.testing.assert_allclose(logits, expected[:, t].detach().numpy(), atol=1e-4)
        np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)  # each head's row of the heat map
        for layer, cross in enumerate(crosses):
            np.testing.assert_allclose(weights[layer], cross[:, :, t].numpy(), atol=1e-5)
    assert weights[:, 0, :, -1].max() == 0  # the first sentence's padding gets no attention
    for layer, layer_cache in enumerate(cache.layers):
        np.testing.assert_allclose(self_keys[layer], layer_cache.self_attn.key.detach().numpy(), atol=1e-5)


def test_the_package_searches_on_onnx_runtime_translate_as_the_cli(exported: dict,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    from minitransformer.export import OnnxTranslator, held_out

    model, tokenizer, saved = load_model(exported["run"])
    sentences = held_out(saved, 12)[0] + ["Sunday, July 4, 1999", "not a date at all"]
    runtime = OnnxTranslator(exported["out"])
    for beam in (1, 4):
        assert main(["translate", "--checkpoint", str(exported["run"]), "--beam", str(beam), *sentences]) == 0
        cli = capsys.readouterr().out.splitlines()
        assert translate_sentences(runtime, tokenizer, sentences, "cpu", beam_size=beam) == \
            translate_sentences(model, tokenizer, sentences, "cpu", beam_size=beam)
        assert len(cli) == len(sentences)


def test_int8_files_run_and_stay_close(exported: dict) -> None:
    from minitransformer.export import OnnxTranslator

    model, tokenizer, _ = load_model(exported["run"])
    src = torch.tensor([tokenizer.encode("Friday, March 3, 2023")])
    quantised = OnnxTranslator(exported["out"], int8=True)
    cache = quantised.new_cache()
    got = quantised.decode(torch.tensor([[tokenizer.bos_id]]), quantised.encode(src), None, cache=cache)[:, 0]
    expected = model(src, torch.tensor([[tokenizer.bos_id]]))[:, 0]
    assert (got - expected).abs().max() < 0.5 * expected.abs().max()  # close, not equal: weights of 8 bits


def test_each_tensor_is_stored_once(exported: dict) -> None:
    """A precision's two graphs read one weights file, which holds each distinct tensor once: the embedding
    that both use is there once, and the int8 decoder keeps no transposed copy of the tied output matrix."""
    import onnx

    out = exported["out"]
    for graphs, weights in ((("encoder.onnx", "decoder.onnx"), "weights.bin"),
                            (("encoder.int8.onnx", "decoder.int8.onnx"), "weights.int8.bin")):
        spans: dict[str, set] = {}  # tensor name -> its (offset, length) in the file, over both graphs
        for graph in graphs:
            for tensor in onnx.load(out / graph, load_external_data=False).graph.initializer:
                if tensor.data_location == onnx.TensorProto.EXTERNAL:
                    where = {e.key: e.value for e in tensor.external_data}
                    assert where["location"] == weights
                    spans.setdefault(tensor.name, set()).add((int(where["offset"]), int(where["length"])))
                assert "_Transposed" not in tensor.name, (graph, tensor.name)
        embedding = [name for name in spans if name.startswith("model.generator.weight")]
        assert len(embedding) == 1 and len(spans[embedding[0]]) == 1, spans  # one tensor, one place, both graphs
        distinct = set().union(*spans.values())
        assert sum(length for _, length in distinct) == (out / weights).stat().st_size  # nothing stored twice


def test_a_checkpoint_it_cannot_export_is_one_clear_line(exported: dict, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "notes.txt").write_text("not a checkpoint")
    torch.save({"weights": torch.zeros(2)}, tmp_path / "foreign.pt")
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "mine.txt").write_text("keep me")
    cases = [(["--checkpoint", str(tmp_path / "missing.pt")], "no such file or folder"),
             (["--checkpoint", str(tmp_path / "notes.txt")], "cannot export"),
             (["--checkpoint", str(tmp_path / "foreign.pt")], "cannot export"),
             (["--checkpoint", str(exported["run"]), "--out", str(tmp_path / "notes.txt")], "is a file"),
             (["--checkpoint", str(exported["run"]), "--out", str(tmp_path / "busy")], "holds other files"),
             (["--checkpoint", str(exported["run"]), "--sentences", "0"], "at least 1")]
    for args, words in cases:
        args = args if "--out" in args else [*args, "--out", str(tmp_path / "out")]
        assert main(["export", *args]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("minitransformer export: error:") and words in err and "\n" not in err, err
    assert (tmp_path / "busy" / "mine.txt").read_text() == "keep me"


def test_without_the_extra_the_command_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "onnxruntime" else real(name, *a))
    assert main(["export", "--checkpoint", "runs/none", "--out", "x"]) == 2
    err = capsys.readouterr().err
    assert 'pip install -e ".[export]"' in err and err.count("\n") == 1
