// The course website's translator: the model exported by `python -m minitransformer export`, run by
// onnxruntime-web (WebAssembly, one thread, no special headers), tokenised by tokenizer.js and decoded by
// search.js, with the beam's hypotheses and the cross-attention drawn as a heat map (docs/shipping.md).
//
// The page holds <div id="translator" data-model="..." data-ort="...">: the folder of the export and the
// folder of onnxruntime-web's files. window.miniTranslator.ready resolves once the model is loaded;
// window.miniTranslator.translate(text, beam, alpha) is what the button calls (the browser test calls it too).
(function () {
  'use strict';

  const MT = window.MiniTransformer;
  const box = document.getElementById('translator');
  const $ = (id) => document.getElementById(id);
  const state = { sessions: {}, precision: 'float' };

  function url(base, name) { return new URL(name, new URL(base, document.baseURI)).href; }

  async function fetchOk(address, kind) {
    const response = await fetch(address);
    if (!response.ok) throw new Error(address + ': ' + response.status + ' ' + response.statusText);
    return kind === 'json' ? response.json() : response.arrayBuffer();
  }

  // The two sessions of one precision ("float" or "int8"), created once. Both graphs name one file of
  // weights (ONNX external data: the embedding they share is stored once), fetched once and handed to each.
  async function sessions(precision) {
    if (!state.sessions[precision]) {
      const int8 = precision === 'int8';
      const files = int8 ? ['encoder.int8.onnx', 'decoder.int8.onnx'] : ['encoder.onnx', 'decoder.onnx'];
      const weights = int8 ? 'weights.int8.bin' : 'weights.bin';
      const data = new Uint8Array(await fetchOk(url(box.dataset.model, weights)));
      const options = { executionProviders: ['wasm'], graphOptimizationLevel: 'all', externalData: [{ path: weights, data }] };
      const [encoder, decoder] = await Promise.all(files.map(async (f) =>
        ort.InferenceSession.create(new Uint8Array(await fetchOk(url(box.dataset.model, f))), options)));
      state.sessions[precision] = { encoder, decoder };
    }
    return state.sessions[precision];
  }

  // The exported decoder step behind search.js's interface. Tensors are (L, rows, H, length, Dk): a row of
  // the cache is L * H blocks of length * Dk numbers, one per layer and head.
  function makeDecoder(session, cross, rows) {
    const c = state.config;
    const [L, , H, S, Dk] = cross.keys.dims;
    const Dv = cross.values.dims[4];
    const tile = (t, width) => {  // (L, 1, H, S, width) -> (L, rows, H, S, width): each hypothesis reads the sentence
      const block = H * S * width;
      const out = new Float32Array(L * rows * block);
      for (let l = 0; l < L; l++) {
        for (let r = 0; r < rows; r++) out.set(t.data.subarray(l * block, (l + 1) * block), (l * rows + r) * block);
      }
      return new ort.Tensor('float32', out, [L, rows, H, S, width]);
    };
    const crossKeys = tile(cross.keys, Dk);
    const crossValues = tile(cross.values, Dv);
    const srcMask = new ort.Tensor('bool', new Uint8Array(rows * S).fill(1), [rows, S]);
    let keys = new ort.Tensor('float32', new Float32Array(0), [L, rows, H, 0, Dk]);
    let values = new ort.Tensor('float32', new Float32Array(0), [L, rows, H, 0, Dv]);
    const gather = (t, parents) => {
      const [, , , T, width] = t.dims;
      const block = H * T * width;
      const out = new Float32Array(t.data.length);
      for (let l = 0; l < L; l++) {
        parents.forEach((p, r) => out.set(t.data.subarray((l * rows + p) * block, (l * rows + p + 1) * block),
                                          (l * rows + r) * block));
      }
      return new ort.Tensor('float32', out, t.dims);
    };
    return {
      async step(tokens) {
        const token = new ort.Tensor('int64', BigInt64Array.from(tokens, BigInt), [rows, 1]);
        const out = await session.run({ token, src_mask: srcMask, self_keys: keys, self_values: values,
                                        cross_keys: crossKeys, cross_values: crossValues });
        keys = out.new_self_keys;
        values = out.new_self_values;
        // cross_weights (L, rows, H, S) -> per row, L * H * S numbers
        const w = out.cross_weights.data;
        const weights = new Float32Array(rows * L * H * S);
        for (let l = 0; l < L; l++) {
          for (let r = 0; r < rows; r++) weights.set(w.subarray((l * rows + r) * H * S, (l * rows + r + 1) * H * S), (r * L + l) * H * S);
        }
        return { logits: out.logits.data, weights };
      },
      reorder(parents) {
        keys = gather(keys, parents);
        values = gather(values, parents);
      },
      shape: { L, H, S },
    };
  }

  // Translate one sentence as `python -m minitransformer translate --beam <beam> --alpha <alpha>` does.
  async function translate(text, beam = 1, alpha = state.config.decoding.alpha) {  // the model's own, as the CLI
    const c = state.config;
    const tok = state.tokenizer;
    const start = performance.now();
    const src = tok.encode(text);
    if (src.length > c.model.max_len) throw new Error('the sentence has ' + src.length + ' tokens; the model reads at most ' + c.model.max_len);
    const { encoder, decoder } = await sessions(state.precision);
    const encoded = await encoder.run({ src: new ort.Tensor('int64', BigInt64Array.from(src, BigInt), [1, src.length]) });
    const cross = { keys: encoded.cross_keys, values: encoded.cross_values };
    const extra = c.decoding.extra_length;
    const options = { bos: c.tokens.bos, eos: c.tokens.eos, banned: new Set(c.decoding.banned), vocab: c.model.tgt_vocab_size };
    let found;
    const rows = beam > 1 ? Math.min(beam, options.vocab) : 1;
    const step = makeDecoder(decoder, cross, rows);
    if (beam > 1) {
      found = await MT.beamSearch(step, { ...options, beam, alpha, limit: Math.min(src.length + extra, c.model.max_len) });
    } else {
      found = await MT.greedy(step, { ...options, limit: Math.min(src.length + extra, c.model.max_len - 1) });
    }
    const limit = Math.min(src.length + extra, c.model.max_len - 1);  // evaluation.output_limit
    const cut = MT.cutLoop(found.ids.slice(0, limit), c.tokens.eos, limit);
    return { source: text, srcIds: src, ids: found.ids.slice(0, limit), kept: cut.ids, note: cut.note,
             text: tok.decode(cut.ids), attention: found.attention.slice(0, cut.ids.length), shape: step.shape,
             finished: found.finished || [], beam, alpha, precision: state.precision, ms: performance.now() - start };
  }

  // The map drawn: rows are output tokens, columns source tokens; a layer's heads averaged, or one head.
  function attentionMap(result, layer, head) {
    const { L, H, S } = result.shape;
    return result.attention.map((w) => Array.from({ length: S }, (_, s) => {
      if (head >= 0) return w[(layer * H + head) * S + s];
      let sum = 0;
      for (let h = 0; h < H; h++) sum += w[(layer * H + h) * S + s];
      return sum / H;
    }));
  }

  function cell(tag, text, attrs = {}) {
    const e = document.createElement(tag);
    e.textContent = text;
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    return e;
  }

  function drawMap(result) {
    const layer = Number($('layer').value);
    const head = Number($('head').value);
    const map = attentionMap(result, layer, head);
    const tok = state.tokenizer;
    const table = document.createElement('table');
    const header = document.createElement('tr');
    header.append(cell('th', ''), ...result.srcIds.map((id) => cell('th', tok.label(id), { class: 'src' })));
    table.append(header);
    map.forEach((row, i) => {
      const tr = document.createElement('tr');
      tr.append(cell('th', tok.label(result.kept[i]), { class: 'tgt' }));
      row.forEach((w, s) => {
        const td = cell('td', '', { 'data-weight': w.toFixed(4), title: tok.label(result.kept[i]) + ' \u2190 ' + tok.label(result.srcIds[s]) + ': ' + w.toFixed(3) });
        td.style.background = 'rgba(37, 99, 235, ' + w.toFixed(3) + ')';
        tr.append(td);
      });
      table.append(tr);
    });
    $('attention').replaceChildren(table);
    result.map = map;
  }

  function show(result) {
    $('translation').textContent = result.text;
    const tok = state.tokenizer;
    $('timing').textContent = (result.beam > 1 ? 'beam ' + result.beam + ', length penalty ' + result.alpha : 'greedy') +
      ', ' + result.precision + ': ' + result.kept.length + ' tokens in ' + result.ms.toFixed(0) + ' ms' +
      (result.note ? ' (unreliable: ' + result.note + ')' : '');
    const rows = result.finished.slice().sort((a, b) => b.score - a.score);
    const body = rows.map((h) => {
      const tr = document.createElement('tr');
      if (h.ids.join() === result.ids.join()) tr.className = 'chosen';
      tr.append(cell('td', tok.decode(h.ids)), cell('td', String(h.ids.length)), cell('td', h.logProb.toFixed(3)),
                cell('td', h.score.toFixed(3)), cell('td', h.ended ? 'end token' : 'length limit'));
      return tr;
    });
    $('hypotheses').replaceChildren(...body);
    $('hypotheses-box').hidden = rows.length === 0;
    drawMap(result);
  }

  async function onTranslate() {
    const text = $('source').value;
    if (!text.trim()) { $('translation').textContent = ''; return; }
    $('translate').disabled = true;
    try {
      state.last = await translate(text, Math.max(1, Number($('beam').value) || 1), Number($('alpha').value));
      window.miniTranslator.last = state.last;
      show(state.last);
    } catch (error) {
      $('translation').textContent = 'error: ' + error.message;
    } finally {
      $('translate').disabled = false;
    }
  }

  async function load() {
    ort.env.wasm.numThreads = 1;  // plain WebAssembly: no SharedArrayBuffer, so no cross-origin isolation headers
    ort.env.wasm.proxy = false;
    const ortBase = box.dataset.ort;
    // The loader module is shipped as .js as well: some static hosts serve .mjs with a type browsers refuse.
    // (The .wasm compiles while it downloads where the host says application/wasm, and from a copy otherwise.)
    ort.env.wasm.wasmPaths = { mjs: url(ortBase, box.dataset.ortLoader), wasm: url(ortBase, 'ort-wasm-simd-threaded.wasm') };
    const [config, tokenizer] = await Promise.all([fetchOk(url(box.dataset.model, 'config.json'), 'json'),
      fetchOk(url(box.dataset.model, 'tokenizer.json'), 'json')]);
    state.config = config;
    state.tokenizer = new MT.BpeTokenizer(tokenizer);
    await sessions('float');
    const c = config;
    $('model-info').textContent = 'This page runs ' + c.title + ': ' + c.parameters.toLocaleString('en') +
      ' parameters, exported from ' + c.checkpoint + (c.step ? ' (step ' + c.step + ')' : '') + '.';
    $('examples').append(...c.examples.map((e) => cell('option', e, { value: e })));
    $('examples').onchange = () => { $('source').value = $('examples').value; };
    $('source').value = c.examples[0] || '';
    $('alpha').value = String(c.decoding.alpha);  // the length penalty the model's training chose
    if (c.int8) $('precision').append(cell('option', 'int8 (dynamically quantised)', { value: 'int8' }));
    $('precision').onchange = async () => { state.precision = $('precision').value; await sessions(state.precision); };
    for (let l = 0; l < c.layers; l++) $('layer').append(cell('option', 'layer ' + (l + 1), { value: String(l) }));
    $('layer').value = String(c.layers - 1);
    for (let h = 0; h < c.model.n_heads; h++) $('head').append(cell('option', 'head ' + (h + 1), { value: String(h) }));
    for (const id of ['layer', 'head']) $(id).onchange = () => state.last && drawMap(state.last);
    $('translate').onclick = onTranslate;
    $('source').onkeydown = (event) => { if (event.key === 'Enter') onTranslate(); };
    $('translate').disabled = false;
    box.dataset.ready = 'true';
    window.miniTranslator.readyMs = performance.now();
  }

  window.miniTranslator = { translate, attentionMap, state };
  window.miniTranslator.ready = load().catch((error) => {
    $('model-info').textContent = 'The translator could not start: ' + error.message;
    box.dataset.ready = 'error';
    throw error;
  });
})();
