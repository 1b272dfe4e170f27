import pytest
import torch

from minitransformer import check_mask, make_causal_mask, make_padding_mask, make_target_mask, to_torch_nn_mask


def test_padding_mask_shape_and_values():
    tokens = torch.tensor([[5, 6, 0], [7, 0, 0]])
    mask = make_padding_mask(tokens, pad_id=0)
    assert mask.shape == (2, 1, 1, 3) and mask.dtype == torch.bool
    assert mask[:, 0, 0].tolist() == [[True, True, False], [True, False, False]]


def test_causal_mask_is_lower_triangular():
    mask = make_causal_mask(4)
    assert mask.shape == (1, 1, 4, 4)
    assert torch.equal(mask[0, 0], torch.tensor([[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]]).bool())


def test_target_mask_combines_both():
    tgt = torch.tensor([[1, 4, 0]])
    mask = make_target_mask(tgt, pad_id=0)
    assert mask.shape == (1, 1, 3, 3)
    assert mask[0, 0].tolist() == [[True, False, False], [True, True, False], [True, True, False]]


def test_bad_masks_say_what_was_expected():
    with pytest.raises(ValueError, match=r"mask has shape \(2, 7\) but the scores are \(2, 8, 5, 5\)"):
        check_mask(torch.ones(2, 7, dtype=torch.bool), (2, 8, 5, 5))
    with pytest.raises(TypeError, match="dtype torch.bool"):
        check_mask(torch.ones(2, 1, 1, 5), (2, 8, 5, 5))
    with pytest.raises(ValueError, match=r"tokens must have shape \(B, S\)"):
        make_padding_mask(torch.ones(3, dtype=torch.long), 0)
    with pytest.raises(ValueError, match="size must be a positive integer"):
        make_causal_mask(0)


def test_conversion_to_torch_nn_convention():
    pad = make_padding_mask(torch.tensor([[3, 0]]), 0)
    assert to_torch_nn_mask(pad).tolist() == [[False, True]]
    causal = to_torch_nn_mask(make_causal_mask(2))
    assert causal.tolist() == [[False, True], [False, False]]
    with pytest.raises(ValueError, match="no nn.MultiheadAttention equivalent"):
        to_torch_nn_mask(make_target_mask(torch.tensor([[3, 0], [3, 3]]), 0))
