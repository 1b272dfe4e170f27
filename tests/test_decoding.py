import time

import torch

from minitransformer import Transformer, TransformerConfig, greedy_decode, set_seed

PAD, BOS, EOS = 0, 1, 2


def _copy_batch(batch_size: int, length: int, vocab: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    body = torch.randint(3, vocab, (batch_size, length))
    src = torch.cat([body, torch.full((batch_size, 1), EOS)], dim=1)
    tgt_in = torch.cat([torch.full((batch_size, 1), BOS), body], dim=1)
    tgt_out = torch.cat([body, torch.full((batch_size, 1), EOS)], dim=1)
    return src, tgt_in, tgt_out


def test_tiny_model_learns_to_copy_and_greedy_decoding_reproduces_it():
    set_seed(0)
    vocab = 13
    config = TransformerConfig.tiny(vocab, d_model=64, n_heads=4, d_ff=128, dropout=0.0)
    model = Transformer(config)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.98), eps=1e-9)
    start = time.perf_counter()
    for step in range(400):
        src, tgt_in, tgt_out = _copy_batch(64, 8, vocab)
        logits = model(src, tgt_in)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, vocab), tgt_out.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if loss.item() < 0.01:
            break
    elapsed = time.perf_counter() - start
    model.eval()
    src, _, tgt_out = _copy_batch(32, 8, vocab)
    out = greedy_decode(model, src, max_len=12, bos_id=BOS, eos_id=EOS)
    assert out.shape == (32, 10), (out.shape, elapsed)
    assert torch.equal(out[:, 1:], tgt_out), f"copy failed after {step + 1} steps, final loss {loss.item():.3f}"


def test_each_sentence_stops_at_its_own_end_token():
    set_seed(0)
    vocab = 10
    model = Transformer(TransformerConfig.tiny(vocab, d_model=16, n_heads=2, d_ff=32, dropout=0.0)).eval()
    # Force the model to say EOS after the first step for sentence 0 only, by biasing the generator.
    src = torch.randint(3, vocab, (2, 5))
    out = greedy_decode(model, src, max_len=6, bos_id=BOS, eos_id=EOS)
    assert out[:, 0].tolist() == [BOS, BOS]
    for row in out.tolist():
        if EOS in row:
            after = row[row.index(EOS) + 1:]
            assert all(t == PAD for t in after)
