// The package's tokenizer (minitransformer/data/tokenizer.py) in a browser: the same token ids as
// SharedTokenizer.encode and the same text as SharedTokenizer.decode, read from its tokenizers JSON.
//
// Only the pipeline the package builds is implemented, and the JSON is checked to be that one:
// NFC normalisation; Metaspace ("▁" for every space, one in front unless the text starts with one);
// a Split regex that cuts letter runs, single digits and single symbols; byte-pair merges by rank.
// Tested against the Python package by tests/test_site_translator.py (node, or Chromium).
(function (root) {
  'use strict';

  const SPACE = '\u2581';

  function expect(condition, what) {
    if (!condition) throw new Error('tokenizer.json is not the package\'s BPE tokenizer: ' + what);
  }

  class BpeTokenizer {
    constructor(json) {
      const model = json.model || {};
      expect(model.type === 'BPE', 'model.type is ' + model.type + ', expected BPE');
      expect(json.normalizer && json.normalizer.type === 'NFC', 'expected an NFC normalizer');
      const steps = (json.pre_tokenizer || {}).pretokenizers || [];
      const meta = steps[0] || {};
      const split = steps[1] || {};
      expect(steps.length === 2 && meta.type === 'Metaspace' && meta.replacement === SPACE &&
             meta.prepend_scheme === 'always' && split.type === 'Split' && split.behavior === 'Isolated' &&
             !split.invert, 'expected Metaspace then an isolating Split');
      expect(!model.byte_fallback && !model.continuing_subword_prefix && !model.end_of_word_suffix,
             'byte fallback and subword affixes are not used by the package');
      // The Rust regex and JavaScript's read \p{L}, \p{M}, \p{N} and character classes alike.
      this.pattern = new RegExp(split.pattern.Regex, 'gu');
      this.vocab = new Map(Object.entries(model.vocab));
      for (const added of json.added_tokens || []) this.vocab.set(added.content, added.id);
      this.tokens = [];
      for (const [token, id] of this.vocab) this.tokens[id] = token;
      // A merge is a pair of tokens, written ["a", "b"] (tokenizers >= 0.20) or "a b"; its rank is its place.
      this.ranks = new Map(model.merges.map((m, rank) => [Array.isArray(m) ? m[0] + ' ' + m[1] : m, rank]));
      this.unk = this.vocab.get(model.unk_token);
      this.fuseUnk = !!model.fuse_unk;
      this.ignoreMerges = !!model.ignore_merges;
      this.ids = { pad: this.vocab.get('<pad>'), bos: this.vocab.get('<bos>'), eos: this.vocab.get('<eos>') };
    }

    get size() { return this.tokens.length; }

    // The pieces BPE works on, each starting with "▁" where a space was.
    preTokenize(text) {
      let s = text.normalize('NFC').split(' ').join(SPACE);
      if (s === '') return [];
      if (!s.startsWith(SPACE)) s = SPACE + s;
      const pieces = [];
      let end = 0;
      for (const match of s.matchAll(this.pattern)) {
        if (match.index > end) pieces.push(s.slice(end, match.index));  // isolated: the text between matches too
        if (match[0]) pieces.push(match[0]);
        end = match.index + match[0].length;
      }
      if (end < s.length) pieces.push(s.slice(end));
      return pieces;
    }

    // One piece to tokens: start from its characters, then always merge the adjacent pair of lowest rank
    // (the leftmost of equal pairs), as the tokenizers library does.
    bpe(piece) {
      if (this.ignoreMerges && this.vocab.has(piece)) return [piece];
      let symbols = [];
      for (const ch of piece) {  // by code point, not UTF-16 unit
        const known = this.vocab.has(ch);
        if (!known && this.fuseUnk && symbols.length && symbols[symbols.length - 1] === null) continue;
        symbols.push(known ? ch : null);  // null: unknown, becomes <unk>
      }
      for (;;) {
        let best = -1;
        let bestRank = Infinity;
        for (let i = 0; i + 1 < symbols.length; i++) {
          if (symbols[i] === null || symbols[i + 1] === null) continue;
          const rank = this.ranks.get(symbols[i] + ' ' + symbols[i + 1]);
          if (rank !== undefined && rank < bestRank) { best = i; bestRank = rank; }
        }
        if (best < 0) return symbols;
        symbols = symbols.slice(0, best).concat([symbols[best] + symbols[best + 1]], symbols.slice(best + 2));
      }
    }

    // Token ids of one sentence, ending with <eos> as the package's encode does (the source form).
    encode(text, addEos = true) {
      const ids = [];
      for (const piece of this.preTokenize(text)) {
        for (const symbol of this.bpe(piece)) ids.push(symbol === null ? this.unk : this.vocab.get(symbol));
      }
      if (addEos) ids.push(this.ids.eos);
      return ids;
    }

    // Text of generated ids: stops at the first <eos>, drops <pad> and <bos>, keeps <unk> visible.
    decode(ids) {
      const kept = [];
      for (const id of ids) {
        if (id === this.ids.eos) break;
        if (id !== this.ids.pad && id !== this.ids.bos) kept.push(this.tokens[id]);
      }
      // The Metaspace decoder: "▁" becomes a space, except in the first token, where it is dropped.
      return kept.map((t, i) => t.split(SPACE).join(i === 0 ? '' : ' ')).join('');
    }

    // A token's text for display (the heat map's labels).
    label(id) { return this.tokens[id].split(SPACE).join('\u2009'); }
  }

  const api = { BpeTokenizer };
  if (typeof module !== 'undefined' && module.exports) module.exports = api;
  else root.MiniTransformer = Object.assign(root.MiniTransformer || {}, api);
})(typeof self !== 'undefined' ? self : this);
