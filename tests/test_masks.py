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


@pytest.mark.parametrize("shape", [(2, 1, 1, 5), (2, 1, 4, 5), (2, 8, 4, 5), (1, 1, 4, 5), (1, 1, 1, 5), (4, 5), (1, 5)])
def test_documented_shapes_are_accepted(shape):
    check_mask(torch.ones(shape, dtype=torch.bool), (2, 8, 4, 5))


def test_a_3d_mask_is_refused_with_the_reshape_even_when_batch_equals_heads():
    # B == H == 8: a (B, 1, S) mask broadcasts as (1, H, 1, S), each head reading another sentence's mask.
    mask = torch.ones(8, 1, 10, dtype=torch.bool)
    torch.broadcast_shapes(mask.shape, (8, 8, 10, 10))  # broadcasting alone would accept it
    with pytest.raises(ValueError, match=r"has shape \(8, 1, 10\).*padding mask is \(B, 1, 1, S\): use mask\[:, None\]"):
        check_mask(mask, (8, 8, 10, 10))
    check_mask(mask[:, None], (8, 8, 10, 10))  # the suggested fix is right


@pytest.mark.parametrize(
    "shape, message",
    [
        ((3, 1, 1, 5), r"mask is for 3 sentences but the batch has B = 2"),
        ((2, 1, 1, 6), r"covers 6 keys but there are Tk = 5"),
        ((2, 1, 5, 1), r"covers 1 keys but there are Tk = 5"),  # a query mask (B, 1, T, 1) is not a padding mask
        ((2, 3, 4, 5), r"axis 1 is the heads: 1 .* or H = 8, got 3"),
        ((2, 1, 3, 5), r"axis -2 is the queries: 1 .* or Tq = 4, got 3"),
        ((2, 5), r"a 2-D mask is \(Tq, Tk\) = \(4, 5\).*use mask\[:, None, None, :\]"),
        ((5,), r"expected a mask of shape \(B, 1, 1, Tk\)"),
        ((1, 2, 1, 1, 5), r"expected a mask of shape"),
    ],
)
def test_wrong_axes_are_named(shape, message):
    with pytest.raises(ValueError, match=message):
        check_mask(torch.ones(shape, dtype=torch.bool), (2, 8, 4, 5), name="mask")


@pytest.mark.parametrize("dtype, hint", [(torch.float32, r"mask == 0 if it is an additive mask"),
                                         (torch.int64, r"mask.bool\(\) if nonzero means 'may attend'")])
def test_non_bool_masks_say_how_to_convert(dtype, hint):
    with pytest.raises(TypeError, match=hint):
        check_mask(torch.ones(2, 1, 1, 5, dtype=dtype), (2, 8, 4, 5))
    with pytest.raises(TypeError, match="src_mask must be a bool tensor"):
        check_mask([[True]], (1, 1, 1, 1), name="src_mask")


def test_scores_of_other_ranks_take_a_mask_of_their_rank_or_2d():
    check_mask(torch.ones(2, 1, 5, dtype=torch.bool), (2, 4, 5))  # (B, Tq, Tk) scores: no heads axis to confuse
    check_mask(torch.ones(4, 5, dtype=torch.bool), (2, 4, 5))
    check_mask(torch.ones(1, 5, dtype=torch.bool), (1, 5))
    with pytest.raises(ValueError, match="sentences but the batch has B = 2"):
        check_mask(torch.ones(3, 1, 5, dtype=torch.bool), (2, 4, 5))
