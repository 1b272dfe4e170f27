import pytest
import torch

from minitransformer import get_device, set_seed
from minitransformer.utils import atomic_write


def test_set_seed_makes_runs_repeat():
    set_seed(7)
    a = torch.randn(3)
    set_seed(7)
    assert torch.equal(a, torch.randn(3))
    with pytest.raises(ValueError, match=r"seed must be an integer in \[0, 2\*\*64\) .*got -1"):
        set_seed(-1)


def test_get_device_prefers_what_exists():
    assert get_device("cpu") == torch.device("cpu")
    assert get_device().type in ("cuda", "mps", "cpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="'cuda' was asked for, but CUDA is not available"):
            get_device("cuda")


def test_atomic_write_never_leaves_half_a_file(tmp_path):
    path = tmp_path / "sub" / "file.bin"
    atomic_write(path, lambda f: f.write(b"old"))
    assert path.read_bytes() == b"old"

    def broken(f):
        f.write(b"half")
        raise KeyboardInterrupt  # interrupted in the middle of writing

    with pytest.raises(KeyboardInterrupt):
        atomic_write(path, broken)

    def refuse(tmp):
        raise ValueError(f"{tmp.name} is not what was expected")

    with pytest.raises(ValueError, match="not what was expected"):
        atomic_write(path, lambda f: f.write(b"new"), check=refuse)
    assert path.read_bytes() == b"old"
    assert [p.name for p in path.parent.iterdir()] == ["file.bin"]  # no temporary files left
