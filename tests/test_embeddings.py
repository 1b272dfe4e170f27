import math

import pytest
import torch
from torch.testing import assert_close

from minitransformer import PositionalEncoding, TokenEmbedding, sinusoidal_positional_encoding


def test_positional_encoding_matches_the_formula():
    max_len, d_model = 50, 16
    pe = sinusoidal_positional_encoding(max_len, d_model)
    assert pe.shape == (max_len, d_model)
    for pos in range(max_len):
        for i in range(d_model // 2):
            angle = pos / 10000 ** (2 * i / d_model)
            assert math.isclose(pe[pos, 2 * i].item(), math.sin(angle), abs_tol=1e-6)
            assert math.isclose(pe[pos, 2 * i + 1].item(), math.cos(angle), abs_tol=1e-6)


def test_offset_is_the_same_linear_map_at_every_position():
    # PE(pos + k) = M_k PE(pos): each (sin, cos) pair is rotated by angle k * w_i.
    d_model, k = 32, 7
    pe = sinusoidal_positional_encoding(200, d_model).double()
    w = 10000 ** (-torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    m = torch.zeros(d_model, d_model, dtype=torch.float64)
    for i, wi in enumerate(w):
        c, s = math.cos(k * wi), math.sin(k * wi)
        m[2 * i:2 * i + 2, 2 * i:2 * i + 2] = torch.tensor([[c, -s], [s, c]], dtype=torch.float64)
    assert_close(pe[:-k] @ m, pe[k:], atol=1e-6, rtol=0)
    # M_k depends on k only: it is orthogonal (a rotation) and M_a M_b = M_(a+b) follows.
    assert_close(m @ m.T, torch.eye(d_model, dtype=torch.float64), atol=1e-12, rtol=0)


def test_positional_encoding_module_adds_and_rejects_long_input():
    module = PositionalEncoding(8, max_len=10, dropout=0.0)
    x = torch.zeros(2, 4, 8)
    assert_close(module(x), sinusoidal_positional_encoding(10, 8)[:4].expand(2, 4, 8))
    assert_close(module(x, offset=3)[0], sinusoidal_positional_encoding(10, 8)[3:7])
    with pytest.raises(ValueError, match="sequence of length 11 is longer than max_len=10"):
        module(torch.zeros(1, 11, 8))
    with pytest.raises(ValueError, match="d_model must be a positive even integer"):
        sinusoidal_positional_encoding(10, 7)


def test_token_embedding_scales_by_sqrt_d_model():
    emb = TokenEmbedding(11, 16)
    ids = torch.tensor([[1, 2, 3]])
    assert_close(emb(ids), emb.embedding.weight[ids] * 4.0)
