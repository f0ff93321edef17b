// RCP Inspector page: plain JavaScript, no dependencies, no build step.
// It speaks RCP's HTTP transport (§5.2) to the inspector's proxy at /rpc/<engine>/<method>.
'use strict';

const $ = (id) => document.getElementById(id);

// Uncaught errors are kept where a test (or a curious user) can read them.
window.inspectorErrors = [];
window.addEventListener('error', (e) => window.inspectorErrors.push(String(e.message)));
window.addEventListener('unhandledrejection', (e) => window.inspectorErrors.push(String(e.reason && e.reason.message ? e.reason.message : e.reason)));

/** Creates an element; `attrs` keys starting with "on" are listeners, children are nodes or text. */
function el(tag, attrs, ...children) {
  const svg = ['svg', 'line', 'polyline', 'circle', 'text', 'g', 'path', 'rect', 'title'].includes(tag);
  const node = svg ? document.createElementNS('http://www.w3.org/2000/svg', tag) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) node.addEventListener(k.slice(2), v);
    else if (k === 'class') node.setAttribute('class', v);
    else if (k === 'text') node.textContent = v;
    else node.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

const PANELS = ['server', 'query', 'stream', 'graph', 'compare', 'wire', 'conformance'];

const state = {
  engines: [],
  registry: false,
  origin: '',
  engine: null,
  info: null,
  sessions: {},
  panel: 'server',
  idPrefix: 'page-' + Math.random().toString(36).slice(2, 8),
  seq: 0,
  query: null, // {params, hits, cursor}
  stream: null, // {id, controller, done}
  wireAfter: 0,
  wire: [],
  wireTimer: null,
  compare: null,
};

/** A JSON-RPC error object, or a transport failure named like one. */
class RpcError extends Error {
  constructor(error) {
    super(error && error.message ? error.message : String(error));
    this.code = error && error.code !== undefined ? error.code : 'transport';
    this.data = error ? error.data : undefined;
  }
}

function nextId() {
  state.seq += 1;
  return `${state.idPrefix}-${state.seq}`;
}

/**
 * Sends one request. With `opts.stream`, asks for SSE and calls `opts.onFrame` with every
 * notification before the response. Resolves to the response frame.
 */
async function rpcFrame(engine, method, params, opts = {}) {
  const id = opts.id || nextId();
  const frame = { jsonrpc: '2.0', id, method };
  if (params !== undefined) frame.params = params;
  const headers = { 'content-type': 'application/json', accept: opts.stream ? 'text/event-stream, application/json' : 'application/json' };
  if (state.sessions[engine]) headers['rcp-session'] = state.sessions[engine];
  let resp;
  try {
    resp = await fetch(`/rpc/${encodeURIComponent(engine)}/${method}`, { method: 'POST', headers, body: JSON.stringify(frame), signal: opts.signal });
  } catch (e) {
    throw new RpcError({ code: 'transport', message: `the inspector did not answer: ${e.message || e}` });
  }
  const session = resp.headers.get('rcp-session');
  if (session) state.sessions[engine] = session;
  const type = resp.headers.get('content-type') || '';
  if (type.startsWith('text/event-stream')) {
    const reader = resp.body.getReader();
    const decoder = new TextDecoder();
    let buf = '';
    for (;;) {
      let chunk;
      try {
        chunk = await reader.read();
      } catch (e) {
        throw new RpcError({ code: 'transport', message: `the event stream broke: ${e.message || e}` });
      }
      if (chunk.done) break;
      buf += decoder.decode(chunk.value, { stream: true }).replace(/\r\n/g, '\n');
      let end;
      while ((end = buf.indexOf('\n\n')) >= 0) {
        const event = buf.slice(0, end);
        buf = buf.slice(end + 2);
        const data = event.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).replace(/^ /, '')).join('\n');
        if (!data) continue;
        let f;
        try { f = JSON.parse(data); } catch (e) { throw new RpcError({ code: 'transport', message: 'an SSE event is not JSON', data }); }
        if (f.id !== undefined && f.method === undefined) return f;
        if (opts.onFrame) opts.onFrame(f);
      }
    }
    throw new RpcError({ code: 'transport', message: 'the event stream ended without a response' });
  }
  const text = await resp.text();
  if (!text) throw new RpcError({ code: 'transport', message: `HTTP ${resp.status} with an empty body` });
  let f;
  try { f = JSON.parse(text); } catch (e) { throw new RpcError({ code: 'transport', message: `HTTP ${resp.status}: the answer is not JSON`, data: text.slice(0, 500) }); }
  if (f.error && f.id === undefined) throw new RpcError(f.error);
  return f;
}

/** Sends a request and returns its result, or throws its error. */
async function rpc(engine, method, params, opts) {
  const f = await rpcFrame(engine, method, params, opts);
  if (f.error) throw new RpcError(f.error);
  return f.result;
}

/** Sends a notification (no answer). */
async function notify(engine, method, params) {
  await fetch(`/rpc/${encodeURIComponent(engine)}/${method}`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', method, params }),
  });
}

async function getJson(url, init) {
  let resp;
  try { resp = await fetch(url, init); } catch (e) { throw new RpcError({ code: 'transport', message: `the inspector did not answer: ${e.message || e}` }); }
  const text = await resp.text();
  let body;
  try { body = text ? JSON.parse(text) : null; } catch (e) { throw new RpcError({ code: `HTTP ${resp.status}`, message: text.slice(0, 300) }); }
  if (!resp.ok) {
    const err = body && body.error;
    if (err && typeof err === 'object') throw new RpcError(err);
    throw new RpcError({ code: `HTTP ${resp.status}`, message: err || text || resp.statusText });
  }
  return body;
}

/** Shows an error as the spec names it: code, message and error.data. */
function showError(box, err) {
  box.replaceChildren();
  if (!err) { box.hidden = true; return; }
  box.hidden = false;
  const code = err.code !== undefined ? err.code : 'error';
  box.append(el('div', {}, el('span', { class: 'code' }, `error ${code}`), ': ', el('span', { class: 'message' }, err.message || String(err))));
  if (err.data !== undefined) box.append(el('pre', { class: 'data' }, JSON.stringify(err.data, null, 2)));
}

function fmt(x, digits = 4) {
  return typeof x === 'number' ? (Number.isInteger(x) ? String(x) : x.toFixed(digits)) : String(x);
}

function compact(v) {
  if (v === null || v === undefined) return String(v);
  if (typeof v === 'object') return JSON.stringify(v);
  return String(v);
}

/** A capability value for reading: lists of scalars joined, flat objects as `key: value`. */
function readable(v) {
  const scalar = (x) => x === null || typeof x !== 'object';
  if (Array.isArray(v) && v.every(scalar)) return v.join(', ');
  if (v && typeof v === 'object' && !Array.isArray(v) && Object.values(v).every(scalar)) {
    return Object.entries(v).map(([k, x]) => `${k}: ${x}`).join(', ');
  }
  return compact(v);
}

// ---------------------------------------------------------------- URL state

function readUrl() {
  return new URLSearchParams(window.location.search);
}

/** Writes the view into the URL so a link reproduces it. */
function writeUrl(extra) {
  const p = new URLSearchParams();
  if (state.engine) p.set('engine', state.engine);
  p.set('panel', state.panel);
  for (const [k, v] of Object.entries(extra || {})) {
    if (v !== undefined && v !== null && v !== '') p.set(k, v);
  }
  history.replaceState(null, '', `?${p.toString()}`);
}

// ---------------------------------------------------------------- tabs

function showPanel(name, focus) {
  if (!PANELS.includes(name)) name = 'server';
  state.panel = name;
  for (const p of PANELS) {
    const tab = $(`tab-${p}`);
    const on = p === name;
    tab.setAttribute('aria-selected', on ? 'true' : 'false');
    tab.tabIndex = on ? 0 : -1;
    $(`panel-${p}`).hidden = !on;
  }
  if (focus) $(`tab-${name}`).focus();
  const url = readUrl();
  const keep = {};
  for (const k of ['q', 'k', 'mode', 'filter', 'strict', 'fusion', 'mmr', 'op', 'seed', 'hops', 'level']) if (url.get(k) !== null) keep[k] = url.get(k);
  writeUrl(keep);
  if (name === 'wire') startWirePolling(); else stopWirePolling();
  if (name === 'compare' && state.compare) requestAnimationFrame(drawLinks);
}

function setupTabs() {
  for (const p of PANELS) {
    const tab = $(`tab-${p}`);
    tab.addEventListener('click', () => showPanel(p));
    tab.addEventListener('keydown', (e) => {
      // Hidden tabs (Graph, for an engine without `graph`) are skipped.
      const shown = PANELS.filter((x) => !$(`tab-${x}`).hidden);
      const i = shown.indexOf(p);
      let j = null;
      if (e.key === 'ArrowRight') j = (i + 1) % shown.length;
      if (e.key === 'ArrowLeft') j = (i + shown.length - 1) % shown.length;
      if (e.key === 'Home') j = 0;
      if (e.key === 'End') j = shown.length - 1;
      if (j !== null) { e.preventDefault(); showPanel(shown[j], true); }
    });
  }
}

// ---------------------------------------------------------------- engines + Server panel

async function loadTargets() {
  const t = await getJson('/api/targets');
  state.engines = t.engines;
  state.registry = t.registry;
  state.origin = t.origin;
  const sel = $('engine');
  sel.replaceChildren(...t.engines.map((e) => el('option', { value: e.id }, `${e.id} (${e.transport})`)));
  const wf = $('wire-filter');
  wf.replaceChildren(el('option', { value: '' }, 'every engine'), ...t.engines.map((e) => el('option', { value: e.id }, e.id)));
  const wanted = readUrl().get('engine');
  state.engine = t.engines.some((e) => e.id === wanted) ? wanted : (t.engines[0] || {}).id;
  sel.value = state.engine;
  $('compare-none').hidden = t.registry;
  $('compare-form').hidden = !t.registry;
}

function engineEntry() {
  return state.engines.find((e) => e.id === state.engine) || {};
}

async function connect() {
  const conn = $('conn');
  conn.className = 'conn';
  conn.textContent = `connecting to ${state.engine}…`;
  state.info = null;
  showError($('server-error'), null);
  try {
    state.info = await rpc(state.engine, 'initialize', {
      protocolVersion: 1,
      client: { name: 'rcp-inspector-page', version: '0.1.0' },
      capabilities: { streaming: {} },
    });
    const s = state.info.server || {};
    conn.textContent = `${s.name || '?'} ${s.version || ''} · RCP/${state.info.protocolVersion}`;
  } catch (e) {
    conn.className = 'conn bad';
    conn.textContent = `${state.engine}: error ${e.code}`;
    showError($('server-error'), e);
  }
  renderServer();
  setupQueryForm();
  if (window.setupGraphPanel) window.setupGraphPanel();
}

function kvList(obj) {
  const dl = el('dl', { class: 'kv' });
  for (const [k, v] of Object.entries(obj)) {
    dl.append(el('dt', {}, k), el('dd', {}, compact(v)));
  }
  return dl;
}

function renderServer() {
  const body = $('server-body');
  body.replaceChildren();
  const entry = engineEntry();
  if (entry.error && entry.error.message) {
    showError($('server-error'), { code: 'engine unavailable', message: entry.error.message, data: entry.error.stderr && entry.error.stderr.length ? { stderr: entry.error.stderr } : undefined });
  }
  const info = state.info;
  const identity = { engine: entry.id, transport: entry.transport, target: entry.target };
  if (info) {
    identity.server = `${(info.server || {}).name} ${(info.server || {}).version || ''}`;
    identity['negotiated version'] = info.protocolVersion;
    identity['_meta.conformance'] = (info._meta && info._meta.conformance) || '(not declared)';
  }
  body.append(el('h2', {}, 'Identity'), kvList(identity));
  const health = el('div', { id: 'health' }, el('span', { class: 'muted' }, 'checking…'));
  body.append(el('h2', {}, 'Health'), health);
  loadHealth(health);
  if (!info) return;
  const caps = info.capabilities || {};
  const grid = el('div', { class: 'caps', id: 'caps' });
  for (const [name, meta] of Object.entries(caps)) {
    const card = el('section', { class: 'cap', id: `cap-${name}`, 'data-cap': name }, el('h3', {}, name));
    const entries = meta && typeof meta === 'object' ? Object.entries(meta) : [];
    if (entries.length === 0) card.append(el('p', { class: 'empty' }, 'advertised, no metadata'));
    else {
      const dl = el('dl');
      for (const [k, v] of entries) {
        dl.append(el('div', { 'data-key': k, style: 'display:contents' }, el('dt', {}, k), el('dd', {}, readable(v))));
      }
      card.append(dl);
    }
    grid.append(card);
  }
  body.append(el('h2', {}, `Capabilities (${Object.keys(caps).length})`), grid);
  const extra = Object.fromEntries(Object.entries(info).filter(([k]) => !['capabilities', 'server', 'protocolVersion'].includes(k)));
  if (Object.keys(extra).length) body.append(el('h2', {}, 'Other fields'), el('pre', {}, JSON.stringify(extra, null, 2)));
}

async function loadHealth(box) {
  const parts = [];
  try {
    const h = await getJson(`/api/health/${encodeURIComponent(state.engine)}`);
    if (h.transport === 'stdio') {
      parts.push(el('span', { class: `badge ${h.running ? 'ok' : 'bad'}` }, h.running ? 'process running' : `process ended: ${h.exit || '?'}`), ` pid ${h.pid ?? '?'} `);
    } else if (h.transport === 'http') {
      for (const probe of ['healthz', 'readyz']) {
        const p = h[probe];
        const ok = p && p.status >= 200 && p.status < 300;
        parts.push(el('span', { class: `badge ${ok ? 'ok' : 'bad'}` }, `/${probe} ${p.status ?? p.error}`), ' ');
      }
    } else if (h.error) {
      parts.push(el('span', { class: 'badge bad' }, h.error));
    }
  } catch (e) {
    parts.push(el('span', { class: 'badge bad' }, `health: ${e.message}`));
  }
  if (state.info) {
    const t0 = performance.now();
    try {
      await rpc(state.engine, 'ping', {});
      parts.push(el('span', { class: 'badge ok' }, `ping ${(performance.now() - t0).toFixed(1)} ms`));
    } catch (e) {
      parts.push(el('span', { class: 'badge bad' }, `ping: error ${e.code} ${e.message}`));
    }
  }
  box.replaceChildren(...parts);
}

// ---------------------------------------------------------------- Query panel

function caps() {
  return (state.info && state.info.capabilities) || {};
}

function setupQueryForm() {
  const r = caps().retrieve || {};
  const mode = $('mode');
  mode.replaceChildren(el('option', { value: '' }, r.defaultMode ? `default (${r.defaultMode})` : 'default'), ...(r.modes || []).map((m) => el('option', { value: m }, m)));
  $('mode-label').hidden = !(r.modes && r.modes.length);
  const fusion = $('fusion');
  fusion.replaceChildren(el('option', { value: '' }, 'default'), ...(r.fusion || []).map((m) => el('option', { value: m }, m)));
  $('fusion-label').hidden = !(r.fusion && r.fusion.length);
  $('mmr-label').hidden = !r.mmr;
  const f = caps().filter;
  $('filter-none').hidden = !!f;
  $('filter-add').disabled = !f;
  $('filter-join').disabled = !f;
  $('filter-rows').replaceChildren();
}

const VALUE_LESS = ['exists'];
const LIST_OPS = ['in', 'nin'];

/** The ten operators of §8; a `filter` capability without `operators` allows them all. */
const ALL_OPS = ['eq', 'ne', 'gt', 'gte', 'lt', 'lte', 'in', 'nin', 'contains', 'exists'];
/** The ordered operators, which apply to int, float and date fields only (§8). */
const ORDERED_OPS = ['gt', 'gte', 'lt', 'lte'];
const ORDERED_TYPES = ['int', 'float', 'date', 'integer', 'number'];

/** The advertised fields as [name, type] pairs (`fields` is an object or a list of names). */
function filterFields(f) {
  if (Array.isArray(f.fields)) return f.fields.map((name) => [name, 'any']);
  return Object.entries(f.fields || {});
}

/** Adds one condition row built from the advertised fields and operators (§8). */
function addFilterRow(init) {
  const f = caps().filter;
  if (!f) return null;
  const fields = filterFields(f);
  const advertised = Array.isArray(f.operators) ? f.operators : ALL_OPS;
  const n = $('filter-rows').children.length + 1;
  const field = el('select', { 'aria-label': `condition ${n} field`, class: 'f-field' }, ...fields.map(([name, type]) => el('option', { value: name, 'data-type': type }, `${name} (${type})`)));
  const op = el('select', { 'aria-label': `condition ${n} operator`, class: 'f-op' });
  const value = el('input', { 'aria-label': `condition ${n} value`, class: 'f-value', type: 'text', placeholder: 'value' });
  const row = el('div', { class: 'filter-row' },
    el('label', {}, 'Field', field), el('label', {}, 'Operator', op), el('label', {}, 'Value', value),
    el('button', { type: 'button', class: 'small', 'aria-label': `remove condition ${n}`, onclick: () => row.remove() }, 'Remove'));
  const fieldType = () => (field.selectedOptions[0] ? field.selectedOptions[0].dataset.type : 'any');
  const fillOps = () => {
    const type = fieldType();
    const ordered = type === 'any' || ORDERED_TYPES.includes(type);
    const ops = advertised.filter((o) => ordered || !ORDERED_OPS.includes(o));
    const keep = op.value;
    op.replaceChildren(...ops.map((o) => el('option', { value: o }, o)));
    if (ops.includes(keep)) op.value = keep;
  };
  const sync = () => {
    const type = fieldType();
    const valueLess = VALUE_LESS.includes(op.value);
    value.disabled = valueLess;
    value.placeholder = valueLess ? '(none)' : LIST_OPS.includes(op.value) ? 'a, b, c' : type;
    value.type = !valueLess && !LIST_OPS.includes(op.value) && ['int', 'float', 'number', 'integer'].includes(type) ? 'number' : 'text';
  };
  field.addEventListener('change', () => { fillOps(); sync(); });
  op.addEventListener('change', sync);
  if (init && init.field) field.value = init.field;
  fillOps();
  if (init && init.op) op.value = init.op;
  sync();
  if (init && init.value !== undefined && !VALUE_LESS.includes(op.value)) value.value = Array.isArray(init.value) ? init.value.join(', ') : String(init.value);
  $('filter-rows').append(row);
  return row;
}

function typedValue(raw, type) {
  const s = raw.trim();
  if (['int', 'integer'].includes(type)) { const n = parseInt(s, 10); return Number.isNaN(n) ? s : n; }
  if (['float', 'number'].includes(type)) { const n = parseFloat(s); return Number.isNaN(n) ? s : n; }
  if (type === 'bool' || type === 'boolean') return s === 'true';
  return s;
}

/** The §8 filter tree of the builder, or undefined when it has no condition. */
function buildFilter() {
  const leaves = [];
  for (const row of $('filter-rows').children) {
    const field = row.querySelector('.f-field');
    const op = row.querySelector('.f-op').value;
    const raw = row.querySelector('.f-value').value;
    const type = field.selectedOptions[0] ? field.selectedOptions[0].dataset.type : 'any';
    const leaf = { field: field.value, op };
    if (VALUE_LESS.includes(op)) leaf.value = true;
    else if (LIST_OPS.includes(op)) leaf.value = raw.split(',').map((x) => x.trim()).filter(Boolean).map((x) => typedValue(x, type));
    else leaf.value = typedValue(raw, type);
    leaves.push(leaf);
  }
  if (leaves.length === 0) return undefined;
  if (leaves.length === 1) return leaves[0];
  return { [$('filter-join').value]: leaves };
}

/** The short-form operators of `rcpctl --filter`, longest first, and their §8 names. */
const SHORT_OPS = [['>=', 'gte'], ['<=', 'lte'], ['!=', 'ne'], ['>', 'gt'], ['<', 'lt'], ['=', 'eq']];

/**
 * Reads the `filter=` URL parameter: a §8 filter tree as JSON. Returns `{ tree }`, or
 * `{ error }` saying what is wrong and what the URL takes instead (the `rcpctl --filter` short
 * form `year>=2015` is recognised and its JSON spelled out).
 */
function parseUrlFilter(raw) {
  let tree;
  try {
    tree = JSON.parse(raw);
  } catch (e) {
    const m = /^\s*([\w.-]+)\s*(>=|<=|!=|>|<|=)\s*(.+?)\s*$/.exec(raw);
    if (m) {
      const op = SHORT_OPS.find(([sym]) => sym === m[2])[1];
      const n = Number(m[3]);
      const value = m[3] === 'true' || m[3] === 'false' ? m[3] === 'true' : (Number.isNaN(n) ? m[3] : n);
      const json = JSON.stringify({ field: m[1], op, value });
      return { error: { code: 'filter', message: `filter=${raw} is the rcpctl --filter short form; the URL takes a §8 filter tree as JSON: filter=${json}`, data: { got: raw, expected: JSON.parse(json) } } };
    }
    return { error: { code: 'filter', message: `the filter in the URL is not JSON (${e.message}); it takes a §8 filter tree, e.g. {"field":"year","op":"gte","value":2015}`, data: { got: raw } } };
  }
  const leaves = tree && typeof tree === 'object' && !Array.isArray(tree)
    ? (Array.isArray(tree.and) ? tree.and : Array.isArray(tree.or) ? tree.or : [tree])
    : [];
  const bad = leaves.length === 0 || leaves.some((l) => !l || typeof l !== 'object' || typeof l.field !== 'string' || typeof l.op !== 'string');
  if (bad) {
    return { error: { code: 'filter', message: 'the filter in the URL is not a filter tree the builder can show: a leaf {"field","op","value"}, or {"and"|"or": [leaves]}', data: { got: tree } } };
  }
  return { tree };
}

/** Restores builder rows from a filter of the shapes the builder writes. */
function restoreFilter(tree) {
  $('filter-rows').replaceChildren();
  if (!tree || typeof tree !== 'object') return;
  let leaves = [tree];
  if (Array.isArray(tree.and)) { leaves = tree.and; $('filter-join').value = 'and'; }
  if (Array.isArray(tree.or)) { leaves = tree.or; $('filter-join').value = 'or'; }
  for (const l of leaves) if (l && l.field) addFilterRow(l);
}

function queryParams() {
  const q = $('q').value.trim();
  const params = { query: q, k: Math.max(1, parseInt($('k').value, 10) || 10) };
  if ($('mode').value) params.mode = $('mode').value;
  if ($('fusion').value) params.fusion = { method: $('fusion').value };
  if (!$('mmr-label').hidden && $('mmr').value !== '') params.mmr = { lambda: parseFloat($('mmr').value) };
  const filter = buildFilter();
  if (filter) params.filter = filter;
  if (!$('strict').checked) params.strict = false;
  return params;
}

function queryTerms(q) {
  return (q || '').toLowerCase().split(/[^\p{L}\p{N}]+/u).filter((t) => t.length > 1);
}

/** Text with every word that starts with a query term (or its stem) marked. */
function highlighted(text, terms) {
  const out = [];
  const stems = terms.map((t) => (t.length > 4 ? t.slice(0, t.length - 2) : t));
  for (const part of String(text).split(/([\p{L}\p{N}]+)/u)) {
    const low = part.toLowerCase();
    if (part && stems.some((s) => low.startsWith(s))) out.push(el('mark', {}, part));
    else if (part) out.push(part);
  }
  return out;
}

function hitTitle(h) {
  return (h.citation && h.citation.title) || (h.meta && h.meta.title) || '';
}

function renderHit(h, rank, terms, extraClass) {
  const engine = h.meta && h.meta.engine;
  const scoreBox = el('div', { class: 'score' }, fmt(h.score));
  if (h.confidence !== undefined) scoreBox.append(el('small', {}, `confidence ${fmt(h.confidence, 3)}`));
  const meta = h.meta ? Object.entries(h.meta).filter(([k]) => !['engine', 'title'].includes(k)) : [];
  return el('li', { class: `hit ${extraClass || ''}`, 'data-doc': h.id },
    el('div', { class: 'rank' }, `${rank}.`),
    el('div', { class: 'head' }, el('span', { class: 'title' }, hitTitle(h) || h.id), el('code', { class: 'doc-id' }, h.id), engine ? el('span', { class: 'engine-tag' }, engine) : null),
    scoreBox,
    h.text ? el('p', { class: 'snippet' }, highlighted(h.text.length > 400 ? `${h.text.slice(0, 400)}…` : h.text, terms)) : null,
    meta.length ? el('div', { class: 'meta' }, meta.map(([k, v]) => `${k}: ${compact(v)}`).join(' · ')) : null);
}

function usageLine(result, pages) {
  const box = $('query-meta');
  box.replaceChildren();
  const bits = [`${state.query.hits.length} hit${state.query.hits.length === 1 ? '' : 's'}`];
  if (pages > 1) bits.push(`${pages} pages`);
  const u = result.usage || {};
  for (const [k, v] of Object.entries(u)) if (k !== 'notes') bits.push(`${k} ${compact(v)}`);
  if (result.indexVersion) bits.push(`indexVersion ${result.indexVersion}`);
  box.append(bits.join(' · '));
  for (const n of u.notes || []) box.append(el('span', { class: 'note' }, `note: ${compact(n)}`));
  for (const n of result.notes || []) box.append(el('span', { class: 'note' }, `note: ${compact(n)}`));
}

async function runQuery(cursor) {
  const err = $('query-error');
  const list = $('hits');
  let params;
  if (cursor) {
    params = { ...state.query.params, cursor };
  } else {
    params = queryParams();
    if (!params.query) { showError(err, { code: 'input', message: 'type a query first' }); return; }
    writeUrl({ q: params.query, k: params.k, mode: params.mode, filter: params.filter ? JSON.stringify(params.filter) : '', strict: params.strict === false ? '0' : '', fusion: params.fusion && params.fusion.method, mmr: params.mmr && params.mmr.lambda });
    state.query = { params, hits: [], pages: 0 };
    list.replaceChildren();
    $('query-meta').replaceChildren();
  }
  showError(err, null);
  $('query-run').disabled = true;
  $('next-page').disabled = true;
  list.setAttribute('aria-busy', 'true');
  try {
    const result = await rpc(state.engine, 'retrieve', params);
    const terms = queryTerms(state.query.params.query);
    const start = state.query.hits.length;
    (result.hits || []).forEach((h, i) => list.append(renderHit(h, start + i + 1, terms)));
    state.query.hits.push(...(result.hits || []));
    state.query.pages += 1;
    state.query.cursor = result.nextCursor;
    $('next-page').hidden = !result.nextCursor;
    usageLine(result, state.query.pages);
    if ((result.hits || []).length === 0 && start === 0) list.append(el('li', { class: 'muted' }, 'no hits'));
  } catch (e) {
    showError(err, e);
  } finally {
    $('query-run').disabled = false;
    $('next-page').disabled = false;
    list.removeAttribute('aria-busy');
  }
}

// ---------------------------------------------------------------- Stream panel

function streamLog(kind, text, extra) {
  const t = state.stream ? Math.round(performance.now() - state.stream.t0) : 0;
  const li = el('li', { 'data-kind': kind }, el('span', { class: 't' }, `+${t} ms`), text, extra || null);
  $('stream-log').append(li);
  return li;
}

async function runStream() {
  const q = $('stream-q').value.trim();
  if (!q) return;
  const k = Math.max(1, parseInt($('stream-k').value, 10) || 10);
  writeUrl({ q, k });
  const id = nextId();
  const controller = new AbortController();
  state.stream = { id, controller, done: false, t0: performance.now() };
  $('stream-log').replaceChildren();
  $('stream-hits').replaceChildren();
  $('stream-hits-title').textContent = 'Hits';
  showError($('stream-error'), null);
  $('stream-run').disabled = true;
  $('stream-cancel').disabled = false;
  const terms = queryTerms(q);
  let extra = {};
  const extraText = $('stream-extra').value.trim();
  if (extraText) {
    try {
      extra = JSON.parse(extraText);
      if (!extra || typeof extra !== 'object' || Array.isArray(extra)) throw new Error('not an object');
    } catch (e) {
      showError($('stream-error'), { code: 'input', message: `More params must be a JSON object: ${e.message}` });
      $('stream-run').disabled = false;
      $('stream-cancel').disabled = true;
      state.stream.done = true;
      return;
    }
  }
  const params = { ...extra, query: q, k, _meta: { ...(extra._meta || {}), progressToken: `${id}-progress` } };
  streamLog('request', `retrieve sent (id ${id})`);
  let frames = 0;
  try {
    const f = await rpcFrame(state.engine, 'retrieve', params, {
      id, stream: true, signal: controller.signal,
      onFrame: (n) => {
        if (n.method !== 'notifications/progress') { streamLog('other', `${n.method}: ${compact(n.params)}`); return; }
        frames += 1;
        const p = n.params || {};
        const pct = typeof p.progress === 'number' ? Math.round(p.progress * 100) : null;
        const partial = p.partial && p.partial.hits;
        const text = `progress${pct !== null ? ` ${pct}%` : ''}${p.stage ? ` · ${p.stage}` : ''}${p.message ? ` · ${p.message}` : ''}${partial ? ` · ${partial.length} partial hits` : ''}`;
        streamLog('progress', text, pct !== null ? el('span', { class: 'bar', 'aria-hidden': 'true' }, el('span', { style: `width:${pct}%` })) : null);
        if (partial) {
          $('stream-hits-title').textContent = `Partial hits (${partial.length})`;
          $('stream-hits').replaceChildren(...partial.map((h, i) => renderHit(h, i + 1, terms, 'partial')));
        }
      },
    });
    if (f.error) {
      streamLog('error', `error ${f.error.code}: ${f.error.message}`);
      showError($('stream-error'), f.error);
    } else {
      const hits = f.result.hits || [];
      streamLog('final', `final response: ${hits.length} hits after ${frames} progress frame${frames === 1 ? '' : 's'}`);
      $('stream-hits-title').textContent = `Final hits (${hits.length})`;
      $('stream-hits').replaceChildren(...hits.map((h, i) => renderHit(h, i + 1, terms)));
    }
  } catch (e) {
    if (e.name === 'AbortError' || controller.signal.aborted) streamLog('cancel', 'stream closed after cancel (no answer within 2 s)');
    else { streamLog('error', `error ${e.code}: ${e.message}`); showError($('stream-error'), e); }
  } finally {
    state.stream.done = true;
    $('stream-run').disabled = false;
    $('stream-cancel').disabled = true;
  }
}

async function cancelStream() {
  const s = state.stream;
  if (!s || s.done) return;
  $('stream-cancel').disabled = true;
  try {
    await notify(state.engine, 'notifications/cancel', { id: s.id, reason: 'cancelled in the inspector' });
    streamLog('cancel', `notifications/cancel sent for ${s.id}`);
  } catch (e) {
    streamLog('error', `cancel failed: ${e.message}`);
  }
  setTimeout(() => { if (!s.done) s.controller.abort(); }, 2000);
}

// ---------------------------------------------------------------- Compare panel

const COLORS = ['#1f5fbf', '#c2410c', '#15803d', '#7e22ce', '#b91c1c', '#0e7490'];

async function runCompare() {
  const q = $('compare-q').value.trim();
  if (!q) return;
  const k = Math.max(1, parseInt($('compare-k').value, 10) || 10);
  const fusion = $('compare-fusion').value;
  writeUrl({ q, k, fusion });
  showError($('compare-error'), null);
  $('compare-run').disabled = true;
  try {
    const out = await getJson('/api/federate', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ params: { query: q, k }, fusion }) });
    state.compare = out;
    renderCompare(out, queryTerms(q));
  } catch (e) {
    showError($('compare-error'), e);
  } finally {
    $('compare-run').disabled = false;
  }
}

function compareColumn(key, title, sub, hits, color, error) {
  const col = el('section', { class: `compare-col${key === '__fused' ? ' fused' : ''}`, id: key === '__fused' ? 'compare-col-fused' : `compare-col-${key}`, 'data-col': key });
  col.append(el('h3', { style: `color:${color}` }, title), el('div', { class: 'sub' }, sub));
  if (error) col.append(el('div', { class: 'col-error' }, error));
  const ol = el('ol');
  (hits || []).forEach((h, i) => {
    const li = el('li', { 'data-doc': h.id, tabindex: '0', title: `${h.id} — ${hitTitle(h)}` },
      el('span', { class: 'r' }, i + 1), el('span', { class: 'd' }, h.id, el('small', {}, hitTitle(h))), el('span', { class: 's' }, fmt(h.score, 3)));
    const on = () => highlightDoc(h.id, true);
    const off = () => highlightDoc(h.id, false);
    li.addEventListener('mouseenter', on); li.addEventListener('mouseleave', off);
    li.addEventListener('focus', on); li.addEventListener('blur', off);
    ol.append(li);
  });
  col.append(ol);
  return col;
}

function highlightDoc(id, on) {
  for (const li of document.querySelectorAll('#compare-cols li')) li.classList.toggle('hl', on && li.dataset.doc === id);
  for (const line of document.querySelectorAll('#compare-links line')) line.setAttribute('stroke-opacity', on ? (line.dataset.doc === id ? '1' : '0.12') : '0.55');
}

function renderCompare(out) {
  const cols = $('compare-cols');
  cols.replaceChildren();
  const engines = out.engines || [];
  const half = Math.ceil(engines.length / 2);
  const columns = [];
  engines.forEach((e, i) => {
    const color = COLORS[i % COLORS.length];
    let sub = '';
    let error = null;
    if (e.hits) sub = `${e.hits.length} hits · ${e.latencyMs} ms`;
    else if (e.skipped) error = `skipped: ${e.skipped}`;
    else if (e.error) error = `error ${e.error.code}: ${e.error.message}`;
    columns.push({ node: compareColumn(e.id, e.id, sub, e.hits, color, error), color, key: e.id });
  });
  const fusedHits = (out.fused && out.fused.hits) || [];
  const notes = ((out.fused && out.fused.usage && out.fused.usage.notes) || []).map(compact).join('; ');
  const fused = { node: compareColumn('__fused', `fused (${out.fusion})`, `${fusedHits.length} hits${notes ? ` · ${notes}` : ''}`, fusedHits, '#1d2330'), color: '#1d2330', key: '__fused' };
  // The fused list sits in the middle so every engine's lines reach it directly.
  const order = [...columns.slice(0, half), fused, ...columns.slice(half)];
  for (const c of order) cols.append(c.node);
  state.compareColors = Object.fromEntries(columns.map((c) => [c.key, c.color]));
  requestAnimationFrame(drawLinks);
  renderCharts(engines, fusedHits, out.fusion);
}

/** Draws a line from each engine's hit to the same document in the fused column. */
function drawLinks() {
  const svg = $('compare-links');
  svg.replaceChildren();
  const wrap = $('compare-wrap').getBoundingClientRect();
  const fusedCol = $('compare-col-fused');
  if (!fusedCol || $('panel-compare').hidden) return;
  const fusedItems = new Map([...fusedCol.querySelectorAll('li')].map((li) => [li.dataset.doc, li.getBoundingClientRect()]));
  const fusedRect = fusedCol.getBoundingClientRect();
  for (const col of document.querySelectorAll('#compare-cols .compare-col:not(.fused)')) {
    const color = (state.compareColors || {})[col.dataset.col] || '#888';
    const left = col.getBoundingClientRect().right <= fusedRect.left;
    for (const li of col.querySelectorAll('li')) {
      const target = fusedItems.get(li.dataset.doc);
      if (!target) continue;
      const a = li.getBoundingClientRect();
      const x1 = (left ? a.right : a.left) - wrap.left;
      const x2 = (left ? target.left : target.right) - wrap.left;
      const y1 = a.top + a.height / 2 - wrap.top;
      const y2 = target.top + target.height / 2 - wrap.top;
      svg.append(el('line', { x1, y1, x2, y2, stroke: color, 'stroke-width': 2, 'stroke-opacity': 0.55, 'data-doc': li.dataset.doc }));
    }
  }
}

/** One small chart per list: score (own scale) against rank. */
function renderCharts(engines, fusedHits, fusion) {
  const box = $('compare-charts');
  box.replaceChildren();
  $('chart-title').hidden = false;
  const lists = engines.filter((e) => e.hits).map((e, i) => ({ id: e.id, hits: e.hits, color: COLORS[engines.indexOf(e) % COLORS.length] }));
  lists.push({ id: `fused (${fusion})`, hits: fusedHits, color: '#1d2330' });
  const W = 300, H = 170, L = 46, R = 10, T = 22, B = 28;
  for (const list of lists) {
    const scores = list.hits.map((h) => h.score).filter((s) => typeof s === 'number');
    const svg = el('svg', { width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': `score against rank for ${list.id}` });
    svg.append(el('text', { x: L, y: 14, fill: list.color, style: `fill:${list.color};font-weight:600` }, list.id));
    if (scores.length) {
      const max = Math.max(...scores), min = Math.min(...scores, 0);
      const span = max - min || 1;
      const n = scores.length;
      const x = (i) => L + (n === 1 ? 0 : (i * (W - L - R)) / (n - 1));
      const y = (s) => T + (1 - (s - min) / span) * (H - T - B);
      svg.append(el('line', { x1: L, y1: T, x2: L, y2: H - B, stroke: '#b9c0cc' }), el('line', { x1: L, y1: H - B, x2: W - R, y2: H - B, stroke: '#b9c0cc' }));
      svg.append(el('text', { x: 4, y: T + 4 }, fmt(max, 3)), el('text', { x: 4, y: H - B }, fmt(min, 3)));
      svg.append(el('text', { x: L, y: H - 8 }, 'rank 1'), el('text', { x: W - R - 40, y: H - 8 }, `rank ${n}`));
      svg.append(el('polyline', { points: scores.map((s, i) => `${x(i)},${y(s)}`).join(' '), fill: 'none', stroke: list.color, 'stroke-width': 2 }));
      scores.forEach((s, i) => svg.append(el('circle', { cx: x(i), cy: y(s), r: 3, fill: list.color }, el('title', {}, `rank ${i + 1}: ${fmt(s)}`))));
    } else {
      svg.append(el('text', { x: L, y: H / 2 }, 'no scores'));
    }
    box.append(el('figure', { class: 'chart', 'data-chart': list.id, style: 'margin:0' }, svg));
  }
}

// ---------------------------------------------------------------- Wire panel

function shellQuote(s) {
  return `'${String(s).replace(/'/g, "'\\''")}'`;
}

/** A curl command that sends `frame` again: to the engine's own URL, or the inspector's proxy for stdio engines. */
function curlFor(entry) {
  const frame = entry.frame;
  const engine = state.engines.find((e) => e.id === entry.engine) || {};
  const url = engine.transport === 'http' ? `${engine.target.replace(/\/$/, '')}/${frame.method}` : `${state.origin}/rpc/${encodeURIComponent(entry.engine)}/${frame.method}`;
  const accept = frame.params && frame.params._meta && frame.params._meta.progressToken ? " -H 'accept: text/event-stream'" : '';
  // Credentials stay in the shell: `$VAR` is double-quoted so the shell expands it.
  const headers = engine.transport === 'http' ? (engine.curlHeaders || []).map((h) => (h.includes('$') ? ` -H "${h}"` : ` -H ${shellQuote(h)}`)).join('') : '';
  const text = entry.raw || JSON.stringify(frame);
  return `curl -sS -X POST ${shellQuote(url)} -H 'content-type: application/json'${accept}${headers} -d ${shellQuote(text)}`;
}

async function copyCurl(entry) {
  const text = curlFor(entry);
  const out = $('curl-out');
  out.value = text;
  try {
    await navigator.clipboard.writeText(text);
    out.setAttribute('data-copied', 'clipboard');
  } catch (e) {
    out.focus();
    out.select();
    out.setAttribute('data-copied', 'selected');
  }
}

function describeFrame(f) {
  if (typeof f !== 'object' || f === null) return { what: 'not JSON', err: true };
  if (f.method) return { what: f.id !== undefined ? `${f.method} (id ${compact(f.id)})` : f.method };
  if (f.error) return { what: `error ${f.error.code} (id ${compact(f.id)}): ${f.error.message}`, err: true };
  if (f.result !== undefined) return { what: `result (id ${compact(f.id)})` };
  return { what: 'frame' };
}

/** The frame pretty-printed from its wire text when known (the peer's key order), else as parsed. */
function prettyFrame(entry) {
  if (entry.raw) {
    try { return JSON.stringify(JSON.parse(entry.raw), null, 2); } catch (e) { return entry.raw; }
  }
  return typeof entry.frame === 'string' ? entry.frame : JSON.stringify(entry.frame, null, 2);
}

function wireItem(entry) {
  const d = describeFrame(entry.frame);
  const summary = el('summary', {},
    el('span', { class: `dir ${entry.dir}` }, entry.dir === 'sent' ? '→ sent' : '← received'),
    el('span', { class: 'muted' }, `+${entry.ms} ms`),
    el('span', {}, entry.engine),
    el('span', { class: 'muted' }, `via ${entry.source}`),
    el('span', { class: `what${d.err ? ' err' : ''}` }, d.what));
  const li = el('li', { 'data-engine': entry.engine, 'data-dir': entry.dir, 'data-seq': entry.seq });
  const details = el('details', { open: true }, summary, el('pre', {}, prettyFrame(entry)));
  li.append(details);
  if (entry.dir === 'sent' && entry.frame && entry.frame.method) {
    li.append(el('button', { type: 'button', class: 'small copy-curl', onclick: () => copyCurl(entry) }, 'Copy as curl'));
  }
  return li;
}

function applyWireFilter() {
  const only = $('wire-filter').value;
  let shown = 0;
  for (const li of $('wire-list').children) {
    const on = !only || li.dataset.engine === only;
    li.hidden = !on;
    if (on) shown += 1;
  }
  $('wire-count').textContent = `${shown} frame${shown === 1 ? '' : 's'}`;
}

async function refreshWire() {
  try {
    const out = await getJson(`/api/wire?after=${state.wireAfter}`);
    const list = $('wire-list');
    for (const e of out.entries) {
      state.wireAfter = Math.max(state.wireAfter, e.seq);
      // Newest first; keep the list bounded.
      list.prepend(wireItem(e));
    }
    while (list.children.length > 500) list.lastChild.remove();
    applyWireFilter();
  } catch (e) {
    $('wire-count').textContent = `wire log unavailable: ${e.message}`;
  }
}

function startWirePolling() {
  refreshWire();
  if (!state.wireTimer) state.wireTimer = setInterval(refreshWire, 1000);
}

function stopWirePolling() {
  if (state.wireTimer) clearInterval(state.wireTimer);
  state.wireTimer = null;
}

// ---------------------------------------------------------------- Conformance panel

async function runConformance() {
  const body = $('conf-body');
  const status = $('conf-status');
  showError($('conf-error'), null);
  body.replaceChildren();
  $('conf-run').disabled = true;
  status.textContent = `running rcp-conformance against ${state.engine}…`;
  const t0 = performance.now();
  try {
    const r = await getJson(`/api/conformance/${encodeURIComponent(state.engine)}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    status.textContent = `finished in ${((performance.now() - t0) / 1000).toFixed(1)} s`;
    renderConformance(r);
  } catch (e) {
    status.textContent = '';
    showError($('conf-error'), e);
  } finally {
    $('conf-run').disabled = false;
  }
}

// Every status rcp-conformance reports (conformance/README.md): INFO is a MAY the server does
// not do or an interop probe; SEE means another check, named in `see`, reports the defect.
const STATUS_BADGE = { pass: 'ok', fail: 'bad', warn: 'warn', info: 'info', see: 'see', skip: 'skip' };

/// "3 passed, 1 failed, …" for `count(status)`, in the order the text report uses; INFO and SEE
/// only when there are any (as in the suite's own text report).
function statusCounts(count) {
  const parts = [`${count('pass')} passed`, `${count('fail')} failed`, `${count('skip')} skipped`, `${count('warn')} warnings`];
  if (count('info')) parts.push(`${count('info')} info`);
  if (count('see')) parts.push(`${count('see')} see`);
  return parts;
}

function renderConformance(r) {
  const body = $('conf-body');
  const c = r.counts || {};
  const honest = r.declarationHonest;
  body.append(el('div', { class: 'conf-summary' },
    el('div', {}, 'certified ', el('span', { class: 'level', id: 'conf-level' }, r.certifiedLevel)),
    el('div', {}, `declared ${r.declaredLevel || '(none)'}`, honest === false ? el('span', { class: 'badge bad' }, ' overclaim') : ''),
    el('div', {}, statusCounts((s) => ({ pass: c.passed, fail: c.failed, skip: c.skipped, warn: c.warnings, info: c.infos, see: c.see })[s] || 0).join(' · ')),
    el('div', { class: 'muted' }, `over ${r.transport}; ${r.schema ? `every frame validated against ${r.schema}` : 'no JSON Schema given (--schema or RCP_SCHEMA): envelope checks only'}`)));
  for (const level of ['L0', 'L1', 'L2']) {
    const checks = (r.checks || []).filter((x) => x.level === level);
    if (!checks.length) continue;
    const n = (s) => checks.filter((x) => String(x.status).toLowerCase() === s).length;
    const table = el('table', { class: 'conf-table', 'data-level': level },
      el('thead', {}, el('tr', {}, el('th', {}, 'status'), el('th', {}, 'check'), el('th', {}, 'what'), el('th', {}, '§'), el('th', {}, 'detail'))),
      el('tbody', {}, checks.map((x) => el('tr', { 'data-status': x.status },
        el('td', {}, el('span', { class: `badge ${STATUS_BADGE[String(x.status).toLowerCase()] || 'skip'}` }, x.status)),
        el('td', {}, el('code', {}, x.id)), el('td', {}, x.name), el('td', {}, x.section),
        el('td', { class: 'detail' }, x.see ? el('span', { class: 'see-ref' }, 'see ', el('code', {}, x.see), ' ') : '', x.detail)))));
    body.append(el('details', { open: level === 'L0' || n('fail') > 0 }, el('summary', {}, el('strong', {}, level), ` — ${statusCounts(n).join(', ')}`), table));
  }
}

// ---------------------------------------------------------------- start

function bind() {
  setupTabs();
  $('engine').addEventListener('change', async (e) => {
    state.engine = e.target.value;
    writeUrl({});
    await connect();
  });
  $('query-form').addEventListener('submit', (e) => { e.preventDefault(); showError($('filter-error'), null); runQuery(); });
  $('next-page').addEventListener('click', () => runQuery(state.query && state.query.cursor));
  $('filter-add').addEventListener('click', () => { const row = addFilterRow(); if (row) row.querySelector('select').focus(); });
  $('stream-form').addEventListener('submit', (e) => { e.preventDefault(); runStream(); });
  $('stream-cancel').addEventListener('click', cancelStream);
  $('compare-form').addEventListener('submit', (e) => { e.preventDefault(); runCompare(); });
  $('wire-refresh').addEventListener('click', refreshWire);
  $('wire-clear').addEventListener('click', async () => { await fetch('/api/wire', { method: 'DELETE' }); $('wire-list').replaceChildren(); applyWireFilter(); });
  $('wire-filter').addEventListener('change', applyWireFilter);
  $('conf-run').addEventListener('click', runConformance);
  window.addEventListener('resize', () => { if (state.compare) drawLinks(); });
}

async function main() {
  bind();
  const url = readUrl();
  try {
    await loadTargets();
  } catch (e) {
    showError($('server-error'), e);
    showPanel('server');
    return;
  }
  await connect();
  const q = url.get('q');
  const k = url.get('k');
  for (const id of ['q', 'stream-q', 'compare-q']) if (q) $(id).value = q;
  for (const id of ['k', 'stream-k', 'compare-k']) if (k) $(id).value = k;
  if (url.get('mode')) $('mode').value = url.get('mode');
  if (url.get('fusion')) { $('fusion').value = url.get('fusion'); if (['rrf', 'weighted', 'convex'].includes(url.get('fusion'))) $('compare-fusion').value = url.get('fusion'); }
  if (url.get('mmr')) $('mmr').value = url.get('mmr');
  if (url.get('strict') === '0') $('strict').checked = false;
  // A bad filter is shown next to the filter box (runQuery clears only its own box), and the
  // query is not run unfiltered behind the user's back.
  let filterOk = true;
  if (url.get('filter')) {
    const parsed = parseUrlFilter(url.get('filter'));
    if (parsed.error) { filterOk = false; showError($('filter-error'), parsed.error); } else restoreFilter(parsed.tree);
  }
  // A query without a panel opens the Query panel.
  const panel = url.get('panel') || (q ? 'query' : 'server');
  showPanel(panel);
  document.body.dataset.ready = 'true';
  if (q && state.info && filterOk) {
    if (panel === 'query') await runQuery();
    if (panel === 'stream') await runStream();
    if (panel === 'compare' && state.registry) await runCompare();
  }
  if (panel === 'graph' && state.info && window.runGraphFromUrl) await window.runGraphFromUrl(url);
}

main();
