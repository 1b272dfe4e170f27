"""Label smoothing (paper, section 5.4): the target distribution, padding, and torch's version."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from minitransformer.training import LabelSmoothingLoss, label_smoothed_nll

PAD = 0


def _reference(logits: torch.Tensor, target: torch.Tensor, eps: float) -> torch.Tensor:
    """Mean cross-entropy against the explicit target distribution q, built cell by cell."""
    V = logits.size(-1)
    q = torch.full_like(logits, eps / (V - 2))
    q[..., PAD] = 0.0
    q.scatter_(-1, target[..., None], 1.0 - eps)
    per_token = -(q * torch.log_softmax(logits, dim=-1)).sum(-1)
    keep = target != PAD
    return per_token[keep].mean()


def test_matches_the_explicit_target_distribution() -> None:
    logits = torch.randn(3, 5, 11)
    target = torch.randint(1, 11, (3, 5))
    target[0, 3:] = PAD
    loss = LabelSmoothingLoss(0.1, PAD)(logits, target)
    torch.testing.assert_close(loss, _reference(logits, target, 0.1))


def test_target_distribution_sums_to_one_and_gives_pad_nothing() -> None:
    # With logits that are the log of a distribution p, the loss is -sum q log p; a one-hot
    # probe on each token recovers q(token).
    V, eps = 7, 0.1
    target = torch.tensor([4])
    q = []
    for v in range(V):
        logits = torch.full((1, V), -30.0)
        logits[0, v] = 0.0  # p is (almost) one-hot on v: log p(v) = 0, log p(other) = -30
        loss, _, _ = label_smoothed_nll(logits, target, eps, PAD)
        q.append(float(loss) / 30.0)  # = q mass outside v, times 30 / 30
    outside = torch.tensor(q)  # 1 - q(v)
    mass = 1.0 - outside
    torch.testing.assert_close(mass[4], torch.tensor(1.0 - eps), atol=1e-4, rtol=0)
    torch.testing.assert_close(mass[PAD], torch.tensor(0.0), atol=1e-4, rtol=0)
    others = [v for v in range(V) if v not in (4, PAD)]
    torch.testing.assert_close(mass[others], torch.full((V - 2,), eps / (V - 2)), atol=1e-4, rtol=0)


def test_equals_torch_cross_entropy_without_the_pad_column() -> None:
    # torch smooths over all V classes: q(y) = 1 - e + e/V. Ours gives pad nothing and
    # spreads eps over V - 2 tokens. With the pad column removed (its probability ~0) and
    # torch's epsilon e = eps (V - 1) / (V - 2), the two distributions are the same.
    V, eps = 13, 0.1
    logits = torch.randn(4, 6, V)
    logits[..., PAD] = -1e4
    target = torch.randint(1, V, (4, 6))
    ours = LabelSmoothingLoss(eps, PAD)(logits, target)
    theirs = F.cross_entropy(logits[..., 1:].reshape(-1, V - 1), (target - 1).reshape(-1),
                             label_smoothing=eps * (V - 1) / (V - 2))
    torch.testing.assert_close(ours, theirs)


def test_without_smoothing_equals_cross_entropy_with_ignore_index() -> None:
    logits = torch.randn(2, 7, 9)
    target = torch.randint(1, 9, (2, 7))
    target[1, 4:] = PAD
    ours = LabelSmoothingLoss(0.0, PAD)(logits, target)
    theirs = F.cross_entropy(logits.reshape(-1, 9), target.reshape(-1), ignore_index=PAD)
    torch.testing.assert_close(ours, theirs)


def test_padding_positions_change_nothing() -> None:
    logits = torch.randn(2, 6, 10, requires_grad=True)
    target = torch.randint(1, 10, (2, 6))
    target[:, 4:] = PAD
    loss_sum, nll_sum, n = label_smoothed_nll(logits, target, 0.1, PAD)
    assert n == 8
    loss_sum.backward()
    assert logits.grad is not None and torch.all(logits.grad[:, 4:] == 0)
    other = logits.detach().clone()
    other[:, 4:] = torch.randn(2, 2, 10) * 100  # garbage under the padding
    again, _, _ = label_smoothed_nll(other, target, 0.1, PAD)
    torch.testing.assert_close(again, loss_sum.detach())


def test_reductions_and_nll() -> None:
    logits = torch.randn(3, 4, 8)
    target = torch.randint(1, 8, (3, 4))
    loss_sum, nll_sum, n = LabelSmoothingLoss(0.1, PAD, reduction="none")(logits, target)
    torch.testing.assert_close(LabelSmoothingLoss(0.1, PAD, reduction="sum")(logits, target), loss_sum)
    torch.testing.assert_close(LabelSmoothingLoss(0.1, PAD)(logits, target), loss_sum / n)
    torch.testing.assert_close(nll_sum / n, F.cross_entropy(logits.reshape(-1, 8), target.reshape(-1)))


def test_bfloat16_logits_are_scored_in_float32() -> None:
    logits = torch.randn(2, 3, 9)
    target = torch.randint(1, 9, (2, 3))
    loss, _, _ = label_smoothed_nll(logits.bfloat16(), target)
    assert loss.dtype == torch.float32
    torch.testing.assert_close(loss, label_smoothed_nll(logits.bfloat16().float(), target)[0])


def test_clear_errors() -> None:
    with pytest.raises(ValueError, match=r"logits must be \(\.\.\., V\)"):
        label_smoothed_nll(torch.randn(2, 3, 5), torch.zeros(2, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="epsilon must be in"):
        LabelSmoothingLoss(1.0)
    with pytest.raises(ValueError, match="reduction must be"):
        LabelSmoothingLoss(reduction="avg")


@pytest.mark.parametrize("pad_logit", [float("-inf"), -1e30])
def test_a_padding_logit_of_minus_infinity_or_very_negative_is_exact(pad_logit: float) -> None:
    # p(pad) = 0 then, so the loss equals torch's over the other V - 1 columns with eps spread over V - 2.
    torch.manual_seed(0)
    logits = torch.randn(2, 4, 9)
    logits[..., PAD] = pad_logit
    target = torch.tensor([[3, 4, 5, 0], [6, 7, 0, 0]])
    ours = LabelSmoothingLoss(0.1, PAD)(logits, target)
    keep = target != PAD
    V = logits.size(-1)
    theirs = F.cross_entropy(logits[keep][:, 1:], target[keep] - 1, label_smoothing=0.1 * (V - 1) / (V - 2))
    assert torch.isfinite(ours)
    torch.testing.assert_close(ours, theirs)
    logits.requires_grad_(True)
    LabelSmoothingLoss(0.1, PAD)(logits, target).backward()
    assert torch.isfinite(logits.grad).all()


def test_pad_id_none_counts_every_position_and_smooths_over_all_other_tokens() -> None:
    torch.manual_seed(0)
    logits = torch.randn(5, 7)
    target = torch.tensor([0, 1, 2, 3, 6])  # id 0 is a real class here
    V = logits.size(-1)
    expected = F.cross_entropy(logits, target, label_smoothing=0.1 * V / (V - 1))
    torch.testing.assert_close(LabelSmoothingLoss(0.1, pad_id=None)(logits, target), expected)
    assert label_smoothed_nll(logits, target, 0.1, None)[2] == 5
