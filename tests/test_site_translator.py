"""The translator page's JavaScript (site/_static/translator/) against the package, run with Node.js.

tokenizer.js must give SharedTokenizer's ids and text; search.js must find what decoding.greedy_decode and
decoding.beam_search find, hypothesis for hypothesis. The searches are fed by a model whose logits are a
random table indexed by (position, newest token), the same table on both sides, so any difference is the
search's. The page itself, with the exported model, is tested in Chromium by tests/test_site.py.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import torch
from torch import Tensor, nn

from minitransformer import Transformer, TransformerConfig
from minitransformer.data import SharedTokenizer, load_dates
from minitransformer.decoding import beam_search, greedy_decode

ROOT = Path(__file__).resolve().parents[1]
JS = ROOT / "site" / "_static" / "translator"

pytestmark = pytest.mark.extra("site")  # node comes with npm (tests/conftest.py)


def run_node(script: str, data: dict, tmp_path: Path) -> dict:
    """Run ``script`` with Node.js; it reads ``data`` from the file named by ``process.argv[2]``."""
    (tmp_path / "data.json").write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    (tmp_path / "run.js").write_text(script, encoding="utf-8")
    done = subprocess.run([shutil.which("node") or "node", str(tmp_path / "run.js"), str(tmp_path / "data.json")],
                          capture_output=True, text=True, timeout=120, cwd=JS)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


TOKENIZER_JS = f"""
const fs = require('fs');
const {{ BpeTokenizer }} = require({json.dumps(str(JS / 'tokenizer.js'))});
const data = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const tok = new BpeTokenizer(data.tokenizer);
console.log(JSON.stringify({{ encoded: data.texts.map((t) => tok.encode(t)), decoded: data.ids.map((i) => tok.decode(i)) }}));
"""

TEXTS = ["Friday, March 3, 2023", "Montag, 13. Juli 1914", "", " ", "  two  spaces  ", "tab\there\nnewline",
         "Zwei junge Männer stehen auf der Straße.", "a\u0308 decomposed umlaut", "€12,50 – 3°C …",
         "unknown: ☃ 漢字 🙂", "▁already▁marked", "UPPER lower MiXeD 2024-03-03", "x" * 40, "'quotes' \"double\""]


@pytest.mark.parametrize("vocab_size", [120, 1000])
def test_tokenizer_js_gives_the_package_ids_and_text(vocab_size: int, tmp_path: Path) -> None:
    pairs = load_dates("train", n_train=3000, n_validation=10, n_test=10)
    pairs += [("Zwei junge Männer stehen auf der Straße.", "Two young men stand on the street.")] * 3
    tokenizer = SharedTokenizer.train(pairs, vocab_size=vocab_size)
    texts = TEXTS + [s for pair in pairs[:60] for s in pair]
    generator = torch.Generator().manual_seed(0)
    ids = [torch.randint(0, tokenizer.vocab_size, (n,), generator=generator).tolist() for n in range(1, 30)]
    ids += [[tokenizer.bos_id, 3, 3, tokenizer.eos_id, 7], [0, 0, 5], []]
    got = run_node(TOKENIZER_JS, {"tokenizer": json.loads(tokenizer.to_str()), "texts": texts, "ids": ids}, tmp_path)
    for text, js in zip(texts, got["encoded"]):
        assert js == tokenizer.encode(text), text
    for row, js in zip(ids, got["decoded"]):
        assert js == tokenizer.decode(row), row


class TableCache:
    """The only state a table model has: how many tokens were decoded."""

    def __init__(self) -> None:
        self.length = 0

    def reorder(self, index: Tensor) -> None:
        pass


class TableModel(Transformer):
    """Logits read from a (positions, V, V) table by (position, newest token): a model both languages can run."""

    def __init__(self, table: Tensor) -> None:
        nn.Module.__init__(self)
        positions, vocab, _ = table.shape
        self.config = TransformerConfig(vocab, vocab, d_model=8, n_heads=2, d_ff=8, n_encoder_layers=1,
                                        n_decoder_layers=1, max_len=positions)
        self.table = table
        self.generator = nn.Identity()

    def encode(self, src: Tensor, src_mask: Tensor | None = None) -> Tensor:
        return torch.zeros(src.size(0), src.size(1), 1)

    def new_cache(self) -> TableCache:  # type: ignore[override]
        return TableCache()

    def decode(self, tgt, memory, src_mask=None, tgt_mask=None, cache=None, memory_mask=None) -> Tensor:  # type: ignore[override]
        logits = self.table[cache.length, tgt[:, -1]]  # (B, V)
        cache.length += 1
        return logits[:, None, :]  # (B, 1, V)


SEARCH_JS = f"""
const fs = require('fs');
const S = require({json.dumps(str(JS / 'search.js'))});
const data = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
(async () => {{
  const out = [];
  for (const c of data.cases) {{
    const table = data.tables[c.table];
    const vocab = table[0].length;
    let position = 0;
    const decoder = {{  // logits of each row: table[position][newest token]
      async step(tokens) {{
        const logits = new Float32Array(tokens.length * vocab);
        tokens.forEach((t, r) => logits.set(table[position][t], r * vocab));
        position++;
        return {{ logits, weights: new Float32Array(tokens.length) }};
      }},
      reorder() {{}},
    }};
    const options = {{ bos: 1, eos: 2, banned: new Set([0, 1]), vocab, limit: c.limit, beam: c.beam, alpha: c.alpha }};
    const found = c.beam > 1 ? await S.beamSearch(decoder, options) : await S.greedy(decoder, options);
    out.push({{ ids: found.ids, finished: (found.finished || []).map((h) => [h.ids, h.logProb, h.score, h.ended]) }});
  }}
  console.log(JSON.stringify(out));
}})();
"""


def test_search_js_finds_what_the_package_finds(tmp_path: Path) -> None:
    generator = torch.Generator().manual_seed(0)
    tables, cases, expected = [], [], []
    for t, (vocab, sharpness) in enumerate([(6, 1.0), (12, 3.0), (40, 2.0), (9, 0.3)]):
        table = torch.randn(30, vocab, vocab, generator=generator) * sharpness
        table[:, :, 2] += torch.linspace(-2, 3, 30)[:, None]  # the end token grows likelier along the output
        tables.append(table.tolist())
        model = TableModel(torch.tensor(tables[-1]))
        for beam, alpha, length, extra in [(1, 0.6, 4, 6), (2, 0.6, 3, 8), (4, 0.6, 5, 10), (4, 0.0, 2, 5),
                                           (5, 1.2, 6, 12), (8, 0.6, 3, 20), (3, 0.6, 1, 0)]:
            src = torch.full((1, length), 5)  # (1, S): no padding
            limit = min(length + extra, model.config.max_len - (beam == 1))
            found: list[list] = []
            if beam == 1:
                ys = greedy_decode(model, src, limit, 1, 2)
            else:
                ys = beam_search(model, src, 1, 2, beam_size=beam, alpha=alpha, max_extra_len=extra,
                                 on_finished=lambda b, ids, lp, score, ended: found.append(
                                     [ids[1:].tolist(), lp, score, ended]))
            ids = ys[0, 1:].tolist()
            expected.append((ids[: ids.index(2) + 1] if 2 in ids else ids, found))
            cases.append({"table": t, "beam": beam, "alpha": alpha, "limit": limit})
    got = run_node(SEARCH_JS, {"tables": tables, "cases": cases}, tmp_path)
    for case, (ids, found), js in zip(cases, expected, got):
        assert js["ids"] == ids, case
        assert [h[0] for h in js["finished"]] == [h[0] for h in found], case
        for (_, lp, score, ended), (_, js_lp, js_score, js_ended) in zip(found, js["finished"]):
            assert js_lp == pytest.approx(lp, abs=1e-5) and js_score == pytest.approx(score, abs=1e-5)
            assert js_ended == ended, case
