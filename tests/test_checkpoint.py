"""Checkpoints: atomic writes, weights_only loading, clear errors, averaging."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest
import torch

from minitransformer import Transformer, TransformerConfig
from minitransformer.data import SharedTokenizer, load_dates
from minitransformer.training import (
    CheckpointError,
    average_checkpoints,
    latest_checkpoint,
    list_checkpoints,
    load_checkpoint,
    load_model,
    save_checkpoint,
    transformer_scheduler,
)
from minitransformer.training.checkpoint import checkpoint_path, load_model_state
from minitransformer.utils import OutputError


@pytest.fixture(scope="module")
def tokenizer() -> SharedTokenizer:
    return SharedTokenizer.train(load_dates("train", n_train=200, n_validation=0, n_test=0), vocab_size=300)


def _model(tokenizer: SharedTokenizer, **sizes: int) -> Transformer:
    sizes = {"d_model": 16, "n_heads": 2, "d_ff": 32, "n_encoder_layers": 1, "n_decoder_layers": 1, **sizes}
    return Transformer(TransformerConfig.tiny(tokenizer.vocab_size, **sizes))


def test_round_trip_with_weights_only(tmp_path: Path, tokenizer: SharedTokenizer) -> None:
    model = _model(tokenizer)
    optimizer = torch.optim.Adam(model.parameters(), betas=(0.9, 0.98), eps=1e-9)
    scheduler = transformer_scheduler(optimizer, 16, warmup=10)
    model(torch.tensor([[5, 6, 2]]), torch.tensor([[1, 7]])).sum().backward()
    optimizer.step()
    scheduler.step()
    path = save_checkpoint(tmp_path / "c.pt", model, tokenizer, optimizer=optimizer, scheduler=scheduler,
                           step=1, options={"dataset": "dates"}, metrics={"val_loss": 1.5})
    raw = torch.load(path, weights_only=True)  # no pickled code needed
    assert raw["step"] == 1 and raw["config"]["d_model"] == 16 and isinstance(raw["tokenizer"], str)
    loaded, tok, checkpoint = load_model(path)
    assert not loaded.training and tok.to_str() == tokenizer.to_str()
    for (name, a), b in zip(model.state_dict().items(), loaded.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=0, atol=0, msg=name)
    # tied weights stay tied after loading
    assert loaded.generator.weight is loaded.src_embed.embedding.weight
    assert checkpoint["metrics"] == {"val_loss": 1.5}
    assert [p.name for p in tmp_path.iterdir()] == ["c.pt"]  # no temporary file left behind


@pytest.mark.parametrize("failure, expected, message", [
    (KeyboardInterrupt(), KeyboardInterrupt, None),  # as if Ctrl-C arrived in the middle of writing
    (OSError(errno.ENOSPC, "No space left on device"), OutputError,
     r"^disk full while writing .*c\.pt \(No space left on device\): the partial file \.c\.pt\.\w+\.part was "
     r"removed; the previous c\.pt is unchanged"),
])
def test_a_failed_write_keeps_the_previous_file(tmp_path: Path, tokenizer: SharedTokenizer,
                                                monkeypatch: pytest.MonkeyPatch, failure: BaseException,
                                                expected: type[BaseException], message: str | None) -> None:
    model = _model(tokenizer)
    path = save_checkpoint(tmp_path / "c.pt", model, tokenizer, step=1)
    before = path.read_bytes()

    def broken_save(obj: object, handle: object) -> None:
        handle.write(b"PK\x03\x04 half a file")  # type: ignore[attr-defined]
        raise failure

    monkeypatch.setattr(torch, "save", broken_save)
    with pytest.raises(expected, match=message):
        save_checkpoint(path, model, tokenizer, step=2)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["c.pt"]


def test_truncated_and_garbage_files_give_a_clear_error(tmp_path: Path, tokenizer: SharedTokenizer) -> None:
    path = save_checkpoint(tmp_path / "c.pt", _model(tokenizer), tokenizer)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match=r"checkpoint .*c\.pt is truncated or corrupted"):
        load_checkpoint(path)
    path.write_bytes(b"this is not a checkpoint at all")
    with pytest.raises(CheckpointError, match="is truncated or corrupted"):
        load_checkpoint(path)


def test_foreign_files_are_refused(tmp_path: Path, tokenizer: SharedTokenizer) -> None:
    path = tmp_path / "state.pt"
    torch.save(_model(tokenizer).state_dict(), path)  # a bare state_dict
    with pytest.raises(CheckpointError, match=r"is not a minitransformer checkpoint: expected a dict with "
                                              r"format='minitransformer-checkpoint'"):
        load_checkpoint(path)
    torch.save([1, 2, 3], path)
    with pytest.raises(CheckpointError, match="is not a minitransformer checkpoint.*list"):
        load_checkpoint(path)
    with pytest.raises(FileNotFoundError, match="no checkpoint file or run folder"):
        load_checkpoint(tmp_path / "missing.pt")


def test_checkpoint_of_another_model_names_the_difference(tmp_path: Path, tokenizer: SharedTokenizer) -> None:
    path = save_checkpoint(tmp_path / "c.pt", _model(tokenizer, d_model=32, n_heads=4), tokenizer)
    with pytest.raises(CheckpointError, match=r"was written for a model with d_model=32, n_heads=4, but this "
                                              r"model has d_model=16, n_heads=2"):
        load_model_state(_model(tokenizer), load_checkpoint(path), path)


def test_run_folders_list_checkpoints_by_step(tmp_path: Path, tokenizer: SharedTokenizer) -> None:
    model = _model(tokenizer)
    for step in (30, 4, 200):
        save_checkpoint(checkpoint_path(tmp_path, step), model, tokenizer, step=step)
    (tmp_path / "notes.pt").write_bytes(b"")
    assert [p.name for p in list_checkpoints(tmp_path)] == [
        "checkpoint-00000004.pt", "checkpoint-00000030.pt", "checkpoint-00000200.pt"]
    assert load_checkpoint(tmp_path)["step"] == 200  # a folder means its newest checkpoint
    with pytest.raises(FileNotFoundError, match="holds no checkpoint"):
        latest_checkpoint(tmp_path / "empty" if (tmp_path / "empty").mkdir() is None else tmp_path)


def test_averaging_is_the_mean_of_the_parameters(tmp_path: Path, tokenizer: SharedTokenizer) -> None:
    models = [_model(tokenizer) for _ in range(3)]
    paths = [save_checkpoint(checkpoint_path(tmp_path, k), m, tokenizer, step=k) for k, m in enumerate(models)]
    averaged = average_checkpoints(paths)
    assert "optimizer" not in averaged and averaged["step"] == 2
    for name, value in averaged["model"].items():
        expected = torch.stack([m.state_dict()[name] for m in models]).double().mean(0).float()
        torch.testing.assert_close(value, expected, msg=name)
    model = _model(tokenizer)
    model.load_state_dict(averaged["model"])
    torch.testing.assert_close(model.generator.weight, averaged["model"]["src_embed.embedding.weight"])


def test_averaging_refuses_checkpoints_of_other_models(tmp_path: Path, tokenizer: SharedTokenizer) -> None:
    a = save_checkpoint(tmp_path / "a.pt", _model(tokenizer), tokenizer)
    b = save_checkpoint(tmp_path / "b.pt", _model(tokenizer, d_ff=64), tokenizer)
    with pytest.raises(CheckpointError,
                       match=r"b\.pt was written for a model with d_ff=64, but this model has d_ff=32"):
        average_checkpoints([a, b])


def test_pickled_objects_are_refused_not_run(tmp_path: Path) -> None:
    path = tmp_path / "pickled.pt"
    torch.save({"format": "minitransformer-checkpoint", "config": TransformerConfig.tiny(10)}, path)
    with pytest.raises(CheckpointError, match=r"is not a minitransformer checkpoint: it holds objects that "
                                              r"torch.load\(weights_only=True\) refuses.*TransformerConfig"):
        load_checkpoint(path)


def _rewrite(path: Path, **changes: object) -> Path:
    """Change fields of a saved checkpoint, as a damaged or hostile file would have them."""
    raw = torch.load(path, weights_only=True)
    for key, value in changes.items():
        if key.startswith("config_"):
            raw["config"][key[len("config_"):]] = value
        else:
            raw[key] = value
    torch.save(raw, path)
    return path


def test_bad_tokenizer_json_inside_a_checkpoint_names_the_file(tmp_path: Path, tokenizer: SharedTokenizer) -> None:
    path = _rewrite(save_checkpoint(tmp_path / "c.pt", _model(tokenizer), tokenizer), tokenizer='{"model": ')
    with pytest.raises(CheckpointError, match=r"checkpoint .*c\.pt holds a tokenizer that cannot be read: "
                                              r"tokenizer JSON is not a valid tokenizer"):
        load_model(path)


@pytest.mark.parametrize("changes, message", [
    (dict(config_d_model=100_000, config_n_heads=8), r"does not agree with its own config \(src_vocab_size=\d+, "
                                                     r"d_model=100000, d_ff=32\): src_embed.embedding.weight is"),
    (dict(config_d_ff=4_000_000), r"does not agree with its own config.*linear1.weight is \(32, 16\) "
                                  r"\(expected \(4000000, 16\)\)"),
    (dict(config_src_vocab_size=10**9, config_tgt_vocab_size=10**9), "does not agree with its own config"),
    (dict(config_n_encoder_layers=10**6), "claims 1000000 encoder layers but holds the weights of 1"),
    (dict(config_max_len=10**9), r"claims max_len=1000000000 and d_model=16: its positional table alone would "
                                 r"take 59.6 GiB"),
    (dict(config="hello"), "is damaged: 'config' is a str, not a dict"),
    (dict(model={"weight": 3}), "is damaged: 'model' is not a dict of tensors"),
])
def test_a_config_that_disagrees_with_the_weights_is_refused_before_building(
        tmp_path: Path, tokenizer: SharedTokenizer, changes: dict[str, object], message: str) -> None:
    path = _rewrite(save_checkpoint(tmp_path / "c.pt", _model(tokenizer), tokenizer), **changes)
    with pytest.raises(CheckpointError, match=message):
        load_model(path)  # would allocate gigabytes if the config were believed


def test_average_out_never_replaces_a_training_checkpoint(tmp_path: Path, tokenizer: SharedTokenizer) -> None:
    from minitransformer.training.checkpoint import check_average_target

    model = _model(tokenizer)
    training = save_checkpoint(tmp_path / "mine.pt", model, tokenizer, optimizer=torch.optim.Adam(model.parameters()))
    averaged = save_checkpoint(tmp_path / "averaged.pt", model, tokenizer)
    with pytest.raises(IsADirectoryError, match="is a folder; give a file name"):
        check_average_target(tmp_path)
    for name in ("checkpoint-00000007.pt", "best.pt"):
        with pytest.raises(FileExistsError, match="is named like a training checkpoint"):
            check_average_target(tmp_path / name, force=True)
    with pytest.raises(FileExistsError, match=r"is a training checkpoint \(it holds optimizer state\)"):
        check_average_target(training, force=True)
    with pytest.raises(FileExistsError, match="exists; pass --force"):
        check_average_target(averaged)
    assert check_average_target(averaged, force=True) == averaged
    assert check_average_target(tmp_path / "new.pt") == tmp_path / "new.pt"
