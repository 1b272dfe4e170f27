// Greedy decoding and beam search of minitransformer/decoding.py, step for step, for one sentence, so that
// the browser writes the same tokens as `python -m minitransformer translate`.
//
// A decoder is an object with two methods: `step(tokens)` runs the exported decoder on the newest token of
// each row and resolves to {logits: Float32Array(rows * V), weights: Float32Array(rows * W)} (W numbers of
// cross-attention per row), and `reorder(parents)` keeps the cache rows `parents`, in that order.
// Scores are rounded to float32 after every operation, as PyTorch computes them.
// Tested against the package's beam_search by tests/test_site_translator.py.
(function (root) {
  'use strict';

  const f32 = Math.fround;

  // log_softmax of one row of logits with the banned ids at -inf (never generated), in float32.
  function logSoftmax(logits, offset, vocab, banned) {
    const row = new Float64Array(vocab);
    let max = -Infinity;
    for (let v = 0; v < vocab; v++) {
      row[v] = banned.has(v) ? -Infinity : logits[offset + v];
      if (row[v] > max) max = row[v];
    }
    let sum = 0;
    for (let v = 0; v < vocab; v++) sum += Math.exp(row[v] - max);
    const shift = max + Math.log(sum);
    const out = new Float32Array(vocab);
    for (let v = 0; v < vocab; v++) out[v] = row[v] - shift;
    return out;
  }

  // lp(Y) = ((5 + |Y|) / 6) ** alpha (Wu et al., 2016), as decoding.length_penalty computes it in float32.
  function lengthPenalty(length, alpha) {
    return f32(Math.pow(f32((5 + length) / 6), alpha));
  }

  // The most likely token at each step; stops at <eos> or after `limit` tokens.
  // Returns {ids, attention}: the generated ids and, per id, the cross-attention that chose it.
  async function greedy(decoder, { bos, eos, banned, vocab, limit }) {
    const ids = [];
    const attention = [];
    let token = bos;
    for (let step = 0; step < limit; step++) {
      const { logits, weights } = await decoder.step([token]);
      let best = -1;
      for (let v = 0; v < vocab; v++) {  // the first of equal maxima, as argmax
        if (!banned.has(v) && (best < 0 || logits[v] > logits[best])) best = v;
      }
      ids.push(best);
      attention.push(weights.slice());
      token = best;
      if (best === eos) break;
    }
    return { ids, attention };
  }

  // Beam search with length penalty, decoding.beam_search for one sentence: K rows live, every step
  // ranks the K x V candidates, keeps the best 2K, finishes those that end (or all at the limit) among
  // the best K, and continues with the best K that do not end. Done with K finished hypotheses or at
  // the limit. Returns {ids, attention, finished}: the best finished hypothesis, and all of them in the
  // order found, each {ids, logProb, score, ended}.
  async function beamSearch(decoder, { bos, eos, banned, vocab, limit, beam, alpha }) {
    const k = Math.min(beam, vocab);
    let rows = Array.from({ length: k }, () => ({ ids: [], attention: [] }));
    // Only the first beam is live at the start, so the first step does not pick K copies.
    let scores = new Float32Array(k).fill(-Infinity);
    scores[0] = 0;
    let best = null;
    let bestScore = -Infinity;
    let nFinished = 0;
    const finished = [];
    const width = Math.min(2 * k, k * vocab);
    for (let step = 0; step < limit; step++) {
      const { logits, weights } = await decoder.step(rows.map((r) => (r.ids.length ? r.ids[r.ids.length - 1] : bos)));
      const perRow = weights.length / k;
      // The best `width` candidates (score, index = beam * V + token), highest first, lower index first on ties.
      const top = [];
      for (let b = 0; b < k; b++) {
        const logp = logSoftmax(logits, b * vocab, vocab, banned);
        for (let v = 0; v < vocab; v++) {
          const score = f32(scores[b] + logp[v]);
          if (top.length === width && !(score > top[width - 1].score)) continue;
          let at = top.length;
          while (at > 0 && score > top[at - 1].score) at--;
          top.splice(at, 0, { score, beam: b, token: v });
          if (top.length > width) top.pop();
        }
      }
      const atLimit = step + 1 >= limit;
      const penalty = lengthPenalty(step + 1, alpha);
      const grow = (c) => ({
        ids: rows[c.beam].ids.concat([c.token]),
        attention: rows[c.beam].attention.concat([weights.slice(c.beam * perRow, (c.beam + 1) * perRow)]),
      });
      let stepBest = -Infinity;
      let stepArg = -1;
      top.forEach((c, rank) => {
        const ends = c.token === eos;
        if (!(rank < k && (ends || atLimit) && Number.isFinite(c.score))) return;
        const score = f32(c.score / penalty);
        finished.push({ ids: rows[c.beam].ids.concat([c.token]), logProb: c.score, score, ended: ends });
        nFinished++;
        if (score > stepBest) { stepBest = score; stepArg = rank; }
      });
      if (stepBest > bestScore) {
        bestScore = stepBest;
        best = grow(top[stepArg]);
      }
      if (nFinished >= k || atLimit) break;
      // Live hypotheses: the best K candidates that do not end (then, if too few, those that do).
      const order = top.map((c, rank) => [c.token === eos ? 1 : 0, rank]).sort((a, b) => a[0] - b[0] || a[1] - b[1])
        .slice(0, k).map(([, rank]) => top[rank]);
      scores = Float32Array.from(order, (c) => c.score);
      rows = order.map(grow);
      decoder.reorder(order.map((c) => c.beam));
    }
    return { ids: best.ids, attention: best.attention, finished };
  }

  // evaluation.cut_loop: an output without <eos> that ends in a group of up to 4 tokens repeated 3 times
  // or more keeps only the first repetition. Returns {ids, note}.
  function cutLoop(ids, eos, limit) {
    const end = ids.indexOf(eos);
    if (end >= 0) return { ids: ids.slice(0, end + 1), note: null };
    const note = 'no end token within its limit of ' + limit + ' tokens';
    for (let period = 1; period <= 4; period++) {
      const unit = ids.slice(ids.length - period).join(',');
      let repeats = 0;
      while (ids.length >= (repeats + 1) * period &&
             ids.slice(ids.length - (repeats + 1) * period).slice(0, period).join(',') === unit) repeats++;
      if (repeats >= 3) return { ids: ids.slice(0, ids.length - (repeats - 1) * period), note: note + ': a loop, cut' };
    }
    return { ids, note };
  }

  const api = { greedy, beamSearch, cutLoop, logSoftmax, lengthPenalty };
  if (typeof module !== 'undefined' && module.exports) module.exports = api;
  else root.MiniTransformer = Object.assign(root.MiniTransformer || {}, api);
})(typeof self !== 'undefined' ? self : this);
