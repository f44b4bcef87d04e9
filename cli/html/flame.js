/* flame.js -- the flame graph (an icicle: the outermost frame on top) of
 * the holders at one moment, full width. A click on a frame zooms into it,
 * its ancestors stay drawn above it and named in the breadcrumb; library
 * frames (data.lib) can be folded away; a search highlights the frames
 * whose name holds the text and says what share of the bytes they hold. */
const ROW = 18;

class Flame {
  constructor(section, data) {
    this.d = data; this.sec = section;
    this.box = section.querySelector('.flame');
    this.crumbs = section.querySelector('.crumbs');
    this.shareEl = section.querySelector('.share');
    this.note = section.querySelector('.flame-note');
    this.select = section.querySelector('.moment');
    this.collapse = section.querySelector('.collapse');
    this.search = section.querySelector('.search');
    this.moments = this.listMoments();
    this.select.textContent = '';
    this.moments.forEach((m, i) => { const o = el('option', '', m.name); o.value = i; this.select.appendChild(o); });
    this.select.value = String(this.pick());
    this.select.addEventListener('change', () => this.build());
    this.collapse.addEventListener('change', () => this.build());
    this.search.addEventListener('input', () => this.find());
    this.build();
  }

  /* The moments there are holders for: at exit per device (from the live
   * allocations, which know their device), at exit, at the peak and at
   * each OOM (which the dump keeps by stack over all devices). */
  listMoments() {
    const d = this.d, out = [], live = d.live || {b: [], d: [], s: []};
    for (const dev of d.devices || []) {
      const by = new Map();
      for (let i = 0; i < live.b.length; i++)
        if (live.d[i] === dev.ordinal) by.set(live.s[i], (by.get(live.s[i]) || 0) + live.b[i]);
      const h = [];
      for (const [s, b] of by) h.push(s, b, 1);
      out.push({name: 'exit, device ' + dev.ordinal, h, key: 'exit'});
    }
    if (d.exit) out.push({name: 'exit, all devices', h: d.exit, key: 'exit'});
    if (d.peak) out.push({name: 'peak, all devices', h: d.peak, key: 'peak'});
    (d.ooms || []).forEach((o, i) => {
      if (o.holders) out.push({name: 'OOM #' + (i + 1) + ' (device ' + o.device + ', ' + (o.t / 1e9).toFixed(3) + ' s), all devices',
        h: o.holders, key: 'oom'});
    });
    if (!out.length) out.push({name: 'exit', h: [], key: 'exit'});
    return out;
  }

  pick() {
    const i = this.moments.findIndex(m => m.key === this.d.at);
    return i < 0 ? 0 : i;
  }

  label(f) { return f < 0 ? 'all' : this.d.fw[f]; }

  /* The tree of the chosen moment's holders from the outermost frame in,
   * library frames left out when folded. */
  build() {
    const m = this.moments[Number(this.select.value) || 0], d = this.d, h = m.h, fold = this.collapse.checked;
    const root = {f: -1, v: 0, kids: new Map(), up: null, depth: 0};
    let depth = 0;
    this.libShown = 0;
    for (let i = 0; i + 2 < h.length; i += 3) {
      const frames = stackFrames(d, h[i]), bytes = h[i + 1];
      let at = root;
      root.v += bytes;
      let kept = 0;
      for (let k = frames.length - 1; k >= 0; k--) {
        const f = frames[k];
        if (fold && d.lib[f] && !(k === 0 && kept === 0)) continue;
        kept++;
        let c = at.kids.get(f);
        if (!c) { c = {f, v: 0, kids: new Map(), up: at, depth: at.depth + 1}; at.kids.set(f, c); }
        c.v += bytes; at = c;
        if (at.depth > depth) depth = at.depth;
      }
    }
    this.root = root; this.zoom = root; this.depth = depth;
    this.note.textContent = m.name.endsWith('all devices') && (d.devices || []).length > 1
      ? 'the dump keeps these holders by stack over all devices' : '';
    this.draw();
  }

  draw() {
    const t0 = performance.now(), box = this.box, W = Math.max(box.clientWidth || 0, 480);
    box.textContent = '';
    const chain = [];
    for (let n = this.zoom; n; n = n.up) chain.unshift(n);
    box.style.height = (this.depth + 1) * ROW + 'px';
    this.nodes = [];
    chain.forEach((n, k) => { if (n !== this.zoom) this.cell(n, 0, W, k, true); });
    const walk = (n, x, w, k) => {
      if (w < 1) return;
      this.cell(n, x, w, k, false);
      let cx = x;
      const kids = [...n.kids.values()].sort((a, b) => b.v - a.v);
      for (const c of kids) { const cw = n.v ? w * c.v / n.v : 0; walk(c, cx, cw, k + 1); cx += cw; }
    };
    walk(this.zoom, 0, W, chain.length - 1);
    this.crumbs.textContent = '';
    chain.forEach((n, k) => {
      if (k) this.crumbs.appendChild(document.createTextNode(' \u203a '));
      const a = el('a', '', this.label(n.f));
      a.addEventListener('click', () => { this.zoom = n; this.draw(); });
      this.crumbs.appendChild(a);
    });
    this.find();
    this.drawMs = performance.now() - t0;
  }

  cell(n, x, w, k, ancestor) {
    const e = el('div', 'flame-node'), lib = n.f >= 0 && this.d.lib[n.f] === 1, name = this.label(n.f);
    if (lib) { e.classList.add('lib'); this.libShown++; }
    if (ancestor) e.classList.add('ancestor');
    e.style.left = x + 'px'; e.style.width = w + 'px'; e.style.top = k * ROW + 'px';
    e.style.background = n.f < 0 ? '#ddd' : frameColor(name, lib);
    const pct = this.root.v ? (100 * n.v / this.root.v).toFixed(1) : '0.0';
    e.textContent = name + ' (' + fmtBytes(n.v) + ', ' + pct + '%)';
    e.title = (n.f >= 0 ? this.d.fw[n.f] : 'all') + '\n' + fmtBytes(n.v) + ' (' + n.v + ' bytes), ' + pct + '%';
    e.addEventListener('click', ev => { ev.stopPropagation(); this.zoom = n; this.draw(); });
    e._node = n;
    this.box.appendChild(e);
    this.nodes.push(e);
  }

  /* Highlight the drawn frames whose name holds the search text; the share
   * counts each matching frame's bytes once (not again under a matching
   * ancestor), over the whole tree, not only what is drawn. */
  find() {
    const q = this.search.value.trim().toLowerCase();
    for (const e of this.nodes) e.classList.toggle('match', !!q && e._node.f >= 0 && this.label(e._node.f).toLowerCase().includes(q));
    if (!q) { this.shareEl.textContent = ''; this.matched = 0; return; }
    let bytes = 0, frames = 0;
    const walk = n => {
      if (n.f >= 0 && this.label(n.f).toLowerCase().includes(q)) { bytes += n.v; frames++; return; }
      for (const c of n.kids.values()) walk(c);
    };
    walk(this.root);
    this.matched = frames;
    this.shareEl.textContent = frames + ' matching frame' + (frames === 1 ? '' : 's') + ' hold ' + fmtBytes(bytes) +
      ' of ' + fmtBytes(this.root.v) + ' (' + (this.root.v ? (100 * bytes / this.root.v).toFixed(1) : '0.0') + '%)';
  }
}
