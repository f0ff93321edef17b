// RCP Inspector, Graph panel: `graph` (§7.9) for an engine that advertises it. `neighbors`
// is drawn as nodes on a circle (the seeds in the middle) joined by edges whose width follows
// their weight; clicking a node runs `neighbors` on it. `communities` and `global` list the
// communities with their level and summary; `local` and `drift` list hits (and follow-ups).
// Loaded after app.js, whose helpers ($, el, rpc, state, caps, showError, renderHit, ...) it uses.
'use strict';

const GRAPH_OPS = ['neighbors', 'local', 'global', 'drift', 'communities'];
const GRAPH_SIZE = { width: 720, height: 460 };

/** Shows the Graph tab only when the engine advertises `graph`, and fills the op picker. */
function setupGraphPanel() {
  const g = caps().graph;
  const tab = $('tab-graph');
  tab.hidden = !g;
  $('graph-none').hidden = !!g;
  $('graph-form').hidden = !g;
  const ops = g && Array.isArray(g.ops) ? g.ops.filter((o) => typeof o === 'string') : [];
  const sel = $('graph-op');
  const was = sel.value;
  sel.replaceChildren(...ops.map((o) => el('option', { value: o }, o)));
  if (ops.includes(was)) sel.value = was;
  else if (ops.includes('neighbors')) sel.value = 'neighbors';
  clearGraph();
}

function clearGraph() {
  for (const id of ['graph-nodes', 'graph-communities', 'graph-hits', 'graph-followups', 'graph-meta']) $(id).replaceChildren();
  $('graph-svg').replaceChildren();
  // An SVG element has no `hidden` property: the attribute itself is set and removed.
  $('graph-svg').setAttribute('hidden', '');
  $('graph-summary').hidden = true;
  showError($('graph-error'), null);
}

/** The `graph` params of the form. */
function graphParams() {
  const op = $('graph-op').value;
  const params = { op };
  const q = $('graph-q').value.trim();
  if (q) params.query = q;
  const seeds = $('graph-seed').value.split(',').map((s) => s.trim()).filter(Boolean);
  if (seeds.length) params.seedIds = seeds;
  const hops = parseInt($('graph-hops').value, 10);
  if (op === 'neighbors' && hops >= 1) params.hops = hops;
  const k = parseInt($('graph-k').value, 10);
  if (k >= 1) params.k = k;
  const level = parseInt($('graph-level').value, 10);
  if (level >= 0) params.level = level;
  return params;
}

async function runGraph() {
  clearGraph();
  const params = graphParams();
  if (!params.op) return;
  writeUrl({ op: params.op, q: params.query, seed: (params.seedIds || []).join(','), hops: params.hops, level: params.level });
  const started = performance.now();
  let res;
  try {
    res = await rpc(state.engine, 'graph', params);
  } catch (e) {
    showError($('graph-error'), e);
    return;
  }
  const ms = Math.round(performance.now() - started);
  const bits = [`op ${params.op}`, `${ms} ms`];
  if (Array.isArray(res.nodes)) bits.push(`${res.nodes.length} nodes`, `${(res.edges || []).length} edges`);
  if (Array.isArray(res.communities)) bits.push(`${res.communities.length} communities`);
  if (Array.isArray(res.hits)) bits.push(`${res.hits.length} hits`);
  $('graph-meta').append(bits.join(' · '));
  if (Array.isArray(res.nodes)) drawNeighbors(res, params.seedIds || []);
  if (typeof res.summary === 'string') {
    $('graph-summary').hidden = false;
    $('graph-summary').textContent = res.summary;
  }
  if (Array.isArray(res.communities)) renderCommunities(res.communities);
  if (Array.isArray(res.hits)) {
    const terms = queryTerms(params.query);
    $('graph-hits').replaceChildren(...res.hits.map((h, i) => renderHit(h, i + 1, terms, provenanceClass(h))));
    for (const li of $('graph-hits').children) {
      const h = res.hits.find((x) => String(x.id) === li.dataset.doc);
      const path = h && h.provenance && h.provenance.nodes;
      if (Array.isArray(path) && path.length > 1) li.append(el('div', { class: 'meta' }, `via ${path.join(' → ')}`));
    }
  }
  if (Array.isArray(res.followups)) {
    $('graph-followups').replaceChildren(...res.followups.map((f) => el('li', {}, el('span', { class: 'muted' }, 'follow-up: '), String(f))));
  }
}

function provenanceClass(h) {
  return h.provenance ? 'with-provenance' : '';
}

/** The id of a node or an edge end as text (ids are strings or numbers, §7.9). */
function nodeKey(v) {
  return typeof v === 'string' ? v : JSON.stringify(v);
}

/**
 * Draws a `neighbors` answer: the seeds in the middle (or on the circle, with several), the
 * other nodes on a circle in score order; node radius follows the score, edge width the weight.
 * An edge naming a node the answer does not list is left out and counted.
 */
function drawNeighbors(res, seeds) {
  const svg = $('graph-svg');
  const { width, height } = GRAPH_SIZE;
  svg.setAttribute('viewBox', `0 0 ${width} ${height}`);
  svg.removeAttribute('hidden');
  const nodes = res.nodes.filter((n) => n && n.id !== undefined);
  const keys = nodes.map((n) => nodeKey(n.id));
  const centre = seeds.length === 1 && keys.includes(seeds[0]) ? seeds[0] : null;
  const ring = keys.filter((k) => k !== centre);
  const pos = {};
  const cx = width / 2;
  const cy = height / 2;
  const r = Math.min(width, height) / 2 - 50;
  if (centre !== null) pos[centre] = [cx, cy];
  ring.forEach((k, i) => {
    const a = (2 * Math.PI * i) / Math.max(1, ring.length) - Math.PI / 2;
    pos[k] = [cx + r * Math.cos(a), cy + r * Math.sin(a)];
  });
  const scores = nodes.map((n) => (typeof n.score === 'number' ? n.score : 0));
  const top = Math.max(1e-9, ...scores.map(Math.abs));
  const weights = (res.edges || []).map((e) => (typeof e.weight === 'number' ? Math.abs(e.weight) : 0));
  const heaviest = Math.max(1e-9, ...weights);
  let dangling = 0;
  const lines = [];
  for (const e of res.edges || []) {
    const a = pos[nodeKey(e.src)];
    const b = pos[nodeKey(e.dst)];
    if (!a || !b) { dangling += 1; continue; }
    const w = typeof e.weight === 'number' ? e.weight : null;
    lines.push(el('line', {
      class: 'edge', x1: a[0], y1: a[1], x2: b[0], y2: b[1],
      'stroke-width': w === null ? 1 : (1 + (5 * Math.abs(w)) / heaviest).toFixed(2),
      'data-src': nodeKey(e.src), 'data-dst': nodeKey(e.dst), 'data-weight': w === null ? '' : w,
    }, el('title', {}, `${nodeKey(e.src)} — ${nodeKey(e.dst)}${w === null ? '' : ` (weight ${fmt(w, 3)})`}`)));
  }
  const circles = nodes.map((n, i) => {
    const k = keys[i];
    const [x, y] = pos[k];
    const radius = 6 + (14 * Math.abs(scores[i])) / top;
    const seed = seeds.includes(k);
    return el('g', { class: `node${seed ? ' seed' : ''}`, 'data-id': k, tabindex: 0, role: 'button', 'aria-label': `neighbors of ${k}`,
      onclick: () => expandNode(k), onkeydown: (ev) => { if (ev.key === 'Enter' || ev.key === ' ') { ev.preventDefault(); expandNode(k); } } },
    el('circle', { cx: x.toFixed(1), cy: y.toFixed(1), r: radius.toFixed(1) }),
    el('text', { x: x.toFixed(1), y: (y + radius + 13).toFixed(1), 'text-anchor': 'middle' }, k),
    el('title', {}, `${k}${typeof n.score === 'number' ? ` (score ${fmt(n.score)})` : ''}`));
  });
  svg.replaceChildren(el('g', { class: 'edges' }, lines), el('g', { class: 'nodes' }, circles));
  $('graph-nodes').replaceChildren(...nodes.map((n, i) => el('li', { 'data-id': keys[i] },
    el('button', { type: 'button', class: 'linklike', onclick: () => expandNode(keys[i]) }, keys[i]),
    typeof n.score === 'number' ? el('span', { class: 'muted' }, ` score ${fmt(n.score)}`) : null)));
  if (dangling) $('graph-meta').append(el('span', { class: 'note' }, `note: ${dangling} edge${dangling === 1 ? '' : 's'} name a node the answer does not list (not drawn)`));
}

/** Runs `neighbors` on one node (a click on the drawing or the list). */
async function expandNode(id) {
  if (!($('graph-op').querySelector('option[value="neighbors"]'))) return;
  $('graph-op').value = 'neighbors';
  $('graph-seed').value = id;
  await runGraph();
}

function renderCommunities(list) {
  $('graph-communities').replaceChildren(...list.map((c) => {
    const id = nodeKey(c.id);
    const level = Number.isInteger(c.level) ? c.level : null;
    return el('li', { class: 'community', 'data-id': id, 'data-level': level === null ? '' : level },
      el('div', { class: 'head' }, el('code', {}, id),
        el('span', { class: 'muted' }, level === null ? ' level ?' : ` level ${level}`),
        typeof c.score === 'number' ? el('span', { class: 'muted' }, ` · score ${fmt(c.score, 3)}`) : null),
      el('p', { class: 'snippet' }, typeof c.summary === 'string' ? c.summary : '(no summary)'));
  }));
}

/** `?panel=graph&op=...&q=...&seed=a,b&hops=2&level=0` reproduces a view. */
async function runGraphFromUrl(url) {
  if (!caps().graph) return;
  if (url.get('q')) $('graph-q').value = url.get('q');
  if (url.get('seed')) $('graph-seed').value = url.get('seed');
  if (url.get('hops')) $('graph-hops').value = url.get('hops');
  if (url.get('k')) $('graph-k').value = url.get('k');
  if (url.get('level')) $('graph-level').value = url.get('level');
  const op = url.get('op');
  if (op && GRAPH_OPS.concat(caps().graph.ops || []).includes(op)) $('graph-op').value = op;
  if (op) await runGraph();
}

$('graph-form').addEventListener('submit', (e) => { e.preventDefault(); runGraph(); });
