// fp16 audit dashboard: a plain ES module with no dependencies and no build step.
// TensorBoard's plugin_entry.html imports it in an iframe whose <base href> is this plugin's
// route prefix (data/plugin/fp16_audit/), so relative URLs reach the backend routes
// `runs`, `findings?run=`, `compare?run_a=&run_b=`, `sensitivity_runs` and `sensitivity?run=`
// (see plugin.py), and calls render().

const COLUMNS = [
  // key, cell text, sort value (numbers sort numerically, missing values last)
  {key: 'class', text: (f) => f.audit_class},
  {key: 'path', text: (f) => (f.function_path.length ? f.function_path.join(' > ') : '(graph)'),
   search: (f) => f.signatures.join(' ')},
  {key: 'node', text: (f) => f.node},
  // convs show their pass when not fprop; matmul-family sites (kind 'matmul') their op alone
  {key: 'op', text: (f) => (f.direction && !['fprop', 'matmul'].includes(f.direction)
    ? `${f.op} (${f.direction})` : f.op) + (f.xla ? ' [XLA]' : '')},
  {key: 'T', text: (f) => f.T ?? '?'},
  {key: 'accumulation', text: (f) => (f.Tacc ? `${f.accumulation} (Tacc=${f.Tacc})` : f.accumulation)},
  {key: 'reason', text: (f) => f.accumulation_reason},
  {key: 'flops', text: (f) => formatFlops(f.flops), sort: (f) => f.flops},
  // schema 2.0: flags are {code, severity, fields, message}; 1.x wrote the message alone
  {key: 'flags', text: (f) => f.flags.map((x) => (typeof x === 'string' ? x : x.message)).join(', ')},
  // The layer's row of the selected sensitivity run (AuditView.matchSensitivity), if any.
  {key: 'sensitivity', text: (f) => sensText(f.sensitivity),
   sort: (f) => (f.sensitivity ? f.sensitivity.max_rel ?? Infinity : null)},
];

// A chart row's label: the layer's Keras path and position when the result has them (results
// written before they existed give the name alone), and its class.
function sensLabel(l) {
  return `${l.position ? `#${l.position} ` : ''}${l.path || l.name} (${l.class_name})`;
}

function sensText(s) {
  if (!s) return '';
  return `max_rel ${formatRel(s.max_rel)} · rank ${s.rank}${s.in_fp16_set ? ' · fp16 set' : ''}`;
}

function formatRel(x) {
  if (x === null || x === undefined) return 'inf';  // to_json writes inf/NaN as null
  return x === 0 ? '0' : x.toExponential(2);
}

// The run directory above `run` ("." for a top-level run), as TensorBoard names runs.
function parentRun(run) {
  const i = run.lastIndexOf('/');
  return i < 0 ? (run === '.' ? null : '.') : run.slice(0, i);
}

// The sensitivity run shown with audit run `run`: the same run, else its parent directory's
// run (`tf-fp16-audit M --logdir D` writes run "audit" under D; `tf-fp16-sensitivity M
// --logdir D` writes run "." of D), else a sibling run in the same directory; else none.
function pairedSensitivityRun(run, sensRuns) {
  if (sensRuns.includes(run)) return run;
  const parent = parentRun(run);
  if (parent !== null && sensRuns.includes(parent)) return parent;
  const sibling = sensRuns.find((r) => r !== run && parentRun(r) === parent);
  return sibling ?? '';
}

export async function render() {
  const link = document.createElement('link');
  link.rel = 'stylesheet';
  link.href = 'style.css';
  document.head.appendChild(link);
  document.body.innerHTML = await fetchText('view.html');  // static markup shipped with the package
  const view = new AuditView(document.getElementById('fp16-audit'));
  await view.start();
}

async function fetchJson(url) {
  const response = await fetch(url);
  const body = await response.text();
  if (!response.ok) {
    // The backend answers bad requests and unreadable data as {"error": message}.
    let message = body;
    try {
      message = JSON.parse(body).error || body;
    } catch (e) {
      // not JSON: show the body as it is
    }
    throw new Error(`${url}: HTTP ${response.status}: ${message}`);
  }
  return JSON.parse(body);
}

async function fetchText(url) {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`${url}: HTTP ${response.status}`);
  return response.text();
}

function formatFlops(f) {
  if (f === null || f === undefined) return '?';
  for (const [unit, div] of [['T', 1e12], ['G', 1e9], ['M', 1e6], ['k', 1e3]]) {
    if (f >= div) return `${(f / div).toFixed(2)}${unit}`;
  }
  return String(f);
}

function percent(x) {
  return x === null || x === undefined ? '-' : `${(100 * x).toFixed(1)}%`;
}

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === 'className') node.className = v;
    else if (k === 'dataset') Object.assign(node.dataset, v);
    else node.setAttribute(k, v);
  }
  for (const child of children) node.append(child);
  return node;
}

function chip(cls) {
  return el('span', {className: `chip cls-${cls}`}, cls);
}

class AuditView {
  constructor(root) {
    this.root = root;
    this.$ = (id) => root.querySelector(`#${id}`);
    this.findings = [];
    this.sort = {key: null, dir: 1};
    this.tickets = {run: 0, compare: 0, sens: 0};  // only the latest request of each kind updates the view
    this.sens = null;
    this.auditRuns = new Set();
    this.sensRuns = [];
    this.standingMessage = '';
  }

  async start() {
    let index, sens;
    try {
      index = await fetchJson('runs');
    } catch (e) {
      return this.showMessage(`Could not load the audit runs: ${e.message}`);
    }
    try {
      sens = await fetchJson('sensitivity_runs');
    } catch (e) {
      sens = {runs: [], errors: [{error: e.message}]};
    }
    // Unreadable runs (audit or sensitivity) are named, and do not hide the readable ones.
    const auditErrors = (index.errors || []).map((x) => x.error).join('; ');
    const sensErrors = (sens.errors || []).map((x) => x.error).join('; ');
    this.standingMessage = [
      auditErrors ? `Audit runs not shown: ${auditErrors}` : '',
      sensErrors ? `Sensitivity results not shown: ${sensErrors}` : '',
    ].filter((m) => m).join(' ');
    this.classes = index.classes;
    for (const c of this.classes) {
      this.$('class-filter').append(el('option', {value: c.name}, c.name));
    }
    if (!index.runs.length && !sens.runs.length) {
      if (this.standingMessage) return this.showMessage(this.standingMessage);
      return this.showMessage('No fp16 audit data in this logdir. Write some with: tf-fp16-audit MODEL --logdir DIR ' +
        '(and tf-fp16-sensitivity MODEL --inputs X.npy --logdir DIR for the sensitivity chart)');
    }
    this.auditRuns = new Set(index.runs.map((r) => r.run));
    this.sensRuns = sens.runs.map((r) => r.run);
    for (const r of index.runs) {
      this.$('run').append(el('option', {value: r.run}, `${r.run} (${r.call_sites} call sites)`));
      this.$('compare-run').append(el('option', {value: r.run}, r.run));
    }
    // Sensitivity runs that no audit run pairs with get their own entry in the run list.
    const paired = new Set(index.runs.map((r) => pairedSensitivityRun(r.run, this.sensRuns)));
    for (const r of sens.runs) {
      if (!paired.has(r.run)) this.$('run').append(el('option', {value: r.run}, `${r.run} (sensitivity, ${r.layers} layers)`));
      this.$('sens-run').append(el('option', {value: r.run}, `${r.run} (${r.set_size} of ${r.layers} in the fp16 set)`));
    }
    this.$('run').addEventListener('change', () => this.loadRun());
    this.$('sens-run').addEventListener('change', () => this.loadSensitivity());
    this.$('compare-run').addEventListener('change', () => this.loadComparison());
    this.$('class-filter').addEventListener('change', () => this.renderRows());
    this.$('filter').addEventListener('input', () => this.renderRows());
    for (const th of this.root.querySelectorAll('#findings th')) {
      th.addEventListener('click', () => this.sortBy(th.dataset.key));
    }
    await this.loadRun();
  }

  clearMessage() {
    if (this.standingMessage) this.showMessage(this.standingMessage);
    else this.$('message').hidden = true;
  }

  showMessage(text) {
    const m = this.$('message');
    m.textContent = text;
    m.hidden = false;
  }

  async loadRun() {
    const run = this.$('run').value;
    const ticket = ++this.tickets.run;
    this.$('sens-run').value = this.auditRuns.has(run) ? pairedSensitivityRun(run, this.sensRuns) : run;
    if (!this.auditRuns.has(run)) {  // a sensitivity run alone
      this.clearMessage();
      this.findings = [];
      for (const id of ['overview', 'sites', 'comparison']) this.$(id).hidden = true;
      return this.loadSensitivity();
    }
    let data;
    try {
      data = await fetchJson(`findings?run=${encodeURIComponent(run)}`);
    } catch (e) {
      return this.showMessage(`Could not load run ${run}: ${e.message}`);
    }
    if (ticket !== this.tickets.run) return;
    this.clearMessage();
    this.findings = data.findings;
    this.renderOverview(data);
    this.matchSensitivity();
    this.renderRows();
    await Promise.all([this.loadComparison(), this.loadSensitivity()]);
  }

  async loadSensitivity() {
    const run = this.$('sens-run').value;
    const ticket = ++this.tickets.sens;
    if (!run) {
      this.sens = null;
    } else {
      let data;
      try {
        data = await fetchJson(`sensitivity?run=${encodeURIComponent(run)}`);
      } catch (e) {
        return this.showMessage(`Could not load the sensitivity results of ${run}: ${e.message}`);
      }
      if (ticket !== this.tickets.sens) return;
      this.sens = {run, ...data.result};
    }
    this.renderSensitivity();
    this.matchSensitivity();
    if (this.auditRuns.has(this.$('run').value)) this.renderRows();
  }

  // Attaches to each finding the sensitivity row of its Keras layer: the last component of
  // the node name that is a layer name, else one that is with Keras' "_<n>" suffix removed
  // ("tiny_1/stem_1/convolution" -> "stem").
  matchSensitivity() {
    const byName = new Map((this.sens ? this.sens.layers : []).map((l) => [l.name, l]));
    for (const f of this.findings) {
      const parts = f.node.split('/').reverse();
      const hit = parts.find((p) => byName.has(p)) ?? parts.map((p) => p.replace(/_\d+$/, '')).find((p) => byName.has(p));
      f.sensitivity = hit === undefined ? null : byName.get(hit);
    }
    this.root.querySelector('#findings').classList.toggle('no-sens', !this.sens);
  }

  // Horizontal bars, one per layer by rank (rank 1, the most sensitive, on top), length the
  // max_rel on a log10 axis; fp16-set layers in the fp16-accumulate colour; the tolerance as a
  // dashed line.
  renderSensitivity() {
    const section = this.$('sensitivity');
    const svg = this.$('sens-chart');
    svg.replaceChildren();
    const s = this.sens;
    if (!s) {
      section.hidden = true;
      return;
    }
    const layers = s.layers.slice().sort((a, b) => a.rank - b.rank);
    const metric = s.baseline_metric === null || s.baseline_metric === undefined ? '' :
      `; metric ${s.baseline_metric.toFixed(4)} → ${s.set_metric.toFixed(4)}`;
    this.$('sens-title').textContent = `Sensitivity to fp16 accumulation: run ${s.run}`;
    this.$('sens-note').textContent =
      `Each layer switched alone to fp16 accumulation (others ${s.others}), output error max_rel = ` +
      `max|a−b| / max|a| on ${s.num_samples} samples. fp16 set (${s.search}): ${s.fp16_set.length} of ` +
      `${layers.length} layers within tolerance ${s.tolerance} (set max_rel ${formatRel(s.set_max_rel)})${metric}.`;
    section.hidden = false;
    const ns = svg.namespaceURI;
    const node = (tag, attrs, text) => {
      const n = document.createElementNS(ns, tag);
      for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, v);
      if (text !== undefined) n.textContent = text;
      return n;
    };
    const finite = layers.map((l) => l.max_rel).filter((v) => v !== null && v > 0);
    if (s.tolerance) finite.push(s.tolerance);
    let lo = Math.floor(Math.log10(finite.length ? Math.min(...finite) : 1e-4));
    let hi = Math.ceil(Math.log10(finite.length ? Math.max(...finite) : 1));
    if (hi <= lo) hi = lo + 1;
    const rowH = 20, top = 22, labelW = Math.min(320, 12 + 7 * Math.max(...layers.map((l) => sensLabel(l).length)));
    const width = Math.max(480, section.clientWidth || 900), plotW = width - labelW - 90;
    const height = top + rowH * layers.length + 6;
    svg.setAttribute('width', width);
    svg.setAttribute('height', height);
    svg.setAttribute('aria-label', `max_rel per layer, log scale from 1e${lo} to 1e${hi}`);
    const x = (v) => labelW + plotW * (Math.log10(v) - lo) / (hi - lo);
    for (let d = lo; d <= hi; d++) {
      svg.append(node('line', {class: 'grid', x1: x(10 ** d), x2: x(10 ** d), y1: top - 4, y2: height - 4}));
      svg.append(node('text', {class: 'tick', x: x(10 ** d), y: top - 8, 'text-anchor': 'middle'}, `1e${d}`));
    }
    layers.forEach((l, i) => {
      const y = top + i * rowH;
      const v = l.max_rel;
      const w = v === null ? plotW : v > 0 ? Math.max(1, x(Math.max(v, 10 ** lo)) - labelW) : 0;
      svg.append(node('text', {class: 'label', x: labelW - 8, y: y + rowH / 2 + 4, 'text-anchor': 'end'}, sensLabel(l)));
      const bar = node('rect', {class: `sens-bar ${l.in_fp16_set ? 'cls-fp16-accumulate' : 'sens-out'}`, x: labelW, y: y + 3,
        width: w, height: rowH - 6, 'data-layer': l.name, 'data-rank': l.rank, 'data-in-set': l.in_fp16_set});
      const change = l.metric_change === null || l.metric_change === undefined ? '' : `, metric change ${l.metric_change.toFixed(4)}`;
      bar.append(node('title', {}, `rank ${l.rank}: ${l.path || l.name}${l.position ? ` (position ${l.position} in the model)` : ''} max_rel ${formatRel(v)}, mean_rel ${formatRel(l.mean_rel)}${change}` +
        (l.in_fp16_set ? ' (in the fp16 set)' : '')));
      svg.append(bar);
      svg.append(node('text', {class: 'value', x: labelW + w + 4, y: y + rowH / 2 + 4}, formatRel(v)));
    });
    if (s.tolerance) {
      svg.append(node('line', {id: 'sens-tolerance', class: 'tolerance', x1: x(s.tolerance), x2: x(s.tolerance), y1: top - 4, y2: height - 2}));
    }
  }

  renderOverview(data) {
    const rep = data.report;
    const ctx = rep.context || {};
    this.$('source').textContent =
      `${data.run}: ${rep.source} (${rep.source_format}), device ${ctx.device ?? '?'}, ` +
      `audit schema ${rep.schema_version}, step ${data.step}`;
    const s = rep.summary;
    const bar = this.$('flop-bar');
    const countBar = this.$('count-bar');
    const legend = this.$('legend');
    bar.replaceChildren();
    countBar.replaceChildren();
    legend.replaceChildren();
    const segment = (cls, share, what) => {
      const seg = el('div', {className: `seg cls-${cls}`, dataset: {class: cls}, title: `${cls}: ${percent(share)} of ${what}`});
      seg.style.width = `${100 * share}%`;
      return seg;
    };
    for (const c of s.classes) {
      if (c.flop_share) bar.append(segment(c.audit_class, c.flop_share, 'known conv FLOPs'));
      if (c.count) countBar.append(segment(c.audit_class, c.count / s.call_sites, 'call sites'));
      const desc = (this.classes.find((k) => k.name === c.audit_class) || {}).description || '';
      legend.append(el('li', {dataset: {class: c.audit_class}},
        el('span', {className: `swatch cls-${c.audit_class}`}),
        `${c.audit_class} — ${desc}: ${c.count} call site${c.count === 1 ? '' : 's'}, ${percent(c.flop_share)} of FLOPs`));
    }
    bar.setAttribute('aria-label', 'FLOP shares: ' + s.classes.map((c) => `${c.audit_class} ${percent(c.flop_share)}`).join(', '));
    countBar.setAttribute('aria-label', 'call-site shares: ' + s.classes.map((c) => `${c.audit_class} ${c.count}`).join(', '));
    this.$('flops-note').textContent =
      `FLOPs known for ${s.flops_known} of ${s.call_sites} call sites (${formatFlops(s.total_flops)} FLOPs); ` +
      `shares are of the known FLOPs. fp16 share (by ${s.share_basis}): ${percent(s.fp16_share)}, ` +
      `fp16-accumulate share: ${percent(s.fp16_accumulate_share)}.`;
    this.$('overview').hidden = false;
  }

  visibleFindings() {
    const cls = this.$('class-filter').value;
    const terms = this.$('filter').value.toLowerCase().split(/\s+/).filter(Boolean);
    let rows = this.findings.filter((f) => !cls || f.audit_class === cls);
    if (terms.length) {
      rows = rows.filter((f) => {
        const hay = COLUMNS.map((c) => c.text(f) + (c.search ? ' ' + c.search(f) : '')).join(' ').toLowerCase();
        return terms.every((t) => hay.includes(t));
      });
    }
    const col = COLUMNS.find((c) => c.key === this.sort.key);
    if (col) {
      const value = col.sort || col.text;
      const dir = this.sort.dir;
      rows = rows.slice().sort((a, b) => {
        const va = value(a), vb = value(b);
        if (va === null || va === undefined) return vb === null || vb === undefined ? 0 : 1;
        if (vb === null || vb === undefined) return -1;
        return (typeof va === 'number' ? va - vb : String(va).localeCompare(String(vb))) * dir;
      });
    }
    return rows;
  }

  sortBy(key) {
    this.sort = {key, dir: this.sort.key === key ? -this.sort.dir : 1};
    for (const th of this.root.querySelectorAll('#findings th')) {
      if (th.dataset.key === key) th.setAttribute('aria-sort', this.sort.dir > 0 ? 'ascending' : 'descending');
      else th.removeAttribute('aria-sort');
    }
    this.renderRows();
  }

  renderRows() {
    const rows = this.visibleFindings();
    const body = this.root.querySelector('#findings tbody');
    body.replaceChildren(...rows.map((f) => {
      const tr = el('tr', {className: `cls-${f.audit_class}`, dataset: {class: f.audit_class, siteId: f.site_id}});
      for (const c of COLUMNS) {
        const td = el('td', {className: c.key === 'flops' ? 'num' : c.key});
        if (c.key === 'class') td.append(chip(f.audit_class));
        else if (c.key === 'sensitivity') {
          td.textContent = c.text(f);
          if (f.sensitivity) td.classList.add(f.sensitivity.in_fp16_set ? 'in-set' : 'out-set');
        }
        else if (c.key === 'flags') td.append(...f.flags.map((x) => el('span', {className: 'flag'}, x)));
        else if (c.key === 'path' && f.signatures.length) {
          td.append(el('span', {className: 'sig'}, `signature ${f.signatures.join(', ')}`), c.text(f));
        }
        else td.textContent = c.text(f);
        if (c.key === 'node') td.title = 'graph node name (search it in the Graphs dashboard)';
        if (c.key === 'flops' && f.flops_note) td.title = f.flops_note;
        tr.append(td);
      }
      return tr;
    }));
    this.$('row-count').textContent = `(${rows.length} of ${this.findings.length} shown)`;
    this.$('sites').hidden = false;
  }

  async loadComparison() {
    const a = this.$('run').value;
    const b = this.$('compare-run').value;
    const section = this.$('comparison');
    if (!b || b === a) {
      ++this.tickets.compare;
      section.hidden = true;
      return;
    }
    const ticket = ++this.tickets.compare;
    let cmp;
    try {
      cmp = await fetchJson(`compare?run_a=${encodeURIComponent(a)}&run_b=${encodeURIComponent(b)}`);
    } catch (e) {
      return this.showMessage(`Could not compare ${a} with ${b}: ${e.message}`);
    }
    if (ticket !== this.tickets.compare) return;
    this.$('comparison-title').textContent =
      `${cmp.changed.length} conv${cmp.changed.length === 1 ? '' : 's'} changed class from ${a} (A) to ${b} (B)`;
    this.$('comparison-counts').textContent =
      `${cmp.unchanged} matched with the same class; ${cmp.only_a.length} only in A, ${cmp.only_b.length} only in B.`;
    const body = this.root.querySelector('#changes tbody');
    body.replaceChildren(...cmp.changed.map((c) => el('tr', {dataset: {key: c.key, classA: c.a.audit_class, classB: c.b.audit_class}},
      el('td', {className: 'node'}, c.key),
      el('td', {}, chip(c.a.audit_class), ' → ', chip(c.b.audit_class)),
      el('td', {}, `${c.a.accumulation} → ${c.b.accumulation}`),
      el('td', {className: 'node'}, c.a.node),
      el('td', {className: 'node'}, c.b.node))));
    section.hidden = false;
  }
}
